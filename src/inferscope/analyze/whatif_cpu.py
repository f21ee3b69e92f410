"""What-if models of the CPU findings (issue 42 item 3): the saving if a live run's CPU finding's suggestion
is followed.  Called through analyze/whatif.py ``predict`` (same fields, same caps: a prediction never
exceeds its categories' time nor e2e).  Every input is a measured figure of the analysis dict, cited in
``saving_basis``; the one assumption is ``thresholds.WHATIF_WAIT_RESIDUAL_FRACTION`` (a range end).

- ``blocking_io`` (remove: read once / load before the loop / prefetch in the background).  Expected: the
  I/O system-call time the sampler attributed (``contention.blocking.io_ms``, a lower bound).  High: that
  plus the thread's off-CPU time no call was attributed to, at the same I/O share as the attributed part
  (``io_ms + (waiting_ms - attributed_ms) x io_ms / attributed_ms``), plus the on-CPU self time sampled in the
  functions whose frames issued the I/O (the Python around the reads goes with them: zoo_disk_io --fixed saved
  271.7 ms where its waiting was 266.5 ms, user code 13.8 -> 8.6 ms).  Low: the expected time less
  WHATIF_WAIT_RESIDUAL_FRACTION of it (the data is still read once, or the background read competes).
- ``lock_wait`` (remove: the holder no longer sleeps / does I/O under the lock).  Expected: the futex waits
  with no other Python running (``lock_ms``); high: every futex wait of the thread (``futex_ms``) plus the
  off-CPU time no call was attributed to at the lock's share of the attributed part (as for blocking_io: the
  probe names a sample of the waits); low as for blocking_io (a shortened critical section still holds the
  lock a while).
- ``gil_contention`` (overlap: the other threads' Python moves to other processes and runs beside the
  inference thread).  With P other Python threads and C CPUs, P+1 runnable processes share C cores: the
  inference thread keeps running a share min(1, C/(P+1)) of the time.  Expected: the GIL wait
  (``waiting_while_python_ms``) x min(1, C/(P+1)); low: x 1/(P+1) (one core between them all); high: all of it
  plus the main thread's run-queue delay (``counters.main_runq_pct`` x e2e): threads paced by the suggestion's
  "sleep between polls" stop taking the cores too (zoo_gil --fixed saved 200 ms for a GIL wait of 193 ms).
- ``cpu_oversubscription`` (scale down: threads + busy workers <= CPUs).  Demand D = torch threads + busy
  workers on C CPUs.  Expected: the main thread's run-queue delay (``counters.main_runq_pct`` x e2e, from
  schedstat: what the sharing costs it); low: the excess threads' share of it, x (D - C)/D (other
  processes still preempt it); high: that delay plus the CPU compute stretched by time-sharing,
  ``cpu_compute x (1 - C/D)`` (every parallel op waited for its slowest, descheduled thread).  When the torch
  threads alone exceed the CPUs (no busy worker, no other busy thread) the delay is the ops' own threads doing
  the same work on the same cores: expected and low 0 (measured: zoo_omp_oversub saved 2.3 ms of 175 ms), high
  as above (an OpenMP runtime that spin-waits).  ``cpu_run_queue`` the same in that case.
- ``cpu_run_queue`` (remove: fewer busy threads than cores).  Only when the process's own load explains it
  (torch threads + busy workers > CPUs, or another thread of the process was busy); when the cores went to
  other processes on the host the program has nothing to change: null.  Expected and high: the schedstat
  run-queue delay; low: keeps WHATIF_WAIT_RESIDUAL_FRACTION of it, or the part the breakdown sampled
  (waiting/run_queue) when smaller.  The freed core's work can run slower beside the process moved off it
  (shared caches, memory bandwidth, the host's SMT siblings under a VM's vCPUs): zoo_runqueue's loop, self-timed
  (schedstat on-CPU), took 373-391 ms of CPU time-sliced with the busy process on its CPU and 415-462 ms with it
  on the other vCPU (3 interleaved pairs under inferscope run, this 2-core VM, 2026-11-29), so 315-344 ms were
  saved of a 368-375 ms run-queue delay.
- ``cpu_underuse`` (scale up: torch threads onto the idle cores).  t torch threads, I idle cores of the
  process (``counters.process_cores``: cores x idle share), C CPUs less busy workers: n = min(C, t + I)
  threads.  Expected: ``cpu_compute x (1 - t/n)`` (the compute spread over the idle capacity, linear);
  low: each added thread does WHATIF_THREAD_SCALING_LOW_EFFICIENCY of a thread's work; high: linear over
  all C CPUs (the idle measure is a mean over a window other processes shared).
- ``page_fault_storm`` (remove: reuse buffers).  Expected and high: the process's kernel CPU time over the
  window (``counters.sys_cpu_pct`` x e2e: zeroing / reading the faulted pages); low: the kernel time in
  the storm ticks the sampler attributed (``contention.page_faults.kernel_ms``), else the residual rule.
"""
from __future__ import annotations

