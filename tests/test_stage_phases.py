"""NVTX / user ranges named ``<name>_Stage`` (seed 003: ``Prefill_Stage`` / ``Decode_Stage``) are phases without
--phase-map (issue 46); phase times equal the ranges' times recounted from the planted input."""
from __future__ import annotations

import pytest

import inferscope
from inferscope.analyze.phases import STAGE_RULE, phases
from inferscope.analyze.window import resolve_window
from inferscope.trace import SpanKind

from helpers import Synth
from nsys_factory import NsysExport

# (range name, start_us, end_us, [(gpu start_us, gpu end_us) of kernels launched inside])
PLAN = [("Prefill_Stage", 0, 400, [(20, 220), (230, 330)]),
        ("Decode_Stage", 400, 1000, [(420, 450), (520, 560), (620, 650), (720, 790)]),
        ("Prefill_Stage", 1000, 1250, [(1010, 1200)]),
        ("Decode_Stage", 1250, 1600, [(1260, 1300), (1360, 1380)]),
        ("Tokenizer_Stage", 1600, 1700, []),
        ("warmup", 1700, 1800, [(1710, 1790)])]                    # not a phase


def _truth():
    out: dict[str, list] = {}
    for name, a, b, ks in PLAN:
        if name.endswith("_Stage"):
            r = out.setdefault(name[:-len("_Stage")].lower(), [0, 0, 0])
            r[0] += 1
            r[1] += b - a
            r[2] += sum(e - s for s, e in ks)
    return {k: {"ranges": v[0], "wall_ms": v[1] / 1e3, "gpu_ms": v[2] / 1e3} for k, v in out.items()}


def _check(ph: dict):
    got = {p["phase"]: p for p in ph["phases"]}
    truth = _truth()
    assert set(got) == set(truth) == {"prefill", "decode", "tokenizer"}
    for k, t in truth.items():
        assert got[k]["ranges"] == t["ranges"]
        assert got[k]["wall_ms"] == pytest.approx(t["wall_ms"], abs=1e-9)
        assert got[k]["gpu_ms"] == pytest.approx(t["gpu_ms"], abs=1e-9)
        assert all(m["rule"] == STAGE_RULE for m in got[k]["mapped_from"])
    assert {m["name"] for m in got["prefill"]["mapped_from"]} == {"Prefill_Stage"}


def test_stage_ranges_are_phases_synthetic():
    t = Synth()
    for name, a, b, ks in PLAN:
        t.span(SpanKind.ANNOTATION, name, a, b)
        for ks_, ke in ks:
            t.launch(ks_ - 8, ks_ - 6, ks_, ke)
    tr = t.done()
    ph = phases(tr, resolve_window(tr, "all"))
    _check(ph)
    # with --phase-map only the map decides
    ph2 = phases(tr, resolve_window(tr, "all"), {"first": ["warmup"]})
    assert [p["phase"] for p in ph2["phases"]] == ["first"]


def test_stage_ranges_are_phases_nsys(tmp_path):
    """The same plan as NVTX push/pop ranges in an Nsight Systems export, analysed end to end."""
    e = NsysExport("3.24")
    pid = 1000
    e.process(pid, "python")
    e.thread(pid, pid, "MainThread")
    e.gpu(0)
    corr = 0
    for name, a, b, ks in PLAN:
        e.nvtx(pid, pid, a * 1000, b * 1000, name)
        for s, en in ks:
            corr += 1
            e.runtime(pid, pid, (s - 8) * 1000, (s - 6) * 1000, "cudaLaunchKernel_v7000", corr)
            e.kernel(pid, s * 1000, en * 1000, f"k{corr}(float*)", corr)
    p = e.write(tmp_path / "stages.sqlite")
    r = inferscope.analyze(str(p), window="all").to_dict()
    _check(r["phases"])
    assert r["phases"]["phase_map_source"] == "conventional names and <name>_Stage ranges"
    # a stage wraps a whole phase: it is not one LLM generation step
    assert r["llm"] is None or not r["llm"]["steps"], r["llm"]
