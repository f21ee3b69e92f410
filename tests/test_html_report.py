"""HTML report: structure, robustness, safety (hostile names), offline-ness, size."""
from __future__ import annotations

import base64
import hashlib
import re
import time
from html.parser import HTMLParser

import numpy as np
import pytest

from inferscope.report import html as H
from inferscope.trace import FlowKind, SpanKind, TraceBuilder, TrackKind
from test_html_helpers import BASE, HOSTILE, MS, make_result, make_trace, render_html

# every element / attribute the renderer may emit; anything else came from data
ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "header", "main", "footer", "section", "div", "span",
                "h1", "h2", "h3", "p", "b", "small", "ul", "li", "table", "thead", "tbody", "tr", "th", "td",
                "svg", "rect", "text", "title", "g", "path", "line", "polyline", "script"}
ALLOWED_ATTRS = {"lang", "charset", "http-equiv", "content", "name", "class", "id", "title", "viewbox", "role",
                 "aria-label", "aria-hidden", "x", "y", "width", "height", "fill", "fill-opacity", "stroke",
                 "stroke-width", "stroke-opacity", "stroke-dasharray", "font-size", "text-anchor", "pointer-events",
                 "transform", "d", "points", "vector-effect", "x1", "x2", "y1", "y2", "data-x0", "data-w", "data-ms",
                 "data-n", "data-l", "data-u", "data-b", "data-v"}   # counter lanes: numbers and an escaped label for the readout


