"""Issue 45 item 2: a spawn worker's start-up (its interpreter and `import torch`) that the main process waits for
is start-up, outside the steady window, and the worker's exit at the end is teardown; the steady window's
off-CPU share is the planted one (examples/zoo/zoo_spawn_startup.py: the worker's sleeps, self-timed)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.live

ZOO = Path(__file__).resolve().parents[1] / "examples" / "zoo"


@pytest.mark.live_retry
def test_spawn_worker_startup_is_startup_not_off_cpu(tmp_path):
    """Band: 8 points.  Measured (load average 11-15 on 2 cores) 11.0 % vs 10.7 % planted and 9.1 % vs 5.5 %; the
    default window of the same runs before the child_startup / child_exit rules: 21.8 % vs 4.1 % and 26.3 % vs
    2.0 % (the worker's start-up, 5-9 s there, read as the main process's off-CPU waiting).  On a loaded box part of
    the worker's sleeps reads as run queue, and some of its work as off-CPU (its sampler starved too)."""
    out = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if k != "INFERSCOPE_FOLLOW_CHILDREN"}
    r = subprocess.run([sys.executable, "-m", "inferscope", "run", "--format", "json", "--report", str(out), "--",
                        sys.executable, str(ZOO / "zoo_spawn_startup.py"), "12"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    truth = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("{")][-1])
    rep = json.loads(out.read_text())
    w, rp = rep["window"], rep["run_phases"]
    a, b = w["start_ns"], w["end_ns"]
    # the start-up is named: the worker's start-up while the main process waited; the steady window starts after
    # the spawn, by the time the worker is ready, and keeps the served items
    assert w["kind"] == "steady" and rp["startup"]["rule"].startswith("child_startup: followed child process(es) "), rp
    assert truth["spawn_ns"] < a <= truth["ready_ns"], (a, truth["spawn_ns"], truth["ready_ns"])
    assert rp["teardown"] is None or rp["teardown"]["rule"].startswith("child_exit")
    loop0, loop1 = truth["loop_start_ns"], truth["loop_end_ns"]
    assert min(b, loop1) - max(a, loop0) >= 0.95 * (loop1 - loop0), (w, loop0, loop1)
    assert b - a <= 1.05 * (loop1 - loop0) + (truth["ready_ns"] - a) + 50e6, (w, loop0, loop1)
    assert not rep["children"].get("waiting_on_child_startup_ms")      # none of the worker's start-up is left in it
    # off-CPU in the steady window: the worker's planted sleeps (nobody works, the main process waits)
    planted_pct = 100.0 * sum(max(0, min(y, b) - max(x, a)) for x, y in truth["sleeps"]) / (b - a)
    waiting = next(row for row in rep["breakdown"] if row["category"] == "waiting")
    off_pct = next(p["pct"] for p in waiting["parts"] if p["name"] == "off_cpu")
    assert abs(off_pct - planted_pct) <= 8.0, (off_pct, planted_pct, w["label"])
