"""Child side of ``inferscope run``: imported by the injected sitecustomize when
INFERSCOPE_ENABLED=1 and INFERSCOPE_TRACE_OUT names the trace file.

Starts a Session before the user's script runs; the trace is written at interpreter exit
(normal end, uncaught exception, sys.exit, KeyboardInterrupt, SIGTERM/SIGHUP -> SystemExit, then the
process dies of that signal after the write, as it would have without InferScope) and
periodically while running (so SIGKILL leaves the last snapshot).  Only the first process
claiming the trace file is the main collection.  Python child processes are followed by default
(config ``follow_children``, INFERSCOPE_FOLLOW_CHILDREN=0 turns it off) with a light session (CPU
sampler only) into ``<trace>.child.<pid>.iscope.final`` (its journal, journal.py), which the parent builds and
merges (same perf_counter clock):
  - spawn workers, ``subprocess`` Python children: they inherit the environment and come through
    this module's ``main()`` (the claim exists: a child);
  - forked children (multiprocessing 'fork', the Linux default, DataLoader workers, forkserver
    workers): ``os.register_at_fork(after_in_child=...)`` drops the inherited session (its threads
    do not exist in the child; its buffer and journal belong to the parent and are never written
    here) and starts a fresh one.  multiprocessing ends such children with ``os._exit`` (no
    atexit), so the child session is also finalised by a multiprocessing finaliser run at the end
    of ``Process._bootstrap``.  A child terminated by SIGTERM (``Pool.terminate()``) leaves its
    crash journal (flushed every CHILD_FLUSH_S).
multiprocessing's helper processes (resource tracker, the forkserver itself) are not sampled; the
forkserver's forks are.  Non-Python children are counted from /proc by the main session.
"""
from __future__ import annotations

import atexit
import os
import signal
import sys

_session = None
_exc_name = None
_term_signum = None          # SIGTERM/SIGHUP received (default disposition): the process dies of it after the trace
_TERM_SIGNALS = ("SIGTERM", "SIGHUP")


def _on_term(signum, frame):
    """SIGTERM / SIGHUP (left at their default by the program): unwind the program (SystemExit, so its finally
    blocks and the trace's atexit write run); ``_at_exit`` then dies of the signal as the program would have
    without InferScope.  Once the main thread has ended (atexit handlers running) nothing is raised: an
    exception there is only printed and the exit would look normal (exit 0)."""
    global _term_signum
    _term_signum = signum
    import threading  # lazy: every child Python process imports this module; only a profiled one needs it
    if threading.main_thread().is_alive():
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
        if _term_signum is not None and (s is None or s.pid == os.getpid()):
            _die_of(_term_signum)
        return
    old = None
    try:
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)   # a second Ctrl-C must not cut the trace
    except (ValueError, OSError):
        pass
    held = _hold_term() if s.mode == "child" else None
    try:
        s.finalize(exit_reason=(f"signal:{signal.Signals(_term_signum).name}" if _term_signum is not None
                                else f"exception:{_exc_name}" if _exc_name else "exit"))
    except BaseException as e:  # never turn the user's exit into our traceback
        sys.stderr.write(f"inferscope: could not write the trace: {type(e).__name__}: {e}\n")
    finally:
        if old is not None:
            try:
                signal.signal(signal.SIGINT, old)
            except (ValueError, OSError):
                pass
        if held:     # a SIGTERM sent meanwhile (default action) ends the process now, its trace written
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
            except (ValueError, OSError):
                pass
    if _term_signum is not None:
        _die_of(_term_signum)
    if _exc_name == "KeyboardInterrupt":
        # Python reports an uncaught KeyboardInterrupt by dying of SIGINT (exit 130), but the
        # imports done while finalising (numpy) reset that flag; do it ourselves.  Our atexit
        # handler was registered first, so it runs last.
        _die_of(signal.SIGINT)


