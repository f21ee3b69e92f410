"""Multi-input analyze: local engine vs ``--engine ray`` on the same inputs, in one command.

    .venv/bin/python bench/bench_ray.py [--copies 12] [--repeat 3] [--jobs 2] [--inputs DIR]

Inputs: the Kineto traces in --inputs (default: the vendored ones, tests/data/traces/kineto; e.g.
../shared/traces/kineto for larger ones), each copied --copies times into a temp folder.  Each round runs, in fresh subprocesses and in alternating order: ``analyze DIR --jobs 1``
(baseline), ``--jobs N`` (spawn pool) and ``--engine ray --jobs N`` (a local Ray instance with N CPUs,
started and shut down by the command itself, so its start-up is in the figure).  Prints per-mode medians,
and their ratio to the baseline.  Torch is not involved; OMP/MKL threads are set to 1.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENDORED = REPO / "tests" / "data" / "traces" / "kineto"


def run(args: list[str], out: Path) -> float:
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "inferscope", "analyze", *args, "-o", str(out), "-q", "--format", "json"],
                       capture_output=True, text=True, env=env, timeout=1800)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"bench_ray: {' '.join(args[1:])} failed ({r.returncode}): {r.stderr[-500:]}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--inputs", type=Path, default=VENDORED)
    a = ap.parse_args()
    srcs = sorted(a.inputs.glob("*.json.gz"))
    if not srcs:
        sys.exit(f"bench_ray: no .json.gz traces in {a.inputs}")
    with tempfile.TemporaryDirectory(prefix="bench_ray_") as tmp:
        d = Path(tmp) / "in"
        d.mkdir()
        for k in range(a.copies):
            for s in srcs:
                shutil.copy(s, d / f"{k:03d}_{s.name}")
        n = len(list(d.iterdir()))
        modes = {"local --jobs 1": [str(d)], f"local --jobs {a.jobs}": [str(d), "--jobs", str(a.jobs)],
                 f"ray --jobs {a.jobs}": [str(d), "--engine", "ray", "--jobs", str(a.jobs)]}
        times: dict[str, list[float]] = {m: [] for m in modes}
        for r in range(a.repeat):
            order = list(modes) if r % 2 == 0 else list(reversed(modes))
            for m in order:
                dt = run(modes[m], Path(tmp) / "out")
                times[m].append(dt)
                print(f"round {r + 1} {m}: {dt:.2f} s", flush=True)
        base = statistics.median(times["local --jobs 1"])
        print(f"\n{n} inputs ({len(srcs)} traces from {a.inputs} x {a.copies}), {a.repeat} rounds, load average "
              f"{os.getloadavg()[0]:.2f}")
        for m, ts in times.items():
            med = statistics.median(ts)
            print(f"{m:>16}: median {med:.2f} s ({n / med:.1f} inputs/s), {med / base:.2f}x local --jobs 1 "
                  f"[runs {', '.join(f'{t:.2f}' for t in ts)}]")


if __name__ == "__main__":
    main()