from .. import thresholds as T
from .. import vocab as V
from .diagnosis_cpu import _busy_workers
from .evidence import _ms
from .whatif_pred import HOST_CATS, RESIDUAL, _part_ms, _pred, scaled_saving_ms
from ..result.headline import busiest_other_thread, thread_busy_ms



def _blocking(res: dict) -> dict:
    return (res.get("contention") or {}).get("blocking") or {}


_CLASS_CATEGORY = {**{c: "cpu_preprocessing" for c in V.PREPROCESSING_CLASSES}, V.CLS_FRAMEWORK: "framework_overhead",
                   V.CLS_CPU_COMPUTE: "cpu_compute", V.CLS_PAGE_FAULTS: "cpu_compute"}


def _io_frames_cpu(res: dict, rows: list[dict]) -> tuple[float, tuple[str, ...]]:
    """The on-CPU self time sampled in the functions whose frames issued the I/O calls (culprits.functions rows of
    the same function, file and thread as a blocking row's frame "file:line function"), and its categories: the
    Python that opens, reads into and closes the buffers goes with the reads it issues."""
    frames = set()
    for r in rows:
        if r.get("kind") == "io" and r.get("frame") and " " in r["frame"]:
            loc, fn = r["frame"].split(" ", 1)
            frames.add((fn, loc.rsplit(":", 1)[0], r.get("thread")))
    ms, cats = 0.0, set()
    for f in (res.get("culprits") or {}).get("functions") or []:
        key = (f.get("function"), str(f.get("file") or "").rsplit(":", 1)[0])
        cat = _CLASS_CATEGORY.get(f.get("class"))
        if cat and ((*key, f.get("thread")) in frames or (*key, None) in frames):
            ms += float(f.get("self_ms") or 0.0)
            cats.add(cat)
    return ms, tuple(sorted(cats))


def _blocking_io(res: dict) -> dict | None:
    b = _blocking(res)
    io, wait, att = (float(b.get(k) or 0.0) for k in ("io_ms", "waiting_ms", "attributed_ms"))
    cpu, cpu_cats = _io_frames_cpu(res, b.get("calls") or [])
    high = io + max(0.0, wait - att) * (io / att if att > 0 else 0.0) + cpu
    low = io * (1.0 - T.WHATIF_WAIT_RESIDUAL_FRACTION)
    return _pred(res, "remove", io, low, high,
                 f"contention.blocking.io_ms {io:.3f} (sampled I/O calls); low keeps {RESIDUAL}; high adds the "
                 f"unattributed off-CPU time (waiting_ms {wait:.3f} - attributed_ms {att:.3f}) at the same I/O share "
                 f"and the on-CPU self time of the functions issuing the I/O ({cpu:.3f} ms, culprits.functions)",
                 ("waiting",) + cpu_cats, key="io", sampled="low,high")


