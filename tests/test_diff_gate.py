"""``inferscope diff --fail-on-regression N`` on every basis a diff is judged on (issue 46): a regression of more
than N % on that basis exits 1, a smaller one or any improvement exits 0.

Each side is planted so the change on its basis is known by construction: report.json files for e2e, per-step
and throughput (generated tokens/s, requests/s), .iscope traces for a repeated range.  On each the other
measure moves the opposite way, so the test fails if the gate looks at the wrong one.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from inferscope.cli import main
from inferscope.compare import diff_paths
from inferscope.trace import SpanKind, native

from helpers import Synth


def _report(path, e2e_ms: float, steps=None, llm=None) -> str:
    doc = {"schema_version": 2, "e2e_ms": e2e_ms,
           "breakdown": [{"category": "gpu_compute", "label": "GPU compute", "ms": e2e_ms, "pct": 100.0, "parts": []}],
           "verdict": {"id": "gpu_bound"}, "findings": [], "source": {"format": "kineto"}, "window": {"kind": "whole"}}
    if steps is not None:
        doc["phases"] = {"steps": [{"wall_ms": w} for w in steps]}
    if llm is not None:
        doc["llm"] = llm
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return str(path)


def _ranges(path, dur_ms: list[float], gap_ms: float) -> str:
    """A trace whose only repeated unit is a 'request' range of the given durations, ``gap_ms`` apart."""
    s = Synth()
    t_us = 0.0
    for d in dur_ms:
        s.span(SpanKind.ANNOTATION, "request", t_us, t_us + d * 1e3)
        s.span(SpanKind.CPU_OP, "aten::mm", t_us, t_us + d * 1e3)
        t_us += (d + gap_ms) * 1e3
    native.save(s.done(), path)
    return str(path)


def _llm(tokens_per_s=None, requests_per_s=None) -> dict:
    return {"tokens_per_s": {"generated": tokens_per_s, "prompt": None}, "requests_per_s": requests_per_s}


def _mean(x):
    return sum(x) / len(x)


def _cases(tmp_path):
    """(name, before, after, expected basis, the worse-direction change in % known by construction)."""
    b_steps, a_steps = [10.0, 10.1, 9.9, 10.0], [15.0, 15.1, 14.9, 15.0]
    b_req, a_req = [10.0, 10.1, 9.9, 10.0], [13.0, 13.1, 12.9, 13.0]
    return [
        # e2e: no repeats, no work: the window's time itself (+50 %)
        ("e2e", _report(tmp_path / "e2e_b.json", 100.0), _report(tmp_path / "e2e_a.json", 150.0), "e2e",
         100 * (150.0 / 100.0 - 1)),
        # per step: steps +50 % while e2e falls (fewer steps in the window)
        ("steps", _report(tmp_path / "st_b.json", 100.0, steps=b_steps), _report(tmp_path / "st_a.json", 90.0, steps=a_steps),
         "mean wall time per profiler step", 100 * (_mean(a_steps) / _mean(b_steps) - 1)),
        # per range (traces): each 'request' +30 % while the window shrinks (shorter gaps)
        ("range", _ranges(tmp_path / "r_b.iscope", b_req, 20.0), _ranges(tmp_path / "r_a.iscope", a_req, 2.0),
         "mean wall time per 'request' range", 100 * (_mean(a_req) / _mean(b_req) - 1)),
        # per generated token: tokens/s falls 86.7 % (the trial in issue 46) while the window is shorter
        ("tokens", _report(tmp_path / "tk_b.json", 100.0, llm=_llm(tokens_per_s=1500.0)),
         _report(tmp_path / "tk_a.json", 80.0, llm=_llm(tokens_per_s=199.5)), "throughput", 100 * (1 - 199.5 / 1500.0)),
        # per request: requests/s halves while the window is shorter
        ("requests", _report(tmp_path / "rq_b.json", 100.0, llm=_llm(requests_per_s=40.0)),
         _report(tmp_path / "rq_a.json", 60.0, llm=_llm(requests_per_s=20.0)), "throughput", 100 * (1 - 20.0 / 40.0)),
    ]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    return _cases(tmp_path_factory.mktemp("gate"))


@pytest.mark.parametrize("which", ["e2e", "steps", "range", "tokens", "requests"])
def test_regression_exits_1_beyond_n_and_0_within(cases, which, tmp_path, capsys):
    name, before, after, basis, worse = next(c for c in cases if c[0] == which)
    d = diff_paths(before, after)
    ch = d["change"]
    assert ch["basis"] == basis and ch["id"] == "regression", ch
    assert ch["worse_pct"] == pytest.approx(worse, rel=1e-9)
    out = str(tmp_path / "o")
    capsys.readouterr()
    assert main(["diff", before, after, "-o", out, "-q", "--fail-on-regression", f"{worse - 1:g}"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "regression beyond" in err[0] and f"{worse:.1f}% worse" in err[0], err
    assert main(["diff", before, after, "-o", out, "-q", "--fail-on-regression", f"{worse + 1:g}"]) == 0
    assert main(["diff", before, after, "-o", out, "-q"]) == 0            # no gate asked for


@pytest.mark.parametrize("which", ["e2e", "steps", "range", "tokens", "requests"])
def test_improvement_never_fails(cases, which, tmp_path):
    name, before, after, basis, _ = next(c for c in cases if c[0] == which)
    d = diff_paths(after, before)            # the same pair reversed: an improvement on the same basis
    assert d["change"]["basis"] == basis and d["change"]["id"] == "improvement", d["change"]
    assert d["change"]["worse_pct"] < 0
    assert main(["diff", after, before, "-o", str(tmp_path / "o"), "-q", "--fail-on-regression", "0"]) == 0


def test_throughput_within_min_change_does_not_fail(tmp_path):
    # tokens/s -5 % with the default 10 % minimum change: within_noise, so not a regression at any N
    b = _report(tmp_path / "b.json", 100.0, llm=_llm(tokens_per_s=1000.0))
    a = _report(tmp_path / "a.json", 100.0, llm=_llm(tokens_per_s=950.0))
    assert diff_paths(b, a)["change"]["id"] == "within_noise"
    assert main(["diff", b, a, "-o", str(tmp_path / "o"), "-q", "--fail-on-regression", "0"]) == 0
    assert main(["diff", b, a, "-o", str(tmp_path / "o"), "-q", "--fail-on-regression", "0", "--min-change", "1"]) == 1


def test_default_output_folder_is_outputs_diff(tmp_path, monkeypatch, capsys):
    b = _report(tmp_path / "in" / "b.json", 100.0)
    a = _report(tmp_path / "in" / "a.json", 150.0)
    run = tmp_path / "cwd"
    run.mkdir()
    monkeypatch.chdir(run)
    assert main(["diff", b, a]) == 0
    wrote = sorted(ln.split(" ", 1)[1] for ln in capsys.readouterr().out.splitlines() if ln.startswith("wrote "))
    assert wrote == [str(Path("outputs") / "diff" / "diff.json"), str(Path("outputs") / "diff" / "diff.md")]
    assert json.loads((run / "outputs" / "diff" / "diff.json").read_text())["e2e"]["after_ms"] == 150.0
    assert sorted(p.name for p in run.iterdir()) == ["outputs"]            # nothing else at the current directory
