"""Phases of a run (analyze/run_phases.py): the default window is the steady state; start-up and
teardown are found by rules relative to the trace and named in the report."""
import pytest

from conftest import shared_path
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.pipeline import analyze
from inferscope.ingest import load_trace
from inferscope.report.markdown import headline, render_markdown


def test_memfusion_teardown_left_out_and_named():
    tr = load_trace(shared_path("nsys", "memfusion_report1.sqlite"))
    full = analyze(tr, AnalyzeOptions(window="all"))
    assert full["verdict"]["id"] == "framework_bound"        # the whole trace: teardown decides
    res = analyze(tr)
    rp = res["run_phases"]
    assert res["window"]["kind"] == "steady" and rp["applied"] and rp["startup"] is None
    td = rp["teardown"]
    assert td["rule"].startswith("release_after_gpu")
    top = {r["name"]: r for r in td["top"]}
    # 5,490 cuModuleUnload calls, 479 ms (recounted with sqlite below)
    assert top["cuModuleUnload"]["count"] == 5490 and top["cuModuleUnload"]["ms"] == pytest.approx(479.449, abs=0.01)
    # the window ends with the last GPU work's host side, before the first release call
    assert res["window"]["end_ns"] <= td["start_ns"] and res["e2e_ms"] < 10
    assert res["verdict"]["id"] not in ("framework_bound", "launch_bound")
    assert res["verdict"]["id"] == "gpu_bound"
    assert "cuModuleUnload" in headline(res) and "cuModuleUnload" in render_markdown(res)
    # every GPU kernel of the trace is inside the steady window
    assert res["kernels"]["count"] == full["kernels"]["count"]


def test_memfusion_unload_count_independent():
    import sqlite3
    con = sqlite3.connect(f"file:{shared_path('nsys', 'memfusion_report1.sqlite')}?mode=ro", uri=True)
    n, tot = con.execute("SELECT count(*), sum(end-start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
                         "ON r.nameId = s.id WHERE s.value = 'cuModuleUnload'").fetchone()
    assert n == 5490 and tot / 1e6 == pytest.approx(479.449, abs=0.01)


def test_mi250_lazy_launch_is_startup_not_launch_bound():
    tr = load_trace(shared_path("kineto", "hta_amd_mi250_minitoy.json.gz"))
    full = analyze(tr, AnalyzeOptions(window="all"))
    assert full["verdict"]["id"] == "launch_bound"           # one 6.5 ms lazy hipLaunchKernel decides it
    res = analyze(tr)
    su = res["run_phases"]["startup"]
    assert su is not None and su["rule"].startswith("first_step")
    assert any(r["name"] == "hipLaunchKernel" and r["ms"] > 6 for r in su["top"])
    assert res["window"]["kind"] == "steady"
    assert res["verdict"]["id"] != "launch_bound"
    # the lazy launch is outside the window
    assert all(r["max_us"] < 1000 for r in res["culprits"]["apis"] if r["name"] == "hipLaunchKernel")


def test_scope_and_explicit_windows_win():
    tr = load_trace(shared_path("nsys", "memfusion_report1.sqlite"))
    assert analyze(tr, AnalyzeOptions(window="all"))["window"]["kind"] == "trace"
    assert analyze(tr, AnalyzeOptions(window="gpu"))["window"]["kind"] == "gpu"


@pytest.mark.parametrize("name", ["tracelens_h100_qwen1.5-0.5b-chat_textgen.json.gz", "hta_negative_queue_a100_80gb_rank0.json.gz",
                                  "hta_trace_diff_control_a100_rank3.json.gz", "hta_ns_resolution_v100_rank0.pt.trace.json.gz"])
def test_steady_traces_are_not_cut(name):
    # typical steps and no outlier calls: nothing to leave out, the window stays the whole trace
    res = analyze(load_trace(shared_path("kineto", name)))
    assert res["window"]["kind"] == "trace" and not res["run_phases"]["cut"]


def test_kernel_csv_is_full_markdown_top():
    # hta_trace_diff_control has more than 20 distinct kernels: the CSV table holds all of them
    tr = load_trace(shared_path("kineto", "hta_trace_diff_control_a100_rank3.json.gz"))
    res = analyze(tr)
    k = res["kernels"]
    assert len(k["top"]) == 20 and k["distinct"] > 20
    rows = res["tables"]["kernels"]["rows"]
    assert len(rows) == k["distinct"]
    assert sum(r[2] for r in rows) == pytest.approx(k["kernel_sum_ms"], rel=1e-6)
    md = render_markdown(res)
    assert f"({k['distinct'] - 20} more rows in the CSV table)" in md


def test_html_names_teardown_and_culprit_tables(tmp_path):
    from inferscope.report.html import build_html
    tr = load_trace(shared_path("nsys", "memfusion_report1.sqlite"))
    res = analyze(tr)
    doc = build_html(res, tr)
    assert 'id="run-phases"' in doc and "Teardown 877.5 ms" in doc and "cuModuleUnload" in doc
    apis = {r[0]: r for r in res["tables"]["top_apis"]["rows"]}
    assert "cuModuleUnload" not in apis                  # teardown is outside the steady window
    assert "top_apis" in doc and "cudaStreamSynchronize" in apis


def test_long_call_inside_a_serving_step_is_not_startup():
    """SGLang's MI300X decode trace: one execute_... step holding a 463 ms aten::copy_ (the step's own
    wait) - steady work of the step, not start-up; the window is the whole step."""
    tr = load_trace(shared_path("kineto", "tracelens_mi300x_sglang_qwen3_8b_decode.json.gz"))
    res = analyze(tr)
    assert res["run_phases"]["startup"] is None
    assert res["llm"]["steps"][0]["wall_ms"] <= res["e2e_ms"]
