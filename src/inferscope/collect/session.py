"""One collection session: owns the ring buffer and the collectors, builds and saves the Trace.

Threads: the CPU sampler (sampler.py) and one housekeeping thread (system + NVML counters at
``system_sampling_hz`` when the sampler is off, NVML, and every ``flush_interval_s`` an append of
the new events to the crash journal (journal.py), so a SIGKILLed child still leaves data).
Timestamps: ``time.perf_counter_ns`` (CLOCK_MONOTONIC); GPU sources (CUPTI, torch profiler) are
shifted onto it (gpu_merge.py).
"""
from __future__ import annotations

import os
import sys
import threading
import time

from .. import log
from ..config import Config
from .buffer import BYTES_PER_EVENT, RingBuffer
from .rawio import start_perf_ns

_session = None
_session_lock = threading.Lock()


def current():
    return _session


def get_or_start(mode: str = "library"):
    """The running session, starting a library-mode one if collection is enabled."""
    global _session
    s = _session
    if s is not None:
        return s
    with _session_lock:
        if _session is None:
            from ..config import load_config
            try:
                cfg = load_config()
            except Exception as e:
                log.warn(f"configuration error, collection disabled: {e}")
                return None
            if not cfg.enabled:
                return None
            log.set_level(cfg.log_level)
            s = Session(cfg, mode=mode)
            s.start()
            if s.single_gpu_error:
                s.finalize()
                from ..errors import InferScopeError
                raise InferScopeError(s.single_gpu_error)
            _session = s
            if mode == "library":
                # `inferscope run` stops collection in bootstrap's atexit; a library-mode session
                # must stop its sampler thread too, before the interpreter (and torch's static
                # destructors) tear down under it: a live sampler there aborted the process
                # ("terminate called without an active exception").
                import atexit
                atexit.register(_stop_library_session, s)
    return _session


def _stop_library_session(s) -> None:
    try:
        if not s.finalized:
            s.stop_collectors()
    except Exception:
        pass


def set_current(s) -> None:
    global _session
    _session = s



