"""zoo_gc.py (issue 42's what-if validation): GC pauses planted in a request loop, self-timed by the program's
own gc.callbacks entry.  The report's recorded pauses (collections of at least GC_PAUSE_RECORD_MIN_NS) are the
program's; python_gc is the top predicted saving, and it predicts removing them; the --fixed variant
(gc.freeze() after the long-lived graph is built) has far less collection time."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from inferscope import thresholds as T

ZOO = Path(__file__).resolve().parents[1] / "examples" / "zoo"
pytestmark = pytest.mark.live


def _run(tmp_path: Path, fixed: bool) -> tuple[dict, dict]:
    out = tmp_path / f"r{'_fixed' if fixed else ''}.json"
    r = subprocess.run([sys.executable, "-m", "inferscope", "run", "-q", "--format", "json", "--report", str(out), "--",
                        sys.executable, str(ZOO / "zoo_gc.py"), *(["--fixed"] if fixed else [])],
                       capture_output=True, text=True, timeout=180, cwd=tmp_path, env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-2000:]
    truth = next(json.loads(x)["gc_truth"] for x in r.stdout.splitlines() if x.startswith('{"gc_truth"'))
    return json.loads(out.read_text()), truth


def test_gc_pauses_are_the_programs_and_python_gc_predicts_removing_them(tmp_path):
    rep, truth = _run(tmp_path, False)
    g = rep["gc_pauses"]
    rec_ms = T.GC_PAUSE_RECORD_MIN_NS / 1e6
    mine = [ms for _, ms in truth["pauses"] if ms >= rec_ms]
    edge = sum(0.8 * rec_ms <= ms <= 1.25 * rec_ms for _, ms in truth["pauses"])   # either side of the threshold
    assert abs(g["count"] - len(mine)) <= edge, (g["count"], truth["pauses"])
    # the same collections timed by two callbacks one call apart: equal within a few us each (and the edge ones)
    assert abs(g["total_ms"] - sum(mine)) <= 0.02 * sum(mine) + 1.25 * rec_ms * edge + 0.05, (g["total_ms"], sum(mine))
    full = next(r for r in g["by_generation"] if r["generation"] == 2)        # the full collections hold most of it
    assert truth["full_collections"] >= 2 and full["total_ms"] >= 0.8 * g["total_ms"], g["by_generation"]
    f = {x["id"]: x for x in rep["findings"]}
    assert "python_gc" in f, list(f)
    p = f["python_gc"]
    assert p["saving_model"] == "remove" and p["expected_saving_ms"] == pytest.approx(g["total_ms"], rel=1e-6)
    top = next(x["id"] for x in rep["findings"] if x.get("expected_saving_ms"))
    assert top == "python_gc", [(x["id"], x.get("expected_saving_ms")) for x in rep["findings"]]


def test_fixed_variant_freezes_the_long_lived_graph(tmp_path):
    rep, truth = _run(tmp_path, True)
    assert truth["fixed"] and truth["full_ms"] < 0.2 * truth["total_ms"] + 5.0
    # its recorded pauses are the few collections over the record threshold, a small part of the window
    assert rep["gc_pauses"]["total_ms"] <= sum(ms for _, ms in truth["pauses"]) + 1.0
