"""Planted (CUDA): large bf16 matrix products back to back; almost no host work.
Expected: gpu_bound, finding gpu_compute_bound (and dominant_kernel when another kernel exists).
ZOO_STEPS sets the number of products (default 150, ~0.2 s on an H100)."""
import os

import torch

from _gpu_common import require_cuda, timed_inference

dev = require_cuda()
n = int(os.environ.get("ZOO_GEMM_N", "8192"))
a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
for _ in range(3):
    c = a @ b
steps = int(os.environ.get("ZOO_STEPS", "150"))
with timed_inference():
    for _ in range(steps):
        c = a @ b
print(f"flops {2.0 * n ** 3 * steps:.6g}")
print("checksum", float(c[0, 0]))
