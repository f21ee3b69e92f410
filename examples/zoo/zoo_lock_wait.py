"""Planted: the main thread waits on a threading.Lock another thread holds (while it sleeps), then
runs Python. Truth: the lock wait is 'waiting', the Python loop user code; all threads (union view): the
main thread's CPU plus the holder's (cpu_mark readings; it sleeps holding the lock, ~0)."""
import os
import sys
import threading
import time

from _truth import cpu_mark, gap, phase, union
from inferscope import scope

FIXED = "--fixed" in sys.argv or os.environ.get("ZOO_FIXED") == "1"   # bench/bench_whatif.py: the top suggestion applied
lock = threading.Lock()
go = threading.Event()


def holder():
    cpu_mark()
    while True:
        go.wait()
        cpu_mark()
        go.clear()
        if FIXED:                  # the critical section shortened: the sleep (I/O stand-in) outside the lock
            with lock:
                pass
            time.sleep(0.04)
        else:
            with lock:
                time.sleep(0.04)
        cpu_mark()


union()

threading.Thread(target=holder, daemon=True).start()


def spin(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


gap("framework_overhead/framework_python")
with scope("inference"):
    for _ in range(int(os.environ.get("ZOO_ITERS", "15"))):
        go.set()
        time.sleep(0.002)  # the holder takes the lock (part of the wait)
        with phase("lock_wait", expect="waiting"):
            time.sleep(0)
            with lock:
                pass
        with phase("python", expect="cpu_preprocessing/user_code"):
            spin(150_000)
