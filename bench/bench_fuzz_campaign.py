"""Fuzz campaign over every input `inferscope analyze` reads (issue 44).

    python bench/bench_fuzz_campaign.py                          # the default campaign: 10,800 mutants, 9 kinds x 1,200
    python bench/bench_fuzz_campaign.py --count 300 --jobs 1     # a small one
    python bench/bench_fuzz_campaign.py --seed 5000 --jobs 8     # other mutants, 8 at a time
    python bench/bench_fuzz_campaign.py --kinds ncu_raw,yaml     # some kinds only
    python bench/bench_fuzz_campaign.py --replay yaml:17         # one mutant again, with its stderr
    python bench/bench_fuzz_campaign.py --replay yaml:17 --save /tmp/m   # ... and its files, for a repro
    python bench/bench_fuzz_campaign.py --seed 20000 --count 2700 --log c1.jsonl   # a campaign in chunks ...
    python bench/bench_fuzz_campaign.py --tally c1.jsonl c2.jsonl ...              # ... and their table together

Kinds (tests/fuzz_campaign_mutators.py): Kineto JSON and .json.gz, nsys SQLite, Nsight Compute CSV (raw and
details pages, alone or joined with --ncu), .iscope (synthetic; a live one with facts.msgpack under --replay
and its meta sections), --phase-map JSON, .inferscope.yaml.  Each mutant runs `python -m inferscope analyze`
in its own subprocess (tests/fuzz_campaign.py) with a 30 s limit; exit status, wall time and peak RSS
and CPU time (os.wait4) are recorded; on a shared host a mutant's wall time includes the time it waited for a
CPU, so the table gives both.  Goal: every exit 0 (complete report set) or 2 (one line), none over 30 s, peak RSS
< 1.5 GB for inputs < 10 MB, no traceback.  Prints the tally per kind and every failure as kind:seed
(rebuild one with --replay); exits 1 when any mutant failed.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import fuzz_campaign as fc  # noqa: E402
import fuzz_campaign_mutators as cm  # noqa: E402

DEFAULT_COUNT = 1200 * len(cm.KINDS)   # 10,800


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=DEFAULT_COUNT, help=f"mutants in all (default {DEFAULT_COUNT})")
    ap.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    ap.add_argument("--jobs", type=int, default=1, help="mutants analysed at a time (default 1)")
    ap.add_argument("--kinds", default=",".join(cm.KINDS), help="comma-separated kinds (default: all)")
    ap.add_argument("--timeout", type=float, default=fc.TIMEOUT_S, help="seconds per mutant (default 30)")
    ap.add_argument("--replay", default=None, metavar="KIND:SEED", help="run one mutant and print its stderr")
    ap.add_argument("--save", default=None, metavar="DIR", help="with --replay: also write the mutant's files into DIR")
    ap.add_argument("--log", default=None, metavar="FILE", help="append one JSON line per mutant to FILE")
    ap.add_argument("--tally", nargs="+", default=None, metavar="FILE", help="print the table of --log files together")
    args = ap.parse_args()
    if args.tally:
        runs = [fc.Run(**json.loads(x)) for f in args.tally for x in Path(f).read_text().splitlines() if x.strip()]
        seen = collections.Counter((r.kind, r.seed) for r in runs)
        c = fc.Campaign(runs=runs)
        print(f"logs: {', '.join(args.tally)}; distinct mutants {len(seen)}, repeated {sum(n > 1 for n in seen.values())}")
        return _table(c, args.timeout)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    bad = [k for k in kinds if k not in cm.KINDS]
    if bad or args.count < 0 or args.jobs < 1:
        ap.error(f"unknown kinds {bad}" if bad else "--count >= 0 and --jobs >= 1")
    with tempfile.TemporaryDirectory(prefix="fuzz_campaign") as d:
        if args.replay:
            kind, _, seed = args.replay.partition(":")
            if args.save:
                Path(args.save).mkdir(parents=True, exist_ok=True)
                m = cm.make(kind, int(seed), Path(d))
                for name, raw in m.files.items():
                    (Path(args.save) / name).write_bytes(raw)
                print(f"wrote {', '.join(m.files)} into {args.save}; run: inferscope analyze {' '.join(m.args)}")
            r = fc.run_one(kind, int(seed), Path(d), args.timeout)
            print(f"{kind}:{seed}: {r.verdict} rc={r.rc} wall {r.wall_s:.2f} s peak RSS {r.peak_rss_mb:.0f} MB "
                  f"input {r.input_bytes} B\n{r.stderr}")
            return 0 if r.verdict.startswith("ok") else 1
        t0 = time.monotonic()
        last = [t0]

        log = open(args.log, "a") if args.log else None

        def progress(c, r):
            now = time.monotonic()
            if log:
                log.write(json.dumps(dataclasses.asdict(r)) + "\n")
                log.flush()
            if not r.verdict.startswith("ok"):
                print(f"  FAIL {r.kind}:{r.seed} {r.verdict} rc={r.rc} {r.stderr.strip().splitlines()[-1:]!r}", flush=True)
            if now - last[0] > 30:
                last[0] = now
                print(f"  {len(c.runs)} mutants, {len(c.failures)} failures, {now - t0:.0f} s", flush=True)

        c = fc.campaign(args.count, args.seed, args.jobs, Path(d), kinds, args.timeout, progress)
    wall = time.monotonic() - t0
    print(f"mutants: {len(c.runs)} (seeds from {args.seed}, kinds {','.join(kinds)}, --jobs {args.jobs}); wall {wall:.0f} s")
    return _table(c, args.timeout)


def _table(c, timeout_s: float) -> int:
    print(f"exit codes: {dict(collections.Counter(r.rc for r in c.runs))}")
    for kind, k in c.per_kind().items():
        print(f"  {kind:13s} n={k['n']:5d} exit0={k['exit0']:5d} exit2={k['exit2']:5d} failures={k['fail']} "
              f"max wall {k['max_wall_s']:.2f} s, max CPU {k['max_cpu_s']:.2f} s, max peak RSS {k['max_rss_mb']:.0f} MB")
    small = [r for r in c.runs if r.input_bytes < fc.SMALL_INPUT_BYTES]
    print(f"peak RSS (inputs < 10 MB): {max((r.peak_rss_mb for r in small), default=0):.0f} MB; "
          f"slowest: {max((r.wall_s for r in c.runs), default=0):.2f} s wall, "
          f"{max((r.cpu_s for r in c.runs), default=0):.2f} s CPU; killed at {timeout_s:g} s: "
          f"{sum(r.rc is None for r in c.runs)}; over 30 s wall: {sum(r.wall_s > 30 for r in c.runs)}")
    print(f"failures: {len(c.failures)} {dict(collections.Counter(r.verdict for r in c.failures))}")
    for r in c.failures:
        print(f"  {r.kind}:{r.seed} {r.verdict} rc={r.rc}")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
