"""Cross-rank section of a multi-input analyze.

There is no real multi-rank capture of one job in ../shared/traces (the *_rank0 / *_rank3 files are from
different jobs), so the job here is DERIVED FROM A REAL TRACE (tests/cross_rank_helpers.py): N copies of one
real single-rank capture with distributedInfo.rank rewritten, one rank with a planted CPU op at the start of
every ProfilerStep (the rest of its timeline shifted), and the assertions check that the planted rank is the
straggler and the planted op / its category is what it did differently, by the planted amount.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import shared_path
from cross_rank_helpers import load, write_ranks
from inferscope.cli import main
from inferscope.fleet.cross_rank import cross_rank, rank_profile

PLANTED = "aten::_planted_delay"


def _jsonl(p):
    return [json.loads(x) for x in p.read_text().splitlines()]


def _run(tmp_path, inputs, *extra):
    out = tmp_path / "o"
    rc = main(["analyze", *map(str, inputs), "-o", str(out), "-q", "--format", "json", *extra])
    return rc, out


def test_planted_rank_is_the_straggler_vendored(tmp_path):
    """hta_amd_mi250_minitoy (vendored, real MI250 capture, 2 ProfilerSteps): 4 ranks, rank 2 delayed 5 ms/step."""
    src = shared_path("kineto", "hta_amd_mi250_minitoy.json.gz")
    paths = write_ranks(src, tmp_path, 4, 2, PLANTED, 5000.0)
    rc, out = _run(tmp_path, paths, "--window", "all")
    assert rc == 0
    cr = json.loads((out / "cross_rank.json").read_text())
    assert len(cr["jobs"]) == 1 and cr["ungrouped"] == []
    job = cr["jobs"][0]
    assert job["ranks_present"] == [0, 1, 2, 3] and job["world_size"] == 4 and job["backend"] == "nccl"
    assert job["window_note"] is None                       # --window all: one window for all ranks
    s = job["straggler"]
    assert s["rank"] == 2 and s["basis"] == "median step time"
    by_rank = {r["rank"]: r for r in job["ranks"]}
    assert by_rank[2]["steps"]["n"] == by_rank[0]["steps"]["n"] == 2
    assert s["lead_ms"] == pytest.approx(5.0, abs=1e-3)     # both steps grew by 5 ms: the median too
    assert by_rank[2]["e2e_ms"] - by_rank[0]["e2e_ms"] == pytest.approx(10.0, abs=1e-3)
    cats = job["different"]["categories"]
    # an aten op with no GPU work or sync under it is framework time (classes.py)
    assert cats[0]["name"] == "framework_overhead" and cats[0]["diff_ms"] == pytest.approx(10.0, abs=0.05)
    ops = job["different"]["ops"]
    assert ops[0]["name"] == PLANTED and ops[0]["straggler_ms"] == pytest.approx(10.0, abs=1e-3)
    rep0 = json.loads((out / by_rank[0]["report_dir"] / "report.json").read_text())["culprits"]
    if rep0["counts"]["ops"] > len(rep0["ops"]):      # rank 0's op table is a top-N: bounded by its smallest entry
        smallest = min(o["self_ms"] for o in rep0["ops"])
        assert ops[0]["bound"] == "at least" and ops[0]["diff_ms"] == pytest.approx(10.0 - smallest, abs=1e-3)
    else:
        assert ops[0]["bound"] is None and ops[0]["diff_ms"] == pytest.approx(10.0, abs=1e-3)
    assert not [k for k in job["different"]["kernels"] if abs(k["diff_ms"]) > 1e-3]   # GPU work is unchanged
    rows = {r["rank"]: r for r in _jsonl(out / "summary.jsonl")}
    assert {k: (r["world_size"], r["job"], r["straggler"]) for k, r in rows.items()} == {
        0: (4, "job1", False), 1: (4, "job1", False), 2: (4, "job1", True), 3: (4, "job1", False)}
    md = (out / "cross_rank.md").read_text()
    assert "**Straggler: rank 2**" in md and PLANTED in md
    # the README's DuckDB query for stragglers, on summary.parquet, in a child process (see test_batch.py)
    pytest.importorskip("duckdb")
    pytest.importorskip("pyarrow")
    q = (f"SELECT job, rank, world_size, source FROM read_parquet('{out}/summary.parquet') "
         "WHERE straggler ORDER BY job")
    r = subprocess.run([sys.executable, "-c", f"import duckdb, json; print(json.dumps(duckdb.sql({q!r}).fetchall()))"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout) == [["job1", 2, 4, str(paths[2])]]


def test_default_window_differs_per_rank_and_says_so(tmp_path):
    src = shared_path("kineto", "hta_amd_mi250_minitoy.json.gz")
    paths = write_ranks(src, tmp_path, 2, 1, PLANTED, 5000.0)
    rc, out = _run(tmp_path, paths)
    assert rc == 0
    job = json.loads((out / "cross_rank.json").read_text())["jobs"][0]
    assert job["straggler"]["rank"] == 1
    labels = {r["rank"]: r["window"] for r in job["ranks"]}
    if labels[0] != labels[1]:
        assert job["window_note"] and "--window all" in job["window_note"]
    else:
        assert job["window_note"] is None


@pytest.mark.shared
def test_planted_rank_is_the_straggler_nccl_trace(tmp_path):
    """hta_negative_queue_a100_80gb_rank0 (real A100 capture with NCCL kernels, 5 ProfilerSteps): 3 ranks,
    rank 1 delayed 30 ms per step; default (steady-state) window."""
    src = shared_path("kineto", "hta_negative_queue_a100_80gb_rank0.json.gz")
    paths = write_ranks(src, tmp_path, 3, 1, PLANTED, 30_000.0)
    rc, out = _run(tmp_path, paths)
    assert rc == 0
    job = json.loads((out / "cross_rank.json").read_text())["jobs"][0]
    s = job["straggler"]
    assert s["rank"] == 1 and s["lead_ms"] == pytest.approx(30.0, abs=0.01)
    by_rank = {r["rank"]: r for r in job["ranks"]}
    for r in by_rank.values():
        assert r["steps"]["n"] == 5 and r["comm_kernel_ms"] > 100      # NCCL SendRecv on every rank
        assert 0 < r["comm_exposed_ms"] <= r["comm_kernel_ms"] and 0 < r["comm_exposed_pct"] <= 100
        assert r["sync_wait_ms"] > 0
    assert by_rank[1]["steps"]["median_ms"] - by_rank[0]["steps"]["median_ms"] == pytest.approx(30.0, abs=0.01)
    assert by_rank[0]["comm_kernel_ms"] == by_rank[1]["comm_kernel_ms"]    # the delay is on the host, not in NCCL
    cats = job["different"]["categories"]
    assert cats[0]["name"] == "framework_overhead" and cats[0]["diff_ms"] == pytest.approx(150.0, abs=0.5)
    ops = job["different"]["ops"]
    assert ops[0]["name"] == PLANTED and ops[0]["straggler_ms"] == pytest.approx(150.0, abs=0.01)
    # 143 distinct ops: the other ranks' top-20 tables lack it, so the difference is a lower bound
    assert ops[0]["bound"] == "at least" and 0 < ops[0]["diff_ms"] <= 150.0


def test_traces_of_different_jobs_are_not_grouped(tmp_path):
    src = shared_path("kineto", "hta_amd_mi250_minitoy.json.gz")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    (tmp_path / "d").mkdir()
    a = write_ranks(src, tmp_path / "a", 4, None, PLANTED, 0)[:2]                      # world 4, ranks 0-1
    b = write_ranks(src, tmp_path / "b", 8, None, PLANTED, 0)[2:4]                     # world 8, ranks 2-3
    c = write_ranks(src, tmp_path / "c", 4, None, PLANTED, 0, devices_name="AMD Instinct MI300X")[2:]  # other GPU
    rc, out = _run(tmp_path, [*a, *b, *c])
    assert rc == 0
    jobs = json.loads((out / "cross_rank.json").read_text())["jobs"]
    got = sorted((j["world_size"], tuple(j["ranks_present"]), tuple(j["devices"])) for j in jobs)
    assert got == [(4, (0, 1), ("AMD Radeon Graphics",)), (4, (2, 3), ("AMD Instinct MI300X",)),
                   (8, (2, 3), ("AMD Radeon Graphics",))]
    # the same ranks twice under one configuration: two captures, not one job - reported, not compared
    d = write_ranks(src, tmp_path / "d", 4, None, PLANTED, 0)[:2]
    rc, out2 = main(["analyze", *map(str, [*a, *d]), "-o", str(tmp_path / "o2"), "-q", "--format", "json"]), tmp_path / "o2"
    assert rc == 0
    (job,) = json.loads((out2 / "cross_rank.json").read_text())["jobs"]
    # each rank seen twice (a and d both hold ranks 0 and 1), said once per rank with its count
    assert job["ranks_present"] == [0, 1] and "straggler" not in job
    assert job["error"].startswith("rank 0 in 2 inputs; rank 1 in 2 inputs: ")
    assert "Not compared" in (out2 / "cross_rank.md").read_text()


@pytest.mark.shared
def test_real_ranks_of_different_jobs(tmp_path):
    """The two real rank captures: rank 0 of a 16-rank job, rank 3 of an 8-rank job - no cross-rank section."""
    r0 = shared_path("kineto", "hta_negative_queue_a100_80gb_rank0.json.gz")
    r3 = shared_path("kineto", "hta_trace_diff_control_a100_rank3.json.gz")
    rc, out = _run(tmp_path, [r0, r3])
    assert rc == 0
    assert not (out / "cross_rank.json").exists() and not (out / "cross_rank.md").exists()
    rows = {r["rank"]: r for r in _jsonl(out / "summary.jsonl")}
    assert {k: (r["world_size"], r["job"], r["straggler"]) for k, r in rows.items()} == {0: (16, None, None),
                                                                                        3: (8, None, None)}


def test_pure_function_without_ranks_or_alone():
    doc_src = {"format": "kineto", "devices": [{"name": "X"}], "tool_versions": {}}
    assert rank_profile({"source": doc_src}) is None
    one = {"source": {**doc_src, "distributed": {"rank": 0, "world_size": 2}}, "breakdown": [], "e2e_ms": 1.0}
    p = rank_profile(one)
    assert p["rank"] == 0 and p["steps_ms"] == [] and p["comm_exposed_ms"] is None
    assert cross_rank([{"source": "a", "report_dir": "a", "profile": p}]) is None     # one rank: no section
    two = cross_rank([{"source": s, "report_dir": s, "profile": {**p, "rank": r, "e2e_ms": e}}
                      for s, r, e in (("a", 0, 1.0), ("b", 1, 3.0))])
    (job,) = two["jobs"]
    assert job["straggler"]["rank"] == 1 and job["straggler"]["basis"].startswith("e2e")
    assert job["straggler"]["lead_ms"] == 2.0


def test_distributed_info_is_kept_in_the_report(tmp_path):
    src = shared_path("kineto", "tracelens_mi300x_vllm_decode_graph_execution.json.gz")
    info = load(src)["distributedInfo"]
    rc = main(["analyze", str(src), "-o", str(tmp_path / "r"), "-q", "--format", "json"])
    assert rc == 0
    d = json.loads((tmp_path / "r" / "report.json").read_text())["source"]["distributed"]
    assert (d["rank"], d["world_size"], d["backend"], d["pg_count"]) == (0, 1, "nccl", info["pg_count"])
    assert [(g["pg_name"], g["backend_config"], g["ranks"]) for g in d["pg_config"]] == \
        [(g["pg_name"], g["backend_config"], g["ranks"]) for g in info["pg_config"]]


def test_hostile_distributed_info_is_bounded_and_typed(tmp_path):
    import gzip
    src = shared_path("kineto", "hta_cuda_event_sync_a100.json.gz")
    doc = load(src)
    bad = {"rank": True, "world_size": 2}                        # a bool is not a rank
    doc["distributedInfo"] = bad
    (tmp_path / "a.json").write_text(json.dumps(doc))
    doc["distributedInfo"] = {"rank": 3, "world_size": "8", "backend": "x" * 1000, "pg_count": 1.5,
                              "pg_config": [{"pg_name": 7, "ranks": list(range(5000)) + ["z"], "pg_size": "big"}] * 100 + ["junk"]}
    with gzip.open(tmp_path / "b.json.gz", "wt") as f:
        json.dump(doc, f)
    for name in ("a.json", "b.json.gz"):
        assert main(["analyze", str(tmp_path / name), "-o", str(tmp_path / name.split(".")[0]), "-q", "--format", "json"]) == 0
    ra = json.loads((tmp_path / "a" / "report.json").read_text())["source"]
    rb = json.loads((tmp_path / "b" / "report.json").read_text())["source"]["distributed"]
    assert ra["distributed"] is None
    assert rb["rank"] == 3 and rb["world_size"] is None and rb["pg_count"] is None and len(rb["backend"]) == 64
    assert len(rb["pg_config"]) == 64 and all(len(g["ranks"]) == 1024 and g["pg_size"] is None for g in rb["pg_config"])
    assert rb["pg_config"][0]["pg_name"] == "7"


def test_markdown_escapes_trace_provided_strings():
    from inferscope.report.cross_rank import to_markdown
    base = {"source": {"format": "kineto", "devices": [{"name": "GPU|<b>x</b>"}], "tool_versions": {},
                       "distributed": {"rank": 0, "world_size": 2, "backend": "nccl"}},
            "breakdown": [{"category": "other", "ms": 1.0, "pct": 100.0}], "e2e_ms": 1.0,
            "culprits": {"ops": [{"name": "op|`rm`[x](http://e.vil)", "self_ms": 1.0}], "functions": [], "counts": {"ops": 1}}}
    p0 = rank_profile(base)
    p1 = {**p0, "rank": 1, "e2e_ms": 2.0, "ops": {"op|`rm`[x](http://e.vil)": 2.0}}
    md = to_markdown(cross_rank([{"source": "a|b<script>.json", "report_dir": "a", "profile": p0},
                                 {"source": "c.json", "report_dir": "c", "profile": p1}]))
    from helpers import md_markup, md_render
    assert md_markup(md) == [] and "a\\|b\\<script>.json" in md and "a|b&lt;script&gt;.json" in md_render(md)
    assert "op\\|\\`rm\\`\\[x\\]" in md and "[x](http://" not in md
