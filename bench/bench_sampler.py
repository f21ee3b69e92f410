"""Steady-state cost of the CPU sampler, measured inside one process (no start-up, no spawn noise).

    python bench/bench_sampler.py [--rounds 15] [--workloads generate,tinyops,python] [--rates 500,250,100]

One Sampler (the real one, perf_event included) stays alive for the whole run; each round times
one chunk of each workload under every configuration, in a shuffled order:
  off            sampler paused (its thread blocked), perf counters disabled      <- baseline
  perf-only      sampler paused, perf task-clock sampling of the main thread enabled
  ticks@R        sampler ticking at nominal R Hz, perf disabled (GIL heuristic)
  full@R         sampler at nominal R Hz with perf: what `inferscope run` does
The default rate goes through the GIL budget (Sampler.gil_budget, default sampler.GIL_BUDGET); "flat" rates bypass it.
Printed per workload and configuration: median of the per-round time ratios vs "off" with a 95 %
bootstrap interval, the achieved tick rate and the GIL time held per tick.  Chunks interleave,
so slow drifts of a shared machine hit every configuration alike; torch threads are fixed to 1.

Workloads: generate = the demo's random-weight Llama generate() (batch 4, 32 new tokens);
tinyops = tiny tensor ops from a Python loop (the per-op worst case); python = pure Python.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_overhead import median_ci  # noqa: E402  (one bootstrap for both benchmarks)
os.environ.setdefault("OMP_NUM_THREADS", "1")


class _Sink:
    @staticmethod
    def append(ev) -> None:
        pass


def make_workloads(names: list[str]) -> dict:
    import torch
    torch.set_num_threads(1)
    out = {}
    if "generate" in names:
        from llm_demo import build_model, build_tokenizer
        tok = build_tokenizer(4096)
        model = build_model(len(tok), 256, 4)
        enc = tok(["the model answers questions about inference latency"] * 4, return_tensors="pt", padding=True)

        def generate():
            with torch.inference_mode():
                model.generate(**enc, max_new_tokens=32, min_new_tokens=32, do_sample=False, pad_token_id=0)
        out["generate"] = generate
    if "tinyops" in names:
        a0, b0 = torch.ones(8), torch.ones(8)

        def tinyops():
            a, b = a0, b0
            for _ in range(20000):
                c = (a + b) * 0.5
                a = torch.relu(c - 0.1)
        out["tinyops"] = tinyops
    if "python" in names:
        def python():
            acc = 0
            for i in range(300000):
                acc += (i * 7) % 13
            return acc
        out["python"] = python
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--workloads", default="generate,tinyops,python")
    ap.add_argument("--rates", default="500,250,100", help="flat nominal rates (the default rate is always included)")
    ap.add_argument("--repeat", type=int, default=3, help="workload calls per chunk (longer chunks: less noise)")
    ap.add_argument("--no-ticks-only", action="store_true", help="skip the perf-only and ticks-only configurations")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO / "src"))
    from inferscope.collect import sampler as SM
    from inferscope.config import Config

    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    work = make_workloads(names)
    default_hz = Config().cpu_sampling_frequency_hz
    configs = {"off": (None, False, None)}
    if not args.no_ticks_only:
        configs.update({"perf-only": (None, True, None), f"ticks@{default_hz:g}": (default_hz, False, SM.GIL_BUDGET)})
    configs[f"full@{default_hz:g} (default)"] = (default_hz, True, SM.GIL_BUDGET)
    for r in [float(x) for x in args.rates.split(",") if x.strip()]:
        configs[f"full@{r:g} flat"] = (r, True, 1.0)
    budget0 = SM.GIL_BUDGET

    s = SM.Sampler(_Sink, default_hz, {}, set())
    s.start()
    t_wait = time.time() + 5
    while s._perf_maps is None and time.time() < t_wait:   # perf set up in a side thread
        time.sleep(0.01)
    time.sleep(0.1)
    main_st = next((st for st in s.threads.values() if st.tid == threading.main_thread().native_id), None)
    perf = main_st.perf if main_st is not None else None
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; "
          f"perf_event {'on' if perf is not None else 'unavailable'}; GIL budget {budget0:.3f}; rounds {args.rounds}")

    def setup(hz, use_perf, budget):
        if perf is not None:
            perf.enable(use_perf)
        if hz is None:
            s.pause()
        else:
            s.gil_budget = budget
            s.interval_ns = int(1e9 / hz)
            s.resume()

    rng = random.Random(1)
    res = {(w, c): [] for w in work for c in configs}
    stats = {(w, c): [0, 0, 0] for w in work for c in configs}   # ticks, busy_ns, wall_ns
    for fn in work.values():
        fn()                                                   # warm up
    for rnd in range(args.rounds):
        for w, fn in work.items():
            order = list(configs)
            rng.shuffle(order)
            for c in order:
                setup(*configs[c])
                time.sleep(0.03)
                k0, b0 = s.ticks, s.busy_ns
                t0 = time.perf_counter_ns()
                for _ in range(args.repeat):
                    fn()
                dt = time.perf_counter_ns() - t0
                res[(w, c)].append(dt)
                st = stats[(w, c)]
                st[0] += s.ticks - k0
                st[1] += s.busy_ns - b0
                st[2] += dt
        print(f"  round {rnd + 1}/{args.rounds} done", flush=True)
    setup(None, False, budget0)
    s.stop()
    for w in work:
        base = res[(w, "off")]
        print(f"\n{w}: 'off' median {statistics.median(base) / 1e6:.1f} ms per chunk")
        print(f"  {'configuration':<26} {'time ratio [95% CI]':<24} {'ticks/s':>8} {'GIL us/tick':>12}")
        for c in configs:
            if c == "off":
                continue
            ratios = [x / b for x, b in zip(res[(w, c)], base)]
            lo, hi = median_ci(ratios)
            ticks, busy, wall = stats[(w, c)]
            rate = ticks / (wall / 1e9) if wall else 0
            per = busy / ticks / 1e3 if ticks else 0
            print(f"  {c:<26} {statistics.median(ratios):.3f} [{lo:.3f}-{hi:.3f}]   {rate:>8.0f} {per:>12.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
