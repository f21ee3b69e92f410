"""Planted: thread-pool producers -- 2 ThreadPoolExecutor threads prepare items in pure Python and put
them on a queue; the main thread takes each item (queue.get) and runs a small torch model on it.

Truth (main thread): the producers keep the queue full, so queue.get returns at once; but the model
call needs the GIL between its ops and the producers hold it (one of them runs Python at any time):
self-timed, the 'model' phase was 145 ms wall for 15 ms of thread CPU time (11 % on-CPU, 3 runs:
8-14 %).  So both phases are expected as 'waiting' (off-CPU: for the GIL, or for an item), which is
what the phase timing cannot split further.  The producers' work is parallel activity: it must appear
in the culprit tables by name (prepare), and gil_contention must name it, since that is why the main
thread waits."""
import os
import queue
from concurrent.futures import ThreadPoolExecutor

import torch

from _truth import gap, phase
from inferscope import scope

torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(512, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
ITEMS = int(os.environ.get("ZOO_ITERS", "16"))
q: queue.Queue = queue.Queue(maxsize=2)


def prepare(i):  # pure Python "preprocessing" on a producer thread
    s = 0
    for k in range(150_000):
        s += (k * i) % 7
    q.put([float((s + j) % 13) for j in range(512)])


with torch.inference_mode():   # warm-up outside the scope: the first call's lazy init is start-up
    model(torch.zeros(8, 512))
gap("framework_overhead/framework_python")
with ThreadPoolExecutor(max_workers=2) as pool:
    with scope("inference"):
        for i in range(ITEMS):
            pool.submit(prepare, i)
        for _ in range(ITEMS):
            with phase("wait_item", expect="waiting"):
                item = q.get()
            with phase("model", expect="waiting"), torch.inference_mode():   # 8-14 % on-CPU: see above
                y = model(torch.tensor(item).expand(8, 512).contiguous())
print("out", float(y.mean()))
