"""Planted: a Rust fast tokenizer (HF `tokenizers`, encode_batch) dominates; a tiny model step.

`--parallel`: Rayon-parallel encoding (TOKENIZERS_PARALLELISM=true, the main thread waits on
native worker threads Python cannot see). Default: serial (RAYON_NUM_THREADS=1, parallelism off).
Truth: encode_batch is tokenization, the model step cpu_compute; the loop between them is framework.
"""
import os
import sys

PARALLEL = "--parallel" in sys.argv
os.environ["TOKENIZERS_PARALLELISM"] = "true" if PARALLEL else "false"
if not PARALLEL:
    os.environ["RAYON_NUM_THREADS"] = "1"

import torch  # noqa: E402
from _wordpiece import WORDS as words, train  # noqa: E402

from _truth import gap, phase  # noqa: E402
from inferscope import scope  # noqa: E402

torch.set_num_threads(1)
tok = train()
batch = [" ".join(words[i:i + 200]) for i in range(0, 12000, 50)]
model = torch.nn.Linear(256, 256)
gap("framework_overhead/framework_python")
with scope("inference"):
    for _ in range(int(os.environ.get("ZOO_ITERS", "12"))):
        with phase("tokenize", expect="cpu_preprocessing/tokenization"):
            enc = tok.encode_batch(batch)
        with phase("model", expect="cpu_compute"), torch.inference_mode():
            x = torch.randn(64, 256)
            for _ in range(20):
                x = model(x)
print("tokens", sum(len(e.ids) for e in enc))
