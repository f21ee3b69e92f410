"""Planted: thread under-use (issue 24 item 7).  torch.set_num_threads(1) while the process may use more
CPUs, and the window is ~1.5 s of CPU matmuls: the other cores stay idle (unless other jobs use them).
Truth (self-timed): the CPU count and torch threads, one JSON line.

``--work N`` (bench/bench_whatif.py): N matmuls instead of ZOO_SECONDS, the same work in both variants.
``--fixed`` (or ZOO_FIXED=1): cpu_underuse's suggestion applied - torch.set_num_threads(the process's CPUs).
"""
import json
import os
import time

import sys

import torch

from inferscope import scope

FIXED = "--fixed" in sys.argv or os.environ.get("ZOO_FIXED") == "1"
WORK = int(sys.argv[sys.argv.index("--work") + 1]) if "--work" in sys.argv else None
torch.set_num_threads(len(os.sched_getaffinity(0)) if FIXED else 1)
a = torch.randn(512, 512)
t0 = time.perf_counter()
n = 0
with scope("inference"), torch.inference_mode():
    while (n < WORK) if WORK is not None else (time.perf_counter() - t0 < float(os.environ.get("ZOO_SECONDS", "1.5"))):
        b = a @ a
        n += 1
print(json.dumps({"cpus": len(os.sched_getaffinity(0)), "torch_threads": torch.get_num_threads(),
                  "loop_s": time.perf_counter() - t0, "matmuls": n}))
