"""The analysis result as types: msgspec Structs, one per report.json section.

``analyze/pipeline.py`` converts what the analyses computed into ``Report`` (strictly: a key the
model does not declare is an error, so the documented schema cannot drift from what is emitted),
and the renderers write its JSON form.  The JSON Schema of report.json is generated from these
types (``inferscope schema``, ``docs/report.schema.json``).  Units are in the names: ``_ms``
milliseconds (float), ``_ns`` integer nanoseconds, ``_us`` microseconds, ``_pct`` percent (0-100).
``*_busy_ms`` are unions over streams (wall time, at most the window); ``*_sum_ms`` and
``*_stream_ms`` add up per-stream or per-call time (can exceed the window).

Importing this module needs msgspec only (no numpy).  No ``from __future__ import annotations``
here: msgspec would then evaluate every annotation string on the first conversion (~10 ms per
command, issue 26); evaluated at class creation they come from the byte code.
"""

from typing import Any, Optional

import msgspec

SCHEMA_VERSION = 2


class _S(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=False):
    pass


Num = Optional[float]


class Tool(_S):
    name: str
    version: str


class Device(_S):
    id: Optional[int] = None
    name: Optional[str] = None
    total_memory_bytes: Optional[int] = None
    sm_count: Optional[int] = None
    compute_capability: Optional[str] = None


class ProcessGroup(_S):
    pg_name: str
    pg_desc: str
    backend_config: str
    pg_size: Optional[int]
    ranks: list[int]


class Distributed(_S):
    """Kineto ``distributedInfo``: which rank of which torch.distributed job the trace is."""
    rank: int
    world_size: Optional[int] = None
    pg_count: Optional[int] = None
    backend: Optional[str] = None
    nccl_version: Optional[str] = None
    pg_config: list[ProcessGroup] = []


class Source(_S):
    format: str
    file: Optional[str]
    devices: list[Device]
    tool_versions: dict[str, Any]
    events: int
    spans: int
    tracks: int
    counters: int
    distributed: Optional[Distributed] = None


class WindowInfo(_S):
    start_ns: int
    end_ns: int
    label: str
    kind: str
    dur_ms: float


class Part(_S):
    name: str
    label: str
    ns: int
    ms: float
    pct: float


class Category(_S):
    """One breakdown category: an exclusive share of the window (the rows sum to e2e_ms)."""
    category: str
    label: str
    ns: int
    ms: float
    pct: float
    parts: list[Part]


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


class Step(_S):
    name: str
    start_ms: float
    wall_ms: float
    gpu_ms: float


class RangeRow(_S):
    name: str
    count: int
    wall_ms: float
    mean_ms: float
    max_ms: float
    gpu_ms: float


class PhaseSource(_S):
    name: str      # the range name
    rule: str      # which rule mapped it: a --phase-map pattern, or a conventional whole name


class PhaseRow(_S):
    phase: str
    ranges: int
    wall_ms: float
    gpu_ms: float
    mapped_from: list[PhaseSource]


class Phases(_S):
    steps: list[Step]
    step_count: int
    ranges: list[RangeRow]
    phase_map_source: str
    phase_map: Optional[dict[str, list[str]]]
    conventional_phase_names: Optional[list[str]]
    phases: list[PhaseRow]
    gpu_attribution_coverage_pct: Num
    rule: str


class OneOffCall(_S):
    name: str
    kind: str
    ms: float
    offset_ms: float
    pct_of_window: float


class OneOffCalls(_S):
    calls: list[OneOffCall]
    union_ms: float
    union_pct: float
    count: Optional[int] = None
    threshold_ms: Num = None


class PhaseItem(_S):
    name: str
    count: int
    ms: float


class RunPart(_S):
    """A start-up or teardown part of the run: where it is, the rule that found it, what it holds."""
    start_ns: int
    end_ns: int
    offset_ms: float
    ms: float
    rule: str
    top: list[PhaseItem]


