"""PyTorch profiler for the whole run, started when the workload imports torch.

* Detection: a meta-path finder wraps torch's loader; right after ``import torch`` finishes the
  profiler starts on the importing thread (torch.profiler records ops of the thread that started
  it; other threads are covered by the sampler only).  If torch was imported before collection
  started, the profiler starts at once.
* Profiler: ``torch.autograd.profiler.profile(use_kineto=True)`` with CPU (+ CUDA when available),
  no shapes / stacks.  We bypass ``torch.profiler.profile.start()`` because it imports
  torch._inductor (1-2 s).  At the end: ``__exit__`` + ``export_chrome_trace`` (cheap); never
  ``events()`` / ``key_averages()``.
* Clock sync: ``record_function("inferscope::sync#k")`` markers bracketed by perf_counter_ns;
  offset_k = marker start in the profiler's clock - bracket midpoint; the median offset maps the
  profiler's events onto the perf_counter_ns clock; the residual (max |offset_k - median| +
  half the median bracket) is the clock-sync error.
"""
from __future__ import annotations

import json
import threading
import time

from .importhook import ModuleImportHook

SYNC_PREFIX = "inferscope::sync#"

# What torch.profiler adds per recorded host event: thresholds.PROFILER_COST_PER_HOST_EVENT_US.


def TorchImportHook(callback) -> "ModuleImportHook":
    """Calls ``callback()`` right after ``import torch`` finishes (importhook.py)."""
    return ModuleImportHook("torch", callback)


class TorchProfiler:
    def __init__(self, log, record_shapes: bool = False) -> None:
        self.record_shapes = bool(record_shapes)   # config torch_record_shapes (--ops-shapes)
        self.prof = None
        self.log = log
        self.markers: list[tuple[str, int, int]] = []   # (name, t0, t1) perf_counter_ns
        self._n = 0
        self._lock = threading.Lock()
        self.error: str | None = None
        self.started_ns = 0
        self.cuda = False

    @property
    def active(self) -> bool:
        return self.prof is not None

    def start(self) -> bool:
        try:
            import torch
            import torch.autograd.profiler as ap
            self.cuda = bool(torch.cuda.is_available())
            kw = dict(use_kineto=True, record_shapes=self.record_shapes, with_stack=False, profile_memory=False)
            try:
                p = ap.profile(use_cpu=True, use_device="cuda" if self.cuda else None, **kw)
            except TypeError:
                p = ap.profile(use_cuda=self.cuda, **kw)
            p._prepare_trace()
            p._start_trace()
            self.prof = p
            self.started_ns = time.perf_counter_ns()
            self.sync_marker()  # warm-up (first record_function is slow)
            for _ in range(3):
                self.sync_marker()
            return True
        except Exception as e:
            self.error = f"torch profiler could not start ({type(e).__name__}: {e}); torch ops not recorded"
            self.prof = None
            return False

    def sync_marker(self) -> None:
        if self.prof is None:
            return
        try:
            from torch.autograd.profiler import record_function
            with self._lock:
                self._n += 1
                name = f"{SYNC_PREFIX}{self._n}"
            t0 = time.perf_counter_ns()
            with record_function(name):
                pass
            t1 = time.perf_counter_ns()
            self.markers.append((name, t0, t1))
        except Exception:
            pass

    def stop_and_export(self, path: str) -> bool:
        if self.prof is None:
            return False
        self.sync_marker()
        p, self.prof = self.prof, None
        try:
            p.__exit__(None, None, None)
            p.export_chrome_trace(path)
            return True
        except Exception as e:
            self.error = f"torch profiler export failed ({type(e).__name__}: {e}); torch ops not recorded"
            return False


def clock_offset(marker_starts: dict[str, int], markers: list[tuple[str, int, int]]) -> tuple[int | None, float | None, int]:
    """(offset_ns profiler->perf_counter, error_us, n_used)."""
    offs, halfw = [], []
    for i, (name, t0, t1) in enumerate(markers):
        if i == 0:
            continue  # warm-up marker
        ks = marker_starts.get(name)
        if ks is None:
            continue
        offs.append(ks - (t0 + t1) // 2)
        halfw.append((t1 - t0) / 2)
    if not offs:
        return None, None, 0
    so = sorted(offs)
    med = so[len(so) // 2]
    resid = max(abs(o - med) for o in offs)
    hw = sorted(halfw)[len(halfw) // 2]
    return med, (resid + hw) / 1000.0, len(offs)


def load_chrome(path: str):
    """Kineto JSON -> Trace, through ingest.kineto when present, else a minimal reader."""
    try:
        from ..ingest import kineto  # lazy: the trace is read back at the end (msgspec, numpy)
        return kineto.load(path)
    except ImportError:
        pass
    return _minimal_load(path)


def _minimal_load(path: str):
    """Complete ('X') events only: cpu_op -> CPU_OP, user_annotation -> ANNOTATION, kernels etc.
    Used only until/unless ingest.kineto is available."""
    from ..trace.builder import TraceBuilder  # lazy: the trace is read back at the end (numpy)
    from ..trace.kinds import SpanKind, TrackKind  # lazy: the trace is read back at the end (numpy)
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    kinds = {"cpu_op": SpanKind.CPU_OP, "user_annotation": SpanKind.ANNOTATION, "kernel": SpanKind.KERNEL,
             "gpu_memcpy": SpanKind.MEMCPY, "gpu_memset": SpanKind.MEMSET, "cuda_runtime": SpanKind.RUNTIME,
             "cuda_driver": SpanKind.DRIVER, "gpu_user_annotation": SpanKind.GPU_ANNOTATION,
             "python_function": SpanKind.PYTHON}
    b = TraceBuilder()
    cols = {k: [] for k in ("start_ns", "end_ns", "track", "kind", "name", "cat")}
    for e in doc.get("traceEvents", []):
        if e.get("ph") != "X":
            continue
        cat = e.get("cat", "")
        k = kinds.get(cat)
        if k is None:
            continue
        try:
            ts = int(round(float(e["ts"]) * 1000))
            dur = int(round(float(e.get("dur", 0)) * 1000))
            pid, tid = int(e.get("pid", -1)), int(e.get("tid", -1))
        except (KeyError, ValueError, TypeError):
            continue
        if k in (SpanKind.KERNEL, SpanKind.MEMCPY, SpanKind.MEMSET, SpanKind.GPU_ANNOTATION):
            tr = b.track(TrackKind.GPU_STREAM, pid=-1, tid=tid, device=int((e.get("args") or {}).get("device", pid)))
        else:
            tr = b.track(TrackKind.CPU_THREAD, pid=pid, tid=tid)
        cols["start_ns"].append(ts)
        cols["end_ns"].append(ts + dur)
        cols["track"].append(tr)
        cols["kind"].append(int(k))
        cols["name"].append(b.strings.intern(str(e.get("name", ""))))
        cols["cat"].append(b.strings.intern(cat))
    if cols["start_ns"]:
        b.add_spans(**cols)
    b.meta["source_format"] = "kineto"
    return b.finalize(compute_nesting=False)
