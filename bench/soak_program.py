"""A serving-style program for the soak of live collection (bench/soak.py runs it; issue 44 item 3).

    python bench/soak_program.py --requests N      # a fixed number of requests
    python bench/soak_program.py --seconds S       # requests until S seconds have passed

Each request, inside ``inferscope.scope("request")``: the text is split in two halves tokenized on a
thread pool of 2 workers (the toy pure-Python tokenizer of the zoo), a small torch forward on the
main thread (torch threads 1), postprocessing in Python on the pool (top-k of the logits, detokenised
ids joined into a string), then a few ms of sleep (the client's think time).

Stdout (parsed by soak.py; one line each):
  soak_start <time.time()>
  soak_tick <time.time()> <requests done>        every --tick-s seconds
  soak_end <time.time()> <requests> <requests/s over the request loop>
``soak_end`` is the last thing the program does before it returns: the exit (and, under
``inferscope run``, the collector's trace write at exit) follows it.
"""
from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "zoo"))
import torch  # noqa: E402

from _toy_tokenizer import tokenize  # noqa: E402

try:
    from inferscope import scope
except ImportError:      # the uninstrumented run may lack the package on its path
    from contextlib import nullcontext as scope  # type: ignore[assignment]

torch.set_num_threads(1)
WORDS = "the quick brown fox jumps over the lazy dog while the server answers every request".split()


def request_text(i: int, n_words: int) -> str:
    return " ".join(WORDS[(i + k) % len(WORDS)] for k in range(n_words))


def postprocess(logits: list[float], ids: list[int]) -> str:
    top = sorted(range(len(logits)), key=logits.__getitem__, reverse=True)[:8]
    return " ".join(f"{t}:{ids[t % len(ids)] % 997}" for t in top)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--requests", type=int)
    g.add_argument("--seconds", type=float)
    ap.add_argument("--words", type=int, default=300, help="words per request text")
    ap.add_argument("--sleep-ms", type=float, default=3.0)
    ap.add_argument("--tick-s", type=float, default=10.0)
    a = ap.parse_args()
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256))
    with torch.inference_mode():     # warm-up: the first call's lazy init is start-up
        model(torch.zeros(4, 256))
    print(f"soak_start {time.time():.6f}", flush=True)
    t0 = time.perf_counter()
    next_tick = t0 + a.tick_s
    done = 0
    out = ""
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="soak-worker") as pool:
        while True:
            now = time.perf_counter()
            if (a.requests is not None and done >= a.requests) or (a.seconds is not None and now - t0 >= a.seconds):
                break
            if now >= next_tick:
                print(f"soak_tick {time.time():.6f} {done}", flush=True)
                next_tick += a.tick_s
            with scope("request"):
                text = request_text(done, a.words)
                half = len(text) // 2
                parts = [pool.submit(tokenize, text[:half]), pool.submit(tokenize, text[half:])]
                ids = parts[0].result() + parts[1].result()
                x = torch.tensor([float(t % 256) / 256.0 for t in ids[:256]] + [0.0] * max(0, 256 - len(ids)))
                with torch.inference_mode():
                    logits = model(x.reshape(1, 256))[0].tolist()
                out = pool.submit(postprocess, logits, ids).result()
                time.sleep(a.sleep_ms / 1e3)
            done += 1
    el = time.perf_counter() - t0
    print(f"soak_end {time.time():.6f} {done} {done / el if el > 0 else 0.0:.3f} {len(out)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