def _lock_wait(res: dict) -> dict | None:
    """The lock waits go away - except the part spent while a followed child process worked: that wait is for the
    child's result (a Pool / DataLoader queue), which a shorter lock does not bring sooner (zoo's spawn workers: 1.3 s of
    'lock' wait, 65 % of the window, was the workers' preprocessing; predicting it removable ranked it first)."""
    b = _blocking(res)
    lock, futex = float(b.get("lock_ms") or 0.0), float(b.get("futex_ms") or 0.0)
    wait, att = float(b.get("waiting_ms") or 0.0), float(b.get("attributed_ms") or 0.0)
    kids = float((res.get("children") or {}).get("waiting_on_children_ms") or 0.0)
    own = max(0.0, lock - kids)
    unatt = max(0.0, wait - att) * (own / att if att > 0 else 0.0)
    return _pred(res, "remove", own, own * (1.0 - T.WHATIF_WAIT_RESIDUAL_FRACTION), max(own, futex - kids, 0.0) + unatt,
                 f"contention.blocking.lock_ms {lock:.3f} (lock waits with no other Python running) less "
                 f"children.waiting_on_children_ms {kids:.3f} (waiting while a child worked: its result, not the lock); "
                 f"low keeps {RESIDUAL}; high: every futex wait less that (futex_ms {futex:.3f}) plus the unattributed "
                 f"off-CPU time (waiting_ms {wait:.3f} - attributed_ms {att:.3f}) at the lock's share",
                 ("waiting",), key="lock", sampled="low,high")


def _cpus(res: dict) -> int:
    c = res.get("counters") or {}
    n = ((c.get("numa") or {}).get("process_cpus") or (c.get("process_cores") or {}).get("cores")
         or T.WHATIF_SCALE_DEFAULT_WORKERS)
    return max(1, int(n))


def _gil(res: dict) -> dict | None:
    g = (res.get("contention") or {}).get("gil") or {}
    ms, p, c = float(g.get("waiting_while_python_ms") or 0.0), int(g.get("python_threads") or 1), _cpus(res)
    share = min(1.0, c / (p + 1))
    rq = _runq_ms(res)
    return _pred(res, "overlap", ms * share, ms / (p + 1), ms + rq,
                 f"contention.gil.waiting_while_python_ms {ms:.3f} x min(1, {c} CPU(s) / ({p} other Python thread(s) + 1)); "
                 f"low: one core shared by all; high: the whole wait plus the run-queue delay counters.main_runq_pct x e2e "
                 f"= {rq:.3f} (paced threads free the cores too)", ("waiting",), key="gil", sampled="low,high")


def _runq_ms(res: dict) -> float:
    pct = float((res.get("counters") or {}).get("main_runq_pct") or 0.0)
    return pct / 100.0 * float(res.get("e2e_ms") or 0.0)


def _demand(res: dict) -> tuple[int, int]:
    tt = int(((res.get("counters") or {}).get("numa") or {}).get("torch_threads") or 1)
    return tt + len(_busy_workers(res)), _cpus(res)


_OWN_OPS = ("intra-op threads only: the main thread's run-queue delay is its own ops' other threads doing the same "
            "work on the same cores (work-conserving), so the expected saving is 0 - zoo_omp_oversub, 8 torch threads "
            "on 2 CPUs, saved 2.3 ms of 175 ms with set_num_threads(2), bench/README.md; ")


def _threads_only(res: dict) -> bool:
    """The oversubscription is the torch threads' alone: no busy worker process, no other busy Python thread (native
    threads - the intra-op pool itself - do not count)."""
    rows = ((res.get("threads") or {}).get("threads")) or []
    py_busy = [r for r in rows if not r.get("critical") and not str(r.get("thread", "")).startswith(V.NATIVE_THREAD_LABEL)
               and thread_busy_ms(r) > 0]
    return not _busy_workers(res) and not py_busy


def _oversub(res: dict) -> dict | None:
    d, c = _demand(res)
    if d <= c:
        return None
    rq, cc = _runq_ms(res), _ms(res, "cpu_compute")
    high = rq + cc * (1.0 - c / d)
    if _threads_only(res):
        return _pred(res, "scale", 0.0, 0.0, high,
                     _OWN_OPS + f"high: the run-queue delay counters.main_runq_pct x e2e = {rq:.3f} plus "
                     f"breakdown[cpu_compute].ms {cc:.3f} x (1 - {c}/{d}) (a runtime that spin-waits, every parallel op "
                     "waiting for its slowest descheduled thread)", ("waiting", "cpu_compute"), key="runq")
    return _pred(res, "scale", rq, rq * (d - c) / d, high,
                 f"run-queue delay counters.main_runq_pct x e2e = {rq:.3f}; {d} busy threads on {c} CPU(s): low x "
                 f"({d} - {c})/{d}; high adds breakdown[cpu_compute].ms {cc:.3f} x (1 - {c}/{d})",
                 ("waiting", "cpu_compute"), key="runq")


