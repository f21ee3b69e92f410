"""inferscope diff: two shared traces, report.json inputs, noise rule, CI exit code, escaping, bad input,
and before/after live runs of a zoo program."""
from __future__ import annotations

import copy
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

import inferscope
from inferscope.cli import main
from inferscope.compare import Side, diff_paths, diff_sides, noise_for

from conftest import shared_path

ZOO = Path(__file__).resolve().parents[1] / "examples" / "zoo"
CONTROL = ("kineto", "hta_trace_diff_control_a100_rank3.json.gz")     # DLRM training, A100, 6 steps, gpu_bound
SYNCS = ("kineto", "hta_negative_queue_a100_80gb_rank0.json.gz")      # same model family, 5 steps, sync_bound


@pytest.fixture(scope="module")
def pair():
    before, after = shared_path(*CONTROL), shared_path(*SYNCS)
    return before, after, diff_paths(str(before), str(after))


def test_shared_pair_change_in_the_right_category(pair):
    before, after, d = pair
    rb = inferscope.analyze(str(before)).to_dict()
    ra = inferscope.analyze(str(after)).to_dict()
    # numbers come from the two reports, recomputed independently here
    assert d["e2e"]["before_ms"] == rb["e2e_ms"] and d["e2e"]["after_ms"] == ra["e2e_ms"]
    cb = {c["category"]: c for c in rb["breakdown"]}
    ca = {c["category"]: c for c in ra["breakdown"]}
    for row in d["categories"]:
        c = row["category"]
        assert row["delta_ms"] == pytest.approx(ca[c]["ms"] - cb[c]["ms"], abs=1e-9)
        assert row["delta_pp"] == pytest.approx(ca[c]["pct"] - cb[c]["pct"], abs=1e-9)
    # the expected change: host sync wait appeared (0.2 % -> 45 %), GPU compute share fell
    assert d["largest_increase"] == "sync_wait"
    sw = next(r for r in d["categories"] if r["category"] == "sync_wait")
    assert sw["delta_pp"] > 40
    assert (d["verdict_before"]["id"], d["verdict_after"]["id"]) == ("gpu_bound", "sync_bound") and d["verdict_changed"]
    # noise from the profiler steps of both traces (Welch on the per-step wall times)
    n = d["noise"]
    assert n["unit_kind"] == "steps"
    sb = [s["wall_ms"] for s in rb["phases"]["steps"]]
    sa = [s["wall_ms"] for s in ra["phases"]["steps"]]
    assert (n["before"]["n"], n["after"]["n"]) == (len(sb), len(sa)) == (6, 5)
    assert n["before"]["mean_ms"] == pytest.approx(statistics.mean(sb))
    assert n["after"]["std_ms"] == pytest.approx(statistics.stdev(sa))
    assert n["beyond_noise"] and d["change"]["id"] == "regression"
    assert d["change"]["change_pct"] == pytest.approx(100 * (statistics.mean(sa) / statistics.mean(sb) - 1))
    assert any("different numbers of steps" in w for w in d["warnings"])
    # kernels: the names that changed most exist on both sides with the stated times
    k = d["named"]["kernel"]
    assert k["changed"] and k["appeared_count"] > 0 and k["disappeared_count"] > 0
    assert abs(k["changed"][0]["delta_ms"]) >= abs(k["changed"][-1]["delta_ms"])


def test_same_trace_is_no_change_within_noise(pair):
    before, _, _ = pair
    d = diff_paths(str(before), str(before))
    assert d["e2e"]["delta_ms"] == 0 and d["change"]["id"] == "within_noise"
    assert all(r["delta_ms"] == 0 for r in d["categories"])
    assert all(t["appeared_count"] == 0 and t["disappeared_count"] == 0 for t in d["named"].values())


def test_report_json_inputs_match_trace_inputs(pair, tmp_path):
    before, after, d = pair
    for name, p in (("b", before), ("a", after)):
        assert main(["analyze", str(p), "-o", str(tmp_path / name), "--format", "json", "-q"]) == 0
    dj = diff_paths(str(tmp_path / "b" / "report.json"), str(tmp_path / "a"))   # a folder holding report.json works too
    assert dj["before"]["input"] == "report.json"
    assert dj["e2e"] == d["e2e"]
    assert [(r["category"], r["delta_ms"]) for r in dj["categories"]] == [(r["category"], r["delta_ms"]) for r in d["categories"]]
    assert dj["change"]["id"] == "regression" and dj["noise"]["unit_kind"] == "steps"   # steps are in report.json


