"""Communication wait per rank (cross_rank_comm.py): the matching rule on small hand-made profiles, and the
collectives kept from the real A100 rank traces of ../shared (two different jobs: world size 8 and 16)."""
from __future__ import annotations

import gzip
import json

import pytest

from conftest import shared_path
from inferscope.cli import main
from inferscope.analyze.window import window_from_report
from inferscope.fleet.cross_rank_comm import collective_steps, comm_wait


def _coll(steps: dict[str, list[tuple[str, float, float]]]) -> dict:
    """{step name: [(kernel name, offset us, dur us), ...]} -> the collective_steps layout."""
    names: dict[str, int] = {}
    out = []
    for st, rows in steps.items():
        seen: dict[int, int] = {}
        coll = []
        for nm, off, dur in rows:
            n = names.setdefault(nm, len(names))
            coll.append([n, seen.get(n, 0), off, dur])
            seen[n] = seen.get(n, 0) + 1
        out.append({"name": st, "coll": coll})
    return {"names": list(names), "steps": out, "instances": sum(len(s["coll"]) for s in out), "truncated": False}


def test_wait_is_the_latest_arrival_minus_own_clipped_to_the_kernel():
    # step A: all-reduce #0 at 100/100/400 us (rank 2 late by 300 us), all-reduce #1 at 900/950/900 (rank 1 late by
    # 50 us, but rank 0's kernel lasts 20 us: its wait is clipped to 20); a send only rank 0 has is not compared
    a = {0: [("ar", 100, 500), ("ar", 900, 20), ("send", 5, 1)], 1: [("ar", 100, 500), ("ar", 950, 100)],
         2: [("ar", 400, 200), ("ar", 900, 100)]}
    cw = comm_wait({r: _coll({"ProfilerStep#1": rows}) for r, rows in a.items()} | {3: None})
    p = cw["per_rank"]
    assert set(p) == {0, 1, 2} and cw["instances_compared"] == 2 and cw["instances_not_on_every_rank"] == 1
    assert p[0]["comm_wait_ms"] == pytest.approx((300 + 20) / 1e3) and p[0]["comm_compared_ms"] == pytest.approx(0.52)
    assert p[1]["comm_wait_ms"] == pytest.approx(0.3) and p[2]["comm_wait_ms"] == pytest.approx(0.05)
    assert p[2]["comm_wait_pct"] == pytest.approx(100 * 50 / 300, abs=1e-3)
    assert (p[0]["last_arrivals"], p[1]["last_arrivals"], p[2]["last_arrivals"]) == (0, 1, 1)
    assert cw["matched_by"] == "step name" and cw["steps_compared"] == 1


def test_steps_matched_by_name_else_position():
    r0 = _coll({"ProfilerStep#5": [("ar", 0, 10)], "ProfilerStep#6": [("ar", 0, 10)]})
    r1 = _coll({"ProfilerStep#6": [("ar", 4, 10)], "ProfilerStep#7": [("ar", 0, 10)]})
    cw = comm_wait({0: r0, 1: r1})
    assert cw["steps_compared"] == 1 and cw["per_rank"][0]["comm_wait_ms"] == pytest.approx(0.004)
    dup = _coll({"step": [("ar", 0, 10)]})
    dup["steps"].append({"name": "step", "coll": [[0, 0, 7.0, 10.0]]})
    cw = comm_wait({0: dup, 1: _coll({"x": [("ar", 0, 10)], "y": [("ar", 0, 10)]})})
    assert cw["matched_by"] == "step position" and cw["steps_compared"] == 2
    assert cw["per_rank"][1]["comm_wait_ms"] == pytest.approx(0.007)
    assert comm_wait({0: r0}) is None and comm_wait({0: r0, 1: _coll({"other": [("ar", 0, 1)]})}) is None


def _nccl_kernels_in_steps(name: str) -> tuple[int, int]:
    """(NCCL kernels, those whose launching runtime call - same correlation id - starts inside a ProfilerStep),
    counted from the JSON itself."""
    with gzip.open(shared_path("kineto", name), "rt") as f:
        ev = json.load(f)["traceEvents"]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") == "user_annotation"
             and str(e.get("name", "")).startswith("ProfilerStep#")]
    launch = {e["args"]["correlation"]: e["ts"] for e in ev if e.get("cat") == "cuda_runtime" and "correlation" in (e.get("args") or {})}
    nccl = [e for e in ev if e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower()]
    inside = [k for k in nccl if any(a <= launch.get(k["args"].get("correlation"), -1) < b for a, b in steps)]
    return len(nccl), len(inside)


@pytest.mark.shared
@pytest.mark.parametrize("name,steps,per_step,total", [("hta_trace_diff_control_a100_rank3.json.gz", 6, 10, 60),
                                                        ("hta_negative_queue_a100_80gb_rank0.json.gz", 5, 15, 80)])
def test_collectives_of_the_real_a100_ranks(name, steps, per_step, total):
    """The NCCL kernels of the two real A100 rank traces launched inside a ProfilerStep (some from another thread
    than the step's: all 60 of rank 3, 75 of the 80 of the A100-80GB rank 0) are kept, per step, with offsets
    inside the step."""
    from inferscope.analyze.pipeline import analyze
    from inferscope.ingest import load_trace
    t = load_trace(shared_path("kineto", name))
    c = collective_steps(t, window_from_report(analyze(t)["window"]))
    assert len(c["steps"]) == steps and {len(s["coll"]) for s in c["steps"]} == {per_step}
    assert _nccl_kernels_in_steps(name) == (total, steps * per_step)
    assert c["instances"] == steps * per_step and not c["truncated"]
    assert all(off >= 0 and dur > 0 for s in c["steps"] for _, _, off, dur in s["coll"])
    assert len(json.dumps(c)) < 4000                     # a few KB in the rank profile


@pytest.mark.shared
def test_real_ranks_of_two_jobs_forced_together_have_no_comm_wait(tmp_path):
    """The two real A100 ranks (world size 8 and 16) are two jobs; --group-by all compares them anyway, but their
    steps (ProfilerStep#1009-1014 vs #550-554) have no name in common: the wait is not measured, not invented."""
    ins = [shared_path("kineto", n) for n in ("hta_trace_diff_control_a100_rank3.json.gz",
                                              "hta_negative_queue_a100_80gb_rank0.json.gz")]
    out = tmp_path / "o"
    assert main(["analyze", *map(str, ins), "-o", str(out), "-q", "--format", "json"]) == 0
    assert not (out / "cross_rank.json").exists()
    assert main(["analyze", *map(str, ins), "-o", str(out), "-q", "--format", "json", "--group-by", "all"]) == 0
    cr = json.loads((out / "cross_rank.json").read_text())
    (job,) = cr["jobs"]
    assert job["comm_wait"] is None and all(r["comm_wait_ms"] is None for r in job["ranks"])
    assert "Communication wait: not measured" in (out / "cross_rank.md").read_text()
