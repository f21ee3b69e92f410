"""Measured (ncu) vs shape-based efficiency on the shared H100 Qwen trace joined with captures built here
from the real raw page (tests/data/ncu), and the HTML roofline chart.  Every measured figure is recounted
from the CSV text; every estimate from the report's own efficiency section (by_op rows, peaks)."""
from __future__ import annotations

import csv
import gzip
import io
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from inferscope import thresholds as T
from inferscope.analyze.kernel_limits import join_key
from inferscope.ingest import load_trace, ncu
from inferscope.result import from_dict

from conftest import shared_path

RAW = Path(__file__).parent / "data" / "ncu" / "demo_hot10_raw.csv.gz"
QWEN = ("kineto", "tracelens_h100_qwen1.5-0.5b-chat_textgen.json.gz")
FLOP_COLS = ["dram__bytes.sum"] + [f"sm__sass_thread_inst_executed_op_f{o}_pred_on.sum" for o in ("add", "mul", "fma")]


def _rows() -> list[list[str]]:
    return list(csv.reader(io.StringIO(gzip.decompress(RAW.read_bytes()).decode())))


def _write(path: Path, rows: list[list[str]]) -> Path:
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    path.write_text(out.getvalue())
    return path


def _num(s: str) -> float | None:
    s = s.replace(",", "").strip()
    return float(s) if s else None


@pytest.fixture(scope="module")
def qwen():
    from inferscope.analyze.pipeline import analyze
    trace = shared_path(*QWEN)
    return trace, analyze(load_trace(trace))


def _joined(trace_path, capture: Path):
    from inferscope.analyze.pipeline import analyze
    tr = load_trace(trace_path)
    tr.meta["ncu"] = dict(ncu.read(capture), joined=True)         # what `analyze --ncu` does (cli.py)
    return tr, analyze(tr)


def _capture_of_top(tmp_path, base, flash_repeat: bool) -> tuple[Path, list[str], dict]:
    """The raw page's launches renamed to the trace's 5 hottest kernels (+ one unknown name); with
    flash_repeat, the flash kernel's launch repeated as often as the trace launches it (order pairing)."""
    rows = _rows()
    h, units, data = rows[0], rows[1], rows[2:]
    col, idc = h.index("Kernel Name"), h.index("ID")
    top = base["kernels"]["top"][:5]
    names = [t["name"] for t in top] + ["not_in_the_trace_kernel"]
    out = []
    for r, n in zip(data, names):
        out.append(list(r))
        out[-1][col] = n
    flash = next(t for t in top if "flash_fwd" in t["name"])
    if flash_repeat:
        src = next(r for r in out if r[col] == flash["name"])
        for j in range(flash["calls"] - 1):
            r = list(src)
            r[idc] = str(1000 + 3 * j)                       # IDs far from the others: no launch offset can fit
            out.append(r)
    return _write(tmp_path / "k.csv", [h, units] + out), names, flash


def _measured_from_csv(path: Path) -> dict:
    """Per kernel name: (duration-weighted) DRAM %, and the busiest of tensor / FMA pipe %, read from the CSV."""
    rows = list(csv.reader(io.StringIO(path.read_text())))
    h, data = rows[0], rows[2:]
    c = {n: i for i, n in enumerate(h)}
    acc: dict = {}
    for r in data:
        d = _num(r[c["gpu__time_duration.sum"]])
        a = acc.setdefault(r[c["Kernel Name"]], [0.0, 0.0, 0.0, 0.0])
        a[0] += d
        a[1] += d * _num(r[c["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"]])
        a[2] += d * _num(r[c["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"]])
        a[3] += d * _num(r[c["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed"]])
    return {n: {"mbu": a[1] / a[0], "mfu": max(a[2], a[3]) / a[0]} for n, a in acc.items()}


