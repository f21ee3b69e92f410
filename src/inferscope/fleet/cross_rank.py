"""Cross-rank section of a multi-input ``inferscope analyze``: the ranks of one torch.distributed job.

Pure functions over report dicts: ``rank_profile`` keeps, per report that names its rank (Kineto
``distributedInfo``, in ``source.distributed``), the few numbers the comparison needs (a few KB, so a
batch of thousands of traces does not hold their reports); ``cross_rank`` groups the profiles into jobs and
compares the ranks of each job.

Grouping rule (``job_key``): two traces belong to one job when they agree on world size, backend, NCCL
version, the process groups (name, description, backend, size: every rank creates every group, since
``new_group`` is collective over the default group, so these agree across ranks; the member lists are
left out), the device names and the CUDA/HIP tool versions; and their ranks differ.  Only on evidence of a
job of several ranks (``_multi_rank``): a world size >= 2 (or, without one, a process group of >= 2 ranks); a
trace with a rank alone, or world size 1, is a job of its own (``--group-by`` overrides); ranks from file names
(``rank3``) group with the rank files of the same folder only.  A rank seen twice
under one key means several captures of jobs with the same configuration: that group is reported as
ambiguous and not compared.  The key cannot tell apart two runs of one configuration whose ranks do not
collide (e.g. rank 0 of Monday's run and rank 1 of Tuesday's): give the inputs of one capture together.

Per rank: the step times (``phases.steps``: ``ProfilerStep#N`` or the trace's step ranges in the analysed
window; at most the 100 the report lists), e2e, the breakdown (ms and share), communication-kernel time
and the part of it not overlapped by a compute kernel (``gpu``), sync wait (breakdown ``sync_wait``).
The straggler is the rank with the largest median step time (e2e when some rank has no steps).  What it
did differently: per category and per top kernel / op / function, its time minus the median over the
other ranks, in ms.  Kernel/op/function tables are each report's top 20 only: a name missing from a
truncated list is bounded by that list's smallest entry, and the row says so (see ``_differences``).
Communication wait per rank (the profile's ``collectives``, taken from the trace in batch.analyze_one) is
cross_rank_comm.py; the finding ``straggler_rank`` is cross_rank_finding.py.
"""
from __future__ import annotations

import json
import re
import statistics
from pathlib import PurePath

import numpy as np

from .cross_rank_comm import WAIT_KEYS, comm_wait
from .cross_rank_finding import straggler_finding
from ..thresholds import CROSS_RANK_STRAGGLER_MIN_LEAD_PCT, CROSS_RANK_TOP_ITEMS

