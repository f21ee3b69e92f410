"""Planted: large matmuls on the CPU; almost no Python around them."""
import torch

from inferscope import scope

torch.set_num_threads(1)
a = torch.randn(768, 768)
b = torch.randn(768, 768)
with scope("inference"), torch.inference_mode():
    for _ in range(40):
        c = a @ b
print(float(c[0, 0]))
