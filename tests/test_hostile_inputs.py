"""Hostile and careless inputs (issue 15): each class has a minimal input built here.

Bad input ends with exit 0 and a usable report (bad rows skipped and counted) or exit 2 and
one line on stderr; never a traceback, exit 3, a hang or a memory blow-up."""
import gzip
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from helpers import Synth
from inferscope.cli import main
from inferscope.errors import InputError
from inferscope.ingest import load_trace
from inferscope.trace import SpanKind, native
from nsys_factory import reference_export

PY = sys.executable
K = "CUPTI_ACTIVITY_KIND_KERNEL"


def cli(*args, env=None, cwd=None, timeout=60):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([PY, "-m", "inferscope", *map(str, args)], capture_output=True, text=True,
                          env=e, cwd=cwd, timeout=timeout)


def one_line_exit_2(r, *needles):
    err = r.stderr.strip()
    assert r.returncode == 2, (r.returncode, r.stderr[-800:])
    assert len(err.splitlines()) == 1 and err.startswith("inferscope: error:"), err
    for n in needles:
        assert n.lower() in err.lower(), err


def ev(name="a", cat="cpu_op", ts=1, dur=5, pid=1, tid=1, **kw):
    d = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    d.update(kw)
    return d


def kineto(tmp_path, events, name="t.json", raw=None) -> Path:
    p = tmp_path / name
    p.write_bytes(raw if raw is not None else json.dumps({"traceEvents": events}).encode())
    return p


# ---------------------------------------------------------------------------------- Kineto
def test_kineto_deep_nesting_in_ignored_key_is_exit_2(tmp_path):
    raw = b'{"other": ' + b"[" * 1000 + b"]" * 1000 + b', "traceEvents": [' + json.dumps(ev()).encode() + b"]}"
    one_line_exit_2(cli("analyze", kineto(tmp_path, None, raw=raw), "-o", tmp_path / "o"), "nested")


