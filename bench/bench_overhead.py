"""Collection overhead of `inferscope run`, beside torch.profiler alone and a sys.settrace tracer.

    python bench/bench_overhead.py [--pairs 5] [--workloads demo,tinyops] [--inferscope-env K=V ...]

Workloads (torch threads fixed to 1):
  demo     examples/llm_demo.py at default settings (tokenizer + random-weight Llama generate())
  tinyops  worst case: tens of thousands of tiny tensor ops from a Python loop
  gil2     two pure-Python threads contending for the GIL (worst case for the sampler's short
           switch interval)
  workers  2 spawn multiprocessing workers doing pure-Python work, the main process waiting on
           pool.map (child processes: followed by default, each with its own light sampler; the
           with-block terminates them, so their traces come from their crash journals)
  workers-fork  the same with the 'fork' start method (Linux default; DataLoader workers) and a
           normal pool close/join: forked workers followed through register_at_fork
  pool64   64 short-lived forked workers (Pool(4, maxtasksperchild=1), trivial work, no numpy in the
           program): the per-worker cost of following (each worker's session start and end)
Modes, run interleaved in a shuffled order within each round (>= 5 rounds):
  base        python WORKLOAD
  inferscope  inferscope run -- python WORKLOAD   (default settings; inferscope@HZ: sampling rate HZ;
              inferscope-nofollow: child processes not followed, INFERSCOPE_FOLLOW_CHILDREN=0;
              inferscope+K=V[+K=V]: with that environment, e.g. inferscope+INFERSCOPE_PERF_PERIOD_US=4000)
  torchprof   torch.profiler (CPU activities, defaults) around the workload, export_chrome_trace at exit
  settrace    a sys.settrace/threading.settrace tracer recording every Python call
Three times per run: "workload" = the time the workload measures itself (from after `import torch`
to the end of its work: what the inference experiences); "process" = the Python process from
spawn to exit (for inferscope: the child, including starting collection and writing the trace at
exit, read from the trace's meta run_wall_ms); "command" = the whole command (for inferscope
also loading, analysing and writing the report in the parent); "process CPU" = user+sys CPU
time of the Python process (inferscope: the child's, from wait4 in the parent, in the trace meta) - far less sensitive to other jobs on a shared machine than wall time.  Printed: median ratio vs base (min-max over rounds).
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable

TINYOPS = r'''
import time, torch
torch.set_num_threads(1)
t0 = time.perf_counter()
a = torch.ones(8)
b = torch.ones(8)
acc = 0.0
for i in range(150000):
    c = a + b
    c = c * 0.5
    a = torch.relu(c - 0.1)
    if i % 1000 == 0:
        acc += float(a.sum())
print(f"workload_s {time.perf_counter() - t0:.4f}")
'''

# Two Python threads fighting for the GIL: the worst case for the sampler's shortened switch interval
# (collect/sampler.py SWITCH_INTERVAL_S): they hand the GIL to each other that much more often.
GIL2 = r'''
import threading, time
def spin(n):
    acc = 0
    for i in range(n):
        acc += i % 7
    return acc
t0 = time.perf_counter()
ts = [threading.Thread(target=spin, args=(3_000_000,)) for _ in range(2)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(f"workload_s {time.perf_counter() - t0:.4f}")
'''

WORKERS = r'''
import multiprocessing as mp, time, torch
def work(seed):
    acc = 0.0
    for i in range(60000):
        acc += (i * seed) % 7
    return acc
if __name__ == "__main__":
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    with mp.get_context("spawn").Pool(2) as pool:
        for b in range(10):
            r = pool.map(work, range(b * 8, b * 8 + 8))
            torch.tensor(r).sum()
        # CLOSE
    print(f"workload_s {time.perf_counter() - t0:.4f}")
'''

POOL64 = r'''
import multiprocessing as mp, time
def sq(x):
    return sum(i * i for i in range(2000)) + x
if __name__ == "__main__":
    t0 = time.perf_counter()
    pool = mp.get_context("fork").Pool(4, maxtasksperchild=1)
    r = pool.map(sq, range(64), chunksize=1)
    pool.close()
    pool.join()
    print(f"workload_s {time.perf_counter() - t0:.4f}")
'''

TORCHPROF = r'''
import runpy, sys, atexit, tempfile, os
import torch
from torch.profiler import profile, ProfilerActivity
p = profile(activities=[ProfilerActivity.CPU])  # ACTIVITIES
p.start()
def _stop():
    p.stop()
    fd, path = tempfile.mkstemp(suffix=".json"); os.close(fd)
    p.export_chrome_trace(path); os.unlink(path)
atexit.register(_stop)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
'''

SETTRACE = r'''
import runpy, sys, threading, time
events = []
ap = events.append
def tracer(frame, event, arg):
    if event == "call":
        ap((time.perf_counter_ns(), frame.f_code))
    return None
threading.settrace(tracer)
sys.settrace(tracer)
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    sys.settrace(None)
'''


def workload_time(out: str) -> float | None:
    m = re.search(r"workload_s ([\d.]+)", out) or re.search(r"new tokens in ([\d.]+) s", out)
    return float(m.group(1)) if m else None


def gpu_time(out: str) -> float | None:
    """GPU time the workload measured itself between CUDA events (CUDA zoo entries print gpu_s)."""
    m = re.search(r"^gpu_s ([\d.]+)", out, re.M)
    return float(m.group(1)) if m else None


def run_once(mode: str, script: Path, tmp: Path, extra_env: dict) -> tuple[float, float, float, float, float | None]:
    env = dict(os.environ)
    # every mode but inferscope runs with collection off: the demo calls inferscope.scope(), which
    # would otherwise start a library-mode session (seed 001: enabled by default once imported)
    env["INFERSCOPE_ENABLED"] = "0"
    env["OMP_NUM_THREADS"] = "1"
    if mode == "base":
        cmd = [PY, str(script)]
    elif mode.startswith("inferscope"):   # inferscope, or inferscope@HZ (sampling rate override)
        env.pop("INFERSCOPE_ENABLED")
        env.update(extra_env)
        if "+" in mode:                 # inferscope+K=V[+K=V]: that environment for this mode only (A/B a knob)
            mode, *kvs = mode.split("+")
            env.update(kv.split("=", 1) for kv in kvs)
        if "@" in mode:
            env["INFERSCOPE_CPU_SAMPLING_FREQUENCY_HZ"] = mode.split("@", 1)[1]
        if mode.startswith("inferscope-nofollow"):
            env["INFERSCOPE_FOLLOW_CHILDREN"] = "0"
        cmd = [PY, "-m", "inferscope", "run", "-q", "--report", str(tmp / "report.md"),
               "--trace", str(tmp / "t.iscope"), "--", PY, str(script)]
    elif mode.startswith("torchprof"):   # torchprof (CPU), torchprof-cuda (CPU+CUDA), torchprof-cudaonly
        wrap = tmp / f"{mode}_wrap.py"
        if not wrap.exists():
            acts = {"torchprof": "[ProfilerActivity.CPU]", "torchprof-cuda": "[ProfilerActivity.CPU, ProfilerActivity.CUDA]",
                    "torchprof-cudaonly": "[ProfilerActivity.CUDA]"}[mode]
            wrap.write_text(TORCHPROF.replace("[ProfilerActivity.CPU])  # ACTIVITIES", acts + ")"))
        cmd = [PY, str(wrap), str(script)]
    elif mode == "settrace":
        cmd = [PY, str(tmp / "settrace_wrap.py"), str(script)]
    else:
        raise ValueError(mode)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp)
    wall = time.perf_counter() - t
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    if r.returncode != 0:
        raise SystemExit(f"{mode} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    w = workload_time(r.stdout)
    if w is None:
        raise SystemExit(f"{mode}: no workload time in output:\n{r.stdout[-500:]}")
    proc = wall
    if mode.startswith("inferscope"):   # the child's own spawn-to-exit time (collection incl. writing the trace)
        from inferscope.trace import native
        c = native.load(tmp / "t.iscope").meta["collection"]
        proc = c["run_wall_ms"] / 1e3
        cpu = c["child_cpu_ms"] / 1e3
    return w, proc, wall, cpu, gpu_time(r.stdout)


def median_ci(ratios: list[float], n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of the median of the per-round ratios."""
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(n_boot))
    return meds[int(0.025 * n_boot)], meds[int(0.975 * n_boot) - 1]


