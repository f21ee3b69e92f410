"""Planted: thread oversubscription (issue 24 item 7).  The main process runs torch matmuls with as many
intra-op threads as the CPUs it may use (sched_getaffinity), while a DataLoader(num_workers=2) keeps two
worker processes busy with pure-Python preprocessing: threads + workers > CPUs (2 + 2 on a 2-core box).
Truth (self-timed): the CPU count, torch threads, worker count and the workers' CPU time, one JSON line.
"""
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

from inferscope import scope


class Items(Dataset):
    def __len__(self):
        return int(os.environ.get("ZOO_ITERS", "96")) * 4

    def __getitem__(self, i):
        c = time.process_time()
        x = 0
        while time.process_time() - c < 0.008:       # 8 ms of pure-Python CPU per item (CPU, not wall: other jobs
                                                     # on the box must not turn the workers into idle waiters)
            x += sum(range(200))
        return torch.full((64,), float(x % 7)), time.process_time() - c


if __name__ == "__main__":
    FIXED = "--fixed" in sys.argv or os.environ.get("ZOO_FIXED") == "1"   # bench/bench_whatif.py: the top suggestion applied
    cpus = len(os.sched_getaffinity(0))
    # --fixed: the cpu_oversubscription suggestion where the main process waits for its workers (they are the
    # bottleneck): one torch thread, the workers kept (cutting them to 1 ran 1.2 s slower, 2026-11-29)
    threads, workers = (1, 2) if FIXED else (cpus, 2)
    torch.set_num_threads(threads)
    w = torch.randn(384, 384)
    worker_cpu = 0.0
    t0 = time.perf_counter()
    with scope("inference"), torch.inference_mode():
        for xb, cpu in DataLoader(Items(), batch_size=4, num_workers=workers):
            worker_cpu += float(cpu.sum())
            for _ in range(2):       # less main-process work per batch than the workers' 32 ms: workers stay the
                                     # bottleneck (busy) even when other jobs slow everything down
                w = torch.tanh(w @ w)
    loop_s = time.perf_counter() - t0
    print(json.dumps({"cpus": cpus, "torch_threads": torch.get_num_threads(), "workers": workers,
                      "worker_cpu_s": worker_cpu, "loop_s": loop_s}))
