"""Planted, no scope(): a torch DataLoader(num_workers=2) whose Dataset does the heavy preprocessing
(the pure-Python bilinear resize of mp_preprocess.py) in its worker processes (forked: the Linux
default); the main process only waits for batches and runs a tiny model.  Random-free synthetic
images, no downloads.

Self-timed truth: one JSON line {"import_s", "loop_s", "wait_s", "worker_resize_cpu_s", "workers"}; each item
carries the worker CPU time its resize took.
"""
import json
import os
import sys
import time

t0 = time.perf_counter()
import torch  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mp_preprocess import resize_bilinear  # noqa: E402

t1 = time.perf_counter()


class Images(Dataset):
    def __len__(self):
        return 192

    def __getitem__(self, i):
        c = time.process_time()
        img = torch.tensor(resize_bilinear(i))
        return img, time.process_time() - c


if __name__ == "__main__":
    torch.set_num_threads(1)
    model = torch.nn.Linear(96 * 96, 10)
    wait = worker_cpu = 0.0
    t2 = time.perf_counter()
    loader = DataLoader(Images(), batch_size=8, num_workers=2)
    it = iter(loader)
    while True:
        a = time.perf_counter()
        try:
            imgs, cpu = next(it)
        except StopIteration:
            break
        wait += time.perf_counter() - a
        worker_cpu += float(cpu.sum())
        with torch.inference_mode():
            model(imgs)
    del it             # workers get their end-of-work message and exit normally
    t3 = time.perf_counter()
    print(json.dumps({"import_s": t1 - t0, "loop_s": t3 - t2, "wait_s": wait, "worker_resize_cpu_s": worker_cpu, "workers": 2,
                      "start_method": "fork"}))