def fmt(ratios: list[float]) -> str:
    lo, hi = median_ci(ratios)
    return f"{statistics.median(ratios):.3f} [{lo:.2f}-{hi:.2f}]"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--workloads", default="demo,tinyops")
    ap.add_argument("--modes", default="base,inferscope,torchprof,settrace")
    ap.add_argument("--inferscope-env", action="append", default=[], metavar="K=V",
                    help="extra environment for the inferscope mode, e.g. INFERSCOPE_TORCH_PROFILER=on")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    extra_env = dict(kv.split("=", 1) for kv in args.inferscope_env)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if "base" not in modes:
        modes.insert(0, "base")
    rng = random.Random(args.seed)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, "
          f"pairs {args.pairs}, inferscope env {extra_env or 'default'}")
    # byte-compile InferScope as an installed package would be: under PYTHONDONTWRITEBYTECODE=1
    # (or a read-only checkout) every child would otherwise recompile it from source (~+150 ms)
    import compileall
    import inferscope
    compileall.compile_dir(str(Path(inferscope.__file__).parent), quiet=1)
    with tempfile.TemporaryDirectory(prefix="inferscope-bench-") as td:
        tmp = Path(td)
        (tmp / "torchprof_wrap.py").write_text(TORCHPROF)
        (tmp / "settrace_wrap.py").write_text(SETTRACE)
        (tmp / "tinyops.py").write_text(TINYOPS)
        (tmp / "workers.py").write_text(WORKERS)
        (tmp / "gil2.py").write_text(GIL2)
        (tmp / "pool64.py").write_text(POOL64)
        (tmp / "workers_fork.py").write_text(WORKERS.replace('"spawn"', '"fork"').replace(
            "# CLOSE", "pool.close()\n        pool.join()"))
        scripts = {"demo": REPO / "examples" / "llm_demo.py", "tinyops": tmp / "tinyops.py", "workers": tmp / "workers.py",
                   "workers-fork": tmp / "workers_fork.py", "gil2": tmp / "gil2.py", "pool64": tmp / "pool64.py"}
        for wl in [w.strip() for w in args.workloads.split(",") if w.strip()]:
            script = scripts[wl]
            run_once("base", script, tmp, extra_env)  # warm the page cache
            res = {m: [] for m in modes}
            for i in range(args.pairs):
                order = modes[:]
                rng.shuffle(order)
                for m in order:
                    res[m].append(run_once(m, script, tmp, extra_env))
                print(f"  {wl} round {i + 1} (workload/process/command s): " +
                      ", ".join(f"{m} {res[m][-1][0]:.2f}/{res[m][-1][1]:.2f}/{res[m][-1][2]:.2f}" for m in modes),
                      flush=True)
            base = res["base"]
            print(f"{wl}: base median workload {statistics.median(b[0] for b in base):.3f} s, "
                  f"process {statistics.median(b[1] for b in base):.3f} s")
            print("  median of per-round ratios vs base [95% bootstrap CI of the median]:")
            print("  mode                 workload             process              command              process CPU")
            for m in modes:
                if m == "base":
                    continue
                r4 = [fmt([r[k] / b[k] for r, b in zip(res[m], base)]) for k in (0, 1, 2, 3)]
                print(f"  {m:<20} {r4[0]:<20} {r4[1]:<20} {r4[2]:<20} {r4[3]}")
            print("  ratio of the fastest runs (min over rounds; interference only ever adds time):")
            for m in modes:
                if m == "base":
                    continue
                mins = [min(r[k] for r in res[m]) / min(b[k] for b in base) for k in (0, 1, 2, 3)]
                print(f"  {m:<20} " + " ".join(f"{x:<20.3f}" for x in mins))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
