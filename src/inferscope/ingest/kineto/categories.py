"""Kineto category -> span kind (and host/GPU side), flow categories, ProfilerStep and memcpy names."""
from __future__ import annotations

import re

from ...trace.kinds import CopyKind, MemKind, SpanKind

_GPU, _CPU = 1, 2
_CAT_KIND: dict[str, tuple[SpanKind, int]] = {
    "kernel": (SpanKind.KERNEL, _GPU),
    "gpu_memcpy": (SpanKind.MEMCPY, _GPU), "memcpy": (SpanKind.MEMCPY, _GPU),
    "gpu_memset": (SpanKind.MEMSET, _GPU), "memset": (SpanKind.MEMSET, _GPU),
    "cuda_runtime": (SpanKind.RUNTIME, _CPU), "runtime": (SpanKind.RUNTIME, _CPU),
    "hip_runtime": (SpanKind.RUNTIME, _CPU),
    "cuda_driver": (SpanKind.DRIVER, _CPU), "driver": (SpanKind.DRIVER, _CPU),
    "cpu_op": (SpanKind.CPU_OP, _CPU), "operator": (SpanKind.CPU_OP, _CPU),
    "python_function": (SpanKind.PYTHON, _CPU),
    "user_annotation": (SpanKind.ANNOTATION, _CPU),
    "gpu_user_annotation": (SpanKind.GPU_ANNOTATION, _GPU),
    "cuda_sync": (SpanKind.GPU_SYNC, _GPU),
    "overhead": (SpanKind.OVERHEAD, _CPU),
}
_IGNORED_CATS = {"trace"}  # the profiler's own 'Trace' span (pid "Spans")
_FLOW_LAUNCH_CATS = {"ac2g", "async_cpu_to_gpu"}
_FLOW_FWDBWD_CATS = {"fwdbwd"}

_STEP_RE = re.compile(r"^ProfilerStep#\d+")
_MEMCPY_RE = re.compile(r"^Memcpy\s+(\w+)(?:\s*\(\s*(\w+)\s*->\s*(\w+)\s*\))?")
_DIR = {"htod": CopyKind.H2D, "dtoh": CopyKind.D2H, "dtod": CopyKind.D2D, "htoh": CopyKind.H2H,
        "ptop": CopyKind.P2P, "htoa": CopyKind.H2D, "atoh": CopyKind.D2H, "atoa": CopyKind.D2D,
        "atod": CopyKind.D2D, "dtoa": CopyKind.D2D}
_MEM = {"pageable": MemKind.PAGEABLE, "pinned": MemKind.PINNED, "device": MemKind.DEVICE,
        "host": MemKind.UNKNOWN, "managed": MemKind.MANAGED, "array": MemKind.ARRAY}


def _parse_memcpy_name(s: str) -> tuple[int, int, int]:
    m = _MEMCPY_RE.match(s)
    if not m:
        return 0, 0, 0
    ck = _DIR.get(m.group(1).lower(), CopyKind.UNKNOWN)
    sm = _MEM.get((m.group(2) or "").lower(), MemKind.UNKNOWN)
    dm = _MEM.get((m.group(3) or "").lower(), MemKind.UNKNOWN)
    if ck == CopyKind.UNKNOWN and not m.group(2):
        return 0, 0, 0  # let args.kind decide
    return int(ck), int(sm), int(dm)
