"""Planted: tokenization (pure Python BPE-like merging) dominates; the model step is tiny."""
import torch

from _toy_tokenizer import TEXT, tokenize
from inferscope import scope

torch.set_num_threads(1)
model = torch.nn.Linear(64, 64)
with scope("inference"):
    for _ in range(30):     # ~0.8 s: ~70 samples at the ~90 Hz a pure-Python thread lets the sampler reach
        ids = tokenize(TEXT)
        with torch.inference_mode():
            model(torch.tensor(ids[:64], dtype=torch.float32).reshape(1, 64))
print("tokens", len(ids))
