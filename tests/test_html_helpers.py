"""Shared builders for the HTML / export tests: a small synthetic trace and its typed Report with planted
content.  (No tests here; imported by test_html_*.py / test_export*.py.)"""
from __future__ import annotations

import numpy as np

from inferscope.trace import CopyKind, FlowKind, MemKind, SpanKind, TraceBuilder, TrackKind

# epoch-scale clock (ns) to exercise float precision in the exporter
BASE = 1_700_000_000_123_456_789
MS = 1_000_000

HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(2)>',
    "</style><style>body{display:none}</style>",
    "]]><!--",
    "' onmouseover='alert(3)",
    "evil\u202etxt.exe\u2066x\u2069",
    "ctl\x00\x07\x1b[31m",
    "</title></svg><svg onload=alert(4)>",
    "javascript:alert(5)",
    "https://evil.example/x.png",
    "A" * 10_000,
]


def make_trace(names: dict | None = None, pid: int = 4242):
    """CPU main thread + loader thread, two GPU streams, steps, ranges, flows, counters."""
    names = names or {}
    nm = lambda key, default: names.get(key, default)  # noqa: E731
    b = TraceBuilder()
    cpu = b.track(TrackKind.CPU_THREAD, pid=pid, tid=1, name=nm("thread", "python main"))
    cpu2 = b.track(TrackKind.CPU_THREAD, pid=pid, tid=2, name=nm("thread2", "loader"))
    s7 = b.track(TrackKind.GPU_STREAM, pid=pid, tid=7, device=0)
    s20 = b.track(TrackKind.GPU_STREAM, pid=pid, tid=20, device=0)
    ctr_cpu = b.track(TrackKind.COUNTER, pid=pid, name="cpu.util_pct")
    ctr_gpu = b.track(TrackKind.COUNTER, device=0, name="gpu.util_pct")
    S = b.strings.intern
    rows = []  # (start, end, track, kind, name, extra)

    def add(start, end, track, kind, name, **extra):
        rows.append((BASE + start, BASE + end, track, int(kind), S(name), extra))
        return len(rows) - 1

    launches = []
    for step in range(3):
        t = step * 10 * MS
        add(t, t + 10 * MS, cpu, SpanKind.STEP, f"ProfilerStep#{step}")
        add(t + 100_000, t + 1 * MS, cpu, SpanKind.CPU_SAMPLE, "tokenization", detail=S("tokenize"))
        add(t + 1 * MS, t + 8 * MS, cpu, SpanKind.ANNOTATION, nm("range", "decode"))
        for k in range(5):
            op0 = t + 1 * MS + k * 1 * MS + 1_001
            add(op0, op0 + 600_000, cpu, SpanKind.CPU_OP, "aten::linear")
            r = add(op0 + 100_003, op0 + 110_007, cpu, SpanKind.RUNTIME, "cudaLaunchKernel", correlation=step * 100 + k)
            g = add(op0 + 150_011, op0 + 900_013, s7, SpanKind.KERNEL, nm("kernel", "sm80_xmma_gemm_bf16"),
                    correlation=step * 100 + k)
            launches.append((r, g))
        r = add(t + 6 * MS + 5, t + 6 * MS + 30_005, cpu, SpanKind.RUNTIME, "cudaMemcpyAsync", correlation=step * 100 + 50)
        g = add(t + 6 * MS + 40_000, t + 6 * MS + 440_000, s7, SpanKind.MEMCPY, "Memcpy HtoD (Pageable -> Device)",
                correlation=step * 100 + 50, bytes=64 << 20, copy_kind=int(CopyKind.H2D), src_mem=int(MemKind.PAGEABLE),
                dst_mem=int(MemKind.DEVICE))
        launches.append((r, g))
        r = add(t + 6 * MS + 50_000, t + 6 * MS + 60_000, cpu, SpanKind.RUNTIME, "cudaMemsetAsync", correlation=step * 100 + 60)
        g = add(t + 6 * MS + 500_000, t + 6 * MS + 520_000, s20, SpanKind.MEMSET, "Memset (Device)", correlation=step * 100 + 60)
        launches.append((r, g))
        add(t + 7 * MS, t + 7 * MS + 800_000, cpu, SpanKind.RUNTIME, "cudaStreamSynchronize")
        add(t + 2 * MS, t + 9 * MS, cpu2, SpanKind.CPU_OP, nm("op2", "DataLoader.__next__"))
        add(t + 1 * MS + 150_011, t + 6 * MS, s7, SpanKind.GPU_ANNOTATION, nm("range", "decode"))
    add(35 * MS, 35 * MS, cpu, SpanKind.MARK, "checkpoint")
    st = np.array([r[0] for r in rows], dtype=np.int64)
    en = np.array([r[1] for r in rows], dtype=np.int64)
    cols = dict(start_ns=st, end_ns=en, track=np.array([r[2] for r in rows]), kind=np.array([r[3] for r in rows]),
                name=np.array([r[4] for r in rows]))
    for key, default in (("correlation", -1), ("bytes", -1), ("copy_kind", 0), ("src_mem", 0), ("dst_mem", 0), ("detail", -1)):
        cols[key] = np.array([r[5].get(key, default) for r in rows])
    idx = b.add_spans(**cols)
    b.add_flows([idx[r] for r, _ in launches], [idx[g] for _, g in launches], FlowKind.LAUNCH)
    ts = BASE + np.arange(0, 30 * MS, MS // 2)
    b.add_counters(ctr_cpu, ts, 50 + 40 * np.sin(np.arange(len(ts)) / 5))
    b.add_counters(ctr_gpu, ts, 30 + 20 * np.cos(np.arange(len(ts)) / 3))
    b.meta.update(source_format="kineto", source_file=nm("file", "synthetic.json.gz"))
    return b.finalize()


def make_result(trace, text: str | None = None):
    """The typed Report of ``trace`` (``make_trace``: its analysis) with planted, known content: the verdict, two
    findings, warnings, limitations, three tables, two idle gaps, the source, device and window names - each
    string ``text`` when given (a hostile name), so that a test knows what the page must show."""
    import msgspec
    from inferscope.analyze.pipeline import analyze_report
    from inferscope.result import Device, DeviceGap, Finding, Part, Table, Verdict
    t = text
    rep = msgspec.structs.replace
    r = analyze_report(trace)
    start = r.window.start_ns
    bd = list(r.breakdown)
    if t is not None:
        bd[0] = rep(bd[0], parts=bd[0].parts + [Part(name=t, label=t, ns=1000, ms=0.001, pct=0.0)])
    gaps = None
    if r.idle_gaps is not None:
        gaps = rep(r.idle_gaps, largest=[
            DeviceGap(start_ns=start + 6_520_000, end_ns=start + 11_150_000, ms=4.63, offset_ms=6.52,
                      host=t or "cudaStreamSynchronize", host_kind="sync", host_overlap_pct=100.0),
            DeviceGap(start_ns=start + 16_520_000, end_ns=start + 21_150_000, ms=4.63, offset_ms=16.52,
                      host="", host_kind=None, host_overlap_pct=0.0)])
    findings = [
        Finding(id="cpu_preprocessing", severity="high", title=t or "Tokenization dominates CPU time",
                evidence={"tokenization_ms": 2.7, (t or "name"): t or "x"}, evidence_source={}, evidence_derived={},
                evidence_text=[t or "2.7 ms of 30 ms in tokenization"], suggestion=t or "Move tokenization off the critical path"),
        Finding(id="pageable_h2d", severity="medium", title="H2D copies from pageable memory", evidence={"bytes": 201326592},
                evidence_source={}, evidence_derived={}, evidence_text=["3 copies"], suggestion="pin_memory=True"),
    ]
    tables = {
        "kernels": Table(columns=["name", "count", "total_ms", "pct"], rows=[[t or "sm80_xmma_gemm_bf16", 15, 11.25, 37.5],
                                                                              ["Memset (Device)", 3, 0.06, 0.2]]),
        "copies": Table(columns=["kind", "count", "bytes", "ms"], rows=[["H2D pageable", 3, 201326592, 1.2]]),
        (t or "syncs"): Table(columns=[t or "call", "count", "ms"], rows=[[t or "cudaStreamSynchronize", 3, 2.4]]),
    }
    return rep(r, source=rep(r.source, file=t or "synthetic.json.gz", devices=[Device(id=0, name=t or "NVIDIA H100")],
                             tool_versions={"torch": "2.6.0"}),
               window=rep(r.window, label=t or "whole trace"), breakdown=bd, idle_gaps=gaps, findings=findings,
               verdict=Verdict(id="gpu_bound", title=t or "GPU-bound", confidence=0.72, confidence_basis="breakdown shares",
                               evidence=[t or "GPU compute is 50% of e2e"]),
               warnings=[t or "2 events had negative duration"], limitations=["single process only"], tables=tables,
               what_if=None)


def render_html(report, trace, path) -> None:
    """report.html of a typed Report (planted or partial content): the page from ``html.build_html``, the strip
    computed from ``trace`` (None: no strip) over the report's window by analyze/views.py, as
    ``outputs.write_reports`` attaches it."""
    from inferscope.analyze.views import views_for
    from inferscope.report.html import build_html
    from inferscope.util.atomic import atomic_write_text
    views = views_for(trace, report.window.start_ns, report.window.end_ns, ("html",))
    atomic_write_text(path, build_html(report, views))
