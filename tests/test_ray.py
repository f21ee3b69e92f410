"""inferscope analyze --engine ray: the same rows as the local path, against a real local Ray instance.

One Ray instance per module (2 CPUs), started by a helper process that the fixture ends; the CLI runs in
child processes that connect to it with --address, so Ray is never imported into the pytest process.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time

import pytest

from conftest import SHARED_TRACES, kineto_traces, nsys_traces
from inferscope.cli import main

pytestmark = pytest.mark.ray
START_TIMEOUT_S = 120

_HEAD = """
import sys, ray
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="error")
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()          # until the fixture closes stdin
ray.shutdown()
"""


@pytest.fixture(scope="module")
def ray_address():
    pytest.importorskip("ray")
    p = subprocess.Popen([sys.executable, "-c", _HEAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        ready, _, _ = select.select([p.stdout], [], [], START_TIMEOUT_S)
        line = p.stdout.readline().strip() if ready else ""
        if not line:
            pytest.fail(f"local Ray did not start within {START_TIMEOUT_S} s (exit {p.poll()})")
        yield line
    finally:
        try:
            p.stdin.close()
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=30)


def _cli(*args, timeout=300):
    # the helper's ray.init enables Ray's token authentication (Ray >= 2.5x); a driver that connects to such a
    # cluster sets RAY_AUTH_MODE=token and reads the token from ~/.ray/auth_token, as Ray's docs say
    env = {**os.environ, "RAY_AUTH_MODE": "token"}
    return subprocess.run([sys.executable, "-m", "inferscope", "analyze", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _jsonl(p):
    return [json.loads(x) for x in p.read_text().splitlines()]


def _inputs(tmp_path):
    """Vendored traces (always there), the small shared ones when present, and one broken input."""
    ks = [p for p in kineto_traces() if p.stat().st_size < 500_000]
    ns = [p for p in nsys_traces() if p.stat().st_size < 1_000_000][:1]
    broken = tmp_path / "broken.json"
    broken.write_text('{"traceEvents": [')
    return [*ks, *ns, broken]


# analysis_ms (about): the wall time of the analysis itself, measured in whichever process ran it
_TIMING = ("analysis_ms", "load_ms")


def _strip_timing(rep: dict) -> dict:
    rep = dict(rep)
    rep["about"] = {k: v for k, v in (rep.get("about") or {}).items() if k not in _TIMING}
    return rep


def test_ray_engine_gives_the_local_rows(tmp_path, ray_address):
    inputs = _inputs(tmp_path)
    assert len(inputs) >= 8
    loc, ray_out = tmp_path / "local", tmp_path / "ray"
    t0 = time.perf_counter()
    a = _cli(*inputs, "-o", loc, "-q", "--format", "json")
    t1 = time.perf_counter()
    b = _cli(*inputs, "-o", ray_out, "-q", "--format", "json", "--engine", "ray", "--address", ray_address)
    t2 = time.perf_counter()
    print(f"local {t1 - t0:.1f} s, ray {t2 - t1:.1f} s for {len(inputs)} inputs")
    assert a.returncode == b.returncode == 2, (a.stderr[-2000:], b.stderr[-2000:])   # the broken input
    assert a.stderr.strip().splitlines() == b.stderr.strip().splitlines()
    ra, rb = _jsonl(loc / "summary.jsonl"), _jsonl(ray_out / "summary.jsonl")
    assert ra == rb                                       # every field, in input order
    assert len(ra) == len(inputs) and sum(1 for r in ra if r["error"]) == 1
    assert _jsonl(loc / "findings.jsonl") == _jsonl(ray_out / "findings.jsonl") != []
    for r in ra:
        if r["error"]:
            continue
        ja = json.loads((loc / r["report_dir"] / "report.json").read_text())
        jb = json.loads((ray_out / r["report_dir"] / "report.json").read_text())
        assert _strip_timing(ja) == _strip_timing(jb), r["source"]
    if (SHARED_TRACES / "kineto").is_dir():
        pytest.importorskip("pyarrow")
        assert (ray_out / "summary.parquet").read_bytes() == (loc / "summary.parquet").read_bytes()


def test_ray_engine_one_input_and_relative_paths(tmp_path, ray_address, monkeypatch):
    ks = [p for p in kineto_traces() if p.stat().st_size < 50_000][:1]
    if not ks:
        pytest.skip("no small Kineto trace")
    shutil.copy(ks[0], tmp_path / ks[0].name)
    monkeypatch.chdir(tmp_path)
    r = _cli(ks[0].name, "-o", "out", "-q", "--format", "json", "--engine", "ray", "--address", ray_address)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = _jsonl(tmp_path / "out" / "summary.jsonl")
    assert [x["source"] for x in rows] == [ks[0].name] and rows[0]["error"] is None
    assert (tmp_path / "out" / rows[0]["report_dir"] / "report.json").is_file()


def test_ray_unreachable_address_is_one_line_exit_2(tmp_path):
    pytest.importorskip("ray")
    ks = kineto_traces()[:1]
    t0 = time.perf_counter()
    r = _cli(ks[0], "-o", tmp_path / "o", "-q", "--engine", "ray", "--address", "127.0.0.1:1", timeout=120)
    assert time.perf_counter() - t0 < 120
    assert r.returncode == 2
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("inferscope: error: cannot connect to Ray at 127.0.0.1:1"), err
    assert not (tmp_path / "o" / "summary.jsonl").exists()


def test_ray_missing_says_which_extra(tmp_path, monkeypatch, capsys):
    ks = kineto_traces()[:2]
    monkeypatch.setitem(sys.modules, "ray", None)          # `import ray` raises ImportError, as when not installed
    assert main(["analyze", *map(str, ks), "-o", str(tmp_path / "o"), "-q", "--engine", "ray"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["inferscope: error: --engine ray needs Ray: pip install 'inferscope[ray]'"]
    assert main(["analyze", *map(str, ks), "-o", str(tmp_path / "o"), "-q", "--address", "auto"]) == 2
    assert "--address applies to --engine ray" in capsys.readouterr().err
