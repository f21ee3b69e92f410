"""Planted (CUDA): tens of thousands of tiny elementwise kernels launched one by one from Python.
Each kernel runs ~2 us; launching it costs the host more. Expected: launch_bound, finding
launch_storm (fix: fuse (torch.compile), CUDA graphs, larger batches)."""
import os

import torch

from _gpu_common import require_cuda, timed_inference

dev = require_cuda()
x = torch.zeros(256, device=dev)
for _ in range(100):
    x.add_(1.0)
with timed_inference():
    for _ in range(int(os.environ.get("ZOO_STEPS", "30000"))):
        x.add_(1.0)
print("checksum", float(x[0]))
