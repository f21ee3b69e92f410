"""Spawning the program of ``inferscope run`` and waiting for it.

Its environment (``child_env``): InferScope's sitecustomize.py first on PYTHONPATH, the resolved configuration.  The
wait (``spawn_and_wait``): Ctrl-C forwarded when the child still runs 0.5 s after it, SIGTERM forwarded, the analysis
stack imported meanwhile, the child's own CPU time and peak RSS (wait4) kept in ``CHILD_RUSAGE``.  ``exit_code``: the
child's exit status as the command's (128+N for a signal N).
"""
from __future__ import annotations

import importlib
import os
import select
import signal
import subprocess
import threading
import time
from pathlib import Path

from .errors import InferScopeError

SITE_DIR = str(Path(__file__).resolve().parent / "collect" / "_site")   # (the child's sitecustomize)
PKG_PARENT = str(Path(__file__).resolve().parents[1])                 # (where the package inferscope is)


def child_env(trace_out: str, cfg, base: dict | None = None) -> dict:
    env = dict(os.environ if base is None else base)
    env["INFERSCOPE_ENABLED"] = "1"
    env["INFERSCOPE_TRACE_OUT"] = trace_out
    env["INFERSCOPE_CONFIG_JSON"] = cfg.to_json()
    env["INFERSCOPE_PKG_PATH"] = PKG_PARENT
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = SITE_DIR + (os.pathsep + old if old else "")
    return env


CHILD_RUSAGE: dict = {}


def _prewarm(modules: list[str]) -> None:
    """Import the analysis/report stack while the child runs (a background thread of this parent).

    The parent is otherwise idle until the child exits; importing numpy and the analyses then
    (~100 ms) would lengthen the command by that much.  Any error is left for the real import
    after the child exits to report.
    """
    for m in modules:
        try:
            importlib.import_module(m)
        except Exception:   # reported by the real import after the child exits
            return


def _exit_waiter(pid: int):
    """A file descriptor that becomes readable when ``pid`` exits (Linux pidfd), or None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def spawn_and_wait(cmd: list[str], env: dict, prewarm: list[str] | None = None) -> int:
    try:
        proc = subprocess.Popen(cmd, env=env)
    except FileNotFoundError:
        raise InferScopeError(f"run: command not found: {cmd[0]}") from None
    except PermissionError:
        raise InferScopeError(f"run: permission denied: {cmd[0]} (not executable?)") from None
    except OSError as e:   # ENOEXEC (not a program), ENOTDIR, E2BIG ...
        raise InferScopeError(f"run: cannot execute {cmd[0]}: {e.strerror or e}") from None
    if prewarm:
        threading.Thread(target=_prewarm, args=(prewarm,), name="inferscope-prewarm", daemon=True).start()
    pidfd = _exit_waiter(proc.pid)
    state = {"sigint_at": None, "forwarded": False}

    def on_int(signum, frame):
        # Ctrl-C in a terminal reaches the child too; forward only if it is still running later
        state["sigint_at"] = time.monotonic()

    def on_term(signum, frame):
        try:
            proc.send_signal(signum)
        except OSError:
            pass

    old_int = signal.signal(signal.SIGINT, on_int)
    old_term = signal.signal(signal.SIGTERM, on_term)
    try:
        while True:
            try:
                pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            except ChildProcessError:
                return proc.wait()
            if pid == proc.pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                CHILD_RUSAGE.update(cpu_ms=round((ru.ru_utime + ru.ru_stime) * 1e3, 3),
                                    maxrss_mb=round(ru.ru_maxrss / 1024.0, 1))
                return proc.returncode
            if pidfd is not None:   # wake as soon as the child exits (a Ctrl-C handler also wakes it)
                try:
                    select.select([pidfd], [], [], 0.25)
                except (OSError, ValueError):
                    pidfd = None
            else:
                time.sleep(0.02)
            t = state["sigint_at"]
            if t is not None and not state["forwarded"] and time.monotonic() - t > 0.5:
                state["forwarded"] = True
                try:
                    proc.send_signal(signal.SIGINT)
                except OSError:
                    pass
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
        if pidfd is not None:
            os.close(pidfd)


def exit_code(rc: int) -> int:
    return 128 - rc if rc < 0 else rc