def test_measured_vs_estimated_on_the_joined_qwen_trace(tmp_path, qwen):
    trace_path, base = qwen
    cap, names, flash = _capture_of_top(tmp_path, base, flash_repeat=True)
    _, r = _joined(trace_path, cap)
    dd = r["kernel_deep_dive"]
    eff = r["efficiency"]
    mve = dd["measured_vs_estimated"]
    want = _measured_from_csv(cap)
    by = {k["name"]: k for k in dd["kernels"]}
    # the limiter per kernel is there, with the measured figures recounted from the CSV
    for n in names:
        k = by[n]
        assert k["limiter_text"]
        assert k["measured_mbu_pct"] == pytest.approx(want[n]["mbu"], abs=6e-5)  # rounded to 4 decimals
        assert k["measured_mfu_pct"] == pytest.approx(want[n]["mfu"], abs=6e-5)
        assert "pipe busy" in k["measured_mfu_basis"]
    # shape-based estimates against the report's efficiency figures: the flash kernel is the only kernel its
    # SDPA ops launch, the bf16 GEMM the only kernel of mm/addmm in this trace
    ops = {o["op"]: o for o in eff["by_op"]}
    fk = by[flash["name"]]
    sdpa = ops["aten::scaled_dot_product_attention"]
    assert fk["est_ops"] == ["aten::scaled_dot_product_attention"]
    assert fk["pairing"].startswith("launch order within the name") and fk["launches"] == flash["calls"]
    assert fk["est_gpu_ms"] == pytest.approx(sdpa["kernel_ms"], abs=1e-5)
    assert fk["est_flops"] == pytest.approx(sdpa["gflops"] * 1e9, rel=1e-9)
    assert fk["est_tflops"] == pytest.approx(sdpa["achieved_tflops"], rel=1e-3)
    assert fk["est_mfu_pct"] == pytest.approx(100 * sdpa["achieved_tflops"] / eff["peak_tflops"], rel=1e-3)
    assert fk["est_mbu_pct"] == pytest.approx(100 * sdpa["achieved_gbps"] / eff["peak_gbps"], rel=1e-3)
    gk = by[base["kernels"]["top"][0]["name"]]
    assert "gemm" in gk["name"] and gk["est_ops"] == ["aten::addmm", "aten::mm"] and gk["pairing"].startswith("name only")
    mm = [ops["aten::mm"], ops["aten::addmm"]]
    gms, gfl = sum(o["kernel_ms"] for o in mm), sum(o["gflops"] for o in mm) * 1e9
    assert gk["est_gpu_ms"] == pytest.approx(gms, abs=1e-5) and gk["est_flops"] == pytest.approx(gfl, rel=1e-9)
    assert gk["est_mfu_pct"] == pytest.approx(100 * gfl / (gms / 1e3) / 1e12 / eff["peak_tflops"], rel=1e-3)
    # kernels no counted op launched: said, not estimated
    ew = by[names[1]]
    assert ew["est_mfu_pct"] is None and ew["est_basis"].startswith("n/a")
    assert by["not_in_the_trace_kernel"]["est_basis"].startswith("n/a") and by["not_in_the_trace_kernel"]["trace_calls"] == 0
    # GPU-time-weighted over the matched kernels, recounted here
    matched = [by[n] for n in names[:5]]
    assert mve["matched_kernels"] == 5
    assert mve["matched_gpu_ms"] == pytest.approx(sum(t["sum_ms"] for t in base["kernels"]["top"][:5]), rel=1e-6)
    w = np.array([k["trace_sum_ms"] for k in matched])
    for what in ("mfu", "mbu"):
        m = np.array([want[k["name"]][what] for k in matched])
        assert mve[what]["measured_pct"] == pytest.approx(float((m * w).sum() / w.sum()), abs=2e-4)
        est = [(k[f"est_{what}_pct"], k["trace_sum_ms"]) for k in matched if k[f"est_{what}_pct"] is not None]
        assert len(est) == 2 and mve[what]["both_kernels"] == 2
        assert mve[what]["est_pct"] == pytest.approx(sum(v * t for v, t in est) / sum(t for _, t in est), rel=1e-4)
    assert mve["peak_tflops"] == eff["peak_tflops"] and mve["peak_gbps"] == eff["peak_gbps"]
    assert mve["window_mfu_pct"] == pytest.approx(eff["mfu_pct"], rel=1e-9)
    # disagreement: by the threshold, recomputed here (these are demo kernels renamed: far apart)
    for k in matched:
        for what in ("MFU", "MBU"):
            m, e = k[f"measured_{what.lower()}_pct"], k[f"est_{what.lower()}_pct"]
            far = (e is not None and max(m, e) >= T.KERNEL_MEASURED_VS_EST_MIN_PCT
                   and max(m, e) / max(min(m, e), 1e-9) >= T.KERNEL_MEASURED_VS_EST_RATIO)
            assert far == any(d.startswith(what) for d in k["disagreement"])
    assert mve["mfu"]["disagreement"] and len(mve["disagreements"]) == 4
    # launch IDs: the file's IDs (2..) with gaps; no offset fits the renamed names
    lr = dd["launch_range"]
    ids = sorted(la["id"] for la in ncu.read(cap)["launches"])
    assert lr["first_id"] == ids[0] and lr["launch_count_min"] == ids[-1] + 1 and not lr["contiguous"]
    assert lr["launch_skip_in_trace"] is None and "not inferable" in lr["text"]


