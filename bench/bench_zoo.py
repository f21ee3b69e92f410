"""Planted zoo: InferScope's breakdown vs each program's self-timed truth (issue 16).

    python bench/bench_zoo.py [--repeats 3] [--programs zoo_tokenizers,zoo_gil,...] [--workdir DIR]
    python bench/bench_zoo.py --replay DIR [--programs ...]

``--replay DIR``: no new runs - the runs recorded in DIR (an earlier run's --workdir: each trace keeps the
sampler's facts, `inferscope run --facts`) are re-scored with the current rules (collect/replay.py), so a rule
change is judged on the same observations before and after, not on fresh runs that drift with the machine.

Runs every program of examples/zoo/zoo_*.py (PROGRAMS below) under `inferscope run --trace`,
``--repeats`` times in an interleaved order (all programs once, then again), and prints per program and
class: the truth share of the report window, InferScope's share (median over the runs, min-max),
the difference in points (median), and whether the top category matches the truth's in every run.
Definitions: examples/zoo/zoo_harness.py and examples/zoo/README.md.  Prints the load average
before and after (the machine is shared: the figures move with it).  torch threads are fixed by each
program (1, except zoo_omp_oversub: 8).
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "zoo"))
import zoo_harness as H  # noqa: E402

# name -> (script, args)
PROGRAMS = {
    "tokenizers_serial": ("zoo_tokenizers.py", []),
    "tokenizers_parallel": ("zoo_tokenizers.py", ["--parallel"]),
    "hf_tokenizer_serial": ("zoo_hf_tokenizer.py", []),
    "hf_tokenizer_batched": ("zoo_hf_tokenizer.py", ["--batched"]),
    "numpy_mlp": ("zoo_numpy_mlp.py", []),
    "torch_preprocess": ("zoo_torch_preprocess.py", []),
    "lock_wait": ("zoo_lock_wait.py", []),
    "gil_contention": ("zoo_gil.py", []),
    "thread_pool": ("zoo_threadpool.py", []),
    "disk_io": ("zoo_disk_io.py", []),
    "omp_oversub": ("zoo_omp_oversub.py", []),
    "pagefault": ("zoo_pagefault.py", []),
    "short60": ("zoo_short60.py", []),
    "warmup_scope": ("zoo_warmup_scope.py", []),
    "py_between_ops_0.2ms": ("zoo_python_between_ops.py", ["--gap-ms", "0.2"]),
    "py_between_ops_1.7ms": ("zoo_python_between_ops.py", ["--gap-ms", "1.7"]),
    "py_between_ops_5ms": ("zoo_python_between_ops.py", ["--gap-ms", "5"]),
    "mixed_culprit": ("zoo_mixed_culprit.py", []),
    "asyncio_server": ("zoo_asyncio_server.py", []),
}
TOL_PTS = 5.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--replay", default=None, metavar="DIR",
                    help="re-score the runs recorded in DIR (an earlier --workdir) with the current rules")
    a = ap.parse_args(argv)
    names = [n.strip() for n in a.programs.split(",") if n.strip()]
    bad = [n for n in names if n not in PROGRAMS]
    if bad:
        print(f"bench_zoo: unknown program(s) {', '.join(bad)}; known: {', '.join(PROGRAMS)}", file=sys.stderr)
        return 2
    runs: dict[str, list[dict]] = {n: [] for n in names}
    if a.replay:
        if not Path(a.replay).is_dir():
            print(f"bench_zoo: --replay {a.replay}: not a folder", file=sys.stderr)
            return 2
        _replay(Path(a.replay), names, runs)
        return _table(names, runs)
    wd = Path(a.workdir or tempfile.mkdtemp(prefix="bench_zoo_"))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs; "
          f"repeats {a.repeats}; workdir {wd}")
    for r in range(a.repeats):
        for n in names:
            script, args = PROGRAMS[n]
            try:
                p = H.run_program(script, wd, args, tag=f"{n}_{r}")
                runs[n].append(H.compare(p))
            except Exception as e:  # one failing program must not hide the others' table
                print(f"{n} run {r + 1}: FAILED: {str(e).splitlines()[0]}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return _table(names, runs)


def _replay(d: Path, names: list[str], runs: dict) -> None:
    """The recorded runs of ``names`` in ``d`` (run_program's file names) scored by the current rules."""
    print(f"replaying the runs recorded in {d} with the current rules (no new runs)")
    for n in names:
        stem = Path(PROGRAMS[n][0]).stem
        for trc in sorted(d.glob(f"{stem}_{n}_*.iscope")):
            p = {"report": trc.with_suffix(".json"), "trace": trc, "truth": trc.with_suffix(".truth.json")}
            try:
                runs[n].append(H.compare(p, rules="replay"))
            except Exception as e:  # noqa: BLE001 - one unreadable run must not hide the others
                print(f"{n} {trc.name}: FAILED: {str(e).splitlines()[0]}")


def _table(names: list[str], runs: dict) -> int:
    print()
    print("| program | class | truth % | InferScope % (median, min-max) | diff pts | within 5 |")
    print("|---|---|---|---|---|---|")
    summary = []
    for n in names:
        rs = runs[n]
        if not rs:
            print(f"| {n} | (no successful run) | | | | |")
            continue
        labels = []
        for res in rs:
            labels += [row["label"] for row in res["rows"] if row["label"] not in labels]
        for lab in labels:
            tv = [next((x["truth_pct"] for x in res["rows"] if x["label"] == lab), 0.0) for res in rs]
            mv = [next((x["measured_pct"] for x in res["rows"] if x["label"] == lab), 0.0) for res in rs]
            if lab == H.UNPLANTED:
                print(f"| {n} | unplanted (start-up etc.) | {statistics.median(tv):.1f} | - | - | - |")
                continue
            d = statistics.median([m - t for m, t in zip(mv, tv)])
            ok = abs(d) <= TOL_PTS
            print(f"| {n} | {lab} | {statistics.median(tv):.1f} | {statistics.median(mv):.1f} "
                  f"({min(mv):.1f}-{max(mv):.1f}) | {d:+.1f} | {'yes' if ok else 'NO'} |")
            summary.append(ok)
        rk = sum(res["ranking_ok"] for res in rs)
        verdicts = sorted({res["verdict"] for res in rs})
        rates = [res["rate_hz"] for res in rs if res["rate_hz"]]
        print(f"| {n} | top category: truth {rs[0]['truth_top']}, measured "
              f"{'/'.join(sorted({res['measured_top'] for res in rs}))} ({rk}/{len(rs)} match); verdict "
              f"{'/'.join(verdicts)}; window {rs[0]['window']['kind']} "
              f"{statistics.median(res['window']['dur_ms'] for res in rs):.0f} ms; rate "
              f"{statistics.median(rates) if rates else math.nan:.0f} Hz | | | | |")
    print()
    print(f"rows within {TOL_PTS:.0f} points (median of runs): {sum(summary)}/{len(summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
