"""A worker killed mid-trace in a multi-input analyze (issue 44 item 4).

The kill is planted, not timed: the test seam INFERSCOPE_TEST_KILL_WORKER (batch_pool.py) makes the process
analysing an input whose name contains the given text SIGKILL itself right after loading it.  Expected: the
input is retried once, then reported as an error row; the other inputs complete; exit 2; a second run into
the same -o gives the same files and the same rows."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz_mutators import kineto_seed

SRC = Path(__file__).resolve().parents[1] / "src"
NAMES = ("a", "b_killme", "c", "d", "e")


def _inputs(d: Path) -> Path:
    d.mkdir()
    for i, n in enumerate(NAMES):
        doc = kineto_seed()
        doc["traceEvents"][0]["dur"] += 10 * i            # five distinct traces
        (d / f"{n}.json").write_text(json.dumps(doc))
    return d


def _analyze(inputs: Path, out: Path, *extra, kill: str | None = None, timeout=300):
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERSCOPE_")}
    env["PYTHONPATH"] = str(SRC)
    if kill:
        env["INFERSCOPE_TEST_KILL_WORKER"] = kill
    p = subprocess.run([sys.executable, "-m", "inferscope", "analyze", str(inputs), "-o", str(out), *extra],
                       env=env, capture_output=True, text=True, timeout=timeout)
    rows = [json.loads(x) for x in (out / "summary.jsonl").read_text().splitlines()] if (out / "summary.jsonl").exists() else []
    return p, rows


def _content(p: Path):
    if p.suffix == ".jsonl":
        return p.read_text()
    if p.name == "report.json":            # less the two timings of the run itself (about.analysis_ms, load_ms)
        d = json.loads(p.read_text())
        d["about"].pop("analysis_ms"), d["about"].pop("load_ms")
        return d
    return None


def _files(out: Path) -> dict:
    """Every file under out (its relative path) -> the jsonl text / report.json less its timings / None."""
    return {str(p.relative_to(out)): _content(p) for p in sorted(out.rglob("*")) if p.is_file()}


def _check_killed(p, rows, attempts_word: str):
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    by = {Path(r["source"]).stem: r for r in rows}
    assert sorted(by) == sorted(NAMES)
    bad = by["b_killme"]
    assert bad["report_dir"] is None and ("worker process died" in bad["error"] or "ray task failed" in bad["error"]), bad
    assert attempts_word in bad["error"], bad["error"]
    for n in NAMES:
        if n != "b_killme":
            assert by[n]["error"] is None, by[n]
            assert by[n]["e2e_ms"] and by[n]["report_dir"] == n
    errs = [ln for ln in p.stderr.splitlines() if ln.startswith("inferscope: error:")]
    assert len(errs) == 1 and "b_killme" in errs[0], p.stderr


def test_killed_worker_is_retried_once_then_an_error_row_and_rerun_is_idempotent(tmp_path):
    inputs = _inputs(tmp_path / "in")
    out = tmp_path / "out"
    p, rows = _analyze(inputs, out, "--jobs", "2", "-q", kill="killme")
    _check_killed(p, rows, "killed by signal 9), 2 attempts")
    for n in NAMES:
        if n != "b_killme":
            rep = json.loads((out / n / "report.json").read_text())
            assert rep["e2e_ms"] == next(r for r in rows if Path(r["source"]).stem == n)["e2e_ms"]
    assert not (out / "b_killme").exists()                # killed before it wrote anything
    first = _files(out)
    p2, rows2 = _analyze(inputs, out, "--jobs", "2", "-q", kill="killme")
    _check_killed(p2, rows2, "2 attempts")
    assert rows2 == rows
    assert _files(out) == first                            # same files, same rows, same reports


def test_worker_killed_on_its_first_attempt_only_the_retry_completes(tmp_path):
    inputs = _inputs(tmp_path / "in")
    marker = tmp_path / "killed-once"
    p, rows = _analyze(inputs, tmp_path / "out", "--jobs", "3", "-q", kill=f"killme@{marker}")
    assert marker.exists()                                 # the first attempt did die
    assert p.returncode == 0, p.stderr
    assert [r["error"] for r in rows] == [None] * len(NAMES)
    ref, ref_rows = _analyze(inputs, tmp_path / "ref", "-q")    # one process, no kill
    assert ref.returncode == 0
    strip = [{k: v for k, v in r.items() if k != "source"} for r in rows]
    assert strip == [{k: v for k, v in r.items() if k != "source"} for r in ref_rows]


def test_seam_is_inert_when_nothing_matches(tmp_path):
    inputs = _inputs(tmp_path / "in")
    p, rows = _analyze(inputs, tmp_path / "out", "--jobs", "2", "-q", kill="no-such-name")
    assert p.returncode == 0 and len(rows) == len(NAMES) and all(r["error"] is None for r in rows), p.stderr


@pytest.mark.skipif(not __import__("importlib").util.find_spec("ray"), reason="ray is not installed")
def test_ray_task_killed_mid_trace(tmp_path):
    """Ray retries a task whose worker died (max_retries=1 in batch._run_ray): killed on every attempt, the
    input is an error row (WorkerCrashedError) and the others complete; killed once, the retry completes."""
    inputs = _inputs(tmp_path / "in")
    p, rows = _analyze(inputs, tmp_path / "out", "--engine", "ray", "--jobs", "2", "-q", kill="killme", timeout=600)
    _check_killed(p, rows, "ray task failed")
    marker = tmp_path / "killed-once"
    p, rows = _analyze(inputs, tmp_path / "out2", "--engine", "ray", "--jobs", "2", "-q", kill=f"killme@{marker}",
                       timeout=600)
    assert marker.exists() and p.returncode == 0, p.stderr
    assert [r["error"] for r in rows] == [None] * len(NAMES)


def square_or_die(x: str, marker_dir: str):
    """A stand-in for analyze_one: input 3 dies on every attempt, input 5 on its first only."""
    import signal
    if x == "3":
        os.kill(os.getpid(), signal.SIGKILL)
    if x == "5":
        try:
            os.close(os.open(os.path.join(marker_dir, "5"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            os.kill(os.getpid(), signal.SIGKILL)
        except FileExistsError:
            pass
    return {"source": x, "error": None, "v": int(x) ** 2, "pid": os.getpid()}, [], None


@pytest.mark.parametrize("jobs,max_tasks", [(3, 1), (2, 4)])
def test_pool_keeps_every_other_result_and_retires_workers(tmp_path, jobs, max_tasks):
    from inferscope.fleet.batch_pool import run_local
    n = 9
    tasks = [(str(i), str(tmp_path)) for i in range(n)]
    results = [None] * n
    seen = []
    run_local(square_or_die, tasks, results, jobs, max_tasks, lambda k, total, src, row: seen.append((k, total, src)))
    assert [k for k, _, _ in seen] == list(range(1, n + 1)) and {t for _, t, _ in seen} == {n}
    assert sorted(src for _, _, src in seen) == sorted(str(i) for i in range(n))     # each input once
    for i in range(n):
        row = results[i][0]
        if i == 3:
            assert row["error"] == "worker process died while analysing it (killed by signal 9), 2 attempts"
        else:
            assert row["error"] is None and row["v"] == i * i, row
    pids = [results[i][0]["pid"] for i in range(n) if i != 3]
    per_pid = {p: pids.count(p) for p in pids}
    assert max(per_pid.values()) <= max_tasks                   # a worker retires after max_tasks inputs
    assert (tmp_path / "5").exists()                            # input 5 did die once, then its retry answered
