"""Predictions checked by applying the changes (issue 42 item 3): each zoo program and its ``--fixed``
variant (the report's suggestion applied, same work) under ``inferscope run``, interleaved, ``--repeats N``;
``inferscope diff before after`` compares each prediction of the unfixed run with the measured change
(compare/whatif.py: e2e change, plain here - the two variants do the same work).

Table per program: the finding the fix targets, its predicted saving and range (unfixed run's report), the
measured saving (the diff's ``measured_ms``), whether it fell inside [low, high], the diff's status (with its
noise band), and whether the unfixed report's top prediction was that finding.  "in range ± noise" widens
[low, high] by the diff's noise band (what ``diff`` calls materialised): a point prediction (low = high, e.g.
removing a recorded pause) cannot be judged closer than the run-to-run noise.  Medians over the repeats.

    python bench/bench_whatif.py [--repeats N] [--only zoo_gil,...] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "examples" / "zoo"
# (script, the finding whose suggestion --fixed applies); ARGS: arguments both variants get (a fixed amount of work
# for the programs whose default loop runs for a time; zoo_runqueue's window must span >= 2 of the collector's 0.5 s
# child-process scans, or its busy child is not seen in the window and cpu_run_queue predicts nothing)
PROGRAMS = [("zoo_lock_wait.py", "lock_wait"), ("zoo_omp_oversub.py", "cpu_oversubscription"),
            ("zoo_dl_oversub.py", "cpu_oversubscription"), ("zoo_gil.py", "gil_contention"),
            ("zoo_disk_io.py", "blocking_io"), ("zoo_pagefault.py", "page_fault_storm"),
            ("zoo_hf_tokenizer.py", "cpu_preprocessing"), ("zoo_gc.py", "python_gc"),
            ("zoo_underuse.py", "cpu_underuse"), ("zoo_runqueue.py", "cpu_run_queue"),
            ("zoo_preprocess_pool.py", "cpu_preprocessing")]
ARGS = {"zoo_underuse.py": ["--work", "200"], "zoo_runqueue.py": ["--work", "6000"]}


def _env() -> dict:
    src = str(ROOT / "src")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([src, str(ZOO), os.environ.get("PYTHONPATH", "")]))


def run(script: str, fixed: bool, out: Path) -> Path:
    rep = out / f"{script[:-3]}{'_fixed' if fixed else ''}.json"
    cmd = [sys.executable, "-m", "inferscope", "run", "--format", "json", "--report", str(rep), "--",
           sys.executable, str(ZOO / script), *ARGS.get(script, [])] + (["--fixed"] if fixed else [])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=_env(), cwd=str(out))
    if r.returncode != 0 or not rep.exists():
        raise RuntimeError(f"{script} fixed={fixed}: rc={r.returncode}\n{r.stderr[-2000:]}")
    return rep


def diff(before: Path, after: Path, out: Path) -> dict:
    d = out / "diff"
    r = subprocess.run([sys.executable, "-m", "inferscope", "diff", str(before), str(after), "-o", str(d),
                        "--format", "json", "-q"], capture_output=True, text=True, timeout=300, env=_env())
    if r.returncode not in (0, 1):
        raise RuntimeError(f"diff: rc={r.returncode}\n{r.stderr[-2000:]}")
    return json.loads((d / "diff.json").read_text())


def one(script: str, target: str, out: Path) -> dict:
    before, after = run(script, False, out), run(script, True, out)
    rb = json.loads(before.read_text())
    top = next((f["id"] for f in rb["findings"] if f.get("expected_saving_ms")), None)
    pred = diff(before, after, out).get("predictions") or {}
    row = next((r for r in pred.get("rows") or [] if r["id"] == target), None)
    return {"e2e_before_ms": rb["e2e_ms"], "e2e_after_ms": json.loads(after.read_text())["e2e_ms"], "top": top,
            "row": row, "noise_ms": pred.get("noise_ms") or 0.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    progs = [p for p in PROGRAMS if not a.only or p[0][:-3] in a.only.split(",")]
    out = Path(a.out or tempfile.mkdtemp(prefix="bench_whatif_"))
    out.mkdir(parents=True, exist_ok=True)
    res: dict = {p: [] for p, _ in progs}
    for _ in range(a.repeats):                      # interleaved: each repeat runs every pair once
        for script, target in progs:
            res[script].append(one(script, target, out))
    print("| program | fixed finding | top prediction | before e2e ms | after e2e ms | predicted ms [low-high] | "
          "measured ms | in range | in range ± noise | diff status |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    inside = inside_noise = counted = 0
    for script, target in progs:
        rs = res[script]
        ok = [r for r in rs if r["row"]]
        med = lambda k: statistics.median(r[k] for r in rs)   # noqa: E731
        if not ok:
            print(f"| {script} | {target} | {rs[0]['top']} | {med('e2e_before_ms'):.0f} | {med('e2e_after_ms'):.0f} | "
                  "(not predicted) | | | | |")
            continue
        p = statistics.median(r["row"]["predicted_ms"] for r in ok)
        lo = statistics.median(r["row"]["low_ms"] for r in ok)
        hi = statistics.median(r["row"]["high_ms"] for r in ok)
        m = statistics.median(r["row"]["measured_ms"] for r in ok)
        nz = statistics.median(r["noise_ms"] for r in ok)       # the diff's noise band (compare/whatif.py)
        counted += 1
        inside += lo <= m <= hi
        inside_noise += lo - nz <= m <= hi + nz
        print(f"| {script} | {target} | {'/'.join(sorted({r['top'] or '-' for r in rs}))} | {med('e2e_before_ms'):.0f} | "
              f"{med('e2e_after_ms'):.0f} | {p:.1f} [{lo:.1f}-{hi:.1f}] | {m:.1f} | {'yes' if lo <= m <= hi else 'no'} | "
              f"{'yes' if lo - nz <= m <= hi + nz else 'no'} (±{nz:.1f}) | "
              f"{'/'.join(r['row']['status'] for r in ok)} |")
    print(f"\nmeasured inside the predicted range: {inside} of {counted} programs with a prediction, {inside_noise} "
          "within the diff's noise band of it "
          f"({a.repeats} repeat(s); reports under {out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
