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
    from helpers import md_markup, md_render
    assert md_markup(md) == [] and "gemm&lt;script&gt;alert" in md_render(md)   # shown as text, not markup
    shown = [f for f in rep["findings"] if f["severity"] in ("high", "medium")]
    assert shown and all(f"[{f['severity']}] {f['title']}" in r.stdout for f in shown)   # every one in the summary
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


def test_a_second_format_with_the_same_stem_keeps_the_first(tmp_path):
    """issue 24: `make demo` wrote llm_report.md, then llm_report.html, and the second set deleted the first."""
    src = small_kineto(tmp_path)
    assert main(["analyze", str(src), "-o", str(tmp_path / "r.md"), "-q"]) == 0
    md = (tmp_path / "r.md").read_text()
    assert main(["analyze", str(src), "-o", str(tmp_path / "r.html"), "-q"]) == 0
    assert (tmp_path / "r.md").read_text() == md and (tmp_path / "r.html").read_text().lstrip().startswith("<!")
    assert main(["analyze", str(src), "-o", str(tmp_path / "r.json"), "-q"]) == 0
    assert {p.name for p in tmp_path.glob("r.*")} == {"r.md", "r.html", "r.json"}


def test_format_decides_the_extension(tmp_path):
    """--format html with a .md path writes r.html (the path's stem names the set, the format its extension)
    and says so on stderr; never HTML in a file named .md."""
    src = small_kineto(tmp_path)
    r = run_cli("analyze", src, "-o", tmp_path / "r.md", "--format", "html")
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "r.md").exists()
    assert (tmp_path / "r.html").read_text().lstrip().startswith("<!")
    err = r.stderr
    assert "--format html: writing" in err and "r.html" in err and "r.md" in err
    assert resolve_outputs(str(tmp_path / "x.md"), "json") == [("json", tmp_path / "x.json")]
    assert resolve_outputs(str(tmp_path / "x.md.gz"), "html") == [("html", tmp_path / "x.html.gz")]
    assert resolve_outputs(str(tmp_path / "x.md"), "md") == [("md", tmp_path / "x.md")]
    assert resolve_outputs(str(tmp_path / "t.json"), "chrome") == [("chrome", tmp_path / "t.json")]   # JSON either way
    # INFERSCOPE_REPORT_FORMAT is a --format too: a JSON report never lands in report.md
    env = dict(os.environ, INFERSCOPE_REPORT_FORMAT="json")
    r = subprocess.run([PY, "-m", "inferscope", "run", "--report", str(tmp_path / "run.md"), "--", PY, "-c", "pass"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "run.md").exists() and json.loads((tmp_path / "run.json").read_text())["schema_version"] == 2
    assert "writing" in r.stderr and "run.json" in r.stderr


def test_run_options_after_the_program_name_get_a_hint(tmp_path):
    """`inferscope run python app.py --report x.md`: --report goes to the program (argparse REMAINDER); a one-line
    hint on stderr says where InferScope's options go."""
    app = tmp_path / "app.py"
    app.write_text("import sys\nprint('args', sys.argv[1:])\n")
    r = run_cli("run", PY, app, "--report", tmp_path / "x.md", cwd=tmp_path)
    assert "args ['--report'" in r.stdout                              # the program got it, as argparse says
    hint = [ln for ln in r.stderr.splitlines() if "--report" in ln and "before the program" in ln]
    assert len(hint) == 1, r.stderr
    assert "inferscope run --report" in hint[0] and " -- " in hint[0]
    r = run_cli("run", "--", PY, app, "--report", "y", cwd=tmp_path)   # after an explicit --: intended, no hint
    assert "before the program" not in r.stderr


def test_partial_trace_lowers_confidence_and_says_so_in_the_headline(tmp_path):
    """A program ended by os._exit: InferScope rebuilds the trace from its crash journal, which covers only
    the data flushed before the exit.  The verdict's confidence is scaled by the covered share of the run and
    the headline's first lines say so (issue 24: 'e2e 43.8 ms, confidence 1.00' on ~1 s of ~1.9 s)."""
    app = tmp_path / "app.py"
    app.write_text("import os, time\nt = time.perf_counter()\n"
                   "while time.perf_counter() - t < 1.5:\n    sum(i * i for i in range(2000))\n"
                   "print('worked', round(time.perf_counter() - t, 3), flush=True)\nos._exit(3)\n")
    r = run_cli("run", "--report", tmp_path / "r.md", "--format", "md,json,html", "--", PY, app, cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    worked_s = float(r.stdout.split("worked", 1)[1].split()[0])
    rep = json.loads((tmp_path / "r.json").read_text())
    coll = rep["about"]["collection"]
    assert coll["complete"] is False
    covered = coll["duration_ms"] / coll["run_wall_ms"]
    assert 0 < covered < 1 and coll["duration_ms"] <= worked_s * 1e3 + 500     # only flushed data, never more
    v = rep["verdict"]
    assert v["confidence"] <= round(covered, 2) + 0.01 and "partial trace" in v["confidence_basis"]
    head = (tmp_path / "r.md").read_text().split("```", 2)[1].strip().splitlines()
    assert "Partial trace" in "\n".join(head[:3]), head[:4]
    assert f"{coll['duration_ms']:,.0f} ms of the {coll['run_wall_ms']:,.0f} ms run" in "\n".join(head[:3])
    html = (tmp_path / "r.html").read_text()
    assert 'id="partial-trace"' in html and html.index('id="partial-trace"') < html.index('id="run-phases"' if 'id="run-phases"' in html else "<h3>Why</h3>")
