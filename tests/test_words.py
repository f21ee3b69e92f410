"""Issue 47 (items 4-6): a report and a CLI that read right to a newcomer.

- every subcommand's --help starts with a line saying what it does, every argument and option has help
  text, and an option with a default shows it (the subcommands come from the parser, not from a list here);
- report.md (vendored and shared traces) has no HTML entities, no identifier as a heading, no markup
  that a Markdown renderer would read from trace-provided text;
- an option that matched nothing says so (report warnings and stderr); errors name their path once.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SHARED_TRACES, VENDORED_TRACES
from helpers import md_markup
from inferscope.cli import build_parser, main
from inferscope.result import from_dict

ENTITY_RE = re.compile(r"(?<!\\)&(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});")
IDENT_HEADING_RE = re.compile(r"^#{1,6} +`?[a-z][a-z0-9]*(?:_[a-z0-9]+)+`? *$", re.M)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sp,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sp.choices)


def _help_of(argv: list[str]) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    return buf.getvalue()


def _entries(text: str) -> dict[str, str]:
    """The argument/option entries of an argparse help page: {invocation: help text}."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    in_section, cur = False, None
    for ln in lines:
        if re.match(r"^\S.*:$", ln):                     # "options:", "positional arguments:"
            in_section, cur = True, None
            continue
        if not in_section or not ln.strip():
            continue
        if re.match(r"^  \S", ln):                       # an entry: invocation, then (maybe) its help
            inv, _, hl = ln.strip().partition("  ")
            cur = inv.strip()
            out[cur] = hl.strip()
        elif cur is not None and re.match(r"^ {4,}\S", ln):
            out[cur] = (out[cur] + " " + ln.strip()).strip()
    return out


SUBCOMMANDS = sorted(_subparsers(build_parser()))


def test_subcommands_are_enumerated_from_the_parser():
    assert len(SUBCOMMANDS) >= 6 and "analyze" in SUBCOMMANDS      # a sanity floor, not the list


@pytest.mark.parametrize("cmd", SUBCOMMANDS)
def test_every_subcommand_help_describes_and_helps_every_option(cmd):
    sub = _subparsers(build_parser())[cmd]
    text = _help_of([cmd, "--help"])
    # the line after the usage block says what the command does
    body = text.split("\n\n")
    assert len(body) >= 2 and body[1].strip() and not body[1].lstrip().startswith(("positional", "options")), text[:400]
    assert sub.description and body[1].split()[0] == sub.description.split()[0]
    entries = _entries(text)
    for a in sub._actions:
        inv = ", ".join(a.option_strings) if a.option_strings else (a.metavar or a.dest)
        if a.option_strings:     # "-o OUTPUT, --output OUTPUT": every option string of the action in one entry
            got = [h for k, h in entries.items() if set(a.option_strings) <= set(re.findall(r"(?<!\S)-{1,2}[\w-]+", k))]
        else:
            got = [h for k, h in entries.items() if k == inv]
        assert got and got[0], f"{cmd}: {inv} has no help text"
        if a.option_strings and a.default not in (None, False, argparse.SUPPRESS) and not isinstance(a.default, list):
            assert "default" in got[0], f"{cmd}: {inv} does not show its default {a.default!r}"


def test_top_level_help_lists_every_subcommand_with_a_line():
    text = _help_of(["--help"])
    for cmd in SUBCOMMANDS:
        m = re.search(rf"^    {cmd} +(\S.*)$", text, re.M)
        assert m, f"{cmd} has no line in inferscope --help"


# ---- report.md text ---------------------------------------------------------------------------------

def _md_problems(md: str, where: str) -> list[str]:
    out = [f"{where}: entity {m.group(0)!r}" for m in ENTITY_RE.finditer(md)]
    out += [f"{where}: identifier heading {m.group(0)!r}" for m in IDENT_HEADING_RE.finditer(md)]
    out += [f"{where}: markup {x!r}" for x in md_markup(md)]
    return out


def _report_md(path: Path) -> str:
    from inferscope.analyze.pipeline import analyze
    from inferscope.ingest import load_trace
    from inferscope.report.markdown import render_markdown
    return render_markdown(from_dict(analyze(load_trace(str(path)))))


def _vendored() -> list[Path]:
    return sorted((VENDORED_TRACES / "kineto").glob("*.json.gz"))


def _shared_only() -> list[Path]:
    have = {p.name for p in _vendored()}
    out = [p for sub, pat in (("kineto", "*.json.gz"), ("nsys", "*.sqlite")) for p in sorted((SHARED_TRACES / sub).glob(pat))
           if p.name not in have] if SHARED_TRACES.is_dir() else []
    return out or [None]


@pytest.mark.parametrize("path", _vendored(), ids=lambda p: p.name.split(".")[0])
def test_vendored_reports_read_as_markdown(path):
    md = _report_md(path)
    assert _md_problems(md, path.name) == []


