"""nsys host side (ingest/nsys_host.py): CPU IP samples, scheduling and GPU metrics, on a real export
(recounted with SQL) and on small exports with known ground truth."""
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from inferscope.analyze import breakdown as B
from inferscope.analyze.pipeline import analyze
from inferscope.analyze.window import Window
from inferscope.ingest import load_trace
from inferscope.ingest import nsys_host
from inferscope.trace.kinds import SpanKind

from nsys_factory import NsysExport, gtid

P4 = Path("/work/shared/traces/nsys/p4arth_report1.sqlite")
need_p4 = pytest.mark.skipif(not P4.exists(), reason="shared nsys traces absent")
# the window the report used before host samples were imported (the whole trace then and now)
P4_OTHER_PCT_BEFORE = 66.42


@pytest.fixture(scope="module")
def p4():
    return load_trace(str(P4))


def _sql(q):
    con = sqlite3.connect(f"file:{P4}?mode=ro", uri=True)
    try:
        return con.execute(q).fetchall()
    finally:
        con.close()


@need_p4
def test_p4arth_other_below_20pct_with_host_classes(p4):
    res = analyze(p4)
    bd = {r["category"]: r for r in res["breakdown"]}
    assert bd["other"]["pct"] < 20 < P4_OTHER_PCT_BEFORE
    parts = {p["name"] for p in bd["framework_overhead"]["parts"]} | {p["name"] for p in bd["cpu_preprocessing"]["parts"]}
    assert {"framework_python", "user_code"} <= parts
    assert bd["waiting"]["ms"] > 0
    assert p4.meta["host_sampling"]["cpu_samples"] == _sql("SELECT COUNT(*) FROM COMPOSITE_EVENTS")[0][0] == 241
    assert "GPU_METRICS" in p4.meta["missing"] and "COMPOSITE_EVENTS" not in p4.meta["missing"]


@need_p4
def test_p4arth_off_cpu_time_recounted_with_sql(p4):
    """Per thread: the waiting spans add up to its sched-out -> sched-in intervals (SQL, LEAD()), clipped to
    the extent of the other events, for threads that were sampled or call CUDA APIs; the profiler's own
    threads and idle helpers are skipped."""
    s = p4.spans
    lo, hi = p4.bounds_ns()
    rows = _sql(f"""SELECT globalTid, SUM(MIN(nxt, {hi}) - MAX(start, {lo})) FROM (
                      SELECT globalTid, start, isSchedIn, LEAD(start) OVER w AS nxt, LEAD(isSchedIn) OVER w AS nin
                      FROM SCHED_EVENTS WINDOW w AS (PARTITION BY globalTid ORDER BY start))
                    WHERE isSchedIn = 0 AND nin = 1 AND MIN(nxt, {hi}) > MAX(start, {lo}) GROUP BY globalTid""")
    names = dict(_sql("SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId"))
    wid = p4.strings.get("waiting")
    active = {g for (g,) in _sql("SELECT DISTINCT globalTid FROM COMPOSITE_EVENTS UNION "
                                  "SELECT DISTINCT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME")}
    checked = 0
    for g, off_ns in rows:
        tid = g & 0xFFFFFF
        m = (s.kind == SpanKind.CPU_SAMPLE) & (s.name == wid) & (p4.tracks.tid[s.track] == tid)
        got = int((s.end_ns[m] - s.start_ns[m]).sum())
        if (names.get(g) and nsys_host.TOOL_THREAD_RE.search(names[g])) or g not in active:
            assert got == 0
        else:
            assert got == off_ns, (tid, got, off_ns)
            checked += 1
    assert checked >= 1                 # the main thread (sampled, calls CUDA)


