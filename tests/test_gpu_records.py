"""collect/gpu_records.py on real CUPTI records captured on an H100 (tests/data/cupti): every span,
copy, sync and launch flow recounted from the raw rows; the measured pass against what the
workload launched; the clock conversion against the workload's own perf_counter_ns bounds."""
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from inferscope.collect.gpu_activity import ROW_FIELDS, clock_offset
from inferscope.collect.gpu_records import add_to
from inferscope.trace.builder import TraceBuilder
from inferscope.trace.kinds import CopyKind, FlowKind, MemKind, SpanKind, TrackKind
from inferscope.util.demangle import demangle

DATA = Path(__file__).parent / "data" / "cupti"


def _load(name):
    return json.loads((DATA / f"cupti_{name}.json").read_text())


def _build(snap, room=None):
    b = TraceBuilder()
    out = add_to(b, snap, room=room)
    return b.finalize(), out


def _measured_pass(name):
    """The capture as a trace, and the mask of spans inside its measured pass (the workload's own
    perf_counter_ns bounds); kernels of the pass by index."""
    snap = _load(name)
    t, _ = _build(snap)
    w = snap["workload"]
    s = t.spans
    inw = (s.start_ns >= w["t0_ns"]) & (s.end_ns <= w["t1_ns"])
    return snap, t, inw, np.flatnonzero((s.kind == int(SpanKind.KERNEL)) & inw)


@pytest.mark.parametrize("name", ["torch", "cupy"])
def test_every_record_becomes_one_span_on_the_right_clock(name):
    snap = _load(name)
    assert snap["fields"] == {k: list(v) for k, v in ROW_FIELDS.items()}
    t, out = _build(snap)
    rows, off = snap["rows"], snap["clock_offset_ns"]
    kinds = {"kernel": SpanKind.KERNEL, "memcpy": SpanKind.MEMCPY, "memset": SpanKind.MEMSET,
             "sync": SpanKind.GPU_SYNC, "runtime": SpanKind.RUNTIME, "driver": SpanKind.DRIVER}
    s = t.spans
    for k, sk in kinds.items():
        sel = s.kind == int(sk)
        assert int(sel.sum()) == len(rows[k]), k
        # start/end: the raw CUPTI timestamps minus the calibrated offset, exactly
        assert sorted(s.start_ns[sel].tolist()) == sorted(r[0] - off for r in rows[k]), k
    assert out["spans"] == sum(len(v) for v in rows.values()) and out["dropped"] == 0
    assert out["host_api_calls"] == len(rows["runtime"]) + len(rows["driver"])
    # kernel names demangled once per distinct raw name, the spelling Kineto shows
    want = Counter(demangle(r[6]) for r in rows["kernel"])
    got = Counter(t.names(np.flatnonzero(s.kind == int(SpanKind.KERNEL))))
    assert got == want
    assert not any(n.startswith("_Z") for n in got), "mangled name left"


@pytest.mark.parametrize("name", ["torch", "cupy"])
def test_launch_flows_recounted_from_correlation_ids(name):
    snap = _load(name)
    t, out = _build(snap)
    rows = snap["rows"]
    api = {r[5] for k in ("runtime", "driver") for r in rows[k]}
    work = [r[5] for k in ("kernel", "memcpy", "memset") for r in rows[k]]
    syncs = [r[4] for r in rows["sync"]]
    want_launch = sum(1 for c in work if c in api)
    want_other = sum(1 for c in syncs if c in api)
    f = t.flows
    assert int((f.kind == int(FlowKind.LAUNCH)).sum()) == want_launch
    assert int((f.kind == int(FlowKind.OTHER)).sum()) == want_other
    assert out["flows"] == want_launch + want_other
    # every launched activity in the capture has its API call (the filter keeps the launching ones)
    assert want_launch == len(work)
    s = t.spans
    src_kind, dst_kind = s.kind[f.src], s.kind[f.dst]
    assert np.isin(src_kind, [int(SpanKind.RUNTIME), int(SpanKind.DRIVER)]).all()
    assert (s.correlation[f.src] == s.correlation[f.dst]).all()
    lf = f.kind == int(FlowKind.LAUNCH)
    assert (s.start_ns[f.dst[lf]] >= s.start_ns[f.src[lf]]).all()   # GPU work starts after its launch call
    assert np.isin(dst_kind[lf], [int(SpanKind.KERNEL), int(SpanKind.MEMCPY), int(SpanKind.MEMSET)]).all()


