"""Communication wait per rank: how long each rank sat in a collective waiting for the last rank to arrive.

Two halves.  ``collective_steps(trace, window)`` runs where the trace is loaded (batch.analyze_one) and keeps, per
step of the analysed window, the communication kernels (classes.COMM_KERNEL_RE) as (name, k, offset, duration):
a few KB that travel in the rank profile.  ``comm_wait(profiles)`` matches them across the ranks of one job.

Rules (stated in the output):
- a step's GPU work is the GPU work whose launching host call starts inside the step's time range, on any
  thread (collectives are often launched from the autograd or a communication thread, not the step's);
- clocks of different hosts are not synchronised, so times are never compared across ranks: each collective
  is placed by its OFFSET from the start of its step's first GPU activity on its own rank (the step's GPU
  start; after the previous step's synchronising collectives it is the same moment on every rank);
- collective instance = the k-th kernel of one name within a step (streams are not compared: their ids may
  differ across ranks); steps are matched by name (ProfilerStep#N) when the names are unique on every rank,
  else by position; an instance is compared only when every rank has it;
- a rank's wait in one instance = (the latest rank's start offset - its own start offset), clipped to
  [0, its kernel duration]: the time the kernel ran before the last rank arrived.  Share = wait / the rank's
  time in the compared instances.
"""
from __future__ import annotations

import numpy as np

from ..thresholds import CROSS_RANK_LAST_ARRIVAL_US, CROSS_RANK_MAX_COLLECTIVES
from ..analyze.classify import comm_kernel_mask
from ..analyze.launched import in_ranges, launched_gpu
from ..analyze.select import overlap, window_bounds
from ..trace.kinds import SpanKind

WAIT_KEYS = ("comm_wait_ms", "comm_compared_ms", "comm_wait_pct", "comm_wait_per_step_ms", "last_arrivals")
RULE = ("wait = latest rank's start offset - this rank's start offset, clipped to [0, kernel duration], summed over "
        "the collective instances every rank has; offsets from the step's GPU start (first GPU activity launched "
        "inside the step's time range, any thread) on each rank's own clock (clocks across hosts are never compared); instance = k-th kernel "
        "of one name in a step; steps matched by name (else position)")


def collective_steps(trace, window, max_steps: int = 100, cap: int = CROSS_RANK_MAX_COLLECTIVES) -> dict | None:
    """Per step of the window: its communication kernels as [name index, k, offset_us, dur_us].  None when the
    window (an analyze.window.Window; None: no window known) has no step or no communication kernel launched inside one.  At most ``cap`` instances: later steps
    are left out whole (``truncated``)."""
    if window is None:
        return None
    window_bounds(window)    # a TypeError for anything but a Window
    s = trace.spans
    st = np.flatnonzero((s.kind == SpanKind.STEP) & overlap(s.start_ns, s.end_ns, window) & (s.end_ns > s.start_ns))
    if not len(st):
        return None
    st = st[np.argsort(s.start_ns[st], kind="stable")][:max_steps]
    lg = launched_gpu(trace, window)
    if not (lg.launcher >= 0).any():
        return None
    comm = comm_kernel_mask(trace)
    rl = in_ranges(trace, lg, s.start_ns[st], s.end_ns[st])      # any thread
    names: dict[str, int] = {}
    steps, total, truncated = [], 0, False
    step_names = trace.names(st)
    for j, (i0, i1) in enumerate(zip(rl.i0.tolist(), rl.i1.tolist())):
        if i1 <= i0:
            continue
        gi = np.sort(lg.gpu[rl.order[i0:i1]])       # span order, as the ties of the stable sort below expect
        g0 = int(s.start_ns[gi].min())
        ci = gi[comm[gi]]
        ci = ci[np.argsort(s.start_ns[ci], kind="stable")]
        if total + len(ci) > cap:
            truncated = True
            break
        total += len(ci)
        seen: dict[int, int] = {}
        rows = []
        for nm, a, b in zip(trace.names(ci), s.start_ns[ci].tolist(), s.end_ns[ci].tolist()):
            n = names.setdefault(nm, len(names))
            k = seen.get(n, 0)
            seen[n] = k + 1
            rows.append([n, k, round((a - g0) / 1e3, 3), round((b - a) / 1e3, 3)])
        steps.append({"name": step_names[j], "coll": rows})
    if not total:
        return None
    return {"names": list(names), "steps": steps, "instances": total, "truncated": truncated}


def _step_keys(coll: dict) -> list:
    names = [st["name"] for st in coll["steps"]]
    return names if len(set(names)) == len(names) else list(range(len(names)))


def comm_wait(colls: dict[int, dict]) -> dict | None:
    """colls: rank -> collective_steps(...) (ranks without one are left out).  Per rank: wait in ms, its share of
    the rank's time in the compared collectives, wait per compared step, and how often it arrived last (more
    than CROSS_RANK_LAST_ARRIVAL_US after the next latest rank)."""
    colls = {r: c for r, c in colls.items() if c}
    if len(colls) < 2:
        return None
    keyed = {r: _step_keys(c) for r, c in colls.items()}
    by_name = all(k and isinstance(k[0], str) for k in keyed.values())
    if not by_name:
        keyed = {r: list(range(len(c["steps"]))) for r, c in colls.items()}
    ranks = sorted(colls)
    common = [k for k in keyed[ranks[0]] if all(k in keyed[r] for r in ranks[1:])]
    pos = {r: {k: i for i, k in enumerate(keyed[r])} for r in ranks}
    wait = dict.fromkeys(ranks, 0.0)
    busy = dict.fromkeys(ranks, 0.0)
    last = dict.fromkeys(ranks, 0)
    matched = unmatched = 0
    for key in common:
        per: dict[int, dict] = {}
        for r in ranks:
            c = colls[r]
            nm = c["names"]
            per[r] = {(nm[n], k): (off, dur) for n, k, off, dur in c["steps"][pos[r][key]]["coll"]}
        inst = set.intersection(*(set(p) for p in per.values()))
        unmatched += sum(len(p) for p in per.values()) - len(inst) * len(ranks)
        for ik in inst:
            offs = sorted((per[r][ik][0], r) for r in ranks)
            latest = offs[-1][0]
            if latest - offs[-2][0] > CROSS_RANK_LAST_ARRIVAL_US:
                last[offs[-1][1]] += 1
            for r in ranks:
                off, dur = per[r][ik]
                wait[r] += min(max(latest - off, 0.0), dur)
                busy[r] += dur
            matched += 1
    if not matched:
        return None
    n = len(common)
    return {"rule": RULE, "steps_compared": n, "instances_compared": matched, "instances_not_on_every_rank": unmatched,
            "matched_by": "step name" if by_name else "step position",
            "truncated_ranks": sorted(r for r, c in colls.items() if c.get("truncated")),
            "per_rank": {r: {"comm_wait_ms": round(wait[r] / 1e3, 6), "comm_compared_ms": round(busy[r] / 1e3, 6),
                             "comm_wait_pct": round(100.0 * wait[r] / busy[r], 3) if busy[r] > 0 else None,
                             "comm_wait_per_step_ms": round(wait[r] / 1e3 / n, 6), "last_arrivals": last[r]}
                         for r in ranks}}
