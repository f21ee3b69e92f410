"""Python garbage-collection pauses in the window (live runs; collect/gcpauses.py): section ``gc_pauses``,
finding ``python_gc``.

Rules (exact, over the window):
- a pause is a SpanKind.GC_PAUSE span (one collection of at least ``record_min_ms``, recorded on the
  thread that ran it); its time in the window is the span clipped to the window.  CPython runs one
  collection at a time, holding the GIL: pauses never overlap, their sum is the wall time every Python
  thread of the process stood still, and ``pct_of_window`` is that sum in % of the window.
- ``longest_ms``: the longest pause overlapping the window (its whole duration).
- ``by_generation`` / ``by_thread``: the same numbers per generation (0-2) and per thread (its track's name,
  as the threads table names it).
- ``run``: the collector's whole-run counters (every collection, short ones included, all threads) from
  ``meta.collection`` (``gc_*`` keys): what a collection costs on average and how often each generation runs.
The section is None unless the collector ran (``meta.collection.gc_pauses``) or the trace holds pauses.
"""
from __future__ import annotations

import json

import numpy as np

from .. import thresholds as T
from ..trace.kinds import SpanKind
from ..trace.model import Trace
from .evidence import Evidence
from .select import overlap

TOP_PAUSES = 5


def _ints(v) -> list | None:
    if not isinstance(v, list) or len(v) != 3:
        return None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in v):
        return None
    return [int(x) for x in v]


def _run(coll: dict) -> dict | None:
    """meta.collection's gc_* keys (collect/gcpauses.py GcPauses.meta), checked: they come from a file."""
    cnt, tot = _ints(coll.get("gc_collections")), _ints(coll.get("gc_total_ns"))
    if cnt is None or tot is None:
        return None
    thr = coll.get("gc_thresholds")
    nr, fz, en = coll.get("gc_not_recorded"), coll.get("gc_frozen"), coll.get("gc_auto_enabled")
    return {"collections": cnt, "total_ms": [t / 1e6 for t in tot],
            "mean_us": [(t / c / 1e3) if c else None for t, c in zip(tot, cnt)],
            "not_recorded": int(nr) if isinstance(nr, int) and not isinstance(nr, bool) and nr >= 0 else 0,
            "thresholds": [int(x) for x in thr] if isinstance(thr, list) and all(
                isinstance(x, int) and not isinstance(x, bool) for x in thr) else None,
            "frozen": int(fz) if isinstance(fz, int) and not isinstance(fz, bool) else None,
            "gc_enabled": en if isinstance(en, bool) else None}


def gc_pauses(trace: Trace, window) -> dict | None:
    """The section (see the module docstring)."""
    s = trace.spans
    coll = trace.meta.get("collection") if isinstance(trace.meta.get("collection"), dict) else {}
    on = coll.get("gc_pauses") is True
    m = s.kind == SpanKind.GC_PAUSE
    if not on and not m.any():
        return None
    lo, hi = int(window.start_ns), int(window.end_ns)
    win_ns = max(hi - lo, 1)
    idx = np.flatnonzero(m & overlap(s.start_ns, s.end_ns, window) & (s.end_ns >= s.start_ns))
    st, en = s.start_ns[idx], s.end_ns[idx]
    dur = (en - st).astype(np.int64)
    clipped = (np.minimum(en, hi) - np.maximum(st, lo)).astype(np.int64)
    # generation from the span's name ("gc gen<g>"): one lookup per distinct name
    names = trace.strings.as_list()
    uname, inv = np.unique(s.name[idx], return_inverse=True)
    gen_of = np.array([_gen(names[int(u)]) for u in uname.tolist()], dtype=np.int64)
    gen = gen_of[inv.reshape(-1)] if len(idx) else np.zeros(0, dtype=np.int64)
    total_ns = int(clipped.sum())
    by_gen = []
    for g in range(3):
        k = gen == g
        if k.any():
            by_gen.append({"generation": g, "count": int(k.sum()), "total_ms": float(clipped[k].sum()) / 1e6,
                           "longest_ms": float(dur[k].max()) / 1e6})
    by_thread = []
    trk = s.track[idx].astype(np.int64)
    if len(idx):
        ut, tinv = np.unique(trk, return_inverse=True)
        tinv = tinv.reshape(-1)
        tsum = np.bincount(tinv, weights=clipped.astype(np.float64), minlength=len(ut))
        tcnt = np.bincount(tinv, minlength=len(ut))
        tmax = np.zeros(len(ut), dtype=np.int64)
        np.maximum.at(tmax, tinv, dur)
        for j in np.argsort(-tsum, kind="stable").tolist():
            t = int(ut[j])
            by_thread.append({"thread": trace.track_label(t), "tid": int(trace.tracks.tid[t]), "count": int(tcnt[j]),
                              "total_ms": float(tsum[j]) / 1e6, "pct_of_window": 100.0 * float(tsum[j]) / win_ns,
                              "longest_ms": float(tmax[j]) / 1e6})
    longest = []
    for j in np.argsort(-dur, kind="stable")[:TOP_PAUSES].tolist():
        i = int(idx[j])
        det = _detail(names, int(s.detail[i]))
        longest.append({"thread": trace.track_label(int(s.track[i])), "generation": int(gen[j]),
                        "ms": float(dur[j]) / 1e6, "offset_ms": float(st[j] - lo) / 1e6,
                        "collected": det.get("collected"), "uncollectable": det.get("uncollectable")})
    top = longest[0] if longest else None
    rec_min = coll.get("gc_record_min_ns")
    return {"count": int(len(idx)), "total_ms": total_ns / 1e6, "pct_of_window": 100.0 * total_ns / win_ns,
            "longest_ms": top["ms"] if top else 0.0, "longest_generation": top["generation"] if top else None,
            "longest_thread": top["thread"] if top else None,
            "record_min_ms": float(rec_min) / 1e6 if isinstance(rec_min, (int, float)) and not isinstance(rec_min, bool) else None,
            "by_generation": by_gen, "by_thread": by_thread, "longest": longest, "run": _run(coll),
            "basis": ("collections of at least record_min_ms, timed by a gc.callbacks entry (start to stop, "
                      "perf_counter_ns) on the thread that ran them; CPython holds the GIL for a whole collection, "
                      "so every Python thread of the process is paused meanwhile")}


