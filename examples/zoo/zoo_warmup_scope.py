"""Planted: a repeated scope("step") whose first call is a slow warm-up (a 0.35 s one-off, e.g. a
cache fill), then 12 steps of ~40 ms of torch compute. Truth: steady steps are cpu_compute."""
import os
import time

import torch

from _truth import gap, phase
from inferscope import scope

torch.set_num_threads(1)
a = torch.randn(320, 320)
gap("framework_overhead/framework_python")
for i in range(int(os.environ.get("ZOO_ITERS", "12")) + 1):
    with scope("step"):
        if i == 0:
            with phase("warmup", expect="waiting"):
                time.sleep(0.35)
        with phase("compute", expect="cpu_compute"), torch.inference_mode():
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 0.04:
                a @ a