def test_torch_measured_pass_matches_what_was_launched():
    snap, t, inw, k = _measured_pass("torch")
    w, s = snap["workload"], t.spans
    names = t.names(k)
    assert sum("CUDAFunctorOnSelf_add" in n for n in names) == w["n_add"]
    # copies of the pass: pageable and pinned 256 KiB H2D, the 4-byte .item() D2H
    c = np.flatnonzero((s.kind == int(SpanKind.MEMCPY)) & inw)
    got = sorted((int(s.copy_kind[i]), int(s.src_mem[i]), int(s.dst_mem[i]), int(s.bytes[i])) for i in c)
    want = sorted([(int(CopyKind.H2D), int(MemKind.PAGEABLE), int(MemKind.DEVICE), 262144),
                   (int(CopyKind.H2D), int(MemKind.PINNED), int(MemKind.DEVICE), 262144),
                   (int(CopyKind.D2H), int(MemKind.DEVICE), int(MemKind.PINNED), 4)])
    assert got == want
    assert set(t.names(c)) == {"Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pinned -> Device)",
                               "Memcpy DtoH (Device -> Pinned)"}
    # syncs of the pass: the side-stream sync, the event sync, the context sync
    y = t.names(np.flatnonzero((s.kind == int(SpanKind.GPU_SYNC)) & inw))
    assert {"Stream Sync", "Event Sync", "Context Sync"} <= set(y)
    # the side-stream GEMM is on its own stream track; the context sync on the device-wide track
    tk = t.tracks
    streams = {int(tk.tid[i]) for i in set(s.track[k].tolist()) if int(tk.kind[i]) == int(TrackKind.GPU_STREAM)}
    assert len(streams) == 2
    ctx = np.flatnonzero((s.kind == int(SpanKind.GPU_SYNC)) & inw)
    ctx = [i for i, n in zip(ctx, t.names(ctx)) if n == "Context Sync"]
    assert all(int(tk.kind[s.track[i]]) == int(TrackKind.GPU_DEVICE) for i in ctx)


def test_cupy_without_torch_gets_a_timeline():
    snap, t, inw, k = _measured_pass("cupy")
    w, s = snap["workload"], t.spans
    assert sum(n.startswith("cupy_add") for n in t.names(k)) == w["n_add"]
    # CuPy launches through the driver API: each add has a cuLaunchKernel flow
    f = t.flows
    launched = set(f.dst[f.kind == int(FlowKind.LAUNCH)].tolist())
    adds = [i for i, n in zip(k.tolist(), t.names(k)) if n.startswith("cupy_add")]
    assert all(i in launched for i in adds)
    src = {int(f.src[j]) for j in np.flatnonzero(np.isin(f.dst, adds))}
    assert set(t.names(np.asarray(sorted(src)))) == {"cuLaunchKernel"}
    ms = np.flatnonzero(s.kind == int(SpanKind.MEMSET))
    assert len(ms) == len(snap["rows"]["memset"]) and set(t.names(ms)) == {"Memset (Device)"}


def test_room_keeps_the_newest_spans_and_counts_the_rest():
    snap = _load("torch")
    n = sum(len(v) for v in snap["rows"].values())
    t, out = _build(snap, room=50)
    assert len(t.spans) == 50 and out["dropped"] == n - 50
    full, _ = _build(snap)
    assert t.spans.start_ns.min() >= np.sort(full.spans.start_ns)[n - 50]
    f = t.flows      # flows only between kept spans
    assert (f.src < 50).all() and (f.dst < 50).all()


def test_clock_offset_uses_the_narrowest_brackets():
    # (perf0, cupti, perf1): true offset 1000; one read delayed on both sides by a preemption
    reads = [(100, 1150, 200), (300, 1350, 400), (500, 1550, 600), (700, 9000, 5000),
             (900, 1950, 1000), (1100, 2150, 1200)]
    off, half_us = clock_offset(reads)
    assert off == 1000 and half_us == pytest.approx(0.05)
    snap = _load("torch")
    assert snap["clock_error_us"] < 5.0            # measured on the H100: 0.15-0.27 us


def test_no_calibration_merges_nothing():
    snap = dict(_load("torch"), clock_offset_ns=None)
    t, out = _build(snap)
    assert len(t.spans) == 0 and out["warnings"]


