"""Bounded structured fuzzing of the three input formats through the whole CLI (issue 15).

Fixed seeds, 50 mutants per format (~60 s on a quiet 2-core box): every mutant ends with exit 0 and a complete
report set, or exit 2 and one line on stderr; none hangs (60 s timeout each: a wall-clock limit that a loaded host
cannot reach for a ~1 s mutant), none exceeds 1.5 GB RSS.  A fixed count, not a time budget: under load a budget
ran 87 mutants and failed the count (2026-11-29).  The long campaign
(>= 10,000 mutants) is bench/bench_fuzz.py; its figures are in bench/README.md."""
import tempfile
from pathlib import Path

from fuzz_mutators import campaign


def test_structured_fuzz_all_formats_bounded():
    with tempfile.TemporaryDirectory(prefix="fuzz") as d:
        t = campaign(50, Path(d), first_seed=0, timeout_s=60.0)
    msg = "; ".join(f"{o.fmt}#{o.seed}: {o.verdict} rc={o.rc} {o.stderr[-300:]!r}" for o in t.failures[:5])
    assert not t.failures, msg
    assert t.n >= 150, t.n
    for fmt, f in t.per_format.items():      # the mutators reach both the accept and the reject paths
        assert f["exit0"] > 0 and f["exit2"] > 0, (fmt, f)
    assert t.max_rss_mb < 1536
