"""The cost of following short-lived forked workers (collect/bootstrap.py, session_trace.finalize_journal).

A followed child ends by writing its journal (marshal, no numpy), renamed ``<trace>.child.<pid>.iscope.final``,
which the parent builds into a trace (run_report._merge_children).  Before, every worker built and saved its own
trace at exit: ~100 ms of CPU importing numpy and the trace builder, in each of a Pool's workers (64 of them:
~10 s under `inferscope run` against ~0.8 s without).

Truth here never comes from a clock's wall time: which modules each worker process loaded (an audit hook on
``import`` installed by the program before the pool forks, inherited by every worker), the worker pids the tasks
themselves returned, and the workers' CPU time (the program's RUSAGE_CHILDREN) against the same program run
without InferScope, in the same test.
"""
import json
import os
import subprocess
import sys

import pytest

from inferscope.collect import journal
from inferscope.collect.bootstrap import child_trace_path

pytestmark = pytest.mark.live
PY = sys.executable
N_TASKS = 12

PROG = """
import json, multiprocessing as mp, os, sys, time
OUT, N = sys.argv[1], int(sys.argv[2])
PARENT = os.getpid()

def hook(event, args):
    # every module a worker process loads (a fresh load only: a cached import raises no event)
    if event == "import" and os.getpid() != PARENT:
        with open(os.path.join(OUT, f"{os.getpid()}.imports"), "a") as f:
            f.write(f"{args[0]}\\n")

def planted_worker_spin(x):
    t = time.process_time()
    while time.process_time() - t < 0.03:     # 30 ms of CPU in the worker
        pass
    return os.getpid()

if __name__ == "__main__":
    sys.addaudithook(hook)
    pool = mp.get_context("fork").Pool(2, maxtasksperchild=1)
    pids = pool.map(planted_worker_spin, range(N), chunksize=1)
    pool.close()
    pool.join()          # every worker leaves by its own path (no terminate)
    c = os.times()
    print(json.dumps({"pids": sorted(set(pids)), "children_cpu_s": c.children_user + c.children_system}))
"""


def _imports(d) -> dict[int, set[str]]:
    return {int(f.split(".")[0]): set((d / f).read_text().split()) for f in os.listdir(d) if f.endswith(".imports")}


def _run(tmp_path, name, under: bool):
    d = tmp_path / name
    d.mkdir()
    prog = tmp_path / "pool.py"
    prog.write_text(PROG)
    cmd = [PY, str(prog), str(d), str(N_TASKS)]
    if under:
        cmd = [PY, "-m", "inferscope", "run", "--format", "json", "--report", str(tmp_path / "r.json"),
               "--trace", str(tmp_path / "t.iscope"), "--window", "all", "--"] + cmd
    env = {k: v for k, v in os.environ.items() if k != "INFERSCOPE_FOLLOW_CHILDREN"}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    truth = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("{")][-1])
    return truth, _imports(d)


