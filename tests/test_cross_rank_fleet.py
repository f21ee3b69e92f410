"""Cross-rank section, issue 28: a TP=8 set with one rank's kernel stretched by a known amount (derived from
the real rank 3 of an 8-rank A100 job), ranks.parquet, ranks from file names (``rank3``), ``--group-by``, and
the DuckDB query of docs/fleets.md run on the result.

The set is DERIVED FROM ONE REAL TRACE (tests/cross_rank_helpers.py): 8 copies with distributedInfo.rank
rewritten; on rank 5 every instance of one backward kernel (6, one per ProfilerStep) is STRETCHED by 3 ms
with the time inserted at the kernel's end (later host and device activity moves later, the host spans
across it grow), as if that GPU were slower at it.  Planted extra time: 3 ms per step, 18 ms in all.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import shared_path
from cross_rank_helpers import write_ranks
from inferscope.cli import main
from inferscope.fleet.cross_rank import rank_from_name

REPO = Path(__file__).resolve().parents[1]
PLANTED = "aten::_planted_delay"
KERNEL = "split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1"
EXTRA_US, SLOW, TOLERANCE = 3000.0, 5, 0.05


def _jsonl(p):
    return [json.loads(x) for x in p.read_text().splitlines()]


def _doc_sql() -> list[str]:
    """The ```sql blocks of docs/fleets.md, as written there (paths under out/)."""
    text = (REPO / "docs" / "fleets.md").read_text()
    return [b.strip() for b in re.findall(r"```sql\n(.*?)```", text, re.S)]


def _duckdb(out: Path, queries: list[str]) -> list:
    """Run queries with DuckDB in a child process (duckdb loaded into the pytest process changed what the
    in-process sampler tests that follow see - tests/test_batch.py); 'out/' in them is the output folder."""
    script = ("import duckdb, json, sys\n"
              "out, qs = sys.argv[1], json.loads(sys.argv[2])\n"
              "print(json.dumps([duckdb.sql(q.replace(\"'out/\", \"'\" + out + \"/\")).fetchall() for q in qs], default=str))\n")
    r = subprocess.run([sys.executable, "-c", script, str(out), json.dumps(queries)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


@pytest.mark.shared
def test_tp8_stretched_kernel_names_the_straggler_and_its_extra_time(tmp_path):
    src = shared_path("kineto", "hta_trace_diff_control_a100_rank3.json.gz")     # rank 3 of a real 8-rank job
    (tmp_path / "in").mkdir()
    paths = write_ranks(src, tmp_path / "in", 8, SLOW, "", 0, stretch=(KERNEL, EXTRA_US))
    out = tmp_path / "o"
    assert main(["analyze", str(tmp_path / "in"), "-o", str(out), "-q", "--format", "json"]) == 0
    cr = json.loads((out / "cross_rank.json").read_text())
    (job,) = cr["jobs"]
    assert job["ranks_present"] == list(range(8)) and job["world_size"] == 8 and job["rank_source"] == ["distributedInfo"]
    s = job["straggler"]
    by_rank = {r["rank"]: r for r in job["ranks"]}
    n_steps = by_rank[0]["steps"]["n"]
    assert n_steps == 6 and all(r["steps"]["n"] == n_steps for r in by_rank.values())
    planted_step_ms, planted_ms = EXTRA_US / 1000, n_steps * EXTRA_US / 1000
    print(f"straggler rank {s['rank']}: lead {s['lead_ms']} ms/step (planted {planted_step_ms}); "
          f"e2e +{by_rank[SLOW]['e2e_ms'] - by_rank[0]['e2e_ms']:.3f} ms (planted {planted_ms})")
    assert s["rank"] == SLOW and s["basis"] == "median step time"
    assert s["lead_ms"] == pytest.approx(planted_step_ms, rel=TOLERANCE)
    assert by_rank[SLOW]["e2e_ms"] - by_rank[0]["e2e_ms"] == pytest.approx(planted_ms, rel=TOLERANCE)
    k = job["different"]["kernels"][0]                 # what it did differently: the stretched kernel, by how much
    assert KERNEL in k["name"] and k["bound"] is None
    assert k["diff_ms"] == pytest.approx(planted_ms, rel=TOLERANCE)
    cat = job["different"]["categories"][0]
    assert cat["name"] == "gpu_compute" and cat["diff_ms"] == pytest.approx(planted_ms, rel=TOLERANCE)
    md = (out / "cross_rank.md").read_text()
    assert f"**Straggler: rank {SLOW}**" in md
    # the finding names the straggler with its lead and the planted kernel, per step
    (f,) = cr["findings"]
    ev = f["evidence"]
    assert f["id"] == "straggler_rank" and f["rank"] == SLOW and f["source"] == str(paths[SLOW]) and f["job"] == "job1"
    assert ev["lead_ms"] == pytest.approx(planted_step_ms, rel=TOLERANCE) and ev["steps"] == n_steps
    kern = next(x for x in ev["top_differences"] if x["kind"] == "kernel")
    assert KERNEL in kern["name"] and kern["diff_ms_per_step"] == pytest.approx(planted_step_ms, rel=TOLERANCE)
    assert f"Rank {SLOW} is the straggler" in f["title"] and KERNEL[:40] in f["title"] and "+3.000 ms per step" in f["title"]
    assert "nvidia-smi" in f["suggestion"] and KERNEL[:40] in f["suggestion"]
    assert f"Rank {SLOW} is the straggler" in md and "Suggestion:" in md
    mine = [x for x in _jsonl(out / "findings.jsonl") if x["id"] == "straggler_rank"]
    assert [(x["source"], x["title"]) for x in mine] == [(str(paths[SLOW]), f["title"])]
    # no collective moved relative to its step on any rank here: no communication wait
    assert job["comm_wait"]["instances_compared"] == 60 and all(r["comm_wait_ms"] == 0 for r in job["ranks"])
    rows = {r["rank"]: r for r in _jsonl(out / "summary.jsonl")}
    assert [rows[r]["straggler"] for r in range(8)] == [r == SLOW for r in range(8)]
    # ranks.parquet beside summary.parquet, and the queries of docs/fleets.md on these outputs
    pytest.importorskip("duckdb")
    pytest.importorskip("pyarrow")
    (per_rank,) = _duckdb(out, ["SELECT rank, straggler, step_median_ms, e2e_ms, gpu_compute_pct, rank_source, source "
                                "FROM read_parquet('out/ranks.parquet') ORDER BY rank"])
    assert [(r[0], r[1]) for r in per_rank] == [(r, r == SLOW) for r in range(8)]
    for r in per_rank:
        want = by_rank[r[0]]
        assert (r[2], r[3], r[4], r[5], r[6]) == (want["steps"]["median_ms"], want["e2e_ms"],
                                                  want["shares_pct"]["gpu_compute"], "distributedInfo", str(paths[r[0]]))
    queries = _doc_sql()
    assert len(queries) >= 3
    res = _duckdb(out, queries)
    stragglers = res[0]          # the doc's first query: the straggler of every job with its lead over the median
    assert len(stragglers) == 1 and stragglers[0][:2] == ["job1", SLOW]
    assert stragglers[0][2] == pytest.approx(planted_step_ms, rel=TOLERANCE)
    assert res[1] and {f[0] for f in res[1]} == {"job1"} and {f[1] for f in res[1]} == {SLOW}   # its findings
    assert sum(n for *_, n in res[2]) > 0 and res[3]                  # findings by id, verdicts
    assert res[4] == []                                               # no LLM run among these inputs


@pytest.mark.shared
def test_late_arrival_raises_the_other_ranks_comm_wait(tmp_path):
    """Rank 2 of 4 arrives 1 ms late at the all-reduces of the real A100 rank 3 (its compute kernel before each
    one stretched; on the others the collective is stretched, as it waits): the other ranks' communication wait
    is the planted 1 ms per delayed all-reduce, rank 2's is none, and rank 2 arrives last at each of them."""
    src = shared_path("kineto", "hta_trace_diff_control_a100_rank3.json.gz")
    planted: dict = {}
    paths = write_ranks(src, tmp_path, 4, 2, "", 0, late=("AllReduce", 1000.0), planted=planted)
    out = tmp_path / "o"
    assert main(["analyze", *map(str, paths), "-o", str(out), "-q", "--format", "json"]) == 0
    (job,) = json.loads((out / "cross_rank.json").read_text())["jobs"]
    cw, by_rank = job["comm_wait"], {r["rank"]: r for r in job["ranks"]}
    want_ms = planted["delayed"] * 1.0                       # 17 delayed all-reduces (18, two back to back)
    print(f"comm wait: {[(r, by_rank[r]['comm_wait_ms'], by_rank[r]['comm_wait_pct']) for r in range(4)]}; "
          f"planted {want_ms} ms on the other ranks")
    assert cw["steps_compared"] == 6 and cw["instances_compared"] == 60 and cw["instances_not_on_every_rank"] == 0
    assert cw["matched_by"] == "step name"
    for r in (0, 1, 3):
        assert by_rank[r]["comm_wait_ms"] == pytest.approx(want_ms, rel=TOLERANCE)
        assert by_rank[r]["comm_wait_per_step_ms"] == pytest.approx(want_ms / 6, rel=TOLERANCE)
        assert by_rank[r]["last_arrivals"] == 0
    assert by_rank[2]["comm_wait_ms"] == 0 and by_rank[2]["last_arrivals"] == planted["delayed"]
    busy = by_rank[0]["comm_compared_ms"]
    assert by_rank[0]["comm_wait_pct"] == pytest.approx(100 * want_ms / busy, rel=1e-3)
    assert busy - by_rank[2]["comm_compared_ms"] == pytest.approx(want_ms, rel=TOLERANCE)   # waiting is in-kernel
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    rows = {r["rank"]: r for r in pq.read_table(out / "ranks.parquet").to_pylist()}
    assert [rows[r]["comm_wait_ms"] for r in range(4)] == [by_rank[r]["comm_wait_ms"] for r in range(4)]
    assert rows[2]["last_arrivals"] == planted["delayed"]
    assert "comm wait ms" in (out / "cross_rank.md").read_text()
    # equal step times (the ranks leave the collective together): the finding names rank 2 by its late arrivals
    (f,) = json.loads((out / "cross_rank.json").read_text())["findings"]
    assert f["rank"] == 2 and f["evidence"]["basis"] == "last arrival at collectives"
    assert f["evidence"]["others_comm_wait_per_step_ms"] == pytest.approx(want_ms / 6, rel=TOLERANCE)
    assert f"arrived last at {planted['delayed']} of 60 collectives" in f["title"]
    assert "Slowest by step time: rank 0, under the 1 % lead" in (out / "cross_rank.md").read_text()


def test_rank_from_file_name():
    assert rank_from_name("/x/rank3.json.gz") == 3
    assert rank_from_name("job_rank_12.pt.trace.json") == 12
    assert rank_from_name("trace-RANK-7.json") == 7
    assert rank_from_name("/data/job/rank5/trace.json") == 5          # the folder names it
    assert rank_from_name("/data/rank5/rank6.json") == 6               # the file name first
    for name in ("frankly.json", "worker3.json", "rank.json", "rank3_vs_rank4.json", "crank3.json", None, ""):
        assert rank_from_name(name) is None, name


def test_ranks_from_file_names_and_group_by(tmp_path):
    src = shared_path("kineto", "hta_amd_mi250_minitoy.json.gz")
    a, b = tmp_path / "runA", tmp_path / "runB"
    a.mkdir()
    b.mkdir()
    pa = write_ranks(src, a, 3, 1, PLANTED, 5000.0, distributed_info=False)       # rank only in the file name
    pb = write_ranks(src, b, 3, 2, PLANTED, 5000.0, distributed_info=False)
    out = tmp_path / "o"
    assert main(["analyze", str(a), "-o", str(out), "-q", "--format", "json", "--window", "all"]) == 0
    (job,) = json.loads((out / "cross_rank.json").read_text())["jobs"]
    assert job["ranks_present"] == [0, 1, 2] and job["rank_source"] == ["file name"] and job["world_size"] is None
    assert job["straggler"]["rank"] == 1 and job["straggler"]["lead_ms"] == pytest.approx(5.0, abs=1e-3)
    rows = {r["source"]: r for r in _jsonl(out / "summary.jsonl")}
    assert [(rows[str(p)]["rank"], rows[str(p)]["rank_source"], rows[str(p)]["straggler"]) for p in pa] == \
        [(0, "file name", False), (1, "file name", True), (2, "file name", False)]
    assert "rank from file name" in (out / "cross_rank.md").read_text()
    # two runs' ranks 0-2 together: file-name ranks group within their folder only (the same as --group-by folder);
    # --group-by all puts them in one job, where they collide (not compared)
    out2 = tmp_path / "o2"
    for extra in ([], ["--group-by", "folder"]):
        assert main(["analyze", str(a), str(b), "-o", str(out2), "-q", "--format", "json", "--window", "all", *extra]) == 0
        cr = json.loads((out2 / "cross_rank.json").read_text())
        assert cr["group_by"] == (extra[1] if extra else "auto")
        got = sorted((j["inputs"][0].split("/")[-2], j["straggler"]["rank"]) for j in cr["jobs"])
        assert got == [("runA", 1), ("runB", 2)]
        assert all(sorted(j["inputs"]) == sorted(map(str, p))
                   for j, p in zip(sorted(cr["jobs"], key=lambda j: j["inputs"][0]), (pa, pb)))
    assert "--group-by folder" in cr["rule"]
    assert main(["analyze", str(a), str(b), "-o", str(out2), "-q", "--format", "json", "--window", "all",
                 "--group-by", "all"]) == 0
    (job,) = json.loads((out2 / "cross_rank.json").read_text())["jobs"]
    assert job["error"].startswith("; ".join(f"rank {r} in 2 inputs" for r in (0, 1, 2)) + ": ")
    # --group-by all: ranks whose configurations differ (world size 4 vs 8) compared as one job
    c = tmp_path / "c"
    c.mkdir()
    w4 = write_ranks(src, c, 4, None, PLANTED, 0, prefix="w4_rank")[:2]
    w8 = write_ranks(src, c, 8, 3, PLANTED, 5000.0, prefix="w8_rank")[2:4]
    out3 = tmp_path / "o3"
    assert main(["analyze", *map(str, w4 + w8), "-o", str(out3), "-q", "--format", "json"]) == 0
    assert len(json.loads((out3 / "cross_rank.json").read_text())["jobs"]) == 2
    assert main(["analyze", *map(str, w4 + w8), "-o", str(out3), "-q", "--format", "json", "--group-by", "all"]) == 0
    (job,) = json.loads((out3 / "cross_rank.json").read_text())["jobs"]
    assert job["ranks_present"] == [0, 1, 2, 3] and job["world_size"] is None and job["straggler"]["rank"] == 3
    # a re-run into the same folder without a cross-rank section leaves none of the previous one's files
    assert main(["analyze", str(pa[0]), str(src), "-o", str(out3), "-q", "--format", "json"]) == 0
    assert not any((out3 / n).exists() for n in ("cross_rank.json", "cross_rank.md", "ranks.parquet"))
    assert (out3 / "summary.jsonl").exists()
