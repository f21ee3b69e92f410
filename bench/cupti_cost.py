"""On an NVIDIA GPU: what CUPTI activity tracing costs per kernel launch, by configuration.

    python bench/cupti_cost.py [--rounds 2] [--steps 20000] [--configs a,b,...] [--json OUT]

Each configuration runs in its own process (CUPTI's state is per process): the process warms CUDA
up, times a loop of STEPS tiny launches (torch ``x.add_(1)``, synchronised) 5 times *before*
enabling anything, then enables the configuration and times the same loop 5 times again.  The
printed cost is (median with - median without) per launch, in us: a ratio inside one process, so
the host's speed between processes does not enter it.  Rounds interleave the configurations.

Configurations (``CONFIGS``): none (the control: nothing enabled), kernel records alone
(concurrent / serial), with larger device buffers or pre-allocated semaphore pools, with launch API
records, hardware trace (Blackwell+), InferScope's own collector, and a duty cycle (kernel records
on 10 ms of every 50 ms) with the number of kernels it recorded.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIGS = ["none", "ck", "kernel", "ck_devbuf", "ck_prealloc", "ck_launch_api", "ck_hwtrace",
           "inferscope", "inferscope_objects", "ck_duty20", "torchprof_cuda"]
REPS = 5


def _loop(x, n: int) -> float:
    import torch
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1.0)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def _set_attr(C, name: str, value: int) -> str:
    v = ctypes.c_size_t(value)
    try:
        C.activity_set_attribute(int(getattr(C.ActivityAttribute, name)), ctypes.sizeof(v), ctypes.addressof(v))
        return f"{name}={value}"
    except Exception as e:    # noqa: BLE001
        return f"{name} failed: {type(e).__name__}: {e}"


def child(config: str, steps: int) -> dict:
    if config == "inferscope_objects":     # InferScope's collector reading records by attribute (the old path)
        os.environ["INFERSCOPE_CUPTI_DECODE"] = "objects"
        config = "inferscope"
    import resource
    import torch
    torch.set_num_threads(1)
    col = None
    early = config == "inferscope_early"    # CUPTI on before the CUDA context exists, as under `inferscope run`
    if early:
        sys.path.insert(0, str(REPO / "src"))
        import logging
        from inferscope.collect.gpu_activity import CuptiCollector
        col = CuptiCollector(logging.getLogger("cupti_cost"))
        col.start()
    x = torch.zeros(256, device="cuda")
    _loop(x, 2000)
    before = [_loop(x, steps) for _ in range(REPS)]     # early: already with CUPTI (compare with_us across configs)
    info: dict = {"config": config}
    got = {"records": 0, "buffers": 0}
    duty_stop = threading.Event()
    prof = None
    if config == "torchprof_cuda":      # torch.profiler, CUDA activities only (Kineto's CUPTI use)
        import torch.profiler as tp
        prof = tp.profile(activities=[tp.ProfilerActivity.CUDA])
        prof.__enter__()
    elif config not in ("none", "inferscope", "inferscope_early"):
        from cupti import cupti as C
        AK = C.ActivityKind

        def req():
            return 64 << 20, 0

        def done(acts):
            got["buffers"] += 1
            got["records"] += sum(1 for a in acts if a.kind == int(AK.CONCURRENT_KERNEL) or a.kind == int(AK.KERNEL))
        C.activity_register_callbacks(req, done)
        notes = []
        if config == "ck_devbuf":
            notes.append(_set_attr(C, "ATTR_DEVICE_BUFFER_SIZE", 64 << 20))
            notes.append(_set_attr(C, "ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE", 4))
        if config == "ck_prealloc":
            notes.append(_set_attr(C, "ATTR_PROFILING_SEMAPHORE_POOL_SIZE", 1 << 20))
            notes.append(_set_attr(C, "ATTR_PROFILING_SEMAPHORE_PRE_ALLOCATE_VALUE", 4))
            notes.append(_set_attr(C, "ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE", 4))
        if config == "ck_hwtrace":
            try:
                C.activity_enable_hw_trace(1)
                notes.append("hw_trace on")
            except Exception as e:    # noqa: BLE001
                notes.append(f"hw_trace failed: {type(e).__name__}: {e}")
        kind = AK.KERNEL if config == "kernel" else AK.CONCURRENT_KERNEL
        t0 = time.perf_counter()
        C.activity_enable(kind)
        info["enable_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
        if config == "ck_launch_api":
            for m in C.RuntimeApiTraceCbid:
                if m.name.startswith("cudaLaunchKernel"):
                    C.activity_enable_runtime_api(int(m), 1)
        if config == "ck_duty20":
            toggles = []

            def duty():
                on = True
                while not duty_stop.wait(0.010 if on else 0.040):
                    t = time.perf_counter()
                    (C.activity_disable if on else C.activity_enable)(kind)
                    toggles.append(time.perf_counter() - t)
                    on = not on
            threading.Thread(target=duty, daemon=True).start()
            info["toggles"] = toggles
        info["notes"] = notes
    elif config == "inferscope":
        sys.path.insert(0, str(REPO / "src"))
        import logging
        from inferscope.collect.gpu_activity import CuptiCollector
        col = CuptiCollector(logging.getLogger("cupti_cost"))
        info["started"] = col.start()
        info["error"] = col.error
    _loop(x, 2000)
    after = [_loop(x, steps) for _ in range(REPS)]
    duty_stop.set()
    t0 = time.perf_counter()
    if prof is not None:
        prof.__exit__(None, None, None)
        got["records"] = None      # prof.events() costs seconds per 100k events: not counted
    elif col is not None:
        col.stop()
        got["records"] = len(col.rows["kernel"])
        info["stats"] = col.stats()
    elif config != "none":
        from cupti import cupti as C
        C.activity_flush_all(1)
    info["flush_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
    info["max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if "toggles" in info:
        tg = info.pop("toggles")
        info["toggle_us_median"] = round(statistics.median(tg) * 1e6, 1) if tg else None
        info["toggles"] = len(tg)
    b, a = statistics.median(before), statistics.median(after)
    info.update(base_us=round(b / steps * 1e6, 3), with_us=round(a / steps * 1e6, 3),
                cost_us=round((a - b) / steps * 1e6, 3), ratio=round(a / b, 4),
                kernels_launched=steps * REPS + 2000, **got)
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--json")
    ap.add_argument("--child")
    a = ap.parse_args(argv)
    if a.child:
        print("RESULT " + json.dumps(child(a.child, a.steps)), flush=True)
        return 0
    cfgs = [c for c in a.configs.split(",") if c]
    res: dict[str, list] = {c: [] for c in cfgs}
    rng = random.Random(0)
    for r in range(a.rounds):
        order = cfgs[:]
        rng.shuffle(order)
        for c in order:
            try:
                p = subprocess.run([sys.executable, __file__, "--child", c, "--steps", str(a.steps)],
                                   capture_output=True, text=True, timeout=120, env=dict(os.environ))
            except subprocess.TimeoutExpired:
                print(f"round {r + 1} {c}: timeout", flush=True)
                continue
            line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
            if not line:
                print(f"round {r + 1} {c}: failed rc={p.returncode} {p.stderr.strip()[-400:]}", flush=True)
                continue
            d = json.loads(line[-1][7:])
            res[c].append(d)
            print(f"round {r + 1} {c}: " + json.dumps(d), flush=True)
    print("summary (cost per launch, us; ratio in-process):")
    for c in cfgs:
        if res[c]:
            print(f"  {c:14s} cost {statistics.median(d['cost_us'] for d in res[c]):7.3f} us  ratio "
                  f"{statistics.median(d['ratio'] for d in res[c]):.3f}  base {statistics.median(d['base_us'] for d in res[c]):.3f} us"
                  f"  with {statistics.median(d['with_us'] for d in res[c]):.3f} us"
                  f"  records {res[c][-1].get('records')}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
