"""Parent side of ``inferscope run [--report PATH] [--format F] [--trace PATH] -- CMD ...``.

Spawns CMD with INFERSCOPE_ENABLED=1, INFERSCOPE_TRACE_OUT=<trace file>, the resolved
configuration (INFERSCOPE_CONFIG_JSON) and a PYTHONPATH whose first entry holds InferScope's
sitecustomize.py (chaining to any existing one), so a Python child collects without code
changes.  stdin/stdout/stderr pass through; the child's exit code is returned (128+N for a
signal N).  When the child ends the parent loads the trace, analyses it and writes the report,
also after an exception, sys.exit(n), Ctrl-C or SIGKILL (then rebuilt from the child's crash
journal, journal.py).
"""
from __future__ import annotations

import glob
import importlib
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from .analyze.options import options_from_args
from .collect.nvml import count_visible_gpus
from .collect.session import multi_gpu_message
from .outputs import output_folder, resolve_outputs
from .report.writer import refuse_overwriting_inputs
from .util.proc import pid_alive
from . import log
from .config import load_config
from .errors import ConfigError, InferScopeError
from .collect import journal

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


def _signame(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


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


def _spawn_and_wait(cmd: list[str], env: dict, prewarm: list[str] | None = None) -> int:
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


def run_command(args) -> int:
    cmd = list(args.cmd or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise ConfigError("run: no command given (usage: inferscope run [--report PATH] -- python app.py ARGS...)")
    cfg = load_config(flags={"report_path": getattr(args, "report", None),
                             "report_format": getattr(args, "format", None),
                             "metrics_port": getattr(args, "metrics_port", None),
                             "metrics_host": getattr(args, "metrics_host", None),
                             "torch_profiler": "on" if getattr(args, "ops", False) or getattr(args, "ops_shapes", False) else None,
                             "torch_record_shapes": True if getattr(args, "ops_shapes", False) else None})
    if getattr(args, "quiet", False):
        cfg.log_level = "error"   # the child's InferScope logs too (it reads the config from the parent)
    log.set_level(cfg.log_level)
    if not cfg.enabled:
        log.info("collection disabled (INFERSCOPE_ENABLED=0 / enabled: false): running the program unprofiled")
        env = dict(os.environ)
        return _exit_code(_spawn_and_wait(cmd, env))
    n = count_visible_gpus()
    if n is not None and n > 1:
        raise InferScopeError(multi_gpu_message(n))
    opts = options_from_args(args)
    outputs = resolve_outputs(cfg.report_path, cfg.report_format)
    outdir = output_folder(cfg.report_path, outputs)
    keep = getattr(args, "trace", None)
    if keep:
        refuse_overwriting_inputs(outputs, [Path(keep)])   # the report must not replace the kept trace
        if os.path.isdir(keep):
            raise ConfigError(f"--trace {keep}: is a directory (give a file path, e.g. run.iscope)")
        try:
            Path(os.path.abspath(keep)).parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"--trace {keep}: cannot create its folder ({e.strerror or e})") from None
    check_writable(outputs + ([("iscope", Path(os.path.abspath(keep)))] if keep else []))
    tmpdir = tempfile.mkdtemp(prefix="inferscope-run-")
    trace_path = os.path.abspath(keep) if keep else os.path.join(tmpdir, "trace.iscope")
    try:
        if keep:
            for p in (trace_path, trace_path + ".claim", journal.path_for(trace_path)):
                try:
                    if os.path.lexists(p):
                        os.unlink(p)
                except OSError as e:
                    raise ConfigError(f"--trace {keep}: cannot replace {p} ({e.strerror or e})") from None
        env = child_env(trace_path, cfg)
        if getattr(args, "facts", False):
            env["INFERSCOPE_FACTS"] = "1"      # the sampler records its decisions' inputs (collect/facts.py)
        t0 = time.perf_counter()
        rc = _spawn_and_wait(cmd, env, prewarm=PREWARM + [
            m for m in (_renderer_module(f) for f, _ in outputs) if m])
        wall_ms = (time.perf_counter() - t0) * 1e3
        return _report(rc, cmd, trace_path, outputs, opts, args, wall_ms, keep, outdir)
    finally:
        try:
            os.unlink(trace_path + ".claim")
        except OSError:
            pass
        shutil.rmtree(tmpdir, ignore_errors=True)


def check_writable(paths: list[tuple[str, Path]]) -> None:
    """ConfigError (one line, exit 2) when a report or trace path cannot be written, before the program runs: its
    run would otherwise end with no report.  Each folder is created (as writing it would) and a probe file made
    and removed in it."""
    for folder in dict.fromkeys(p.parent for _f, p in paths):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(prefix=".inferscope-probe-", dir=folder)
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            raise ConfigError(f"run: cannot write the report or trace in {folder} ({e.strerror or e})") from None
    for fmt, p in paths:
        if fmt != "csv" and p.is_dir():          # (csv writes a folder of tables)
            raise ConfigError(f"run: cannot write {p}: it is a folder")


CHILD_WAIT_S = 5.0


def _merge_children(trace, trace_path: str):
    """Merge the traces of followed child processes into the main one: ``<trace>.child.<pid>.iscope.final``
    (a child's complete journal, collect/journal.py), ``.iscope`` (a trace), else its crash journal."""
    from .trace import native  # lazy: `inferscope run`'s parent loads it after the child exits
    from .trace.merge import merge_traces  # lazy: `inferscope run`'s parent loads it after the child exits
    # a followed child still writing its trace (it outlived the program by a moment): wait for it,
    # at most CHILD_WAIT_S in all, while its process exists
    deadline = time.monotonic() + CHILD_WAIT_S
    for m in glob.glob(glob.escape(trace_path) + ".child.*.iscope.started"):
        done = m[:-len(".started")]
        try:
            pid = int(done.rsplit(".child.", 1)[1].split(".")[0])
        except ValueError:
            continue
        while (not os.path.exists(done) and not os.path.exists(journal.final_path(done))
               and time.monotonic() < deadline and pid_alive(pid)):
            time.sleep(0.05)
    child = glob.escape(trace_path) + ".child.*.iscope"
    paths = sorted(glob.glob(child))
    finals = sorted(glob.glob(child + journal.FINAL_SUFFIX))
    started = glob.glob(child + ".started")
    journals = glob.glob(child + journal.SUFFIX)
    ended = set(paths) | {p[:-len(journal.FINAL_SUFFIX)] for p in finals}
    loads = ([(native.load, p) for p in paths] + [(journal.load, p) for p in finals]
             # terminated (Pool.terminate) before writing: its crash journal
             + [(journal.load, journal.path_for(p)) for p in sorted({m[:-len(".started")] for m in started} - ended)])
    kids, bad = [], 0
    for load, p in loads:
        try:
            kids.append(load(p))
        except Exception:
            bad += 1
    for p in paths + finals + started + journals:
        try:
            os.unlink(p)
        except OSError:
            pass
    if not kids and not bad:
        return trace
    merged = merge_traces(trace, kids) if kids else trace
    coll = merged.meta.setdefault("collection", {})
    coll["followed_children"] = len(kids)
    if bad:
        merged.meta.setdefault("warnings", []).append(f"{bad} followed child process(es) left no readable trace "
                                                      "(killed before writing, or still running when the program ended)")
    return merged


# what the parent needs once the child exits: trace loading, the analyses, the renderers
PREWARM = ["numpy", "inferscope.trace.native", "inferscope.analyze.pipeline"]


def _renderer_module(fmt: str) -> str | None:
    from .report import RENDERERS  # lazy: `inferscope run`'s parent loads it after the child exits
    r = RENDERERS.get(fmt)
    return r[0] if r else None


def _exit_code(rc: int) -> int:
    return 128 - rc if rc < 0 else rc


def _rescue_trace(trace_path: str, outputs, keep) -> str | None:
    """Move a collected trace out of the temporary folder so that it survives a failed report.

    Tries beside the first report (``<stem>.iscope``), then the working folder; returns where it is."""
    src = trace_path if os.path.exists(trace_path) else journal.path_for(trace_path)
    if keep:
        return src if os.path.exists(src) else None
    if not os.path.exists(src):
        return None
    suffix = ".iscope" if src == trace_path else ".iscope.journal"
    stem = outputs[0][1].name.split(".")[0] if outputs else "inferscope-run"
    for folder in ([str(outputs[0][1].parent)] if outputs else []) + [os.getcwd()]:
        dst = os.path.join(folder, f"{stem or 'inferscope-run'}-{os.getpid()}{suffix}")
        try:
            shutil.move(src, dst)
            return dst
        except OSError:
            continue
    return src


def _report(rc, cmd, trace_path, outputs, opts, args, wall_ms, keep, outdir=None) -> int:
    """Load, analyse and write; any failure is logged and the child's exit code is still returned.

    The collected trace is never lost: when the report cannot be written it is moved next to
    the report (or into the working folder) and the log says where."""
    code = _exit_code(rc)
    try:
        _report_or_raise(rc, cmd, trace_path, outputs, opts, args, wall_ms, keep, outdir)
    except KeyboardInterrupt:
        kept = _rescue_trace(trace_path, outputs, keep)
        log.error("interrupted while writing the report" + (f"; trace kept at {kept}" if kept else ""))
        return code if code else 130
    except Exception as e:   # InferScopeError, OSError, a bug: the program's own exit code still wins
        kept = _rescue_trace(trace_path, outputs, keep)
        msg = " ".join(str(e).split())[:300] or type(e).__name__
        if not isinstance(e, InferScopeError):
            msg = f"internal error: {type(e).__name__}: {msg}"
        log.error(f"report not written: {msg}" + (f"; trace kept at {kept} (inferscope analyze {kept})"
                                                   if kept else ""))
    return code


def _unflushed_trace(how: str, wall_ms: float, trace_path: str):
    """An empty trace for a program that ended before the collector's first journal flush (killed, os._exit
    while importing): the report still says how the run ended, and that no data was collected."""
    from .trace.builder import TraceBuilder  # lazy: `inferscope run`'s parent loads it after the child exits
    try:
        with open(trace_path + ".claim") as f:
            pid = int(f.read().strip() or -1)
    except (OSError, ValueError):
        pid = -1
    b = TraceBuilder()
    b.meta.update(source_format="inferscope", devices=[], warnings=[], tool_versions={}, missing=[],
                  collection={"mode": "live", "complete": False, "pid": pid, "duration_ms": 0.0,
                              "events": 0, "dropped_events": 0})
    b.meta["collection"]["unflushed"] = True
    return b.finalize()


def _report_or_raise(rc, cmd, trace_path, outputs, opts, args, wall_ms, keep, outdir) -> None:
    from .trace import native  # lazy: `inferscope run`'s parent loads it after the child exits
    how = f"exit code {rc}" if rc >= 0 else f"killed by {_signame(-rc)}"
    if rc != 0:
        log.warn(f"the program ended with {how}")
    jpath = journal.path_for(trace_path)
    if os.path.exists(trace_path):
        trace = native.load(trace_path)
    elif os.path.exists(jpath):      # killed before finalising: rebuild from the crash journal
        trace = journal.load(jpath)        # InferScopeError: logged by _report, the journal is kept
        from .trace.validate import check  # lazy: `inferscope run`'s parent loads it after the child exits
        trace = check(trace, os.path.basename(jpath))
    else:
        if not os.path.exists(trace_path + ".claim"):
            log.error("no trace was collected: the program did not start a Python interpreter with InferScope's "
                      "bootstrap (not Python, python -S/-I, or PYTHONPATH overridden); no report written")
            return
        trace = _unflushed_trace(how, wall_ms, trace_path)
    trace = _merge_children(trace, trace_path)
    coll = trace.meta.setdefault("collection", {})
    coll["exit_code"] = rc if rc >= 0 else None
    coll["exit_signal"] = _signame(-rc) if rc < 0 else None
    coll["command"] = os.path.basename(cmd[0])
    coll["run_wall_ms"] = round(wall_ms, 3)
    if CHILD_RUSAGE:   # the child's own CPU time and peak RSS (wait4), excluding this parent
        coll["child_cpu_ms"] = CHILD_RUSAGE.get("cpu_ms")
        coll["child_maxrss_mb"] = CHILD_RUSAGE.get("maxrss_mb")
    warnings = trace.meta.setdefault("warnings", [])
    if not coll.get("complete", False):
        msg = (f"the program ended ({how}) before InferScope could finalise; the report covers the data flushed "
               f"up to {coll.get('duration_ms', 0):.0f} ms into the run (torch profiler data lost)"
               if not coll.get("unflushed") else f"the program ended ({how}) {wall_ms:.0f} ms after it started, before "
               "InferScope's first flush of its data: nothing was collected")
        warnings.append(msg)
        log.warn(msg)
    if keep:
        native.save(trace, trace_path)   # with the exit status: `inferscope analyze` reproduces the report
        log.info(f"Trace written: {trace_path}")
        if os.path.exists(jpath):
            try:
                os.unlink(jpath)
            except OSError:
                pass
    elif not os.path.exists(trace_path):
        native.save(trace, trace_path)   # rebuilt from the journal: keep it rescuable until the report is out
    try:
        from .app import report  # lazy: `inferscope run`'s parent loads it after the child exits
    except ImportError as e:
        raise InferScopeError(f"analysis unavailable ({e})") from None
    t0 = time.perf_counter()
    _, result, written = report(trace, opts, outputs, outdir, [trace_path] if keep else [], defer_interrupt=True)
    if os.path.exists(jpath):
        try:
            os.unlink(jpath)
        except OSError:
            pass
    v = result.get("verdict") or {}
    if v.get("id"):
        log.info(f"Bottleneck analysis: {v.get('id')} (confidence={v.get('confidence', 0):.2f})")
    for p in written:
        log.info(f"Report generated: {p} ({(time.perf_counter() - t0) * 1e3:.0f} ms)")