class RunPhases(_S):
    """Start-up / steady state / teardown of the whole trace (analyze/run_phases.py).  The default
    window is the steady state when a part was cut (applied); scope() ranges and --window win."""
    startup: Optional[RunPart]
    teardown: Optional[RunPart]
    steady_start_ns: int
    steady_end_ns: int
    steady_ms: float
    trace_ms: float
    cut: bool
    applied: bool = False


class CulpritFunction(_S):
    function: str
    file: str
    thread: str
    self_ms: float
    self_pct: float
    total_ms: Num
    samples: Optional[int]
    calls: Optional[int]
    source: str
    # 'class' is a keyword: stored under that key in JSON
    klass: str = msgspec.field(name="class", default="")


class CulpritOp(_S):
    name: str
    calls: int
    self_ms: float
    total_ms: float
    device_ms: float
    self_pct: float


class CulpritApi(_S):
    name: str
    kind: str                  # cuda (runtime/driver) | os (OS runtime calls)
    calls: int
    total_ms: float
    p50_us: float
    max_us: float
    pct_of_window: float


class Culprits(_S):
    """The top Python functions (the sampled function of each tick; profiler Python frames), CPU ops and
    runtime/driver APIs in the window (analyze/culprits.py); tables/top_*.csv hold every row."""
    functions: list[CulpritFunction]
    ops: list[CulpritOp]
    apis: list[CulpritApi]
    counts: dict[str, int]


class ThreadRow(_S):
    thread: str
    pid: int
    tid: int
    critical: bool
    recorded_ms: float         # union of the thread's recorded host spans in the window
    waiting_ms: float          # of which OS-runtime calls / sampled off-CPU time
    on_cpu_ms: Num = None      # sampled classes on a CPU (live runs; None: not sampled)
    run_queue_ms: Num = None   # sampled: runnable, waiting for a CPU


class Threads(_S):
    """The critical thread(s) whose host time the breakdown counts (analyze/threads.py); the others
    are parallel activity."""
    rule: str                  # scope | gpu_launch | main | all
    rule_text: str
    critical: list[str]
    threads: list[ThreadRow]
    all_threads_on_cpu_ms: Num = None    # every thread's on-CPU time summed (live runs)
    all_threads_on_cpu_pct: Num = None   # ... in % of the window: % of one core (the all-threads view)
    critical_on_cpu_pct: Num = None      # the critical thread(s)' share of that
    on_cpu_basis: Optional[str] = None


class ChildProcess(_S):
    pid: int
    comm: str
    cpu_s: float
    cpu_s_in_window: float      # estimate (cumulative counter observed every ~0.5 s)
    first_seen_ms: Num          # relative to the window start (None: a followed child /proc never saw)
    last_seen_ms: Num
    alive_at_end: bool
    followed: bool = False      # sampled into the trace (its own pid's threads)


class Children(_S):
    """Child processes of a live run: their CPU time from /proc; Python ones followed (sampled) by default
    (analyze/children.py)."""
    count: int
    cpu_s_total: float
    reaped_cpu_s: float
    cpu_s_in_window: float
    profiled: bool              # some children were followed (sampled) into the trace
    processes: list[ChildProcess]
    basis: str
    followed: int = 0           # Python children followed into the trace (their samples, own pids)
    waiting_on_children_ms: Num = None   # critical thread waiting while a followed child was on-CPU
    not_followed: int = 0       # children seen in /proc that were not followed (not Python, or following off)
    not_followed_cpu_s: float = 0.0   # their CPU time (/proc), not profiled
    following: Optional[bool] = None  # live runs: child following was on (config follow_children); None: not recorded


class SamplingThread(_S):
    """The sampler's achieved rate on one thread outside imports (live runs)."""
    tid: int
    name: str
    ticks: int                  # ticks that saw the thread
    steady_ms: float            # the time those ticks covered (its lifetime outside imports)
    hz: Num                     # ticks / steady_ms
    low: bool                   # below half cpu_sampling_hz over >= 0.5 s (warned at collection)


