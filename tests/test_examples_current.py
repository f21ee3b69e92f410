"""examples/reports/ is current: a fresh analysis of each example trace gives the committed verdict and breakdown.

The GPU examples read ../shared/traces (skipped with a reason when absent); the CPU demo's trace
is committed next to its report, so that example is always checked.  The committed report.md and .html are
compared byte for byte with a fresh rendering (issue 46: a renderer change must come with `make examples`).
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from conftest import shared_path

REPO = Path(__file__).resolve().parents[1]
REPORTS = REPO / "examples" / "reports"
HINT = "examples/reports/ is stale: run `make examples` and commit the result"


def _load_generator():
    spec = importlib.util.spec_from_file_location("make_examples", REPO / "scripts" / "make_examples.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _load_generator()
SUMMARY = json.loads((REPORTS / "summary.json").read_text(encoding="utf-8"))


def _trace(ex) -> Path:
    if ex["where"] == "shared":
        return shared_path(*ex["trace"].split("/"))
    return REPO / ex["trace"]


@pytest.mark.parametrize("ex", GEN.EXAMPLES, ids=[e["name"] for e in GEN.EXAMPLES])
def test_example_report_is_current(ex, tmp_path):
    name = ex["name"]
    assert name in SUMMARY["examples"], f"{name} missing from summary.json; {HINT}"
    committed = SUMMARY["examples"][name]
    for fmt in ("md", "html"):
        assert (REPORTS / f"{name}.{fmt}").is_file(), f"{name}.{fmt} missing; {HINT}"
    path = _trace(ex)
    assert GEN.sha256(path) == committed["sha256"], f"{path} is not the trace the example was made from; {HINT}"
    result, _ = GEN.analyse(path)
    fresh = GEN.summary(result)
    assert fresh["verdict"] == committed["verdict"], HINT
    assert fresh["confidence"] == pytest.approx(committed["confidence"], abs=0.011), HINT
    assert fresh["e2e_ms"] == pytest.approx(committed["e2e_ms"], rel=1e-6, abs=1e-3), HINT
    assert [c["category"] for c in fresh["breakdown"]] == [c["category"] for c in committed["breakdown"]], HINT
    for f, c in zip(fresh["breakdown"], committed["breakdown"]):
        assert f["ms"] == pytest.approx(c["ms"], rel=1e-6, abs=1e-3), (f, c, HINT)
        assert f["pct"] == pytest.approx(c["pct"], abs=0.011), (f, c, HINT)
    # the committed text reports come from the same generation
    md = (REPORTS / f"{name}.md").read_text(encoding="utf-8")
    assert committed["verdict"] in md, HINT
    assert "InferScope" in (REPORTS / f"{name}.html").read_text(encoding="utf-8")
    # and the committed text is what the renderers write now
    result, trace = GEN.analyse(path)
    GEN.render(result, trace, name, tmp_path)
    for fmt in ("md", "html"):
        assert (tmp_path / f"{name}.{fmt}").read_bytes() == (REPORTS / f"{name}.{fmt}").read_bytes(), (
            f"{name}.{fmt} differs from a fresh rendering; {HINT}")


def test_generation_is_deterministic_and_small(tmp_path):
    """`make examples` twice gives identical files (CPU demo: its trace is committed)."""
    ex = next(e for e in GEN.EXAMPLES if e["where"] == "repo")
    for d in ("a", "b"):
        result, trace = GEN.analyse(REPO / ex["trace"])
        GEN.render(result, trace, ex["name"], tmp_path / d)
    for fmt in ("md", "html"):
        a = (tmp_path / "a" / f"{ex['name']}.{fmt}").read_bytes()
        assert a == (tmp_path / "b" / f"{ex['name']}.{fmt}").read_bytes()
        assert b"analysis_ms" not in a and b"report generation: analysis" not in a
    sizes = {p.name: p.stat().st_size for p in REPORTS.iterdir()}
    assert sum(sizes.values()) < 1_000_000, sizes
    assert all(s < 200_000 for s in sizes.values()), sizes


def test_readme_links_every_example():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    index = (REPORTS / "README.md").read_text(encoding="utf-8")
    assert "examples/reports/" in readme
    for ex in GEN.EXAMPLES:
        assert f"examples/reports/{ex['name']}.md" in readme, ex["name"]
        assert f"({ex['name']}.html)" in index


def test_readme_names_each_example_by_its_committed_verdict():
    """The README's example list gives each example report's verdict as the committed report says it (the RTX 3090
    example was listed as framework_bound while its report said gpu_bound)."""
    import re
    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    rows = re.findall(r"\(examples/reports/([a-z0-9_]+)\.md\).*— `([a-z_]+)`", readme)
    assert rows, "the README lists no example report with its verdict"
    for stem, verdict in rows:
        md = (root / "examples" / "reports" / f"{stem}.md").read_text()
        assert f"`{verdict}`" in md or verdict in md.split("\n## ")[0], (stem, verdict)
