"""Building and saving a collection session's Trace (collect/session.py's Session, passed as ``s``).

Session.build_trace / journal_meta / flush / finalize call these functions.

build_trace: the ring buffer's events (+ the sampler's open runs while collecting) into a TraceBuilder
(assemble.py), the GPU sources merged onto the perf_counter clock (gpu_merge.py: torch profiler export,
CUPTI), the meta (session_meta.py).  flush: the events since the last flush appended to the crash
journal (journal.py) with what the parent needs to rebuild a trace after a SIGKILL.  finalize: stop
every collector, export the torch profiler trace, build the final trace and save it - in a followed child
(mode "child") ``finalize_journal`` instead: its final journal, built by the parent (no numpy in the child).
"""
from __future__ import annotations

import os
import sys
import threading
import time

from .. import log
from .journal import REWRITE_FACTOR, JournalWriter, final_path, path_for
from .session_meta import collection_meta, devices, sampling_rate_warning, trace_meta
from .system import numa_placement


def refresh_thread_names(s) -> None:
    for t in threading.enumerate():
        if t.native_id is not None:
            s.thread_names[t.native_id] = t.name
    nt = s.sampler.native_threads if s.sampler else None
    if nt is not None:
        s.thread_names.update(nt.names)


def build_trace(s, final: bool = False, kineto_path: str | None = None, end_ns: int | None = None):
    from ..trace.builder import TraceBuilder  # lazy: the trace is built at the end (numpy); not at start-up
    from .assemble import add_events, overflow_warning  # lazy: the trace is built at the end (numpy); not at start-up
    # lazy: the trace is built at the end (numpy); not at start-up
    from .gpu_merge import clock_sync_limit_us, clock_sync_warning, merge_cupti, merge_kineto, profiler_cost
    end_ns = end_ns or time.perf_counter_ns()
    events = s.buffer.snapshot()
    if not final and s.sampler is not None:
        events += s.sampler.open_runs()
    refresh_thread_names(s)
    b = TraceBuilder()
    add_events(b, events, pid=s.pid, main_tid=threading.main_thread().native_id,
               thread_names=s.thread_names, idle_tids=s.sampler.idle_tids() if s.sampler else ())
    meta = collection_meta(s, end_ns, final)
    warnings = list(s.warnings)
    meta_devices = devices(s)
    dropped_extra = 0
    # seed 001's clock-sync rule: error > 5 % of the collection, the fixed margin as the floor (gpu_merge.py)
    limit_args = (meta["duration_ms"], s.cfg.sync_error_margin_us)
    if kineto_path:
        dropped_extra, err_us = merge_kineto(s, b, kineto_path, len(events), warnings, meta_devices)
        meta["clock_sync_error_us"] = err_us
        profiler_cost(s, meta)
        warnings.extend(filter(None, [clock_sync_warning("torch profiler", err_us, *limit_args)]))
    cupti = s.gpu_act is not None and bool(s.gpu_act.clock_start)
    if cupti:
        dropped_extra += merge_cupti(s, b, len(events), meta, warnings)
        warnings.extend(filter(None, [clock_sync_warning("CUPTI", meta["clock_sync_error_us"], *limit_args)]))
    if kineto_path or cupti:
        meta["clock_sync_limit_us"] = round(clock_sync_limit_us(*limit_args), 3)
    if meta["clock_sync_error_us"] is None and not kineto_path and not cupti:
        meta["clock_sync_error_us"] = 0.0   # one clock only (perf_counter): nothing to align
    meta["clock_sources"] = (["perf_counter_ns"] + (["torch_profiler"] if kineto_path else [])
                             + (["cupti"] if cupti else []))
    meta["dropped_events"] += dropped_extra
    if meta["dropped_events"]:
        w = overflow_warning(meta["dropped_events"], s.cfg.trace_size_mb, s.buffer.capacity)
        warnings.append(w)
        if not getattr(s, "_overflow_said", False):    # seed 001: buffer overflow -> warn, once per session
            s._overflow_said = True
            log.warn(w)
    b.meta.update(trace_meta(s, meta, warnings, meta_devices))
    if s.numa:
        b.meta["numa"] = s.numa
    trace = b.finalize()
    meta["events"] = int(trace.n_events)
    return trace


def journal_meta(s, end_ns: int | None = None, complete: bool = False) -> dict:
    """What the parent needs besides the events to rebuild a trace after a SIGKILL (journal.py)."""
    refresh_thread_names(s)
    meta = collection_meta(s, end_ns or time.perf_counter_ns(), complete)
    meta["clock_sync_error_us"] = 0.0
    meta["clock_sources"] = ["perf_counter_ns"]
    return {
        "pid": s.pid, "main_tid": threading.main_thread().native_id,
        "thread_names": dict(s.thread_names),
        "idle_tids": sorted(s.sampler.idle_tids()) if s.sampler else [],
        "open_runs": s.sampler.open_runs() if s.sampler else [],
        "capacity": s.buffer.capacity, "total_events": s.buffer.total,
        "trace_meta": trace_meta(s, meta, list(s.warnings), devices(s)),
    }


