"""The Nsight Compute kernel deep-dive: device peaks, per-kernel metrics, measured vs estimated."""

from typing import Optional

from .base import Num, _S


class DeepDiveDevice(_S):
    name: Optional[str]
    sm_count: Num
    sm_clock_ghz: Num
    peak_dram_gbps: Num              # 2 x memory clock x bus width from the capture, else the datasheet row
    peak_fp32_tflops: Num            # SMs x FP32 lanes x 2 x SM clock, else the datasheet row
    peak_tensor_tflops: Num          # datasheet dense bf16 (never from the capture)
    peak_source: Optional[str]


class StallReason(_S):
    """One warp state: its share of the warp cycles between issued instructions (analyze/kernel_stalls.py)."""
    reason: str                      # ncu's state name: long_scoreboard, wait, math_pipe_throttle, ...
    share_pct: float                 # duration-weighted mean over the launches with stall metrics
    meaning: str


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
    achieved_tflops: dict[str, float]   # by precision (SASS FLOP counters), tensor: tensor-pipe math ops (empty: not captured)
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
    stall_reasons: list[StallReason] = []   # top warp stall reasons (>= KERNEL_STALL_MIN_SHARE_PCT); empty: not captured
    stall_basis: Optional[str] = None     # the metric family they come from
    tensor_core: Optional[bool] = None   # runs on Tensor Cores: pipe busy >= KERNEL_TENSOR_UNUSED_PCT or tensor ops
                                         # counted; False: captured and idle; None: tensor pipe not captured


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