def test_cli_outputs_and_fail_on_regression(pair, tmp_path, capsys):
    before, after, _ = pair
    out = tmp_path / "o"
    assert main(["diff", str(before), str(after), "-o", str(out), "--format", "md,json,html"]) == 0
    text = capsys.readouterr().out
    assert "sync_bound" in text and "regression" in text
    d = json.loads((out / "diff.json").read_text())
    assert d["largest_increase"] == "sync_wait"
    md = (out / "diff.md").read_text()
    assert "| sync_wait |" in md
    html = (out / "diff.html").read_text()
    assert "Content-Security-Policy" in html and "<script" not in html and "http://" not in html.replace("http://www.w3.org", "")
    assert main(["diff", str(before), str(after), "-o", str(out), "-q", "--fail-on-regression", "10"]) == 1
    assert main(["diff", str(before), str(after), "-o", str(out), "-q", "--fail-on-regression", "500"]) == 0
    assert main(["diff", str(after), str(before), "-o", str(out), "-q", "--fail-on-regression", "0"]) == 0   # an improvement


@pytest.mark.parametrize("argv,needle", [
    (["diff", "/nonexistent/a.json", "/nonexistent/b.json"], "no such file"),
    (["diff", "{before}", "{before}", "--format", "pdf"], "unknown diff format"),
    (["diff", "{before}", "{before}", "--fail-on-regression", "-5"], "--fail-on-regression"),
    (["diff", "{junk}", "{before}"], "not a recognised trace"),
])
def test_bad_input_one_line_exit_2(pair, tmp_path, capsys, argv, needle):
    before = pair[0]
    junk = tmp_path / "junk.txt"
    junk.write_text("hello")
    argv = [a.format(before=before, junk=junk) for a in argv] + ["-o", str(tmp_path / "o"), "-q"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


def _report(tmp_path, pair) -> dict:
    p = tmp_path / "r" / "report.json"
    if not p.exists():
        assert main(["analyze", str(pair[0]), "-o", str(p.parent), "--format", "json", "-q"]) == 0
    return json.loads(p.read_text())


def test_untrusted_names_escaped_and_llm_section(pair, tmp_path):
    rb = _report(tmp_path, pair)
    ra = copy.deepcopy(rb)
    evil = "evil|kernel<script>alert(1)</script>`x`\u202e"
    ra["kernels"]["top"][0]["name"] = evil
    ra["llm"] = {"ttft_ms": 120.0, "tpot_ms": 20.0, "tokens_per_s": 50.0}
    rb["llm"] = {"ttft_ms": 100.0, "tpot_ms": 25.0, "tokens_per_s": 40.0}
    pb, pa = tmp_path / "b.json", tmp_path / "a.json"
    pb.write_text(json.dumps(rb))
    pa.write_text(json.dumps(ra))
    out = tmp_path / "o"
    assert main(["diff", str(pb), str(pa), "-o", str(out), "--format", "md,json,html", "-q"]) == 0
    d = json.loads((out / "diff.json").read_text())
    assert evil in [r["name"] for r in d["named"]["kernel"]["appeared"]]
    m = {r["metric"]: r for r in d["llm"]["metrics"]}
    assert m["ttft_ms"]["delta"] == pytest.approx(20.0) and m["ttft_ms"]["better"] is False
    assert m["tpot_ms"]["delta"] == pytest.approx(-5.0) and m["tpot_ms"]["better"] is True
    assert m["tokens_per_s"]["delta_pct"] == pytest.approx(25.0) and m["tokens_per_s"]["better"] is True
    md = (out / "diff.md").read_text()
    html = (out / "diff.html").read_text()
    from helpers import md_markup, md_render
    assert md_markup(md) == [] and "evil\\|kernel\\<script>" in md and "\u202e" not in md
    assert "evil|kernel&lt;script&gt;" in md_render(md)
    assert "<script>" not in html and "evil|kernel&lt;script&gt;" in html and "\u202e" not in html
    assert "| ttft_ms |" in md
    # no llm section on either side: no LLM table, no error
    rb.pop("llm")
    ra.pop("llm")
    pb.write_text(json.dumps(rb))
    pa.write_text(json.dumps(ra))
    assert diff_paths(str(pb), str(pa))["llm"] is None


def _side(steps: list[float], name="x") -> Side:
    return Side(name, {"e2e_ms": sum(steps), "breakdown": [], "phases": {"steps": [{"wall_ms": v} for v in steps]}})


def test_noise_rule_welch_band():
    b = [10.0, 10.4, 9.6, 10.2, 9.8]
    a_close = [10.1, 10.5, 9.7, 10.3, 9.9]        # +1 %: inside the band
    a_far = [13.0, 13.4, 12.6, 13.2, 12.8]        # +30 %
    n = noise_for(_side(b), _side(a_close))
    se = (statistics.variance(b) / 5 + statistics.variance(a_close) / 5) ** 0.5
    assert n["se_ms"] == pytest.approx(se) and n["band_ms"] == pytest.approx(2.306 * se)   # df = 8 (equal variances)
    assert not n["beyond_noise"]
    assert diff_sides(_side(b), _side(a_close))["change"]["id"] == "within_noise"
    assert diff_sides(_side(b), _side(a_far))["change"]["id"] == "regression"
    assert diff_sides(_side(a_far), _side(b))["change"]["id"] == "improvement"
    # beyond the band but below the minimum change: still within noise; --min-change 0 makes it a regression
    tight_b = [10.0, 10.01, 9.99, 10.0, 10.0]
    tight_a = [10.5, 10.51, 10.49, 10.5, 10.5]
    assert noise_for(_side(tight_b), _side(tight_a))["beyond_noise"]
    assert diff_sides(_side(tight_b), _side(tight_a))["change"]["id"] == "within_noise"
    assert diff_sides(_side(tight_b), _side(tight_a), min_change_pct=0)["change"]["id"] == "regression"
    # no repeated unit: noise unknown, the e2e change decides
    d = diff_sides(_side([10.0]), _side([20.0]))
    assert d["noise"] is None and d["change"]["id"] == "regression" and not d["change"]["noise_known"]


# ------------------------------------------------------------------------------------------------
# live: the same zoo program twice (within noise), then with the tokenizer changed
# ------------------------------------------------------------------------------------------------
def _live(tmp_path, runs: dict[str, list[str]]) -> dict[str, Path]:
    """Start the runs together and release their request loops at the same moment (so they run the
    same code under the same machine load), wait for all."""
    pytest.importorskip("torch")
    import time
    procs = {}
    start = tmp_path / f"start-{'-'.join(runs)}"
    for name, args in runs.items():
        args = [*args, "--start-file", str(start)]
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "inferscope", "run", "-q", "--format", "json", "--report",
             str(tmp_path / name / "report.json"), "--trace", str(tmp_path / f"{name}.iscope"), "--",
             sys.executable, str(ZOO / "tokenize_requests.py"), *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    deadline = time.monotonic() + 150
    while len(list(tmp_path.glob(start.name + ".ready.*"))) < len(runs) and time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs.values()):
            break
        time.sleep(0.01)
    start.touch()
    for name, p in procs.items():
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-2000:]
    return {name: tmp_path / f"{name}.iscope" for name in runs}


