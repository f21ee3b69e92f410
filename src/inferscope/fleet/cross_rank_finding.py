"""Finding ``straggler_rank`` of the cross-rank section (cross_rank.py): one per compared job whose straggler
leads the other ranks' median step time by >= CROSS_RANK_STRAGGLER_MIN_LEAD_PCT (evidence: the lead and the top
extra category / kernel / op / function), else - step times agreeing, as they do in a synchronous job - the rank
that arrived last at the most collectives while the others waited (cross_rank_comm.py).  It lives in
cross_rank.json ``findings`` (the job's, not one report's: the reports are written before the job is known) and
is also listed in findings.jsonl/parquet under the straggler's input (batch.py)."""
from __future__ import annotations

import statistics

from ..thresholds import CROSS_RANK_STRAGGLER_HIGH_PCT, CROSS_RANK_STRAGGLER_MIN_LEAD_PCT

_HOST = ("framework_overhead", "cpu_compute", "cpu_preprocessing", "waiting", "other")
_COPY = ("h2d_copy", "d2h_copy", "other_copy")


def _suggestion(rank: int, cat: dict | None, top: dict | None, wait: float | None) -> str:
    """What to do, from the category the straggler spent most extra time in and its top extra item."""
    c = cat["name"] if cat else None
    what = f"{top['kind']} {top['name'][:120]} ({top['diff_ms_per_step']:+.3f} ms/step)" if top else f"{c}"
    waits = (f"; meanwhile the other ranks wait {wait:.3f} ms/step in collectives (median)" if wait else "")
    if c == "gpu_compute" or c == "gpu_communication":
        return (f"Rank {rank}'s GPU is slower at {what}: compare that GPU with the others (nvidia-smi -q -d "
                "CLOCK,PERFORMANCE,ECC: throttling, clocks, XID/ECC errors; nvidia-smi topo -m: NVLink/PCIe placement) "
                "and its share of the work (uneven sequence lengths or expert load, a larger shard); if the hardware "
                f"matches, rebalance the work{waits}.")
    if c in _HOST:
        return (f"Rank {rank}'s host is slower at {what}: check that process's CPU and NUMA binding (taskset / numactl, "
                f"the GPU's NUMA node), other processes on that host and that rank's data loading / preprocessing{waits}.")
    if c in _COPY:
        return (f"Rank {rank} spends longer in copies ({what}): check pinned memory and the PCIe placement of that "
                f"GPU (nvidia-smi topo -m) against the other ranks'{waits}.")
    if c == "sync_wait":
        return (f"Rank {rank} blocks longer on GPU syncs ({what}): the wait is the GPU work before them; see its "
                f"report's kernels and syncs against another rank's{waits}.")
    return f"Compare rank {rank}'s report with another rank's where they differ most ({what}){waits}."


