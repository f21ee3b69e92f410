"""Nsight Compute captures as a new user exports them (issues 45, 47): every unit ncu writes, raw metric names
on the details page (``--metrics``), tensor-pipe counters in the limiter, a file cut mid-row, a failed export,
and the headline of a capture analysed alone.  Inputs are planted in ncu's exact CSV layout (every field
quoted; a details row without a rule ends at "Rule Name"); expected values are recounted from the CSV text."""
from __future__ import annotations

import csv
import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from inferscope.analyze.pipeline import analyze
from inferscope.errors import InferScopeError
from inferscope.ingest import detect_format, load_trace, ncu

DATA = Path(__file__).parent / "data" / "ncu"
SRC = str(Path(__file__).resolve().parents[1] / "src")
HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size", "Grid Size",
          "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value", "Rule Name", "Rule Type",
          "Rule Description", "Estimated Speedup Type", "Estimated Speedup"]
SOL, CMD, OCC = "GPU Speed Of Light Throughput", "Command line profiler metrics", "Occupancy"
BF16 = "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8>(T1::Params)"
SIMT = "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>(T1::Params)"


def details(launches: list[tuple[str, list[tuple]]]) -> str:
    """ncu --csv --page details text: one row per launch x metric, (section, name, unit, value) per metric."""
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(HEADER)
    for i, (kernel, metrics) in enumerate(launches):
        for sec, name, unit, val in metrics:
            w.writerow([str(i), "4242", "python3.12", "127.0.0.1", kernel, "1", "7", "(256, 1, 1)", "(64, 8, 1)", "0",
                        "9.0", sec, name, unit, val, ""])
        w.writerow([str(i), "4242", "python3.12", "127.0.0.1", kernel, "1", "7", "(256, 1, 1)", "(64, 8, 1)", "0", "9.0",
                    "SpeedOfLight", "", "", "", "SOLBottleneck", "OPT", "planted rule text", "global", "12.5"])
    return out.getvalue()


def _parse(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))[1:]


def _num(s: str) -> float:
    return float(s.replace(",", ""))


def gemm(sm="82.61", dram="12.04", dur=("usecond", "250.40"), extra=()) -> list[tuple]:
    return [(SOL, "DRAM Frequency", "Ghz", "2.62"), (SOL, "SM Frequency", "Ghz", "1.75"),
            (SOL, "Elapsed Cycles", "cycle", "438,213"), (SOL, "Memory Throughput", "%", "31.20"),
            (SOL, "DRAM Throughput", "%", dram), (SOL, "Duration", dur[0], dur[1]),
            (SOL, "Compute (SM) Throughput", "%", sm), *extra, (OCC, "Achieved Occupancy", "%", "12.31")]