class CpuSampling(_S):
    sampled_ms: float
    rate_hz: Num
    samples_est: Num
    ci95_pts_at_50pct: Num
    ci95_pts_at_10pct: Num
    threads: list[SamplingThread] = []


class CollectionCost(_S):
    """Live runs with CUPTI or torch.profiler: the estimated observer effect in the window."""
    profiler_host_events: int   # events that cost: torch.profiler's ops + API calls, or CUPTI's GPU activity records
    cost_per_event_us: float
    estimated_ms: float
    estimated_ms_range: list[float]
    pct_of_window: float
    finalize_ms: Num
    basis: str
    source: str = "torch.profiler"      # which collector: "CUPTI" or "torch.profiler"
    what: str = "ops and CUDA API calls"


class CounterSeries(_S):
    """One counter over the window: statistics over its samples (cumulative counters as rates, ``*_per_s``)."""
    metric: str
    device: int                 # GPU ordinal; -1 host
    unit: str
    samples: int
    min: float
    mean: float
    p95: float
    max: float


class GpuMemory(_S):
    device: int
    peak_bytes: int
    total_bytes: Optional[int]
    peak_pct: Num
    headroom_bytes: Optional[int]


class ProcessCores(_S):
    cores: int
    basis: str
    mean_util_pct: float
    max_core_mean_util_pct: float


class ThrottleReason(_S):
    reason: str
    bit: int
    samples: int
    window_pct: float


class Throttle(_S):
    """NVML clock-event reasons of one GPU: each sample holds until the next; shares of the window."""
    device: int
    samples: int
    covered_pct: float
    affected_pct: float
    affected_samples: int
    reasons: list[ThrottleReason]
    sm_clock_mhz_throttled: Num
    sm_clock_mhz_other: Num
    sm_clock_mhz_max: Num
    clock_drop_pct: Num             # share of the window with the SM clock below CLOCK_DROP_FRACTION x its max
    intervals: list[list[int]]      # merged [start_ns, end_ns] with a throttle reason set (first 200)


class NumaGpu(_S):
    pci_bus_id: str
    numa_node: int


class Numa(_S):
    numa_nodes: Optional[int]
    process_numa_nodes: Optional[list[int]]
    gpu_local: Optional[bool]
    remote_numa_possible: Optional[bool]
    process_cpus: Optional[int]
    gpu_numa_nodes: list[NumaGpu]
    torch_threads: Optional[int] = None     # torch.get_num_threads() at the end of a live run


class SlowStepMetric(_S):
    metric: str
    device: int
    slow_mean: float
    rest_mean: float
    diff_pct: Num


class SlowSteps(_S):
    """The slowest 5 % of steps (or of one repeated range) vs the rest: counter values in force at their midpoints."""
    source: str
    steps: int
    slow_count: int
    slow_mean_ms: float
    rest_mean_ms: Num
    metrics: list[SlowStepMetric]


class CountersSection(_S):
    """System and GPU counters in the window (live runs: /proc, NVML; nsys: GPU metrics)."""
    series: list[CounterSeries]
    gpu_memory: list[GpuMemory]
    rss_peak_bytes: Optional[int]
    page_faults_per_s: Num
    ctx_switches_per_s: Num
    process_cores: Optional[ProcessCores]
    throttle: list[Throttle]
    numa: Optional[Numa]
    dropped_samples: int
    rule: str
    slow_steps: Optional[SlowSteps] = None
    invol_ctx_switches_per_s: Num = None   # preempted while runnable (CPU contention)
    sys_cpu_pct: Num = None                # kernel-mode CPU of the process, % of one core (page faults, syscalls)
    main_runq_pct: Num = None              # main thread runnable but not running, % of wall (schedstat)


