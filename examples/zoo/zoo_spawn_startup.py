"""Planted, no scope(): a `multiprocessing` spawn worker whose start-up (a fresh interpreter, then `import torch`
in the pool's initializer) the main process waits for, then N items served by it.  Per item the worker
sleeps SLEEP_MS (off-CPU: nobody works, the main process waits) then runs WORK_MS of pure Python; the main
process then runs MAIN_MS of pure Python of its own.

Self-timed truth, one JSON line (perf_counter_ns: CLOCK_MONOTONIC, the live trace's clock, in every process):
{"spawn_ns", "ready_ns" (the worker's initializer done), "loop_start_ns", "loop_end_ns", "sleeps": [[a, b], ...]
(the worker's sleeps), "joined_ns" (the worker exited), "work_ns", "main_ns" (summed), "items"}.
``python zoo_spawn_startup.py [ITEMS]`` (default 16).
"""
import json
import multiprocessing as mp
import sys
import time

SLEEP_MS, WORK_MS, MAIN_MS = 30, 40, 30


def _init() -> None:
    import torch  # noqa: F401  (the worker's start-up: what a real worker loads before serving)


def _ready() -> int:
    return time.perf_counter_ns()


def _spin(ms: float) -> int:
    """Pure Python for ``ms`` of this thread's CPU time; returns its wall ns."""
    a = time.perf_counter_ns()
    c = time.thread_time()
    x = 0
    while time.thread_time() - c < ms / 1000.0:
        for i in range(2000):
            x += i * i
    return time.perf_counter_ns() - a


def serve_item(k: int) -> tuple[int, int, int]:
    """One item in the worker: a sleep (returned as its interval) then pure-Python work."""
    a = time.perf_counter_ns()
    time.sleep(SLEEP_MS / 1000.0)
    b = time.perf_counter_ns()
    return a, b, _spin(WORK_MS)


def main_own_work(k: int) -> int:
    return _spin(MAIN_MS)


if __name__ == "__main__":
    items = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    spawn_ns = time.perf_counter_ns()
    with mp.get_context("spawn").Pool(1, initializer=_init) as pool:
        ready_ns = pool.apply(_ready)
        loop0 = time.perf_counter_ns()
        sleeps, work, own = [], 0, 0
        for k in range(items):
            a, b, w = pool.apply(serve_item, (k,))
            sleeps.append([a, b])
            work += w
            own += main_own_work(k)
        loop1 = time.perf_counter_ns()
        pool.close()       # the worker exits normally (the with-block alone would terminate it)
        pool.join()
    print(json.dumps({"spawn_ns": spawn_ns, "ready_ns": ready_ns, "loop_start_ns": loop0, "loop_end_ns": loop1,
                      "joined_ns": time.perf_counter_ns(),
                      "sleeps": sleeps, "work_ns": work, "main_ns": own, "items": items}))
