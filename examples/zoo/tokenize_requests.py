"""Before/after pair for `inferscope diff`: requests that each tokenize a text, then run a small
CPU model step, one `scope("request")` per request (the repeated unit the diff's noise rule uses).

    python tokenize_requests.py                    # slow pure-Python tokenizer: tokenization dominates
    python tokenize_requests.py --fast-tokenizer   # the change: a cached word->id tokenizer
"""
import argparse
import re
import time

import torch

from _toy_tokenizer import TEXT, tokenize
from inferscope import scope

ap = argparse.ArgumentParser()
ap.add_argument("--fast-tokenizer", action="store_true", help="cache word ids (the 'after' run)")
ap.add_argument("--requests", type=int, default=16)
ap.add_argument("--text-repeat", type=int, default=1200, help="sentences per request (of the zoo's toy text)")
ap.add_argument("--io-ms", type=float, default=0.0,
                help="per request, wait this long as if for a remote model server (time.sleep)")
ap.add_argument("--start-file", default=None,
                help="before serving, create START_FILE.ready.<pid> and wait until START_FILE exists "
                     "(lets a test start two runs' request loops at the same moment)")
args = ap.parse_args()
text = " ".join(TEXT.split()[: 15 * args.text_repeat])

_cache: dict[str, int] = {}


def fast_tokenize(t: str) -> list[int]:
    return [_cache.setdefault(w, hash(w) % 50_000) for w in re.findall(r"\w+|\S", t)]


torch.set_num_threads(1)
w = torch.randn(256, 256)
x = torch.randn(256, 256)
if args.start_file:
    import os
    open(f"{args.start_file}.ready.{os.getpid()}", "w").close()
    deadline = time.monotonic() + 120
    while not os.path.exists(args.start_file) and time.monotonic() < deadline:
        time.sleep(0.005)
with scope("serve"):
    for _ in range(args.requests):
        with scope("request"):
            ids = fast_tokenize(text) if args.fast_tokenizer else tokenize(text)
            with torch.inference_mode():
                y = x
                for _ in range(4):
                    y = torch.tanh(y @ w)
            if args.io_ms:
                time.sleep(args.io_ms / 1e3)
print("tokens", len(ids), float(y[0, 0]))