class GilThread(_S):
    thread: str
    python_ms: float               # the thread's on-CPU Python samples in the window
    overlap_ms: float              # ... while the critical thread was off-CPU
    function: Optional[str]        # its hottest function during that overlap
    file: Optional[str]


class GilFunction(_S):
    function: str                  # a function of the other threads' Python
    file: str
    thread: str                    # the thread where it overlapped the waits most
    overlap_ms: float              # its sampled time inside the critical thread's off-CPU time, all threads
    threads: int                   # threads it ran on there


class GilWait(_S):
    critical_waiting_ms: float
    waiting_while_python_ms: float  # upper bound of the critical thread's GIL wait
    pct_of_window: float
    pct_of_waiting: float
    python_threads: int
    threads: list[GilThread]
    basis: str
    functions: list[GilFunction] = []   # by function over all the other threads, largest first (the culprit)
    bin_ms: Optional[float] = None  # waiting and Python matched per bin of this width (live: two sampler ticks)


class FaultFunction(_S):
    function: str
    file: str
    thread: str
    ms: float                      # its sampled time inside the storm intervals
    kernel_ms: Optional[float] = None   # kernel time of storm tick intervals charged to it (live runs)


class FaultStorms(_S):
    intervals: int                 # counter intervals at >= rate_threshold_per_s
    ms: float                      # their length in the window
    faults: int
    functions: list[FaultFunction]  # the critical thread's sampled functions inside them
    rate_threshold_per_s: float
    kernel_ms: Optional[float] = None   # kernel time of the storm tick intervals charged to sampled functions
    ranked_by: str = "ms"          # "kernel_ms" when the tick-level kernel time series was recorded


class BlockingCall(_S):
    kind: str                      # io | lock | gil | sleep | poll | other
    syscall: str                   # e.g. pread64, fsync, futex, clock_nanosleep
    frame: Optional[str]           # the waiting Python frame "file:line function" (innermost non-library)
    via: Optional[str]             # the innermost frame when it differs (a stdlib wrapper)
    thread: str
    ms: float
    pct_of_window: float
    path: Optional[str]            # the file with the most time (fd calls; openat's path argument)
    files: int                     # distinct files of this call site in that directory
    flags: list[str]               # open flags that make I/O wait: O_DIRECT, O_DSYNC, O_SYNC, O_APPEND
    size: Optional[int]            # most common byte count of read/write/pread64/pwrite64
    timed: Optional[bool]          # futex: the wait had a timeout


class BlockingOther(_S):
    thread: str
    state: str                     # "off-CPU in <syscall> at <frame>" | "running <class> (<function>)" | "off-CPU"
    ms: float                      # its time in that state during the critical thread's lock waits
    pct_of_lock_wait: float


class BlockingSyscall(_S):
    syscall: str
    kind: str
    ms: float


class Blocking(_S):
    """Live runs: the critical thread's off-CPU time by system call, file and frame (analyze/blocking.py)."""
    waiting_ms: float
    attributed_ms: float
    io_ms: float
    io_pct_of_window: float
    lock_ms: float                 # futex waits while no other thread of the process ran Python
    lock_pct_of_window: float
    futex_ms: float
    python_overlap_ms: float
    gil_ms: float                  # futex waits with a deadline within the switch interval (the GIL)
    sleep_ms: float
    poll_ms: float
    other_ms: float
    by_syscall: list[BlockingSyscall]
    calls: list[BlockingCall]
    lock_others: list[BlockingOther]
    basis: str


class Contention(_S):
    """Live runs: the GIL, page-fault storms and blocking calls (analyze/contention.py, analyze/blocking.py)."""
    gil: Optional[GilWait]
    page_faults: Optional[FaultStorms]
    blocking: Optional[Blocking] = None


class GcGeneration(_S):
    generation: int                # 0, 1, 2 (2: full collection)
    count: int
    total_ms: float                # clipped to the window
    longest_ms: float


