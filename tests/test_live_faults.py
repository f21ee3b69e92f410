"""Live fault scenarios of `inferscope run` (issue 44 item 5): the program under the collector is killed, crashes or
leaves by every path a real one takes, at planted points, and the runner must pass its exit code through (128+N for
a death by signal N, run_command.py), write a report (from the final trace, or rebuilt from the crash journal with a
warning naming the signal), and never show a traceback of its own.  An unwritable report path is a one-line error,
exit 2, before the program runs.

Truth: the exit code is the program's own, measured by running the same program without InferScope (``bare``):
the program holds every fault itself (it signals itself, raises, exits) at a point it reaches deterministically
(the collector's first journal flush, read from the session, stands in for "some time into the run"; never a
sleep), so both runs take the same path.  Each case is a tiny program (~0.5 s under `inferscope run`)."""
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from inferscope.trace import native

pytestmark = pytest.mark.live
PY = sys.executable

PRELUDE = """
import atexit, os, signal, sys, threading, time
def flushed():
    # the planted point: the collector's crash journal holds its first flush (bare runs: no session, no wait)
    m = sys.modules.get("inferscope.collect.session")
    s = m.current() if m else None
    t = time.monotonic()
    while s is not None and s.flushes < 1 and time.monotonic() - t < 30:
        sum(range(2000))
def work(n=20000):
    return sum(i * i for i in range(n))
"""

# (name, code of the fault: runs with `pid` the process to signal)
SIGNALS = ["SIGINT", "SIGTERM", "SIGKILL", "SIGHUP", "SIGSEGV"]


def _signal_program(point: str, sig: str) -> tuple[str, dict]:
    """(work.py, extra files) for signal ``sig`` delivered at ``point``."""
    kill = f"os.kill(pid, signal.{sig})"
    if point == "import":       # while the program imports its modules (no flush waited for: the earliest point)
        return ("import faultmod\nprint('after import')\n",
                {"faultmod.py": PRELUDE + f"work()\npid = os.getpid()\n{kill}\nwork()\n"})
    if point == "loop":
        body = f"flushed()\nfor i in range(4):\n    work()\n    if i == 1:\n        pid = os.getpid(); {kill}\n"
    elif point == "thread":     # sent by a worker thread; Python runs the handler in the main thread (in join)
        body = (f"def w():\n    flushed(); work(); pid = os.getpid(); {kill}; work()\n"
                "t = threading.Thread(target=w, name='faulty'); t.start(); t.join()\nwork()\n")
    elif point == "mpworker":   # sent by a multiprocessing worker (a followed child) while the program waits on it
        body = (f"import multiprocessing as mp\ndef w(pid):\n    work(); {kill}\n"
                "if __name__ == '__main__':\n    flushed()\n"
                "    p = mp.get_context('fork').Process(target=w, args=(os.getpid(),)); p.start(); p.join()\n"
                "    work()\n")
    elif point == "atexit":     # in the program's own atexit handler (runs before the collector's)
        body = f"def bye():\n    pid = os.getpid(); {kill}; work()\natexit.register(bye)\nflushed()\nwork()\n"
    else:
        raise ValueError(point)
    return PRELUDE + body + "print('after fault')\n", {}


OTHER = {
    # crashes
    "exception_main": "flushed(); work(); raise RuntimeError('planted crash')\n",
    "exception_thread": ("def w():\n    flushed(); raise RuntimeError('planted thread crash')\n"
                         "t = threading.Thread(target=w); t.start(); t.join(); work()\n"),
    "exception_early": "work(); raise ImportError('planted early crash')\n",
    "exception_mpworker": ("import multiprocessing as mp\ndef boom(x):\n    raise ValueError('planted worker crash')\n"
                           "if __name__ == '__main__':\n    flushed()\n"
                           "    with mp.get_context('fork').Pool(2) as pool:\n        pool.map(boom, range(4))\n"),
    "keyboardinterrupt_raised": "flushed(); raise KeyboardInterrupt\n",
    # leaving on purpose
    "sys_exit_3": "flushed(); work(); sys.exit(3)\n",
    "sys_exit_message": "flushed(); sys.exit('planted message')\n",
    "sys_exit_255": "sys.exit(255)\n",
    "sys_exit_in_thread": ("def w():\n    flushed(); sys.exit(7)\n"        # ends the thread only: exit 0
                           "t = threading.Thread(target=w); t.start(); t.join(); work()\n"),
    "sys_exit_in_atexit": "def bye():\n    sys.exit(9)\natexit.register(bye)\nflushed()\n",
    "os_exit_main": "flushed(); work(); os._exit(5)\n",
    "os_exit_early": "os._exit(6)\n",                               # before any flush
    "os_exit_thread": "def w():\n    flushed(); os._exit(4)\nt = threading.Thread(target=w); t.start(); t.join()\n",
    "os_exit_atexit": "def bye():\n    os._exit(8)\natexit.register(bye)\nflushed()\n",
    # a bounded fork bomb: 64 forked workers, each gone at once (os._exit: no atexit, no finaliser)
    "fork_64_os_exit": ("flushed()\npids = []\nfor i in range(64):\n    p = os.fork()\n    if p == 0:\n"
                        "        work(2000); os._exit(0)\n    pids.append(p)\n"
                        "codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids]\n"
                        "sys.exit(0 if codes == [0] * 64 else 1)\n"),
    # 64 multiprocessing worker processes (one task each), the program's exit code from their results
    "pool_64_workers": ("import multiprocessing as mp\ndef sq(x):\n    work(2000); return x * x\n"
                        "if __name__ == '__main__':\n    flushed()\n"
                        "    with mp.get_context('fork').Pool(4, maxtasksperchild=1) as pool:\n"
                        "        r = pool.map(sq, range(64), chunksize=1)\n"
                        "    sys.exit(0 if r == [x * x for x in range(64)] else 1)\n"),
    # a worker killed under the program: the program survives and says so in its exit code
    "mpworker_sigkilled": ("import multiprocessing as mp\ndef w():\n    work(); os.kill(os.getpid(), signal.SIGKILL)\n"
                           "if __name__ == '__main__':\n    flushed()\n"
                           "    p = mp.get_context('fork').Process(target=w); p.start(); p.join()\n"
                           "    sys.exit(10 if p.exitcode == -9 else 1)\n"),
}


