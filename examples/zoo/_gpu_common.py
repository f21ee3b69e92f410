"""Helpers shared by the CUDA entries of the planted-bottleneck zoo (gpu_*.py).

Each CUDA workload warms up outside `scope("inference")` (CUDA context, cuBLAS handles, lazy
module loading stay out of the window), runs its steady-state loop inside it, and prints what it
measured itself on the same clock as the trace, so tests can compare InferScope with the truth:
  workload_s  wall time of the scoped loop (time.perf_counter)
  gpu_s       GPU time of the scoped loop between two CUDA events (kernel-side time)
"""
import contextlib
import time

import torch

try:
    from inferscope import scope
except ImportError:     # run without InferScope installed
    def scope(name):
        return contextlib.nullcontext()


def require_cuda() -> str:
    if not torch.cuda.is_available():
        raise SystemExit("this zoo entry needs a CUDA GPU (torch.cuda.is_available() is False)")
    torch.set_num_threads(1)
    return "cuda"


@contextlib.contextmanager
def timed_inference():
    """scope('inference') + wall and CUDA-event timing of the block; prints workload_s / gpu_s."""
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    with scope("inference"):
        e0.record()
        yield
        e1.record()
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(f"workload_s {dt:.4f}")
    print(f"gpu_s {e0.elapsed_time(e1) / 1e3:.4f}")
