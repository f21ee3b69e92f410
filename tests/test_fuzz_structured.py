"""Bounded structured fuzzing of the three input formats through the whole CLI (issue 15).

Fixed seeds, ~60 s: every mutant ends with exit 0 and a complete report set, or exit 2 and one
line on stderr; none hangs (20 s timeout), none exceeds 1.5 GB RSS.  The long campaign
(>= 10,000 mutants) is bench/bench_fuzz.py; its figures are in bench/README.md."""
import tempfile
from pathlib import Path

from fuzz_mutators import campaign


def test_structured_fuzz_all_formats_bounded():
    with tempfile.TemporaryDirectory(prefix="fuzz") as d:
        t = campaign(150, Path(d), first_seed=0, timeout_s=20.0, time_budget_s=60.0)
    msg = "; ".join(f"{o.fmt}#{o.seed}: {o.verdict} rc={o.rc} {o.stderr[-300:]!r}" for o in t.failures[:5])
    assert not t.failures, msg
    assert t.n >= 150, t.n
    for fmt, f in t.per_format.items():      # the mutators reach both the accept and the reject paths
        assert f["exit0"] > 0 and f["exit2"] > 0, (fmt, f)
    assert t.max_rss_mb < 1536