class Session:
    def __init__(self, cfg: Config, trace_out: str | None = None, mode: str = "run") -> None:
        self.cfg = cfg
        self.trace_out = trace_out
        self.mode = mode
        self.buffer = RingBuffer(cfg.trace_size_mb, journal=bool(trace_out))
        self.journal = None
        self.scope_stacks: dict[int, list] = {}
        # per thread ident: (perf_counter_ns, thread CPU ns) read by scope() at its entry and exit (sampler.py,
        # _split_at_marks: exact CPU at the window's edges inside a long tick interval)
        self.cpu_marks: dict[int, list] = {}
        self.scope_names: set[str] = set()
        self.skip_idents: set[int] = set()
        self.warnings: list[str] = []
        self.pid = os.getpid()
        self.sampler = None
        self.system = None
        self.nvml = None
        self.torch = None
        self.torch_hook = None
        self.llm = None
        self.torch_state = "not imported"
        self.gpu_act = None          # gpu_activity.CuptiCollector once CUDA is used (cupti on)
        self._gpu_hooks: list = []
        self._stop = threading.Event()
        self._hk: threading.Thread | None = None
        self._hk_clk = None
        self.flushes = 0
        self.finalized = False
        self._final_lock = threading.Lock()
        self.thread_names: dict[int, str] = {}
        self.start_ns = 0
        self.end_ns = 0
        self.gpu_count = None
        self.single_gpu_error: str | None = None
        self._hk_system = False
        self.metrics = None          # exporter.Metrics when a /metrics endpoint runs
        self.gc_pauses = None        # gcpauses.GcPauses while gc_pauses is on
        self.metrics_server = None

    # ------------------------------------------------------------------ start
    def start(self) -> None:
        from .sampler import Sampler
        from .system import SystemSampler
        from .nvml import NvmlSampler
        cfg = self.cfg
        self.start_ns = time.perf_counter_ns()
        self.process_start_ns = start_perf_ns("/proc/self/stat")   # this process's start, on the trace's clock
        self.wall_start_ns = time.time_ns()
        self.cpu_start_ns = time.process_time_ns()
        log.info(f"Trace collection started (buffer_size_mb={cfg.trace_size_mb:g}, cpu_sampling_hz={cfg.cpu_sampling_frequency_hz:g})")
        self.sampler = Sampler(self.buffer, cfg.cpu_sampling_frequency_hz, self.scope_stacks, self.skip_idents)
        self.sampler.cpu_marks = self.cpu_marks
        self.sampler.use_perf = cfg.perf_ip_sampling
        self.sampler.probe_blocking = cfg.offcpu_probe
        self.system = SystemSampler(self.buffer.append)
        if self.system.warning:
            self._warn(self.system.warning)
        self.nvml = NvmlSampler(self.buffer.append)
        if self.nvml.warning:
            self._warn(self.nvml.warning)
        if self.nvml.nv is not None and self.nvml.ok:
            self.gpu_count = len(self.nvml.handles)
            if self.gpu_count > 1:
                self.single_gpu_error = multi_gpu_message(self.gpu_count)
        # torch: now if already imported, else when the workload imports it
        if cfg.torch_profiler != "off":
            from .torchprof import TorchImportHook, TorchProfiler
            self.torch = TorchProfiler(log)
            if "torch" in sys.modules:
                self._on_torch_import()
            else:
                self.torch_hook = TorchImportHook(self._on_torch_import)
                self.torch_hook.install()
        else:
            self.torch_state = "off (config)"
        if cfg.cupti and cfg.torch_profiler != "on":
            self._hook_cuda_modules()
        try:
            from .llmhook import LlmRecorder
            self.llm = LlmRecorder(self)
            self.llm.start()
        except Exception as e:   # optional: never stops collection
            self.llm = None
            log.debug(f"transformers generate() recording not installed: {e}")
        sys_on_sampler = bool(self.sampler.interval_ns and cfg.system_sampling_hz > 0)
        if sys_on_sampler:   # piggyback on the sampler's ticks: no extra thread wake-ups
            self.sampler.periodic = (self.system.sample, int(1e9 / cfg.system_sampling_hz))
            self.sampler.per_tick = self.system.faults_tick
        if getattr(cfg, "metrics_port", -1) >= 0:
            self.serve_metrics(cfg.metrics_host, cfg.metrics_port)
        if getattr(cfg, "gc_pauses", True):
            from .gcpauses import GcPauses
            self.gc_pauses = GcPauses(self.buffer.append)
            self.gc_pauses.start()
        self.sampler.start()
        self._hk_system = cfg.system_sampling_hz > 0 and not sys_on_sampler
        nvml_on = self.nvml.ok and cfg.system_sampling_hz > 0
        if self._hk_system or nvml_on or self.trace_out:
            self._hk = threading.Thread(target=self._housekeeping, name="inferscope-housekeeping", daemon=True)
            self._hk.start()
        log.debug(f"CPU collector initialized (threads={threading.active_count()})")

    def serve_metrics(self, host: str = "127.0.0.1", port: int = 0):
        """Start the Prometheus endpoint (once); its server, or None when the port cannot be bound."""
        if self.metrics_server is None:
            from .exporter import start_for_session
            self.metrics_server = start_for_session(self, host, int(port))
        return self.metrics_server

    def _warn(self, msg: str) -> None:
        if msg not in self.warnings:
            self.warnings.append(msg)
            log.warn(msg)

    def _on_torch_import(self) -> None:
        import torch
        try:
            n = int(torch.cuda.device_count())
        except Exception:
            n = 0
        self.gpu_count = n if self.gpu_count is None else max(n, self.gpu_count)
        if n > 1:
            self.single_gpu_error = multi_gpu_message(n)
        msg = cuda_version_mismatch(self.cfg.cuda_version, getattr(torch.version, "cuda", None))
        if msg:
            self._warn(msg)
        if self.torch is not None and self.cfg.torch_profiler == "auto":
            try:
                cuda = bool(torch.cuda.is_available())
            except Exception:
                cuda = False
            if cuda and self._start_cupti():
                # CUPTI records kernels, copies, syncs and CUDA API calls in C: torch.profiler's
                # per-op host recording (2.6x on a launch-bound loop, bench/README.md) stays off
                self.torch = None
                self.torch_state = "off (auto: CUPTI records GPU activity; INFERSCOPE_TORCH_PROFILER=on records torch ops)"
            elif not cuda:
                # measured (bench/README.md): on CPU-only runs the profiler's post-processing costs
                # ~15 us per recorded op after the run (650k ops: 11 s); the sampler already splits
                # CPU time into framework / cpu_compute.  INFERSCOPE_TORCH_PROFILER=on forces it.
                self.torch = None
                self.torch_state = "off (auto: no CUDA; INFERSCOPE_TORCH_PROFILER=on records torch ops)"
                log.debug("torch profiler not started: CPU-only run (torch_profiler=auto)")
        if self.torch is not None and self.torch.start():
            self.torch_state = "on"
            log.debug(f"torch profiler started (cuda={self.torch.cuda})")
        elif self.torch is not None:
            self.torch_state = "failed"
            self._warn(self.torch.error or "torch profiler failed to start")
        if self.single_gpu_error and self.mode == "run":
            log.error(self.single_gpu_error)
            self.finalize(exit_reason="multi_gpu")
            os._exit(2)

    # ------------------------------------------------------------ CUPTI
    def _hook_cuda_modules(self) -> None:
        """Start CUPTI when a CUDA library other than torch is (or gets) imported (torch: _on_torch_import)."""
        from .gpu_activity import CUDA_MODULES, available
        if not available():
            return
        from .importhook import ModuleImportHook
        if any(m in sys.modules for m in CUDA_MODULES):
            self._start_cupti()
            return
        for m in CUDA_MODULES:
            h = ModuleImportHook(m, self._start_cupti)
            h.install()
            self._gpu_hooks.append(h)

    def _start_cupti(self) -> bool:
        if self.gpu_act is not None:
            return self.gpu_act.active
        if not (self.cfg.cupti and self.cfg.torch_profiler != "on") or self.finalized:
            return False
        from .gpu_activity import CuptiCollector, available
        if not available():
            return False
        for h in self._gpu_hooks:
            h.remove()
        self.gpu_act = CuptiCollector(log, max_records=self.buffer.capacity)
        if self.gpu_act.start():
            log.debug(f"CUPTI activity collection started ({', '.join(self.gpu_act.enabled)})")
            return True
        log.debug(self.gpu_act.error or "CUPTI did not start")
        return False

    # ---------------------------------------------------------- housekeeping
    def _housekeeping(self) -> None:
        from .gcpauses import collector_off, collector_on
        self.skip_idents.add(threading.get_ident())
        try:
            self._hk_clk = time.pthread_getcpuclockid(threading.get_ident())
        except OSError:
            pass
        hz = self.cfg.system_sampling_hz
        sample_system = self._hk_system
        sample_nvml = self.nvml.ok and hz > 0
        sampling = hz > 0 and (sample_system or sample_nvml)
        period = 1.0 / hz if sampling else None
        flush_every = self.cfg.flush_interval_s
        next_flush = time.monotonic() + min(1.0, flush_every) if self.trace_out else float("inf")
        gc_on = collector_off()      # no program's collection in this thread but while it waits (gcpauses.py)
        try:
            while True:
                # wake only when there is something to do (each wake-up takes the GIL)
                wait = period if sampling else max(0.0, min(next_flush - time.monotonic(), 3600.0))
                collector_on(gc_on)
                if self._stop.wait(wait):
                    gc_on = False
                    break
                gc_on = collector_off()
                if sampling:
                    now = time.perf_counter_ns()
                    try:
                        if sample_system:
                            self.system.sample(now)
                        if sample_nvml:
                            self.nvml.sample(now)
                    except Exception as e:
                        log.debug(f"system sampling failed: {e}")
                if self.trace_out and time.monotonic() >= next_flush:
                    c0 = time.thread_time_ns()
                    try:
                        self.flush()
                    except Exception as e:
                        log.debug(f"periodic flush failed: {e}")
                    # keep flushing below ~2 % of one core, paced by the flush's own CPU time: its wall
                    # time includes every GIL hand-back of its writes (up to 5 ms each next to a busy
                    # Python thread), which on a loaded host pushed the next flush 1-2.5 s out and a
                    # terminated worker lost that much of its journal
                    dt = (time.thread_time_ns() - c0) / 1e9
                    next_flush = time.monotonic() + max(flush_every, 50 * dt)
        finally:
            collector_on(gc_on)

    def thread_cpu_ns(self) -> int:
        n = self.sampler.own_cpu_ns() if self.sampler else 0
        if self._hk_clk is not None and self._hk is not None and self._hk.is_alive():
            try:
                n += time.clock_gettime_ns(self._hk_clk)
            except OSError:
                pass
        else:
            n += getattr(self, "_hk_cpu_final", 0)
        return n

    # ------------------------------------------------------------- building
    def _collection_meta(self, end_ns: int, complete: bool) -> dict:
        proc_cpu = time.process_time_ns() - self.cpu_start_ns
        own = self.thread_cpu_ns()   # the housekeeping thread's CPU clock includes its flushes
        if self.gpu_act is not None:   # + CUPTI's buffer callbacks (record copies, on CUPTI's thread)
            own += self.gpu_act.callback_cpu_ns
        smp = self.sampler
        dur_ms = (end_ns - self.start_ns) / 1e6
        return {
            "mode": "live", "complete": complete, "pid": self.pid,
            "collection_ms": round(dur_ms, 3), "duration_ms": round(dur_ms, 3),
            "events": 0, "dropped_events": int(self.buffer.dropped),
            "clock_sync_error_us": None,
            "estimated_overhead_pct": round(100.0 * own / proc_cpu, 2) if proc_cpu > 0 else None,
            "overhead_basis": ("CPU time of InferScope's sampler + housekeeping threads (incl. periodic flushes)"
                               + (" + CUPTI buffer callbacks" if self.gpu_act is not None else "")
                               + " / CPU time of the whole process"),
            "buffer_capacity_events": self.buffer.capacity, "bytes_per_event_estimate": BYTES_PER_EVENT,
            "trace_size_mb": self.cfg.trace_size_mb,
            "cpu_sampling_hz": self.cfg.cpu_sampling_frequency_hz,
            "cpu_sampling_hz_achieved": round(smp.achieved_hz, 1) if smp else 0.0,
            "cpu_samples": smp.samples if smp else 0,
            # the off-CPU probe (collect/blocking.py): syscall reads, marks written, time spent (in ticks)
            "offcpu_probes": smp.blocking.probes if smp and smp.blocking is not None else None,
            "offcpu_marks": smp.blocking.marks if smp and smp.blocking is not None else None,
            "offcpu_probe_ms": round(smp.blocking.ns / 1e6, 3) if smp and smp.blocking is not None else None,
            "offcpu_probes_over_budget": smp.blocking.skipped if smp and smp.blocking is not None else None,
            # achieved rate outside module imports (what the analysis window usually sees)
            "cpu_sampling_hz_steady": round(1e9 * smp.steady_ticks / smp.steady_ns, 1) if smp and smp.steady_ns else None,
            # per thread: ticks that saw it outside imports over the time they covered (its lifetime there)
            "cpu_sampling_threads": thread_rates(smp, self.thread_names),
            # wall time the sampler held the GIL: a lower bound on what it cost a Python-bound thread
            "sampler_gil_held_ms": round(smp.busy_ns / 1e6, 1) if smp else 0.0,
            # the main thread's timer signals (collect/sigframes.py): handled, and late (not used for its frame)
            "signal_frames": smp._sig.count if smp and smp._sig is not None else None,
            "signal_frames_late": smp._sig.stale if smp and smp._sig is not None else None,
            "cpu_compute_source": (("perf_event task-clock IP samples" + (
                ", libc samples by their caller on the user stack" if smp.perf_stack else ""))
                if smp and smp.perf_active else "GIL heuristic (perf_event off or unavailable)"),
            "system_sampling_hz": self.cfg.system_sampling_hz,
            "torch_profiler": self.torch_state,
            "nvml": "on" if (self.nvml and self.nvml.ok) else "unavailable",
            "follow_children": bool(getattr(self.cfg, "follow_children", True)),
            "flushes": self.flushes,
            # Python garbage collections (collect/gcpauses.py): whole-run counters (gc_* keys)
            **(self.gc_pauses.meta() if self.gc_pauses is not None else {"gc_pauses": False}),
            "wall_start_unix_ns": self.wall_start_ns,
            # when the process started, on the trace's clock (/proc/self/stat starttime: 1/CLK_TCK s
            # resolution, usually 10 ms); the whole-run window starts here, not at the first tick
            "process_start_ns": getattr(self, "process_start_ns", None),
            # native (non-Python) threads whose CPU time was recorded by perf role (native_threads.py)
            "native_threads": sorted(self.sampler.native_threads.seen) if smp and smp.native_threads else [],
            # when collection stopped (the program's exit for a finished run), on the trace's clock: the
            # whole-run window ends here even when the last sample came earlier (or none was taken)
            "run_end_ns": int(end_ns),
            "process_start_resolution_ms": round(1e3 / os.sysconf("SC_CLK_TCK"), 3) if hasattr(os, "sysconf") else None,
        }

    def _refresh_thread_names(self) -> None:
        for t in threading.enumerate():
            if t.native_id is not None:
                self.thread_names[t.native_id] = t.name
        nt = self.sampler.native_threads if self.sampler else None
        if nt is not None:
            self.thread_names.update(nt.names)

    def _tool_versions(self) -> dict:
        tool_versions = {"python": sys.version.split()[0]}
        tv = sys.modules.get("torch")
        if tv is not None:
            tool_versions["torch"] = str(getattr(tv, "__version__", "?"))
            cuda = getattr(getattr(tv, "version", None), "cuda", None)
            if cuda:
                tool_versions["cuda"] = str(cuda)
        return tool_versions

    def _devices(self) -> list:
        if self.nvml is not None and self.nvml.ok:
            return [{k: d[k] for k in ("id", "name", "total_memory_bytes")} for d in self.nvml.devices]
        return []

    def build_trace(self, final: bool = False, kineto_path: str | None = None, end_ns: int | None = None):
        from ..trace.builder import TraceBuilder
        from .assemble import add_events, overflow_warning
        from .gpu_merge import merge_cupti, merge_kineto, profiler_cost
        end_ns = end_ns or time.perf_counter_ns()
        events = self.buffer.snapshot()
        if not final and self.sampler is not None:
            events += self.sampler.open_runs()
        self._refresh_thread_names()
        b = TraceBuilder()
        add_events(b, events, pid=self.pid, main_tid=threading.main_thread().native_id,
                   thread_names=self.thread_names, idle_tids=self.sampler.idle_tids() if self.sampler else ())
        meta = self._collection_meta(end_ns, final)
        warnings = list(self.warnings)
        meta_devices = self._devices()
        dropped_extra = 0
        if kineto_path:
            dropped_extra, err_us = merge_kineto(self, b, kineto_path, len(events), warnings, meta_devices)
            meta["clock_sync_error_us"] = err_us
            profiler_cost(self, meta)
            if err_us is not None and err_us > self.cfg.sync_error_margin_us:
                warnings.append(f"clock sync error {err_us:.0f} us exceeds the margin of "
                                f"{self.cfg.sync_error_margin_us:g} us (INFERSCOPE_SYNC_ERROR_MARGIN_US): "
                                "torch op times may be misaligned with CPU samples by that much")
        cupti = self.gpu_act is not None and bool(self.gpu_act.clock_start)
        if cupti:
            dropped_extra += merge_cupti(self, b, len(events), meta, warnings)
            if meta["clock_sync_error_us"] is not None and meta["clock_sync_error_us"] > self.cfg.sync_error_margin_us:
                warnings.append(f"CUPTI clock sync error {meta['clock_sync_error_us']:.0f} us exceeds the margin of "
                                f"{self.cfg.sync_error_margin_us:g} us (INFERSCOPE_SYNC_ERROR_MARGIN_US)")
        if meta["clock_sync_error_us"] is None and not kineto_path and not cupti:
            meta["clock_sync_error_us"] = 0.0   # one clock only (perf_counter): nothing to align
        meta["clock_sources"] = (["perf_counter_ns"] + (["torch_profiler"] if kineto_path else [])
                                 + (["cupti"] if cupti else []))
        meta["dropped_events"] += dropped_extra
        if meta["dropped_events"]:
            warnings.append(overflow_warning(meta["dropped_events"], self.cfg.trace_size_mb, self.buffer.capacity))
        b.meta.update(self._trace_meta(meta, warnings, meta_devices))
        if self.numa:
            b.meta["numa"] = self.numa
        trace = b.finalize()
        meta["events"] = int(trace.n_events)
        return trace

    def journal_meta(self) -> dict:
        """What the parent needs besides the events to rebuild a trace after a SIGKILL (journal.py)."""
        self._refresh_thread_names()
        meta = self._collection_meta(time.perf_counter_ns(), False)
        meta["clock_sync_error_us"] = 0.0
        meta["clock_sources"] = ["perf_counter_ns"]
        return {
            "pid": self.pid, "main_tid": threading.main_thread().native_id,
            "thread_names": dict(self.thread_names),
            "idle_tids": sorted(self.sampler.idle_tids()) if self.sampler else [],
            "open_runs": self.sampler.open_runs() if self.sampler else [],
            "capacity": self.buffer.capacity, "total_events": self.buffer.total,
            "trace_meta": self._trace_meta(meta, list(self.warnings), self._devices()),
        }

    def _trace_meta(self, collection: dict, warnings: list, devices: list) -> dict:
        out = {"source_format": "inferscope", "devices": devices, "tool_versions": self._tool_versions(),
               "warnings": warnings, "missing": self._missing(), "collection": collection}
        llm = getattr(self, "llm", None)
        if llm is not None and llm.models:
            out["models"] = llm.meta()
        return out

    numa: dict | None = None

    def _missing(self) -> list[str]:
        miss = []
        if self.torch_state != "on":
            miss.append("torch_ops")
        if not (self.nvml and self.nvml.ok):
            miss.append("gpu_counters")
        if not (self.torch and self.torch.cuda) and not (self.gpu_act is not None and self.gpu_act.clock_start):
            miss.append("gpu_kernels")
        return miss

    _profiler_host_events = 0

    # ------------------------------------------------------------- outputs
    def flush(self) -> None:
        """Append the events since the last flush to the crash journal (journal.py)."""
        from .journal import REWRITE_FACTOR, JournalWriter, path_for
        if self.journal is None:
            self.journal = JournalWriter(path_for(self.trace_out))
        j = self.journal
        new = self.buffer.take_new()
        if j.events + len(new) > REWRITE_FACTOR * self.buffer.capacity:
            j.rewrite(self.buffer.snapshot(), self.journal_meta())   # bounded on disk
        else:
            j.append(new, self.journal_meta())
        self.flushes += 1

    def stop_collectors(self) -> None:
        self._stop.set()
        if self.gc_pauses is not None:
            self.gc_pauses.stop()
        if self.torch_hook is not None:
            self.torch_hook.remove()
        for h in self._gpu_hooks:
            h.remove()
        if self.gpu_act is not None and self.gpu_act.active:
            self.gpu_act.stop()      # flush CUPTI's buffers before the threads that read them stop
        if getattr(self, "llm", None) is not None:
            self.llm.stop()
        if self.sampler is not None:
            self.sampler.stop()
        if self._hk is not None:
            if self._hk_clk is not None:
                try:
                    self._hk_cpu_final = time.clock_gettime_ns(self._hk_clk)
                except OSError:
                    pass
            self._hk.join(timeout=2.0)
        if self.nvml is not None:
            self.nvml.shutdown()

    def finalize(self, exit_reason: str | None = None):
        """Stop every collector, merge the torch profiler trace, save (if trace_out). Idempotent."""
        with self._final_lock:
            if self.finalized:
                return getattr(self, "_final_trace", None)
            self.finalized = True
            end_ns = time.perf_counter_ns()
            t0 = time.perf_counter()
            # self CPU time before stopping (threads' CPU clocks vanish when they exit)
            self.stop_collectors()
            if self.system is not None:       # the children's CPU time up to the end of the run
                try:
                    self.system.sample_children(time.perf_counter_ns(), force=True)
                except Exception:
                    pass
            kpath = None
            if self.torch is not None and self.torch.active:
                import tempfile
                fd, kpath = tempfile.mkstemp(prefix="inferscope-torch-", suffix=".json")
                os.close(fd)
                if not self.torch.stop_and_export(kpath):
                    self._warn(self.torch.error or "torch profiler export failed")
                    kpath = None
            if self.torch is not None and self.torch.error and self.torch.error not in self.warnings:
                self.warnings.append(self.torch.error)
            self._refresh_thread_names()
            low = sampling_rate_warning(self.sampler, self.cfg.cpu_sampling_frequency_hz, self.thread_names)
            if low:
                self._warn(low)
            if self.gpu_count == 0 or (self.gpu_count is None and not (self.nvml and self.nvml.ok)):
                self._warn("CUDA unavailable: CPU-only mode (no GPU timeline)")
            try:
                from .system import numa_placement
                buses = [d.get("pci_bus_id") for d in self.nvml.devices if d.get("pci_bus_id")] if self.nvml else []
                self.numa = numa_placement(buses) or None
                tm = sys.modules.get("torch")
                if self.numa is not None and tm is not None and hasattr(tm, "get_num_threads"):
                    self.numa["torch_threads"] = int(tm.get_num_threads())   # intra-op threads vs the CPUs allowed
            except Exception:
                self.numa = None
            trace = self.build_trace(final=True, kineto_path=kpath, end_ns=end_ns)
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
            if self.trace_out:
                from ..trace import native
                native.save(trace, self.trace_out)
                if self.journal is not None:      # the final trace supersedes the crash journal
                    self.journal.close(remove=True)
            c = trace.meta["collection"]
            log.info(f"Trace collection completed (events={c['events']}, duration_ms={c['duration_ms']:.1f})")
            if kpath and c.get("clock_sync_error_us") is not None:
                log.info(f"Timeline merger: CPU/torch profiler clock sync (error_us={c['clock_sync_error_us']:.0f})")
            self._final_trace = trace
            return trace