@pytest.mark.shared
@pytest.mark.parametrize("path", _shared_only(), ids=lambda p: "none" if p is None else p.name.split(".")[0])
def test_shared_reports_read_as_markdown(path):
    if path is None:
        pytest.skip(f"no shared traces beyond the vendored ones at {SHARED_TRACES}")
    md = _report_md(path)
    assert _md_problems(md, path.name) == []


def test_the_checks_catch_what_they_look_for():
    """The report checks above fail on each kind of problem (planted)."""
    assert _md_problems("## gc_pauses\n", "x") and _md_problems("a &lt;b\n", "x") and _md_problems("x &#60;\n", "x")
    assert _md_problems("| <script>x |\n", "x") and _md_problems("see <http://e.vil>\n", "x")
    assert _md_problems("## GC pauses\n\nmax\\<float> a \\&lt; b, 506 -> 410, start <= ts\n", "x") == []


def test_md_escape_keeps_names_as_text_not_markup():
    """Planted hostile names: each one renders back as exactly its own text, with no entity in the .md."""
    from helpers import md_render
    from inferscope.report.markdown import md_escape
    names = ["max_pool<float, float>", "<script>alert(1)</script>", "a &lt; b &#60; c & d", "> quoted", "506 -> 410.4",
             "start <= ts", "x|y`z`[l](http://e.vil)", "<a@b.c>", "<=a@b.c>", "<-x@y.z>", "<4, T<2>>",
             "<!-- c -->", "<?php ?>", "Host<->device", "<https://e.vil>"]
    for n in names:
        md = md_escape(n, 400)
        assert not ENTITY_RE.search(md) and md_markup(md) == [], (n, md)
        html = md_render(md)
        assert re.sub(r"</?p>\n?", "", html) == n.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") \
            .replace('"', "&quot;").replace("http://", "http://"), (n, md, html)
    assert md_escape("506 -> 410.4") == "506 -> 410.4" and md_escape("start <= ts") == "start <= ts"
    assert md_escape("Host<->device") == "Host<->device" and md_escape("A<4, B<f>>") == "A\\<4, B\\<f>>"


def test_cross_rank_counts_agree_and_pluralise():
    from inferscope.fleet.cross_rank import cross_rank, rank_profile
    from inferscope.report.cross_rank import to_markdown

    def prof(rank):
        return rank_profile({"source": {"format": "kineto", "devices": [{"name": "G"}], "tool_versions": {},
                                        "distributed": {"rank": rank, "world_size": 2, "backend": "nccl"}},
                             "breakdown": [{"category": "other", "ms": 1.0, "pct": 100.0}], "e2e_ms": 1.0,
                             "culprits": {"ops": [], "functions": [], "counts": {}}})
    # rank 0 twice, rank 1 once: one job of 3 inputs holding 2 ranks, rank 0 named with its count
    cr = cross_rank([{"source": f"{s}.json", "report_dir": s, "profile": prof(r)} for s, r in (("a", 0), ("b", 0), ("c", 1))])
    md = to_markdown(cr)
    assert "2 ranks present: 0, 1, from 3 inputs" in md and "rank 0 in 2 inputs: " in md
    assert "rank(s)" not in md and "1 inputs" not in md


# ---- options that matched nothing; error lines ------------------------------------------------------

def _ranges_trace(tmp_path: Path) -> Path:
    ev = [{"ph": "X", "cat": "user_annotation", "name": n, "pid": 1, "tid": 1, "ts": ts, "dur": 40.0}
          for n, ts in (("prefill", 0.0), ("decode_step", 50.0), ("decode_step", 100.0))]
    ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.0, "dur": 30.0})
    p = tmp_path / "ranges.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    return p


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inferscope", *map(str, args)], capture_output=True, text=True, timeout=300)


def test_phase_map_matching_nothing_is_a_warning(tmp_path):
    src = _ranges_trace(tmp_path)
    pm = tmp_path / "pm.json"
    pm.write_text(json.dumps({"prefill": ["prefill"], "verify": ["speculate"]}))
    r = _cli("analyze", src, "-o", tmp_path / "o", "--window", "all", "--format", "json", "--phase-map", pm)
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    assert [p["phase"] for p in rep["phases"]["phases"]] == ["prefill"]          # the one that matched
    w = [x for x in rep["warnings"] if x.startswith("--phase-map")]
    assert len(w) == 1 and str(pm) in w[0] and "verify" in w[0] and "'speculate'" in w[0] and "prefill:" not in w[0]
    err = [ln for ln in r.stderr.splitlines() if "--phase-map" in ln]
    assert len(err) == 1 and w[0] in err[0]
    # a map of which nothing matches: said as such; the matched phase above is not in the line
    pm.write_text(json.dumps({"verify": ["speculate"]}))
    r = _cli("analyze", src, "-o", tmp_path / "o2", "--window", "all", "--format", "json", "--phase-map", pm, "-q")
    assert r.returncode == 0 and r.stderr == ""                                 # -q: nothing but errors
    rep = json.loads((tmp_path / "o2" / "report.json").read_text())
    assert rep["phases"]["phases"] == []
    assert any(x.startswith(f"--phase-map {pm}: matched nothing") for x in rep["warnings"])


