"""Planted: pure Python of a given size between small torch ops (a decode loop's stop-check).
`--gap-ms X` (default 1.7): X ms of Python between ops of ~1 ms. Truth: ops cpu_compute, the Python
user code."""
import os
import sys
import time

import torch

from _truth import gap, phase
from inferscope import scope

GAP_MS = float(sys.argv[sys.argv.index("--gap-ms") + 1]) if "--gap-ms" in sys.argv else 1.7
torch.set_num_threads(1)
a = torch.randn(160, 160)
gap("framework_overhead/framework_python")


def stop_check(ms):
    t0 = time.perf_counter()
    s = 0
    while time.perf_counter() - t0 < ms / 1000:
        for i in range(50):
            s += i
    return s


with scope("inference"), torch.inference_mode():
    for _ in range(int(os.environ.get("ZOO_ITERS", str(max(40, int(600 / (1 + GAP_MS))))))):
        with phase("op", expect="cpu_compute"):
            for _ in range(4):
                a @ a
        with phase("python", expect="cpu_preprocessing/user_code"):
            stop_check(GAP_MS)
