"""Nsight Compute import (ingest/ncu.py) and the kernel deep-dive (analyze/kernel_limits.py) on the
real H100 captures in tests/data/ncu, with values recounted here from the CSV text."""
from __future__ import annotations

import csv
import gzip
import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from inferscope.analyze.kernel_limits import _limiter, join_key
from inferscope.errors import InferScopeError
from inferscope.ingest import detect_format, load_trace, ncu

from conftest import shared_path

DATA = Path(__file__).parent / "data" / "ncu"
RAW = DATA / "demo_hot10_raw.csv.gz"
DETAILS = DATA / "demo_hot10_details.csv.gz"
SRC = str(Path(__file__).resolve().parents[1] / "src")


def _rows(p: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(gzip.decompress(p.read_bytes()).decode())))


def _num(s: str) -> float:
    return float(s.replace(",", ""))


def test_detect_by_content(tmp_path):
    assert detect_format(RAW) == "ncu" and detect_format(DETAILS) == "ncu"
    plain = tmp_path / "x.txt"                                  # plain text, ncu's log lines first
    plain.write_text("==PROF== Disconnected from process 1\n" + gzip.decompress(RAW.read_bytes()).decode())
    assert detect_format(plain) == "ncu" and len(ncu.read(plain)["launches"]) == 8


def test_raw_page_recounted():
    rows = _rows(RAW)
    h, units, data = rows[0], rows[1], rows[2:]
    col = {n: i for i, n in enumerate(h)}
    cap = ncu.read(RAW)
    assert cap["layout"] == "raw" and len(cap["launches"]) == len(data) == 8
    assert units[col["gpu__time_duration.sum"]] == "us"
    for la, r in zip(cap["launches"], data):
        m = la["metrics"]
        assert la["id"] == int(r[col["ID"]]) and la["name"] == r[col["Kernel Name"]]
        assert la["grid"] == r[col["Grid Size"]] and la["block"] == r[col["Block Size"]] and not la["mangled"]
        assert m["duration_ns"] == pytest.approx(_num(r[col["gpu__time_duration.sum"]]) * 1e3)
        assert m["sm_pct"] == pytest.approx(_num(r[col["sm__throughput.avg.pct_of_peak_sustained_elapsed"]]))
        assert m["dram_pct"] == pytest.approx(_num(r[col["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"]]))
        assert m["occupancy_pct"] == pytest.approx(_num(r[col["sm__warps_active.avg.pct_of_peak_sustained_active"]]))
        assert m["registers"] == _num(r[col["launch__registers_per_thread"]])
        assert m["tensor_pct"] == pytest.approx(_num(r[col["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"]]))
        assert m["mem_clock_attr_hz"] == _num(r[col["device__attribute_memory_clock_rate"]]) * 1e3
    # the default sections carry no FLOP counters, DRAM bytes or hit rates: said, not invented
    assert {"fp32_flops", "dram_bytes", "l2_hit_pct"} <= set(cap["missing"]) and cap["warnings"]


def test_details_page_recounted_and_agrees_with_raw():
    rows = _rows(DETAILS)
    h, data = rows[0], rows[1:]
    c = {n: i for i, n in enumerate(h)}
    want: dict = {}
    rules: dict = {}
    for r in data:
        lid = int(r[0])
        if len(r) > c["Rule Name"] and r[c["Rule Name"]]:
            rules[lid] = rules.get(lid, 0) + 1
        elif r[c["Metric Name"]] in ("Duration", "Achieved Occupancy", "Compute (SM) Throughput", "Registers Per Thread"):
            want.setdefault(lid, {})[r[c["Metric Name"]]] = (_num(r[c["Metric Value"]]), r[c["Metric Unit"]])
    cap = ncu.read(DETAILS)
    assert cap["layout"] == "details" and [la["id"] for la in cap["launches"]] == list(want)
    for la in cap["launches"]:
        w, m = want[la["id"]], la["metrics"]
        assert w["Duration"][1] == "us" and m["duration_ns"] == pytest.approx(w["Duration"][0] * 1e3)
        assert m["occupancy_pct"] == w["Achieved Occupancy"][0] and m["sm_pct"] == w["Compute (SM) Throughput"][0]
        assert m["registers"] == w["Registers Per Thread"][0]
        assert len(la["rules"]) == rules.get(la["id"], 0)
    raw = {la["id"]: la["metrics"] for la in ncu.read(RAW)["launches"]}
    for la in cap["launches"]:                  # the same launches, printed to 2 decimals on the details page
        assert la["metrics"]["duration_ns"] == pytest.approx(raw[la["id"]]["duration_ns"], abs=6)
        assert la["metrics"]["dram_pct"] == pytest.approx(raw[la["id"]]["dram_pct"], abs=0.006)


