"""Enumerations used in the Trace model's integer columns.

Values are stored in small unsigned integer numpy columns and written to the
native format, so they are part of the on-disk schema: only ever append.
"""
from __future__ import annotations

from enum import IntEnum


class TrackKind(IntEnum):
    OTHER = 0
    CPU_THREAD = 1      # pid, tid of an OS thread
    GPU_STREAM = 2      # device, stream id (tid column holds the stream)
    COUNTER = 3         # a time series (counters table), device/pid scoped
    GPU_DEVICE = 4      # device-wide rows that are not on one stream


class SpanKind(IntEnum):
    OTHER = 0
    KERNEL = 1          # GPU kernel execution
    MEMCPY = 2          # GPU copy (see copy_kind, src_mem, dst_mem, bytes)
    MEMSET = 3          # GPU memset
    RUNTIME = 4         # CUDA/HIP runtime API call on a CPU thread
    DRIVER = 5          # CUDA driver API call on a CPU thread
    CPU_OP = 6          # framework operator (aten::*, torch op)
    PYTHON = 7          # Python function (instrumented, e.g. with_stack)
    ANNOTATION = 8      # user range on a CPU thread (record_function, NVTX, scope())
    GPU_ANNOTATION = 9  # user range projected on a GPU stream
    STEP = 10           # ProfilerStep#N or an equivalent iteration range
    CPU_SAMPLE = 11     # a run of stack samples of one class (live sampler); name = class
    GPU_SYNC = 12       # GPU-side record of a synchronisation (cuda_sync, nsys SYNCHRONIZATION)
    MARK = 13           # instant event (start == end)
    OS_RUNTIME = 14     # OS call (nsys OSRT: futex, poll, read ...): host off-CPU / blocked
    OVERHEAD = 15       # profiler overhead record
    GRAPH_LAUNCH = 16   # GPU-side CUDA graph execution record (graph-level tracing)
    GC_PAUSE = 17       # a Python garbage collection on a CPU thread (live runs, collect/gcpauses.py)


GPU_WORK_KINDS = (SpanKind.KERNEL, SpanKind.MEMCPY, SpanKind.MEMSET, SpanKind.GRAPH_LAUNCH)
HOST_API_KINDS = (SpanKind.RUNTIME, SpanKind.DRIVER)


class CopyKind(IntEnum):
    NONE = 0
    H2D = 1
    D2H = 2
    D2D = 3
    H2H = 4
    P2P = 5
    UNKNOWN = 6


class MemKind(IntEnum):
    UNKNOWN = 0
    PAGEABLE = 1
    PINNED = 2
    DEVICE = 3
    MANAGED = 4
    ARRAY = 5


class FlowKind(IntEnum):
    LAUNCH = 1          # host API call -> GPU activity (correlation id)
    FWDBWD = 2          # autograd forward -> backward
    OTHER = 3