def _collector_of(snap, kind_ids=None):
    """A real CuptiCollector that has stopped, its records fed through the buffer callback from a
    capture (objects with CUPTI's attribute names: the attribute path), clock and names from it."""
    from types import SimpleNamespace
    from inferscope.collect.cupti_records import RecordSink
    from inferscope.collect.gpu_activity import CuptiCollector
    kinds = kind_ids or {10: "kernel", 1: "memcpy", 2: "memset", 38: "sync", 5: "runtime", 6: "driver"}
    col = CuptiCollector(log=None)
    col.sink = RecordSink(kinds, ROW_FIELDS)
    by = {w: k for k, w in kinds.items()}
    col._completed([SimpleNamespace(kind=by[w], **dict(zip(ROW_FIELDS[w], r)))
                    for w, rows in snap["rows"].items() for r in rows])
    col.api_names = {w: {int(c): n for c, n in v.items()} for w, v in snap["api_names"].items()}
    col.enums = {k: {int(i): n for i, n in v.items()} for k, v in snap["enums"].items()}
    col.clock = lambda: (snap["clock_offset_ns"], snap["clock_error_us"])
    col.clock_start = [(0, 0, 0)]
    return col


def test_columns_snapshot_builds_the_same_trace_as_rows():
    """A live session merges the collector's records as columns (no Python object per record); the
    spans, names, tracks and flows equal those built from the same records as rows (the file form)."""
    snap = _load("torch")
    col = _collector_of(snap)
    live = col.snapshot(rows=False)
    assert "rows" not in live and len(live["kernel_names"]) == len({r[6] for r in snap["rows"]["kernel"]})
    a, oa = _build(live)
    b, ob = _build(col.snapshot(rows=True))
    c, oc = _build(snap)
    assert oa == ob == oc
    for f in ("start_ns", "end_ns", "kind", "cat", "track", "correlation", "bytes", "copy_kind"):
        assert np.array_equal(getattr(a.spans, f), getattr(c.spans, f)), f
    assert [a.strings[i] for i in a.spans.name] == [c.strings[i] for i in c.spans.name]
    assert np.array_equal(a.flows.src, c.flows.src) and np.array_equal(a.flows.dst, c.flows.dst)


class _Captured:
    """The session's view of a CUPTI collector that has stopped: a real collector fed a real capture."""
    def __new__(cls, snap):
        col = _collector_of(snap)
        col.callback_cpu_ns = 180_000
        return col


def test_session_merges_cupti_records_into_the_live_trace():
    from inferscope.collect import session as S
    from inferscope.config import Config
    from inferscope import thresholds as T
    snap = _load("torch")
    s = S.Session(Config(cpu_sampling_frequency_hz=0, system_sampling_hz=0, torch_profiler="off"), mode="library")
    s.gpu_act = _Captured(snap)
    import time
    s.start_ns, s.wall_start_ns = time.perf_counter_ns(), time.time_ns()   # what start() sets (no collectors here)
    s.cpu_start_ns = time.process_time_ns() - 1_000_000_000     # 1 s of process CPU time so far
    t = s.build_trace(final=True)
    c = t.meta["collection"]
    assert c["gpu_source"] == "cupti" and c["clock_sources"] == ["perf_counter_ns", "cupti"]
    assert c["clock_sync_error_us"] == round(snap["clock_error_us"], 3)
    n = sum(len(v) for v in snap["rows"].values())
    assert c["cupti_spans"] == n == int((t.spans.kind != int(SpanKind.CPU_SAMPLE)).sum())
    n_gpu = sum(len(snap["rows"][k]) for k in ("kernel", "memcpy", "memset"))
    assert c["cupti_estimated_cost_ms"] == round(n_gpu * T.CUPTI_COST_PER_GPU_RECORD_US / 1e3, 1)
    assert "CUPTI tracing" in c["overhead_basis"] and "gpu_kernels" not in t.meta["missing"]


