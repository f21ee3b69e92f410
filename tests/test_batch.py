"""inferscope analyze over many inputs: a folder with --jobs 2, a glob, a bad input among good ones."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from conftest import SHARED_TRACES, kineto_traces, nsys_traces
from inferscope.cli import main
from inferscope.fleet.batch_out import SAVING_FIELDS


def _jsonl(p):
    return [json.loads(x) for x in p.read_text().splitlines()]


def test_folder_with_jobs_2_rows_match_each_report(tmp_path):
    if not (SHARED_TRACES / "kineto").is_dir():
        pytest.skip("../shared/traces not available")
    inputs = kineto_traces() + nsys_traces()
    out = tmp_path / "o"
    r = subprocess.run([sys.executable, "-m", "inferscope", "analyze", str(SHARED_TRACES), "--jobs", "2", "-o", str(out),
                        "-q", "--format", "json"], capture_output=True, text=True, timeout=600)   # child: see below
    assert r.returncode == 0, r.stderr[-2000:]
    rows = _jsonl(out / "summary.jsonl")
    assert sorted(r["source"] for r in rows) == sorted(str(p) for p in inputs)      # every trace, once
    findings = _jsonl(out / "findings.jsonl")
    n_findings = n_predicted = 0
    for r in rows:
        assert r["error"] is None
        rep = json.loads((out / r["report_dir"] / "report.json").read_text())
        assert r["e2e_ms"] == rep["e2e_ms"] and r["verdict"] == rep["verdict"]["id"]
        assert r["shares_pct"] == {c["category"]: c["pct"] for c in rep["breakdown"]}
        assert r["gpu_idle_pct"] == (rep["gpu"] or {}).get("idle_pct")
        assert set(r["top_findings"]) <= {f["id"] for f in rep["findings"]}
        assert r["format"] == rep["source"]["format"]
        mine = [f for f in findings if f["source"] == r["source"]]
        assert [f["id"] for f in mine] == [f["id"] for f in rep["findings"]]
        # each row carries its finding's predicted saving (issue 42), null where the report has none
        assert [[f[k] for k in SAVING_FIELDS] for f in mine] == [[f.get(k) for k in SAVING_FIELDS]
                                                                 for f in rep["findings"]]
        n_predicted += sum(f.get("expected_saving_ms") is not None for f in mine)
        n_findings += len(rep["findings"])
    assert len(findings) == n_findings > 0 and n_predicted > 0
    assert len({r["report_dir"] for r in rows}) == len(rows)
    # the same table as Parquet, queried with DuckDB: the 5 traces with the worst GPU idle.  In a child
    # process: duckdb/pyarrow loaded into the pytest process change what the in-process sampler tests that
    # follow see (test_collect's scope("tokenize") read as user code; cause not found yet - stop note)
    pytest.importorskip("duckdb")
    pytest.importorskip("pyarrow")
    script = (
        "import duckdb, json, sys\n"
        "out = sys.argv[1]\n"
        "q = (f\"SELECT source, gpu_idle_pct, verdict FROM read_parquet('{out}/summary.parquet') \"\n"
        "     \"WHERE gpu_idle_pct IS NOT NULL ORDER BY gpu_idle_pct DESC, source LIMIT 5\")\n"
        "got = duckdb.sql(q).fetchall()\n"
        "n = duckdb.sql(f\"SELECT count(*) FROM read_parquet('{out}/findings.parquet')\").fetchall()[0][0]\n"
        "saved = duckdb.sql(f\"SELECT source, id, expected_saving_ms, saving_model FROM read_parquet('{out}/findings.parquet')\"\n"
        "                   \" WHERE expected_saving_ms IS NOT NULL ORDER BY source, id, expected_saving_ms, saving_model\").fetchall()\n"
        "shares = duckdb.sql(f\"SELECT source, sync_wait_pct FROM read_parquet('{out}/summary.parquet')\").fetchall()\n"
        "print(json.dumps({'got': got, 'n': n, 'shares': dict(shares), 'saved': saved}))\n")
    r = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    got = [tuple(x) for x in res["got"]]
    want = sorted(((r["source"], r["gpu_idle_pct"], r["verdict"]) for r in rows if r["gpu_idle_pct"] is not None),
                  key=lambda t: (-t[1], t[0]))[:5]
    assert got == want and len(got) == 5
    assert res["n"] == len(findings)
    assert [tuple(x) for x in res["saved"]] == sorted((f["source"], f["id"], f["expected_saving_ms"], f["saving_model"])
                                                      for f in findings if f["expected_saving_ms"] is not None)
    assert res["shares"] == {r["source"]: r["shares_pct"]["sync_wait"] for r in rows}


def test_glob_sequential_equals_parallel_and_bad_input(tmp_path, capsys):
    ks = [p for p in kineto_traces() if p.stat().st_size < 100_000][:3]
    if len(ks) < 2:
        pytest.skip("small Kineto traces not available")
    d = tmp_path / "in"
    d.mkdir()
    for p in ks:
        shutil.copy(p, d / p.name)
    (d / "broken.json").write_text('{"traceEvents": [')
    a, b = tmp_path / "a", tmp_path / "b"
    rc = main(["analyze", str(d / "*.json*"), "-o", str(a), "-q", "--format", "json"])
    assert rc == 2                                       # the broken one
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "broken.json" in err[0]
    ra = {r["source"]: r for r in _jsonl(a / "summary.jsonl")}
    assert len(ra) == len(ks) + 1 and ra[str(d / "broken.json")]["error"]
    # --jobs 2 in a child process: a spawn Pool run inside the pytest process changes how the in-process
    # sampler tests that follow classify scope("tokenize") time (seen: test_collect's sampler test;
    # cause not found yet - see the stop note)
    r = subprocess.run([sys.executable, "-m", "inferscope", "analyze", *[str(d / p.name) for p in ks], "--jobs", "2",
                        "-o", str(b), "-q", "--format", "json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rb = {r["source"]: r for r in _jsonl(b / "summary.jsonl")}
    for src, r in rb.items():
        assert r == ra[src]


def test_many_inputs_need_a_folder_and_existing_paths(tmp_path, capsys):
    ks = kineto_traces()[:2]
    if len(ks) < 2:
        pytest.skip("Kineto traces not available")
    assert main(["analyze", str(ks[0]), str(ks[1]), "-o", str(tmp_path / "r.md"), "-q"]) == 2
    assert main(["analyze", str(ks[0]), str(tmp_path / "missing.json"), "-o", str(tmp_path / "o"), "-q"]) == 2
    assert main(["analyze", str(tmp_path / "nomatch-*.json"), "-o", str(tmp_path / "o"), "-q"]) == 2
    assert main(["analyze", str(ks[0]), str(ks[1]), "--jobs", "0", "-o", str(tmp_path / "o"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(e.startswith("inferscope: error:") for e in err), err


@pytest.mark.live
def test_summary_llm_columns_of_a_live_llm_run(tmp_path):
    """issue 28: ttft_ms / tpot_ms / tokens_per_s were always null in summary.jsonl/.parquet (the nested llm
    dicts were not flattened).  A live run of the demo, analysed with a trace that has no llm section."""
    pytest.importorskip("transformers")
    from pathlib import Path
    repo = Path(__file__).resolve().parents[1]
    trace = tmp_path / "demo.iscope"
    r = subprocess.run([sys.executable, "-m", "inferscope", "run", "-q", "--trace", str(trace), "--format", "json",
                        "--report", str(tmp_path / "run"), "--", sys.executable, str(repo / "examples" / "llm_demo.py"),
                        "--batch-size", "2", "--max-new-tokens", "4", "--requests", "2"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    other = kineto_traces()[0]
    out = tmp_path / "o"
    r = subprocess.run([sys.executable, "-m", "inferscope", "analyze", str(trace), str(other), "-o", str(out), "-q",
                        "--format", "json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {x["source"]: x for x in _jsonl(out / "summary.jsonl")}
    llm = json.loads((out / rows[str(trace)]["report_dir"] / "report.json").read_text())["llm"]
    want = {"ttft_ms": llm["ttft_ms"]["mean"], "ttft_p90_ms": llm["ttft_ms"]["p90"], "tpot_ms": llm["tpot_ms"]["mean"],
            "tpot_p90_ms": llm["tpot_ms"]["p90"], "tokens_per_s": llm["tokens_per_s"]["generated"],
            "prompt_tokens_per_s": llm["tokens_per_s"]["prompt"], "requests_per_s": llm["requests_per_s"]}
    assert rows[str(trace)]["llm"] == want
    assert all(isinstance(v, float) and v > 0 for v in want.values()), want
    pytest.importorskip("pyarrow")
    script = ("import json, sys, pyarrow.parquet as pq\n"
              "t = pq.read_table(sys.argv[1] + '/summary.parquet').to_pylist()\n"
              "print(json.dumps({r['source']: [r[k] for k in sys.argv[2:]] for r in t}))\n")
    r = subprocess.run([sys.executable, "-c", script, str(out), *want], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got[str(trace)] == list(want.values())
    assert got[str(other)] == [None] * len(want)          # no llm section: null, not 0
