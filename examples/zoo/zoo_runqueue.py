"""Planted: CPU starvation.  The main thread runs pure Python pinned to one CPU while a busy child
process is pinned to the same CPU, so the thread is runnable but not running about half the time.
Truth (self-timed): the main thread's own schedstat over the scope - on-CPU ns and run-queue ns -
printed as one JSON line; the run-queue part belongs in the breakdown's waiting / run queue, the
on-CPU part in user code.  Linux only (sched_setaffinity, /proc schedstat)."""
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


def spin(seconds: float) -> int:
    x, t = 0, time.perf_counter()
    while time.perf_counter() - t < seconds:
        for i in range(2000):
            x += i * i % 7
    return x


cpu = min(os.sched_getaffinity(0))
os.sched_setaffinity(0, {cpu})                      # this (main) thread only
hog = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
try:
    time.sleep(0.2)                                  # the hog is running on that CPU
    on0, rq0 = schedstat()
    t0 = time.perf_counter_ns()
    with scope("inference"):
        spin(float(os.environ.get("ZOO_SECONDS", "0.8")))
    t1 = time.perf_counter_ns()
    on1, rq1 = schedstat()
finally:
    hog.send_signal(signal.SIGKILL)
    hog.wait()
print(json.dumps({"wall_ns": t1 - t0, "oncpu_ns": on1 - on0, "runq_ns": rq1 - rq0, "cpu": cpu}))
