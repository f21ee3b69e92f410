"""Findings on how many threads compete for the CPUs the process may use (issue 24 item 7), registered in
diagnosis.RULES: ``cpu_oversubscription`` (torch intra-op threads, plus busy worker processes, beyond those
CPUs) and ``cpu_underuse`` (fewer torch threads than idle CPUs while CPU compute dominates).

Evidence: ``counters.numa.torch_threads`` (torch.get_num_threads() at the end of a live run),
``counters.numa.process_cpus`` (sched_getaffinity), busy child processes from ``children.processes``
(CPU time in the window >= thresholds.BUSY_WORKER_CPU_FRACTION of it: DataLoader / multiprocessing workers),
``counters.process_cores.mean_util_pct`` (the process cores' utilisation, all processes) and the breakdown's
``cpu_compute`` share.  Each busy worker counts as one thread (DataLoader workers run torch with 1 thread).
"""
from __future__ import annotations

from .. import thresholds as T
from .evidence import Evidence, _pct


def _busy_workers(res: dict) -> list[tuple[int, dict]]:
    ch = res.get("children") or {}
    win_s = float(res.get("e2e_ms") or 0.0) / 1e3
    if win_s <= 0:
        return []
    return [(i, p) for i, p in enumerate(ch.get("processes") or [])
            if float(p.get("cpu_s_in_window") or 0.0) >= T.BUSY_WORKER_CPU_FRACTION * win_s]


def _cite_workers(e: Evidence, res: dict, busy: list) -> float:
    e.derive("busy_workers", len(busy), f"children.processes with cpu_s_in_window >= {T.BUSY_WORKER_CPU_FRACTION:g} x "
             "the window (thresholds.BUSY_WORKER_CPU_FRACTION)")
    cpu = 0.0
    for k, (i, p) in enumerate(busy[:4]):
        cpu += e.cite(f"worker{k}_cpu_s_in_window", f"children.processes[{i}].cpu_s_in_window")
    return cpu


def cpu_oversubscription(res: dict, found: dict) -> dict | None:
    nm = (res.get("counters") or {}).get("numa") or {}
    tt, cpus = nm.get("torch_threads"), nm.get("process_cpus")
    if not tt or not cpus:
        return None
    busy = _busy_workers(res)
    if tt + len(busy) <= cpus:
        return None
    e = Evidence(res)
    e.cite("torch_threads", "counters.numa.torch_threads")
    e.cite("process_cpus", "counters.numa.process_cpus")
    if not busy:
        return e.finding("cpu_oversubscription", "medium", "More torch threads than CPUs available to the process",
                         [f"torch uses {tt} intra-op threads but the process may run on {cpus} CPU(s) (sched_getaffinity): "
                          "threads time-share cores, and every parallel op waits for the slowest."],
                         f"Set torch.set_num_threads({cpus}) (or OMP_NUM_THREADS={cpus}) to match the CPUs the process owns "
                         "(taskset/cgroup limits included).")
    _cite_workers(e, res, busy)
    demand = e.derive("busy_threads", tt + len(busy), "torch_threads + busy_workers")
    names = ", ".join(f"{p['comm']} [{p['pid']}] {p['cpu_s_in_window']:.2f} CPU-s" for _, p in busy[:4])
    threads = max(1, cpus - len(busy))
    workers = max(0, cpus - threads)
    txt = [f"{demand} threads want a CPU at once but the process may run on {cpus} CPU(s) (sched_getaffinity): torch's "
           f"{tt} intra-op thread(s) in the main process and {len(busy)} busy worker process(es) ({names} inside the "
           "window): they time-share the cores, and every parallel op of the main process waits for its slowest thread."]
    rq = (res.get("counters") or {}).get("main_runq_pct")
    if rq:
        e.cite("main_runq_pct", "counters.main_runq_pct", 1)
        txt.append(f"The main thread was runnable but waiting for a CPU {rq:.1f}% of the time (run queue): what the sharing costs it.")
    wait, comp = _pct(res, "waiting"), _pct(res, "cpu_compute")
    if wait > comp:
        # the main process mostly waits - for its workers' data: they are the bottleneck, and fewer of them would slow
        # the whole pipeline (zoo_dl_oversub with num_workers 2 -> 1: 1.2 s slower, bench_whatif 2026-11-29)
        e.cite("main_waiting_pct", "breakdown[waiting].pct", 1)
        txt.append(f"The main process waits {wait:.1f}% of the window (its workers feed it) and computes {comp:.1f}%: "
                   "the workers are the pipeline's bottleneck, so the cores should go to them.")
        sugg = (f"Give the workers the cores: torch.set_num_threads(1) in the main process and keep the {len(busy)} "
                "worker(s) (fewer would starve the main process further); or give the process more CPUs "
                "(taskset / cgroup cpuset).")
    else:
        sugg = (f"Keep torch threads + busy workers <= {cpus}: torch.set_num_threads({threads}) in the main process"
                + (f" and DataLoader(num_workers={workers}) (or fewer pool workers)" if workers < len(busy) else "")
                + "; or give the process more CPUs (taskset / cgroup cpuset).")
    return e.finding("cpu_oversubscription", "medium", "More busy threads than CPUs (torch threads + worker processes)",
                     txt, sugg)


def cpu_underuse(res: dict, found: dict) -> dict | None:
    c = res.get("counters") or {}
    nm, pc = c.get("numa") or {}, c.get("process_cores") or {}
    tt, cpus, util = nm.get("torch_threads"), nm.get("process_cpus"), pc.get("mean_util_pct")
    if not tt or not cpus or util is None or res.get("gpu") is not None:
        return None
    busy = _busy_workers(res)
    cc = _pct(res, "cpu_compute")
    cores = pc.get("cores") or cpus
    idle = cores * (100.0 - float(util)) / 100.0
    if tt + len(busy) >= cpus or cc < T.CPU_UNDERUSE_MIN_COMPUTE_PCT or idle < T.CPU_UNDERUSE_MIN_IDLE_CORES:
        return None
    e = Evidence(res)
    e.cite("torch_threads", "counters.numa.torch_threads")
    e.cite("process_cpus", "counters.numa.process_cpus")
    e.cite("cpu_compute_pct", "breakdown[cpu_compute].pct", 2)
    e.cite("process_cores_util_pct", "counters.process_cores.mean_util_pct", 1)
    e.cite("process_cores", "counters.process_cores.cores")
    e.derive("idle_cores", idle, "process_cores x (100 - process_cores_util_pct) / 100", 2)
    _cite_workers(e, res, busy)
    threads = max(1, cpus - len(busy))
    txt = [f"CPU compute (torch ops) takes {cc:.1f}% of the window, but torch runs {tt} intra-op thread(s) while the "
           f"process may use {cpus} CPU(s) (sched_getaffinity); those cores were {util:.0f}% busy on average "
           f"(all processes): ~{idle:.2f} core(s) stood idle."]
    if busy:
        txt.append(f"{len(busy)} busy worker process(es) use part of the rest.")
    return e.finding("cpu_underuse", "low", "Fewer torch threads than idle CPUs while CPU compute dominates", txt,
                     f"Raise torch.set_num_threads({threads}) (or unset OMP_NUM_THREADS / set it to {threads}) so the ops "
                     "use the idle cores; keep torch threads + busy workers <= the CPUs the process owns.")
