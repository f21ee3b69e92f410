"""Planted: tokenization (pure Python BPE-like merging) dominates; the model step is tiny."""
import re

import torch

from inferscope import scope

torch.set_num_threads(1)
TEXT = ("the quick brown fox jumps over the lazy dog while the profiler watches every token " * 1200)


def tokenize(text: str) -> list[int]:
    ids = []
    for word in re.findall(r"\w+|\S", text):
        pieces = list(word)
        while len(pieces) > 1:          # greedy pair merging, deliberately slow
            pieces = [pieces[0] + pieces[1]] + pieces[2:]
        ids.append(hash(pieces[0]) % 50_000)
    return ids


model = torch.nn.Linear(64, 64)
with scope("inference"):
    for _ in range(30):     # ~0.8 s: ~70 samples at the ~90 Hz a pure-Python thread lets the sampler reach
        ids = tokenize(TEXT)
        with torch.inference_mode():
            model(torch.tensor(ids[:64], dtype=torch.float32).reshape(1, 64))
print("tokens", len(ids))
