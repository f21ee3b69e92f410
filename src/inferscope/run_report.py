"""The report of ``inferscope run``, once the program has exited.

Its trace is loaded (rebuilt from the crash journal when the program was killed, an empty one when nothing was
flushed), the followed child processes' traces merged in, how the run ended recorded, and the report analysed and
written through app.py; when that fails the trace is moved where it survives and the log says where.  The program's
exit code is returned either way (``report_run``).
"""
from __future__ import annotations

import glob
import os
import shutil
import signal
import time

from . import log
from .collect import journal
from .errors import InferScopeError
from .run_child import CHILD_RUSAGE, exit_code
from .util.proc import pid_alive


def _signame(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


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


def report_run(rc, cmd, trace_path, outputs, opts, args, wall_ms, keep, outdir=None) -> int:
    """Load, analyse and write; any failure is logged and the child's exit code is still returned.

    The collected trace is never lost: when the report cannot be written it is moved next to
    the report (or into the working folder) and the log says where."""
    code = exit_code(rc)
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
        trace = journal.load(jpath)        # InferScopeError: logged by report_run, the journal is kept
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
