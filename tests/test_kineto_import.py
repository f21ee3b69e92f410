"""Kineto (PyTorch profiler Chrome trace) importer tests.

Counts are checked against an independent tally made straight from the JSON here
(plain ``json`` module, no importer code).
"""
from __future__ import annotations

import collections
import decimal
import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

from conftest import kineto_params, shared_path
from inferscope.errors import InputError
from inferscope.ingest import kineto, load_trace
from inferscope.trace.kinds import CopyKind, FlowKind, MemKind, SpanKind, TrackKind

_CACHE: dict = {}


def _raw(path: Path):
    if path not in _CACHE:
        with gzip.open(path, "rb") as f:
            _CACHE[path] = json.loads(f.read())
    return _CACHE[path]


def _events(d):
    return d["traceEvents"] if isinstance(d, dict) else d


def _load(path: Path):
    key = ("trace", path)
    if key not in _CACHE:
        _CACHE[key] = kineto.load(path)
    return _CACHE[key]


def _count(tr, *kinds):
    return int(np.isin(tr.spans.kind, [int(k) for k in kinds]).sum())


# ------------------------------------------------------------------------------ shared traces
@pytest.mark.parametrize("path", kineto_params())
def test_counts_match_json(path):
    evs = _events(_raw(path))
    c = collections.Counter(e.get("cat") for e in evs if e.get("ph") == "X")
    tr = _load(path)
    assert _count(tr, SpanKind.KERNEL) == c["kernel"] + c["Kernel"]
    assert _count(tr, SpanKind.MEMCPY) == c["gpu_memcpy"] + c["Memcpy"]
    assert _count(tr, SpanKind.MEMSET) == c["gpu_memset"] + c["Memset"]
    assert _count(tr, SpanKind.RUNTIME, SpanKind.DRIVER) == c["cuda_runtime"] + c["Runtime"] + c["cuda_driver"]
    assert _count(tr, SpanKind.DRIVER) == c["cuda_driver"]
    steps_cpu = sum(1 for e in evs if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
                    and str(e.get("name", "")).startswith("ProfilerStep#"))
    ops = sum(1 for e in evs if e.get("ph") == "X" and e.get("cat") == "cpu_op"
              and not str(e.get("name", "")).startswith("ProfilerStep#"))
    assert _count(tr, SpanKind.CPU_OP) == ops
    assert _count(tr, SpanKind.STEP) == steps_cpu
    assert _count(tr, SpanKind.GPU_SYNC) == c["cuda_sync"]
    assert _count(tr, SpanKind.GPU_ANNOTATION) == c["gpu_user_annotation"]
    # the profiler's own 'Trace' span is ignored
    assert tr.strings.get("PyTorch Profiler (0)") < 0 or not np.any(
        tr.spans.name == tr.strings.get("PyTorch Profiler (0)"))