def test_phase_map_that_matches_gives_no_warning(tmp_path):
    from inferscope.analyze.options import AnalyzeOptions
    from inferscope.analyze.pipeline import analyze
    from inferscope.ingest import load_trace
    rep = analyze(load_trace(str(_ranges_trace(tmp_path))), AnalyzeOptions(window="all", phase_map={"decode": ["decode_step"]}))
    assert [p["phase"] for p in rep["phases"]["phases"]] == ["decode"]
    assert not [w for w in rep["warnings"] if "phase_map" in w or "--phase-map" in w]


def test_window_matching_nothing(tmp_path):
    src = _ranges_trace(tmp_path)
    r = _cli("analyze", src, "-o", tmp_path / "o", "--window", "nosuchrange")   # a name: the existing error
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and err[0].startswith("inferscope: error: --window nosuchrange: ")
    r = _cli("analyze", src, "-o", tmp_path / "o", "--window", "5000:6000", "--format", "json")   # trace is 140 us
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    assert rep["window"]["dur_ms"] == 0
    w = [x for x in rep["warnings"] if x.startswith("--window 5000:6000: matched nothing")]
    assert len(w) == 1 and sum(w[0] in ln for ln in r.stderr.splitlines()) == 1


def test_group_by_grouping_nothing_is_a_warning(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    _ranges_trace(a)
    _ranges_trace(b)                                    # no rank in the traces or their names
    r = _cli("analyze", a / "ranges.json", b / "ranges.json", "-o", tmp_path / "o", "--group-by", "all", "--format", "json")
    assert r.returncode == 0, r.stderr
    w = [ln for ln in r.stderr.splitlines() if "--group-by all" in ln]
    assert len(w) == 1 and "grouped nothing" in w[0] and "0 of 2" in w[0]
    r = _cli("analyze", a / "ranges.json", b / "ranges.json", "-o", tmp_path / "o", "--format", "json")
    assert "--group-by" not in r.stderr                  # the default groups what it can, silently


def test_errors_name_the_path_once_and_print_once(tmp_path):
    bad = tmp_path / "garbage.sqlite"
    bad.write_bytes(bytes(range(256)) * 8)
    r = _cli("analyze", bad, "-o", tmp_path / "o1")
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and err[0].count(str(bad)) == 1
    good = _ranges_trace(tmp_path)
    r = _cli("analyze", bad, good, "-o", tmp_path / "o2", "--format", "json")
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if "not a recognised trace" in ln]
    assert len(lines) == 1 and lines[0].count(str(bad)) == 1 and lines[0].startswith("inferscope: error: ")
    assert sum(str(bad) in ln for ln in r.stderr.splitlines()) == 2   # the progress line and the error line


def test_kineto_pid_warning_names_kineto_fields(tmp_path):
    ev = [{"ph": "X", "cat": "kernel", "name": "k", "pid": "Spans", "tid": 7, "ts": 10.0, "dur": 5.0,
           "args": {"device": 0, "stream": 7}},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0.0, "dur": 30.0}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    from inferscope.analyze.pipeline import analyze
    from inferscope.ingest import load_trace
    w = [x for x in analyze(load_trace(str(p)))["warnings"] if x.startswith("PID attribution")]
    assert w and all("globalPid" not in x and "globalTid" not in x for x in w)
    assert any('"pid"' in x for x in w)


def test_save_report_explicit_extension_wins_over_configured_format(tmp_path):
    """`inferscope run --format html` configures the run's report; save_report("x.md") still writes Markdown."""
    from inferscope import save_report, scope
    from inferscope.collect import session as S
    from inferscope.config import Config
    s = S.Session(Config(cpu_sampling_frequency_hz=200, system_sampling_hz=10, torch_profiler="off", report_format="html",
                         report_path=str(tmp_path / "cfg.html")), mode="library")
    S.set_current(s)
    s.start()
    try:
        with scope("infer"):
            sum(range(10_000))
        written = save_report(str(tmp_path / "x.md"))
    finally:
        if S.current() is s:
            s.finalize()
        S.set_current(None)
    assert [p.name for p in written] == ["x.md"]
    assert (tmp_path / "x.md").read_text().startswith("# InferScope report")


def test_diff_md_reads_as_markdown():
    """diff.md of two vendored traces: no entity, no identifier heading (its sections: "CPU ops", not "cpu_ops")."""
    from inferscope.compare import diff_paths
    from inferscope.report.diff import to_markdown
    a, b = _vendored()[:2]
    d = diff_paths(str(a), str(b))
    md = to_markdown(d)
    assert _md_problems(md, "diff.md") == []
    assert "cpu_op" in d["named"] and "## CPU ops" in md