class GcThread(_S):
    thread: str                    # the thread that ran the collections (its track name)
    tid: int
    count: int
    total_ms: float
    pct_of_window: float
    longest_ms: float


class GcPause(_S):
    thread: str
    generation: int
    ms: float
    offset_ms: float               # from the window's start
    collected: Optional[int]       # objects the collection freed
    uncollectable: Optional[int]


class GcRun(_S):
    """The collector's whole-run counters: every collection, short ones included."""
    collections: list[int]         # per generation 0, 1, 2
    total_ms: list[float]
    mean_us: list[Optional[float]]
    not_recorded: int              # long pauses beyond the collector's cap (counted, no span)
    thresholds: Optional[list[int]]   # gc.get_threshold() at the end of the run
    frozen: Optional[int]          # gc.get_freeze_count()
    gc_enabled: Optional[bool]


class GcPauses(_S):
    """Live runs: Python garbage-collection pauses in the window (analyze/gc_pauses.py)."""
    count: int
    total_ms: float
    pct_of_window: float
    longest_ms: float
    longest_generation: Optional[int]
    longest_thread: Optional[str]
    record_min_ms: Optional[float]
    by_generation: list[GcGeneration]
    by_thread: list[GcThread]
    longest: list[GcPause]
    run: Optional[GcRun]
    basis: str


class Finding(_S):
    id: str
    severity: str                       # high | medium | low | info
    title: str
    evidence: dict[str, Any]
    evidence_source: dict[str, str]     # evidence key -> result path it was read from
    evidence_derived: dict[str, str]    # evidence key -> formula over cited values
    evidence_text: list[str]
    suggestion: str


class Verdict(_S):
    id: str
    title: str
    confidence: float
    confidence_basis: str
    evidence: list[str]
    shares_pct: dict[str, float] = {}


class Table(_S):
    columns: list[str]
    rows: list[list[Any]]


class About(_S):
    analysis_ms: float
    events: int
    collection: Optional[dict[str, Any]] = None
    load_ms: Num = None


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


class EfficiencyOp(_S):
    op: str
    calls: int
    gflops: float                    # FLOPs of these calls / 1e9
    mbytes: float                    # operand + output bytes (each once) / 1e6: a lower bound on traffic
    kernel_ms: Num                   # GPU time of the kernels these calls launched (null: CPU-only)
    achieved_tflops: Num             # gflops over kernel_ms
    achieved_gbps: Num
    intensity_flop_per_byte: Num     # arithmetic intensity
    roofline: Optional[str]          # compute-bound | memory-bound against the device's ridge point
    pct_of_flops: float


class Efficiency(_S):
    """Achieved FLOPs from recorded shapes (Kineto record_shapes), MFU and MBU against datasheet peaks."""
    device: Optional[str]
    dtype: Optional[str]             # dominant dtype by FLOPs (bf16, fp16, fp32, fp8)
    gemm_flops: float                # matrix-multiply FLOPs in the window: 2*M*N*K per product, batched per batch
    attention_flops: float           # scaled-dot-product attention: 4*B*H*Sq*Sk*D (causal with Sq == Sk: half)
    conv_flops: float
    total_flops: float
    bytes_moved_est: float           # bytes: operands read once + outputs written once (lower bound, estimate)
    counted_ops: int
    ops_without_shapes: int
    window_s: float
    kernel_ms: Num                   # GPU time of the kernels launched by the counted ops
    gemm_kernel_ms: Num
    gemm_kernel_tflops: Num          # GEMM FLOPs (of ops with a linked kernel) / their kernels' GPU time
    achieved_tflops: Num             # total_flops / window wall time / 1e12
    achieved_gbps: Num               # bytes_moved_est / window wall time / 1e9
    peak_tflops: Num                 # dense peak for dtype (datasheet table or --peak-tflops); null: unknown
    peak_gbps: Num                   # peak memory bandwidth, GB/s
    peak_source: Optional[str]
    mfu_pct: Num                     # achieved_tflops / peak_tflops * 100
    mbu_pct: Num                     # achieved_gbps / peak_gbps * 100
    ridge_flop_per_byte: Num         # peak_tflops*1e12 / (peak_gbps*1e9)
    by_op: list[EfficiencyOp]
    basis: str