@pytest.mark.parametrize("path", kineto_params())
def test_invariants_tracks_and_flows(path):
    tr = _load(path)
    s = tr.spans
    assert len(s) > 0
    assert np.all(s.end_ns >= s.start_ns)
    assert np.all(np.diff(s.start_ns) >= 0)
    tk = tr.tracks.kind[s.track]
    gpu_kinds = [SpanKind.KERNEL, SpanKind.MEMCPY, SpanKind.MEMSET, SpanKind.GPU_SYNC, SpanKind.GPU_ANNOTATION]
    g = np.isin(s.kind, gpu_kinds)
    assert np.all(tk[g] == TrackKind.GPU_STREAM)
    host = np.isin(s.kind, [SpanKind.RUNTIME, SpanKind.DRIVER, SpanKind.CPU_OP, SpanKind.STEP, SpanKind.PYTHON])
    assert np.all(tk[host] == TrackKind.CPU_THREAD)
    f = tr.flows
    launch = f.kind == FlowKind.LAUNCH
    assert launch.sum() > 0
    assert np.all(np.isin(s.kind[f.src[launch]], [SpanKind.RUNTIME, SpanKind.DRIVER]))
    assert np.all(np.isin(s.kind[f.dst[launch]], [SpanKind.KERNEL, SpanKind.MEMCPY, SpanKind.MEMSET]))
    assert np.all(s.correlation[f.src[launch]] == s.correlation[f.dst[launch]])
    assert np.all(s.correlation[f.src[f.kind != FlowKind.FWDBWD]] >= 0)
    # every GPU activity whose correlation has a host call got a flow
    work = np.flatnonzero(np.isin(s.kind, [SpanKind.KERNEL, SpanKind.MEMCPY, SpanKind.MEMSET]))
    hostc = set(s.correlation[np.isin(s.kind, [SpanKind.RUNTIME, SpanKind.DRIVER])].tolist())
    expect = sum(1 for c in s.correlation[work].tolist() if c in hostc)
    assert int(launch.sum()) == expect
    fb = f.kind == FlowKind.FWDBWD
    if fb.any():
        assert np.all(s.kind[f.src[fb]] == SpanKind.CPU_OP)
        assert np.all(s.kind[f.dst[fb]] == SpanKind.CPU_OP)
    m = tr.meta
    assert m["source_format"] == "kineto" and m["source_file"] == path.name
    assert m["devices"] and all(set(d) == {"id", "name", "total_memory_bytes", "sm_count", "compute_capability"}
                                for d in m["devices"])
    json.dumps(m)


@pytest.mark.parametrize("path", kineto_params())
def test_copy_kinds_from_names(path):
    evs = _events(_raw(path))
    tr = _load(path)
    s = tr.spans
    names = collections.Counter(e["name"] for e in evs if e.get("ph") == "X" and e.get("cat") == "gpu_memcpy")
    mk = {"Pageable": MemKind.PAGEABLE, "Pinned": MemKind.PINNED, "Device": MemKind.DEVICE, "Host": MemKind.UNKNOWN}
    ck = {"HtoD": CopyKind.H2D, "DtoH": CopyKind.D2H, "DtoD": CopyKind.D2D}
    for nm, cnt in names.items():
        direction, rest = nm.split(" ", 2)[1], nm.split("(")[1].rstrip(")")
        src, dst = [x.strip() for x in rest.split("->")]
        sel = s.name == tr.strings.get(nm)
        assert sel.sum() == cnt
        assert np.all(s.copy_kind[sel] == ck[direction])
        assert np.all(s.src_mem[sel] == mk[src]) and np.all(s.dst_mem[sel] == mk[dst])
    with_bytes = sum(1 for e in evs if e.get("ph") == "X" and e.get("cat") in ("gpu_memcpy", "gpu_memset")
                     and isinstance(e.get("args", {}).get("bytes"), int))
    mem = np.isin(s.kind, [SpanKind.MEMCPY, SpanKind.MEMSET])
    assert int((s.bytes[mem] >= 0).sum()) == with_bytes


def _copies(tr, ck, src=None, dst=None):
    s = tr.spans
    sel = (s.kind == SpanKind.MEMCPY) & (s.copy_kind == ck)
    if src is not None:
        sel &= s.src_mem == src
    if dst is not None:
        sel &= s.dst_mem == dst
    return int(sel.sum())


def test_known_copy_counts():
    tr = _load(shared_path("kineto", "hta_critical_path_alexnet_a100.json.gz"))
    assert _copies(tr, CopyKind.H2D, MemKind.PAGEABLE, MemKind.DEVICE) == 16
    tr = _load(shared_path("kineto", "tracelens_h100_qwen1.5-0.5b-chat_textgen.json.gz"))
    assert _copies(tr, CopyKind.D2H, MemKind.DEVICE, MemKind.PINNED) == 1
    tr = _load(shared_path("kineto", "hta_amd_mi250_minitoy.json.gz"))
    assert _copies(tr, CopyKind.H2D, MemKind.UNKNOWN, MemKind.DEVICE) == 2
    s = tr.spans
    assert _count(tr, SpanKind.RUNTIME) == 21
    hip = tr.strings.get("hipLaunchKernel")
    assert hip >= 0 and np.any(s.kind[tr.flows.src] == SpanKind.RUNTIME)


