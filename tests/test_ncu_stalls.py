"""Nsight Compute warp stall reasons (WarpStateStats / SourceCounters) in the kernel deep-dive and the
kernel_limiter finding.  Inputs are planted in ncu's CSV layout (details page with raw metric names, the real raw
page with columns added); every share is recomputed here from the CSV text."""
from __future__ import annotations

import csv
import gzip
import io

import pytest

from inferscope import thresholds as T
from inferscope.analyze.pipeline import analyze
from inferscope.ingest import load_trace, ncu
from test_ncu_capture import CMD, DATA, SIMT, _num, _parse, _write, details, gemm

RATIO = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
PCSAMP = "smsp__pcsamp_warps_issue_stalled_{}"


def _shares_from_text(rows, name_fmt: str) -> dict[int, dict[str, float]]:
    """Per launch ID: each state's % of the sum over every state of the family (``selected`` included)."""
    pre, suf = name_fmt.split("{}")
    per: dict[int, dict[str, float]] = {}
    for r in rows:
        n = r[12]
        if n.startswith(pre) and n.endswith(suf) and not n[len(pre):len(n) - len(suf)].endswith("_not_issued"):
            per.setdefault(int(r[0]), {})[n[len(pre):len(n) - len(suf)]] = _num(r[14])
    return {i: {k: 100 * v / sum(d.values()) for k, v in d.items()} for i, d in per.items()}


def _durations(rows) -> dict[int, float]:
    return {int(r[0]): _num(r[14]) for r in rows if r[12] == "Duration"}


def _stall_rows(values: dict[str, str], fmt=RATIO):
    return [(CMD, fmt.format(k), "", v) for k, v in values.items()]


LAUNCH_A = {"long_scoreboard": "14.20", "wait": "3.10", "selected": "1.00", "not_selected": "0.40",
            "math_pipe_throttle": "2.25", "barrier": "0.05", "short_scoreboard": "1.80"}
LAUNCH_B = {"long_scoreboard": "6.00", "wait": "4.00", "selected": "1.00", "math_pipe_throttle": "5.50",
            "short_scoreboard": "0.20"}


def test_details_page_stall_shares_are_duration_weighted_and_cited(tmp_path):
    # two launches of one latency-bound kernel (SM 30 %, DRAM 12 %), durations 250.4 us and 100 us; SourceCounters
    # samples (another family, and a *_not_issued subset) are present too: the WarpStateStats ratios win
    noise = _stall_rows({"long_scoreboard": "999", "long_scoreboard_not_issued": "5"}, PCSAMP)
    launches = [(SIMT, gemm(sm="30.00", extra=_stall_rows(LAUNCH_A) + noise)),
                (SIMT, gemm(sm="30.00", dur=("usecond", "100.00"), extra=_stall_rows(LAUNCH_B) + noise))]
    p = _write(tmp_path, details(launches))
    rows = _parse(p.read_text())
    shares, dur = _shares_from_text(rows, RATIO), _durations(rows)
    w = {i: dur[i] for i in shares}
    want = {r: sum(shares[i].get(r, 0.0) * w[i] for i in shares) / sum(w.values())
            for r in set(shares[0]) | set(shares[1])}
    listed = sorted((r for r in want if r != "selected" and want[r] >= T.KERNEL_STALL_MIN_SHARE_PCT),
                    key=lambda r: -want[r])[:3]
    cap = ncu.read(p)
    assert cap["launches"][0]["stalls"] == {k: float(v) for k, v in LAUNCH_A.items()}
    assert cap["launches"][0]["stall_basis"].startswith("warp cycles per issued instruction")
    res = analyze(load_trace(p))
    k = res["kernel_deep_dive"]["kernels"][0]
    assert [s["reason"] for s in k["stall_reasons"]] == listed
    assert listed[0] == "long_scoreboard" and "barrier" not in listed       # 0.2 % stays under the floor
    for s in k["stall_reasons"]:
        assert s["share_pct"] == pytest.approx(want[s["reason"]], abs=0.006)
    assert "memory dependency" in k["stall_reasons"][0]["meaning"]
    # the deep-dive table and the finding's evidence
    t = res["tables"]["kernel_deep_dive"]
    cell = t["rows"][0][t["columns"].index("stalls")]
    assert cell.startswith(f"long_scoreboard (memory dependency") and f"{want['long_scoreboard']:.0f}%" in cell
    f = next(x for x in res["findings"] if x["id"] == "kernel_limiter")
    ev = f["evidence"]
    assert ev["top_stall_reason"] == "long_scoreboard"
    assert ev["top_stall_share_pct"] == pytest.approx(want["long_scoreboard"], abs=0.01)
    assert f["evidence_source"]["top_stall_share_pct"] == "kernel_deep_dive.kernels[0].stall_reasons[0].share_pct"
    line = next(x for x in f["evidence_text"] if "stalled mostly" in x)
    assert line.startswith("Warps stalled mostly on long_scoreboard (memory dependency")