def test_followed_fork_workers_load_nothing_at_exit_and_are_all_merged(tmp_path):
    bare, bare_imp = _run(tmp_path, "bare", under=False)
    truth, imp = _run(tmp_path, "under", under=True)
    assert len(truth["pids"]) == N_TASKS and len(bare["pids"]) == N_TASKS     # maxtasksperchild=1
    # what a worker loads under InferScope beyond what it loads without: nothing (its session is started from
    # the modules the parent holds, and its trace leaves as a journal) - before, numpy and inferscope.trace
    # in every worker, at its exit
    extra = {pid: mods - set().union(*bare_imp.values()) for pid, mods in imp.items()}
    assert not any(extra.values()), sorted(extra.items())[:3]
    # no data lost: every task's worker is followed (its final journal merged), its planted function sampled
    rep = json.loads((tmp_path / "r.json").read_text())
    followed = {p["pid"] for p in rep["children"]["processes"] if p["followed"]}
    assert set(truth["pids"]) <= followed, (truth["pids"], rep["children"])
    assert not any("no readable trace" in w for w in rep["warnings"]), rep["warnings"]
    t = rep["tables"]["top_python_functions"]
    col = {c: i for i, c in enumerate(t["columns"])}
    spin = {r[col["thread"]] for r in t["rows"] if r[col["function"]] == "planted_worker_spin"}
    main_pid = rep["about"]["collection"]["pid"]
    assert spin and not any(th.endswith(f"({main_pid})") for th in spin), spin
    assert not list(tmp_path.glob("t.iscope.child.*"))          # merged and removed
    # the workers' CPU time: each spins 30 ms; following added ~100 ms of CPU to each before (numpy import,
    # trace build), ~5 ms now (session start, 100 Hz ticks, the journal write).  CPU time, not wall time:
    # other jobs on the box stretch wall time, hardly CPU time; 40 ms per worker is the band
    extra_cpu_ms = 1e3 * (truth["children_cpu_s"] - bare["children_cpu_s"]) / N_TASKS
    assert extra_cpu_ms < 40, (extra_cpu_ms, truth, bare)


def test_final_journal_loads_as_the_trace_the_child_would_have_written(tmp_path):
    """Session.finalize in a child session: no .iscope, a ``.final`` journal whose trace holds the events the
    final trace holds (built from the same session by build_trace: same spans, same tracks)."""
    from inferscope.collect.session import Session
    from inferscope.config import Config
    out = child_trace_path(str(tmp_path / "t.iscope"), os.getpid())
    s = Session(Config(), trace_out=out, mode="child")
    s.start()
    x = 0
    for i in range(300000):
        x += i * i
    s.finalize(exit_reason="exit")
    assert not os.path.exists(out) and not os.path.exists(journal.path_for(out))
    t = journal.load(journal.final_path(out))
    ref = s.build_trace(final=True)       # the sampler has stopped: the same buffer the child's trace held
    assert t.n_events == ref.n_events > 0
    names = t.strings.as_list()
    rnames = ref.strings.as_list()
    assert sorted(names[i] for i in t.spans.name) == sorted(rnames[i] for i in ref.spans.name)
    assert sorted(zip(t.spans.start_ns.tolist(), t.spans.end_ns.tolist())) == \
        sorted(zip(ref.spans.start_ns.tolist(), ref.spans.end_ns.tolist()))
    c = t.meta["collection"]
    assert c["complete"] is True and c["exit_reason"] == "exit" and c["pid"] == os.getpid()


FORK_RACE = """
import os, signal, sys
from inferscope.collect import bootstrap as B
signal.signal(signal.SIGTERM, B._on_term)        # what the main session installs (bootstrap.main)
# a SIGTERM landing in the child between the fork and InferScope's reset of the inherited handler: this hook
# runs first (hooks run in their order of registration), as Pool.terminate() can signal a just-started worker
os.register_at_fork(after_in_child=lambda: os.kill(os.getpid(), signal.SIGTERM))
B._register_fork_hooks()
pid = os.fork()
if pid == 0:
    os._exit(0)          # a lost signal: the worker goes on (in a Pool: blocks on its queue for ever)
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def test_sigterm_between_fork_and_handler_reset_is_not_lost(tmp_path):
    """Without InferScope a forked worker's SIGTERM is at its default action from the fork on; the main session's
    inherited Python handler must not swallow one sent before the at-fork reset (a `with Pool(...)` hung in its
    terminate's join, the worker waiting on the queue)."""
    p = tmp_path / "race.py"
    p.write_text(FORK_RACE)
    r = subprocess.run([PY, str(p)], capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if not k.startswith("INFERSCOPE_")})
    assert r.returncode == 0, r.stderr[-2000:]
    assert int(r.stdout.split()[-1]) == -15, r.stdout     # died of SIGTERM, as it would have without InferScope
