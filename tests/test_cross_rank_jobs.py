"""Cross-rank jobs only from evidence of a job of several ranks (issue 45): a rank alone (distributedInfo with no
world size and no process group) or world size 1 is a job of its own unless --group-by says otherwise; a rank's
devices are the ones its GPU work ran on, not every GPU its node lists.  Inputs are copies of one small real trace
(tests/cross_rank_helpers.py) with distributedInfo / device names planted, so the answer is known by construction;
the shared batch checks that no two unrelated real captures become one job."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from conftest import SHARED_TRACES, shared_path
from cross_rank_helpers import load, write_with_info
from inferscope.cli import main
from inferscope.fleet.cross_rank import cross_rank, rank_profile, used_devices

SRC = ("kineto", "hta_amd_mi250_minitoy.json.gz")


def _rows(out: Path) -> dict[str, dict]:
    return {Path(r["source"]).name: r for r in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}


def _analyze(inputs, out: Path, *extra) -> None:
    assert main(["analyze", *map(str, inputs), "-o", str(out), "-q", "--format", "json", "--window", "all", *extra]) == 0


def test_rank_alone_is_not_a_job(tmp_path):
    src = shared_path(*SRC)
    a = tmp_path / "in"
    a.mkdir()
    ins = [write_with_info(src, a / "x.json.gz", {"rank": 0}),          # two unrelated captures, both "rank 0"
           write_with_info(src, a / "y.json.gz", {"rank": 0}),
           write_with_info(src, a / "z.json.gz", {"rank": 1, "backend": "nccl"}),   # a backend is no world size
           write_with_info(src, a / "s0.json.gz", {"rank": 0, "world_size": 1}),    # single-rank jobs
           write_with_info(src, a / "s1.json.gz", {"rank": 0, "world_size": 1})]
    out = tmp_path / "o"
    _analyze(ins, out)
    assert not (out / "cross_rank.json").exists()
    rows = _rows(out)
    assert {n: (r["rank"], r["job"]) for n, r in rows.items()} == {
        "x.json.gz": (0, None), "y.json.gz": (0, None), "z.json.gz": (1, None), "s0.json.gz": (0, None),
        "s1.json.gz": (0, None)}
    # --group-by says otherwise: the folder's ranks are one job (here two captures' rank 0: reported, not compared)
    _analyze(ins[:3], out, "--group-by", "folder")
    (job,) = json.loads((out / "cross_rank.json").read_text())["jobs"]
    assert job["ranks_present"] == [0, 1] and job["error"].startswith("rank 0 in 2 inputs: ")


def test_process_groups_or_world_size_make_a_job(tmp_path):
    src = shared_path(*SRC)
    pg = [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 2, "ranks": [0, 1]}]
    ins = [write_with_info(src, tmp_path / f"p{r}.json.gz", {"rank": r, "pg_config": pg}) for r in (0, 1)]
    ins += [write_with_info(src, tmp_path / f"w{r}.json.gz", {"rank": r, "world_size": 2}) for r in (0, 1)]
    out = tmp_path / "o"
    _analyze(ins, out)
    jobs = json.loads((out / "cross_rank.json").read_text())["jobs"]
    assert sorted(tuple(Path(i).name for i in j["inputs"]) for j in jobs) == [("p0.json.gz", "p1.json.gz"),
                                                                             ("w0.json.gz", "w1.json.gz")]
    assert all(j["ranks_present"] == [0, 1] and "error" not in j for j in jobs)


def test_file_name_ranks_group_within_their_folder_only(tmp_path):
    src = shared_path(*SRC)
    ins = []
    for run in ("runA", "runB"):
        (tmp_path / run).mkdir()
        ins += [write_with_info(src, tmp_path / run / f"rank{r}.json.gz", None) for r in (0, 1)]
    ins.append(write_with_info(src, tmp_path / "other_rank2.json.gz", None))     # alone in its folder
    out = tmp_path / "o"
    _analyze(ins, out)
    cr = json.loads((out / "cross_rank.json").read_text())
    assert sorted(sorted(str(Path(i).parent.name) for i in j["inputs"]) for j in cr["jobs"]) == [["runA"] * 2, ["runB"] * 2]
    assert cr["ungrouped"] == [str(ins[-1])]


def test_a_rank_lists_the_devices_its_kernels_ran_on(tmp_path):
    src = shared_path(*SRC)
    doc = load(src)
    listed = [d["id"] for d in doc["deviceProperties"]]
    used = sorted({e["args"]["device"] for e in doc["traceEvents"]
                   if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "device" in (e.get("args") or {})})
    assert len(listed) > len(used) >= 1                # the node lists more GPUs than the trace used
    names = [f"GPU-{i}" for i in listed]              # distinct names, so the one used is identifiable
    ins = [write_with_info(src, tmp_path / f"r{r}.json.gz", {"rank": r, "world_size": 2}, names) for r in (0, 1)]
    out = tmp_path / "o"
    _analyze(ins, out)
    want = [f"GPU-{u}" for u in used]
    rows = _rows(out)
    assert rows["r0.json.gz"]["devices"] == want and rows["r1.json.gz"]["devices"] == want
    (job,) = json.loads((out / "cross_rank.json").read_text())["jobs"]
    assert job["devices"] == want
    # no GPU work: the trace's own list; a used id the list lacks: the name all listed devices share, else "device N"
    src_devs = [{"id": 0, "name": "A"}, {"id": 1, "name": "A"}]
    assert used_devices({"source": {"devices": src_devs}, "gpu": None}) == ["A", "A"]
    assert used_devices({"source": {"devices": src_devs}, "gpu": {"devices": [{"device": 9}]}}) == ["A"]
    assert used_devices({"source": {"devices": src_devs + [{"id": 2, "name": "B"}]},
                         "gpu": {"devices": [{"device": 9}, {"device": 2}]}}) == ["device 9", "B"]


def test_pure_function_rank_alone():
    doc_src = {"format": "kineto", "devices": [{"name": "X"}], "tool_versions": {}}
    ps = [rank_profile({"source": {**doc_src, "distributed": {"rank": r}}, "breakdown": [], "e2e_ms": 1.0}, f"/t/{n}.json")
          for r, n in ((0, "a"), (1, "b"))]
    assert all(p is not None and p["rank"] == r for p, r in zip(ps, (0, 1)))
    items = [{"source": s, "report_dir": s, "profile": p} for s, p in zip(("a", "b"), ps)]
    assert cross_rank(items) is None
    assert cross_rank(items, group_by="all")["jobs"][0]["ranks_present"] == [0, 1]


@pytest.mark.shared
def test_shared_batch_groups_no_unrelated_traces(tmp_path):
    """Every shared Kineto trace is a separate capture (MANIFEST.tsv): one batch over them has no job."""
    folder = SHARED_TRACES / "kineto"
    traces = sorted(folder.glob("*.json.gz")) if folder.is_dir() else []
    if len(traces) < 2:
        pytest.skip(f"shared Kineto traces not available at {folder}")
    with_rank = set()
    for p in traces:
        with gzip.open(p, "rt") as f:
            di = json.load(f).get("distributedInfo")
        if isinstance(di, dict) and isinstance(di.get("rank"), int):
            with_rank.add(p.name)
    assert len(with_rank) >= 2                           # several traces claim a rank (most of them rank 0)
    out = tmp_path / "o"
    assert main(["analyze", str(folder), "-o", str(out), "-q", "--format", "json", "--jobs", "1"]) == 0
    rows = _rows(out)
    assert {n for n, r in rows.items() if r.get("rank") is not None} >= with_rank
    assert all(r.get("job") is None for r in rows.values())
    assert not (out / "cross_rank.json").exists()
