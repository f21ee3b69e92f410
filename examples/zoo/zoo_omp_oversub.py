"""Planted: oversubscribed OpenMP -- torch with 8 intra-op threads on a smaller machine, large
matmuls. Truth: cpu_compute (the main thread waits on its OpenMP workers, which do the math)."""
import os
import sys

import torch

from _truth import gap, phase
from inferscope import scope

FIXED = "--fixed" in sys.argv or os.environ.get("ZOO_FIXED") == "1"   # bench/bench_whatif.py: the top suggestion applied
# --fixed: torch.set_num_threads(the CPUs the process may use), the cpu_oversubscription suggestion
torch.set_num_threads(len(os.sched_getaffinity(0)) if FIXED else int(os.environ.get("ZOO_THREADS", "8")))
a = torch.randn(768, 768)
gap("framework_overhead/framework_python")
with scope("inference"), torch.inference_mode():
    for _ in range(int(os.environ.get("ZOO_ITERS", "12"))):
        with phase("matmul", expect="cpu_compute"):
            b = a @ a
            b = b @ a
print("threads", torch.get_num_threads(), float(b[0, 0]))