class LatencyStats(_S):
    """Milliseconds over the samples; percentiles null with fewer than 2 samples (a warning says so)."""
    count: int
    mean: Num
    p50: Num
    p90: Num
    p95: Num
    p99: Num
    max: Num


class TokensPerS(_S):
    prompt: Num      # prompt tokens (x batch) of the requests in the window / window seconds
    generated: Num   # generated tokens (x batch) / window seconds


class LlmStep(_S):
    """One forward of the model (a generation step)."""
    name: str
    kind: str                    # prefill | decode | mixed
    source: str                  # hf (live generate), exec (execute_..._context_..._generation_...), sgl (step[...]), phase
    batch: Optional[int]         # sequences in the step
    tokens: Optional[int]        # tokens computed in the step, summed over the batch
    kv_tokens: Optional[int]     # KV-cache length read, summed over the batch
    wall_ms: float
    gpu_ms: Num                  # GPU work launched from inside the step, summed (null: no GPU)
    gpu_span_ms: Num             # first start to last end of that GPU work (graph replays outlast the host step)
    start_ms: float              # offset from the window start


class StageCategory(_S):
    category: str                # a breakdown category
    ms: float                    # its time inside the stage's steps
    pct: float                   # share of the stage's time (union of its steps)


class LlmStage(_S):
    stage: str                   # prefill | decode | mixed
    steps: int
    wall_ms: float
    gpu_ms: Num
    step_ms: LatencyStats
    batch: Optional[int]         # most common batch size
    tokens: Optional[int]
    kv_tokens_mean: Num
    flops: Num                   # analytical (model section) over the stage's steps
    achieved_tflops: Num         # flops / stage wall time / 1e12
    mfu_pct: Num                 # achieved_tflops / peak_tflops * 100
    mbu_pct: Num                 # decode: (param bytes + KV bytes read) per step / mean step time / peak bandwidth
    peak_tflops: Num
    peak_gbps: Num
    peak_source: Optional[str]
    breakdown: list[StageCategory] = []   # what the stage's time goes to (the breakdown rule, inside its steps)
    bytes_per_step: Num = None


class Llm(_S):
    """Requests, latency percentiles and throughput; generation steps and per-stage efficiency."""
    requests: int
    sequences: int
    ttft_ms: LatencyStats        # time to first token, per request
    tpot_ms: LatencyStats        # time per output token: gaps between consecutive tokens of a request
    request_ms: LatencyStats     # end-to-end request latency
    tokens_per_s: TokensPerS
    requests_per_s: Num
    token_time_basis: list[str]
    steps: Optional[list[LlmStep]]
    stages: list[LlmStage]
    rule: str


class FlopsPerToken(_S):
    prefill: Num                 # FLOPs per token at the mean prompt length
    decode: Num                  # FLOPs per token at the mean decode context
    prefill_context: Num
    decode_context: Num


class Model(_S):
    """Static description of the model a live generate() used (exact counts from its parameter tensors)."""
    name: Optional[str]
    params: int
    param_bytes: int
    flops_per_token: FlopsPerToken
    kv_bytes_per_token: Optional[int]   # K and V, all layers, one token, in the weights' dtype
    flops_basis: str
    class_: Optional[str] = msgspec.field(default=None, name="class")
    model_type: Optional[str] = None
    params_by_dtype: dict[str, int] = {}
    bytes_by_dtype: dict[str, int] = {}
    layers: Optional[int] = None
    hidden: Optional[int] = None
    heads: Optional[int] = None
    kv_heads: Optional[int] = None
    head_dim: Optional[int] = None
    intermediate: Optional[int] = None
    vocab: Optional[int] = None
    linear_weight_elems: Optional[int] = None
    lm_head_elems: Optional[int] = None


