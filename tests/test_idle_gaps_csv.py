"""tables/gpu_idle_gaps.csv holds every device-wide GPU idle gap in the window (issue 46), report.json /
report.md the largest: checked against an independent recount from the raw Kineto JSON (GPU activity
intervals read with exact decimal timestamps, merged per device, the gaps between them)."""
from __future__ import annotations

import csv
import gzip
import json
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal

import pytest

from inferscope.cli import main
from inferscope.report import csv_tables

from conftest import shared_path

GPU_CATS = {"kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset"}


def _recount(path, lo: int, hi: int) -> dict[int, list[tuple[int, int]]]:
    """{device: [(start_ns, end_ns) of each gap]}: GPU activities clipped to [lo, hi), merged, and the gaps
    between the first and last of them."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    busy: dict[int, list[tuple[int, int]]] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") not in GPU_CATS:
            continue
        s = int((Decimal(e["ts"]) * 1000).to_integral_value(ROUND_HALF_UP))
        d = int((Decimal(e.get("dur", 0)) * 1000).to_integral_value(ROUND_HALF_EVEN))
        s, t = max(s, lo), min(s + max(d, 0), hi)
        if t > s:
            busy.setdefault(int((e.get("args") or {}).get("device", e["pid"])), []).append((s, t))
    out = {}
    for dev, iv in busy.items():
        iv.sort()
        gaps, end = [], iv[0][1]
        for s, t in iv[1:]:
            if s > end:
                gaps.append((end, s))
            end = max(end, t)
        out[dev] = gaps
    return out


CASES = [("kineto", "tracelens_h100_qwen1.5-0.5b-chat_textgen.json.gz"),     # ~1,700 gaps (shared only)
         ("kineto", "hta_critical_path_alexnet_a100.json.gz"),                 # vendored: runs on a fresh clone
         ("kineto", "tracelens_mi300x_vllm_decode_graph_execution.json.gz")]


@pytest.mark.shared
@pytest.mark.parametrize("parts", CASES, ids=lambda p: p[1].split(".")[0])
@pytest.mark.parametrize("window", [None, "trace"])
def test_csv_holds_every_gap(parts, window, tmp_path, monkeypatch):
    path = shared_path(*parts)
    monkeypatch.setattr(csv_tables, "_CHUNK_ROWS", 97)      # several chunks on every trace here
    out = tmp_path / "o"
    assert main(["analyze", str(path), "-o", str(out), "--format", "json,csv,md", "-q"]
                + (["--window", window] if window else [])) == 0
    rep = json.loads((out / "report.json").read_text())
    w = rep["window"]
    truth = _recount(path, w["start_ns"], w["end_ns"])
    assert len(truth) == 1, "one device: device-wide gaps = the device's gaps"
    gaps = sorted(next(iter(truth.values())))
    with open(out / "tables" / "gpu_idle_gaps.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == csv_tables.IDLE_GAP_COLUMNS
    got = [(int(r["start_ns"]), int(r["end_ns"])) for r in rows]
    assert sorted(got) == gaps                                       # every gap, each once
    assert sum(e - s for s, e in got) == sum(e - s for s, e in gaps)  # the total, to the ns
    assert len(gaps) > 10 or window is None                          # more than the old top-10 table held
    assert sum(float(r["ms"]) for r in rows) == pytest.approx(sum(e - s for s, e in gaps) / 1e6, abs=1e-6 * len(rows))
    # longest first; the offsets are from the window's start
    lens = [e - s for s, e in got]
    assert lens == sorted(lens, reverse=True)
    assert all(float(r["offset_ms"]) == pytest.approx((int(r["start_ns"]) - w["start_ns"]) / 1e6, abs=1e-6) for r in rows)
    # report.json: the count and total of the same gaps; its table the largest ones, the same rows as the CSV's first
    ig = rep["idle_gaps"]
    assert ig["device_gaps"] == len(gaps)
    assert ig["device_gap_ms"] == pytest.approx(sum(e - s for s, e in gaps) / 1e6, abs=1e-9)
    table = rep["tables"]["gpu_idle_gaps"]
    n_top = len(table["rows"])
    assert n_top == min(10, len(gaps)) and table["columns"] == csv_tables.IDLE_GAP_COLUMNS[:4]
    for jr, cr in zip(table["rows"], rows):
        assert [jr[0], jr[1]] == [float(cr["offset_ms"]), float(cr["ms"])]
        assert ((jr[2] or ""), str(jr[3] if jr[3] is not None else "")) == (cr["host_activity"], cr["host_overlap_pct"])
    assert all(r["host_activity"] == "" for r in rows[n_top:])
    # report.md shows the largest only
    md = (out / "report.md").read_text().split("## Largest GPU idle gaps", 1)
    if n_top:
        section = md[1].split("\n## ", 1)[0]
        assert sum(ln.startswith("| ") for ln in section.splitlines()) == 1 + n_top     # header + the largest
