"""inferscope sweep: the demo over two batch sizes (rows checked against each run's report.json),
the run plan (Cartesian product, substitution), the scaling statements, escaping, failures, bad input."""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import pytest

from inferscope.cli import main
from inferscope.errors import ConfigError
from inferscope.fleet.sweep import aggregate, parse_params, plan, scaling

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.live
def test_sweep_llm_demo_rows_match_reports(tmp_path, capsys):
    """The README's sweep (batch=1,2,4 over the demo, short generations): tokens/s per value from each run's
    llm section (issue 28: it said "throughput unknown" - the nested llm.tokens_per_s was read as a number)."""
    pytest.importorskip("transformers")
    out = tmp_path / "sw"
    rc = main(["sweep", "--param", "batch=1,2,4", "-o", str(out), "--",
               sys.executable, str(REPO / "examples" / "llm_demo.py"), "--batch-size", "{batch}",
               "--max-new-tokens", "4", "--requests", "2"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "scaling_summary.json" in printed and "batch: e2e " in printed
    assert "throughput unknown" not in printed
    s = json.loads((out / "scaling_summary.json").read_text())
    assert [r["params"]["batch"] for r in s["rows"]] == ["1", "2", "4"]
    csv_rows = list(csv.DictReader(io.StringIO((out / "scaling_summary.csv").read_text())))
    assert len(csv_rows) == 3
    for r, c in zip(s["rows"], csv_rows):
        rep = json.loads((out / r["report"]).read_text())
        assert r["exit_code"] == 0
        assert r["e2e_ms"] == rep["e2e_ms"] and float(c["e2e_ms"]) == pytest.approx(rep["e2e_ms"])
        assert r["verdict"] == rep["verdict"]["id"] == c["verdict"]
        for cat in rep["breakdown"]:
            assert r["shares_pct"][cat["category"]] == cat["pct"]
            assert float(c[f"{cat['category']}_pct"]) == pytest.approx(cat["pct"])
        llm = rep["llm"]
        assert llm["requests"] == 2 and llm["tokens_per_s"]["generated"] > 0
        assert r["throughput"] == llm["tokens_per_s"]["generated"] and r["throughput_unit"] == "tokens/s"
        assert float(c["throughput"]) == pytest.approx(r["throughput"]) and c["throughput_unit"] == "tokens/s"
        assert r["ttft_ms"] == llm["ttft_ms"]["mean"] > 0 and r["tpot_ms"] == llm["tpot_ms"]["mean"] > 0
        assert c["batch"] == r["params"]["batch"]
        # the run really used the substituted value
        assert "x batch " + r["params"]["batch"] in (out / Path(r["report"]).parent / "stdout.txt").read_text()
    sc = s["scaling"][0]
    assert sc["param"] == "batch" and sc["values"] == ["1", "2", "4"] and sc["throughput_unit"] == "tokens/s"
    thr = [r["throughput"] for r in s["rows"]]
    assert sc["throughput"] == thr
    per_value = "batch: tokens/s per value: " + ", ".join(f"{t:.4g} (batch={b})" for t, b in zip(thr, "124"))
    assert per_value in printed
    # where throughput stops scaling: the first value whose gain over the previous one is under the minimum
    gains = [100 * (thr[j] / thr[j - 1] - 1) for j in (1, 2)]
    stop = next((v for g, v in zip(gains, ("2", "4")) if g < s["min_throughput_gain_pct"]), None)
    assert sc["stops_scaling_at"] == stop
    assert (f"throughput stops scaling at batch={stop}" if stop else "throughput keeps scaling up to batch=4") in printed
    print(printed)
    html = (out / "scaling_summary.html").read_text()
    assert html.count("<svg") >= 3 and "<script" not in html and "Content-Security-Policy" in html


def test_items_param_is_the_fallback_without_llm_tokens():
    from inferscope.fleet.sweep import row_from_report
    run = {"params": {"batch": "8"}, "repeat": 1}
    rep = {"e2e_ms": 500.0, "breakdown": [], "verdict": {"id": "balanced"}, "llm": None}
    r = row_from_report(run, rep, 0, "runs/x/report.json", "batch")
    assert r["throughput"] == 16.0 and r["throughput_unit"] == "items/s" and r["ttft_ms"] is None
    rep["llm"] = {"ttft_ms": {"count": 1, "mean": 3.0, "p90": None}, "tpot_ms": {"count": 0, "mean": None},
                  "tokens_per_s": {"prompt": 50.0, "generated": 20.0}}
    r = row_from_report(run, rep, 0, "runs/x/report.json", "batch")
    assert (r["throughput"], r["throughput_unit"], r["ttft_ms"], r["tpot_ms"]) == (20.0, "tokens/s", 3.0, None)


def test_plan_cartesian_and_substitution():
    params = parse_params(["batch=1,2", "len=16,32,64"])
    runs = plan(params, ["--", "python", "app.py", "--bs={batch}", "--len", "{len}"], repeat=2)
    assert len(runs) == 12
    assert {(r["params"]["batch"], r["params"]["len"]) for r in runs} == {(b, n) for b in "12" for n in ("16", "32", "64")}
    r = next(r for r in runs if r["params"] == {"batch": "2", "len": "32"} and r["repeat"] == 2)
    assert r["argv"] == ["python", "app.py", "--bs=2", "--len", "32"]
    assert len({r["label"] for r in runs}) == 12
    with pytest.raises(ConfigError, match="does not appear"):
        plan(parse_params(["batch=1,2"]), ["python", "app.py"], 1)
    for bad in (["batch"], ["batch="], ["1x=1"], ["b=1,1"], ["b=1", "b=2"], ["b=1,,2"]):
        with pytest.raises(ConfigError):
            parse_params(bad)


def _row(b, e2e, thr, shares):
    return {"params": {"batch": b}, "repeat": 1, "e2e_ms": e2e, "throughput": thr, "throughput_unit": "tokens/s",
            "shares_pct": shares, "verdict": "x", "ttft_ms": None, "tpot_ms": None}


def test_scaling_stops_and_category_grows():
    params = parse_params(["batch=1,2,4,8"])
    rows = [_row("1", 10.0, 100.0, {"gpu_compute": 30.0, "framework_overhead": 70.0}),
            _row("2", 11.0, 182.0, {"gpu_compute": 45.0, "framework_overhead": 55.0}),
            _row("4", 20.0, 190.0, {"gpu_compute": 80.0, "framework_overhead": 20.0}),   # +4.4 %: stops here
            _row("8", 40.0, 200.0, {"gpu_compute": 90.0, "framework_overhead": 10.0})]
    s = scaling(aggregate(rows, params), params, 10.0)[0]
    assert s["stops_scaling_at"] == "4" and s["best_throughput_at"] == "8"
    assert s["grows_most"]["category"] == "gpu_compute" and s["grows_most"]["delta_pp"] == pytest.approx(60.0)
    assert any("stops scaling at batch=4" in x for x in s["statements"])
    # repeats: the statement gives the spread when the repeats' throughputs overlap
    rows_r = rows + [dict(_row("2", 11.0, 196.0, {"gpu_compute": 45.0}), repeat=2),
                     dict(_row("4", 20.0, 186.0, {"gpu_compute": 80.0}), repeat=2)]
    pts = aggregate(rows_r, params)
    assert pts[1]["runs"] == 2 and pts[1]["throughput"] == pytest.approx(189.0) and pts[1]["throughput_min"] == 182.0
    s3 = scaling(pts, params, 10.0)[0]
    assert s3["stops_scaling_at"] == "4" and any("repeats overlap (182-196 vs 186-190)" in x for x in s3["statements"])
    # no throughput: said so, no stop claimed
    rows2 = [dict(r, throughput=None) for r in rows]
    s2 = scaling(aggregate(rows2, params), params, 10.0)[0]
    assert s2["stops_scaling_at"] is None and any("throughput unknown" in x for x in s2["statements"])


def test_sweep_escapes_names_and_reports_failed_runs(tmp_path):
    out = tmp_path / "sw"
    prog = "import sys; sys.exit(3 if sys.argv[1] == '=1+1' else 0)"
    rc = main(["sweep", "--param", "tag=<b>x</b>,=1+1", "-q", "-o", str(out), "--", sys.executable, "-c", prog, "{tag}"])
    assert rc == 1                                     # one run's program failed
    s = json.loads((out / "scaling_summary.json").read_text())
    assert [r["exit_code"] for r in s["rows"]] == [0, 3]
    assert s["failed_runs"] == 1
    # the failed run's report is kept in its row, but it is no scaling point (issue 24)
    assert [r["failed"] for r in s["rows"]] == [False, True]
    pts = {tuple(p["params"].values())[0]: p for p in s["points"]}
    assert pts["=1+1"]["runs"] == 0 and pts["=1+1"]["failed_runs"] == 1 and pts["=1+1"]["e2e_ms"] is None
    assert pts["<b>x</b>"]["runs"] == 1 and pts["<b>x</b>"]["failed_runs"] == 0
    assert all(r["e2e_ms"] is not None for r in s["rows"])   # inferscope run reports failing programs too
    text = (out / "scaling_summary.csv").read_text()
    assert "'=1+1" in text and "\n=1+1" not in text
    html = (out / "scaling_summary.html").read_text()
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html


@pytest.mark.parametrize("argv,needle", [
    (["sweep", "--param", "batch", "--", "echo", "{batch}"], "NAME=V1"),
    (["sweep", "--param", "batch=1,2", "--", "echo", "x"], "does not appear"),
    (["sweep", "--param", "batch=1,2", "--repeat", "0", "--", "echo", "{batch}"], "--repeat"),
    (["sweep", "--param", "batch=1,2", "--items-param", "n", "--", "echo", "{batch}"], "--items-param"),
    (["sweep", "--param", "batch=1,2"], "command"),
])
def test_sweep_bad_input_one_line_exit_2(tmp_path, capsys, argv, needle):
    assert main(argv[:1] + ["-o", str(tmp_path / "o")] + argv[1:]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert not (tmp_path / "o" / "scaling_summary.json").exists()


def test_failed_runs_are_not_scaling_points():
    """A run that exits non-zero still writes a report (inferscope run reports failing programs), but it is
    no evidence of how throughput scales: left out of the means and the answer, and said so (issue 24)."""
    params = parse_params(["batch=1,2,4"])
    rows = [dict(_row("1", 10.0, 100.0, {}), failed=False), dict(_row("2", 11.0, 190.0, {}), failed=False),
            dict(_row("2", 5.0, 20.0, {}), repeat=2, failed=True, exit_code=1),      # crashed half way
            dict(_row("4", 3.0, 30.0, {}), failed=True, exit_code=1)]
    pts = aggregate(rows, params)
    assert [p["runs"] for p in pts] == [1, 1, 0] and [p["failed_runs"] for p in pts] == [0, 1, 1]
    assert pts[1]["throughput"] == 190.0 and pts[2]["throughput"] is None
    s = scaling(pts, params, 10.0)[0]
    assert s["values"] == ["1", "2"] and s["stops_scaling_at"] is None
    assert any("left out, every run failed" in x and "batch=4" in x for x in s["statements"])
