"""Planted: a page-fault heavy phase (numpy writes to freshly allocated pages) run after a model
forward and after a pure-Python phase. Truth: the page-touching phase is page-fault kernel time both times,
cpu_compute's part page_faults (issue 45: it read as plain compute; the issue before saw it inherit the previous
phase's class).  By construction: one store per fresh 4 KiB page, so the phase's CPU is the kernel's - the --fixed
variant, the same stores on pages touched before, takes 3 % of its CPU time (6.6 ms vs 206 ms for 8 calls)."""
import os
import sys

import numpy as np
import torch

from _truth import gap, phase
from inferscope import scope

FIXED = "--fixed" in sys.argv or os.environ.get("ZOO_FIXED") == "1"   # bench/bench_whatif.py: the top suggestion applied
torch.set_num_threads(1)
model = torch.nn.Linear(1024, 1024)


def spin(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def touch():
    # 4 fresh 48 MiB arrays, one write per 4 KiB page: mostly page faults (~20 ms in all; at ~5 ms, one
    # array, the call was shorter than the sampler's 5 ms tick and the tick after it - at the next
    # GIL release, often inside the forward that follows - named it in 2 runs of 3)
    s = 0.0
    for k in range(4):
        a = BUFS[k] if FIXED else np.empty(48 * 1024 * 1024 // 8)
        a[::512] = 1.0
        s += float(a[::4096].sum())
    return s


# --fixed: the page_fault_storm suggestion: buffers allocated (and their pages touched) once, reused per call
BUFS = [np.ones(48 * 1024 * 1024 // 8) for _ in range(4)] if FIXED else []
gap("framework_overhead/framework_python")
with scope("inference"):
    for _ in range(int(os.environ.get("ZOO_ITERS", "8"))):
        with phase("forward", expect="cpu_compute"), torch.inference_mode():
            model(torch.randn(256, 1024))
        with phase("touch_after_forward", expect="cpu_compute" if FIXED else "cpu_compute/page_faults"):
            touch()
        with phase("python", expect="cpu_preprocessing/user_code"):
            spin(60_000)
        with phase("touch_after_python", expect="cpu_compute" if FIXED else "cpu_compute/page_faults"):
            touch()