def test_raw_page_sampled_stall_columns(tmp_path):
    """The real raw page with SourceCounters sample columns added (a different mix per launch)."""
    rows = list(csv.reader(io.StringIO(gzip.decompress((DATA / "demo_hot10_raw.csv.gz").read_bytes()).decode())))
    reasons = ["long_scoreboard", "wait", "selected", "lg_throttle", "no_instruction"]
    rows[0] += [PCSAMP.format(r) for r in reasons] + [PCSAMP.format("wait_not_issued")]
    rows[1] += [""] * (len(reasons) + 1)
    for j, r in enumerate(rows[2:]):
        r += [f"{(11 * j + 7 * c) % 40 + 1:,}" for c in range(len(reasons))] + ["1,000,000"]
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    p = _write(tmp_path, out.getvalue())
    cap = ncu.read(p)
    n = len(reasons)
    for la, r in zip(cap["launches"], rows[2:]):
        vals = [_num(x) for x in r[-n - 1:-1]]
        assert la["stalls"] == dict(zip(reasons, vals)) and la["stall_basis"] == "PC samples (SourceCounters)"
    ks = {k["ncu_ids"][0]: k for k in analyze(load_trace(p))["kernel_deep_dive"]["kernels"]}
    for la, r in zip(cap["launches"], rows[2:]):
        vals = dict(zip(reasons, (_num(x) for x in r[-n - 1:-1])))
        tot = sum(vals.values())
        want = sorted(((x, 100 * v / tot) for x, v in vals.items() if x != "selected" and 100 * v / tot >= 5),
                      key=lambda kv: (-kv[1], kv[0]))[:3]
        got = ks[la["id"]]["stall_reasons"]
        assert [g["reason"] for g in got] == [x for x, _ in want]
        assert [g["share_pct"] for g in got] == pytest.approx([v for _, v in want], abs=0.006)


def test_without_stall_metrics_nothing_is_claimed(tmp_path):
    p = _write(tmp_path, details([(SIMT, gemm(sm="30.00"))]))
    res = analyze(load_trace(p))
    k = res["kernel_deep_dive"]["kernels"][0]
    assert k["stall_reasons"] == [] and k["stall_basis"] is None
    t = res["tables"]["kernel_deep_dive"]
    assert t["rows"][0][t["columns"].index("stalls")] == ""
    f = next(x for x in res["findings"] if x["id"] == "kernel_limiter")
    assert "top_stall_reason" not in f["evidence"] and not any("stalled" in x for x in f["evidence_text"])


def test_percent_of_active_warps_family(tmp_path):
    pct = "smsp__warp_issue_stalled_{}_per_warp_active.pct"
    vals = {"long_scoreboard": "20.0", "mio_throttle": "50.0", "selected": "10.0", "wait": "20.0"}
    p = _write(tmp_path, details([(SIMT, gemm(sm="30.00", extra=[(CMD, pct.format(k), "%", v) for k, v in vals.items()]))]))
    k = analyze(load_trace(p))["kernel_deep_dive"]["kernels"][0]
    assert [(s["reason"], s["share_pct"]) for s in k["stall_reasons"]] == [("mio_throttle", 50.0), ("long_scoreboard", 20.0),
                                                                          ("wait", 20.0)]
    assert k["stall_basis"].startswith("% of active warps")