def test_launch_skip_inferred_and_launches_paired(tmp_path, qwen):
    """A capture of 8 consecutive trace kernels (IDs 0..7): the offset is found and stated."""
    trace_path, _ = qwen
    from inferscope.analyze.pipeline import analyze
    from inferscope.trace.kinds import SpanKind
    tr = load_trace(trace_path)
    win = analyze(tr)["window"]
    s = tr.spans
    m = (s.kind == SpanKind.KERNEL) & (s.end_ns > win["start_ns"]) & (s.start_ns < win["end_ns"])
    idx = np.flatnonzero(m)
    idx = idx[np.argsort(s.start_ns[idx], kind="stable")]             # one stream: start order = launch order
    keys = [join_key(tr.strings[int(n)]) for n in s.name[idx]]
    skip = next(o for o in range(200, len(keys) - 8)
                if sum(keys[p:p + 8] == keys[o:o + 8] for p in range(len(keys) - 8)) == 1 and "gemm" in keys[o])
    rows = _rows()
    h, units, data = rows[0], rows[1], rows[2:]
    col, idc = h.index("Kernel Name"), h.index("ID")
    for i, r in enumerate(data):
        r[col], r[idc] = tr.strings[int(s.name[idx[skip + i]])], str(i)
    _, r = _joined(trace_path, _write(tmp_path / "seq.csv", [h, units] + data))
    dd = r["kernel_deep_dive"]
    lr = dd["launch_range"]
    assert lr["launch_skip_in_trace"] == skip and lr["contiguous"] and lr["launch_count_min"] == 8
    assert f"--launch-skip {skip}" in lr["text"]
    g = next(k for k in dd["kernels"] if "gemm" in k["name"])
    assert g["pairing"].startswith("launch offset") and 1 <= g["est_launches"] <= g["launches"]
    # the estimate is over exactly the paired launches' GPU time
    paired = [int(idx[skip + i]) for i in range(8) if join_key(tr.strings[int(s.name[idx[skip + i]])]) == join_key(g["name"])]
    assert g["est_gpu_ms"] == pytest.approx(float((s.end_ns[paired] - s.start_ns[paired]).sum()) / 1e6, abs=1e-6)


# ------------------------------------------------------------------------------------------- HTML roofline

HOSTILE = '<script>alert("x")</script> & ]]> kernel<int>'


def _svg(html: str, sid: str):
    m = re.search(rf'<svg id="{sid}".*?</svg>', html, re.S)
    return None if m is None else ET.fromstring(m.group(0))


def _marks(el, cls: str) -> list:
    return [x for x in el.iter() if cls in (x.get("class") or "").split()]