def test_graph_launch_and_driver_launch():
    tr = _load(shared_path("kineto", "hta_negative_queue_a100_80gb_rank0.json.gz"))
    s, f = tr.spans, tr.flows
    g = tr.strings.get("cudaGraphLaunch")
    src_names = s.name[f.src]
    per_launch = collections.Counter(f.src[src_names == g].tolist())
    assert len(per_launch) > 0 and max(per_launch.values()) > 1  # one graph launch -> many GPU ops
    tr = _load(shared_path("kineto", "hta_triton_example_a100.json.gz"))
    s, f = tr.spans, tr.flows
    drv = np.flatnonzero(s.kind == SpanKind.DRIVER)
    assert len(drv) == 1 and tr.strings[int(s.name[drv[0]])] == "cuLaunchKernel"
    assert drv[0] in f.src.tolist()
    assert s.kind[f.dst[f.src == drv[0]][0]] == SpanKind.KERNEL


def test_steps_present_where_profilerstep():
    tr = _load(shared_path("kineto", "hta_trace_diff_control_a100_rank3.json.gz"))
    assert _count(tr, SpanKind.STEP) == 6
    tr = _load(shared_path("kineto", "hta_gpu_user_annotation_gp100.json.gz"))
    assert _count(tr, SpanKind.STEP) == 0
    assert _count(tr, SpanKind.ANNOTATION) == 10 and _count(tr, SpanKind.GPU_ANNOTATION) == 10


def test_ns_resolution_exact():
    path = shared_path("kineto", "hta_ns_resolution_v100_rank0.pt.trace.json.gz")
    with gzip.open(path, "rb") as f:
        d = json.loads(f.read(), parse_float=decimal.Decimal)
    exp_start, exp_end = [], []
    for e in d["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") != "Trace":
            st = int(decimal.Decimal(e["ts"]) * 1000)
            exp_start.append(st)
            exp_end.append(st + int(decimal.Decimal(e["dur"]) * 1000))
    tr = _load(path)
    s = tr.spans
    keep = s.kind != SpanKind.MARK
    got = sorted(zip(s.start_ns[keep].tolist(), s.end_ns[keep].tolist()))
    assert got == sorted(zip(exp_start, exp_end))
    # the ns digit really is there (float64 would have lost it)
    assert any(x % 1000 % 250 for x in exp_start)


def test_no_secrets_in_meta():
    path = shared_path("kineto", "hta_ns_resolution_v100_rank0.pt.trace.json.gz")
    d = _raw(path)
    tr = _load(path)
    text = str(tr.meta)
    for k in ("username", "host_name", "tw_user", "mast_job_name", "trace_id"):
        assert k not in text
        v = d.get(k)
        if isinstance(v, str) and len(v) > 3:
            assert v not in text
    path = shared_path("kineto", "tracelens_h100_bert_small_fillmask.json.gz")
    tr = _load(path)
    text = str(tr.meta)
    assert "HF_TOKEN" not in text and "HOSTNAME" not in text and "env" not in tr.meta
    assert tr.meta["profiler_config"] == {"with_stack": True, "record_shapes": True, "profile_memory": True,
                                          "with_flops": True, "with_modules": True}
    assert tr.meta["tool_versions"]["cuda_runtime_version"] == 12040
    assert tr.meta["devices"][0]["compute_capability"] == "9.0"


def test_memory_counters_and_marks():
    tr = _load(shared_path("kineto", "tracelens_h100_bert_small_fillmask.json.gz"))
    ctr = tr.tracks.kind == TrackKind.COUNTER
    assert ctr.any()
    names = {tr.strings[int(n)] for n in tr.tracks.name[ctr]}
    assert names == {"gpu.mem_allocated_bytes", "gpu.mem_reserved_bytes"}      # Total Allocated, Total Reserved
    assert len(tr.counters) == 2 * 218 and np.all(tr.counters.value > 0)