def _hold_term() -> set:
    """A followed child's end: SIGTERM / SIGHUP at their default action are held (blocked in this thread, the one
    left once the sampler has stopped) while its trace is written, and act when released: ``with Pool(...)``
    terminates a worker that has returned its last result at once, and its samples were lost."""
    held = {s for s in (getattr(signal, n, None) for n in _TERM_SIGNALS)
            if s is not None and signal.getsignal(s) == signal.SIG_DFL}
    try:
        if held:
            signal.pthread_sigmask(signal.SIG_BLOCK, held)
    except (ValueError, OSError, AttributeError):
        return set()
    return held


def _die_of(signum: int) -> None:
    """End this process by ``signum`` at its default action (its parent sees the death by that signal)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    try:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    except (ValueError, OSError):
        pass


_out = None        # the main trace path, set when this process collects (main or followed child)
_follow = False    # follow this process's own children (config follow_children)
_atexit_on = False


def _after_fork_child():
    """In a forked child: the inherited session is the parent's (its sampler thread does not exist
    here, its buffer and journal are the parent's): never collect nor write it.  Follow the child
    with a fresh light session when following is on."""
    global _session, _term_signum
    s = _session
    if s is not None and s.pid != os.getpid():
        s.finalized = True
    # the main session's SIGTERM/SIGHUP handler is inherited: a forked worker gets the default back (as without
    # InferScope: Pool.terminate() ends it at once, its crash journal kept).  Raised at an arbitrary point of a
    # worker (its at-fork hooks, which swallow exceptions) the SystemExit was lost and the worker hung the Pool
    _term_signum = None
    for name in _TERM_SIGNALS:
        try:
            sig = getattr(signal, name)
            if signal.getsignal(sig) is _on_term:
                signal.signal(sig, signal.SIG_DFL)
        except (AttributeError, ValueError, OSError):
            pass
    _release_term()     # a SIGTERM sent since the fork (held) acts now, at the default action
    _session = None
    if _follow and _out:
        try:    # threading keeps the parent's native thread id until multiprocessing refreshes it:
            # the sampler names the main thread, reads its CPU clock and run queue by it
            import threading
            threading.current_thread()._set_native_id()
        except Exception:
            pass
        _start_child(_out, forked=True)


_held_at_fork: dict = {}      # forking thread's ident -> the signals _before_fork blocked


def _before_fork():
    """The main session's SIGTERM / SIGHUP handler (``_on_term``) is inherited by a forked child until
    ``_after_fork_child`` resets it: a signal in between (``Pool.terminate()`` just after a worker's start) only
    tripped Python's flag, was dropped at the reset, and the worker blocked on the pool's queue for ever (the
    program hung in terminate's join; once in 12 runs of a 64-worker pool).  Blocked in the forking thread (the
    child inherits its mask) until the reset, it stays pending and acts at its default action."""
    import _thread      # builtin, no import cost
    sigs = {s for s in (getattr(signal, n, None) for n in _TERM_SIGNALS)
            if s is not None and signal.getsignal(s) is _on_term}
    try:
        was = signal.pthread_sigmask(signal.SIG_BLOCK, sigs) if sigs else None
    except (ValueError, OSError, AttributeError):
        return
    if sigs:
        _held_at_fork[_thread.get_ident()] = sigs - set(was)


def _release_term():
    import _thread      # builtin, no import cost
    sigs = _held_at_fork.pop(_thread.get_ident(), None)
    if sigs:
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, sigs)
        except (ValueError, OSError):
            pass


def _register_fork_hooks() -> None:
    os.register_at_fork(before=_before_fork, after_in_parent=_release_term, after_in_child=_after_fork_child)


_RUN_EVENTS = ("cpython.run_file", "cpython.run_module", "cpython.run_command", "cpython.run_stdin")
_MARK = 13                    # SpanKind.MARK (no trace import here)


def _mark_main_start(s) -> None:
    """Record a MARK ("main_start", cat "inferscope.run") when CPython starts the program's main module (the
    ``cpython.run_*`` audit event, raised after site and this bootstrap): everything before it is interpreter
    start-up, never the program's (analyze/run_phases.py's ``interpreter`` rule).  An audit hook cannot be
    removed: after the first event it only compares one flag."""
    import threading  # lazy: every child Python process imports this module; only a profiled one needs it
    import time  # lazy: every child Python process imports this module; only a profiled one needs it
    done = []

    def hook(event, args):
        if done or not event.startswith("cpython.run_") or event not in _RUN_EVENTS:
            return
        done.append(1)
        try:
            t = time.perf_counter_ns()
            s.buffer.append((0, _MARK, threading.get_native_id(), t, t, "main_start", None, "inferscope.run"))
        except Exception:
            pass
    try:
        sys.addaudithook(hook)
    except Exception:
        pass


CHILD_SAMPLING_HZ = 100.0     # followed children sample at most this often
CHILD_FLUSH_S = 0.5           # and flush their crash journal this often
_HELPERS = (b"resource_tracker", b"semaphore_tracker")   # multiprocessing's helpers: not the program's work
_FORKSERVER = b"multiprocessing.forkserver"


def child_trace_path(out: str, pid: int) -> str:
    return f"{out}.child.{pid}.iscope"


def _follow_on(cfg) -> bool:
    return bool(getattr(cfg, "follow_children", True))


def _mp_exit_hook(_obj=None) -> None:
    """multiprocessing runs its finalisers at the end of every child's ``Process._bootstrap``,
    also when the child then leaves through ``os._exit`` (fork / forkserver start methods), where
    atexit never runs; the child's trace is written there (last, after the program's own)."""
    # lazy: every child Python process imports this module; only a profiled one needs it
    from multiprocessing import util
    util.Finalize(None, _at_exit, exitpriority=-(10 ** 6))
    # the frames below Process._bootstrap are the parent's, copied by fork and never run here (the
    # parent's <module>, the function that started the pool): transparent, or the worker's
    # multiprocessing plumbing would be labelled with the parent's script
    try:
        # lazy: every child Python process imports this module; only a profiled one needs it
        from .classify import mark_transparent
        f = sys._getframe()
        while f is not None and f.f_code.co_name != "_bootstrap":
            f = f.f_back
        f = f.f_back if f is not None else None
        while f is not None:
            mark_transparent(f.f_code)
            f = f.f_back
    except Exception:
        pass


def _hook_multiprocessing_exit() -> None:
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is None:
        return       # a plain os.fork(): atexit (sys.exit) or the crash journal
    try:
        # run by Process._bootstrap after it clears the finaliser registry inherited from the parent
        mp_util.register_after_fork(_mp_exit_hook, _mp_exit_hook)
    except Exception:
        pass


def _start_child(out: str, forked: bool = False, cfg=None) -> None:
    """A light session in a child process: the CPU sampler only (no torch profiler, no system or
    GPU counters, no /metrics endpoint: the parent records those; no perf IP samples: the GIL
    heuristic splits cpu_compute / framework), at most CHILD_SAMPLING_HZ, written at the child's
    exit (atexit, or multiprocessing's finalisers in a forked worker) or left as its crash journal
    when it is terminated."""
    global _session, _atexit_on
    try:
        import dataclasses  # lazy: every child Python process imports this module; only a profiled one needs it
        from .. import log  # lazy: every child Python process imports this module; only a profiled one needs it
        # lazy: every child Python process imports this module; only a profiled one needs it
        from ..config import Config, load_config
        from . import session as S  # lazy: every child Python process imports this module; only a profiled one needs it
        if cfg is None:
            cj = os.environ.get("INFERSCOPE_CONFIG_JSON")
            cfg = Config.from_json(cj) if cj else load_config()
        # a lower sampling rate keeps a child's cost small.  No SIGTERM handler: a handler that
        # raises or writes at an arbitrary point of a worker hung 2 of ~10 test runs
        cfg = dataclasses.replace(cfg, torch_profiler="off", cupti=False, system_sampling_hz=0.0, perf_ip_sampling=False,
                                  cpu_sampling_frequency_hz=min(cfg.cpu_sampling_frequency_hz, CHILD_SAMPLING_HZ),
                                  flush_interval_s=CHILD_FLUSH_S, metrics_port=-1)
        if cfg.log_level not in ("debug",):
            log.set_level("error")    # the main session says what the children would (CPU-only mode ...)
        path = child_trace_path(out, os.getpid())
        with open(path + ".started", "w"):     # the parent waits for this child's trace (run_report.py)
            pass
        s = S.Session(cfg, trace_out=path, mode="child")
        S.set_current(s)
        _session = s
        s.start()
        if not forked:
            _mark_main_start(s)
        if not _atexit_on:
            atexit.register(_at_exit)
            _atexit_on = True
        if forked:
            _hook_multiprocessing_exit()
        else:
            _register_fork_hooks()
    except Exception as e:  # never break the user's child process
        try:
            sys.stderr.write(f"inferscope: not following child process {os.getpid()}: {type(e).__name__}: {e}\n")
        except Exception:
            pass


def _child_main(out: str) -> None:
    """A Python process started by the program (the claim exists): follow it unless following is
    off or it is one of multiprocessing's helpers."""
    global _out, _follow
    try:
        with open("/proc/self/cmdline", "rb") as f:
            cmd = f.read()
    except OSError:
        cmd = b""
    if any(h in cmd for h in _HELPERS):
        return       # no work of the program's, and it outlives the parent
    try:
        # lazy: every child Python process imports this module; only a profiled one needs it
        from ..config import Config, load_config
        cj = os.environ.get("INFERSCOPE_CONFIG_JSON")
        cfg = Config.from_json(cj) if cj else load_config()
    except Exception as e:
        sys.stderr.write(f"inferscope: bad configuration, not following child process {os.getpid()}: {e}\n")
        return
    if not _follow_on(cfg):
        return
    _out, _follow = out, True
    if _FORKSERVER in cmd:      # the forkserver only forks the workers: follow those, not it
        import threading  # noqa: F401  its own after-fork reset must run before ours (hooks run in order)
        _register_fork_hooks()
        return
    _start_child(out, cfg=cfg)


def main() -> None:
    global _session, _out, _follow, _atexit_on
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
        # a Python child of the profiled program (multiprocessing spawn worker, DataLoader worker
        # started with spawn, a `subprocess` Python child): followed into its own trace file next
        # to the main one, merged by the parent; /proc counting is always on
        _child_main(out)
        return
    except OSError as e:
        sys.stderr.write(f"inferscope: cannot create the trace file next to {out}: {e}\n")
        return
    from .. import log  # lazy: every child Python process imports this module; only a profiled one needs it
    # lazy: every child Python process imports this module; only a profiled one needs it
    from ..config import Config, load_config
    from . import session as S  # lazy: every child Python process imports this module; only a profiled one needs it
    cj = os.environ.get("INFERSCOPE_CONFIG_JSON")
    try:
        cfg = Config.from_json(cj) if cj else load_config()
    except Exception as e:
        sys.stderr.write(f"inferscope: bad configuration, not collecting: {e}\n")
        return
    log.set_level(cfg.log_level)
    _out, _follow = out, _follow_on(cfg)
    s = S.Session(cfg, trace_out=out, mode="run")
    S.set_current(s)
    _session = s
    s.start()
    _mark_main_start(s)
    atexit.register(_at_exit)
    _atexit_on = True
    sys.excepthook = _excepthook(sys.excepthook)
    for name in _TERM_SIGNALS:
        try:
            sig = getattr(signal, name)
            if signal.getsignal(sig) == signal.SIG_DFL:    # not when ignored (nohup) or the program's own
                signal.signal(sig, _on_term)
        except (AttributeError, ValueError, OSError):
            pass
    _register_fork_hooks()
