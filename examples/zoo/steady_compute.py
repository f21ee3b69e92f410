"""Planted, no scope(): model compute (large matmuls on the CPU) dominates the steady state, after
a slow `import torch` and model construction.  The default window must be the steady state, where
cpu_compute is the top category.

Self-timed truth: prints one JSON line {"import_s", "build_s", "loop_s", "matmul_s"} (perf_counter).
"""
import json
import time

t0 = time.perf_counter()
import torch  # noqa: E402  (the slow import is the point)

t1 = time.perf_counter()
torch.set_num_threads(1)
model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(4)])
x = torch.randn(128, 1024)
t2 = time.perf_counter()
mm = 0.0
with torch.inference_mode():
    for _ in range(60):
        a = time.perf_counter()
        y = model(x)
        mm += time.perf_counter() - a
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "build_s": t2 - t1, "loop_s": t3 - t2, "matmul_s": mm, "out": float(y.sum())}))
