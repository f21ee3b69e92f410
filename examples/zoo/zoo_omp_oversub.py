"""Planted: oversubscribed OpenMP -- torch with 8 intra-op threads on a smaller machine, large
matmuls. Truth: cpu_compute (the main thread waits on its OpenMP workers, which do the math)."""
import os

import torch

from _truth import gap, phase
from inferscope import scope

torch.set_num_threads(int(os.environ.get("ZOO_THREADS", "8")))
a = torch.randn(768, 768)
gap("framework_overhead/framework_python")
with scope("inference"), torch.inference_mode():
    for _ in range(int(os.environ.get("ZOO_ITERS", "12"))):
        with phase("matmul", expect="cpu_compute"):
            b = a @ a
            b = b @ a
print("threads", torch.get_num_threads(), float(b[0, 0]))
