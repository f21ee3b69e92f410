"""Planted (CUDA): a decode-like loop that reads a scalar back with .item() after every step.
Each .item() is a D2H copy + stream synchronisation: the host waits for the GPU, then the GPU
waits for the host to launch the next step, so no host work overlaps GPU work.  The GPU work per
step is tiny.  Expected: finding sync_stall naming aten::_local_scalar_dense (the op behind
.item()) with one 4-byte D2H read per step; the verdict is launch_bound, not sync_bound: measured
on an H100, of the ~26 us per step spent inside .item() only ~5 us is the host waiting for the
GPU, the rest is host-side op and API overhead (bench/README.md).
Prints item_s: the wall time spent inside .item() (the truth to compare with)."""
import os
import time

import torch

from _gpu_common import require_cuda, timed_inference

dev = require_cuda()
b = torch.randn(64, 64, device=dev)
x = b.clone()
w = torch.randn(64, 64, device=dev) * 0.01   # x <- b + x @ w stays bounded (|w| << 1)
for _ in range(20):
    x = torch.addmm(b, x, w)
    x[0, 0].item()
item_ns = 0
with timed_inference():
    for _ in range(int(os.environ.get("ZOO_STEPS", "3000"))):
        x = torch.addmm(b, x, w)
        t = time.perf_counter_ns()
        v = x[0, 0].item()                      # the per-step sync
        item_ns += time.perf_counter_ns() - t
        if v != v:                              # a data-dependent check, as a stop condition would be
            break
print(f"item_s {item_ns / 1e9:.4f}")
