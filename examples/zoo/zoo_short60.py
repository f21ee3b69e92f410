"""Planted: a 60 ms program without scope(): ~60 ms of pure Python (unloaded) after start-up. Truth:
the work phase is user code; everything from the process start to it (interpreter start, InferScope's
bootstrap) is start-up: the default window leaves the interpreter's part out (run_phases rule interpreter),
--window all shows it as 'other' (not sampled).  ZOO_ITERS=N: N times the work (a test on a loaded host wants more
than the ~8 sampler ticks of 40 ms)."""
import os

from _truth import phase, startup

startup("other")


def spin(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


with phase("work", expect="cpu_preprocessing/user_code"):
    spin(400_000 * max(1, int(os.environ.get("ZOO_ITERS", "1") or 1)))
