"""Planted: Python garbage-collection pauses in a request loop.  A long-lived object graph (a model's
vocabulary and caches stand-in: 500k small containers) is built at start-up; each request builds a
per-request structure of ~40k containers that lives until the request ends (so it survives the young
collections and counts towards a full one).  Every few requests CPython runs a full (generation-2)
collection, which walks the whole long-lived graph with the GIL held.

Truth (self-timed, no inferscope): every collection's duration from a ``gc.callbacks`` entry of the
program's own, printed at exit as the JSON line ``{"gc_truth": {...}}`` (totals, and each collection of at
least 0.5 ms as [generation, ms]); the phases (``_truth``) say the requests are user code.

``--fixed`` (or ZOO_FIXED=1; bench/bench_whatif.py): the python_gc finding's suggestion applied -
``gc.freeze()`` once the long-lived graph is built, so a full collection no longer walks it.  Same work.
"""
import gc
import json
import os
import sys
import time

from _truth import gap, phase
from inferscope import scope

FIXED = "--fixed" in sys.argv or os.environ.get("ZOO_FIXED") == "1"
ITERS = int(os.environ.get("ZOO_ITERS", "30"))

_pauses: list[int] = []
_gens: list[int] = []
_t0 = [0]


def _cb(event, info):
    if event == "start":
        _t0[0] = time.perf_counter_ns()
    else:
        _pauses.append(time.perf_counter_ns() - _t0[0])
        _gens.append(info["generation"])


def build_model(n: int = 250_000) -> list:
    """The long-lived graph: small dicts and lists that stay alive for the whole run."""
    return [{"id": i, "pieces": [i, i + 1]} for i in range(n)]


def handle(req: int, model: list) -> int:
    """One request: a per-request structure of ~40k containers alive until the request ends, then a
    little work over it."""
    items = [[req, j, {"k": j}] for j in range(20_000)]
    s = 0
    for it in items:
        s += it[1] + len(model[it[1]]["pieces"])
    return s


gc.callbacks.append(_cb)
model = build_model()
if FIXED:
    gc.freeze()                     # the suggestion: the long-lived graph leaves the collector's generations
gap("cpu_preprocessing/user_code")
n_before = len(_pauses)
t_start = time.perf_counter_ns()
with scope("serve"):
    for r in range(ITERS):
        with phase("request", expect="cpu_preprocessing/user_code"):
            handle(r, model)
wall_ns = time.perf_counter_ns() - t_start
served = _pauses[n_before:]
full = [p for p, g in zip(served, _gens[n_before:]) if g == 2]
print(json.dumps({"gc_truth": {"collections": len(served), "total_ms": sum(served) / 1e6,
                               "longest_ms": max(served, default=0) / 1e6,
                               "full_collections": len(full), "full_ms": sum(full) / 1e6,
                               "pauses": [[g, p / 1e6] for p, g in zip(served, _gens[n_before:]) if p >= 500_000], "serve_ms": wall_ns / 1e6,
                               "fixed": FIXED}}), flush=True)
