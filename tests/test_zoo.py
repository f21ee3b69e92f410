"""The planted-bottleneck zoo (examples/zoo): each workload's verdict must name its planted cause."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch not installed (extra [torch])")
pytestmark = pytest.mark.live

ZOO = Path(__file__).resolve().parents[1] / "examples" / "zoo"


def run_zoo(tmp_path, script):
    out = tmp_path / "report.json"
    r = subprocess.run([sys.executable, "-m", "inferscope", "run", "--format", "json", "--report", str(out), "--",
                        sys.executable, str(ZOO / script)], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads(out.read_text())
    assert rep["window"]["kind"] == "scopes"           # the workload's scope("inference"), not the whole process
    return rep, {b["category"]: b for b in rep["breakdown"]}


def test_tokenize_bound(tmp_path):
    rep, b = run_zoo(tmp_path, "tokenize_bound.py")
    assert rep["verdict"]["id"] == "cpu_bound", rep["verdict"]
    parts = {p["name"]: p["pct"] for p in b["cpu_preprocessing"]["parts"]}
    # truth: tokenize() is ~98 % of the scope (timed directly); measured 79-99 % (one delayed tick
    # on a loaded machine can carry 10 %); the voluntary-GIL-release bias has its own unit test
    assert parts.get("tokenization", 0) > 70, parts
    assert "cpu_preprocessing" in {f["id"] for f in rep["findings"]}


def test_io_bound(tmp_path):
    rep, b = run_zoo(tmp_path, "io_bound.py")
    assert rep["verdict"]["id"] == "waiting_bound", rep["verdict"]
    assert b["waiting"]["pct"] > 60 and b["cpu_compute"]["pct"] < 20
    assert "host_waiting" in {f["id"] for f in rep["findings"]}


def test_compute_bound(tmp_path):
    rep, b = run_zoo(tmp_path, "compute_bound.py")
    assert rep["verdict"]["id"] == "cpu_compute_bound", rep["verdict"]
    assert b["cpu_compute"]["pct"] > 60
