"""Every renderer over every kind of trace (parametrised, as pyinstrument does)."""
import csv
import json

import pytest

from inferscope.analyze.pipeline import analyze
from inferscope.report import RENDERERS, get_renderer
from inferscope.trace import CopyKind, MemKind, SpanKind

from helpers import Synth

HOSTILE = ['<script>alert(1)</script>', '"><img src=x onerror=alert(1)>', "a|b`c\nd", "=cmd|' /C calc'!A0",
           "\u202egnp.exe", "x" * 10_000, "\x00\x07ctl"]


def gpu_trace():
    t = Synth()
    t.span(SpanKind.STEP, "ProfilerStep#1", 0, 400)
    t.span(SpanKind.ANNOTATION, "tokenize", 0, 50)
    t.span(SpanKind.CPU_OP, "aten::linear", 50, 120)
    t.launch(60, 70, 80, 200, name="gemm")
    t.copy(210, 220, 230, 260, ck=CopyKind.H2D, host=MemKind.PAGEABLE)
    t.span(SpanKind.RUNTIME, "cudaDeviceSynchronize", 270, 350)
    return t.done()


def cpu_trace():
    t = Synth()
    t.span(SpanKind.CPU_SAMPLE, "tokenization", 0, 100, detail=t.b.strings.intern("tok.py:encode"))
    t.span(SpanKind.CPU_OP, "aten::mm", 100, 300)
    t.span(SpanKind.CPU_SAMPLE, "waiting", 300, 350)
    return t.done()


def hostile_trace():
    t = Synth()
    for i, name in enumerate(HOSTILE):
        t.span(SpanKind.ANNOTATION, name, i * 100, i * 100 + 50)
        t.launch(i * 100 + 1, i * 100 + 2, i * 100 + 5, i * 100 + 40, name=name)
    return t.done()


def mark_only_trace():
    t = Synth()
    t.span(SpanKind.MARK, "m", 5, 5)
    return t.done()


TRACES = {"gpu": gpu_trace, "cpu_only": cpu_trace, "hostile": hostile_trace, "marks_only": mark_only_trace}


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
@pytest.mark.parametrize("kind", sorted(TRACES))
def test_every_renderer_on_every_trace(tmp_path, fmt, kind):
    trace = TRACES[kind]()
    res = analyze(trace)
    out = tmp_path / ("tables" if fmt == "csv" else f"out.{fmt}")
    get_renderer(fmt)(res, trace, out)
    files = [p for p in (out.rglob("*") if out.is_dir() else [out]) if p.is_file()]
    assert files or (fmt == "csv" and not res["tables"])
    for p in files:
        data = p.read_bytes()
        assert data
        if p.suffix == ".json":
            json.loads(data)
    assert not list(tmp_path.rglob("*.tmp"))
    if kind == "hostile" and fmt == "md":
        md = out.read_text()
        assert "<script>" not in md and "<img" not in md and "\u202e" not in md and "\x00" not in md
        assert "x" * 1000 not in md  # long names truncated
    if kind == "hostile" and fmt == "csv":
        for p in files:
            for row in csv.reader(p.open()):
                for cell in row:
                    assert not (cell[:1] in ("=", "+", "@") and not cell.replace(".", "").isdigit()), cell