def test_importing_a_cuda_library_starts_cupti(monkeypatch, tmp_path):
    """The session's import hooks start the CUPTI collector when a CUDA library other than torch is
    imported; without cupti-python (this machine, CI) the attempt fails softly and says why."""
    import importlib.util
    import sys
    from inferscope.collect import gpu_activity as GA
    from inferscope.collect import session as S
    from inferscope.config import Config
    (tmp_path / "fake_cuda_lib_x.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(GA, "CUDA_MODULES", ("fake_cuda_lib_x",))
    monkeypatch.setattr(GA, "available", lambda: True)
    s = S.Session(Config(cpu_sampling_frequency_hz=0, system_sampling_hz=0), mode="library")
    s._hook_cuda_modules()
    assert s.gpu_act is None and len(s._gpu_hooks) == 1
    try:
        import fake_cuda_lib_x  # noqa: F401
    finally:
        for h in s._gpu_hooks:
            h.remove()
        sys.modules.pop("fake_cuda_lib_x", None)
    assert s.gpu_act is not None
    if importlib.util.find_spec("cupti") is None:
        assert not s.gpu_act.active and s.gpu_act.error.startswith("CUPTI unavailable")
    s.stop_collectors()


def test_syncs_name_the_sampled_python_line_without_torch_ops():
    """CUPTI records API calls, not torch ops: the sync table and the tiny-D2H table name the Python
    line the sampler saw on the calling thread (CPU_SAMPLE runs planted on the capture's API thread:
    one line for the first half of the measured pass, another for the second)."""
    from inferscope.analyze.syncs import syncs
    from inferscope.analyze.window import Window
    snap = _load("torch")
    b = TraceBuilder()
    add_to(b, snap)
    w = snap["workload"]
    api = snap["rows"]["runtime"][0]
    tr = b.track(TrackKind.CPU_THREAD, pid=api[3], tid=api[4])
    mid = (w["t0_ns"] + w["t1_ns"]) // 2
    b.add_spans(start_ns=[w["t0_ns"] - 1000, mid], end_ns=[mid, w["t1_ns"] + 1000], track=tr,
                kind=int(SpanKind.CPU_SAMPLE), name=b.strings.intern("user_code"),
                detail=[b.strings.intern("app.py:first_half:10"), b.strings.intern("app.py:second_half:20")])
    t = b.finalize()
    sy = syncs(t, Window(w["t0_ns"], w["t1_ns"]))
    s = t.spans
    # recount: every sync-table call in the pass is named by the run covering its start
    names = {r["issued_by"] for r in sy["top"]}
    assert names <= {"app.py:first_half:10", "app.py:second_half:20"} and names, sy["top"]
    # the .item() read (4-byte D2H) comes late in the pass: its launching cudaMemcpyAsync is in the second half
    d2h = np.flatnonzero((s.kind == int(SpanKind.MEMCPY)) & (s.copy_kind == int(CopyKind.D2H))
                         & (s.start_ns >= w["t0_ns"]) & (s.end_ns <= w["t1_ns"]))
    assert sy["tiny_d2h"]["count"] == len(d2h) == 1
    f = t.flows
    src = int(f.src[np.flatnonzero(f.dst == d2h[0])[0]])
    want = "app.py:second_half:20" if s.start_ns[src] >= mid else "app.py:first_half:10"
    assert sy["tiny_d2h"]["issued_by"] == [{"op": want, "count": 1}]


def test_buffer_callback_copies_each_record_by_its_row_layout():
    """gpu_activity's buffer callback (run on CUPTI's thread), attribute path (objects without a record
    dtype; the address path: test_cupti_records.py): each record becomes a tuple in ROW_FIELDS
    order (the layout gpu_records reads by field name); records of other kinds are skipped; beyond
    max_records they are counted as dropped.  Records here are plain objects with CUPTI's attribute
    names, values taken from the H100 capture."""
    from types import SimpleNamespace
    from inferscope.collect.cupti_records import RecordSink
    from inferscope.collect.gpu_activity import CuptiCollector
    snap = _load("torch")
    col = CuptiCollector(log=None, max_records=10)
    col.sink = RecordSink({10: "kernel", 1: "memcpy", 5: "runtime"}, ROW_FIELDS)
    acts = []
    for kind, name in ((10, "kernel"), (1, "memcpy"), (5, "runtime")):
        for r in snap["rows"][name][:5]:
            acts.append(SimpleNamespace(kind=kind, **dict(zip(ROW_FIELDS[name], r))))
    acts.append(SimpleNamespace(kind=99))                    # a kind not asked for
    col._completed(acts)
    assert col.records == 10 and col.dropped == 5 and col.buffers == 1
    assert [list(x) for x in col.rows["kernel"]] == snap["rows"]["kernel"][:5]
    assert [list(x) for x in col.rows["memcpy"]] == snap["rows"]["memcpy"][:5]
    assert col.rows["runtime"] == []                          # past max_records
    assert col.callback_cpu_ns > 0
