"""Derive a multi-rank capture of one job from ONE real single-rank Kineto trace (there is no real
multi-rank capture in ../shared/traces): N copies with ``distributedInfo.rank`` rewritten, and on one rank a
planted delay - a CPU op of ``delay_us`` at the start of every ``ProfilerStep#`` on the step's thread, with
everything after it on the timeline shifted by the same amount (enclosing CPU spans are stretched, GPU
activity that began before it is left where it was) - or one kernel stretched (``stretch_kernels``)."""
from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"}


def load(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def plant_delay(doc: dict, op_name: str, delay_us: float) -> int:
    """Insert ``op_name`` (cat cpu_op, delay_us long) at the start of every CPU ProfilerStep; returns how many."""
    ev = doc["traceEvents"]
    steps = sorted((e for e in ev if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")),
                   key=lambda e: -float(e["ts"]))
    for st in steps:                      # last first: an earlier step's shift then moves the later insertions too
        p = float(st["ts"])
        for e in ev:
            if "ts" not in e or e is st:
                continue
            ts = float(e["ts"])
            if ts >= p:
                e["ts"] = ts + delay_us
            elif e.get("ph") == "X" and e.get("cat") not in GPU_CATS and ts + float(e.get("dur", 0)) > p:
                e["dur"] = float(e["dur"]) + delay_us
        st["dur"] = float(st["dur"]) + delay_us
        ev.append({"ph": "X", "cat": "cpu_op", "name": op_name, "pid": st["pid"], "tid": st["tid"], "ts": p,
                   "dur": delay_us, "args": {}})
    return len(steps)


def write_ranks(src: Path, out: Path, world_size: int, slow_rank: int | None, op_name: str, delay_us: float,
                extra_info: dict | None = None, devices_name: str | None = None, prefix: str = "rank",
                stretch: tuple[str, float] | None = None, distributed_info: bool = True,
                late: tuple[str, float] | None = None, planted: dict | None = None) -> list[Path]:
    """``stretch=(kernel name part, extra us)``: the slow rank's kernels are stretched (stretch_kernels)
    instead of a CPU op planted; ``late=(collective name part, extra us)``: the slow rank arrives late at those
    collectives and the others wait (plant_late_arrival; ``planted["delayed"]``: how many collectives);
    ``distributed_info=False`` drops distributedInfo (the
    rank is then only in the file name)."""
    base = load(src)
    slow_doc = None
    if late:
        slow_doc = copy.deepcopy(base)
        n = plant_late_arrival(slow_doc, base, *late)
        assert n >= 1
        if planted is not None:
            planted["delayed"] = n
        slow_doc.pop("distributedInfo", None)
    info = {**(base.pop("distributedInfo", None) or {}), "backend": "nccl", **(extra_info or {})}
    if devices_name is not None:
        for d in base.get("deviceProperties") or []:
            d["name"] = devices_name
    # the ranks differ only in distributedInfo (and the slow one): the rest is serialised once
    body = json.dumps(base)
    assert body.startswith("{") and len(body) > 2
    paths = []
    for r in range(world_size):
        if r == slow_rank and slow_doc is not None:
            text = json.dumps(slow_doc)
        elif r == slow_rank:
            doc = copy.deepcopy(base)
            assert (stretch_kernels(doc, *stretch) if stretch else plant_delay(doc, op_name, delay_us)) >= 1
            text = json.dumps(doc)
        else:
            text = body
        if distributed_info:
            text = '{"distributedInfo": ' + json.dumps({**info, "rank": r, "world_size": world_size}) + ", " + text[1:]
        p = out / f"{prefix}{r}.json.gz"
        with gzip.open(p, "wt", compresslevel=1) as f:
            f.write(text)
        paths.append(p)
    return paths


def stretch_kernels(doc: dict, name_part: str, extra_us: float) -> int:
    """Make every GPU kernel whose name contains ``name_part`` ``extra_us`` longer, as if this rank's GPU were
    slower at it: time is inserted at each such kernel's end - everything starting at or after that point
    (host and device) moves later by ``extra_us``, host spans running across it (the step, the op or sync
    waiting for the GPU) grow by it, other GPU activity running across it is left as it was.  Returns how
    many kernels were stretched."""
    ev = doc["traceEvents"]
    return _stretch(ev, [e for e in ev if e.get("cat") == "kernel" and name_part in str(e.get("name", ""))], extra_us)


def _stretch(ev: list, kernels: list, extra_us: float) -> int:
    """stretch_kernels on the given kernel events."""
    hits = sorted({id(k): k for k in kernels}.values(), key=lambda e: -(float(e["ts"]) + float(e["dur"])))
    for k in hits:                        # last first: inserting time later never moves an earlier insertion point
        p = float(k["ts"]) + float(k["dur"])
        for e in ev:
            if "ts" not in e or e is k:
                continue
            ts = float(e["ts"])
            if ts >= p:
                e["ts"] = ts + extra_us
            elif e.get("ph") == "X" and e.get("cat") not in GPU_CATS and ts + float(e.get("dur", 0)) > p:
                e["dur"] = float(e["dur"]) + extra_us
        k["dur"] = float(k["dur"]) + extra_us
    return len(hits)


def plant_late_arrival(doc_slow: dict, doc_others: dict, coll_part: str, extra_us: float) -> int:
    """One rank arrives ``extra_us`` late at the collective kernels whose name contains ``coll_part``: on the slow
    rank the compute kernel that ends last before such a collective starts is stretched by ``extra_us`` (so the
    collective starts that much later); on the other ranks that collective is stretched by ``extra_us`` (it waits
    for the slow rank, then ends when it would have there).  Both timelines agree again after the collective.
    Collectives that follow one another with no compute kernel ending between them are delayed once (the first
    of them; the rest move with it on every rank).  Returns the number of delayed collectives."""
    ev = doc_slow["traceEvents"]
    kern = sorted((e for e in ev if e.get("cat") == "kernel"), key=lambda e: float(e["ts"]))
    compute = [e for e in kern if "nccl" not in str(e.get("name", "")).lower()]
    picked: dict[int, tuple[int, dict]] = {}          # id(compute kernel) -> (index of the first collective, it)
    for i, c in enumerate(e for e in kern if coll_part in str(e.get("name", ""))):
        ends = [e for e in compute if float(e["ts"]) + float(e["dur"]) <= float(c["ts"])]
        b = max(ends, key=lambda e: float(e["ts"]) + float(e["dur"]))
        picked.setdefault(id(b), (i, b))
    _stretch(ev, [b for _, b in picked.values()], extra_us)
    first = {i for i, _ in picked.values()}
    ev2 = doc_others["traceEvents"]
    colls = [e for e in sorted((e for e in ev2 if e.get("cat") == "kernel"), key=lambda e: float(e["ts"]))
             if coll_part in str(e.get("name", ""))]
    return _stretch(ev2, [c for i, c in enumerate(colls) if i in first], extra_us)


def write_with_info(src: Path, path: Path, info: dict | None, device_names: list[str] | None = None) -> Path:
    """A copy of ``src`` with ``distributedInfo`` replaced by ``info`` (None: removed) and, when given, the
    ``deviceProperties`` names replaced by ``device_names`` (one per listed device, in order)."""
    doc = load(src)
    doc.pop("distributedInfo", None)
    if info is not None:
        doc["distributedInfo"] = info
    if device_names is not None:
        for d, n in zip(doc.get("deviceProperties") or [], device_names, strict=True):
            d["name"] = n
    with gzip.open(path, "wt", compresslevel=1) as f:
        json.dump(doc, f)
    return path
