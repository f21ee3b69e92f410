"""Planted: torch ops used as preprocessing (normalise + resize an image batch), then a small model.

Rule chosen (documented in README.md): time inside a torch op is cpu_compute whatever its purpose --
the breakdown says what the CPU executes (framework kernels), the culprit tables say which op. The
Python that builds the batch (a list of pixel rows) is preprocessing.
"""
import os

import torch
import torch.nn.functional as F

from _truth import gap, phase
from inferscope import scope

torch.set_num_threads(1)
conv = torch.nn.Conv2d(3, 8, 3)


def preprocess_rows(n):  # pure Python: preprocessing by its function name (classes.PREPROCESS_NAME_RE; a file name
    # decides nothing - named make_rows, it was user code by the documented rule while planted as preprocessing)
    return [[(i * 31 + j) % 255 for j in range(96 * 3)] for i in range(n)]


gap("framework_overhead/framework_python")
with scope("inference"):
    for _ in range(int(os.environ.get("ZOO_ITERS", "15"))):
        with phase("preprocess_python", expect="cpu_preprocessing/preprocessing"):
            rows = preprocess_rows(96)
        with phase("torch_preprocess", expect="cpu_compute"):
            img = torch.tensor(rows, dtype=torch.float32).reshape(1, 96, 96, 3).permute(0, 3, 1, 2)
            img = (img / 255.0 - 0.5) / 0.25
            img = F.interpolate(img.expand(16, 3, 96, 96).contiguous(), size=(224, 224), mode="bilinear")
        with phase("model", expect="cpu_compute"), torch.inference_mode():
            y = conv(img)
print("out", float(y.mean()))
