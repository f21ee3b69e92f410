"""Planted: an asyncio server (issue 24 item 1, asyncio part).  ``CLIENTS`` concurrent request handlers
(asyncio tasks on one event loop) each run ``tokenize`` (pure Python, ~2.5 ms), await the model
(``run_model``: numpy matmuls in a one-thread executor, which release the GIL) and run
``slow_postprocess`` (pure Python, ~2.5x the tokenizer).  While the model runs in the executor the
loop runs other handlers' Python.  Truth: the phases' own times on the loop's thread, by function
(phase names = function names); ``run_model`` runs on the executor's thread (its phases are not the
main thread's: its share is only checked to be small on the loop's thread)."""
import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402

from _truth import functions, gap, phase  # noqa: E402
from inferscope import scope  # noqa: E402

CLIENTS = int(os.environ.get("ZOO_CLIENTS", "200"))
ROUNDS = int(os.environ.get("ZOO_ITERS", "3"))
rng = np.random.default_rng(0)
W = rng.standard_normal((256, 256)).astype(np.float32)
TEXT = "The Quick Brown Fox, jumps over 7 lazy dogs! " * 8
POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")


def tokenize(text):
    ids = []
    for _ in range(40):
        for w in text.lower().split():
            ids.append(sum(ord(c) for c in w) % 50257)
    return ids


def run_model(ids):
    with phase("run_model", expect="cpu_compute"):
        x = np.asarray(ids[:256] * 2, dtype=np.float32)[:256].reshape(1, 256).repeat(64, 0)
        for _ in range(3):
            x = np.tanh(x @ W)
        return x


def slow_postprocess(out):
    rows = out[:16].tolist()
    s = []
    for _ in range(2):
        for r in rows:
            s.append(",".join(f"{v:.3f}" for v in r))
    return len("".join(s))


async def handle(loop, i):
    with phase("tokenize", expect="cpu_preprocessing/tokenization"):
        ids = tokenize(TEXT)
    out = await loop.run_in_executor(POOL, run_model, ids)
    with phase("slow_postprocess", expect="cpu_preprocessing/user_code"):
        return slow_postprocess(out)


async def serve():
    loop = asyncio.get_running_loop()
    for _ in range(ROUNDS):
        await asyncio.gather(*(handle(loop, i) for i in range(CLIENTS)))


gap("waiting")
functions("tokenize", "slow_postprocess", "run_model")
with scope("inference"):
    asyncio.run(serve())
POOL.shutdown()
