"""Planted (CUDA): pure-Python tokenization in front of a small GPU model; the model step is
short. Expected: cpu_bound with the tokenization part dominant, finding cpu_preprocessing."""
import os

import torch

from _gpu_common import require_cuda, timed_inference
from _toy_tokenizer import TEXT, tokenize

dev = require_cuda()
model = torch.nn.Sequential(torch.nn.Embedding(50_000, 256), torch.nn.Linear(256, 256)).to(dev)
with torch.inference_mode():
    model(torch.zeros(1, 64, dtype=torch.long, device=dev))
with timed_inference(), torch.inference_mode():
    for _ in range(int(os.environ.get("ZOO_STEPS", "30"))):
        ids = tokenize(TEXT)
        out = model(torch.tensor(ids[:4096], device=dev).reshape(1, -1))
print("tokens", len(ids), float(out[0, 0, 0]))
