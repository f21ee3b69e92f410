"""Planted: Hugging Face `PreTrainedTokenizerFast` (transformers' Python around the Rust `tokenizers`) dominates;
a tiny model step.

Default: serial, one ``tokenizer(text)`` call per request text (transformers' Python per call - argument
checks, BatchEncoding - around one Rust encode).  `--batched`: one ``tokenizer(batch, padding=True)`` call
per batch (one Rust encode_batch; padding and BatchEncoding in Python).  RAYON_NUM_THREADS=1, parallelism
off: the main thread does all of it.  Truth: each call is tokenization (transformers' tokenization_*.py
and the Rust library alike), the model step cpu_compute; the loop between them is framework.
The tokenizer is trained from in-memory text (nothing is downloaded).
"""
import gc
import os
import sys

BATCHED = "--batched" in sys.argv
# --fixed: the same short texts as the default, in one batched call per iteration (no padding: the same tokens)
FIXED = "--fixed" in sys.argv or os.environ.get("ZOO_FIXED") == "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"

import torch  # noqa: E402
from _wordpiece import WORDS as words, train  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

from _truth import gap, phase  # noqa: E402
from inferscope import scope  # noqa: E402

torch.set_num_threads(1)
tok = PreTrainedTokenizerFast(tokenizer_object=train(("[UNK]", "[PAD]")), unk_token="[UNK]", pad_token="[PAD]")
# requests: short texts serially (per-call Python matters), longer ones batched (the Rust work dominates)
texts = [" ".join(words[i:i + 24]) for i in range(0, 12000, 50)] if not BATCHED else \
    [" ".join(words[i:i + 200]) for i in range(0, 12000, 50)]
model = torch.nn.Linear(256, 256)
# the start-up's ~1M objects (torch, transformers) leave the collector: a full collection walking them took ~55 ms and
# 0-2 of them landed in the ~400 ms window by chance (the per-text and batched runs' e2e scattered 379-553 / 261-330 ms
# with them, 2026-11-29); this program plants per-call tokenizer Python, zoo_gc.py plants collections
gc.collect()
gc.freeze()
gap("framework_overhead/framework_python")
n_tokens = 0
with scope("inference"):
    for _ in range(int(os.environ.get("ZOO_ITERS", "8" if BATCHED else "30"))):
        with phase("tokenize", expect="cpu_preprocessing/tokenization"):
            encs = [tok(texts, padding=True)] if BATCHED else [tok(texts)] if FIXED else [tok(t) for t in texts]
        with phase("model", expect="cpu_compute"), torch.inference_mode():
            x = torch.randn(64, 256)
            for _ in range(20):
                x = model(x)
        n_tokens += sum(len(ids) for e in encs for ids in (e["input_ids"] if BATCHED or FIXED else [e["input_ids"]]))
print("tokens", n_tokens)
