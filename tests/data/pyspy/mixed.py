"""py-spy fixture program: 1 s numpy matmuls (OpenBLAS), 1 s pure Python, 0.5 s sleep."""
import time

import numpy as np

a = np.random.rand(400, 400)
t0 = time.time()
while time.time() - t0 < 1.0:
    a @ a


def py():
    s = 0
    for i in range(200000):
        s += i
    return s


t0 = time.time()
while time.time() - t0 < 1.0:
    py()
time.sleep(0.5)
