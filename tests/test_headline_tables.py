"""Issue 47 item 2: every figure the report.md headline states agrees with the table it summarises.

For every shared trace (../shared/traces), every vendored test trace and every example .iscope, the headline's
numbers are parsed from the rendered text and recomputed here from the tables of report.json (the breakdown rows,
the threads table, the GPU section): a headline cannot say '0.0 ms waiting' for a thread whose table row holds
seconds of run queue.  Tolerance: half a unit of the last digit shown.
"""
import re
from pathlib import Path

import pytest

from conftest import REPO, kineto_traces, nsys_traces
from helpers import load_gz_iscope
from inferscope.analyze.pipeline import analyze
from inferscope.ingest import load_trace
from inferscope.report.markdown import headline
from inferscope.result import from_dict

INPUTS = kineto_traces() + nsys_traces() + sorted((REPO / "examples" / "reports").glob("*.iscope")) \
    + sorted((REPO / "tests" / "data" / "live_gpu").glob("*.iscope*"))

NUM = r"([\d,]+(?:\.\d+)?)"


def _n(s: str) -> tuple[float, float]:
    """(value, half a unit of its last shown digit)."""
    s = s.replace(",", "")
    nd = len(s.split(".")[1]) if "." in s else 0
    return float(s), 0.5 * 10 ** -nd + 1e-9


def _close(shown: str, truth: float, what: str):
    v, tol = _n(shown)
    assert abs(v - truth) <= tol, f"{what}: headline {shown}, table {truth}"


@pytest.mark.shared
@pytest.mark.parametrize("path", [pytest.param(p, id=p.name.split(".")[0]) for p in INPUTS])
def test_headline_figures_match_tables(path: Path, tmp_path):
    res = analyze(load_gz_iscope(path, tmp_path) if path.name.endswith(".iscope.gz") else load_trace(path))
    text = headline(from_dict(res))
    checked = 0
    # end-to-end latency = the window = the sum of the breakdown rows
    m = re.search(r"End-to-end latency: " + NUM + " ms", text)
    if m:
        _close(m.group(1), sum(r["ns"] for r in res["breakdown"]) / 1e6, "e2e")
        _close(m.group(1), res["window"]["dur_ms"], "e2e vs window")
        checked += 1
    # breakdown lines: category and part rows by label
    rows = {r["label"]: r for r in res["breakdown"]}
    parts = {p["label"]: p for r in res["breakdown"] for p in r["parts"]}
    body = text.split("Breakdown:", 1)[1].split("Diagnosis:", 1)[0] if "Breakdown:" in text else ""
    for line in body.splitlines():
        lm = re.match(r"^(\s*)- (.+?):\s+" + NUM + r" ms \(" + NUM + r"%\)$", line)
        if not lm:
            continue
        row = (parts if lm.group(1) else rows)[lm.group(2)]
        _close(lm.group(3), row["ns"] / 1e6, f"{lm.group(2)} ms")
        _close(lm.group(4), 100.0 * row["ns"] / max(sum(r["ns"] for r in res["breakdown"]), 1), f"{lm.group(2)} %")
        checked += 1
    # the busiest other thread: recomputed from the threads table (most on-CPU time where sampled, else
    # recorded minus off-CPU; the first in table order on a tie)
    th = res.get("threads") or {}
    tm = re.search(r"\(busiest: (.+), " + NUM + r" ms recorded(?:: " + NUM + r" ms on CPU, " + NUM
                   + r" ms in the run queue)?, " + NUM + r" ms off-CPU\)", text)
    others = [r for r in th.get("threads") or [] if not r["critical"]]
    if others and th.get("critical"):
        assert tm, "headline names no busiest other thread although the table has non-critical threads"
        busy = [r["on_cpu_ms"] if r["on_cpu_ms"] is not None else r["recorded_ms"] - r["waiting_ms"] for r in others]
        top = others[busy.index(max(busy))]
        assert tm.group(1) == top["thread"]
        _close(tm.group(2), top["recorded_ms"], "recorded")
        _close(tm.group(5), top["waiting_ms"], "off-CPU")
        assert (tm.group(3) is None) == (top["on_cpu_ms"] is None)
        if top["on_cpu_ms"] is not None:
            _close(tm.group(3), top["on_cpu_ms"], "on CPU")
            _close(tm.group(4), top["run_queue_ms"] or 0.0, "run queue")
        checked += 1
    else:
        assert not tm
    am = re.search(r"All threads together on CPU: " + NUM + r"% of the window .*the critical thread\(s\) " + NUM + "%", text)
    if am:
        on = [r for r in th["threads"] if r["on_cpu_ms"] is not None]
        _close(am.group(1), 100.0 * sum(r["on_cpu_ms"] for r in on) / res["window"]["dur_ms"], "all threads on CPU")
        _close(am.group(2), 100.0 * sum(r["on_cpu_ms"] for r in on if r["critical"]) / res["window"]["dur_ms"],
               "critical on CPU")
        checked += 1
    gm = re.search(r"GPU is idle for " + NUM + "% of the timeline", text)
    if gm:
        _close(gm.group(1), 100.0 * res["gpu"]["idle_ms"] / res["window"]["dur_ms"], "GPU idle")
        checked += 1
    assert checked >= 2, text


def test_planted_run_queue_thread_in_headline():
    """The issue's case, planted: a helper thread 28,662.6 ms recorded of which 20,874.6 ms in the run queue and no
    off-CPU time, beside a thread recorded longer but asleep.  The headline names the busy one and states its run
    queue as the table holds it (it used to say '0.0 ms waiting')."""
    res = analyze(load_trace(REPO / "examples" / "reports" / "cpu_demo.iscope"))
    rows = res["threads"]["threads"]
    rows.append({"thread": "sleepy (2)", "pid": 1, "tid": 2, "critical": False, "recorded_ms": 30000.0,
                 "waiting_ms": 29990.0, "on_cpu_ms": 10.0, "run_queue_ms": 0.0})
    rows.append({"thread": "worker (3)", "pid": 1, "tid": 3, "critical": False, "recorded_ms": 28662.6,
                 "waiting_ms": 0.0, "on_cpu_ms": 7788.0, "run_queue_ms": 20874.6})
    text = headline(from_dict(res))
    assert ("busiest: worker (3), 28,662.6 ms recorded: 7,788.0 ms on CPU, 20,874.6 ms in the run queue, "
            "0.0 ms off-CPU") in text, text
