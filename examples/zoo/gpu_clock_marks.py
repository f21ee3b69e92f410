"""Clock-alignment probe (CUDA): launches a spin kernel (torch.cuda._sleep) between two
perf_counter_ns readings - just before the launch and just after torch.cuda.synchronize()
returns - and writes those pairs to the JSON file named by argv[1]. In a correct merged trace
each spin kernel lies inside its pair: start >= launch reading, end <= sync-return reading."""
import json
import sys
import time

import torch

from _gpu_common import require_cuda, scope

dev = require_cuda()
torch.cuda._sleep(1000)
torch.cuda.synchronize()
marks = []
with scope("inference"):
    for i in range(8):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        torch.cuda._sleep(20_000_000)      # ~10 ms of spinning on the GPU
        torch.cuda.synchronize()
        t1 = time.perf_counter_ns()
        marks.append([t0, t1])
        time.sleep(0.005)
with open(sys.argv[1], "w") as f:
    json.dump({"clock": "time.perf_counter_ns", "marks": marks}, f)
print("marks", len(marks))