# ------------------------------------------------------------------------------ synthetic inputs
def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _write(tmp_path, obj, name="t.json", gz=False):
    p = tmp_path / name
    data = json.dumps(obj).encode()
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


def test_legacy_categories_list_format_and_no_metadata(tmp_path):
    evs = [
        _x("Operator", "aten::mm", 10, 20, pid=5, tid=6, **{"External id": 1}),
        _x("Runtime", "cudaLaunchKernel", 12, 3, pid=5, tid=6, correlation=7, **{"External id": 1}),
        _x("Kernel", "gemm", 20, 4.5, pid=0, tid=7, correlation=7, device=0, stream=7),
        _x("Memcpy", "Memcpy HtoD (Pinned -> Device)", 30, 1, pid=0, tid=7, correlation=8, bytes=4096),
        _x("Runtime", "cudaMemcpyAsync", 25, 2, pid=5, tid=6, correlation=8),
        _x("Memset", "Memset (Device)", 40, 1, pid=0, tid=7, correlation=9, bytes=64),
    ]
    p = _write(tmp_path, evs)  # top-level list, no 'M' events
    tr = kineto.load(p)
    assert _count(tr, SpanKind.CPU_OP) == 1 and _count(tr, SpanKind.KERNEL) == 1
    assert _count(tr, SpanKind.RUNTIME) == 2 and _count(tr, SpanKind.MEMSET) == 1
    assert _copies(tr, CopyKind.H2D, MemKind.PINNED, MemKind.DEVICE) == 1
    s = tr.spans
    k = np.flatnonzero(s.kind == SpanKind.KERNEL)[0]
    assert s.start_ns[k] == 20_000 and s.end_ns[k] == 24_500
    assert len(tr.flows) == 2 and np.all(tr.flows.kind == FlowKind.LAUNCH)
    assert tr.meta["devices"] == [] and tr.meta["warnings"] == []
    assert s.bytes[s.kind == SpanKind.MEMSET][0] == 64
    # nesting computed on the CPU thread: runtime inside the op
    r = np.flatnonzero(s.kind == SpanKind.RUNTIME)
    assert s.depth[r].max() == 1


def test_string_pids_and_tids(tmp_path):
    evs = {"traceEvents": [
        _x("cpu_op", "op", 1.5, 2, pid="123", tid="456"),
        _x("kernel", "k", 2, 1, pid="0", tid="stream 7", correlation=3),
        _x("cuda_runtime", "cudaLaunchKernel", 1.6, 0.2, pid="123", tid="456", correlation=3),
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
         "ts": 0, "dur": 100},
        {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 50},
        {"ph": "M", "name": "thread_name", "pid": "123", "tid": "456", "args": {"name": "main"}},
    ]}
    tr = kineto.load(_write(tmp_path, evs))
    s = tr.spans
    k = np.flatnonzero(s.kind == SpanKind.KERNEL)[0]
    t = s.track[k]
    assert tr.tracks.kind[t] == TrackKind.GPU_STREAM and tr.tracks.tid[t] == 7 and tr.tracks.device[t] == 0
    op = np.flatnonzero(s.kind == SpanKind.CPU_OP)[0]
    assert tr.tracks.pid[s.track[op]] == 123 and tr.tracks.tid[s.track[op]] == 456
    assert tr.track_label(int(s.track[op])) == "main"
    assert _count(tr, SpanKind.MARK) == 1
    assert len(tr.flows) == 1
    assert not np.any(s.name == tr.strings.get("PyTorch Profiler (0)"))


