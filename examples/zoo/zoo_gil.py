"""Planted: GIL contention -- 3 Python threads spin while the main thread runs a Python loop.
Truth (main thread): its CPU time in the loop (time.thread_time_ns) is user code; the rest of the loop's
wall time, less its run-queue delay (schedstat), it is off-CPU waiting for the GIL: waiting/off_cpu
(the OS's own accounting, independent of InferScope; gil_contention names the cause).
All threads (union view): every thread's CPU time in the window (cpu_mark readings) summed - the spinners
hold the GIL whenever the main thread does not, so ~100 % of one core."""
import os
import sys
import time
import threading

from _truth import cpu_mark, gap, phase, union
from inferscope import scope

FIXED = "--fixed" in sys.argv or os.environ.get("ZOO_FIXED") == "1"   # bench/bench_whatif.py: the top suggestion applied
stop = threading.Event()


def spinner():
    s = 0
    cpu_mark()
    while not stop.is_set():
        for i in range(10_000):
            s += i
        # its CPU time for the all-threads truth, every ~150-300 us of its work (an edge error of one gap; a mark
        # per ~30 us was ~6 % of the spinner's CPU, and the GIL-point bias of the sampler's frames (not the main
        # thread's: no timer signal there) read it as 38 % of the spinners' overlap once, naming cpu_mark)
        cpu_mark()
        if FIXED:             # the gil_contention suggestion: pace background threads (sleep between polls)
            time.sleep(0.002)


def spin(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


union()
threads = [threading.Thread(target=spinner, daemon=True) for _ in range(3)]
for t in threads:
    t.start()
# One phase for the whole loop, inside the scope.  Between two calls of this thread's Python (a phase's exit and
# the next one's entry, the scope's entry and the phase's) it may wait for the GIL for 50-200 ms beside the
# spinners: that wait, outside any phase, is the gap - waiting/off_cpu, not framework (with a phase per
# iteration the truth planted 5-63 % of the window as framework_python in 4 runs of 12; with the phase around
# the scope its CPU was prorated over up to 210 ms before the window, 2026-11-26)
gap("waiting/off_cpu")
with scope("inference"):
    with phase("python", expect="cpu_preprocessing/user_code", off_cpu="waiting/off_cpu"):
        for _ in range(int(os.environ.get("ZOO_ITERS", "10"))):
            spin(100_000)
stop.set()
