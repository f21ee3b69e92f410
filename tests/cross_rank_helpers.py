"""Derive a multi-rank capture of one job from ONE real single-rank Kineto trace (there is no real
multi-rank capture in ../shared/traces): N copies with ``distributedInfo.rank`` rewritten, and on one rank a
planted delay - a CPU op of ``delay_us`` at the start of every ``ProfilerStep#`` on the step's thread, with
everything after it on the timeline shifted by the same amount (enclosing CPU spans are stretched, GPU
activity that began before it is left where it was)."""
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
                extra_info: dict | None = None, devices_name: str | None = None, prefix: str = "rank") -> list[Path]:
    base = load(src)
    paths = []
    for r in range(world_size):
        doc = copy.deepcopy(base)
        doc["distributedInfo"] = {**(doc.get("distributedInfo") or {}), "backend": "nccl", **(extra_info or {}),
                                  "rank": r, "world_size": world_size}
        if devices_name is not None:
            for d in doc.get("deviceProperties") or []:
                d["name"] = devices_name
        if r == slow_rank:
            assert plant_delay(doc, op_name, delay_us) >= 1
        p = out / f"{prefix}{r}.json.gz"
        with gzip.open(p, "wt", compresslevel=1) as f:
            json.dump(doc, f)
        paths.append(p)
    return paths
