"""Loops of short blocking reads against their self-timed truth (issue 45 item 1): examples/zoo/zoo_pipe_reads.py under
`inferscope run`, compared by examples/zoo/zoo_harness.py (helpers and tolerances: tests/test_zoo_truth.py)."""
import json
from pathlib import Path

import pytest

from test_zoo_truth import H, _ranking_ok, _run, _within

pytestmark = pytest.mark.live


@pytest.mark.live_retry
@pytest.mark.parametrize("variant", ["pipe", "socket"])
def test_short_reads_loop(tmp_path, variant):
    """zoo_pipe_reads.py (issue 45 item 1): 4 KiB reads from a pipe (or recv() from a socket) a child feeds slowly,
    ~50 % of each iteration, pure Python the rest.  Truth: the reads are waiting, the loop user code.  Each read
    is short, so the probe mostly finds the thread back from it, waiting for the GIL the tick took: the read's label
    is restored at its call site (blocking.Probe._io_site; before, 18-29 % of the loop's off-CPU time was unnamed
    at the default 200 us feed, 38-58 % at 20 us); a socket's recvfrom is I/O (before: 'other', no blocking_io).
    Measured 2026-11-29 beside other helpers' tests (run queue 12-34 %): waiting -0.8..+3.0 points, user code
    -1.9..+2.1; io named 81-88 % of the off-CPU time (pipe), 87 % (socket)."""
    args = ["--socket"] if variant == "socket" else []
    res, rows = _run(tmp_path, "zoo_pipe_reads.py", args)
    _within(rows["waiting"])
    _within(rows["cpu_preprocessing/user_code"])
    assert _ranking_ok(res), res
    rep = json.loads((Path(tmp_path) / "zoo_pipe_reads.json").read_text())
    truth = json.loads((Path(tmp_path) / "zoo_pipe_reads.truth.json").read_text())
    lo, hi = rep["window"]["start_ns"], rep["window"]["end_ns"]
    reads = [p for p in truth["phases"] if p["name"] == "pipe_reads" and p["end_ns"] > lo and p["start_ns"] < hi]
    wall_ms = sum(min(p["end_ns"], hi) - max(p["start_ns"], lo) for p in reads) / 1e6
    # the reads' off-CPU time by the OS (wall less the thread's CPU and run-queue delay, whole phases)
    off_ms = sum(p["end_ns"] - p["start_ns"] - p["cpu_ns"] - (p["runq_ns"] or 0) for p in reads) / 1e6
    f = next((f for f in rep["findings"] if f["id"] == "blocking_io"), None)
    assert f is not None, ([f["id"] for f in rep["findings"]], rep["contention"]["blocking"])
    ev = f["evidence"]
    line = next(i for i, ln in enumerate((H.ZOO / "zoo_pipe_reads.py").read_text().splitlines(), 1)
                if "os.read(src, CHUNK)" in ln)
    assert ev["top_frame"] == f"zoo_pipe_reads.py:{line} read_chunks", ev
    assert (ev["top_syscall"], ev["top_path"].split(":")[0]) == (
        ("recvfrom", "socket") if variant == "socket" else ("read", "pipe")), ev
    # the named time is the planted reads' (never more than their wall time), most of their off-CPU time
    assert 0.5 * off_ms <= ev["io_ms"] <= wall_ms + 1.0, (ev, off_ms, wall_ms)