@pytest.mark.parametrize("path", [RAW, DETAILS])
def test_limiters_on_the_real_kernels(path):
    from inferscope.analyze.pipeline import analyze
    r = analyze(load_trace(path))
    dd = r["kernel_deep_dive"]
    assert dd["launches"] == 8 and len(dd["kernels"]) == 8 and not dd["joined"]
    # decode-step kernels of a tiny model: nothing near 60 % of any peak -> latency-bound, small grids
    assert {k["limiter"] for k in dd["kernels"]} == {"latency"}
    sg = next(k for k in dd["kernels"] if "sgemm" in k["name"])
    assert "0.04 waves on 132 SMs" in sg["limiter_text"] and "6% achieved occupancy" in sg["limiter_text"]
    assert sum(k["share_pct"] for k in dd["kernels"]) == pytest.approx(100, abs=0.01)
    assert all(k["dram_bytes_estimated"] for k in dd["kernels"])        # no dram__bytes in the capture
    dev = dd["device"]
    assert dev["peak_fp32_tflops"] == pytest.approx(66.9, abs=0.1) and dev["peak_dram_gbps"] == pytest.approx(3350, abs=3)
    f = next(f for f in r["findings"] if f["id"] == "kernel_limiter")
    assert f["evidence"]["kernel"] == dd["kernels"][0]["name"] and f["evidence"]["limiter"] == "latency"
    if path == DETAILS:
        assert any("SOLBottleneck" in x for x in sg["ncu_rules"])


def test_limiter_words():
    base = dict(sm_pct=10.0, mem_pct=85.0, dram_pct=81.0, tensor_pct=0.0, waves=5.0, grid_blocks=660.0,
                occupancy_pct=60.0, theoretical_occupancy_pct=100.0, registers=32.0, device_sm_count=132)
    assert _limiter(base)[1] == "memory-bound: DRAM 81% of peak"
    c = dict(base, sm_pct=90.0, mem_pct=20.0, dram_pct=5.0)
    assert _limiter(c)[1].startswith("compute-bound on FP32 pipes") and "Tensor Cores unused" in _limiter(c)[1]
    assert "TF32" in _limiter(c)[2]
    assert _limiter(dict(c, tensor_pct=70.0))[0] == "compute" and "Tensor Cores" in _limiter(dict(c, tensor_pct=70.0))[1]
    lat = _limiter(dict(base, sm_pct=20.0, mem_pct=30.0, dram_pct=10.0, occupancy_pct=12.0))
    assert lat[0] == "latency" and lat[1].startswith("latency-bound: 12% achieved occupancy")


def test_join_key_matches_both_demanglers():
    k = ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<2u>, "
         "unsigned int, 4, 64, 64>(at::native::(anonymous namespace)::OpaqueType<2u>*, unsigned int)")
    n = "void at::<unnamed>::CatArrayBatchedCopy<at::<unnamed>::OpaqueType<2>, unsigned int, 4, 64, 64>(T1 *, T2)"
    assert join_key(k) == join_key(n)
    k2 = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, X)"
    n2 = "void at::vectorized_elementwise_kernel<4, at::CUDAFunctor_add<float>, std::array<char *, 3>>(int, T2, T3)"
    assert join_key(k2) == join_key(n2)
    assert join_key("f<{lambda(int)#1}>(int)") == join_key("f<[lambda(int) (instance 1)]>(int)")


def _raw_text() -> str:
    return gzip.decompress(RAW.read_bytes()).decode()


def test_missing_section_and_renamed_metrics_degrade(tmp_path):
    rows = _rows(RAW)
    h = rows[0]
    drop = {i for i, n in enumerate(h) if n.startswith("sm__throughput") or n.startswith("sm__warps_active")}
    ren = {"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": "dram__throughput.avg.pct_of_peak_sustained_elapsed"}
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for j, r in enumerate(rows):
        r = [ren.get(x, x) if j == 0 else x for i, x in enumerate(r) if i not in drop]
        w.writerow(r)
    p = tmp_path / "old.csv"
    p.write_text(out.getvalue())
    cap = ncu.read(p)
    assert "sm_pct" not in cap["launches"][0]["metrics"] and "occupancy_pct" in cap["missing"]
    assert cap["launches"][0]["metrics"]["dram_pct"] == pytest.approx(1.601354)     # found under the older name
    assert any("lacks" in x and "occupancy_pct" in x for x in cap["warnings"])
    from inferscope.analyze.pipeline import analyze
    dd = analyze(load_trace(p))["kernel_deep_dive"]
    assert len(dd["kernels"]) == 8 and all(k["sm_pct"] is None for k in dd["kernels"])


