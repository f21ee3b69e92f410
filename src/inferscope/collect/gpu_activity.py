"""CUDA activity records straight from CUPTI (the ``cupti-python`` package), for any CUDA program.

The default GPU source of a live run (torch.profiler's per-op host recording is opt-in:
``torch_profiler=on``): kernels (concurrent), memcpy, memset, synchronisation and CUDA runtime /
driver API calls, each with its own start/end and correlation id, recorded by CUPTI in C on the
launching thread and delivered in buffers on CUPTI's own thread.  Nothing runs in Python per
launch; per *record* the buffer callback reads the record's kind and address and copies the
records' bytes in one numpy gather per kind (cupti_records.py; off the launching thread, but it
takes the GIL: its CPU time is measured and reported as the collector's cost).

* Start: when the workload imports torch and CUDA is available, or imports a CUDA library without
  torch (cupy, cuda-python, numba, onnxruntime, tensorrt, pycuda): see ``CUDA_MODULES``.  CUPTI
  records from the next CUDA call on; a context created earlier is covered too.
* Clock: CUPTI timestamps (ns) vs ``time.perf_counter_ns`` (the trace's clock): bracketed reads
  (perf, cupti, perf) at start and stop; the offset is the median over the narrowest brackets, the
  error = drift between start and stop + half the median bracket (``clock_offset``).
* Threads: ``SYSTEM`` thread ids (gettid), the ids the sampler's tracks use.
* Raw rows (``self.rows``) are plain lists, JSON-serialisable (``dump``): tests/data/cupti holds
  rows captured on a real GPU; gpu_records.py turns rows into trace spans and flows.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import threading
import time

# modules whose import means CUDA may be used without torch (torch: torchprof.TorchImportHook)
# (CUPTI's start costs ~250 ms on an H100 host: numba only through numba.cuda; onnxruntime may run on CPU)
CUDA_MODULES = ("cupy", "cuda.bindings", "cuda.core", "numba.cuda", "onnxruntime", "tensorrt", "pycuda")
ACTIVITY_KINDS = ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET", "SYNCHRONIZATION")
# CUDA API calls recorded: the ones that put work on the GPU, wait for it or allocate
# (what launch flows, sync waits and allocation findings use).  Not every call: a torch
# x.add_(1) makes 5 runtime calls (cudaGetDevice x3, cudaGetLastError, cudaLaunchKernel) and 2
# driver calls the runtime makes itself (cuKernelGetName, cuDevicePrimaryCtxGetState); recording
# all 7 made a 30k-launch loop 4x slower on an H100 (bench/README.md).  INFERSCOPE_CUPTI_API=all
# records every call (both kinds enabled whole).
RUNTIME_API = re.compile(r"^cuda(Launch|GraphLaunch|Memcpy|Memset|StreamSynchronize|DeviceSynchronize|EventSynchronize"
                         r"|StreamWaitEvent|Malloc|Free|HostAlloc|HostRegister)")
DRIVER_API = re.compile(r"^cu(Launch|GraphLaunch|Memcpy|Memset|StreamSynchronize|CtxSynchronize|EventSynchronize"
                        r"|StreamWaitEvent|MemAlloc|MemFree|MemHostAlloc|MemHostRegister)")
# 32 MiB per CUPTI buffer: ~150k kernel records (Kineto and the cupti-python samples use 4-8 MiB).
# CUPTI hands a buffer back when it is full or flushed, and the callback holds the GIL while it
# runs: with larger buffers a short run's records are read once, after the workload, at the flush.
# Host memory is touched only as CUPTI writes records (malloc'd, not zeroed).
BUFFER_BYTES = 32 << 20
CLOCK_READS = 9              # bracketed reads per calibration; the narrowest third are used
_API_VERSION = re.compile(r"_v\d{4,}$")   # cudaLaunchKernel_v7000 -> cudaLaunchKernel (Kineto's names)

ROW_FIELDS = {   # row layout per record kind (gpu_records.py reads rows by these positions)
    "kernel": ("start", "end", "device_id", "context_id", "stream_id", "correlation_id", "name",
               "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
               "static_shared_memory", "dynamic_shared_memory", "graph_id"),
    "memcpy": ("start", "end", "device_id", "context_id", "stream_id", "correlation_id", "copy_kind",
               "src_kind", "dst_kind", "bytes", "graph_id"),
    "memset": ("start", "end", "device_id", "context_id", "stream_id", "correlation_id", "value",
               "bytes", "memory_kind", "graph_id"),
    "sync": ("start", "end", "context_id", "stream_id", "correlation_id", "type", "cuda_event_id"),
    "runtime": ("start", "end", "cbid", "process_id", "thread_id", "correlation_id"),
    "driver": ("start", "end", "cbid", "process_id", "thread_id", "correlation_id"),
}
_ENUMS = ("ActivityMemcpyKind", "ActivityMemoryKind", "ActivitySynchronizationType")


def available() -> bool:
    """cupti-python importable (does not load CUPTI into a process that will not use it)."""
    try:
        return importlib.util.find_spec("cupti") is not None
    except (ImportError, ValueError):
        return False


def device_id() -> int:
    """The CUDA device id for log lines (seed 001: ``GPU collector initialized (device=0)``): torch's
    current device once torch has initialised CUDA (never initialised here), else 0 - CUDA's default
    device, the one a single-GPU run (seed 001) works on; an id within CUDA_VISIBLE_DEVICES."""
    tm = sys.modules.get("torch")
    try:
        if tm is not None and tm.cuda.is_initialized():
            return int(tm.cuda.current_device())
    except Exception:    # noqa: BLE001 - a torch without cuda, or a broken one: the default device
        pass
    return 0


def dtype_getter(C):
    """obj -> cupti-python's numpy dtype of its record struct (None if it has none), for RecordSink;
    INFERSCOPE_CUPTI_DECODE=objects reads every record by attribute instead (measurement aid)."""
    if os.environ.get("INFERSCOPE_CUPTI_DECODE", "").strip().lower() == "objects":
        return None
    from .cupti_records import dtype_name  # lazy: CUPTI collection only (cupti_records imports numpy)
    cache: dict = {}

    def dtype_for(obj):
        cls = type(obj)
        if cls not in cache:
            cache[cls] = getattr(C, dtype_name(cls.__name__), None)
        return cache[cls]
    return dtype_for


def clock_offset(reads: list[tuple[int, int, int]]) -> tuple[int, float]:
    """(offset_ns cupti - perf_counter, half-width us) from (perf0, cupti, perf1) reads: median
    over the narrowest third of the brackets."""
    rs = sorted(reads, key=lambda r: r[2] - r[0])[:max(1, len(reads) // 3)]
    offs = sorted(c - (p0 + p1) // 2 for p0, c, p1 in rs)
    half = sorted((p1 - p0) / 2 for p0, _, p1 in rs)
    return offs[len(offs) // 2], half[len(half) // 2] / 1e3


class CuptiCollector:
    def __init__(self, log, max_records: int = 4_000_000) -> None:
        self.log = log
        self.max_records = int(max_records)
        from .cupti_records import RecordSink  # lazy: CUPTI collection only (cupti_records imports numpy)
        self.sink = RecordSink({}, ROW_FIELDS)     # the real kinds at start()
        self.api_names: dict[str, dict[int, str]] = {"runtime": {}, "driver": {}}
        self.enums: dict[str, dict[int, str]] = {}
        self.error: str | None = None
        self.enabled: list[str] = []
        self.api_functions = 0
        self.records = 0
        self.dropped = 0
        self.buffers = 0
        self.callback_cpu_ns = 0
        self.first_callback_ns = 0
        self.flush_ms = 0.0
        self.clock_start: list = []
        self.clock_stop: list = []
        self.started_ns = 0
        self._C = None
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self._C is not None

    # ---------------------------------------------------------------- start
    def start(self) -> bool:
        try:
            from cupti import cupti as C
        except Exception as e:    # noqa: BLE001 - any import failure means: not available
            self.error = f"CUPTI unavailable ({type(e).__name__}: {e})"
            return False
        try:
            C.set_thread_id_type(C.ActivityThreadIdType.SYSTEM)
        except Exception:    # noqa: BLE001 - older CUPTI: pthread ids, mapped later by the session
            pass
        AK = C.ActivityKind
        from .cupti_records import RecordSink  # lazy: CUPTI collection only (cupti_records imports numpy)
        self.sink = RecordSink({int(AK.CONCURRENT_KERNEL): "kernel", int(AK.MEMCPY): "memcpy", int(AK.MEMSET): "memset",
                                int(AK.SYNCHRONIZATION): "sync", int(AK.RUNTIME): "runtime", int(AK.DRIVER): "driver"},
                               ROW_FIELDS, dtype_getter(C))
        try:
            C.activity_register_callbacks(self._requested, self._completed)
        except Exception as e:    # noqa: BLE001
            self.error = f"CUPTI callbacks could not be registered ({type(e).__name__}: {e})"
            return False
        for name in ACTIVITY_KINDS:
            try:
                C.activity_enable(getattr(AK, name))
                self.enabled.append(name)
            except Exception as e:    # noqa: BLE001 - e.g. another subscriber, or not supported
                self.log.debug(f"CUPTI activity {name} not enabled: {e}")
        self._enable_api(C)
        if "CONCURRENT_KERNEL" not in self.enabled:
            self.error = "CUPTI could not enable kernel records (another profiler attached?)"
            self._disable(C)
            return False
        for en in _ENUMS:
            cls = getattr(C, en, None)
            if cls is not None:
                self.enums[en] = {int(m): m.name for m in cls}
        self._C = C
        self.clock_start = self._clock_reads()
        self.started_ns = time.perf_counter_ns()
        return True

    def _enable_api(self, C) -> None:
        """API records: the whole RUNTIME/DRIVER kinds with INFERSCOPE_CUPTI_API=all, else only the
        functions RUNTIME_API / DRIVER_API name (per callback id; recorded without the kind enabled)."""
        AK = C.ActivityKind
        mode = os.environ.get("INFERSCOPE_CUPTI_API", "launch").strip().lower()
        if mode == "none":       # kernels/copies/syncs only: no launch flows (measurement aid)
            return
        want_all = mode == "all"
        picks = ((getattr(C, "RuntimeApiTraceCbid", None), RUNTIME_API, C.activity_enable_runtime_api, "RUNTIME"),
                 (getattr(C, "driver_api_trace_cbid", None) or getattr(C, "DriverApiTraceCbid", None), DRIVER_API,
                  C.activity_enable_driver_api, "DRIVER"))
        for enum, rx, enable, kind in picks:
            n = 0
            if not want_all and enum is not None:
                for m in enum:
                    if rx.match(m.name):
                        try:
                            enable(int(m), 1)
                            n += 1
                        except Exception:    # noqa: BLE001 - a function this CUPTI does not know
                            pass
            if n:
                self.enabled.append(f"{kind}({n} functions)")
                self.api_functions += n
                continue
            try:     # all calls (asked for, or per-function records unsupported)
                C.activity_enable(getattr(AK, kind))
                self.enabled.append(kind)
            except Exception as e:    # noqa: BLE001
                self.log.debug(f"CUPTI activity {kind} not enabled: {e}")

    def _clock_reads(self) -> list:
        C, pc = self._C, time.perf_counter_ns
        out = []
        for _ in range(CLOCK_READS):
            p0 = pc()
            c = int(C.get_timestamp())
            out.append((p0, c, pc()))
        return out

    # -------------------------------------------------- CUPTI's buffer thread
    def _requested(self):
        return BUFFER_BYTES, 0

    def _completed(self, activities) -> None:
        c0 = time.thread_time_ns()
        with self._lock:
            room = self.max_records - self.records
            n = self.sink.add(activities, room)
            kept = min(n, max(0, room))
            self.records += kept
            self.dropped += n - kept
            self.buffers += 1
        dt = time.thread_time_ns() - c0
        self.callback_cpu_ns += dt
        if self.buffers == 1:
            self.first_callback_ns = dt

    # ----------------------------------------------------------------- stop
    def stop(self) -> None:
        C = self._C
        if C is None:
            return
        t0 = time.perf_counter()
        try:
            C.activity_flush_all(1)
        except Exception as e:    # noqa: BLE001
            self.error = f"CUPTI flush failed ({type(e).__name__}: {e}); late GPU records lost"
        self._disable(C)
        self.flush_ms = (time.perf_counter() - t0) * 1e3
        self.clock_stop = self._clock_reads()
        self._names(C)
        self._C = None

    def _disable(self, C) -> None:
        for name in self.enabled:
            try:
                C.activity_disable(getattr(C.ActivityKind, name.split("(")[0]))
            except Exception:    # noqa: BLE001
                pass

    def _names(self, C) -> None:
        """API names once per distinct callback id (the ``_vNNNN`` suffix dropped, as Kineto does)."""
        dom = {"runtime": C.CallbackDomain.RUNTIME_API, "driver": C.CallbackDomain.DRIVER_API}
        for which in ("runtime", "driver"):
            for cbid in sorted(set(self.sink.columns(which, {})["cbid"].tolist())):
                try:
                    nm = str(C.get_callback_name(dom[which], int(cbid)))
                except Exception:    # noqa: BLE001
                    nm = f"{which} api {cbid}"
                self.api_names[which][int(cbid)] = _API_VERSION.sub("", nm)

    # ---------------------------------------------------------------- output
    def clock(self) -> tuple[int | None, float | None]:
        """(offset_ns cupti - perf_counter, error_us): drift between the start and stop
        calibrations + half the median bracket."""
        if not self.clock_start:
            return None, None
        off0, h0 = clock_offset(self.clock_start)
        if not self.clock_stop:
            return off0, h0
        off1, h1 = clock_offset(self.clock_stop)
        return (off0 + off1) // 2, abs(off1 - off0) / 2e3 + max(h0, h1)

    def snapshot(self, rows: bool = True) -> dict:
        """Everything gpu_records.add_to needs: with ``rows``, plain data (JSON-serialisable: the
        records as lists); else the records as int64 columns per kind (``columns``, kernel names as
        ids into ``kernel_names``), no Python object per record (what a live session merges)."""
        off, err = self.clock()
        out = {"fields": {k: list(v) for k, v in ROW_FIELDS.items()},
               "api_names": {k: {str(c): n for c, n in v.items()} for k, v in self.api_names.items()},
               "enums": {k: {str(i): n for i, n in v.items()} for k, v in self.enums.items()},
               "clock_offset_ns": off, "clock_error_us": err,
               "stats": self.stats()}
        with self._lock:
            if rows:
                out["rows"] = self.rows
            else:
                ids: dict[str, int] = {}
                out["columns"] = {k: self.sink.columns(k, ids) for k in ROW_FIELDS}
                out["kernel_names"] = list(ids)
        return out

    @property
    def rows(self) -> dict[str, list]:
        """Kept records per kind, lists in ROW_FIELDS order."""
        return {k: self.sink.rows(k) for k in ROW_FIELDS}

    def stats(self) -> dict:
        return {"records": self.records, "dropped_records": self.dropped, "buffers": self.buffers,
                "records_gathered": self.sink.fast_records,
                "api_functions": self.api_functions,
                "callback_cpu_ms": round(self.callback_cpu_ns / 1e6, 3), "flush_ms": round(self.flush_ms, 3),
                "first_callback_ms": round(self.first_callback_ns / 1e6, 3),
                "callback_steps_ms": " ".join(f"{k} {v / 1e6:.1f}" for k, v in self.sink.steps_ns.items()),
                "activity_kinds": list(self.enabled)}

    def dump(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.snapshot(), f)