SCHEMA = "inferscope.cross_rank/1"


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _summed(rows, key: str, val: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in rows or []:
        if isinstance(r, dict) and isinstance(r.get(key), str) and _num(r.get(val)) is not None:
            out[r[key]] = out.get(r[key], 0.0) + float(r[val])
    return out


_RANK_NAME = re.compile(r"(?<![a-z0-9])rank[_-]?(\d{1,6})(?![0-9])", re.IGNORECASE)
GROUP_BY = ("auto", "folder", "all")


def _name_rank(path: str | None) -> tuple[int, str] | None:
    """(rank, the folder holding the rank-named file or folder) from ``rank3`` / ``rank_3`` / ``rank-3`` in the file
    name, else in its folder's name (``job/rank3/trace.json``: job); None when neither names one, or names several."""
    if not path:
        return None
    p = PurePath(path)
    for part, holder in ((p.name, p.parent), (p.parent.name, p.parent.parent)):
        found = {int(m.group(1)) for m in _RANK_NAME.finditer(part)}
        if len(found) == 1:
            return found.pop(), str(holder)
        if found:
            return None
    return None


def rank_from_name(path: str | None) -> int | None:
    """The rank a file or folder name gives (``_name_rank``), else None."""
    found = _name_rank(path)
    return None if found is None else found[0]


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _multi_rank(d: dict) -> bool:
    """Evidence of a job of several ranks: a world size >= 2, or (no world size) a process group of >= 2 ranks.
    A rank alone, or world size 1, is not: such a trace is a job of its own."""
    ws = _int(d.get("world_size"))
    if ws is not None:
        return ws >= 2
    return any((_int(pg.get("pg_size")) or 0) >= 2 for pg in d.get("pg_config") or [] if isinstance(pg, dict))


def used_devices(result: dict) -> list[str]:
    """The devices the trace's GPU work ran on in the window (``gpu.devices``), by name: the listed device of that
    id, else the one name all listed devices share (a node's GPUs alike; ROCm traces number the devices their
    kernels ran on differently from ``deviceProperties``), else ``device N``.  No GPU work: the listed devices."""
    listed = [x for x in (result.get("source") or {}).get("devices") or [] if isinstance(x, dict)]
    used = [_int(x.get("device")) for x in (result.get("gpu") or {}).get("devices") or [] if isinstance(x, dict)]
    used = [u for u in used if u is not None and u >= 0]
    if not used:
        return [str(x.get("name") or f"device {x.get('id')}") for x in listed]
    by_id = {x.get("id"): x.get("name") for x in listed}
    names = {x.get("name") for x in listed}
    one = names.pop() if len(names) == 1 else None
    return [str(by_id.get(u) or one or f"device {u}") for u in used]


def _distributed(result: dict, path: str | None) -> tuple[dict, str] | None:
    """(distributed info, where the rank came from): Kineto distributedInfo, else the file name."""
    d = (result.get("source") or {}).get("distributed")
    if isinstance(d, dict) and isinstance(d.get("rank"), int) and not isinstance(d.get("rank"), bool):
        return d, "distributedInfo"
    r = rank_from_name(path)
    return ({"rank": r}, "file name") if r is not None else None


def rank_of(result: dict, path: str | None = None) -> tuple[int | None, int | None, str | None]:
    """(rank, world size, rank source) for the summary row."""
    found = _distributed(result, path)
    if found is None:
        return None, None, None
    d, how = found
    ws = d.get("world_size")
    return d["rank"], ws if isinstance(ws, int) and not isinstance(ws, bool) else None, how


def job_key(result: dict, path: str | None = None) -> str | None:
    src = result.get("source") or {}
    found = _distributed(result, path)
    if found is None:
        return None
    d, rank_source = found
    pgs = sorted((pg.get("pg_name"), pg.get("pg_desc"), pg.get("backend_config"), pg.get("pg_size"))
                 for pg in d.get("pg_config") or [])
    if rank_source == "file name":      # rank files of one capture sit side by side: the folder is the evidence
        scope = {"folder": _name_rank(path)[1]}
    elif _multi_rank(d):
        scope = {}
    else:                               # a rank alone is no job evidence: this input is its own job
        scope = {"alone": str(path or src.get("file") or "")}
    key = {"world_size": d.get("world_size"), "backend": d.get("backend"), "nccl_version": d.get("nccl_version"),
           "pg_count": d.get("pg_count"), "pgs": pgs, "rank_source": rank_source, **scope,
           "devices": sorted({str(x.get("name")) for x in src.get("devices") or []}),
           "tool_versions": {k: v for k, v in sorted((src.get("tool_versions") or {}).items()) if k != "schemaVersion"}}
    return json.dumps(key, sort_keys=True, default=str)


def rank_profile(result: dict, path: str | None = None) -> dict | None:
    """The numbers the cross-rank comparison reads from one report; None when neither the trace
    (distributedInfo) nor its file name (``path``: ``rank3``) names a rank."""
    key = job_key(result, path)
    if key is None:
        return None
    d, rank_source = _distributed(result, path)
    ph = result.get("phases") or {}
    g = result.get("gpu") or {}
    comm, overlap = _num(g.get("comm_kernel_busy_ms")), _num(g.get("compute_comm_overlap_ms"))
    cats = {c["category"]: c for c in result.get("breakdown") or []}
    cul = result.get("culprits") or {}
    return {"rank": d["rank"], "rank_source": rank_source, "world_size": d.get("world_size"), "backend": d.get("backend"),
            "job_key": key, "gpu_idle_pct": _num(g.get("idle_pct")),
            "devices": sorted(set(used_devices(result))),
            "window": (result.get("window") or {}).get("label"), "e2e_ms": _num(result.get("e2e_ms")),
            "steps_ms": [float(s["wall_ms"]) for s in ph.get("steps") or [] if _num(s.get("wall_ms")) is not None],
            "step_count": ph.get("step_count"),
            "category_ms": {k: float(c["ms"]) for k, c in cats.items()},
            "shares_pct": {k: float(c["pct"]) for k, c in cats.items()},
            "comm_kernel_ms": comm,
            "comm_exposed_ms": None if comm is None or overlap is None else max(0.0, comm - overlap),
            "sync_wait_ms": float(cats["sync_wait"]["ms"]) if "sync_wait" in cats else None,
            "kernels": _summed((result.get("kernels") or {}).get("top"), "name", "sum_ms"),
            "ops": _summed(cul.get("ops"), "name", "self_ms"),
            "functions": _summed(cul.get("functions"), "function", "self_ms"),
            "complete": {"kernels": len((result.get("kernels") or {}).get("top") or []) >= ((result.get("kernels") or {}).get("distinct") or 0),
                         "ops": len(cul.get("ops") or []) >= (cul.get("counts") or {}).get("ops", 0),
                         "functions": len(cul.get("functions") or []) >= (cul.get("counts") or {}).get("functions", 0)}}


def _step_stats(steps: list[float]) -> dict:
    if not steps:
        return {"n": 0, "median_ms": None, "p90_ms": None}
    a = np.asarray(steps, dtype=np.float64)
    return {"n": int(a.size), "median_ms": round(float(np.median(a)), 6), "p90_ms": round(float(np.percentile(a, 90)), 6)}


def _rank_row(item: dict) -> dict:
    p = item["profile"]
    comm, exposed = p["comm_kernel_ms"], p["comm_exposed_ms"]
    return {"rank": p["rank"], "rank_source": p.get("rank_source", "distributedInfo"), "source": item["source"],
            "report_dir": item.get("report_dir"), "window": p["window"],
            "steps": _step_stats(p["steps_ms"]), "e2e_ms": p["e2e_ms"], "shares_pct": p["shares_pct"],
            "gpu_idle_pct": p.get("gpu_idle_pct"),
            "comm_kernel_ms": comm, "comm_exposed_ms": None if exposed is None else round(exposed, 6),
            "comm_exposed_pct": round(100.0 * exposed / comm, 3) if comm and exposed is not None else None,
            "sync_wait_ms": p["sync_wait_ms"]}


def _value(table: dict[str, float], name: str, complete: bool) -> tuple[float, bool]:
    """(value, bounded): a name missing from a complete table is 0; from a truncated top-N table it is at most
    the smallest value listed (bounded)."""
    if name in table:
        return table[name], False
    if complete or not table:
        return 0.0, False
    return min(table.values()), True


def _differences(mine: dict[str, float], others: list[dict[str, float]], top: int,
                 mine_complete: bool = True, others_complete: list[bool] | None = None) -> list[dict]:
    """Per name: straggler value minus the median over the other ranks.  A name missing from a truncated
    top-N table counts as that table's smallest listed value (an upper bound on it), so ``bound`` says the
    difference is "at least" (bounded on other ranks) or "at most" (bounded on the straggler); a name bounded
    on both sides has no row.  Zero differences are left out."""
    oc = others_complete or [True] * len(others)
    rows = []
    for name in set(mine).union(*others):
        v, vb = _value(mine, name, mine_complete)
        vals = [_value(o, name, c) for o, c in zip(others, oc)]
        ob = any(b for _, b in vals)
        if vb and ob:
            continue
        med = statistics.median([x for x, _ in vals])
        d = round(v - med, 6)
        if d == 0:
            continue
        rows.append({"name": name, "straggler_ms": round(v, 6), "others_median_ms": round(med, 6), "diff_ms": d,
                     "bound": "at most" if vb else "at least" if ob else None})
    rows.sort(key=lambda r: (-abs(r["diff_ms"]), r["name"]))
    return rows[:top]


def _with_comm_wait(items: list[dict], ranks: list[dict]) -> dict | None:
    """Adds comm_wait_* to the rank rows (None where not measured); the job's comm_wait summary."""
    cw = comm_wait({it["profile"]["rank"]: it["profile"].get("collectives") for it in items})
    per = (cw or {}).pop("per_rank", {})
    for r in ranks:
        r.update(per.get(r["rank"]) or dict.fromkeys(WAIT_KEYS))
    return cw


def _compare(items: list[dict], top: int) -> dict:
    items = sorted(items, key=lambda it: it["profile"]["rank"])
    ranks = [_rank_row(it) for it in items]
    cw = _with_comm_wait(items, ranks)
    by_step = all(r["steps"]["n"] for r in ranks)
    val = [(r["steps"]["median_ms"] if by_step else r["e2e_ms"]) for r in ranks]
    if any(v is None for v in val):
        return {"ranks": ranks, "basis": None, "straggler": None, "different": None, "comm_wait": cw}
    i = max(range(len(ranks)), key=lambda k: (val[k], -ranks[k]["rank"]))
    rest = [v for k, v in enumerate(val) if k != i]
    others = [it["profile"] for k, it in enumerate(items) if k != i]
    me = items[i]["profile"]
    med = statistics.median(rest)
    straggler = {"rank": ranks[i]["rank"], "source": ranks[i]["source"],
                 "basis": "median step time" if by_step else "e2e (some rank has no steps)",
                 "value_ms": val[i], "others_median_ms": round(med, 6), "lead_ms": round(val[i] - med, 6),
                 "lead_pct": round(100.0 * (val[i] - med) / med, 3) if med > 0 else None}
    different = {"categories": _differences(me["category_ms"], [o["category_ms"] for o in others], top)}
    for k in ("kernels", "ops", "functions"):
        different[k] = _differences(me[k], [o[k] for o in others], top, me["complete"][k],
                                    [o["complete"][k] for o in others])
    return {"ranks": ranks, "basis": straggler["basis"], "straggler": straggler, "different": different, "comm_wait": cw}


def _window_note(ranks: list[dict]) -> str | None:
    labels = sorted({str(r["window"]) for r in ranks})
    if len(labels) < 2:
        return None
    return (f"the ranks were analysed over different windows ({'; '.join(labels[:4])}): the default steady-state cut "
            "is found per trace; --window all (or one step name) compares like with like")


def _group(item: dict, group_by: str) -> str:
    if group_by == "folder":
        return str(PurePath(item["source"]).parent)
    return "all" if group_by == "all" else item["profile"]["job_key"]


def cross_rank(items: list[dict], top: int = CROSS_RANK_TOP_ITEMS, group_by: str = "auto") -> dict | None:
    """items: {"source", "report_dir", "profile"} per analysed input with a rank profile.  None when no two
    inputs belong to one job.  group_by: "auto" (the job key), "folder" (inputs in one folder are one job) or
    "all" (every input with a rank is one job)."""
    groups: dict[str, list[dict]] = {}
    for it in items:
        if it.get("profile"):
            groups.setdefault(_group(it, group_by), []).append(it)
    jobs, alone = [], []
    for key, its in groups.items():
        if len(its) < 2:
            alone.append(its[0]["source"])
            continue
        ranks = [it["profile"]["rank"] for it in its]
        ws, be = {it["profile"]["world_size"] for it in its}, {it["profile"]["backend"] for it in its}
        job = {"job": "", "world_size": ws.pop() if len(ws) == 1 else None, "backend": be.pop() if len(be) == 1 else None,
               "devices": sorted({d for it in its for d in it["profile"]["devices"]}),
               "rank_source": sorted({it["profile"].get("rank_source", "distributedInfo") for it in its}),
               "ranks_present": sorted(set(ranks)), "inputs": sorted(it["source"] for it in its)}
        dup = sorted({r for r in ranks if ranks.count(r) > 1})
        if dup:
            seen = "; ".join(f"rank {r} in {ranks.count(r)} inputs" for r in dup)
            job["error"] = (f"{seen}: captures of several jobs with the same configuration; "
                            "give one capture's ranks together")
        else:
            job.update(_compare(its, top))
            job["window_note"] = _window_note(job["ranks"])
        jobs.append(job)
    if not jobs:
        return None
    jobs.sort(key=lambda j: (j["inputs"][0]))
    for n, j in enumerate(jobs, 1):
        j["job"] = f"job{n}"
    findings = [f for f in map(straggler_finding, jobs) if f]
    grouping = {"auto": "one job = same world size, backend, NCCL version, process groups (name, description, backend, "
                        "size), device names, tool versions and rank source, distinct ranks; only with evidence of several "
                        "ranks: distributedInfo with world size >= 2 (or a process group of >= 2 ranks; a rank alone or world "
                        "size 1 is a job of its own), or rankN file names in one folder",
                "folder": "one job = the inputs of one folder (--group-by folder), distinct ranks",
                "all": "one job = every input with a rank (--group-by all), distinct ranks"}[group_by]
    return {"schema": SCHEMA, "jobs": jobs, "findings": findings, "ungrouped": sorted(alone), "group_by": group_by,
            "rule": grouping + "; straggler = largest median step time "
                    "(e2e when a rank has no steps); differences = straggler minus the median of the other ranks, "
                    f"top {top} by size; kernel/op/function tables are each report's top 20: a name missing from a "
                    "truncated table counts as its smallest entry (the difference is then a bound: at least / at most); "
                    f"finding straggler_rank when its lead is >= {CROSS_RANK_STRAGGLER_MIN_LEAD_PCT:g} % of the others' median"}


def row_fields(cr: dict | None) -> dict[str, dict]:
    """source -> {"job", "straggler"} for the summary rows."""
    out: dict[str, dict] = {}
    for j in (cr or {}).get("jobs", []):
        s = (j.get("straggler") or {}).get("source")
        for src in j["inputs"]:
            out[src] = {"job": j["job"], "straggler": (src == s) if j.get("straggler") else None}
    return out