@need_p4
def test_p4arth_sample_classes_recounted_with_sql(p4):
    """The deciding frame of each sample (first frame outside kernel/libc/ld.so/vdso, leaf first) found in SQL;
    its module mapped by hand for this export's modules; the importer's classes must match sample by sample."""
    rows = _sql("""
        SELECT ce.id, ce.start, (SELECT m.value FROM SAMPLING_CALLCHAINS c JOIN StringIds m ON m.id = c.module
                                 WHERE c.id = ce.id AND m.value NOT IN ('[kernel.kallsyms]', '[vdso]', '[Unknown]', '[Broken backtraces]')
                                   AND m.value NOT LIKE '%/libc.so%' AND m.value NOT LIKE '%/ld-linux%'
                                   AND m.value NOT LIKE '%/libstdc++%' AND m.value NOT LIKE '%/libgcc_s%'
                                   AND m.value NOT LIKE '%/libm.so%' AND m.value NOT LIKE '%/libpthread%'
                                 ORDER BY c.stackDepth LIMIT 1)
        FROM COMPOSITE_EVENTS ce ORDER BY ce.globalTid, ce.start""")
    def by_hand(mod):
        if mod is None:
            return "framework"                       # only system frames
        if "nsight-systems" in mod or "/wsl/drivers/" in mod or "libcu" in mod:
            return "framework"
        assert mod.endswith("/vecAdd") or ".so" in mod, mod
        return "user_code"
    want = [by_hand(m) for _, _, m in rows]
    con = sqlite3.connect(f"file:{P4}?mode=ro", uri=True)
    schema = {t: [r[1] for r in con.execute(f"PRAGMA table_info([{t}])")]
              for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    ts, gt, cls, det = nsys_host.sample_classes(con, schema, has_gpu=True)
    con.close()
    got = [nsys_host.CLASS_NAMES[c] for c in cls.tolist()]
    assert got == want
    assert want.count("user_code") >= 28 and want.count("framework") >= 100     # 28 samples have their leaf in vecAdd


def _export(tmp_path, with_tables=True):
    e = NsysExport()
    e.process(1000, "app")
    e.thread(1000, 1000, "app")
    e.runtime(1000, 1000, 0, 1_000_000, "cudaLaunchKernel", 1)
    e.kernel(1000, 2_000_000, 3_000_000, "k", 1)
    e.runtime(1000, 1000, 9_000_000, 10_000_000, "cudaDeviceSynchronize", 2)
    p = e.write(tmp_path / "t.sqlite")
    if not with_tables:
        return p
    con = sqlite3.connect(p)
    g = gtid(1000, 1000)
    con.execute("CREATE TABLE COMPOSITE_EVENTS (id INTEGER, start INTEGER, cpu INTEGER, threadState INTEGER, globalTid INTEGER, cpuCycles INTEGER)")
    con.execute("CREATE TABLE SAMPLING_CALLCHAINS (id INTEGER, symbol INTEGER, module INTEGER, kernelMode INTEGER, thumbCode INTEGER, "
                "unresolved INTEGER, specialEntry INTEGER, originalIP INTEGER, unwindMethod INTEGER, stackDepth INTEGER)")
    con.execute("CREATE TABLE SCHED_EVENTS (start INTEGER, cpu INTEGER, isSchedIn INTEGER, globalTid INTEGER, threadState INTEGER, threadBlock INTEGER)")
    ids = {}
    def sid(s):
        if s not in ids:
            ids[s] = 10_000 + len(ids)
            con.execute("INSERT INTO StringIds VALUES (?, ?)", (ids[s], s))
        return ids[s]
    # on-CPU 1-5 ms and 6-8 ms; off-CPU 5-6 ms; samples at 3 ms (app code under libc), 5 ms (libcuda), 8 ms (libpython)
    for t, inn in ((1_000_000, 1), (5_000_000, 0), (6_000_000, 1), (8_000_000, 0)):
        con.execute("INSERT INTO SCHED_EVENTS VALUES (?, 0, ?, ?, 0, NULL)", (t, inn, g))
    for i, (t, chain) in enumerate(((3_000_000, ["/usr/lib/x86_64-linux-gnu/libc.so.6", "/opt/app/app"]),
                                    (5_000_000, ["[kernel.kallsyms]", "/usr/lib/libcuda.so.1"]),
                                    (8_000_000, ["/usr/lib/libpython3.11.so.1.0"])), start=1):
        con.execute("INSERT INTO COMPOSITE_EVENTS VALUES (?, ?, 0, 1, ?, 1)", (i, t, g))
        for d, mod in enumerate(chain):
            con.execute("INSERT INTO SAMPLING_CALLCHAINS VALUES (?, ?, ?, 0, 0, 0, NULL, 0, 0, ?)", (i, sid(f"f{i}{d}"), sid(mod), d))
    con.execute("CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INTEGER, sourceId INTEGER, typeName TEXT, metricId INTEGER, metricName TEXT)")
    con.execute("CREATE TABLE GPU_METRICS (timestamp INTEGER, typeId INTEGER, metricId INTEGER, value INTEGER)")
    con.execute("INSERT INTO TARGET_INFO_GPU_METRICS VALUES (0, 0, 'GH100', 3, 'SM Active')")
    con.executemany("INSERT INTO GPU_METRICS VALUES (?, 0, 3, ?)", [(t * 1_000_000, v) for t, v in ((1, 0), (2, 80), (3, 90))])
    con.commit()
    con.close()
    return p


def test_samples_and_scheduling_on_a_known_export(tmp_path):
    t = load_trace(str(_export(tmp_path)))
    s = t.spans
    m = s.kind == SpanKind.CPU_SAMPLE
    got = sorted((int(a), int(b), t.strings[int(n)]) for a, b, n in zip(s.start_ns[m], s.end_ns[m], s.name[m]))
    # 1-3 ms -> the 3 ms sample (app code); 3-5 ms -> the 5 ms sample (libcuda); 5-6 off-CPU;
    # 6-8 ms -> the 8 ms sample (libpython) (clipped to the other events' extent, 0-10 ms)
    assert got == [(1_000_000, 3_000_000, "user_code"), (3_000_000, 5_000_000, "framework"),
                   (5_000_000, 6_000_000, "waiting"), (6_000_000, 8_000_000, "framework")]
    # GPU metrics as a counter track
    names = {t.strings[int(n)] for n in t.tracks.name if n >= 0}
    assert "gpu.metric.sm_active" in names
    res = analyze(t)
    r = next(r for r in res["counters"]["series"] if r["metric"] == "gpu.metric.sm_active")
    assert (r["samples"], r["max"], r["mean"]) == (3, 90, pytest.approx(170 / 3))
    b = B.breakdown(t, Window(0, 10_000_000, "w", "time"))
    parts = {p["name"]: p["ns"] for r in b["breakdown"] for p in r["parts"]}
    assert parts["user_code"] == 1_000_000            # 1-2 ms (2-3 ms is the kernel: gpu_compute first)
    assert {r["category"]: r["ns"] for r in b["breakdown"]}["waiting"] == 1_000_000


def test_absent_tables_are_reported_not_errors(tmp_path):
    t = load_trace(str(_export(tmp_path, with_tables=False)))
    assert {"COMPOSITE_EVENTS", "SCHED_EVENTS", "GPU_METRICS"} <= set(t.meta["missing"])
    assert not (t.spans.kind == SpanKind.CPU_SAMPLE).any() and "host_sampling" not in t.meta


def test_module_classes():
    assert nsys_host.module_class("[kernel.kallsyms]", True) == -1
    assert nsys_host.module_class("/usr/lib/x86_64-linux-gnu/libc.so.6", True) == -1
    assert nsys_host.module_class("/usr/lib/libcuda.so.1", True) == nsys_host.FRAMEWORK
    assert nsys_host.module_class("/x/torch/lib/libtorch_cpu.so", False) == nsys_host.CPU_COMPUTE
    assert nsys_host.module_class("/x/torch/lib/libtorch_cpu.so", True) == nsys_host.FRAMEWORK
    assert nsys_host.module_class("/home/u/vecAdd", True) == nsys_host.USER


def test_corrupt_host_tables_cost_only_themselves(tmp_path):
    p = _export(tmp_path)
    con = sqlite3.connect(p)
    con.execute("INSERT INTO COMPOSITE_EVENTS VALUES (99, 'garbage', 0, 1, 'x', 1)")     # text in integer columns
    con.execute("INSERT INTO GPU_METRICS VALUES (5, 0, 3, 'NaN?')")
    con.commit()
    con.close()
    t = load_trace(str(p))
    assert any("not imported" in w for w in t.meta["warnings"])
    assert (t.spans.kind == SpanKind.KERNEL).sum() == 1                 # the rest of the export is intact
