"""Chrome trace-event export: structure, exact timestamps, flow binding, counters, real traces."""
from __future__ import annotations

import bisect
import json
import re
from collections import defaultdict

import pytest

from conftest import kineto_params
from inferscope.analyze.pipeline import analyze_report
from inferscope.report import chrome
from test_html_helpers import BASE, HOSTILE, make_trace

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_graph"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver"}


def ns(ts: float) -> int:
    return round(ts * 1000)


def check_export(doc: dict, raw: str, trace=None) -> dict:
    """Structural checks mirroring how Perfetto binds flows; returns some counts."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list) and doc["displayTimeUnit"] in ("ns", "ms")
    assert isinstance(doc["otherData"]["time_base_ns"], int)
    ev = doc["traceEvents"]
    # every ts/dur written with exactly 3 decimals (ns precision, no float noise)
    assert not re.search(r'"(?:ts|dur)":-?\d+(?:\.\d{0,2}|\.\d{4,})?[,}]', raw)
    proc = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    thr = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    slices = defaultdict(list)
    for e in ev:
        if e["ph"] == "X":
            assert e["dur"] >= 0
            slices[(e["pid"], e["tid"])].append((ns(e["ts"]), -ns(e["dur"]), e["cat"], e["name"]))
    for k in slices:
        assert k[0] in proc, f"unnamed process {k}"
        assert k in thr, f"unnamed thread {k}"
        slices[k].sort()
        if not thr[k].endswith("(overlapping)"):     # strict nesting, as trace viewers require
            stack = []
            for st, nd, cat, name in slices[k]:
                while stack and stack[-1] <= st:
                    stack.pop()
                assert not stack or st - nd <= stack[-1], (thr[k], name, cat)
                stack.append(st - nd)
    starts = {k: [s[0] for s in v] for k, v in slices.items()}
    gpu_starts = {(k, x[0]): x for k, v in slices.items() for x in v if x[2] in GPU_CATS}

    def deepest(key, t):
        lst = slices.get(key, [])
        i = bisect.bisect_right(starts.get(key, []), t) - 1
        while i >= 0 and i >= len(lst) - 100_000:
            st, nd, cat, name = lst[i]
            if st - nd >= t:          # encloses t (end = start + dur)
                return lst[i]
            i -= 1
        return None

    flows = defaultdict(dict)
    for e in ev:
        if e["ph"] in ("s", "f"):
            assert e["id"] not in flows or e["ph"] not in flows[e["id"]], f"duplicate flow id {e['id']}"
            flows[e["id"]][e["ph"]] = e
    n_launch = 0
    for fid, pair in flows.items():
        assert set(pair) == {"s", "f"}, fid
        s, f = pair["s"], pair["f"]
        assert f.get("bp") == "e"
        if s["cat"] != "launch":
            continue
        n_launch += 1
        src = deepest((s["pid"], s["tid"]), ns(s["ts"]))
        assert src is not None and src[2] in LAUNCH_CATS, (s, src)
        assert src[0] == ns(s["ts"])                                   # at the launch slice's start
        assert not proc[s["pid"]].startswith("GPU")                     # on the launching CPU thread
        key = (f["pid"], f["tid"])
        hit = gpu_starts.get((key, ns(f["ts"])))
        assert hit, (f, "no GPU slice starts at the flow end")
        assert proc[f["pid"]].startswith("GPU ")                        # GPU streams under a "GPU n" process
        tgt = deepest(key, ns(f["ts"]))
        assert tgt is not None and tgt[2] in GPU_CATS, (f, tgt)        # what Perfetto binds bp=e to
    counters = [e for e in ev if e["ph"] == "C"]
    if trace is not None:
        assert n_launch == int((trace.flows.kind == 1).sum())
        if len(trace.counters):
            assert counters and all(isinstance(c["args"]["value"], (int, float)) for c in counters)
            assert {c["pid"] for c in counters} <= set(proc)
        n_x = sum(len(v) for v in slices.values())
        assert n_x >= len(trace.spans) - int((trace.spans.kind == 13).sum())
    return {"flows": n_launch, "counters": len(counters), "procs": proc, "threads": thr}


def test_export_synthetic(tmp_path):
    trace = make_trace()
    out = tmp_path / "timeline.json"
    rep = analyze_report(trace)
    chrome.render(rep, trace, out)
    raw = out.read_text(encoding="utf-8")
    doc = json.loads(raw)
    info = check_export(doc, raw, trace)
    assert info["flows"] == 21 and info["counters"] == 120
    assert "GPU 0" in info["procs"].values() and "CPU process 4242" in info["procs"].values()
    assert {"python main", "loader", "stream 7", "stream 20", "stream 7 ranges"} <= set(info["threads"].values())
    # epoch-scale clock re-based without precision loss: first kernel at BASE + 1 ms + 1001 + 150011 ns
    assert doc["otherData"]["time_base_ns"] == BASE
    k = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    assert k["ts"] == 1151.012 and k["dur"] == 750.002
    assert '"ts":1151.012,' in raw
    # GPU-side ranges on their own thread (they overlap kernels), annotations and marks kept
    rng = [e for e in doc["traceEvents"] if e.get("cat") == "gpu_user_annotation"]
    assert rng and all(e["tid"] != 7 for e in rng)
    assert any(e["ph"] == "i" and e["name"] == "checkpoint" for e in doc["traceEvents"])
    assert any(e.get("cat") == "user_annotation" and e["name"] == "decode" for e in doc["traceEvents"])
    # analysis process: the window, then the report's largest idle gaps, each at its exact ns
    ana = [e for e in doc["traceEvents"] if e.get("cat") == "inferscope"]
    gaps = rep.idle_gaps.largest
    assert gaps and len(ana) == 1 + len(gaps)
    assert ana[0]["args"] == {"e2e_ms": rep.e2e_ms, "verdict": rep.verdict.title}
    assert (ns(ana[0]["ts"]) + BASE, ns(ana[0]["dur"])) == (rep.window.start_ns, rep.window.end_ns - rep.window.start_ns)
    assert [(ns(e["ts"]) + BASE, ns(e["dur"])) for e in ana[1:]] == [(g.start_ns, g.end_ns - g.start_ns) for g in gaps]


def test_export_hostile_names_stay_valid_json(tmp_path):
    trace = make_trace({"thread": HOSTILE[0], "kernel": HOSTILE[6] + "\ud800", "range": HOSTILE[5], "file": HOSTILE[1]})
    out = tmp_path / "t.json"
    rep = analyze_report(trace)
    rep.window.label = rep.verdict.title = HOSTILE[2] + "\ud800"      # untrusted text in the analysis rows too
    chrome.render(rep, trace, out)
    raw = out.read_text(encoding="utf-8")
    doc = json.loads(raw)
    check_export(doc, raw, trace)
    names = {e.get("name") for e in doc["traceEvents"]} | {e["args"].get("name") for e in doc["traceEvents"] if e["ph"] == "M"}
    assert HOSTILE[6] + "\ufffd" in names and HOSTILE[5] in names
    ana = next(e for e in doc["traceEvents"] if e.get("cat") == "inferscope")
    assert ana["name"] == "window: " + HOSTILE[2] + "\ufffd" and ana["args"]["verdict"] == HOSTILE[2] + "\ufffd"


def test_export_empty_trace(tmp_path):
    from inferscope.trace import TraceBuilder
    out = tmp_path / "t.json"
    chrome.render(None, TraceBuilder().finalize(), out)
    doc = json.loads(out.read_text())
    assert doc["traceEvents"] and all(e["ph"] == "M" for e in doc["traceEvents"])


def test_us_exact():
    assert chrome.us(0) == "0.000" and chrome.us(1) == "0.001" and chrome.us(123_456_789_012_345) == "123456789012.345"


@pytest.mark.shared
@pytest.mark.parametrize("path", kineto_params())
def test_export_real_trace(tmp_path, path):
    from inferscope.analyze.options import AnalyzeOptions
    from inferscope.ingest import load_trace
    trace = load_trace(path)
    result = analyze_report(trace, AnalyzeOptions())
    out = tmp_path / "timeline.json"
    chrome.render(result, trace, out)
    raw = out.read_text(encoding="utf-8")
    doc = json.loads(raw)
    info = check_export(doc, raw, trace)
    if trace.has_gpu:
        assert any(v.startswith("GPU ") for v in info["procs"].values())


@pytest.mark.shared
def test_cli_export(tmp_path):
    from conftest import shared_path
    from inferscope.cli import main
    p = shared_path("kineto", "tracelens_h100_bert_small_fillmask.json.gz")
    out = tmp_path / "t.json"
    assert main(["export", str(p), "-o", str(out), "-q"]) == 0
    raw = out.read_text(encoding="utf-8")
    check_export(json.loads(raw), raw)


def test_export_moves_misnested_spans(tmp_path):
    """Overlapping-but-not-nested spans go to an "(overlapping)" sibling thread, flows follow them."""
    from inferscope.trace import FlowKind, SpanKind, TraceBuilder, TrackKind
    b = TraceBuilder()
    cpu = b.track(TrackKind.CPU_THREAD, pid=1, tid=1, name="main")
    gpu = b.track(TrackKind.GPU_STREAM, pid=1, tid=7, device=0)
    S = b.strings.intern
    idx = b.add_spans(start_ns=BASE + __import__("numpy").array([0, 10, 40, 45, 50, 75]),
                      end_ns=BASE + __import__("numpy").array([100, 50, 60, 48, 80, 90]),
                      track=[cpu, cpu, cpu, cpu, gpu, gpu],
                      kind=[int(SpanKind.CPU_OP), int(SpanKind.CPU_OP), int(SpanKind.CPU_OP), int(SpanKind.RUNTIME),
                            int(SpanKind.KERNEL), int(SpanKind.KERNEL)],
                      name=[S("parent"), S("child"), S("straddler"), S("cudaLaunchKernel"), S("k1"), S("k2")])
    b.add_flows([idx[3]], [idx[5]], FlowKind.LAUNCH)
    trace = b.finalize()
    out = tmp_path / "t.json"
    chrome.render(None, trace, out)
    raw = out.read_text()
    doc = json.loads(raw)
    info = check_export(doc, raw, trace)
    assert "main (overlapping)" in info["threads"].values() and info["flows"] == 1
    moved = {e["name"] for e in doc["traceEvents"] if e["ph"] == "X" and info["threads"][(e["pid"], e["tid"])].endswith("(overlapping)")}
    assert moved == {"straddler", "k2"}          # the launch stays nested in "child"; k2 overlaps k1


@pytest.mark.shared
def test_export_streams_in_bounded_writes_and_gzips(tmp_path):
    """Issue 13: the export is written as a stream of chunks of at most CHUNK_EVENTS events (no
    full in-memory JSON of the timeline), and `-o x.json.gz` is gzip of the same document."""
    import gzip
    from conftest import shared_path
    from inferscope.analyze.options import AnalyzeOptions
    from inferscope.cli import main
    from inferscope.ingest import load_trace
    p = shared_path("kineto", "hta_trace_diff_control_a100_rank3.json.gz")
    trace = load_trace(p)
    result = analyze_report(trace, AnalyzeOptions())

    class Rec:
        def __init__(self):
            self.sizes, self.parts = [], []

        def write(self, b):
            self.sizes.append(len(b))
            self.parts.append(bytes(b))

    monkey = chrome.CHUNK_EVENTS
    chrome.CHUNK_EVENTS = 2000
    try:
        rec = Rec()
        n = chrome.write(trace, result, rec)
    finally:
        chrome.CHUNK_EVENTS = monkey
    total = sum(rec.sizes)
    assert n > 50_000 and len(rec.sizes) > n // 2000          # many writes, not one big string
    assert max(rec.sizes) < total / 10
    raw = b"".join(rec.parts)
    doc = json.loads(raw)
    assert len(doc["traceEvents"]) == n
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert main(["export", str(p), "-o", str(tmp_path / "a" / "t.json.gz"), "-q"]) == 0
    assert main(["export", str(p), "-o", str(tmp_path / "b" / "t.json"), "-q"]) == 0
    gz = (tmp_path / "a" / "t.json.gz").read_bytes()
    plain = (tmp_path / "b" / "t.json").read_bytes()
    assert gz[:2] == b"\x1f\x8b" and len(gz) < len(plain) / 3
    assert gzip.decompress(gz) == plain
    assert [x.name for x in (tmp_path / "a").iterdir() if not x.name.startswith(".")] == ["t.json.gz"]  # no leftovers


def test_gz_output_is_compressed_while_written(tmp_path, monkeypatch):
    """`-o x.json.gz` is compressed as the renderer writes (util/atomic.py), never staged uncompressed:
    mid-write, the only file being written is the gzip temporary beside the destination."""
    import gzip
    from inferscope.cli import main
    from inferscope.trace import native
    from helpers import Synth
    t = Synth()
    for i in range(200):
        t.launch(10 * i, 10 * i + 2, 10 * i + 3, 10 * i + 9)
    tr = t.done()
    src = tmp_path / "in.iscope"
    native.save(tr, src)
    seen = []
    real = chrome.write

    def spy(trace, result, fh):
        n = real(trace, result, fh)
        fh.flush()
        for f in sorted((tmp_path / "out").rglob("*")):
            if f.is_file():
                seen.append((f.name, f.read_bytes()[:2]))
        return n
    monkeypatch.setattr(chrome, "write", spy)
    assert main(["export", str(src), "-o", str(tmp_path / "out" / "t.json.gz"), "-q"]) == 0
    assert seen and all(head == b"\x1f\x8b" for _name, head in seen), seen
    assert all(name.endswith(".tmp") and ".gz" in name for name, _ in seen), seen   # no plain t.json staged
    doc = json.loads(gzip.decompress((tmp_path / "out" / "t.json.gz").read_bytes()))
    assert len([e for e in doc["traceEvents"] if e.get("ph") == "X"]) >= 400
    assert native.load(src).n_events == tr.n_events                                    # the input untouched