class Collector(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.data: list[str] = []
        self.raw: dict[str, list[str]] = {"script": [], "style": []}
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag in self.raw:
            self._in = tag

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None

    def handle_data(self, data):
        if self._in:
            self.raw[self._in].append(data)
        else:
            self.data.append(data)


def parse(doc: str) -> Collector:
    c = Collector()
    c.feed(doc)
    c.close()
    return c


def check_structure(doc: str) -> Collector:
    """Assertions every rendered report must pass (used for all inputs)."""
    c = parse(doc)
    tags = [t for t, _ in c.tags]
    assert tags.count("script") == 1 and tags.count("style") == 1
    assert set(tags) <= ALLOWED_TAGS, set(tags) - ALLOWED_TAGS
    for tag, attrs in c.tags:
        for k, v in attrs.items():
            assert k in ALLOWED_ATTRS, (tag, k, v)
            assert not k.startswith("on")
            v = v or ""
            assert "://" not in v or k == "title", (tag, k, v)
            assert not v.strip().lower().startswith(("javascript:", "//", "data:text")) or k == "title", (tag, k, v)
    # no external references anywhere in markup, CSS or JS
    assert not [a for _, a in c.tags if "src" in a or "href" in a or "srcset" in a]
    css = "".join(c.raw["style"])
    js = "".join(c.raw["script"])
    assert "url(" not in css and "@import" not in css and "http" not in css
    assert "http" not in js and "fetch" not in js and "XMLHttpRequest" not in js and "import(" not in js
    # CSP: nothing but the hashed inline style and script
    csp = [a["content"] for t, a in c.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert len(csp) == 1 and "default-src 'none'" in csp[0] and "unsafe-inline" not in csp[0]
    sha = lambda s: base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()  # noqa: E731
    assert f"'sha256-{sha(css)}'" in csp[0] and f"'sha256-{sha(js)}'" in csp[0]
    # no raw bidi overrides / control characters in the file
    assert not re.search("[\u202a-\u202e\u2066-\u2069\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", doc)
    return c


def test_report_synthetic_trace_and_result(tmp_path):
    trace = make_trace()
    result = make_result(trace)
    out = tmp_path / "report.html"
    render_html(result, trace, out)
    doc = out.read_text(encoding="utf-8")
    c = check_structure(doc)
    ids = {a.get("id") for _, a in c.tags}
    assert {"e2e", "verdict", "breakdown-chart", "timeline-chart", "findings", "tables"} <= ids
    text = " ".join(c.data)
    assert H.fmt_ms(result.e2e_ms) == "30.00 ms" and "30.00 ms" in text
    assert "GPU-bound" in text and "Tokenization dominates CPU time" in text and "Move tokenization" in text
    assert "sm80_xmma_gemm_bf16" in text and "cudaStreamSynchronize" in text          # tables
    assert "2 events had negative duration" in text and "single process only" in text  # warnings, limitations
    # timeline: one lane per GPU stream and busy CPU thread, steps and idle gaps marked
    assert "GPU 0 stream 7" in text and "GPU 0 stream 20" in text and "python main" in text and "loader" in text
    assert "ProfilerStep#1" in text and "decode" in text
    assert sum(1 for t, a in c.tags if t == "rect" and a.get("class") == "idle-gap") == 2
    # each planted gap (DeviceGap) labelled with the host activity the Report gives it, the unlabelled one without
    assert "GPU idle gap 4.63 ms at +6.520 ms CPU meanwhile: cudaStreamSynchronize (sync)" in text
    assert "GPU idle gap 4.63 ms at +16.520 ms" in text and text.count("CPU meanwhile") == 1
    assert len(doc) < 200_000


def test_report_on_pipeline_result(tmp_path):
    from inferscope.analyze.options import AnalyzeOptions
    from inferscope.analyze.pipeline import analyze_report
    from inferscope.analyze.views import attach
    trace = make_trace()
    rep = analyze_report(trace, AnalyzeOptions())
    attach(rep, trace, ["html"])
    out = tmp_path / "r.html"
    H.render(rep, trace, out)
    doc = out.read_text(encoding="utf-8")
    c = check_structure(doc)
    text = " ".join(c.data)
    assert H.fmt_ms(rep.e2e_ms) in text
    for f in rep.findings:
        assert H.clean(f.title) in text
    from inferscope.report.shown import shown_tables
    assert shown_tables(rep)
    for name in rep.tables:     # each shown table once; the rest (empty, drawn elsewhere) never
        n = sum(a.get("id") == f"table-{name}" for _, a in c.tags)
        assert n == (1 if name in shown_tables(rep) else 0), name


def _bare(rep):
    """The Report with every optional section absent and nothing in its lists (the least a Report can hold)."""
    import msgspec
    fields = rep.__struct_fields__
    optional = fields[len(fields) - len(rep.__struct_defaults__):]      # (every defaulted section is Optional)
    return msgspec.structs.replace(rep, gpu=None, idle_gaps=None, cpu_sampling=None, breakdown=[], findings=[], tables={},
                                   warnings=[], limitations=[], **{f: None for f in optional})


def _odd(rep):
    """Odd values a Report can hold: a NaN end-to-end time, an unknown category, a finding of an unknown severity,
    table rows shorter and longer than the columns, a zero-length window."""
    import msgspec
    from inferscope.result import Category, Finding, Table
    return msgspec.structs.replace(
        rep, e2e_ms=float("nan"), breakdown=[Category(category="weird", label="weird", ns=0, ms=float("nan"), pct=-5.0, parts=[])],
        findings=[Finding(id="", severity="catastrophic", title="", evidence={}, evidence_source={}, evidence_derived={},
                          evidence_text=[], suggestion="")],
        tables={"t": Table(columns=["a"], rows=[[1, 2, 3], [None], [True]])},
        window=msgspec.structs.replace(rep.window, end_ns=rep.window.start_ns))


# (dict shapes a typed Report cannot hold - a missing verdict, a table that is not a table, a list of junk for the
# breakdown, idle gaps as [start, end] pairs - are no longer renderer input: the Report is what renderers take)
@pytest.mark.parametrize("variant", ["bare", "odd"])
def test_report_robust_to_absent_and_odd_values(tmp_path, variant):
    from inferscope.analyze.pipeline import analyze_report
    base = analyze_report(make_trace())
    rep = _bare(base) if variant == "bare" else _odd(base)
    for trace in (None, make_trace(), TraceBuilder().finalize()):
        out = tmp_path / "r.html"
        render_html(rep, trace, out)
        check_structure(out.read_text(encoding="utf-8"))


def test_report_cpu_only(tmp_path):
    b = TraceBuilder()
    t = b.track(TrackKind.CPU_THREAD, pid=1, tid=1, name="main")
    st = np.arange(0, 100) * MS
    b.add_spans(start_ns=st, end_ns=st + MS // 2, track=t, kind=int(SpanKind.CPU_SAMPLE),
                name=b.strings.intern_many(["tokenization", "cpu_compute", "waiting", "user_code"] * 25))
    trace = b.finalize()
    res = make_result(trace)
    assert res.gpu is None                    # (no GPU work in the trace: the analysis says so)
    out = tmp_path / "r.html"
    render_html(res, trace, out)
    c = check_structure(out.read_text(encoding="utf-8"))
    text = " ".join(c.data)
    assert "no GPU activity" in text and "CPU preprocessing" in text and "Waiting (off-CPU or for a CPU)" in text


def hostile_trace():
    names = {"thread": HOSTILE[0], "thread2": HOSTILE[1], "kernel": HOSTILE[2] + HOSTILE[7], "range": HOSTILE[5] + HOSTILE[3],
             "op2": HOSTILE[4] + HOSTILE[6], "file": HOSTILE[8] + HOSTILE[1]}
    return make_trace(names)


@pytest.mark.parametrize("payload", HOSTILE)
def test_hostile_names_render_as_text(tmp_path, payload):
    trace = hostile_trace()
    result = make_result(trace, text=payload)
    result.tables["kernels"].rows.append([HOSTILE[-1] + "<b>tail</b>", 1, 0.1, 0.1])
    out = tmp_path / "r.html"
    render_html(result, trace, out)
    doc = out.read_text(encoding="utf-8")
    c = check_structure(doc)      # exactly our one <script>, no foreign element/attribute, no on*
    text = "".join(c.data)
    shown = H.clean(payload)
    if len(shown) <= H.DISPLAY_MAX:
        assert shown in text      # the payload is visible as text, e.g. "<script>alert(1)</script>"
    else:                          # truncated for display, full value in a title attribute
        assert shown[:H.DISPLAY_MAX] in text
        assert any(a.get("title") == shown for _, a in c.tags)
    assert "<U+202E>" in text and "<U+2066>" in text   # bidi overrides shown visibly (from the range name)
    assert "<img" not in doc and "<svg onload" not in doc.lower()


def test_clean_and_text_helpers():
    assert H.clean("a\u202eb\x00c\ud800") == "a<U+202E>b<U+0000>c\ufffd"
    t = H.text("x" * 500)
    assert t.startswith('<span class="trunc" title="' + "x" * 500 + '">') and "500 chars" in t
    assert H.text('"><script>') == "&quot;&gt;&lt;script&gt;"
    assert H.attr("' onx='1") == "&#x27; onx=&#x27;1"


def test_large_trace_is_summarised(tmp_path):
    """300k spans + 150k flows render fast into a small file (size independent of event count)."""
    rng = np.random.default_rng(1)
    b = TraceBuilder()
    cpu = b.track(TrackKind.CPU_THREAD, pid=1, tid=1, name="main")
    gpus = np.array([b.track(TrackKind.GPU_STREAM, pid=1, tid=7 + i, device=0) for i in range(3)])
    n = 150_000
    tl = BASE + np.sort(rng.integers(0, 5_000_000_000, n))
    rt = b.add_spans(start_ns=tl, end_ns=tl + 3000, track=cpu, kind=int(SpanKind.RUNTIME), name=b.strings.intern("cudaLaunchKernel"))
    ks = tl + 5000 + rng.integers(0, 40_000, n)
    names = b.strings.intern_many([f"kernel_{i}_" + "x" * 200 for i in range(1000)])
    kr = b.add_spans(start_ns=ks, end_ns=ks + rng.integers(500, 20_000, n), track=gpus[rng.integers(0, 3, n)],
                     kind=int(SpanKind.KERNEL), name=names[rng.integers(0, 1000, n)])
    b.add_flows(rt, kr, FlowKind.LAUNCH)
    trace = b.finalize()
    s, e = trace.bounds_ns()
    import msgspec
    from inferscope.analyze.pipeline import analyze_report
    small = analyze_report(make_trace())       # (a Report over the big trace's window: the strip is what is timed)
    rep = msgspec.structs.replace(_bare(small), window=msgspec.structs.replace(small.window, start_ns=int(s), end_ns=int(e)),
                                  e2e_ms=(e - s) / 1e6)
    t0 = time.perf_counter()
    render_html(rep, trace, tmp_path / "big.html")
    dt = time.perf_counter() - t0
    size = (tmp_path / "big.html").stat().st_size
    assert size < 1_000_000 and dt < 5.0, (size, dt)
    check_structure((tmp_path / "big.html").read_text(encoding="utf-8"))