def _write(tmp_path, text: str, name="k.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# the same quantity written in each unit ncu uses: every spelling gives the same base value
BYTES = [("byte", "335,544,320"), ("Kbyte", "335,544.32"), ("Mbyte", "335.54432"), ("Gbyte", "0.33554432"),
         ("KB", "335544.32"), ("MB", "335.54432"), ("GB", "0.33554432")]
TIMES = [("nsecond", "250,400"), ("usecond", "250.40"), ("msecond", "0.2504"), ("second", "0.0002504"),
         ("ns", "250400"), ("us", "250.4"), ("ms", "0.2504")]
RATES = [("byte/second", "1,340,000,000,000"), ("Kbyte/second", "1,340,000,000"), ("Mbyte/second", "1,340,000"),
         ("Gbyte/second", "1,340"), ("GB/s", "1340"), ("Tbyte/second", "1.34")]
FREQS = [("Hz", "1,750,000,000"), ("Khz", "1,750,000"), ("Mhz", "1,750"), ("Ghz", "1.75"), ("cycle/nsecond", "1.75"),
         ("cycle/usecond", "1,750"), ("cycle/second", "1,750,000,000")]


@pytest.mark.parametrize("table,cls", [(BYTES, "bytes"), (TIMES, "time"), (RATES, "rate"), (FREQS, "freq")])
def test_every_unit_to_one_base_value(table, cls):
    vals = []
    for unit, text in table:
        c, f = ncu.unit_scale(unit)
        assert c == cls, unit
        vals.append(ncu.number(text) * f)
    assert max(vals) == pytest.approx(min(vals), rel=1e-9), list(zip(table, vals))
    assert ncu.unit_scale("%") == ncu.unit_scale("percent") == ("pct", 1.0)
    for unit in ("cycle", "inst", "warp", "register/thread", "sector", ""):
        assert ncu.unit_scale(unit)[0] == "count"


@pytest.mark.parametrize("unit,text", BYTES)
def test_details_command_line_dram_bytes_in_any_unit(tmp_path, unit, text):
    """dram__bytes_read/write.sum under "Command line profiler metrics": measured DRAM bytes and GB/s, not 'lacks'."""
    launches = [(BF16, gemm(dur=TIMES[i % len(TIMES)], extra=[(CMD, "dram__bytes_read.sum", unit, text),
                                                               (CMD, "dram__bytes_write.sum", unit, str(i + 1))]))
                for i in range(3)]                       # writes differ per launch: the kernel's bytes are their sum
    p = _write(tmp_path, details(launches))
    cap = ncu.read(p)
    want: dict = {}
    for r in _parse(p.read_text()):
        if r[12].startswith("dram__bytes_"):
            want[int(r[0])] = want.get(int(r[0]), 0.0) + _num(r[14]) * ncu.unit_scale(r[13])[1]
    assert "dram_bytes" not in cap["missing"] and not any("dram_bytes" in w for w in cap["warnings"])
    assert [la["metrics"]["dram_bytes"] for la in cap["launches"]] == pytest.approx([want[i] for i in range(3)])
    r = analyze(load_trace(p))
    k = r["kernel_deep_dive"]["kernels"][0]
    dur_ns = sum(la["metrics"]["duration_ns"] for la in cap["launches"])
    assert not k["dram_bytes_estimated"] and k["dram_bytes"] == round(sum(want.values()))
    assert k["dram_gbps"] == pytest.approx(sum(want.values()) / dur_ns, rel=1e-3)
    assert not any("DRAM bytes are estimates" in w for w in r["warnings"])


def test_raw_page_dram_bytes_read_plus_write(tmp_path):
    """The real raw page with dram__bytes_read/write.sum columns added, in Mbyte and Kbyte."""
    rows = list(csv.reader(io.StringIO(gzip.decompress((DATA / "demo_hot10_raw.csv.gz").read_bytes()).decode())))
    rows[0] += ["dram__bytes_read.sum", "dram__bytes_write.sum"]
    rows[1] += ["Mbyte", "Kbyte"]
    for j, r in enumerate(rows[2:]):
        r += [f"{1.5 + j:.6f}", f"{250.25 * (j + 1):,.2f}"]
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    cap = ncu.read(_write(tmp_path, out.getvalue()))
    assert "dram_bytes" not in cap["missing"]
    for la, r in zip(cap["launches"], rows[2:]):
        assert la["metrics"]["dram_bytes"] == pytest.approx(_num(r[-2]) * 1e6 + _num(r[-1]) * 1e3)


def test_tensor_pipe_counters_make_a_tensor_core_kernel(tmp_path):
    """A bf16 tensorop GEMM at 83 % SM with the tensor pipe busy: compute-bound on Tensor Cores, never 'run it on
    Tensor Cores'; the tensor % is the busiest tensor sub-pipe; tensor ops (sparsity split counted once) are FLOPs."""
    m = 4096
    ops = 2 * m ** 3
    extra = [(CMD, "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed", "%", "78.50"),
             (CMD, "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_elapsed", "%", "61.02"),
             (CMD, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "%", "90.00"),
             (CMD, "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "", f"{ops:,}"),
             (CMD, "sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_off.sum", "", f"{ops:,}"),
             (CMD, "sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_on.sum", "", "0")]
    p = _write(tmp_path, details([(BF16, gemm(extra=extra))]))
    r = analyze(load_trace(p))
    k = r["kernel_deep_dive"]["kernels"][0]
    pct = {row[12]: _num(row[14]) for row in _parse(p.read_text()) if "pct_of_peak_sustained_elapsed" in row[12]}
    assert k["tensor_pct"] == pytest.approx(max(pct.values()))          # elapsed-based, busiest sub-pipe
    assert k["limiter"] == "compute" and k["limiter_text"].startswith("compute-bound on Tensor Cores") and k["tensor_core"]
    assert "Run it on Tensor Cores" not in k["lever"] and "TF32" not in k["lever"]
    dur_s = 250.40e-6
    assert k["achieved_tflops"]["tensor"] == pytest.approx(ops / dur_s / 1e12, rel=1e-5)
    assert k["measured_mfu_pct"] == pytest.approx(max(pct.values()))
    text = json.dumps(r)
    assert "Run it on Tensor Cores" not in text and "FP32 pipes" not in text


def test_tensor_ops_without_pipe_pct_and_the_fp32_cases(tmp_path):
    ops_only = [(CMD, "sm__ops_path_tensor_src_fp16_dst_fp16.sum", "", "1,000,000,000")]
    idle = [(CMD, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", "%", "0.00")]
    p = _write(tmp_path, details([(BF16, gemm(sm="85.00", extra=ops_only)), (SIMT, gemm(sm="91.00", extra=idle)),
                                  ("void other_kernel<float>(float*)", gemm(sm="88.00"))]))
    ks = {k["name"]: k for k in analyze(load_trace(p))["kernel_deep_dive"]["kernels"]}
    a, b, c = ks[BF16], ks[SIMT], ks["void other_kernel<float>(float*)"]
    assert a["tensor_core"] and a["tensor_pct"] is None and "tensor math ops counted" in a["limiter_text"]
    assert a["achieved_tflops"]["tensor"] == pytest.approx(1e9 / 250.40e-6 / 1e12)
    assert b["tensor_core"] is False and "FP32 pipes" in b["limiter_text"] and "Run it on Tensor Cores" in b["lever"]
    assert c["tensor_core"] is None and "tensor pipe not captured" in c["limiter_text"]
    assert not c["lever"].startswith("Run it on Tensor Cores")


def test_raw_page_tensor_pct_is_the_busiest_tensor_pipe(tmp_path):
    """The real raw page's tensor-pipe columns (H100: cycles active per sub-pipe) planted with distinct values."""
    rows = list(csv.reader(io.StringIO(gzip.decompress((DATA / "demo_hot10_raw.csv.gz").read_bytes()).decode())))
    h = rows[0]
    cols = [i for i, n in enumerate(h) if n.startswith(("sm__pipe_tensor", "sm__inst_executed_pipe_tensor"))
            and n.endswith(("avg.pct_of_peak_sustained_elapsed", "sum.pct_of_peak_sustained_elapsed"))]
    assert len(cols) >= 3
    for j, r in enumerate(rows[2:]):
        for c, i in enumerate(cols):
            r[i] = f"{(7 * j + 3 * c) % 23 + 0.5:.6f}"
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    for la, r in zip(ncu.read(_write(tmp_path, out.getvalue()))["launches"], rows[2:]):
        assert la["metrics"]["tensor_pct"] == pytest.approx(max(_num(r[i]) for i in cols))


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "inferscope", *map(str, args)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=SRC), timeout=300)


def test_file_cut_mid_row_says_so(tmp_path):
    launches = [(BF16, gemm()), (SIMT, gemm(sm="20.0")), (BF16, gemm(sm="81.0"))]
    text = details(launches)
    lines = text.splitlines(keepends=True)
    last_start = len(text) - len(lines[-1])
    for cut in (last_start + 3, last_start + len(lines[-1]) // 2, len(text) - 2,
                len(text) - len(lines[-1]) - len(lines[-2]) // 2):
        p = _write(tmp_path, text[:cut])
        keep = text[:cut].splitlines()[:-1]               # the complete rows before the cut
        last = next(csv.reader([keep[-1]]))
        cap = ncu.read(p)
        msg = next(w for w in cap["warnings"] if "ends mid-row" in w)
        assert f"launch ID {last[0]} ({last[4][:80]})" in msg
        assert not any("add --section" in w for w in cap["warnings"])     # not blamed on the capture
        full = {la["id"]: len([r for r in _parse(text) if r[0] == str(la["id"])]) for la in ncu.read(_write(
            tmp_path, text, "full.csv"))["launches"]}
        got = {int(r[0]) for r in _parse("\n".join(keep))}
        for la in cap["launches"]:                        # a launch kept is complete, or the only one
            assert len([r for r in _parse("\n".join(keep)) if r[0] == str(la["id"])]) == full[la["id"]] or len(got) == 1
    r = _cli("analyze", p, "-o", tmp_path / "o", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert any("ends mid-row" in w for w in json.loads((tmp_path / "o" / "report.json").read_text())["warnings"])
    p = _write(tmp_path, text[:len(lines[0]) + 40])       # cut inside the first data row: nothing usable
    with pytest.raises(InferScopeError, match="ends mid-row before any complete launch"):
        ncu.read(p)
    r = _cli("analyze", p, "-o", tmp_path / "o2")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_raw_page_cut_mid_row(tmp_path):
    text = gzip.decompress((DATA / "demo_hot10_raw.csv.gz").read_bytes()).decode()
    lines = text.splitlines(keepends=True)
    p = _write(tmp_path, text[:len(text) - len(lines[-1]) // 3])
    prev = next(csv.reader([lines[-2]]))
    cap = ncu.read(p)
    assert len(cap["launches"]) == len(lines) - 3 and cap["launches"][-1]["id"] == int(prev[0])
    assert any(f"launch ID {prev[0]} ({prev[4][:80]})" in w for w in cap["warnings"])


def test_failed_export_quotes_ncu_errors(tmp_path):
    err = ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters "
           "on the target device 0.")
    p = _write(tmp_path, "==PROF== Connected to process 31337 (/usr/bin/python3.12)\n" + err + "\n"
               "==PROF== Disconnected from process 31337\n==WARNING== No kernels were profiled.\n")
    assert detect_format(p) == "ncu"
    r = _cli("analyze", p, "-o", tmp_path / "o")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert err in r.stderr and "not a recognised trace" not in r.stderr
    w = _write(tmp_path, "==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n", "w.csv")
    with pytest.raises(InferScopeError, match="No kernels were profiled"):
        load_trace(w)


@pytest.mark.parametrize("path", ["planted", DATA / "demo_hot10_details.csv.gz"])
def test_capture_alone_headline(tmp_path, path):
    if path == "planted":
        path = _write(tmp_path, details([(BF16, gemm()), (SIMT, gemm(sm="20.0"))]))
    r = _cli("analyze", path, "-o", tmp_path / "o", "--format", "json,md,html")
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    ks = rep["kernel_deep_dive"]["kernels"]
    out = r.stdout
    assert "End-to-end latency" not in out and "KV cache" not in out and "torch.cat" not in out
    assert f"{len(ks)} kernel(s) profiled" in out
    assert f"Top kernel: {ks[0]['short_name']}" in out and ks[0]["limiter_text"] in out
    assert rep["verdict"]["id"] == "kernel_profile"
    assert {f["id"] for f in rep["findings"]} <= {"kernel_limiter"}
    for f in rep["findings"]:                                     # every finding of the capture is in the summary
        assert f["title"] in out
    md = (tmp_path / "o" / "report.md").read_text()
    assert "End-to-end latency" not in md
    html = (tmp_path / "o" / "report.html").read_text()
    assert 'id="kernels-profiled"' in html and 'id="e2e"' not in html


def test_clock_attributes_in_khz_or_with_a_unit(tmp_path):
    """device__attribute_clock_rate: kHz when printed without a unit (the real raw page), else its unit's Hz."""
    base = gemm()
    p = _write(tmp_path, details([(BF16, base + [(CMD, "device__attribute_clock_rate", "", "1,980,000")]),
                                  (SIMT, base + [(CMD, "device__attribute_clock_rate", "Mhz", "1,980")])]))
    got = [la["metrics"]["sm_clock_attr_hz"] for la in ncu.read(p)["launches"]]
    assert got == pytest.approx([1_980_000 * 1e3, 1_980 * 1e6])