class DeepDiveDevice(_S):
    name: Optional[str]
    sm_count: Num
    sm_clock_ghz: Num
    peak_dram_gbps: Num              # 2 x memory clock x bus width from the capture, else the datasheet row
    peak_fp32_tflops: Num            # SMs x FP32 lanes x 2 x SM clock, else the datasheet row
    peak_tensor_tflops: Num          # datasheet dense bf16 (never from the capture)
    peak_source: Optional[str]


class DeepDiveKernel(_S):
    """One kernel Nsight Compute profiled: % metrics are duration-weighted means over its launches."""
    name: str
    short_name: str
    launches: int
    ncu_ids: list[int]
    grid: Optional[str]
    block: Optional[str]
    duration_us: float               # mean over its profiled launches
    sm_pct: Num                      # SM throughput, % of peak
    mem_pct: Num                     # memory (L1/L2/DRAM) throughput, % of peak
    dram_pct: Num
    tensor_pct: Num                  # tensor pipe busy, % of peak
    fma_pct: Num                     # FP32 FMA pipe busy, % of peak
    l1_hit_pct: Num
    l2_hit_pct: Num
    occupancy_pct: Num               # achieved
    theoretical_occupancy_pct: Num
    registers: Num                   # per thread
    waves: Num                       # waves per SM
    grid_blocks: Num
    device_sm_count: Num
    dram_bytes: Optional[int]        # over its launches; estimated when dram_bytes_estimated
    dram_bytes_estimated: bool
    dram_gbps: Num
    achieved_tflops: dict[str, float]   # by precision, from SASS FLOP counters (empty: not captured)
    intensity_flop_per_byte: Num
    roofline: Optional[str]
    limiter: str                     # memory | compute | latency | unknown
    limiter_text: str
    lever: str
    ncu_rules: list[str]             # ncu's own rule results (details page), first launch
    trace_sum_ms: float              # the kernel's time in the window (same normalised name)
    trace_calls: int
    share_pct: float                 # of kernel time (see basis)
    measured_mfu_pct: Num = None     # busiest math pipe (tensor / FP32 FMA) % of peak, or FLOP counters / FP32 peak
    measured_mfu_basis: str = ""     # which of them, or "n/a: capture lacks ..."
    measured_mbu_pct: Num = None     # ncu DRAM throughput, % of peak
    measured_mbu_basis: str = ""
    pairing: Optional[str] = None    # which trace launches the estimate is over (launch offset / order / name)
    est_launches: int = 0            # trace launches with a shape-based estimate (linked to a counted op)
    est_gpu_ms: Num = None
    est_flops: Num = None            # the launching ops' FLOPs split over their kernels by GPU time (estimate)
    est_bytes: Num = None            # operands once, split the same way (estimate, lower bound)
    est_tflops: Num = None
    est_gbps: Num = None
    est_mfu_pct: Num = None          # est_tflops / efficiency peak (dominant dtype, dense)
    est_mbu_pct: Num = None          # est_gbps / efficiency peak bandwidth
    est_ops: list[str] = []
    est_basis: str = ""
    disagreement: list[str] = []     # measured vs estimated >= KERNEL_MEASURED_VS_EST_RATIO apart


class MveFigure(_S):
    """One efficiency figure over the matched kernels, weighted by their GPU time in the trace."""
    measured_pct: Num
    measured_share_pct: float        # of the matched kernels' GPU time that has a measured figure
    est_pct: Num
    est_share_pct: float
    both_measured_pct: Num           # over the kernels with both figures
    both_est_pct: Num
    both_kernels: int
    both_share_pct: float
    disagreement: Optional[str]


