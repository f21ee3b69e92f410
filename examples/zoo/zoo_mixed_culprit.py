"""Planted: pure Python alternating with numpy calls that release the GIL (issue 24 item 1: culprits next to
GIL-releasing calls).  Each iteration runs ``clean_rows`` (pure Python, ~64 % of the loop) then
``numpy_features`` (BLAS matmuls, which release the GIL; ~36 %).  A sampler that only gets the GIL where
the thread releases it sees ``numpy_features`` at almost every tick.  Truth: the phases' own times, by
function (phase names = function names)."""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402

from _truth import functions, gap, phase  # noqa: E402
from inferscope import scope  # noqa: E402

rng = np.random.default_rng(0)
W = rng.standard_normal((192, 192)).astype(np.float32)
X = rng.standard_normal((192, 192)).astype(np.float32)
ROWS = [f"Row {i}: The Quick Brown Fox, jumps over {i % 7} lazy dogs!" for i in range(160)]


def clean_rows(rows):
    out = []
    for r in rows:
        t = "".join(c.lower() if c.isalnum() else " " for c in r)
        out.append(" ".join(t.split()))
    return out


def numpy_features(x):
    for _ in range(2):
        x = np.tanh(x @ W)
    return x


gap("framework_overhead/framework_python")
functions("clean_rows", "numpy_features")
with scope("inference"):
    for _ in range(int(os.environ.get("ZOO_ITERS", "600"))):
        with phase("clean_rows", expect="cpu_preprocessing/user_code"):
            clean_rows(ROWS)
        with phase("numpy_features", expect="cpu_compute"):
            numpy_features(X)