@pytest.mark.live
@pytest.mark.live_retry
def test_live_runs_same_program_within_noise_and_tokenizer_change(tmp_path):
    # Two runs of the same program, side by side, request loops released together: the same code under
    # the same machine load.  (Run one after the other on a shared, busy 2-core box they measured up to
    # 35 % apart per request, and 27-41 % when only their start was shared: load from other processes,
    # which within-run variance cannot see; the diff reports the machine load under environment/warnings.)
    # Requests wait 20 ms for a (simulated) model server, so their wall time is less exposed to CPU
    # contention than a pure-CPU loop.
    io = ["--io-ms", "20"]
    t = _live(tmp_path, {"fast_a": ["--fast-tokenizer", *io], "fast_b": ["--fast-tokenizer", *io]})
    same = diff_paths(str(t["fast_a"]), str(t["fast_b"]))
    assert same["noise"]["unit"] == "request" and same["noise"]["before"]["n"] == 16
    # not within noise ~1 in 7 on a saturated shared 2-core box (one run starved of CPU), and once in a fresh-clone
    # CI run without the busy-machine warning (-10 %, proc.cpu_pct 45): live_retry (a real bias of the diff fails
    # both attempts)
    assert same["change"]["id"] == "within_noise", same["change"]
    assert set(same["environment"]["before"]) >= {"cpu.util_pct", "proc.cpu_pct"}
    # the slow tokenizer beside a fast run, released together (run alone after the pair, on a busy box the
    # slow run read within noise of the earlier fast one in 2 of 2 full suites beside other jobs: -12.7 %
    # and -42.5 % with a noise band wider than that - another load); a pair that is not an improvement: live_retry
    sn, fn = "slow", "fast_e"
    r = _live(tmp_path, {sn: io, fn: ["--fast-tokenizer", *io]})
    d = diff_paths(str(r[sn]), str(r[fn]))
    assert d["change"]["id"] == "improvement", d["change"]
    assert d["largest_decrease"] == "cpu_preprocessing"
    # the program's own work: waiting parts are the machine's (beside two CPU hogs the slow run's run queue fell
    # more than its tokenization once, 2026-11-27)
    parts = [p for c in d["categories"] if c["category"] != "waiting" for p in c["parts"]]
    assert min(parts, key=lambda p: p["delta_ms"])["name"] == "tokenization", parts
    tok = next(p for p in parts if p["name"] == "tokenization")
    # bounds at about half the typical figures: tokenization is 73 % of the slow run's time less its waiting
    # (2026-11-27); of the whole window it fell to 17 % once beside the fast run on a busy box (load ~2.5), its
    # run queue grown
    own_ms = sum(c["before_ms"] for c in d["categories"] if c["category"] != "waiting")
    assert tok["before_ms"] > 0.35 * own_ms and tok["after_ms"] < tok["before_ms"] / 2, (tok, own_ms)
    # the slow tokenizer's function is gone from the sampled hottest functions
    assert "_toy_tokenizer.py:tokenize" in [r["name"] for r in d["named"]["function"]["disappeared"]]
    # report.json inputs of the same runs: per-occurrence times are not in report.json, so the
    # noise is unknown and the e2e change decides (still an improvement in the same category)
    dj = diff_paths(str(tmp_path / sn / "report.json"), str(tmp_path / fn / "report.json"))
    assert dj["noise"] is None and dj["change"]["id"] == "improvement" and dj["largest_decrease"] == "cpu_preprocessing"