class MeasuredVsEstimated(_S):
    """Measured (ncu) vs shape-based MFU/MBU of the kernels a joined capture matched."""
    matched_kernels: int
    matched_gpu_ms: float
    matched_share_pct: float         # of the window's kernel time
    peak_tflops: Num                 # the efficiency section's peaks (estimates are against them)
    peak_gbps: Num
    peak_source: Optional[str]
    dtype: Optional[str]
    mfu: MveFigure
    mbu: MveFigure
    window_mfu_pct: Num              # the efficiency section's whole-window figures (other basis: window wall time)
    window_mbu_pct: Num
    disagreements: list[str]
    basis: str


class LaunchRange(_S):
    """What the capture's launch IDs say about --launch-count / --launch-skip."""
    first_id: int
    last_id: int
    ids_in_file: int
    contiguous: bool
    launch_count_min: int
    launch_skip_in_trace: Optional[int]   # trace kernel index of launch ID 0, when the names fit one offset only
    offsets_fitting: int
    text: str


class KernelDeepDive(_S):
    """Nsight Compute deep-dive (ncu --csv import, alone or joined to the timeline with --ncu)."""
    file: Optional[str]
    layout: Optional[str]            # raw | details
    joined: bool
    launches: int
    missing: list[str]
    device: DeepDiveDevice
    kernels: list[DeepDiveKernel]
    unmatched: list[str]
    basis: str
    measured_vs_estimated: Optional[MeasuredVsEstimated] = None
    launch_range: Optional[LaunchRange] = None


class Report(_S):
    """report.json"""
    schema_version: int
    tool: Tool
    source: Source
    window: WindowInfo
    e2e_ms: float
    breakdown: list[Category]
    breakdown_rule: str
    gpu: Optional[Gpu]
    idle_gaps: Optional[IdleGaps]
    kernels: Kernels
    copies: Copies
    syncs: Syncs
    phases: Phases
    one_off_calls: OneOffCalls
    cpu_sampling: Optional[CpuSampling]
    findings: list[Finding]
    verdict: Verdict
    warnings: list[str]
    limitations: list[str]
    tables: dict[str, Table]
    about: About
    nvtx: Optional[Nvtx] = None
    contention: Optional[Contention] = None
    per_pid: Optional[PerPid] = None
    nsys_extras: Optional[NsysExtras] = None
    collection_cost: Optional[CollectionCost] = None
    counters: Optional[CountersSection] = None
    efficiency: Optional[Efficiency] = None
    llm: Optional[Llm] = None
    model: Optional[Model] = None
    run_phases: Optional[RunPhases] = None
    culprits: Optional[Culprits] = None
    threads: Optional[Threads] = None
    children: Optional[Children] = None
    kernel_deep_dive: Optional[KernelDeepDive] = None
    gc_pauses: Optional[GcPauses] = None

    def to_dict(self) -> dict:
        """The JSON form (what report.json holds)."""
        return msgspec.to_builtins(self)

    def table(self, name: str) -> Table:
        return self.tables[name]

    def to_pandas(self) -> dict:
        """Every table as a pandas DataFrame, by name (``breakdown``, ``kernels``, ``syncs`` ...).
        Needs pandas (``pip install pandas``)."""
        try:
            import pandas as pd
        except ImportError:
            from .errors import ConfigError
            raise ConfigError("Report.to_pandas() needs pandas: pip install pandas") from None
        return {name: pd.DataFrame(t.rows, columns=t.columns) for name, t in self.tables.items()}


def from_dict(d: dict) -> Report:
    """Validate a result dict against the model (unknown keys are an error) and type it."""
    return msgspec.convert(d, Report)


def json_schema() -> dict:
    """JSON Schema (draft 2020-12) of report.json, generated from ``Report``."""
    s = msgspec.json.schema(Report)
    s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    s["title"] = f"InferScope report.json, schema_version {SCHEMA_VERSION}"
    return s
