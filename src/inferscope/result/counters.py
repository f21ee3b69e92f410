"""The counters section: system and GPU counter series, GPU memory, cores, throttles, NUMA, slow steps."""

from typing import Optional

from .base import Num, _S


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
    metric: str              # gpu.mem_used_bytes (NVML) or gpu.mem_reserved_bytes (torch allocator, Kineto)
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
