"""bench/soak.py (issue 44 item 3): the soak harness's own helpers on planted input, and a short live soak with a
tiny trace buffer asserting the bounded properties that do not depend on timing."""
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable


def _soak():
    spec = importlib.util.spec_from_file_location("bench_soak", REPO / "bench" / "soak.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def test_parse_stdout_reads_the_programs_lines():
    r = _soak().parse_stdout("noise\nsoak_start 100.5\nsoak_tick 110.5 42\nother 1\nsoak_tick 120.5 90\n"
                             "soak_end 125.0 111 4.5 60\n")
    assert r == {"start_unix_s": 100.5, "ticks": [(110.5, 42), (120.5, 90)], "end_unix_s": 125.0,
                 "requests": 111, "requests_per_s": 4.5}


def test_rss_growth_is_measured_after_the_first_minute():
    # planted: 200 MB during the first minute, then steps to 230 MB and back to 210 MB
    kb = 1024
    s = [{"t_s": t, "program_rss_kb": v * kb, "run_parent_rss_kb": 30 * kb}
         for t, v in [(0, 100), (30, 200), (60, 200), (90, 230), (150, 210)]]
    g = _soak().rss_growth(s, duration_s=150)
    assert g["mark_s"] == 60 and g["at_mark_mb"] == 200 and g["max_after_mark_mb"] == 230
    assert g["growth_after_mark_mb"] == 30 and g["first_mb"] == 100 and g["last_mb"] == 210
    assert g["run_parent_max_mb"] == 30 and g["samples"] == 5
    # second half (t >= 75 s): 230 MB at 90 s, 210 MB at 150 s: -20 MB per minute
    assert g["second_half_slope_mb_per_min"] == pytest.approx(-20)
    # shorter than 2 minutes: the mark is half the run
    assert _soak().rss_growth(s[:3], duration_s=60)["at_mark_mb"] == 200


def test_samples_after_the_programs_last_line_are_the_exit_transient():
    s = [{"unix_s": u, "program_rss_kb": 1} for u in (10.0, 20.0, 30.0, 30.5)]
    steady, at_exit = _soak().split_at_end(s, end_unix_s=30.0)
    assert [x["unix_s"] for x in steady] == [10.0, 20.0, 30.0] and [x["unix_s"] for x in at_exit] == [30.5]


def test_tick_rates_first_and_last_minute():
    # planted: 10 requests/s for the first 60 s, then 5 requests/s up to 180 s
    rec = {"start_unix_s": 0.0, "ticks": [(float(t), 10 * t if t <= 60 else 600 + 5 * (t - 60)) for t in range(10, 180, 10)],
           "end_unix_s": 180.0, "requests": 1200}
    r = _soak().tick_rates(rec)
    assert r["first_minute_rps"] == pytest.approx(10) and r["last_minute_rps"] == pytest.approx(5)


def test_child_pid_and_vmrss_of_a_process_tree(tmp_path):
    p = subprocess.Popen([PY, "-c", "import subprocess, sys; subprocess.run([sys.executable, '-c', "
                          "'import time; time.sleep(30)'])"])
    try:
        m = _soak()
        deadline = time.monotonic() + 20
        kid = None
        while kid is None and time.monotonic() < deadline:
            kid = m.child_pid(p.pid)
            time.sleep(0.05)
        assert kid is not None
        with open(f"/proc/{kid}/stat") as f:   # its parent, from the kernel's own record
            assert int(f.read().rsplit(")", 1)[1].split()[1]) == p.pid
        assert m.vmrss_kb(kid) > 0
    finally:
        for q in (m.child_pid(p.pid), p.pid):
            if q:
                try:
                    os.kill(q, 9)
                except OSError:
                    pass
        p.wait()


@pytest.mark.live
def test_short_soak_with_a_tiny_buffer(tmp_path):
    out, js = tmp_path / "soak", tmp_path / "soak.json"
    r = subprocess.run([PY, str(REPO / "bench" / "soak.py"), "--requests", "300", "--overhead-requests", "40",
                        "--trace-size-mb", "0.05", "--rss-every-s", "0.2", "--tick-s", "0.5", "--out", str(out),
                        "--json", str(js)], capture_output=True, text=True, timeout=85)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(js.read_text())
    assert res["requests"] == 300 and res["overhead"]["requests"] == 40
    # the report was written, with the overflow said there once
    rep = json.loads((out / "soak" / "report.json").read_text())
    said = [w for w in rep["warnings"] if "trace buffer overflow" in w]
    assert len(said) == 1 and res["overflow_warnings_report"] == 1
    # dropped events reported, and the stderr line (said exactly once) carries the trace's own count
    from inferscope.trace import native
    t = native.load(out / "soak" / "trace.iscope")
    coll = t.meta["collection"]
    assert coll["dropped_events"] > 0 and res["dropped_events"] == coll["dropped_events"]
    err = (out / "soak" / "stderr.txt").read_text()
    lines = [ln for ln in err.splitlines() if "trace buffer overflow" in ln]
    assert len(lines) == 1 and res["overflow_lines_stderr"] == 1
    assert int(re.search(r"the oldest (\d+) events", lines[0]).group(1)) == coll["dropped_events"]
    # the buffer bounds what is kept: 0.05 MB ~ 262 events, far fewer than the events seen
    assert coll["buffer_capacity_events"] == int(0.05 * 1024 * 1024 / 200)
    assert coll["dropped_events"] > coll["buffer_capacity_events"]
    # every request appears in the program's own count, and the RSS of the profiled program was sampled
    assert res["rss"]["samples"] >= 1 and all(s["program_rss_kb"] > 0 for s in res["rss_samples"])
    assert res["exit_to_report_json_s"] >= 0
