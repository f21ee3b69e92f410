"""Planted: CPU starvation.  The main thread runs pure Python pinned to one CPU while a busy child
process is pinned to the same CPU, so the thread is runnable but not running about half the time.
Truth (self-timed): the main thread's own schedstat over the scope - on-CPU ns and run-queue ns -
printed as one JSON line; the run-queue part belongs in the breakdown's waiting / run queue, the
on-CPU part in user code.  Linux only (sched_setaffinity, /proc schedstat).

``--work N`` (bench/bench_whatif.py): N spin chunks instead of ZOO_SECONDS, the same work in both variants.
``--fixed`` (or ZOO_FIXED=1): cpu_run_queue's suggestion applied - the busy process runs on another CPU than the
main thread (fewer busy threads than cores on the main thread's CPU); on a 1-CPU affinity nothing changes."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

from inferscope import scope


def schedstat() -> tuple[int, int]:
    with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
        on, rq = f.read().split()[:2]
    return int(on), int(rq)


FIXED = "--fixed" in sys.argv or os.environ.get("ZOO_FIXED") == "1"
WORK = int(sys.argv[sys.argv.index("--work") + 1]) if "--work" in sys.argv else None


def spin(seconds: float, chunks: int | None = None) -> int:
    x, t, n = 0, time.perf_counter(), 0
    while (n < chunks) if chunks is not None else (time.perf_counter() - t < seconds):
        for i in range(2000):
            x += i * i % 7
        n += 1
    return x


cpu = min(os.sched_getaffinity(0))
hog_cpu = max(os.sched_getaffinity(0)) if FIXED else cpu
os.sched_setaffinity(0, {cpu})                      # this (main) thread only
hog = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{hog_cpu}}})\nwhile True: pass"])
try:
    time.sleep(0.2)                                  # the hog is running on that CPU
    on0, rq0 = schedstat()
    t0 = time.perf_counter_ns()
    with scope("inference"):
        spin(float(os.environ.get("ZOO_SECONDS", "0.8")), WORK)
    t1 = time.perf_counter_ns()
    on1, rq1 = schedstat()
finally:
    hog.send_signal(signal.SIGKILL)
    hog.wait()
print(json.dumps({"wall_ns": t1 - t0, "oncpu_ns": on1 - on0, "runq_ns": rq1 - rq0, "cpu": cpu, "hog_cpu": hog_cpu}))
