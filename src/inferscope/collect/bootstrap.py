"""Child side of ``inferscope run``: imported by the injected sitecustomize when
INFERSCOPE_ENABLED=1 and INFERSCOPE_TRACE_OUT names the trace file.

Starts a Session before the user's script runs; the trace is written at interpreter exit
(normal end, uncaught exception, sys.exit, KeyboardInterrupt, SIGTERM -> SystemExit) and
periodically while running (so SIGKILL leaves the last snapshot).  Only the first process
claiming the trace file is the main collection; with INFERSCOPE_FOLLOW_CHILDREN=1, Python subprocesses inheriting the environment
(spawn/forkserver workers, ``subprocess`` Python children) are followed with a light session (CPU
sampler only) into ``<trace>.child.<pid>.iscope``, which the parent merges; forked children are
not followed (counted from /proc by the main session).  Opt-in: INFERSCOPE_FOLLOW_CHILDREN=1.
"""
from __future__ import annotations

import atexit
import os
import signal
import sys

_session = None
_exc_name = None


def _on_term(signum, frame):
    raise SystemExit(128 + signum)


def _excepthook(orig):
    def hook(et, ev, tb):
        global _exc_name
        _exc_name = et.__name__
        return orig(et, ev, tb)
    return hook


def _at_exit():
    s = _session
    if s is None or s.finalized or s.pid != os.getpid():
        return
    old = None
    try:
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)   # a second Ctrl-C must not cut the trace
    except (ValueError, OSError):
        pass
    try:
        s.finalize(exit_reason=f"exception:{_exc_name}" if _exc_name else "exit")
    except BaseException as e:  # never turn the user's exit into our traceback
        sys.stderr.write(f"inferscope: could not write the trace: {type(e).__name__}: {e}\n")
    finally:
        if old is not None:
            try:
                signal.signal(signal.SIGINT, old)
            except (ValueError, OSError):
                pass
    if _exc_name == "KeyboardInterrupt":
        # Python reports an uncaught KeyboardInterrupt by dying of SIGINT (exit 130), but the
        # imports done while finalising (numpy) reset that flag; do it ourselves.  Our atexit
        # handler was registered first, so it runs last.
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)


def _after_fork_child():
    s = _session
    if s is not None:
        s.finalized = True   # forked workers neither collect nor write


CHILD_SAMPLING_HZ = 100.0     # followed children sample at most this often
CHILD_FLUSH_S = 0.5           # and flush their crash journal this often


def child_trace_path(out: str, pid: int) -> str:
    return f"{out}.child.{pid}.iscope"


def _start_child(out: str) -> None:
    """A light session in a child process: the CPU sampler only (no torch profiler, no system or
    GPU counters: the parent records those; no perf IP samples: the GIL heuristic splits
    cpu_compute / framework), at most CHILD_SAMPLING_HZ, written at the child's exit (or its crash
    journal, when it is terminated)."""
    global _session
    try:
        with open("/proc/self/cmdline", "rb") as f:
            cmd = f.read()
        if b"resource_tracker" in cmd or b"semaphore_tracker" in cmd:
            return      # multiprocessing's helper: no work of the program's, and it outlives the parent
    except OSError:
        pass
    try:
        import dataclasses
        from .. import log
        from ..config import Config, load_config
        from . import session as S
        cj = os.environ.get("INFERSCOPE_CONFIG_JSON")
        cfg = Config.from_json(cj) if cj else load_config()
        # a lower sampling rate keeps a child's cost small.  A child that exits normally writes its
        # trace at exit; one that is terminated (Pool.terminate() sends SIGTERM; no handler here: a
        # handler that raises or writes at an arbitrary point of a worker hung 2 of ~10 test runs)
        # leaves its crash journal (flushed every CHILD_FLUSH_S), which the parent reads
        cfg = dataclasses.replace(cfg, torch_profiler="off", system_sampling_hz=0.0, perf_ip_sampling=False,
                                  cpu_sampling_frequency_hz=min(cfg.cpu_sampling_frequency_hz, CHILD_SAMPLING_HZ),
                                  flush_interval_s=CHILD_FLUSH_S)
        if cfg.log_level not in ("debug",):
            log.set_level("warn")
        path = child_trace_path(out, os.getpid())
        with open(path + ".started", "w"):     # the parent waits for this child's trace (runner.py)
            pass
        s = S.Session(cfg, trace_out=path, mode="child")
        S.set_current(s)
        _session = s
        s.start()
        atexit.register(_at_exit)
        os.register_at_fork(after_in_child=_after_fork_child)
    except Exception as e:  # never break the user's child process
        sys.stderr.write(f"inferscope: not following child process {os.getpid()}: {type(e).__name__}: {e}\n")


def main() -> None:
    global _session
    if os.environ.get("INFERSCOPE_ENABLED", "").strip().lower() not in ("1", "true", "yes", "on"):
        return
    out = os.environ.get("INFERSCOPE_TRACE_OUT")
    if not out:
        return
    try:
        fd = os.open(out + ".claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
    except FileExistsError:
        # a Python child of the profiled program (multiprocessing spawn/forkserver worker,
        # DataLoader worker started with spawn, a `subprocess` Python child): follow it into its
        # own trace file next to the main one; the parent merges it (same perf_counter clock)
        # opt-in (bench/README.md, workers workload: process 1.01x followed, 4 noisy pairs; a session
        # start and an exit-time write in every Python subprocess); /proc counting is always on
        if os.environ.get("INFERSCOPE_FOLLOW_CHILDREN", "0").strip().lower() in ("1", "true", "yes", "on"):
            _start_child(out)
        return
    except OSError as e:
        sys.stderr.write(f"inferscope: cannot create the trace file next to {out}: {e}\n")
        return
    from .. import log
    from ..config import Config, load_config
    from . import session as S
    cj = os.environ.get("INFERSCOPE_CONFIG_JSON")
    try:
        cfg = Config.from_json(cj) if cj else load_config()
    except Exception as e:
        sys.stderr.write(f"inferscope: bad configuration, not collecting: {e}\n")
        return
    log.set_level(cfg.log_level)
    s = S.Session(cfg, trace_out=out, mode="run")
    S.set_current(s)
    _session = s
    s.start()
    atexit.register(_at_exit)
    sys.excepthook = _excepthook(sys.excepthook)
    try:
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_term)
    except (ValueError, OSError):
        pass
    os.register_at_fork(after_in_child=_after_fork_child)
