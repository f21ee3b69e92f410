"""Planted, no scope(): a request loop whose steady state is ~75 % tokenization, after a slow
`import torch`.  The whole process is mostly start-up (interpreter + torch import); the default
window must be the steady state, where tokenization is the top category.

Self-timed truth: prints one JSON line {"import_s", "loop_s", "tokenize_s"} (perf_counter).
"""
import json
import re
import time

t0 = time.perf_counter()
import torch  # noqa: E402  (the slow import is the point)

t1 = time.perf_counter()
torch.set_num_threads(1)
TEXT = "the quick brown fox jumps over the lazy dog while the profiler watches every token " * 800
model = torch.nn.Linear(1024, 1024)
x = torch.randn(96, 1024)


def tokenize(text: str) -> list[int]:
    ids = []
    for word in re.findall(r"\w+|\S", text):
        pieces = list(word)
        while len(pieces) > 1:          # greedy pair merging, deliberately slow
            pieces = [pieces[0] + pieces[1]] + pieces[2:]
        ids.append(hash(pieces[0]) % 50_000)
    return ids


tok = 0.0
t2 = time.perf_counter()
for _ in range(80):                     # each request: tokenize, then one model step
    a = time.perf_counter()
    ids = tokenize(TEXT)
    tok += time.perf_counter() - a
    with torch.inference_mode():
        model(x)
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "loop_s": t3 - t2, "tokenize_s": tok, "tokens": len(ids)}))
