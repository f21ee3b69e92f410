"""Nsight Systems timestamp-unit sanity check (seed 004, issue 46): an export whose timestamps are not ns gets one
warning line in the report naming what looked wrong; real exports and ns-scaled synthetic ones get none."""
from __future__ import annotations

import statistics

import pytest

import inferscope
from inferscope import thresholds as T

from conftest import nsys_params
from nsys_factory import NsysExport

PID = 1000
UNIT = "may not be nanoseconds"


def _export(path, scale, span_s: float, kernel_us=(2, 3, 5, 8, 12, 20, 40, 4, 6, 9)):
    """A decode-like run in true ns, its timestamps then multiplied by ``scale`` (1e-3: written in us;
    1e3: in ps): kernels of ``kernel_us`` launched in a loop, the last ``span_s`` seconds after the first."""
    e = NsysExport("3.24")
    e.process(PID, "python")
    e.thread(PID, PID, "MainThread")
    e.gpu(0)
    t = 1_000_000
    events = []
    for i, k in enumerate(kernel_us):
        events.append(("rt", t, t + 4_000, i + 1))
        events.append(("k", t + 10_000, t + 10_000 + k * 1000, i + 1))
        t += 60_000
    last = int(span_s * 1e9)
    events.append(("rt", last - 20_000, last - 16_000, 99))
    events.append(("k", last - 10_000, last - 5_000, 99))
    for kind, a, b, corr in events:
        a, b = int(a * scale), int(b * scale)
        if kind == "rt":
            e.runtime(PID, PID, a, b, "cudaLaunchKernel_v7000", corr)
        else:
            e.kernel(PID, a, b, f"kernel_{corr}(float*)", corr)
    e.nvtx(PID, PID, int(500_000 * scale), int((last + 1_000) * scale), "generate")
    e.duration = int((last + 2_000_000) * scale)
    return e.write(path)


def _unit_warnings(path) -> list[str]:
    return [w for w in inferscope.analyze(str(path)).to_dict()["warnings"] if UNIT in w]


def test_ns_export_has_no_warning(tmp_path):
    assert _unit_warnings(_export(tmp_path / "ns.sqlite", 1, 2.0)) == []
    assert _unit_warnings(_export(tmp_path / "ns_long.sqlite", 1, 120.0)) == []     # a 2-minute capture is fine


def test_microsecond_timestamps_warn_on_the_kernels(tmp_path):
    kernel_us = (2, 3, 5, 8, 12, 20, 40, 4, 6, 9)
    w = _unit_warnings(_export(tmp_path / "us.sqlite", 1e-3, 2.0, kernel_us))
    assert len(w) == 1, w
    # the median the warning names is the median of the kernels as written (us values read as ns), recounted here
    written = list(kernel_us) + [5]                        # the loop's kernels and the last one (5 us)
    med = statistics.median(written)
    assert f"median of {len(written)} GPU kernels lasts {med:g} ns" in w[0]
    assert med < T.NSYS_MIN_MEDIAN_KERNEL_NS
    assert "span" not in w[0]                # the extent (2 ms as written) is not what looked wrong


def test_picosecond_timestamps_warn_on_the_extent(tmp_path):
    w = _unit_warnings(_export(tmp_path / "ps.sqlite", 1e3, 120.0))
    assert len(w) == 1, w
    assert "events span" in w[0] and "ANALYSIS_DETAILS.duration" in w[0] and "GPU kernels" not in w[0]
    # 120 s of events written in ps: their extent, recounted from the planted first and last timestamps
    # (the 'generate' NVTX range: from 0.5 ms to 1 us after the last kernel's launch window)
    extent = int((120e9 + 1_000) * 1e3) - int(500_000 * 1e3)
    assert f"{extent:,} ns" in w[0]


@pytest.mark.shared
@pytest.mark.parametrize("path", nsys_params())
def test_real_exports_get_no_unit_warning(path):
    assert _unit_warnings(path) == []