def _runq(res: dict) -> dict | None:
    d, c = _demand(res)
    busy = busiest_other_thread(res)
    if d <= c and (busy is None or thread_busy_ms(busy[1]) <= 0):
        return None
    rq, sampled = _runq_ms(res), _part_ms(res, "waiting", "run_queue")
    if _threads_only(res):
        return _pred(res, "remove", 0.0, 0.0, rq, _OWN_OPS + f"high: the run-queue delay counters.main_runq_pct x e2e = "
                     f"{rq:.3f} (schedstat)", ("waiting",), key="runq")
    return _pred(res, "remove", rq, min(rq * (1.0 - T.WHATIF_WAIT_RESIDUAL_FRACTION), sampled), rq,
                 f"run-queue delay counters.main_runq_pct x e2e = {rq:.3f} (schedstat); low: keeps {RESIDUAL} (the work "
                 f"runs slower beside the process moved off its core), or the sampled "
                 f"breakdown[waiting].parts[run_queue].ms {sampled:.3f} when smaller", ("waiting",), key="runq")


def _underuse(res: dict) -> dict | None:
    c = res.get("counters") or {}
    nm, pc = c.get("numa") or {}, c.get("process_cores") or {}
    t, cpus, util = int(nm.get("torch_threads") or 0), int(nm.get("process_cpus") or 0), pc.get("mean_util_pct")
    if t < 1 or cpus < 1 or util is None:
        return None
    cores = float(pc.get("cores") or cpus)
    idle = cores * (100.0 - float(util)) / 100.0
    top = max(t, cpus - len(_busy_workers(res)))
    n = min(float(top), t + idle)
    if n <= t:
        return None
    cc = _ms(res, "cpu_compute")
    eff = T.WHATIF_THREAD_SCALING_LOW_EFFICIENCY
    return _pred(res, "scale", scaled_saving_ms(cc, t, n), scaled_saving_ms(cc, t, n, eff), scaled_saving_ms(cc, t, top),
                 f"breakdown[cpu_compute].ms {cc:.3f} x (1 - {t} torch thread(s) / {n:.2f}), {n:.2f} = min({top} CPU(s) "
                 f"less busy workers, {t} + {idle:.2f} idle core(s) of counters.process_cores); low: added threads at "
                 f"thresholds.WHATIF_THREAD_SCALING_LOW_EFFICIENCY {eff:g}; high: linear over {top} CPU(s)",
                 ("cpu_compute",), key="threads", sampled="low,high")


def _faults(res: dict) -> dict | None:
    c = res.get("counters") or {}
    sys_ms = float(c.get("sys_cpu_pct") or 0.0) / 100.0 * float(res.get("e2e_ms") or 0.0)
    pf = (res.get("contention") or {}).get("page_faults") or {}
    k = pf.get("kernel_ms")
    low = float(k) if k is not None else sys_ms * (1.0 - T.WHATIF_WAIT_RESIDUAL_FRACTION)
    cats = tuple(x for x in HOST_CATS if x != "waiting") + ("cpu_compute",)
    return _pred(res, "remove", sys_ms, low, sys_ms,
                 f"kernel CPU counters.sys_cpu_pct x e2e = {sys_ms:.3f}; low: "
                 + (f"contention.page_faults.kernel_ms {float(k):.3f}" if k is not None else f"keeps {RESIDUAL}"),
                 cats, key="faults", sampled="low" if k is not None else "")


MODELS = {"blocking_io": _blocking_io, "lock_wait": _lock_wait, "gil_contention": _gil,
          "cpu_oversubscription": _oversub, "cpu_run_queue": _runq, "page_fault_storm": _faults,
          "cpu_underuse": _underuse}