def _gen(name: str) -> int:
    try:
        g = int(name.rsplit("gen", 1)[1])
    except (IndexError, ValueError):
        return 2
    return g if 0 <= g <= 2 else 2


def _detail(names: list, d: int) -> dict:
    if d < 0:
        return {}
    try:
        v = json.loads(names[d])
    except (ValueError, IndexError):
        return {}
    if not isinstance(v, dict):
        return {}
    return {k: v[k] for k in ("collected", "uncollectable") if isinstance(v.get(k), int) and not isinstance(v.get(k), bool)}


def gc_table(sec: dict) -> dict:
    """tables/gc_pauses.csv: one row per thread."""
    return {"columns": ["thread", "tid", "count", "total_ms", "pct_of_window", "longest_ms"],
            "rows": [[r["thread"], r["tid"], r["count"], round(r["total_ms"], 6), round(r["pct_of_window"], 4),
                      round(r["longest_ms"], 6)] for r in sec["by_thread"]]}


def python_gc(res: dict, found: dict) -> dict | None:
    """Garbage-collection pauses fill >= GC_PAUSE_LOW_PCT of the window, or one lasts >= GC_PAUSE_LONGEST_MS."""
    g = res.get("gc_pauses") or {}
    if not g.get("count"):
        return None
    pct, longest = float(g["pct_of_window"]), float(g["longest_ms"])
    if pct < T.GC_PAUSE_LOW_PCT and longest < T.GC_PAUSE_LONGEST_MS:
        return None
    e = Evidence(res)
    n, ms, _, _, gen = e.cite_all("gc_pauses", pauses="count", gc_ms="total_ms", gc_pct=("pct_of_window", 2),
                                  longest_ms="longest_ms", longest_generation="longest_generation")
    thread = e.cite("culprit_thread", "gc_pauses.by_thread[0].thread")
    e.cite("culprit_thread_ms", "gc_pauses.by_thread[0].total_ms")
    e.cite("longest_thread", "gc_pauses.longest_thread")
    rec = g.get("record_min_ms")
    gens = ", ".join(f"{r['count']} of generation {r['generation']} ({r['total_ms']:,.1f} ms)" for r in g["by_generation"])
    txt = [f"Python garbage collection paused the inference thread (every Python thread of the process) {n} time(s) for {ms:,.1f} ms in all ({pct:.1f}% of the window), "
           f"longest {longest:,.1f} ms (generation {gen}, on {g['longest_thread']})"
           + (f"; collections of at least {rec:g} ms counted" if rec else "") + f": {gens}.",
           "CPython holds the GIL for a whole collection: every Python thread of the process, the inference thread "
           f"included, stands still meanwhile (most pause time ran on {thread}: {g['by_thread'][0]['total_ms']:,.1f} ms; "
           "table gc_pauses.by_thread)."]
    run = g.get("run") or {}
    cnt, mean = run.get("collections"), run.get("mean_us")
    if cnt and mean:
        txt.append("Whole run, every collection: " + ", ".join(
            f"gen{i} {c:,} x {m:,.0f} us" if m is not None else f"gen{i} {c:,}" for i, (c, m) in enumerate(zip(cnt, mean)))
            + (f"; gc thresholds {tuple(run['thresholds'])}" if run.get("thresholds") else "")
            + (f"; {run['frozen']:,} objects frozen" if run.get("frozen") is not None else "") + ".")
    frozen = run.get("frozen")
    sugg = ("Call gc.freeze() once the model is loaded and warmed up (before serving): the long-lived objects of the "
            "model, tokenizer and framework then leave the collector's generations and a full collection no longer walks "
            "them" + (" (nothing is frozen now)" if frozen == 0 else "") + "; raise the collection thresholds "
            "(gc.set_threshold(50_000, 50, 100) or similar: fewer, cheaper young collections, rarer full ones); avoid "
            "reference cycles in per-request objects (closures holding self, parent<->child links, exceptions kept with "
            "their tracebacks) so reference counting frees them without the collector; or, for a request loop, "
            f"gc.disable() and call gc.collect() between requests, where a pause costs no latency. Most pause time "
            f"ran on thread {thread}.")
    sev = "medium" if pct >= T.GC_PAUSE_MEDIUM_PCT or longest >= T.GC_PAUSE_LONGEST_MEDIUM_MS else "low"
    return e.finding("python_gc", sev, "Python garbage collection pauses the inference thread", txt, sugg)