def _cases():
    out = [pytest.param("signal", (p, s), id=f"{s}-{p}")
           for p in ("import", "loop", "thread", "mpworker", "atexit") for s in SIGNALS]
    return out + [pytest.param("other", k, id=k) for k in OTHER]


def _write(tmp_path, case, arg) -> Path:
    if case == "signal":
        main, extra = _signal_program(*arg)
    else:
        main, extra = PRELUDE + OTHER[arg], {}
    for name, text in extra.items():
        (tmp_path / name).write_text(text)
    w = tmp_path / "work.py"
    w.write_text(main)
    return w


def _env(**kw):
    return dict(os.environ, INFERSCOPE_FLUSH_INTERVAL_S="0.2", **kw)


def _run(tmp_path, w, out, *extra, timeout=60):
    cmd = [PY, "-m", "inferscope", "run", "--report", str(out), "--format", "md,json",
           "--trace", str(tmp_path / "t.iscope"), *extra, "--", PY, str(w)]
    return subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=timeout)


def _own_traceback(stderr: str) -> list[str]:
    """Lines of a traceback through InferScope's own code (the program's tracebacks are passed through)."""
    pkg = str(Path(native.__file__).resolve().parents[1])
    return [ln for ln in stderr.splitlines()
            if (ln.lstrip().startswith("File ") and pkg in ln) or "internal error" in ln]


@pytest.mark.parametrize("case,arg", _cases())
def test_fault(tmp_path, case, arg):
    w = _write(tmp_path, case, arg)
    bare = subprocess.run([PY, str(w)], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, INFERSCOPE_ENABLED="0"))
    want = 128 - bare.returncode if bare.returncode < 0 else bare.returncode
    r = _run(tmp_path, w, tmp_path / "report.md")
    assert r.returncode == want, (r.returncode, bare.returncode, r.stderr[-2000:])
    assert not _own_traceback(r.stderr), r.stderr[-3000:]
    # no report lost: report.md/json written, the kept trace says how the program ended
    assert (tmp_path / "report.md").exists(), r.stderr[-2000:]
    rep = json.loads((tmp_path / "report.json").read_text())
    coll = native.load(tmp_path / "t.iscope").meta["collection"]
    if bare.returncode < 0:
        name = signal.Signals(-bare.returncode).name
        assert coll["exit_signal"] == name, coll
        if not coll.get("complete"):          # rebuilt from the crash journal: the report names the signal
            assert any(name in x for x in rep.get("warnings", [])), rep.get("warnings")
            assert name in (tmp_path / "report.md").read_text()
    else:
        assert coll["exit_code"] == bare.returncode and coll["exit_signal"] is None, coll
        if not coll.get("complete"):
            assert any(f"exit code {bare.returncode}" in x for x in rep.get("warnings", [])), rep.get("warnings")
    if want:
        assert re.search(r"the program ended with (exit code|killed by)", r.stderr), r.stderr[-2000:]
    # followed children's files are merged and removed, never left beside the trace
    assert not list(tmp_path.glob("t.iscope.*")), sorted(p.name for p in tmp_path.glob("t.iscope.*"))


def _unwritable(tmp_path, kind) -> Path:
    if kind == "under_a_file":              # ENOTDIR, also for root
        (tmp_path / "afile").write_text("x")
        return tmp_path / "afile" / "sub" / "report.md"
    if kind == "proc":                      # a read-only file system, also for root
        return Path("/proc/self/inferscope-report.md")
    if kind == "readonly_dir":              # mode 0555 (root ignores it: then a path under a file, as above)
        d = tmp_path / "ro"
        d.mkdir()
        d.chmod(0o555)
        if os.access(d, os.W_OK):
            d.chmod(0o755)
            (d / "f").write_text("x")
            return d / "f" / "report.md"
        return d / "report.md"
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["under_a_file", "proc", "readonly_dir"])
def test_unwritable_report_is_one_line_exit_2(tmp_path, kind):
    w = tmp_path / "work.py"
    w.write_text("open('ran', 'w').write('1')\n")
    r = _run(tmp_path, w, _unwritable(tmp_path, kind))
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("inferscope: error:"), lines
    assert not (tmp_path / "ran").exists()       # refused before the program ran: its work is not wasted