def test_cuda_graph_and_driver_and_hip(tmp_path):
    evs = {"traceEvents": [
        _x("cuda_runtime", "cudaGraphLaunch", 10, 5, pid=9, tid=9, correlation=100),
        _x("kernel", "k1", 20, 1, pid=0, tid=7, correlation=100, device=0, stream=7),
        _x("kernel", "k2", 21, 1, pid=0, tid=7, correlation=100, device=0, stream=7),
        _x("kernel", "k3", 22, 1, pid=0, tid=7, correlation=100, device=0, stream=7),
        _x("cuda_driver", "cuLaunchKernelEx", 30, 2, pid=9, tid=9, correlation=101),
        _x("kernel", "triton_k", 33, 1, pid=0, tid=7, correlation=101, device=0, stream=7),
        _x("cuda_runtime", "hipMemcpyWithStream", 40, 2, pid=9, tid=9, correlation=102, stream="0x0", kind="1"),
        _x("gpu_memcpy", "Memcpy HtoD (Host -> Device)", 41, 1, pid=2, tid=0, correlation=102, device=2,
           stream=0, kind="HtoD"),
        _x("gpu_memcpy", "Memcpy", 45, 1, pid=2, tid=0, correlation=103, device=2, stream=0, kind="DtoH"),
    ]}
    tr = kineto.load(_write(tmp_path, evs, "g.json.gz", gz=True))
    s, f = tr.spans, tr.flows
    g = tr.strings.get("cudaGraphLaunch")
    gi = np.flatnonzero(s.name == g)[0]
    assert sorted(tr.strings[int(x)] for x in s.name[f.dst[f.src == gi]]) == ["k1", "k2", "k3"]
    assert _count(tr, SpanKind.DRIVER) == 1
    d = np.flatnonzero(s.kind == SpanKind.DRIVER)[0]
    assert tr.strings[int(s.name[f.dst[f.src == d][0]])] == "triton_k"
    cp = np.flatnonzero(s.kind == SpanKind.MEMCPY)
    assert s.copy_kind[cp].tolist() == [CopyKind.H2D, CopyKind.D2H]
    assert tr.tracks.device[s.track[cp[0]]] == 2
    assert len(f) == 5  # the last memcpy has no host call


def test_multi_process_correlation_collision(tmp_path):
    evs = {"traceEvents": [
        _x("cuda_runtime", "cudaLaunchKernel", 10, 1, pid=1, tid=1, correlation=5),
        _x("cuda_runtime", "cudaLaunchKernel", 50, 1, pid=2, tid=2, correlation=5),
        _x("cuda_runtime", "cudaLaunchKernel", 60, 1, pid=2, tid=2, correlation=6),
        _x("kernel", "a", 20, 1, pid=0, tid=7, correlation=5, device=0, stream=7),
        _x("kernel", "b", 55, 1, pid=1, tid=7, correlation=5, device=1, stream=7),
        _x("kernel", "c", 65, 1, pid=1, tid=7, correlation=6, device=1, stream=7),
    ]}
    tr = kineto.load(_write(tmp_path, evs))
    s, f = tr.spans, tr.flows
    pairs = {(int(tr.tracks.pid[s.track[a]]), tr.strings[int(s.name[b])]) for a, b in zip(f.src, f.dst)}
    assert pairs == {(1, "a"), (2, "b"), (2, "c")}