RATE_MIN_STEADY_NS = 500_000_000     # a rate is judged over at least this much steady time


def thread_rates(sampler, names: dict | None = None) -> list[dict]:
    """Per sampled thread: {tid, name, ticks, steady_ms, hz} outside imports (collect/sampler.py
    ``thread_ticks``); the main thread is named "main"; ``names``: tid -> name of threads seen (ended ones)."""
    if sampler is None:
        return []
    names = dict(names or {})
    names.update({t.native_id: t.name for t in threading.enumerate()})
    out = []
    for tid, (n, ns) in sorted(dict(getattr(sampler, "thread_ticks", None) or {}).items()):
        name = "main" if tid == getattr(sampler, "main_tid", None) else names.get(tid, f"tid {tid}")
        out.append({"tid": int(tid), "name": name, "ticks": int(n), "steady_ms": round(ns / 1e6, 1),
                    "hz": round(1e9 * n / ns, 1) if ns > 0 else None})
    return out


def sampling_rate_warning(sampler, setting_hz: float, names: dict | None = None) -> str | None:
    """One line when the sampler achieved less than half its rate outside imports (host load, a
    descheduled sampler, the GIL budget binding), naming the threads below half (each judged over
    >= 0.5 s of its steady ticks); the sampler as a whole judged likewise."""
    if sampler is None or not setting_hz:
        return None
    low = [r for r in thread_rates(sampler, names)
           if r["hz"] is not None and r["steady_ms"] * 1e6 >= RATE_MIN_STEADY_NS and r["hz"] < 0.5 * setting_hz]
    whole = (1e9 * sampler.steady_ticks / sampler.steady_ns
             if sampler.steady_ns >= RATE_MIN_STEADY_NS else None)
    if not low and (whole is None or whole >= 0.5 * setting_hz):
        return None
    who = ""
    if low:
        who = " on thread(s) " + ", ".join(f"{r['name']} ({r['hz']:.0f} Hz)" for r in low[:4])
        if len(low) > 4:
            who += f" and {len(low) - 4} more"
    hz = whole if whole is not None else min(r["hz"] for r in low)
    return (f"CPU sampling achieved {hz:.0f} Hz of the {setting_hz:g} Hz set{who}, below half (host load or an "
            "expensive tick): CPU class shares rest on fewer samples, see their 95 % interval")


def cuda_version_mismatch(expected: str | None, actual: str | None) -> str | None:
    """cuda_version (config) is the CUDA release the user expects the workload to run on; a
    different major.minor in torch's build is worth one warning (wrong wheel or environment)."""
    if not expected:
        return None
    want = str(expected).strip().split(".")[:2]      # compared at the precision given: "12" or "12.4"
    if actual is None:
        return f"cuda_version is set to {expected} but torch was built without CUDA"
    got = str(actual).split(".")[:len(want)]
    if got != want:
        return f"cuda_version is set to {expected} but torch was built for CUDA {actual}"
    return None


def multi_gpu_message(n: int) -> str:
    return (f"InferScope supports a single GPU; {n} GPUs are visible. "
            "Set CUDA_VISIBLE_DEVICES=0 (or another single index) to profile one GPU.")
