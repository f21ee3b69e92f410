"""One collection session: owns the ring buffer and the collectors, builds and saves the Trace
(session_trace.py: building, the crash journal's flushes, finalize; session_meta.py: the trace's meta).

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
from ..config import Config, load_config
from ..errors import InferScopeError
from . import session_trace as _trace
from .buffer import RingBuffer
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
        self._cupti_missing_said = False
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
        from .sampler import Sampler  # lazy: loaded when a session starts, not on import
        from .system import SystemSampler  # lazy: loaded when a session starts, not on import
        from .nvml import NvmlSampler  # lazy: loaded when a session starts, not on import
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
        self.nvml = NvmlSampler(self.buffer.append, enabled=self.mode != "child")   # children: the parent's counters
        if self.nvml.warning:
            self._warn(self.nvml.warning)
        if self.nvml.nv is not None and self.nvml.ok:
            self.gpu_count = len(self.nvml.handles)
            if self.gpu_count > 1:
                self.single_gpu_error = multi_gpu_message(self.gpu_count)
        # torch: now if already imported, else when the workload imports it
        if cfg.torch_profiler != "off":
            from .torchprof import TorchImportHook, TorchProfiler  # lazy: loaded when a session starts, not on import
            self.torch = TorchProfiler(log, cfg.torch_record_shapes)
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
            from .llmhook import LlmRecorder  # lazy: loaded when a session starts, not on import
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
            from .gcpauses import GcPauses  # lazy: loaded when a session starts, not on import
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
            from .exporter import start_for_session  # lazy: only with the metrics endpoint on
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
            if self.torch.cuda:
                from .gpu_activity import device_id  # lazy: only once the program imports torch
                log.info(f"GPU collector initialized (device={device_id()}, source=torch.profiler)")
            else:
                log.debug("torch profiler started (cuda=False)")
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
        from .gpu_activity import CUDA_MODULES, available  # lazy: only when CUDA libraries may load
        if not available():
            return
        from .importhook import ModuleImportHook  # lazy: only when CUDA libraries may load
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
        from .gpu_activity import CuptiCollector, available, device_id  # lazy: CUPTI collection only
        if not available():     # said once (seed 001: CUPTI load fails -> skip its GPU events)
            if not self._cupti_missing_said:
                self._cupti_missing_said = True
                log.info(f"CUPTI load failed (device={device_id()}): cupti-python not installed; no CUPTI GPU events")
            return False
        for h in self._gpu_hooks:
            h.remove()
        self.gpu_act = CuptiCollector(log, max_records=self.buffer.capacity)
        if self.gpu_act.start():
            log.info(f"GPU collector initialized (device={device_id()}, source=CUPTI: {', '.join(self.gpu_act.enabled)})")
            return True
        log.info(f"CUPTI load failed (device={device_id()}): {self.gpu_act.error or 'did not start'}; no CUPTI GPU events")
        return False

    # ---------------------------------------------------------- housekeeping
    def _housekeeping(self) -> None:
        from .gcpauses import collector_off, collector_on  # lazy: the housekeeping thread only
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

    # ------------------------------------------------------------- outputs (session_trace.py)
    def build_trace(self, final: bool = False, kineto_path: str | None = None, end_ns: int | None = None):
        """The Trace of the events collected so far (``final``: at finalize; session_trace.py)."""
        return _trace.build_trace(self, final, kineto_path, end_ns)

    def journal_meta(self) -> dict:
        """What the parent needs besides the events to rebuild a trace after a SIGKILL (journal.py)."""
        return _trace.journal_meta(self)

    numa: dict | None = None

    _profiler_host_events = 0

    def flush(self) -> None:
        """Append the events since the last flush to the crash journal (journal.py)."""
        _trace.flush(self)

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
        return _trace.finalize(self, exit_reason)


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