def test_roofline_points_from_flop_counters(tmp_path):
    """3 launches with FLOP counters and DRAM bytes (points), 4 with DRAM % only (bars), 1 with neither."""
    from inferscope.analyze.pipeline import analyze
    from inferscope.report.html import build_html
    rows = _rows()
    h, units, data = rows[0], rows[1], rows[2:]
    dram = h.index("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed")
    col = h.index("Kernel Name")
    h, units = h + FLOP_COLS, units + ["byte", "inst", "inst", "inst"]
    for i, r in enumerate(data):
        r += ([str(1_000_000 * (i + 1)), "1000", "2000", str(10 ** (5 + i))] if i < 3 else ["", "", "", ""])
    data[0][col] = HOSTILE
    data[7][dram] = ""
    p = _write(tmp_path / "flops.csv", [h, units] + data)
    res = analyze(load_trace(p))
    dd = res["kernel_deep_dive"]
    k0 = next(k for k in dd["kernels"] if k["name"] == HOSTILE)
    dur = _num(rows[2][h.index("gpu__time_duration.sum")]) * 1e-6                # us -> s
    assert k0["achieved_tflops"]["fp32"] == pytest.approx((1000 + 2000 + 2 * 1e5) / dur / 1e12, abs=1e-6)
    assert k0["intensity_flop_per_byte"] == pytest.approx((1000 + 2000 + 2e5) / 1e6, rel=1e-4)
    assert k0["measured_mfu_pct"] is not None
    page = build_html(from_dict(res), None)
    pts = _svg(page, "roofline-chart")
    assert pts is not None and len(_marks(pts, "rf-pt")) == 3
    titles = [t.text for c in _marks(pts, "rf-pt") for t in c if t.tag.endswith("title")]
    assert any(t.startswith(HOSTILE) for t in titles)                    # parsed back = the name, escaped in the file
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page
    rs = [float(c.get("r")) for c in _marks(pts, "rf-pt")]
    shares = [k["share_pct"] for k in dd["kernels"] if k["achieved_tflops"]]
    assert sorted(rs) == pytest.approx(sorted(max(2.5, 22 * (s / 100) ** 0.5) for s in shares), abs=0.06)
    assert len(_marks(pts, "rf-roof")) == 2                                # FP32 and the datasheet tensor roof
    bars = _svg(page, "roofline-bw-chart")
    assert bars is not None and len(_marks(bars, "rf-bar")) == 4
    assert "1 kernel(s) with neither FLOP counters nor DRAM bytes" in page


def test_roofline_on_the_joined_qwen_report_is_bandwidth_only(tmp_path, qwen):
    """The default sections have no FLOP counters: bars against the DRAM roof, a note, no invented points."""
    from inferscope.report.html import build_html
    trace_path, base = qwen
    cap, names, _ = _capture_of_top(tmp_path, base, flash_repeat=False)
    tr, r = _joined(trace_path, cap)
    from helpers import as_report
    rep = as_report(r, tr, ["html"])
    page = build_html(rep, rep.views)
    assert _svg(page, "roofline-chart") is None
    bars = _svg(page, "roofline-bw-chart")
    dd = r["kernel_deep_dive"]
    assert len(_marks(bars, "rf-bar")) == sum(1 for k in dd["kernels"] if (k["dram_gbps"] or 0) > 0) == len(names)
    assert "no kernel has both FLOP counters and DRAM bytes" in page
    assert "Measured vs estimated MFU" in page and "kernel_measured_vs_estimated" in page


def test_launch_range_words():
    from inferscope.analyze.kernel_efficiency import MAX_AMBIGUOUS_STEPS, launch_range
    three = {"launches": [{"id": i} for i in range(3)]}
    u = launch_range(three, list("xxabcab"), list("abc"))
    assert u["launch_skip_in_trace"] == 2 and u["offsets_fitting"] == 1 and "--launch-skip 2" in u["text"]
    assert launch_range(three, list("abcabc"), list("abc"))["offsets_fitting"] == 2        # ambiguous: not stated
    assert launch_range(three, list("abab"), list("abc"))["launch_skip_in_trace"] is None
    many = {"launches": [{"id": i} for i in range(2 * MAX_AMBIGUOUS_STEPS)]}               # one repeated kernel: bounded
    r = launch_range(many, ["k"] * 10 * MAX_AMBIGUOUS_STEPS, ["k"] * 2 * MAX_AMBIGUOUS_STEPS)
    assert r["launch_skip_in_trace"] is None and "ambiguous, over its first" in r["text"]
    sub = launch_range({"launches": [{"id": 2}, {"id": 9}]}, None, ["a", "b"])
    assert sub["launch_count_min"] == 10 and not sub["contiguous"] and "subset" in sub["text"]


def test_details_page_says_what_it_lacks():
    """The details page has no tensor/FMA pipe or FLOP counters: the MFU-like figure is n/a, said why."""
    from inferscope.analyze.pipeline import analyze
    dd = analyze(load_trace(RAW.parent / "demo_hot10_details.csv.gz"))["kernel_deep_dive"]
    assert dd["measured_vs_estimated"] is None                                  # no timeline joined
    for k in dd["kernels"]:
        assert k["measured_mfu_pct"] is None and k["measured_mfu_basis"].startswith("n/a: capture lacks")
        assert k["measured_mbu_pct"] == k["dram_pct"] is not None and k["est_basis"] == "n/a: no timeline joined"
