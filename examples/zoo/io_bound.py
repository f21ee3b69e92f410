"""Planted: the request loop blocks off-CPU (sleep standing in for network / disk I/O)."""
import os
import time

import torch

from inferscope import scope

torch.set_num_threads(1)
model = torch.nn.Linear(128, 128)
r, w = os.pipe()
with scope("inference"):
    for _ in range(8):
        time.sleep(0.06)                 # waiting for the next request
        os.write(w, b"x")
        os.read(r, 1)
        with torch.inference_mode():
            model(torch.randn(4, 128))
print("done")