def test_fwdbwd_flows(tmp_path):
    evs = {"traceEvents": [
        _x("cpu_op", "aten::mul", 10, 5, pid=1, tid=1),
        _x("cpu_op", "MulBackward0", 100, 10, pid=1, tid=2),
        _x("cpu_op", "aten::inner", 102, 2, pid=1, tid=2),
        {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 1, "tid": 1, "ts": 10},
        {"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 1, "tid": 2, "ts": 105, "bp": "e"},
    ]}
    tr = kineto.load(_write(tmp_path, evs))
    s, f = tr.spans, tr.flows
    assert len(f) == 1 and f.kind[0] == FlowKind.FWDBWD
    assert tr.strings[int(s.name[f.src[0]])] == "aten::mul"
    assert tr.strings[int(s.name[f.dst[0]])] == "MulBackward0"


def test_timestamps_large_and_negative_dur(tmp_path):
    text = ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, '
            '"ts": 1712195495505543.217, "dur": 1.001}, '
            '{"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 1712195495505544.1, "dur": -3}, '
            '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1712195495505545, "dur": 0.5, '
            '"args": {"device": 0, "stream": 7}}]}')
    p = tmp_path / "big.json"
    p.write_text(text)
    tr = kineto.load(p)
    s = tr.spans
    got = dict(zip((tr.strings[int(n)] for n in s.name), zip(s.start_ns.tolist(), s.end_ns.tolist())))
    assert got["a"] == (1712195495505543217, 1712195495505544218)
    assert got["b"] == (1712195495505544100, 1712195495505544100)
    assert got["k"] == (1712195495505545000, 1712195495505545500)
    assert any("negative dur" in w for w in tr.meta["warnings"])


def test_ts_key_inside_args_falls_back_exactly(tmp_path):
    text = ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, '
            '"ts": 1712195495505543.217, "dur": 1, "args": {"ts": 5}}]}')
    p = tmp_path / "args.json"
    p.write_text(text)
    tr = kineto.load(p)
    assert tr.spans.start_ns.tolist() == [1712195495505543217]


def test_input_unchanged(tmp_path):
    src = shared_path("kineto", "hta_cuda_event_sync_a100.json.gz")
    p = tmp_path / "copy.json.gz"
    p.write_bytes(src.read_bytes())
    os.utime(p, (1_000_000_000, 1_000_000_000))
    before = (p.read_bytes(), p.stat().st_mtime_ns)
    tr = load_trace(p)
    assert len(tr.spans) > 0
    assert (p.read_bytes(), p.stat().st_mtime_ns) == before


def test_malformed_event_skipped_with_warning(tmp_path):
    evs = {"traceEvents": [_x("cpu_op", "good", 1, 1), {"ph": "X", "cat": "cpu_op", "name": "bad", "ts": "soon",
                                                         "dur": 1, "pid": 1, "tid": 1}]}
    tr = kineto.load(_write(tmp_path, evs))
    assert len(tr.spans) == 1
    assert any("malformed" in w for w in tr.meta["warnings"])


@pytest.mark.parametrize("case,content,expect", [
    ("missing", None, "no such file"),
    ("notjson", b"hello world", "not a PyTorch profiler trace"),
    ("truncjson", b'{"traceEvents": [{"ph": "X", "ts": 1', "truncated JSON"),
    ("invalid", b'{"traceEvents": [}', "invalid JSON"),
    ("notlist", b'{"traceEvents": 5}', "not a PyTorch profiler trace"),
    ("notraceevents", b'{"schemaVersion": 1}', "not a PyTorch profiler trace"),
    ("strts", b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": "1", "dur": 1}]}', "no valid events"),
    ("empty", b'{"traceEvents": []}', "empty trace"),
    ("onlymeta", b'{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}]}',
     "no duration events"),
    ("emptyfile", b"", "empty"),
    ("scalar", b"42", "not a PyTorch profiler trace"),
])
def test_errors_one_line(tmp_path, case, content, expect):
    p = tmp_path / f"{case}.json"
    if content is not None:
        p.write_bytes(content)
    with pytest.raises(InputError) as ei:
        kineto.load(p)
    msg = str(ei.value)
    assert "\n" not in msg and expect in msg and p.name in msg


def test_truncated_gzip(tmp_path):
    data = gzip.compress(json.dumps({"traceEvents": [_x("cpu_op", "a", 1, 1)] * 200}).encode())
    p = tmp_path / "trunc.json.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError) as ei:
        kineto.load(p)
    assert "truncated gzip" in str(ei.value) and "\n" not in str(ei.value)
    p2 = tmp_path / "corrupt.json.gz"
    p2.write_bytes(data[:10] + b"\x00" * 50)
    with pytest.raises(InputError):
        kineto.load(p2)