def test_kineto_integers_beyond_int64_load(tmp_path):
    raw = (b'{"traceEvents": [{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":1,"dur":5,'
           b'"args":{"correlation":1000000000000000000000}},'
           b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":2,"dur":5,"args":{"stream":"1e400","correlation":99999999999999999999999}}]}')
    tr = load_trace(kineto(tmp_path, None, raw=raw))
    assert len(tr.spans) == 2 and (tr.spans.correlation == -1).all()


def test_kineto_memory_instant_without_args(tmp_path):
    tr = load_trace(kineto(tmp_path, [ev(), {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2}]))
    assert len(tr.spans) == 1


def test_kineto_invalid_utf8_and_lone_surrogate_skip_only_that_string(tmp_path):
    good = json.dumps(ev("good")).encode()
    raw = b'{"traceEvents": [' + json.dumps(ev("bad")).encode().replace(b'"bad"', b'"b\xffd"') + b"," + good + b"]}"
    tr = load_trace(kineto(tmp_path, None, raw=raw, name="u.json"))
    assert {tr.name_of(i) for i in range(len(tr.spans))} == {"b\ufffdd", "good"}
    assert any("UTF-8" in w for w in tr.meta["warnings"])
    raw = b'{"traceEvents": [' + json.dumps(ev("SURR")).encode().replace(b'"SURR"', b'"a\\ud800z"') + b"," + good + b"]}"
    tr = load_trace(kineto(tmp_path, None, raw=raw, name="s.json"))
    assert {tr.name_of(i) for i in range(len(tr.spans))} == {"a\ufffdz", "good"}


def test_gzip_bomb_is_refused_and_names_the_flag(tmp_path, monkeypatch):
    from inferscope.util import decompress as D_
    monkeypatch.setattr(D_, "DECOMPRESS_FLOOR", 1 << 20)
    body = b'{"traceEvents": [' + json.dumps(ev()).encode() + b"]}" + b" " * (4 << 20)
    p = tmp_path / "bomb.json.gz"
    p.write_bytes(gzip.compress(body))
    assert p.stat().st_size < 20_000
    with pytest.raises(InputError, match="max-decompressed-mb"):
        load_trace(p)
    assert len(load_trace(p, max_decompressed=8 << 20).spans) == 1   # the flag raises the cap
    # through the CLI: --max-decompressed-mb and the environment variable
    assert main(["analyze", str(p), "-o", str(tmp_path / "o"), "-q", "--max-decompressed-mb", "0.5"]) == 2
    r = cli("analyze", p, "-o", tmp_path / "o2", env={"INFERSCOPE_MAX_DECOMPRESSED_MB": "0.5"})
    one_line_exit_2(r, "--max-decompressed-mb")


def test_one_long_name_on_many_rows_stays_small(tmp_path):
    big = "x" * 1_000_000
    evs = [ev(big, "kernel", ts=i * 10, pid=0, tid=7, args={"stream": 7, "device": 0}) for i in range(50)]
    p = kineto(tmp_path, evs)
    out = tmp_path / "o"
    assert main(["analyze", str(p), "-o", str(out), "-q", "--format", "md,json,csv,html,chrome"]) == 0
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    assert total < 3_000_000, total
    assert "shortened" in (out / "report.md").read_text()


# ---------------------------------------------------------------------------------- nsys
def nsys_file(tmp_path, *sql, name="n.sqlite") -> Path:
    p = tmp_path / name
    reference_export().write(p)
    con = sqlite3.connect(p)
    for q in sql:
        con.execute(q)
    con.commit()
    con.close()
    return p


def peak_mb(fn):
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("sql", [
    "INSERT INTO ENUM_CUDA_MEMCPY_OPER (id, name, label) VALUES (500000000, 'CUDA_MEMCPY_KIND_HTOD', 'x')",
    "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = 500000000 WHERE rowid = 1",
    "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = -5 WHERE rowid = 1",
    f"UPDATE {K} SET demangledName = -3 WHERE rowid = 1",
    f"UPDATE {K} SET demangledName = 9000000000000000000 WHERE rowid = 2",
])
def test_nsys_huge_or_negative_ids_cost_no_memory(tmp_path, sql):
    p = nsys_file(tmp_path, sql)
    tr, mb = peak_mb(lambda: load_trace(p))
    assert len(tr.spans) > 30 and mb < 30, mb


def test_nsys_name_id_beyond_32_bits_is_unknown_not_wrapped(tmp_path):
    p = nsys_file(tmp_path, "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = nameId + 4294967296 WHERE rowid = 1")
    tr = load_trace(p)
    assert any("32-bit" in w for w in tr.meta["warnings"])
    first = np.flatnonzero(tr.spans.kind == SpanKind.RUNTIME)
    names = [tr.name_of(i) for i in first]
    assert "cuda_api" in names   # the unknown default, not the name of id (nameId mod 2^32)


@pytest.mark.parametrize("sql,warn", [
    (f"UPDATE {K} SET start = 'abc' WHERE rowid = 1", "non-integer"),
    (f"UPDATE {K} SET [end] = 1e300 WHERE rowid = 1", "non-integer"),
    (f"UPDATE {K} SET [end] = 9223372036854775807 WHERE rowid = 1", "time beyond"),
    (f"UPDATE {K} SET start = -9223372036854775807 WHERE rowid = 2", "time beyond"),
    ("UPDATE PROCESSES SET globalPid = 'x'", None),
    ("UPDATE ThreadNames SET globalTid = 'x'", None),
    ("UPDATE ANALYSIS_DETAILS SET duration = 'x'", None),
    ("UPDATE TARGET_INFO_GPU SET totalMemory = 'x'", None),
    ("UPDATE StringIds SET id = 'x' WHERE rowid = 2", None),
])
def test_nsys_text_and_extreme_values_skip_rows(tmp_path, sql, warn):
    p = nsys_file(tmp_path, sql)
    out = tmp_path / "o"
    assert main(["analyze", str(p), "-o", str(out), "-q"]) == 0
    rep = json.loads((out / "report.json").read_text())
    assert sum(b["pct"] for b in rep["breakdown"]) == pytest.approx(100, abs=0.01)
    if warn:
        assert any(warn in w for w in rep["warnings"]), rep["warnings"]


def test_nsys_recursive_view_is_not_read(tmp_path):
    p = nsys_file(tmp_path, f"ALTER TABLE {K} RENAME TO kraw",
                  f"CREATE VIEW {K} AS WITH c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT kraw.* FROM kraw, c")
    t0 = time.monotonic()
    r = cli("analyze", p, "-o", tmp_path / "o", "-q", timeout=30)
    assert r.returncode == 0 and time.monotonic() - t0 < 20
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    assert any("WITH clause" in w for w in rep["warnings"])


def test_nsys_slow_view_stops_on_ctrl_c_within_a_second(tmp_path):
    p = nsys_file(tmp_path, "CREATE TABLE nums(x INTEGER)",
                  "INSERT INTO nums SELECT value FROM (WITH c(value) AS (SELECT 1 UNION ALL SELECT value+1 FROM c LIMIT 3000) SELECT value FROM c)",
                  f"ALTER TABLE {K} RENAME TO kraw", f"CREATE VIEW {K} AS SELECT kraw.* FROM kraw, nums a, nums b")
    proc = subprocess.Popen([PY, "-m", "inferscope", "analyze", str(p), "-o", str(tmp_path / "o")],
                            stderr=subprocess.PIPE, text=True)
    time.sleep(3.0)
    assert proc.poll() is None            # still inside the view's SQL (imports long done)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    rc = proc.wait(timeout=10)
    assert rc == 130 and time.monotonic() - t0 < 1.0, (rc, proc.stderr.read())


def test_nsys_wal_beside_the_file_is_warned(tmp_path):
    p = nsys_file(tmp_path)
    Path(str(p) + "-wal").write_bytes(b"\0" * 100)
    assert any("write-ahead log" in w for w in load_trace(p).meta["warnings"])


def test_nsys_rep_says_how_to_export(tmp_path):
    p = tmp_path / "report1.nsys-rep"
    p.write_bytes(b"\x00QDSTRM" + b"\0" * 64)
    one_line_exit_2(cli("analyze", p, "-o", tmp_path / "o"), "nsys export --type sqlite")


# ---------------------------------------------------------------------------------- .iscope
def iscope_members(tmp_path) -> dict:
    t = Synth()
    t.span(SpanKind.CPU_OP, "op", 0, 10)
    t.span(SpanKind.PYTHON, "inner", 1, 5)
    t.launch(1, 2, 3, 9)
    p = tmp_path / "base.iscope"
    native.save(t.done(), p)
    with zipfile.ZipFile(p) as z:
        return {n: z.read(n) for n in z.namelist()}


def npy(a) -> bytes:
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def col(m, name):
    return np.load(io.BytesIO(m[name]))


def write_zip(path, members, deflate=(), encrypt=False):
    with zipfile.ZipFile(path, "w") as z:
        for k, v in members.items():
            zi = zipfile.ZipInfo(k)
            zi.compress_type = zipfile.ZIP_DEFLATED if k in deflate else zipfile.ZIP_STORED
            z.writestr(zi, v)
    if encrypt:   # zipfile cannot write encrypted members: set the flag bit in every header
        b = bytearray(Path(path).read_bytes())
        for sig, off in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
            i = b.find(sig)
            while i >= 0:
                b[i + off] |= 0x1
                i = b.find(sig, i + 4)
        Path(path).write_bytes(bytes(b))
    return path


BAD_ISCOPE = {
    "header_not_object": (lambda m: {"inferscope.json": b"[1, 2]"}, "not an object"),
    "header_too_deep": (lambda m: {"inferscope.json": b'{"meta": ' + b"[" * 3000 + b"]" * 3000 + b"}"}, "deeper"),
    "meta_not_dict": (lambda m: {"inferscope.json": json.dumps({**json.loads(m["inferscope.json"]), "meta": [1]}).encode()},
                      "meta"),
    "npy_header_lies": (lambda m: {"spans.start_ns.npy": m["spans.start_ns.npy"].replace(b"'shape': (", b"'shape': (999999999")},
                        "header says"),
    "two_d_column": (lambda m: {"spans.start_ns.npy": npy(np.stack([col(m, "spans.start_ns.npy")] * 2))}, "1-D"),
    "object_dtype": (lambda m: {"spans.start_ns.npy": npy(np.array([1, "x"], dtype=object))}, "corrupt"),
    "string_offsets": (lambda m: {"strings.off.npy": npy(np.array([0, 10**9], np.int64))}, "string offsets"),
    "all_tracks_missing": (lambda m: {"spans.track.npy": npy(np.full(4, 99, np.int32))}, "missing track"),
    "all_names_missing": (lambda m: {"spans.name.npy": npy(np.full(4, 10**6, np.int32))}, "missing name"),
    "negative_durations": (lambda m: {"spans.end_ns.npy": npy(col(m, "spans.start_ns.npy") - 5)}, "ending before"),
}


@pytest.mark.parametrize("case", sorted(BAD_ISCOPE))
def test_bad_iscope_is_exit_2(tmp_path, case):
    m = iscope_members(tmp_path)
    change, needle = BAD_ISCOPE[case]
    p = write_zip(tmp_path / "bad.iscope", {**m, **change(m)})
    with pytest.raises(InputError, match="(?i)" + needle.replace("(", r"\(")):
        load_trace(p)
    assert main(["analyze", str(p), "-o", str(tmp_path / "o"), "-q"]) == 2


def test_iscope_encrypted_member_and_zip_bomb_are_exit_2(tmp_path):
    m = iscope_members(tmp_path)
    with pytest.raises(InputError, match="encrypted"):
        load_trace(write_zip(tmp_path / "enc.iscope", m, encrypt=True))
    bomb = dict(m)
    bomb["spans.detail.npy"] = b"\0" * (200 << 20)    # 200 MB of zeros deflate to ~200 KB
    p = write_zip(tmp_path / "bomb.iscope", bomb, deflate={"spans.detail.npy"})
    assert p.stat().st_size < 1 << 20
    t0 = time.monotonic()
    (err, mb) = peak_mb(lambda: pytest.raises(InputError, load_trace, p))
    assert "limit" in str(err.value) and mb < 20 and time.monotonic() - t0 < 5


@pytest.mark.parametrize("parent", ["cycle", "self", "forward", "out_of_range"])
def test_iscope_parent_cycles_and_unsorted_spans_cannot_hang(tmp_path, parent):
    """The idle-gap host walk followed parent links forever on a cycle; now the nesting is
    checked at load (parents precede children) and recomputed when it is not."""
    t = Synth()
    for i in range(5):
        t.span(SpanKind.CPU_OP, f"op{i}", i * 100, i * 100 + 90)
        t.launch(i * 100 + 1, i * 100 + 2, i * 100 + 10, i * 100 + 20)
    p = tmp_path / "ok.iscope"
    native.save(t.done(), p)
    with zipfile.ZipFile(p) as z:
        m = {n: z.read(n) for n in z.namelist()}
    par = col(m, "spans.parent.npy")
    n = len(par)
    bad = {"cycle": np.roll(np.arange(n), 1), "self": np.arange(n), "forward": np.arange(n) + 1 - n * 0,
           "out_of_range": np.full(n, 1 << 30)}[parent].astype(np.int32)
    m["spans.parent.npy"] = npy(bad)
    st, en = col(m, "spans.start_ns.npy"), col(m, "spans.end_ns.npy")
    m["spans.start_ns.npy"], m["spans.end_ns.npy"] = npy(st[::-1].copy()), npy(en[::-1].copy())  # unsorted too
    q = write_zip(tmp_path / "bad.iscope", m)
    r = cli("analyze", q, "-o", tmp_path / "o", "-q", timeout=60)
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    assert any("re-sorted" in w for w in rep["warnings"])
    tr = load_trace(q)
    idx = np.arange(len(tr.spans))
    assert ((tr.spans.parent == -1) | (tr.spans.parent < idx)).all()


# ---------------------------------------------------------------------------------- config / CLI
def test_deep_phase_map_and_non_utf8_config_are_exit_2(tmp_path):
    src = kineto(tmp_path, [ev()])
    pm = tmp_path / "pm.json"
    pm.write_text("[" * 100_000 + "]" * 100_000)
    one_line_exit_2(cli("analyze", src, "-o", tmp_path / "o", "--phase-map", pm), "phase-map")
    (tmp_path / ".inferscope.yaml").write_bytes(b"log_level: \xff\xfe\n")
    one_line_exit_2(cli("analyze", src, "-o", tmp_path / "o", cwd=tmp_path), "UTF-8")


@pytest.mark.parametrize("command", ["analyze", "export", "run"])
@pytest.mark.parametrize("var,val", [("INFERSCOPE_REPORT_FORMAT", "pdf"), ("INFERSCOPE_LOG_LEVEL", "loud"),
                                     ("INFERSCOPE_CPU_SAMPLING_FREQUENCY_HZ", "0"),
                                     ("INFERSCOPE_MAX_DECOMPRESSED_MB", "-1")])
def test_every_command_rejects_bad_configuration(tmp_path, command, var, val):
    src = kineto(tmp_path, [ev()])
    args = {"analyze": ["analyze", src, "-o", tmp_path / "o"], "export": ["export", src, "-o", tmp_path / "t.json"],
            "run": ["run", "--report", tmp_path / "r.md", "--", PY, "-c", "pass"]}[command]
    one_line_exit_2(cli(*args, env={var: val}, cwd=tmp_path), var)


def test_run_of_a_file_that_is_not_a_program_is_exit_2(tmp_path):
    plain = tmp_path / "hostname"
    plain.write_text("box\n")
    one_line_exit_2(cli("run", "--report", tmp_path / "r.md", "--", plain, cwd=tmp_path), "permission denied")
    plain.chmod(0o755)
    plain.write_bytes(b"\x7fELF\x00garbage")
    one_line_exit_2(cli("run", "--report", tmp_path / "r.md", "--", plain, cwd=tmp_path), "cannot execute")


def test_run_trace_under_a_regular_file_is_exit_2(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    one_line_exit_2(cli("run", "--trace", f / "t.iscope", "--report", tmp_path / "r.md", "--", PY, "-c", "pass",
                        cwd=tmp_path), "--trace")


@pytest.mark.parametrize("command", ["analyze", "export"])
def test_output_that_is_the_input_is_refused(tmp_path, command):
    src = kineto(tmp_path, [ev()])
    before = src.read_bytes()
    one_line_exit_2(cli(command, src, "-o", src), "refusing")
    link = tmp_path / "alias.json"
    link.symlink_to(src)
    one_line_exit_2(cli(command, src, "-o", link), "refusing")
    assert src.read_bytes() == before


def test_window_errors_list_valid_names_and_list_windows_prints_them(tmp_path):
    src = kineto(tmp_path, [ev("ProfilerStep#1", "user_annotation", ts=0, dur=10),
                            ev("decode", "user_annotation", ts=20, dur=10), ev("x", ts=0, dur=40)])
    r = cli("analyze", src, "-o", tmp_path / "o", "--window", "nope")
    one_line_exit_2(r, "decode", "step:1", "--list-windows")
    r = cli("analyze", src, "--list-windows")
    assert r.returncode == 0 and {"all", "decode", "ProfilerStep#1", "step:1"} <= set(r.stdout.split("\n"))
    assert not (tmp_path / "inferscope-out").exists()


def test_quiet_prints_nothing_but_errors(tmp_path):
    src = kineto(tmp_path, [ev(), ev("y", ts="bad")])   # one malformed event: a warning in the report
    r = cli("analyze", src, "-o", tmp_path / "o", "-q")
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""
    r = cli("export", src, "-o", tmp_path / "tl.json", "-q")
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""
    r = cli("run", "-q", "--report", tmp_path / "r.md", "--", PY, "-c", "print('child')", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "child\n" and r.stderr == "", r.stderr
    r = cli("analyze", tmp_path / "missing.json", "-q")
    one_line_exit_2(r, "no such file")


def test_gz_outputs_are_gzip(tmp_path):
    src = kineto(tmp_path, [ev()])
    assert main(["export", str(src), "-o", str(tmp_path / "t.json.gz"), "-q"]) == 0
    doc = json.loads(gzip.decompress((tmp_path / "t.json.gz").read_bytes()))
    assert "traceEvents" in doc
    assert main(["analyze", str(src), "-o", str(tmp_path / "r.json.gz"), "-q"]) == 0
    assert json.loads(gzip.decompress((tmp_path / "r.json.gz").read_bytes()))["schema_version"] == 2


def test_rerun_into_the_same_folder_removes_stale_files_of_the_previous_set(tmp_path):
    a = kineto(tmp_path, [ev(), ev("k", "kernel", pid=0, tid=7, args={"stream": 7})], name="a.json")
    b = kineto(tmp_path, [ev()], name="b.json")
    out = tmp_path / "inferscope-out"
    assert main(["analyze", str(a), "-o", str(out), "-q"]) == 0
    assert (out / "tables" / "kernels.csv").exists()
    mine = out / "tables" / "notes.csv"
    mine.write_text("user file")          # not written by InferScope: left alone
    assert main(["analyze", str(b), "-o", str(out), "-q"]) == 0
    assert not (out / "tables" / "kernels.csv").exists()
    assert mine.read_text() == "user file"
    assert json.loads((out / "report.json").read_text())["source"]["file"] == "b.json"
    assert not [f for f in out.rglob("*") if ".tmp" in f.name or "inferscope-tmp" in f.name]


def test_stale_staging_of_a_killed_run_is_cleaned(tmp_path):
    src = kineto(tmp_path, [ev()])
    out = tmp_path / "o"
    dead = subprocess.Popen([PY, "-c", "pass"])
    dead.wait()
    stale = out / f".inferscope-tmp-{dead.pid}"
    stale.mkdir(parents=True)
    (stale / "report.md").write_text("half")
    old_tmp = out / ".report.md.abc123.tmp"          # util/atomic.py temporary of a killed writer
    old_tmp.write_text("half")
    os.utime(old_tmp, (time.time() - 3600, time.time() - 3600))
    young_tmp = out / ".report.json.def456.tmp"      # maybe another writer's, still in progress
    young_tmp.write_text("busy")
    assert main(["analyze", str(src), "-o", str(out), "-q"]) == 0
    assert not stale.exists() and not old_tmp.exists() and young_tmp.exists()


def test_ctrl_c_while_writing_never_leaves_a_mixed_set(tmp_path, monkeypatch):
    from inferscope.report import json_report, writer
    src = kineto(tmp_path, [ev()])
    out = tmp_path / "o"
    assert main(["analyze", str(src), "-o", str(out), "-q", "--format", "json,md,html"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    real = json_report.render

    def interrupted(result, trace, path):
        os.kill(os.getpid(), signal.SIGINT)   # Ctrl-C in the middle of the set
        real(result, trace, path)
    monkeypatch.setattr(json_report, "render", interrupted)
    # analyze: the new set is abandoned at once (exit 130), the previous one stays whole
    src2 = kineto(tmp_path, [ev("other")], name="t2.json")
    assert main(["analyze", str(src2), "-o", str(out), "-q", "--format", "json,md,html"]) == 130
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    # run (defer_interrupt): the interrupt waits until the whole new set is in place
    from inferscope.analyze.pipeline import analyze
    tr = load_trace(src2)
    with pytest.raises(KeyboardInterrupt):
        from helpers import as_report
        writer.write_set(as_report(analyze(tr), tr), tr, [("json", out / "report.json"), ("md", out / "report.md")], out,
                         defer_interrupt=True)
    assert b"other" in (out / "report.json").read_bytes() and b"other" in (out / "report.md").read_bytes()
    assert not list(out.glob(f"{writer.STAGE_PREFIX}*"))


def test_markdown_and_csv_neutralise_hostile_names(tmp_path):
    names = ["![x](http://host/k.png)", "[click](https://evil/)", "<img src=x onerror=alert(1)>",
             "a\x1b[31mred\x07\x00b", "evil\u202egnp.exe", "=HYPERLINK(\"http://x\")", "x`y```z", "www.evil.com/p"]
    evs = [ev(n, "kernel", ts=i * 10, pid=0, tid=7, args={"stream": 7, "device": 0}) for i, n in enumerate(names)]
    src = kineto(tmp_path, evs)
    out = tmp_path / "o"
    assert main(["analyze", str(src), "-o", str(out), "-q"]) == 0
    md = (out / "report.md").read_text()
    import re
    assert not re.search(r"(?<!\\)\]\(", md) and not re.search(r"!(?<!\\)\[", md)   # no link/image syntax
    assert not re.search(r"(?<!\\)<img", md) and "http://" not in md and "www.evil" not in md   # no HTML, no autolink
    from helpers import md_markup
    assert md_markup(md) == []
    csv_text = "".join(f.read_text() for f in (out / "tables").glob("*.csv"))
    for ch in "\x1b\x07\x00\u202e":
        assert ch not in csv_text
    assert "'=HYPERLINK" in csv_text


def test_cublas_api_log_hostile_values_are_escaped_and_bad_blocks_skipped(tmp_path):
    """A cuBLAS API log (CUBLAS_LOGINFO_DBG=1 blocks) whose type values are markup / control characters: every
    rendering escapes them; blocks with unusable m/n/k are skipped and counted, never a traceback."""
    head = "I! cuBLAS (v12.4.5) function cublasStatus_t cublasGemmEx(cublasHandle_t, ...) called:"
    vals = ["![x](http://host/k.png)", "<img\x1bsrc=x>", "=HYPERLINK(\"http://x\")", "a|b`c\u202e"]
    lines = []
    for i, v in enumerate(vals):
        lines += [head, "i!  transa: type=cublasOperation_t; val=CUBLAS_OP_N(0)",
                  "i!  transb: type=cublasOperation_t; val=CUBLAS_OP_N(0)", f"i!  m: type=int; val={i + 1}",
                  "i!  n: type=int; val=2", "i!  k: type=int; val=3", f"i!  Atype: type=cudaDataType_t; val={v}",
                  f"i!  computeType: type=cublasComputeType_t; val={v}"]
    lines += [head, "i!  m: type=int; val=" + "9" * 400, "i!  n: type=int; val=-1", "i! \x07\xff"]
    log = tmp_path / "cublas.log"
    log.write_text("\n".join(lines))
    out = tmp_path / "o"
    src = kineto(tmp_path, [ev("k", "kernel", pid=0, tid=7, args={"stream": 7, "device": 0})])
    r = cli("analyze", src, "-o", out, "--format", "json,md,csv", "--cublas-log", log)
    assert r.returncode == 0, r.stderr[-800:]
    rep = json.loads((out / "report.json").read_text())
    assert len(rep["tables"]["cublas_gemms"]["rows"]) == len(vals)
    assert sum("1 cuBLAS API GEMM call block(s)" in w for w in rep["warnings"]) == 1
    md = (out / "report.md").read_text()
    from helpers import md_markup
    assert md_markup(md) == [] and "http://" not in md
    csv_text = (out / "tables" / "cublas_gemms.csv").read_text()
    assert "\x1b" not in csv_text and "\u202e" not in csv_text and "'=HYPERLINK" in csv_text


# ---------------------------------------------------------------------------------- run: nothing lost
pytestmark_live = pytest.mark.live


@pytest.mark.live
def test_run_keeps_the_trace_and_returns_the_childs_code_when_the_report_fails(tmp_path):
    # the report folder is writable when the run starts (an unwritable one is refused before the program runs:
    # test_live_faults), then the program puts a file where it was: the report fails at the end
    blocker = tmp_path / "blocker"
    prog = ("import shutil, sys; shutil.rmtree('blocker'); open('blocker', 'w').write('a file where the report "
            "folder should be'); sys.exit(7)")
    r = cli("run", "--report", blocker / "r.md", "--", PY, "-c", prog, cwd=tmp_path)
    assert r.returncode == 7, r.stderr
    assert "report not written" in r.stderr and "trace kept at" in r.stderr
    kept = r.stderr.split("trace kept at ")[1].split(" ")[0]
    assert Path(kept).is_file() and load_trace(kept).meta["source_format"] == "inferscope"


@pytest.mark.live
def test_run_names_every_format_from_report(tmp_path):
    d = tmp_path / "d"
    r = cli("run", "--report", d / "run1.md", "--format", "md,html,json", "--", PY, "-c", "pass", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert {p.name for p in d.iterdir() if not p.name.startswith(".")} == {"run1.md", "run1.html", "run1.json"}


def test_iscope_meta_of_wrong_types_is_cleaned(tmp_path):
    m = iscope_members(tmp_path)
    h = json.loads(m["inferscope.json"])
    h["meta"] = {"source_file": ["x"], "warnings": "not a list", "devices": [1, {"id": "x", "name": 5}],
                 "tool_versions": [], "collection": {"cpu_sampling_hz_steady": "fast", "duration_ms": {"a": 1},
                                                     "events": 1e400 if False else "many"}}
    m["inferscope.json"] = json.dumps(h).encode()
    p = write_zip(tmp_path / "meta.iscope", m)
    out = tmp_path / "o"
    assert main(["analyze", str(p), "-o", str(out), "-q", "--format", "md,json,html,chrome,csv"]) == 0
    rep = json.loads((out / "report.json").read_text())
    assert rep["source"]["devices"] == [{"id": 0, "name": None, "total_memory_bytes": None, "sm_count": None,
                                         "compute_capability": None}]


def test_analyze_precedence_flags_over_env_over_file(tmp_path):
    src = kineto(tmp_path, [ev()])
    (tmp_path / ".inferscope.yaml").write_text("report_format: html\nreport_path: from_file\n")
    r = cli("analyze", src, "-q", cwd=tmp_path)                                   # file
    assert r.returncode == 0 and sorted(p.name for p in (tmp_path / "from_file").iterdir()
                                        if not p.name.startswith(".")) == ["report.html"]
    r = cli("analyze", src, "-q", cwd=tmp_path, env={"INFERSCOPE_REPORT_FORMAT": "json"})   # env beats file
    assert r.returncode == 0 and (tmp_path / "from_file" / "report.json").exists()
    r = cli("analyze", src, "-q", "-o", tmp_path / "flag", "--format", "md", cwd=tmp_path,
            env={"INFERSCOPE_REPORT_FORMAT": "json"})                            # flags beat both
    assert r.returncode == 0 and sorted(p.name for p in (tmp_path / "flag").iterdir()
                                        if not p.name.startswith(".")) == ["report.md"]


def test_error_lines_carry_no_terminal_control_characters(tmp_path):
    p = tmp_path / "evil\x1b[2J\u202ename.json"
    p.write_bytes(b"not a trace")
    r = cli("analyze", p, "-o", tmp_path / "o")
    one_line_exit_2(r, "not a recognised trace")
    assert "\x1b" not in r.stderr and "\u202e" not in r.stderr
