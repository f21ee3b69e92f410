"""The CLI end to end: outputs, formats, errors (one line, exit 2), input never modified."""
import gzip
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import shared_path
from inferscope.cli import main, resolve_outputs

from helpers import Synth
from inferscope.trace import SpanKind, native

PY = sys.executable


def run_cli(*args, cwd=None):
    return subprocess.run([PY, "-m", "inferscope", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def small_kineto(tmp_path) -> Path:
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0.0, "dur": 100.0},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0,
         "args": {"correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": "gemm<script>alert(1)</script>", "pid": 0, "tid": 7, "ts": 20.0, "dur": 50.0,
         "args": {"correlation": 7, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 100.0, "dur": 50.0},
    ]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev, "SECRET_TOKEN": "hunter2-abcdef", "username": "alice"}))
    return p


def test_analyze_writes_md_json_csv(tmp_path):
    src = small_kineto(tmp_path)
    before = (hashlib.sha256(src.read_bytes()).hexdigest(), src.stat().st_mtime_ns)
    out = tmp_path / "out"
    r = run_cli("analyze", src, "-o", out)
    assert r.returncode == 0, r.stderr
    assert "End-to-end latency: 0.150 ms" in r.stdout
    rep = json.loads((out / "report.json").read_text())
    assert rep["schema_version"] == 2 and rep["e2e_ms"] == pytest.approx(0.15)
    assert {b["category"] for b in rep["breakdown"]} == {"gpu_compute", "gpu_communication", "h2d_copy", "d2h_copy", "other_copy", "sync_wait",
                                                         "cpu_preprocessing", "framework_overhead", "cpu_compute", "waiting", "other"}
    assert rep["gpu"]["busy_ms"] == pytest.approx(0.05)
    md = (out / "report.md").read_text()
    assert "## Findings" in md and "End-to-end latency" in md
    assert "<script>" not in md
    assert (out / "tables" / "kernels.csv").read_text().startswith("kernel_name,")
    for f in out.rglob("*"):
        if f.is_file():
            txt = f.read_text()
            assert "hunter2" not in txt and "alice" not in txt, f
    assert (hashlib.sha256(src.read_bytes()).hexdigest(), src.stat().st_mtime_ns) == before
    assert not list(out.rglob("*.tmp"))


def test_single_file_output_by_extension(tmp_path):
    src = small_kineto(tmp_path)
    r = run_cli("analyze", src, "-o", tmp_path / "r.md", "-q")
    assert r.returncode == 0 and r.stdout == "" and (tmp_path / "r.md").exists()
    assert resolve_outputs(str(tmp_path / "x.json"), None) == [("json", tmp_path / "x.json")]
    assert [f for f, _ in resolve_outputs(str(tmp_path / "d"), "md,html")] == ["md", "html"]


@pytest.mark.parametrize("content,expect", [
    (None, "no such file"),
    (b"", "empty"),
    (b"hello world, not a trace at all", "not a recognised trace"),
    (b'{"traceEvents": [{"ph": "X", "ts": 1', "JSON"),
    (b'{"traceEvents": 5}', ""),
    (b'{"traceEvents": []}', ""),
    (gzip.compress(b'{"traceEvents": [' + b'{"ph":"X","ts":1,"dur":2,"name":"a","pid":1,"tid":1},' * 200 + b"{}]}")[:-20], "truncated"),
    (b"SQLite format 3\x00" + b"\x00" * 200, ""),
    (b"PK\x03\x04garbage", ""),
])
def test_bad_input_one_line_exit_2(tmp_path, content, expect):
    p = tmp_path / "bad.json"
    if content is not None:
        p.write_bytes(content)
    r = run_cli("analyze", p, "-o", tmp_path / "o")
    assert r.returncode == 2, (r.stdout, r.stderr)
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("inferscope: error:"), err
    assert "Traceback" not in r.stderr
    assert expect.lower() in err.lower()
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_bad_options_exit_2(tmp_path):
    src = small_kineto(tmp_path)
    for args in (["--window", "nope"], ["--phase-map", str(tmp_path / "missing.json")], ["--format", "pdf"],
                 ["--nvtx-coverage-warn-threshold", "3"]):
        r = run_cli("analyze", src, "-o", tmp_path / "o", *args)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)


def test_unwritable_output_is_one_line(tmp_path):
    src = small_kineto(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run_cli("analyze", src, "-o", blocker / "sub")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_native_trace_reproduces_report(tmp_path):
    t = Synth()
    t.span(SpanKind.ANNOTATION, "tokenize", 0, 50)
    t.launch(50, 55, 60, 90)
    tr = t.done()
    p = tmp_path / "run.iscope"
    native.save(tr, p)
    assert main(["analyze", str(p), "-o", str(tmp_path / "a"), "-q"]) == 0
    assert main(["analyze", str(p), "-o", str(tmp_path / "b"), "-q"]) == 0
    a = json.loads((tmp_path / "a" / "report.json").read_text())
    b = json.loads((tmp_path / "b" / "report.json").read_text())
    a.pop("about"); b.pop("about")
    assert a == b


def test_secrets_in_real_trace_metadata_never_reach_outputs(tmp_path):
    path = shared_path("kineto", "hta_ns_resolution_v100_rank0.pt.trace.json.gz")
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    secrets = [doc[k] for k in ("username", "host_name", "tw_job", "mast_job_name") if isinstance(doc.get(k), str)]
    assert secrets
    out = tmp_path / "o"
    r = run_cli("analyze", path, "-o", out, "--format", "md,json,csv,html,chrome", "-q")
    assert r.returncode == 0, r.stderr
    for f in out.rglob("*"):
        if f.is_file():
            txt = f.read_text(errors="replace")
            for s in secrets:
                assert s not in txt, (f, s)


def test_outputs_have_normal_permissions(tmp_path):
    src = small_kineto(tmp_path)
    out = tmp_path / "o"
    assert main(["analyze", str(src), "-o", str(out), "-q"]) == 0
    um = os.umask(0)
    os.umask(um)
    assert (out / "report.md").stat().st_mode & 0o777 == 0o666 & ~um


def test_closed_pipe_stops_quietly():
    """`inferscope schema | head -1`: the reader closes the pipe; no 'internal error' line, no traceback."""
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-m", "inferscope", "schema"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) in (0, 1) and "internal error" not in err and "Traceback" not in err, err
