"""Planted (CUDA without torch): a CuPy loop of tiny elementwise kernels launched one by one from
Python. CuPy launches through the driver API (cuLaunchKernel); no torch in the process, so the GPU
timeline comes from CUPTI alone (collect/gpu_activity.py starts on `import cupy`). Expected: every
kernel in the window with its launch call; a launch-bound verdict.
Prints workload_s / gpu_s (wall and CUDA-event time of the loop) and launches_s (kernels launched in it)."""
import os
import time

import cupy as cp

try:
    from inferscope import scope
except ImportError:
    import contextlib

    def scope(name):
        return contextlib.nullcontext()

x = cp.zeros(256, dtype=cp.float32)
for _ in range(100):          # warm-up: context, module loading, kernel compilation (outside the scope)
    x += 1.0
cp.cuda.runtime.deviceSynchronize()
n = int(os.environ.get("ZOO_STEPS", "20000"))
e0, e1 = cp.cuda.Event(), cp.cuda.Event()
t0 = time.perf_counter()
with scope("inference"):
    e0.record()
    for _ in range(n):
        x += 1.0
    e1.record()
    e1.synchronize()
dt = time.perf_counter() - t0
print(f"workload_s {dt:.4f}")
print(f"gpu_s {cp.cuda.get_elapsed_time(e0, e1) / 1e3:.4f}")
print(f"launches_s {n}")
print("checksum", float(x[0]))
