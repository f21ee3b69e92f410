"""Planted: image preprocessing on the inference thread - a pure-Python bilinear resize of each image
(mp_preprocess.resize_bilinear, ~4 ms an image here; 1,024 of its values kept) before a tiny model step, batches of 8: cpu_preprocessing
dominates (the function is named ``preprocess``: preprocessing by classes.PREPROCESS_NAME_RE).

``--fixed`` (or ZOO_FIXED=1; bench/bench_whatif.py): the cpu_preprocessing finding's suggestion applied (worker
processes): a multiprocessing Pool (fork) with one worker per CPU the process may use, started and warmed before the
timed scope, resizes each batch; the main thread collects the images and runs the model.  Same work: ZOO_ITERS
batches of 8 images.  Truth phases (examples/zoo/_truth.py): preprocess (in --fixed: the wait for the pool), model.
"""
import multiprocessing as mp
import os
import sys

import torch

from _truth import gap, phase
from inferscope import scope
from mp_preprocess import resize_bilinear

FIXED = "--fixed" in sys.argv or os.environ.get("ZOO_FIXED") == "1"
BATCH = 8


def preprocess(seed: int) -> list[float]:
    """The resize, then every 9th value (a 1,024-value feature vector: the workers' results stay small to send back)."""
    return resize_bilinear(seed)[::9]


if __name__ == "__main__":
    torch.set_num_threads(1)
    model = torch.nn.Linear(1024, 10)
    pool = mp.get_context("fork").Pool(len(os.sched_getaffinity(0))) if FIXED else None
    if pool is not None:
        pool.map(preprocess, range(2 * len(os.sched_getaffinity(0))))     # the workers are up before the scope
    gap("framework_overhead/framework_python")
    with scope("inference"):
        for b in range(int(os.environ.get("ZOO_ITERS", "12"))):
            seeds = range(b * BATCH, (b + 1) * BATCH)
            with phase("preprocess", expect="cpu_preprocessing/preprocessing"):
                imgs = pool.map(preprocess, seeds) if pool is not None else [preprocess(s) for s in seeds]
            with phase("model", expect="cpu_compute"), torch.inference_mode():
                model(torch.tensor(imgs))
    if pool is not None:
        pool.close()
        pool.join()
    print("batches", b + 1, "pool", pool is not None)
