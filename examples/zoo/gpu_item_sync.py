"""Planted (CUDA): a decode-like loop that reads a scalar back with .item() after every step.
Each .item() is a D2H copy + stream synchronisation: the host waits for the GPU, then the GPU
waits for the host to launch the next step. The GPU work per step is tiny, so the round trip
dominates. Expected: sync_bound, finding sync_stall naming aten::item / the tiny D2H reads.
Prints item_s: the wall time spent inside .item() (the truth to compare with)."""
import os
import time

import torch

from _gpu_common import require_cuda, timed_inference

dev = require_cuda()
x = torch.randn(64, 64, device=dev)
w = torch.randn(64, 64, device=dev) * 0.01
for _ in range(20):
    x = torch.addmm(x, x, w)
    x[0, 0].item()
item_ns = 0
with timed_inference():
    for _ in range(int(os.environ.get("ZOO_STEPS", "3000"))):
        x = torch.addmm(x, x, w)
        t = time.perf_counter_ns()
        v = x[0, 0].item()                      # the per-step sync
        item_ns += time.perf_counter_ns() - t
        if v > 1e30:
            break
print(f"item_s {item_ns / 1e9:.4f}")
