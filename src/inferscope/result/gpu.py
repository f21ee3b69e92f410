"""GPU sections: device busy time, idle gaps, kernels, copies, syncs; NVTX attribution, per-pid kernel
time and the Nsight Systems extras (launch latency, memory operations)."""

from typing import Optional

import msgspec

from .base import Num, _S


class DeviceBusy(_S):
    device: int
    busy_ms: float
    idle_pct: float
    streams: int


class Gpu(_S):
    """Busy = union of kernel, memcpy and memset intervals over all streams, clipped to the window."""
    busy_ns: int
    busy_ms: float
    idle_ms: float
    idle_pct: float
    busy_pct: float
    active_start_ns: Optional[int]
    active_end_ns: Optional[int]
    active_span_ms: float
    idle_pct_active_span: Num
    compute_kernel_busy_ms: float
    comm_kernel_busy_ms: float
    compute_comm_overlap_ms: float
    compute_comm_overlap_pct: Num      # share of communication time with a compute kernel running (HTA)
    kernel_busy_ms: float
    copy_busy_ms: float
    memset_busy_ms: float
    streams: int
    devices: list[DeviceBusy]


class StreamGaps(_S):
    track: int
    stream: str
    device: int
    stream_id: int
    gaps: int
    idle_ms: float
    host_wait_ms: float
    kernel_wait_ms: float
    other_ms: float


class GapBucket(_S):
    bucket: str
    count: int
    stream_ms: float


class DeviceGap(_S):
    start_ns: int
    end_ns: int
    ms: float
    offset_ms: float
    host: str
    host_kind: Optional[str]
    host_overlap_pct: float
    host_within: list[str] = []


class IdleGaps(_S):
    per_stream: list[StreamGaps]
    by_class_stream_ms: dict[str, float]   # summed over streams: stream-time, not window time
    streams: int
    distribution: list[GapBucket]
    largest: list[DeviceGap]
    rule: str
    device_gaps: Optional[int] = None
    device_gap_ms: Num = None


class KernelClass(_S):
    # "class" is a Python keyword: the field is class_ in Python, "class" in JSON
    class_: str = msgspec.field(name="class")
    ms: float = 0.0
    calls: int = 0
    share_pct: float = 0.0


class TopKernel(_S):
    name: str
    device: int
    sum_ms: float
    calls: int
    mean_us: float
    p50_us: float
    p90_us: float
    max_us: float
    share_pct: float


class Kernels(_S):
    """Kernels overlapping the window; kernel_sum_ms = their durations clipped to the window,
    summed over streams."""
    count: int
    kernel_sum_ms: float
    top: list[TopKernel]
    launch_storm: bool
    distinct: Optional[int] = None
    mean_us: Num = None
    p50_us: Num = None
    p90_us: Num = None
    max_us: Num = None
    launches_per_s: Num = None
    active_span_ms: Num = None
    tiny_threshold_us: Num = None
    tiny_count: Optional[int] = None
    tiny_pct: Num = None
    tiny_time_pct: Num = None
    launch_storm_rule: Optional[str] = None
    launch_api_calls: Optional[int] = None
    launch_api_ms: Num = None
    launch_api_vs_kernel_ratio: Num = None
    launch_api_p50_us: Num = None
    launch_api_typical_vs_kernel_ratio: Num = None
    classes: list[KernelClass] = []
    graph_launches: Optional[int] = None


class CopyKindRow(_S):
    kind: str
    count: int
    bytes: int
    ms: float
    bandwidth_gbps: Num
    pageable_count: int
    pinned_count: int
    pageable_ms: float
    pinned_ms: float
    pageable_bytes: int = 0
    pinned_bytes: int = 0


class ApiCount(_S):
    api: str
    count: int
    ms: float


class Pageable(_S):
    count: int
    ms: float
    bytes: int
    by_api: list[ApiCount]


class SmallCopies(_S):
    threshold_bytes: int
    count: int
    ms: float
    pct_of_window: float
    storm: bool
    bytes: int = 0                      # their bytes
    calls: int = 0                      # their issuing host calls (with a launch flow)
    call_ms: float = 0.0                # those calls' own host time (less the wait before the copy began), summed
    call_p50_us: Optional[float] = None  # ... median
    call_wait_ms: float = 0.0           # the calls' time before their copy began on the GPU (earlier GPU work)
    bulk_gbps: Optional[float] = None   # bandwidth of the window's copies >= threshold_bytes (whole copies)


class Memset(_S):
    count: int
    ms: float
    bytes: int


class Copies(_S):
    """Copies overlapping the window; *_ms are their durations clipped to the window, added up."""
    count: int
    copy_sum_ms: float
    by_kind: list[CopyKindRow]
    memset: Memset
    pageable: Pageable
    small: SmallCopies          # tiny D2H reads (.item()) are in syncs.tiny_d2h


class SyncRow(_S):
    api: str
    issued_by: str
    count: int
    ms: float
    max_ms: float


class OpCount(_S):
    op: str
    count: int


class TinyD2HReads(_S):
    count: int
    threshold_bytes: int
    issued_by: list[OpCount]


class Syncs(_S):
    """Blocking host calls, by the breakdown's sync_wait rule (pageable async copies included)."""
    count: int
    blocked_ms: float          # union of the calls in the window (wall time)
    blocked_pct: float
    calls_sum_ms: float        # sum of the calls, clipped to the window; the sync table adds up to it
    pageable_copy_calls: int
    pageable_copy_calls_sum_ms: float
    by_api: list[ApiCount]
    top: list[SyncRow]
    stream_wait_count: int
    tiny_d2h: TinyD2HReads


class NvtxAttribution(_S):
    enabled: bool
    kernel_sum_ms: float
    attributed_ms: Num
    coverage_pct: Num
    warn_threshold_pct: float
    kernels: Optional[int] = None
    attributed_kernels: Optional[int] = None
    kernels_with_launch_link: Optional[int] = None
    rule: Optional[str] = None


class NvtxPhase(_S):
    ranges: int
    wall_ms: float
    kernel_sum_ms: Num
    kernel_pct: Num


class Nvtx(_S):
    available: bool
    ranges: int
    distinct_names: int
    attribution: Optional[NvtxAttribution]
    phases: Optional[dict[str, NvtxPhase]]


class PidKernels(_S):
    pid: int
    kernel_sum_ms: float
    kernels: int
    pct_of_kernel_time: float
    name: str = ""


class PidNvtx(_S):
    ranges: int
    kernel_sum_ms: float
    attributed_ms: Num
    coverage_pct: Num


class PerPid(_S):
    pids: list[PidKernels]
    sync_calls_sum_ms: float
    nvtx_by_pid: dict[str, PidNvtx]
    multi_process: bool = False


class LaunchLatency(_S):
    launches: int
    api_ms: float
    queue_ms: float
    linked_kernel_sum_ms: float   # durations of the kernels these launches started (whole, summed)
    queued_launches: int
    api_to_kernel_ratio: Num


class MemoryOps(_S):
    pageable_async_copies: int
    pageable_async_bytes: int
    pageable_async_ms: float
    sync_copies: int
    sync_copy_bytes: int
    sync_copy_api_ms: float
    sync_memsets: int
    sync_memset_api_ms: float
    unlinked_ops: int


class NsysExtras(_S):
    launch_latency: LaunchLatency
    memory_ops: MemoryOps
    sync_like_api_names_calls_sum_ms: float   # seed-004 name view (Synchronize/Wait/Query), not blocked time