def straggler_finding(job: dict) -> dict | None:
    """Finding ``straggler_rank`` of one compared job: the straggler, its lead, the top extra category / kernel /
    op / function (straggler minus the other ranks' median; per step = window total / the straggler's steps),
    the others' communication wait, and what to check.  None under CROSS_RANK_STRAGGLER_MIN_LEAD_PCT."""
    s = job.get("straggler")
    if not s or s["lead_pct"] is None:
        return None
    if s["lead_pct"] < CROSS_RANK_STRAGGLER_MIN_LEAD_PCT:
        return _late_finding(job)
    me = next(r for r in job["ranks"] if r["rank"] == s["rank"])
    n = me["steps"]["n"] if s["basis"] == "median step time" else 0
    top = []
    for kind, key in (("category", "categories"), ("kernel", "kernels"), ("op", "ops"), ("function", "functions")):
        rows = [x for x in (job.get("different") or {}).get(key) or [] if x["diff_ms"] > 0]
        if rows:
            x = rows[0]
            top.append({"kind": kind, "name": x["name"], "diff_ms": x["diff_ms"], "bound": x["bound"],
                        "diff_ms_per_step": round(x["diff_ms"] / n, 6) if n else None})
    waits = [r["comm_wait_per_step_ms"] for r in job["ranks"] if r["rank"] != s["rank"] and r.get("comm_wait_per_step_ms") is not None]
    others_wait = round(statistics.median(waits), 6) if waits else None
    cat = next((x for x in top if x["kind"] == "category"), None)
    item = next((x for x in top if x["kind"] != "category" and x["diff_ms_per_step"] is not None), None)
    per = "per step" if n else "end to end"
    cites = "; ".join(f"{x['kind']} {x['name'][:80]} {x['diff_ms']:+.3f} ms" + (f" ({x['diff_ms_per_step']:+.3f}/step)" if n else "")
                      + (f" [{x['bound']}]" if x["bound"] else "") for x in top)
    return {"id": "straggler_rank", "severity": "high" if s["lead_pct"] >= CROSS_RANK_STRAGGLER_HIGH_PCT else "medium",
            "title": (f"Rank {s['rank']} is the straggler of {job['job']}: {s['lead_ms']:+.3f} ms {per} "
                      f"({s['lead_pct']:+.1f} %) over the other ranks' median; top differences: {cites}"),
            "source": s["source"], "job": job["job"], "rank": s["rank"],
            "evidence": {"job": job["job"], "rank": s["rank"], "basis": s["basis"], "value_ms": s["value_ms"],
                         "others_median_ms": s["others_median_ms"], "lead_ms": s["lead_ms"], "lead_pct": s["lead_pct"],
                         "steps": n, "top_differences": top, "others_comm_wait_per_step_ms": others_wait,
                         "straggler_comm_wait_per_step_ms": me.get("comm_wait_per_step_ms")},
            "suggestion": _suggestion(s["rank"], cat, item, others_wait)}


def _late_finding(job: dict) -> dict | None:
    """Ranks of a synchronous job finish their steps together, so a rank that is slow BEFORE a collective shows as
    the others' wait, not as a longer step: the rank that arrived last at the most compared collectives (strictly
    more often than any other) while the other ranks' median wait is >= CROSS_RANK_STRAGGLER_MIN_LEAD_PCT of the
    median step time."""
    cw, s = job.get("comm_wait"), job["straggler"]
    rows = [r for r in job["ranks"] if r.get("last_arrivals") is not None]
    if not cw or s["basis"] != "median step time" or not rows:
        return None
    rows.sort(key=lambda r: -r["last_arrivals"])
    late = rows[0]
    if late["last_arrivals"] == 0 or (len(rows) > 1 and rows[1]["last_arrivals"] == late["last_arrivals"]):
        return None
    wait = statistics.median([r["comm_wait_per_step_ms"] for r in rows[1:]])
    step = statistics.median([r["steps"]["median_ms"] for r in job["ranks"]])
    pct = 100.0 * wait / step if step else 0.0
    if pct < CROSS_RANK_STRAGGLER_MIN_LEAD_PCT:
        return None
    n = cw["instances_compared"]
    return {"id": "straggler_rank", "severity": "high" if pct >= CROSS_RANK_STRAGGLER_HIGH_PCT else "medium",
            "title": (f"Rank {late['rank']} is the straggler of {job['job']}: it arrived last at {late['last_arrivals']} of "
                      f"{n} collectives; the other ranks wait {wait:.3f} ms per step for it ({pct:.1f} % of the median "
                      "step; the step times themselves agree, as in any synchronous job)"),
            "source": late["source"], "job": job["job"], "rank": late["rank"],
            "evidence": {"job": job["job"], "rank": late["rank"], "basis": "last arrival at collectives",
                         "last_arrivals": late["last_arrivals"], "instances_compared": n,
                         "others_comm_wait_per_step_ms": round(wait, 6), "others_wait_pct_of_step": round(pct, 3),
                         "straggler_comm_wait_per_step_ms": late["comm_wait_per_step_ms"], "median_step_ms": step},
            "suggestion": (f"Open rank {late['rank']}'s report against another rank's: what runs before its collectives "
                           "(its kernels, ops and host calls) is slower there; compare that GPU (nvidia-smi -q -d "
                           "CLOCK,PERFORMANCE,ECC), its host (CPU/NUMA binding, other processes) and its share of the work.")}
