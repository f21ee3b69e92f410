"""Planted, no scope(): an image pipeline whose preprocessing (a pure-Python bilinear resize) runs in
2 multiprocessing workers; the main process only waits for their results and runs a tiny model.
``python mp_preprocess.py [spawn|fork|forkserver]`` picks the start method (default spawn).

Self-timed truth: one JSON line {"import_s", "loop_s", "wait_s", "worker_resize_cpu_s", "workers"}; the
workers' CPU time is in the children, not in the main process.
"""
import json
import multiprocessing as mp
import sys
import time

t0 = time.perf_counter()
import torch  # noqa: E402

t1 = time.perf_counter()


def work(seed: int) -> tuple[list[float], float]:
    """One item in a worker: the resize and the worker CPU time it took (the truth)."""
    c = time.process_time()
    out = resize_bilinear(seed)
    return out, time.process_time() - c


def resize_bilinear(seed: int) -> list[float]:
    """Deliberately slow pure-Python bilinear resample of a 96x96 "image" (96x96 output)."""
    src = [[(x * 31 + y * 17 + seed) % 255 for x in range(96)] for y in range(96)]
    out = []
    for y in range(96):
        fy = y * 95 / 95
        y0 = int(fy)
        y1 = min(y0 + 1, 95)
        wy = fy - y0
        for x in range(96):
            fx = x * 95 / 95
            x0 = int(fx)
            x1 = min(x0 + 1, 95)
            wx = fx - x0
            top = src[y0][x0] * (1 - wx) + src[y0][x1] * wx
            bot = src[y1][x0] * (1 - wx) + src[y1][x1] * wx
            out.append((top * (1 - wy) + bot * wy) / 255.0)
    return out


if __name__ == "__main__":
    torch.set_num_threads(1)
    model = torch.nn.Linear(96 * 96, 10)
    wait = worker_cpu = 0.0
    t2 = time.perf_counter()
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"
    with mp.get_context(method).Pool(2) as pool:
        for batch in range(24):
            a = time.perf_counter()
            res = pool.map(work, range(batch * 8, batch * 8 + 8))
            wait += time.perf_counter() - a
            imgs = [r[0] for r in res]
            worker_cpu += sum(r[1] for r in res)
            with torch.inference_mode():
                model(torch.tensor(imgs))
        pool.close()       # workers exit normally (the with-block alone would terminate them)
        pool.join()
    t3 = time.perf_counter()
    print(json.dumps({"import_s": t1 - t0, "loop_s": t3 - t2, "wait_s": wait, "worker_resize_cpu_s": worker_cpu, "workers": 2,
                      "start_method": method}))