@pytest.mark.live
def test_diff_of_batch_sizes_judges_the_work_done(tmp_path):
    """Batch 16 vs batch 1 of the same generate() work (zoo_generate_batch.py, self-timed): the run is longer
    but makes far more tokens per second; the diff normalises by work and calls it an improvement of
    throughput, with the latency change beside it (issue 24 item 4)."""
    pytest.importorskip("transformers")
    truth, reps = {}, {}
    for b in (1, 16):
        d = tmp_path / f"b{b}"
        d.mkdir()
        r = subprocess.run([sys.executable, "-m", "inferscope", "run", "--format", "json", "--report", str(d / "report.json"),
                            "-q", "--", sys.executable, str(ZOO / "zoo_generate_batch.py"), str(b)],
                           capture_output=True, text=True, timeout=240, cwd=d)
        assert r.returncode == 0, r.stderr[-2000:]
        truth[b] = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("{")][-1])
        reps[b] = str(d / "report.json")
    d = diff_paths(reps[1], reps[16])
    w = d["work"]
    assert w["unit"] == "generated token" and w["metric"] == "tokens_per_s"
    own_ratio = truth[16]["tokens_per_s"] / truth[1]["tokens_per_s"]    # 9.6x (2026-11-25)
    assert w["after"] / w["before"] == pytest.approx(own_ratio, rel=0.15), (w, truth)
    assert w["delta_pct"] == pytest.approx(100 * (w["after"] / w["before"] - 1), rel=1e-9)
    # per unit of work: window ms per generated token = 1000 / tokens/s on each side
    assert w["ms_per_unit_before"] == pytest.approx(1e3 / w["before"]) and w["ms_per_unit_after"] == pytest.approx(1e3 / w["after"])
    ch = d["change"]
    assert ch["id"] == "improvement" and ch["basis"] == "throughput", ch
    assert ch["change_pct"] == pytest.approx(w["delta_pct"])
    assert "tokens/s" in ch["text"]
    # the latency call is still made and shown: the window is longer (+67 %), and the two calls disagree;
    # on a busy host the latency change can sit inside the measured noise (seen under load 4-5): then no
    # trade-off is claimed
    # the latency call follows the runs' own wall times (one after the other: beside other jobs a batch-16 run came
    # out shorter than the batch-1 run before it once, load ~5, and the call said improvement)
    wall = truth[16]["wall_ms"] / truth[1]["wall_ms"]
    ok = {"regression", "within_noise"} if wall > 1.1 else {"improvement", "within_noise"} if wall < 1 / 1.1 else \
        {"regression", "within_noise", "improvement"}
    assert ch["latency"]["id"] in ok, (ch, wall)
    assert bool(ch["tradeoff"]) == (ch["latency"]["id"] == "regression"), ch
    assert "latency" in ch["text"] or ch["latency"]["id"] == "within_noise"
    assert not inferscope.compare.regressed_beyond(d, 5.0)        # --fail-on-regression follows the work-normalised call
    # reversed: a throughput regression
    back = diff_paths(reps[16], reps[1])
    assert back["change"]["id"] == "regression" and back["change"]["basis"] == "throughput"


