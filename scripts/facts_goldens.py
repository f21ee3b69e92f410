"""Golden recorded runs of the live sampler (tests/data/facts/, tests/test_facts_golden.py).

    python scripts/facts_goldens.py            # re-score the recorded runs with the current rules: before/after vs truth
    python scripts/facts_goldens.py --write    # ... and make the current rules' shares the expected ones
    python scripts/facts_goldens.py --record   # record the runs anew (live: a quiet machine), then --write
    python scripts/facts_goldens.py --rederive # keep the recorded facts, re-derive the runs with the current rules

Each golden is one zoo program's run under `inferscope run --facts` (its .iscope: the sampler's facts and the runs it
decided) with the program's self-timed truth beside it.  The test replays the facts with the current rules and
expects the recorded shares exactly: a rule change shows up as a difference, and this script tells whether it moved
each share toward the truth or away from it before the expected shares are rewritten.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "zoo"))
import zoo_harness as H  # noqa: E402

DATA = ROOT / "tests" / "data" / "facts"
# name -> (script, args, env): short runs (each file under 100 KB), programs whose rules differ
GOLDENS = {
    "py_between_ops_1.7ms": ("zoo_python_between_ops.py", ["--gap-ms", "1.7"], {"ZOO_ITERS": "60"}),
    "tokenizers_serial": ("zoo_tokenizers.py", [], {"ZOO_ITERS": "8"}),
    "disk_io": ("zoo_disk_io.py", [], {"ZOO_ITERS": "60"}),
    "pagefault": ("zoo_pagefault.py", [], {}),
    "hf_tokenizer_serial": ("zoo_hf_tokenizer.py", [], {}),
}
EXPECTED = DATA / "expected.json"


def paths(name: str) -> dict:
    return {"trace": DATA / f"{name}.iscope", "truth": DATA / f"{name}.truth.json"}


def score(name: str) -> dict:
    """label -> [truth %, measured %] of the replay of ``name``'s recorded facts by the current rules."""
    res = H.compare(paths(name), rules="replay")
    return {r["label"]: [r["truth_pct"], r["measured_pct"]] for r in res["rows"]}


def record() -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as td:
        for name, (script, args, env) in GOLDENS.items():
            p = H.run_program(script, Path(td), args, env=env, tag=name)
            H.compare(p)          # (checks the live report equals the replay)
            for k in ("trace", "truth"):
                shutil.copyfile(p[k], paths(name)[k])
            print(f"recorded {name}: {paths(name)['trace'].stat().st_size} + {paths(name)['truth'].stat().st_size} bytes")


def rederive() -> None:
    """Replace each golden's decided runs and rule-made counters (kernel_time.RULE_COUNTERS) by the current rules'
    replay of its recorded facts (the facts, the measured counters and the truth stay the live run's).  For a rule
    change that renames or re-times parts (issue 45: page-fault kernel time of native code laid as ``page_faults``)
    where the machine is too loaded to --record: the replay checks (test_replay_reproduces_the_recorded_runs,
    test_replay_counters.py) then hold by construction until the next --record."""
    from inferscope.collect.replay import replay_trace
    from inferscope.trace import native
    for name in GOLDENS:
        p = paths(name)["trace"]
        t, info = replay_trace(native.load(p))
        native.save(t, p)
        print(f"re-derived {name}: {info['runs_recorded']} -> {info['runs_replayed']} runs, {p.stat().st_size} bytes")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--rederive", action="store_true")
    a = ap.parse_args(argv)
    if a.record:
        record()
    elif a.rederive:
        rederive()
    old = json.loads(EXPECTED.read_text()) if EXPECTED.exists() else {}
    new = {name: score(name) for name in GOLDENS}
    for name, rows in new.items():
        for label, (t, m) in rows.items():
            before = (old.get(name) or {}).get(label, [t, None])[1]
            if before is None or abs(before - m) > 1e-9:
                how = "" if before is None else (" toward the truth" if abs(m - t) < abs(before - t) else " away from the truth")
                print(f"{name:22s} {label:40s} truth {t:6.2f}  recorded {before if before is None else round(before, 2)!s:>6}"
                      f"  now {m:6.2f}{how}")
    if a.write or a.record:
        EXPECTED.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
        print(f"wrote {EXPECTED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
