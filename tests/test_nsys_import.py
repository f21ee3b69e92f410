"""Nsight Systems SQLite import: synthetic exports in the real 3.1 / 3.24 schemas, and the real exports."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from conftest import REPO, nsys_params
from inferscope.errors import InputError
from inferscope.ingest import load_trace, nsys
from inferscope.trace.kinds import CopyKind, FlowKind, MemKind, SpanKind, TrackKind
from nsys_factory import PID_A, PID_B, TRUTH, NsysExport, reference_export


@pytest.fixture(params=["3.1", "3.24"])
def ref(request, tmp_path):
    return reference_export(request.param).write(tmp_path / f"ref_{request.param}.sqlite")


def kinds(trace):
    return Counter(SpanKind(k).name for k in trace.spans.kind.tolist())


def test_reference_counts_and_kinds(ref):
    t = nsys.load(ref)
    c = kinds(t)
    assert c["KERNEL"] == TRUTH["kernels"]
    assert c["MEMCPY"] == TRUTH["memcpy"] and c["MEMSET"] == TRUTH["memset"]
    assert c["RUNTIME"] == TRUTH["runtime"] and c["DRIVER"] == TRUTH["driver"]
    assert c["GPU_SYNC"] == TRUTH["gpu_sync"]
    assert c["ANNOTATION"] == TRUTH["nvtx_ranges"] and c["MARK"] == TRUTH["marks"]
    assert c["OS_RUNTIME"] == TRUTH["osrt"]
    s = t.spans
    k = s.kind == SpanKind.KERNEL
    assert int((s.end_ns[k] - s.start_ns[k]).sum()) == TRUTH["kernel_ns"]
    assert int(s.end_ns.max()) == TRUTH["trace_end"]
    # sorted by (start, -end)
    assert np.all(np.diff(s.start_ns) >= 0)


def test_names_pids_tracks(ref):
    t = nsys.load(ref)
    s = t.spans
    names = set(t.names(np.flatnonzero(s.kind == SpanKind.ANNOTATION)))
    assert names == {"prefill", "attention", "decode", "request", "tail"}      # text and textId both resolved
    api = set(t.names(np.flatnonzero(np.isin(s.kind, [SpanKind.RUNTIME, SpanKind.DRIVER]))))
    assert "cudaLaunchKernel_v7000" in api and "cuLaunchKernelEx" in api   # suffixes kept
    drv = np.flatnonzero(s.kind == SpanKind.DRIVER)
    assert t.names(drv) == ["cuLaunchKernelEx"]
    k = np.flatnonzero(s.kind == SpanKind.KERNEL)
    assert "gemm_kernel(float*, int)" in t.names(k)
    assert t.strings[int(s.detail[k[0]])] in ("gemm_kernel", "softmax_kernel")     # shortName in detail
    # VM bits masked: pids are the real pids
    pids = set(t.span_pid().tolist())
    assert pids == {PID_A, PID_B}
    labels = {t.track_label(i) for i in range(len(t.tracks))}
    assert "python [1000] / MainThread [1000]" in labels
    assert "vllm-worker [2000] / worker0 [2000]" in labels
    gpu = t.tracks.kind == TrackKind.GPU_STREAM
    assert set(zip(t.tracks.pid[gpu].tolist(), t.tracks.device[gpu].tolist(), t.tracks.tid[gpu].tolist())) == {
        (PID_A, 0, 7), (PID_A, 0, 8), (PID_B, 1, 13)}


def test_launch_flows_join_on_pid_and_correlation(ref):
    t = nsys.load(ref)
    s, f = t.spans, t.flows
    lm = f.kind == FlowKind.LAUNCH
    assert int(lm.sum()) == TRUTH["launch_flows"]
    pid = t.span_pid()
    # correlation ids collide across processes: every flow stays inside one process
    assert np.all(pid[f.src] == pid[f.dst])
    assert np.all(s.correlation[f.src] == s.correlation[f.dst])
    # graph launch -> both graph kernels
    g = [i for i in range(len(f)) if t.name_of(int(f.src[i])) == "cudaGraphLaunch_v10000"]
    assert sorted(t.name_of(int(f.dst[i])) for i in g) == ["graph_k", "graph_k"]
    # the process-B gemm was launched by process B's call at 100..110
    i = [j for j in range(len(f)) if t.name_of(int(f.dst[j])).startswith("gemm") and pid[f.dst[j]] == PID_B][0]
    assert int(s.start_ns[f.src[i]]) == 100
    # sync records link to their API call (FlowKind.OTHER)
    om = f.kind == FlowKind.OTHER
    assert sorted(t.name_of(int(x)) for x in f.src[om]) == ["cudaDeviceSynchronize_v3020", "cudaStreamSynchronize_v3020"]


def test_copies_memsets_syncs(ref):
    t = nsys.load(ref)
    s = t.spans
    cp = np.flatnonzero(s.kind == SpanKind.MEMCPY)
    rows = sorted((int(s.copy_kind[i]), int(s.src_mem[i]), int(s.dst_mem[i]), int(s.bytes[i])) for i in cp)
    assert rows == [(CopyKind.H2D, MemKind.PAGEABLE, MemKind.DEVICE, 1 << 20),
                    (CopyKind.D2H, MemKind.DEVICE, MemKind.PAGEABLE, 4096)]
    ms = np.flatnonzero(s.kind == SpanKind.MEMSET)
    assert int(s.bytes[ms[0]]) == 8192 and int(s.dst_mem[ms[0]]) == MemKind.DEVICE
    sy = np.flatnonzero(s.kind == SpanKind.GPU_SYNC)
    assert sorted(t.names(sy)) == ["[CUDA Context sync]", "[CUDA Stream sync]"]
    # context sync (stream 0xFFFFFFFF) sits on a device-wide track
    ctx = [i for i in sy if t.name_of(i) == "[CUDA Context sync]"][0]
    assert t.tracks.kind[s.track[ctx]] == TrackKind.GPU_DEVICE


def test_meta_whitelist(ref):
    t = nsys.load(ref)
    m = t.meta
    assert m["source_format"] == "nsys"
    assert set(m["tool_versions"]) == {"nsys", "nsys_export_schema"}
    assert m["tool_versions"]["nsys_export_schema"] in ("3.1.2", "3.24.0")
    assert [d["id"] for d in m["devices"]] == [0, 1]          # only devices with GPU work
    assert m["devices"][0]["compute_capability"] == "8.0" and m["devices"][0]["sm_count"] == 108
    assert m["session"]["duration_ns"] == 10_000
    blob = repr(m)
    assert "secret" not in blob                               # host, user, paths never copied
    assert any("never ended" in w for w in m["warnings"])
    assert any("no matching runtime" in w for w in m["warnings"])


def test_nvtx_nesting_and_unclosed(ref):
    t = nsys.load(ref)
    s = t.spans
    i = [j for j in range(len(s)) if t.name_of(j) == "tail"][0]
    assert int(s.end_ns[i]) == TRUTH["trace_end"]             # closed at the trace end
    att = [j for j in range(len(s)) if t.name_of(j) == "attention"][0]
    assert t.name_of(int(s.parent[att])) == "prefill"
    mark = np.flatnonzero(s.kind == SpanKind.MARK)[0]
    assert s.start_ns[mark] == s.end_ns[mark] == 50


def test_input_unchanged(ref):
    before = (ref.read_bytes(), os.stat(ref).st_mtime_ns)
    nsys.load(ref)
    nsys.describe_schema(ref)
    assert (ref.read_bytes(), os.stat(ref).st_mtime_ns) == before
    assert not ref.with_name(ref.name + "-journal").exists()
    assert not ref.with_name(ref.name + "-wal").exists()


def test_load_trace_detects_nsys(ref):
    t = load_trace(ref)
    assert t.meta["source_format"] == "nsys"


def test_old_gpu_table_and_no_enums(tmp_path):
    e = reference_export("3.1", old_gpu_table=True, enums=False)
    t = nsys.load(e.write(tmp_path / "old.sqlite"))
    assert t.meta["devices"][0]["sm_count"] == 108
    cp = np.flatnonzero(t.spans.kind == SpanKind.MEMCPY)
    assert sorted(int(t.spans.copy_kind[i]) for i in cp) == [CopyKind.H2D, CopyKind.D2H]   # fallback enums


def test_no_kernels_and_no_cuda(tmp_path):
    e = NsysExport("3.24")
    e.process(5, "app")
    e.nvtx(5, 5, 0, 100, "tokenize")
    e.osrt(5, 5, 10, 90, "read")
    t = nsys.load(e.write(tmp_path / "nocuda.sqlite"))
    assert kinds(t)["ANNOTATION"] == 1 and kinds(t)["OS_RUNTIME"] == 1
    assert any("no kernel table" in w for w in t.meta["warnings"])
    assert "CUPTI_ACTIVITY_KIND_KERNEL" in t.meta["missing"]
    # completely empty export (only metadata tables)
    e2 = NsysExport("3.1")
    t2 = nsys.load(e2.write(tmp_path / "empty.sqlite"))
    assert len(t2.spans) == 0 and any("no CUDA, NVTX" in w for w in t2.meta["warnings"])


def test_missing_columns_degrade(tmp_path):
    p = tmp_path / "cols.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
    con.execute("INSERT INTO StringIds VALUES (0, 'k')")
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, "
                "streamId INTEGER, shortName INTEGER)")
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL VALUES (10, 20, 0, 7, 0)")
    con.commit()
    con.close()
    t = nsys.load(p)
    assert t.names(np.flatnonzero(t.spans.kind == SpanKind.KERNEL)) == ["k"]
    assert "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL.correlationId" in t.meta["missing"]
    assert "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL.globalPid" in t.meta["missing"]


@pytest.mark.parametrize("content", [b"SQLite format 3\x00" + b"\x00" * 200, b"SQLite format 3\x00garbage" * 50])
def test_corrupt_sqlite(tmp_path, content):
    p = tmp_path / "bad.sqlite"
    p.write_bytes(content)
    with pytest.raises(InputError) as ei:
        nsys.load(p)
    assert "\n" not in str(ei.value)


def test_truncated_export(tmp_path, ref):
    data = ref.read_bytes()
    p = tmp_path / "trunc.sqlite"
    p.write_bytes(data[: len(data) // 3])
    with pytest.raises(InputError):
        nsys.load(p)


def test_not_nsys_sqlite(tmp_path):
    p = tmp_path / "other.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    con.commit()
    con.close()
    with pytest.raises(InputError, match="not an Nsight Systems export"):
        nsys.load(p)
    with pytest.raises(InputError):
        nsys.describe_schema(p)


def test_cli_print_schema_and_errors(ref, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    r = subprocess.run([sys.executable, "-m", "inferscope", "analyze", str(ref), "--print-schema"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "CUPTI_ACTIVITY_KIND_KERNEL" in r.stdout and "NVTX_EVENTS" in r.stdout
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"SQLite format 3\x00" + b"\x01" * 500)
    r = subprocess.run([sys.executable, "-m", "inferscope", "analyze", str(bad), "-o", str(tmp_path / "o")],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1


def test_chunked_streaming_matches(ref):
    a = nsys.load(ref)
    b = nsys.load(ref, chunk_rows=1)       # clamped to the minimum chunk; same result
    for col in ("start_ns", "end_ns", "kind", "correlation"):
        assert np.array_equal(getattr(a.spans, col), getattr(b.spans, col))


# ---------------------------------------------------------------------------
# real exports: compare to independent SQL
# ---------------------------------------------------------------------------
def _sql(path, q):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(q).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("path", nsys_params())
def test_real_export_matches_sql(path):
    before = (os.stat(path).st_size, os.stat(path).st_mtime_ns)
    t = nsys.load(path)
    assert (os.stat(path).st_size, os.stat(path).st_mtime_ns) == before
    s = t.spans
    # kernels: count, total time, names
    (n, tot), = _sql(path, "SELECT count(*), sum(end-start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    k = s.kind == SpanKind.KERNEL
    assert int(k.sum()) == n and int((s.end_ns[k] - s.start_ns[k]).sum()) == tot
    want = Counter(v for (v,) in _sql(path, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                            "JOIN StringIds s ON s.id = k.demangledName"))
    assert Counter(t.names(np.flatnonzero(k))) == want
    # copies
    want = Counter(_sql(path, "SELECT copyKind, srcKind, dstKind, bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY"))
    ck = {1: CopyKind.H2D, 2: CopyKind.D2H, 8: CopyKind.D2D}
    mk = {0: MemKind.PAGEABLE, 1: MemKind.PINNED, 2: MemKind.DEVICE}
    cp = np.flatnonzero(s.kind == SpanKind.MEMCPY)
    got = Counter((int(s.copy_kind[i]), int(s.src_mem[i]), int(s.dst_mem[i]), int(s.bytes[i])) for i in cp)
    assert got == Counter({(ck[a], mk[b], mk[c], d): v for (a, b, c, d), v in want.items()})
    # runtime vs driver
    (nrt,), = _sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass != 1")
    (ndr,), = _sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 1")
    assert int((s.kind == SpanKind.RUNTIME).sum()) == nrt and int((s.kind == SpanKind.DRIVER).sum()) == ndr
    # sync records
    (nsync,), = _sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    assert int((s.kind == SpanKind.GPU_SYNC).sum()) == nsync
    # every kernel launched by the runtime row with the same (pid, correlationId)
    want_links = set(_sql(path, """SELECT k.start, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
         AND ((r.globalTid >> 24) & 16777215) = ((k.globalPid >> 24) & 16777215)"""))
    f = t.flows
    km = (f.kind == FlowKind.LAUNCH) & (s.kind[f.dst] == SpanKind.KERNEL)
    assert set(zip(s.start_ns[f.dst[km]].tolist(), s.start_ns[f.src[km]].tolist())) == want_links
    # pid decoding
    pids = {p for (p,) in _sql(path, "SELECT DISTINCT (globalPid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_KERNEL")}
    assert set(t.tracks.pid[s.track[k]].tolist()) == pids
    tables = {r[0] for r in _sql(path, "SELECT name FROM sqlite_master WHERE type='table'")}
    if "NVTX_EVENTS" in tables:
        want = Counter(v for (v,) in _sql(path, "SELECT COALESCE(n.text, s.value) FROM NVTX_EVENTS n LEFT JOIN "
                                                "StringIds s ON s.id = n.textId WHERE n.eventType IN (59, 60)"))
        assert Counter(t.names(np.flatnonzero(s.kind == SpanKind.ANNOTATION))) == want


def test_memfusion_manifest():
    from conftest import shared_path
    t = nsys.load(shared_path("nsys", "memfusion_report1.sqlite"))
    c = kinds(t)
    assert c["KERNEL"] == 36 and c["MEMCPY"] == 4
    s = t.spans
    assert set(s.copy_kind[s.kind == SpanKind.MEMCPY].tolist()) == {CopyKind.D2D}
    assert t.meta["tool_versions"] == {"nsys": "2023.1.2.43", "nsys_export_schema": "3.1.2"}
    assert "ExecutionContext::execute" in t.names(np.flatnonzero(s.kind == SpanKind.ANNOTATION))
    assert c["DRIVER"] > 0 and "cuLaunchKernelEx" in t.names(np.flatnonzero(s.kind == SpanKind.DRIVER))


def test_p4arth_manifest():
    from conftest import shared_path
    t = nsys.load(shared_path("nsys", "p4arth_report1.sqlite"))
    s = t.spans
    cp = np.flatnonzero(s.kind == SpanKind.MEMCPY)
    got = Counter((int(s.copy_kind[i]), int(s.src_mem[i]), int(s.dst_mem[i])) for i in cp)
    assert got == Counter({(CopyKind.H2D, MemKind.PAGEABLE, MemKind.DEVICE): 2, (CopyKind.D2H, MemKind.DEVICE, MemKind.PAGEABLE): 1})
    assert int((s.kind == SpanKind.KERNEL).sum()) == 1
    api = t.names(np.flatnonzero(s.kind == SpanKind.RUNTIME))
    assert "cudaDeviceSynchronize_v3020" in api and api.count("cudaMemcpy_v3020") == 3
    (n_osrt,), = _sql(shared_path("nsys", "p4arth_report1.sqlite"), "SELECT count(*) FROM OSRT_API")
    assert int((s.kind == SpanKind.OS_RUNTIME).sum()) == n_osrt


# ---------------------------------------------------------------------------
# bounded-memory reading and assembly: same Trace whatever the path taken
# ---------------------------------------------------------------------------
def _assert_same_trace(a, b):
    for tab in ("spans", "flows", "tracks"):
        for k, v in getattr(a, tab).columns().items():
            w = getattr(getattr(b, tab), k)
            assert v.dtype == w.dtype and np.array_equal(v, w), f"{tab}.{k}"
    assert a.strings.as_list() == b.strings.as_list()
    assert {**a.meta, "source_file": ""} == {**b.meta, "source_file": ""}


def test_span_order_is_lexsort():
    rng = np.random.default_rng(1)
    for n in (0, 1, 2, 1000, 20000):
        st = rng.integers(0, max(n // 4, 1), n)           # many equal starts
        en = st + rng.integers(0, 3, n)                     # and many full (start, end) ties
        assert np.array_equal(nsys._span_order(st, en), np.lexsort((-en, st)))
    st = np.sort(rng.integers(0, 10**9, 5000))              # already sorted, no ties
    assert np.array_equal(nsys._span_order(st, st + 5), np.lexsort((-(st + 5), st)))


@pytest.fixture
def multi_chunk(tmp_path):
    """2500 kernels + runtime rows: several 1024-row chunks per table."""
    e = NsysExport("3.24")
    e.process(PID_A, "python")
    for i in range(2500):
        e.runtime(PID_A, PID_A, 10 * i, 10 * i + 5, "cudaLaunchKernel_v7000", i + 1)
        e.kernel(PID_A, 10 * i + 7 - (i % 3) * 4, 10 * i + 20, f"k{i % 7}(float*)", i + 1, stream=7 + i % 2)
    for i in range(0, 2500, 100):
        e.nvtx(PID_A, PID_A, 10 * i - 1, 10 * i + 700, f"r{i}")
    return e.write(tmp_path / "chunks.sqlite")


def _rewrite_rowids(src, dst, factor):
    import shutil
    shutil.copy(src, dst)
    con = sqlite3.connect(dst)
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"):
        con.execute(f"UPDATE {t} SET rowid = -rowid")                 # (no collisions while renumbering)
        con.execute(f"UPDATE {t} SET rowid = -rowid * {factor}")
    con.commit()
    con.close()
    return dst


def test_row_bounds_do_not_change_the_trace(multi_chunk, tmp_path, monkeypatch):
    ref = nsys.load(multi_chunk, chunk_rows=1024)
    assert len(ref.spans) == 5025 and int((ref.flows.kind == FlowKind.LAUNCH).sum()) == 2500
    assert np.all(np.diff(ref.spans.start_ns) >= 0)
    _assert_same_trace(ref, nsys.load(multi_chunk))                    # one chunk
    # rowid gaps: the rowid range over-estimates (columns shrunk at the end)
    _assert_same_trace(ref, nsys.load(_rewrite_rowids(multi_chunk, tmp_path / "gaps.sqlite", 3), chunk_rows=1024))
    # implausibly sparse rowids: count(*) is used instead
    _assert_same_trace(ref, nsys.load(_rewrite_rowids(multi_chunk, tmp_path / "sparse.sqlite", 1 << 20), chunk_rows=1024))
    # a bound that is too small: columns grow in place
    for bound in (0, 1, 1500):
        monkeypatch.setattr(nsys._Reader, "rows_bound", lambda self, table, where="", _b=bound: _b)
        _assert_same_trace(ref, nsys.load(multi_chunk, chunk_rows=1024))


def test_kernel_table_as_view(multi_chunk, tmp_path):
    import shutil
    p = tmp_path / "view.sqlite"
    shutil.copy(multi_chunk, p)
    con = sqlite3.connect(p)
    con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO k_raw")
    con.execute("CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS SELECT * FROM k_raw")
    con.commit()
    con.close()
    a, b = nsys.load(multi_chunk, chunk_rows=1024), nsys.load(p, chunk_rows=1024)
    for k in ("start_ns", "end_ns", "kind", "name", "track", "correlation"):
        assert np.array_equal(getattr(a.spans, k), getattr(b.spans, k)), k
    assert np.array_equal(a.flows.src, b.flows.src) and np.array_equal(a.flows.dst, b.flows.dst)