def test_truncated_or_garbled_input_is_one_line_error(tmp_path):
    text = _raw_text()
    rnd = random.Random(27)
    p = tmp_path / "x.csv"
    for cut in [0, 5, 30, 200, len(text) // 3, len(text) - 7] + [rnd.randrange(len(text)) for _ in range(8)]:
        for mutate in (False, True):
            t = text[:cut]
            if mutate and t:
                i = rnd.randrange(len(t))
                t = t[:i] + rnd.choice(['"', "\x00", "\n", ",", "\ufffd"]) * rnd.randint(1, 50) + t[i + 1:]
            p.write_text(t)
            try:
                load_trace(p)
            except InferScopeError as e:
                assert "\n" not in str(e)
    gz = tmp_path / "t.csv.gz"
    gz.write_bytes(RAW.read_bytes()[:4000])                       # truncated gzip
    bad = tmp_path / "bad.csv"
    bad.write_text('"ID","Process ID","Kernel Name"\n"1","2","' + "x" * 200_000 + '"\n')   # field over csv's limit
    env = dict(os.environ, PYTHONPATH=SRC)
    for f in (gz, bad):
        r = subprocess.run([sys.executable, "-m", "inferscope", "analyze", str(f), "-o", str(tmp_path / "o")],
                           capture_output=True, text=True, env=env)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr


def test_cli_end_to_end(tmp_path):
    env = dict(os.environ, PYTHONPATH=SRC)
    r = subprocess.run([sys.executable, "-m", "inferscope", "analyze", str(DETAILS), "-o", str(tmp_path / "o"),
                        "--format", "md,json,html"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    assert rep["source"]["format"] == "ncu" and len(rep["kernel_deep_dive"]["kernels"]) == 8
    md = (tmp_path / "o" / "report.md").read_text()
    assert "## Kernel deep-dive (Nsight Compute)" in md and "Kernel2\\<cutlass_80_simt_sgemm" in md   # names escaped
    assert "<cutlass_80" not in (tmp_path / "o" / "report.html").read_text()


def test_join_to_a_timeline(tmp_path):
    """The shared H100 Qwen trace joined with the demo capture renamed to the trace's top kernels."""
    trace = shared_path("kineto", "tracelens_h100_qwen1.5-0.5b-chat_textgen.json.gz")
    from inferscope.analyze.pipeline import analyze
    base = analyze(load_trace(trace))
    top = [r["name"] for r in base["kernels"]["top"][:3]]
    rows = _rows(RAW)
    col = rows[0].index("Kernel Name")
    for r, name in zip(rows[2:], top + ["not_in_the_trace_kernel"]):
        r[col] = name
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows[:2 + len(top) + 1])
    p = tmp_path / "k.csv"
    p.write_text(out.getvalue())
    env = dict(os.environ, PYTHONPATH=SRC)
    r = subprocess.run([sys.executable, "-m", "inferscope", "analyze", str(trace), "--ncu", str(p), "-o", str(tmp_path / "o"),
                        "--format", "json,md"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    dd = rep["kernel_deep_dive"]
    assert dd["joined"] and len(dd["unmatched"]) == 1
    by_name = {k["name"]: k for k in dd["kernels"]}
    for t in base["kernels"]["top"][:3]:
        k = by_name[t["name"]]
        assert k["trace_calls"] == t["calls"] and k["trace_sum_ms"] == pytest.approx(t["sum_ms"], rel=1e-6)
        assert k["share_pct"] == pytest.approx(t["share_pct"], abs=0.01)
    assert any("not found in the trace" in w for w in rep["warnings"])
    md = (tmp_path / "o" / "report.md").read_text()
    assert "Kernel deep-dive" in md and "Measured vs estimated MFU" in md and "### Measured vs estimated efficiency" in md
    assert dd["measured_vs_estimated"]["matched_kernels"] == 3 and dd["launch_range"]["text"]
