"""Planted: a storm of tiny torch ops (add, mul, relu on 8x8 tensors, one thread), where the dispatcher, TensorIterator
set-up, the allocator and refcounting dominate by construction; ``--gemm``: the same loop shape over 512x512
matmuls, where the math dominates.

Truth (one JSON line on stdout, and the phase in $ZOO_TRUTH): the loop's own CPU time (thread_time) and the math's
share of it, estimated from the same ops on one batched tensor of BATCH 8x8 matrices - the elementwise work of
BATCH loop iterations in one call, REPS calls, the least disturbed of 7 rounds: its CPU per 8x8 matrix is the math
of one iteration, the dispatch paid once per BATCH.  An upper bound for the 8x8 math (L1-resident; the batched
call's 64 KiB tensors sit in L2).  The rest of the loop's CPU is framework overhead (torch's dispatch and the
interpreter's loop around it).  For --gemm the batched estimate is the matmuls themselves (framework share ~0).
"""
import json
import os
import sys
import time

import torch

from _truth import gap, phase
from inferscope import scope

GEMM = "--gemm" in sys.argv
ITERS = int(os.environ.get("ZOO_ITERS", "200" if GEMM else "150000"))
BATCH, REPS = 256, 40       # 64 KiB tensors: in cache and under malloc's mmap threshold (no page faults)
torch.set_num_threads(1)
gap("framework_overhead/framework_python")


def step(a, b):
    c = a + b
    c = c * b
    return c.relu()


def per_iter_math_ns() -> float:
    """CPU ns of one iteration's math, from the batched equivalent (the least disturbed round)."""
    if GEMM:
        a = torch.randn(512, 512)
        a @ a
        best = min(_cpu(lambda: a @ a) for _ in range(5))
        return float(best)
    A, B = torch.randn(BATCH, 8, 8), torch.randn(BATCH, 8, 8)
    step(A, B)

    def rounds():
        for _ in range(REPS):
            step(A, B)
    return min(_cpu(rounds) for _ in range(7)) / (BATCH * REPS)


def _cpu(fn) -> int:
    t0 = time.thread_time_ns()
    fn()
    return time.thread_time_ns() - t0


math_ns = per_iter_math_ns()
a, b = (torch.randn(512, 512), None) if GEMM else (torch.randn(8, 8), torch.randn(8, 8))
with scope("inference"), torch.inference_mode():
    c0 = time.thread_time_ns()
    with phase("gemm" if GEMM else "tiny_ops", expect="cpu_compute" if GEMM else "framework_overhead"):
        if GEMM:
            for _ in range(ITERS):
                a @ a
        else:
            for _ in range(ITERS):
                step(a, b)
    loop_cpu_ns = time.thread_time_ns() - c0
compute_pct = min(100.0, 100.0 * ITERS * math_ns / max(1, loop_cpu_ns))
print(json.dumps({"iters": ITERS, "loop_cpu_ns": loop_cpu_ns, "math_ns_per_iter": round(math_ns, 1),
                  "compute_pct_of_loop_cpu": round(compute_pct, 2),
                  "framework_pct_of_loop_cpu": round(100.0 - compute_pct, 2)}))
