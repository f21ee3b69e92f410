"""Structured fuzzing campaign over the three input formats (issue 15).

    python bench/bench_fuzz.py                    # 3,400 mutants per format (10,200), seeds from 0
    python bench/bench_fuzz.py --per-format 100   # a quick run
    python bench/bench_fuzz.py --first-seed 5000  # other mutants

Mutators and harness: tests/fuzz_mutators.py.  Each mutant runs `inferscope analyze -o DIR
--format md,json,csv,html,chrome -q` in a forked child (RLIMIT_AS 6 GiB, 20 s wall-clock
limit, peak RSS from wait4).  Prints the exit-code tally, failures by class, peak RSS and the
slowest mutant; exits 1 when any mutant failed (exit code other than 0/2, a multi-line error,
a hang, RSS >= 1.5 GB for an input < 10 MB, an incomplete report set).
"""
from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fuzz_mutators import campaign  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-format", type=int, default=3400)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=20.0)
    args = ap.parse_args()
    t0 = time.monotonic()
    last = [t0]

    def progress(t, o):
        now = time.monotonic()
        if now - last[0] > 30:
            last[0] = now
            print(f"  {t.n} mutants, {len(t.failures)} failures, {now - t0:.0f} s", flush=True)

    with tempfile.TemporaryDirectory(prefix="bench_fuzz") as d:
        t = campaign(args.per_format, Path(d), first_seed=args.first_seed, timeout_s=args.timeout, progress=progress)
    wall = time.monotonic() - t0
    print(f"mutants: {t.n} ({args.per_format} per format, seeds {args.first_seed}..{args.first_seed + args.per_format - 1})")
    print(f"wall: {wall:.0f} s ({wall / max(t.n, 1) * 1e3:.0f} ms per mutant)")
    print(f"exit codes: {dict(sorted(t.by_rc.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))}")
    for fmt, f in t.per_format.items():
        print(f"  {fmt:7s} n={f['n']} exit0={f['exit0']} exit2={f['exit2']} failures={f['fail']}")
    print(f"peak RSS of any mutant: {t.max_rss_mb:.0f} MB; slowest mutant: {t.max_seconds:.2f} s")
    print(f"failures: {len(t.failures)} {dict(collections.Counter(o.verdict for o in t.failures))}")
    for o in t.failures[:10]:
        print(f"  {o.fmt} seed {o.seed}: {o.verdict} rc={o.rc} {o.stderr[-300:]!r}")
    return 1 if t.failures else 0


if __name__ == "__main__":
    sys.exit(main())
