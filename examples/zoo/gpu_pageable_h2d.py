"""Planted (CUDA): large host->device copies from pageable memory every step; tiny compute.
Expected: copy_bound, finding pageable_copy (fix: pinned host buffers + non_blocking copies)."""
import os

import torch

from _gpu_common import require_cuda, timed_inference

dev = require_cuda()
MB = int(os.environ.get("ZOO_COPY_MB", "128"))
x = torch.randn(MB * 1024 * 1024 // 4)          # pageable (not pinned) host tensor
w = torch.randn(256, 256, device=dev)


def step():
    y = x.to(dev, non_blocking=True)              # pageable source: the driver stages it, the host blocks
    return y[: 256 * 256].view(256, 256) @ w


for _ in range(2):
    step()
with timed_inference():
    for _ in range(int(os.environ.get("ZOO_STEPS", "20"))):
        z = step()
print("checksum", float(z.sum()))
