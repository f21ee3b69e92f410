"""Planted: thread under-use (issue 24 item 7).  torch.set_num_threads(1) while the process may use more
CPUs, and the window is ~1.5 s of CPU matmuls: the other cores stay idle (unless other jobs use them).
Truth (self-timed): the CPU count and torch threads, one JSON line.
"""
import json
import os
import time

import torch

from inferscope import scope

torch.set_num_threads(1)
a = torch.randn(512, 512)
t0 = time.perf_counter()
with scope("inference"), torch.inference_mode():
    while time.perf_counter() - t0 < float(os.environ.get("ZOO_SECONDS", "1.5")):
        b = a @ a
print(json.dumps({"cpus": len(os.sched_getaffinity(0)), "torch_threads": torch.get_num_threads(),
                  "loop_s": time.perf_counter() - t0}))