def test_diff_work_falls_back_to_requests_and_needs_both_sides():
    base = {"e2e_ms": 100.0, "breakdown": [], "verdict": {"id": "x"}, "findings": [], "source": {}, "window": {}}
    rb = dict(base, llm={"tokens_per_s": {"generated": None, "prompt": None}, "requests_per_s": 10.0})
    ra = dict(base, e2e_ms=150.0, llm={"tokens_per_s": {"generated": None, "prompt": None}, "requests_per_s": 20.0})
    d = diff_sides(Side("a.json", rb), Side("b.json", ra))
    assert d["work"]["unit"] == "request" and d["work"]["delta_pct"] == pytest.approx(100.0)
    assert d["change"]["id"] == "improvement" and d["change"]["latency"]["id"] == "regression"
    # only one side knows its work: no work call, the latency verdict as before
    d2 = diff_sides(Side("a.json", rb), Side("b.json", dict(base, e2e_ms=150.0)))
    assert d2["work"] is None and d2["change"]["id"] == "regression" and d2["change"]["basis"] == "e2e"
    # equal throughput within the minimum change: within_noise, even though the window doubled
    ra3 = dict(base, e2e_ms=200.0, llm={"tokens_per_s": {"generated": None, "prompt": None}, "requests_per_s": 10.5})
    assert diff_sides(Side("a.json", rb), Side("b.json", ra3))["change"]["id"] == "within_noise"


def test_largest_change_leaves_the_run_queue_out():
    """A busy host's run-queue wait is not the program: the category that grew/shrank most is judged without
    waiting's run_queue part (the category rows still carry the whole change)."""
    from inferscope.compare import diff_sides

    def rep(pre, off, rq):
        return {"e2e_ms": pre + off + rq, "breakdown": [
            {"category": "cpu_preprocessing", "ms": pre, "pct": 0.0, "parts": [{"name": "tokenization", "ms": pre, "pct": 0.0}]},
            {"category": "waiting", "ms": off + rq, "pct": 0.0,
             "parts": [{"name": "off_cpu", "ms": off, "pct": 0.0}, {"name": "run_queue", "ms": rq, "pct": 0.0}]}]}
    # tokenization -120 ms; waiting -300 ms, of which -280 ms run queue (the other run had a busier host)
    d = diff_sides(Side("b", rep(400.0, 100.0, 300.0)), Side("a", rep(280.0, 80.0, 20.0)))
    w = next(c for c in d["categories"] if c["category"] == "waiting")
    assert w["delta_ms"] == pytest.approx(-300.0)
    assert d["largest_decrease"] == "cpu_preprocessing"
    # the program's own off-CPU wait grew: that counts
    d = diff_sides(Side("b", rep(400.0, 100.0, 300.0)), Side("a", rep(380.0, 260.0, 0.0)))
    assert d["largest_increase"] == "waiting" and d["largest_decrease"] == "cpu_preprocessing"


def test_waiting_without_listed_parts_is_off_cpu():
    """A report lists waiting's parts only when the run queue has time; compared with one that lists them,
    its waiting is all off-CPU (a live tokenizer diff read off_cpu -299 ms, 'vanished', as the largest part
    decrease when the faster run had no run-queue time)."""
    from inferscope.compare import diff_sides

    def rep(tok, off, rq):
        wait = {"category": "waiting", "ms": off + rq, "pct": 0.0, "parts": []}
        if rq:
            wait["parts"] = [{"name": "off_cpu", "ms": off, "pct": 0.0}, {"name": "run_queue", "ms": rq, "pct": 0.0}]
        return {"e2e_ms": tok + off + rq, "breakdown": [
            {"category": "cpu_preprocessing", "ms": tok, "pct": 0.0, "parts": [{"name": "tokenization", "ms": tok, "pct": 0.0}]},
            wait]}
    d = diff_sides(Side("b", rep(197.2, 299.3, 2.8)), Side("a", rep(53.3, 300.1, 0.0)))
    parts = {p["name"]: p for c in d["categories"] for p in c["parts"]}
    assert parts["off_cpu"]["after_ms"] == pytest.approx(300.1) and parts["off_cpu"]["delta_ms"] == pytest.approx(0.8)
    assert min(parts.values(), key=lambda p: p["delta_ms"])["name"] == "tokenization"
