"""Every Markdown report the suite wrote reads as Markdown (issue 47: "a test reads every report the suite produces").

This module's name sorts last, so in a whole-suite run it reads every ``*.md`` the earlier tests wrote under pytest's
base temporary folder (report.md, diff.md, cross_rank.md, the `--report x.md` of live runs, ...): no HTML entity, no
identifier as a heading, no markup a Markdown renderer would read from trace-provided text - the checks of
tests/test_words.py, which runs them on the vendored and shared traces' reports.  Run alone it reads what is there
(the planted report below at least)."""
from __future__ import annotations

from pathlib import Path

from conftest import VENDORED_TRACES
from test_words import _md_problems

MAX_BYTES = 4 << 20       # (a report is tens of KB; anything bigger is not one of ours)


def _reports(base: Path) -> list[Path]:
    out = []
    for p in sorted(base.rglob("*.md")):
        if p.name == "README.md":       # (make_examples' index of the example reports links them: not a report)
            continue
        try:
            if p.is_file() and p.stat().st_size <= MAX_BYTES and "InferScope" in p.read_text(errors="replace")[:4096]:
                out.append(p)
        except OSError:
            continue
    return out


def test_every_markdown_report_the_suite_wrote_reads_as_markdown(tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    planted = tmp_path_factory.mktemp("planted") / "report.md"
    from inferscope.analyze.pipeline import analyze
    from inferscope.ingest import load_trace
    from inferscope.report.markdown import render_markdown
    from inferscope.result import from_dict
    vendored = sorted((VENDORED_TRACES / "kineto").glob("*.json.gz"))[0]
    planted.write_text(render_markdown(from_dict(analyze(load_trace(str(vendored))))))
    reports = _reports(base)
    assert planted in reports, "the planted report was not found: the scan reads nothing"
    problems = [x for p in reports for x in _md_problems(p.read_text(errors="replace"), str(p.relative_to(base)))]
    assert problems == [], f"{len(problems)} problem(s) in {len(reports)} report(s):\n" + "\n".join(problems[:40])


def test_the_scan_finds_a_bad_report(tmp_path):
    bad = tmp_path / "x.md"
    bad.write_text("# InferScope report\n\n## gc_pauses\n\nstart &lt;= ts\n")
    assert _reports(tmp_path) == [bad]
    assert len(_md_problems(bad.read_text(), "x.md")) == 2
