"""Planted: model math outside torch -- a 3-layer MLP in numpy (BLAS matmuls). Truth: cpu_compute."""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402

from _truth import gap, phase  # noqa: E402
from inferscope import scope  # noqa: E402

rng = np.random.default_rng(0)
ws = [rng.standard_normal((512, 512)).astype(np.float32) for _ in range(3)]
x0 = rng.standard_normal((256, 512)).astype(np.float32)
gap("framework_overhead/framework_python")
with scope("inference"):
    for _ in range(int(os.environ.get("ZOO_ITERS", "40"))):
        with phase("mlp", expect="cpu_compute"):
            x = x0
            for w in ws:
                x = np.maximum(x @ w, 0.0)
print("out", float(x.sum()))