def flush(s, meta: dict | None = None) -> None:
    """Append the events since the last flush to the crash journal (journal.py); ``meta``: the final one."""
    if s.journal is None:
        s.journal = JournalWriter(path_for(s.trace_out))
    j = s.journal
    new = s.buffer.take_new()
    if j.events + len(new) > REWRITE_FACTOR * s.buffer.capacity:
        j.rewrite(s.buffer.snapshot(), meta or journal_meta(s))   # bounded on disk
    else:
        j.append(new, meta or journal_meta(s))
    s.flushes += 1


def finalize_journal(s, end_ns: int, exit_reason: str | None, t0: float) -> None:
    """A followed child's end (``Session.mode == "child"``, collectors stopped): the events since the last flush
    and the final metadata appended to its journal, renamed to ``<trace>.final`` for the parent to build
    (journal.load) - the child never imports numpy nor the trace builder (journal.py)."""
    meta = journal_meta(s, end_ns, complete=True)
    meta["open_runs"] = []          # the sampler has stopped: every run is closed, in the buffer
    c = meta["trace_meta"]["collection"]
    if exit_reason:
        c["exit_reason"] = exit_reason
    c["finalize_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
    c["process_cpu_ms"] = round(time.process_time_ns() / 1e6, 3)
    flush(s, meta)
    s.journal.close()
    os.replace(path_for(s.trace_out), final_path(s.trace_out))


def finalize(s, exit_reason: str | None = None):
    """Stop every collector, merge the torch profiler trace, save (if trace_out). Idempotent."""
    with s._final_lock:
        if s.finalized:
            return getattr(s, "_final_trace", None)
        s.finalized = True
        end_ns = time.perf_counter_ns()
        t0 = time.perf_counter()
        # self CPU time before stopping (threads' CPU clocks vanish when they exit)
        s.stop_collectors()
        if s.system is not None:       # the children's CPU time up to the end of the run
            try:
                s.system.sample_children(time.perf_counter_ns(), force=True)
            except Exception:
                pass
        kpath = None
        if s.torch is not None and s.torch.active:
            import tempfile  # lazy: the trace is saved at the end; not at start-up
            fd, kpath = tempfile.mkstemp(prefix="inferscope-torch-", suffix=".json")
            os.close(fd)
            if not s.torch.stop_and_export(kpath):
                s._warn(s.torch.error or "torch profiler export failed")
                kpath = None
        if s.torch is not None and s.torch.error and s.torch.error not in s.warnings:
            s.warnings.append(s.torch.error)
        refresh_thread_names(s)
        low = sampling_rate_warning(s.sampler, s.cfg.cpu_sampling_frequency_hz, s.thread_names)
        if low:
            s._warn(low)
        if s.gpu_count == 0 or (s.gpu_count is None and not (s.nvml and s.nvml.ok)):
            s._warn("CUDA unavailable: CPU-only mode (no GPU timeline)")
        try:
            buses = [d.get("pci_bus_id") for d in s.nvml.devices if d.get("pci_bus_id")] if s.nvml else []
            s.numa = numa_placement(buses) or None
            tm = sys.modules.get("torch")
            if s.numa is not None and tm is not None and hasattr(tm, "get_num_threads"):
                s.numa["torch_threads"] = int(tm.get_num_threads())   # intra-op threads vs the CPUs allowed
        except Exception:
            s.numa = None
        if s.trace_out and s.mode == "child" and kpath is None and s.gpu_act is None:
            finalize_journal(s, end_ns, exit_reason, t0)     # the parent builds it (journal.py)
            log.info("Trace collection completed (journal)")
            return None
        trace = build_trace(s, final=True, kineto_path=kpath, end_ns=end_ns)
        fl = getattr(s.sampler, "facts", None) if s.sampler is not None else None
        if fl is not None:       # (the sampler has stopped: every thread's log is closed)
            trace.facts = fl.encode(os.getpid(), s.sampler.idle_tids())
            trace.meta["collection"]["facts"] = {"items": fl.items, "truncated": fl.truncated}
        if kpath:
            try:
                os.unlink(kpath)
            except OSError:
                pass
        if exit_reason:
            trace.meta["collection"]["exit_reason"] = exit_reason
        trace.meta["collection"]["finalize_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
        # whole-process CPU time since interpreter start (user+sys, all threads), for benchmarks
        trace.meta["collection"]["process_cpu_ms"] = round(time.process_time_ns() / 1e6, 3)
        if s.trace_out:
            from ..trace import native  # lazy: the trace is saved at the end; not at start-up
            native.save(trace, s.trace_out)
            if s.journal is not None:      # the final trace supersedes the crash journal
                s.journal.close(remove=True)
        c = trace.meta["collection"]
        log.info(f"Trace collection completed (events={c['events']}, duration_ms={c['duration_ms']:.1f})")
        if kpath and c.get("clock_sync_error_us") is not None:
            log.info(f"Timeline merger: CPU/torch profiler clock sync (error_us={c['clock_sync_error_us']:.0f})")
        s._final_trace = trace
        return trace
