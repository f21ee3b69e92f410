"""Every heuristic threshold InferScope uses, in one place, with its rationale.

Analyses import from here; reports quote them so a reader can see the rule.
"""

# --- launch storms (seed 004, nsys-llm-explainer heuristics.py) -------------
# Source: seed 004 (nsys-llm-explainer heuristics.py launch-storm rules).
# A storm: many launches per second of very short kernels; the GPU spends its
# time waiting on per-launch host overhead (~2-10 us per launch on CUDA).
LAUNCH_STORM_RULES = (
    # (min launches per second, max median kernel duration in us)
    (50_000.0, 10.0),
    (100_000.0, 20.0),
)
# Rates from a handful of kernels are noise: a storm needs at least this many kernels.
LAUNCH_STORM_MIN_KERNELS = 100
# A kernel shorter than this is "tiny": its launch cost is comparable to its run time.
# Source: seed 004 (nsys-llm-explainer's tiny-kernel share), CUDA launch overhead ~2-10 us.
TINY_KERNEL_US = 10.0

# --- dominant kernel (seed 004) ----------------------------------------------
# Source: seed 004 (a kernel with at least half of kernel time is where to start).
DOMINANT_KERNEL_SHARE_PCT = 50.0

# --- GPU idle ----------------------------------------------------------------
# Source: seed 002 (utilisation alert threshold) and HTA's idle-time breakdown.
# Seed 002 alerts below 10% utilisation; we flag idle above 30% of the window as
# worth a look (medium) and above 60% as the first thing to fix (high).
GPU_IDLE_MEDIUM_PCT = 30.0
GPU_IDLE_HIGH_PCT = 60.0

# --- copies ------------------------------------------------------------------
# Copies under 64 KiB are latency-bound (PCIe latency ~ several us dominates).
# Source: InferScope's own rule from PCIe latency/bandwidth (at ~25 GB/s, 64 KiB moves in ~2.6 us,
# the same order as the per-copy latency).
SMALL_COPY_BYTES = 64 * 1024
# More than this many small copies, or small copies taking more than this share
# of the window, is a small-copy storm.
SMALL_COPY_STORM_COUNT = 100
SMALL_COPY_STORM_PCT = 5.0
# Pageable copies: flag (medium) when their cost (host blocked in their calls, or their GPU time
# when no call is recorded) is more than this share of the window.  Source: nsys expert-system
# rule cuda_memcpy_async (any pageable async copy is reported); we keep tiny ones at "low".
PAGEABLE_COPY_MIN_PCT = 1.0
PAGEABLE_COPY_MIN_COUNT = 1
# A D2H read of at most this many bytes followed by a sync is the `.item()` pattern.
# Source: the size of one scalar or a small tuple of scalars (8-byte int64/float64 x 2).
TINY_D2H_BYTES = 16

# --- synchronisation ---------------------------------------------------------
# Host blocked in sync calls with the GPU idle (breakdown sync_wait), share of the window.
# Source: InferScope's own rule; 5 % is where removing per-step .item() is usually worth it,
# 20 % makes it the first thing to fix.  SYNC_STALL_HIGH_PCT also rates pageable copies whose
# calls block the host that long (the same cost, seen from the copy).
SYNC_STALL_MEDIUM_PCT = 5.0
SYNC_STALL_HIGH_PCT = 20.0

# --- CPU preprocessing -------------------------------------------------------
# Source: InferScope's own rule (seed 000: "is tokenization/preprocessing the bottleneck?").
# A tenth of end-to-end time with the GPU idle is worth moving off the critical path; a third
# makes it the first thing to fix.
CPU_PREPROCESSING_MEDIUM_PCT = 10.0
CPU_PREPROCESSING_HIGH_PCT = 30.0

# --- GPU communication (HTA's compute/communication overlap) --------------------
# Source: HTA "Communication computation overlap" reports the share of communication time that
# overlaps compute; what costs wall time is communication with no compute beside it (breakdown
# `gpu_communication`).  A tenth of the window is worth a look, a third is the first thing to fix
# (same scale as the other host/GPU categories here).
COMM_EXPOSED_MEDIUM_PCT = 10.0
COMM_EXPOSED_HIGH_PCT = 30.0

# --- framework overhead, CPU compute, waiting, coverage -------------------------------
# Source: InferScope's own rules, on the same scale as the verdict: a category holding this share
# of the window is large enough to name even when it does not decide the verdict.
FRAMEWORK_OVERHEAD_MEDIUM_PCT = 30.0
CPU_COMPUTE_INFO_PCT = 30.0
# Off-CPU waiting with nothing else running: a tenth of the window is noticeable (low), a fifth
# is a real cost (medium).
HOST_WAITING_LOW_PCT = 10.0
HOST_WAITING_MEDIUM_PCT = 20.0
# Unexplained time ('other') above this share: the trace lacks the data for a diagnosis.
LOW_COVERAGE_OTHER_PCT = 30.0

# --- host launch bound -------------------------------------------------------
# Source: HTA's "CPU-bound / launch-bound" reading of idle time (queue empty: host_wait gaps) and
# seed 004's launch-API vs kernel time ratio.
# GPU mostly idle between kernels and the host busy launching: launch API time
# is at least this share of total kernel time.
# Uses the typical (median) launch call x launches, so one slow first launch (lazy module
# loading) does not make a run launch-bound.
HOST_LAUNCH_API_VS_KERNEL_RATIO = 0.5
HOST_LAUNCH_MIN_KERNELS = 10

# --- idle-gap attribution (HTA definitions) ----------------------------------
# Source: HTA's idle-time breakdown (kernel_wait = the launch-latency-sized gap between kernels).
# A gap shorter than this after a kernel is counted as launch latency, not host wait.
IDLE_GAP_MIN_NS = 1_000

# --- one-off host calls (initialisation inside the window) --------------------
# Source: InferScope's own rule (torch.profiler's schedule wait/warmup steps exist for the same reason).
# A single non-sync host API call / op longer than this share of the window and this
# absolute time is start-up work (CUDA context creation, lazy module loading,
# cuDNN/cuBLAS handle creation, allocator growth), not steady-state inference.
ONE_OFF_CALL_MIN_PCT = 10.0
ONE_OFF_CALL_MIN_MS = 10.0
# the window's lead-in before its first step/request is start-up (analyze/host_calls.lead_in, warmup_in_window) when it
# lasts >= this many times the steps'/requests' start-to-start period: a gap that long is loading or warm-up, not
# the wait between two units of served work (and it must also reach the one-off size above)
STARTUP_LEAD_IN_FACTOR = 5.0
ONE_OFF_HIGH_PCT = 30.0   # their union above this share decides the verdict (init_bound)
# An op that spends at least this fraction of its time in blocking sync calls inside it
# (aten::copy_ around a pageable copy, aten::item) is a sync, not start-up work.
ONE_OFF_SYNC_INSIDE_MAX_FRACTION = 0.5
# A long call whose name recurs this many times in the window is steady-state work, not start-up.
ONE_OFF_RECURRING_MIN_CALLS = 3
# Of nested one-off calls (an op around the runtime call that does the work) only the innermost is
# listed when it covers at least this fraction of its parent.
ONE_OFF_NESTED_COVER_FRACTION = 0.9

# --- GPU-bound details ---------------------------------------------------------
# Source: InferScope's own rule; fusion (torch.compile) mainly removes elementwise/copy kernels.
# Elementwise + copy kernels above this share of kernel time: fusion is the lever.
ELEMENTWISE_COPY_SHARE_PCT = 30.0

# --- Nsight Systems timestamp unit (seed 004 sanity check; ingest/nsys_units.py) ---
# Source: seed 004 (a nanosecond-unit sanity check) with InferScope's own bounds.  nsys writes ns since the session start; a capture longer than a day would be tens of GB (captures are seconds to
# minutes), so a longer extent means ps/fs-scaled timestamps (an hour at ps reads as 42 days).
NSYS_MAX_SESSION_NS = 86_400 * 10**9
# CUPTI records no kernel much under 1 us (launch + drain; the shortest in the shared exports: 1,536 ns); a median
# under 50 ns means us-scaled timestamps (a 10 us kernel reads as 10).
NSYS_MIN_MEDIAN_KERNEL_NS = 50.0

# --- verdict -----------------------------------------------------------------
# Source: InferScope's own rule: about a third of the window, clearly ahead of any single other group
# when the rest is spread over several categories.
# A category must hold at least this share of e2e time to decide the verdict;
# below it, and without a finding at "high", the verdict is "balanced".
VERDICT_MIN_SHARE_PCT = 35.0

# --- NVTX attribution coverage (seed 004 default) ---------------------------
# Source: seed 004's default --nvtx-coverage-warn-threshold.
NVTX_COVERAGE_WARN_THRESHOLD = 0.7

# --- observer effect of torch.profiler (live runs) -----------------------------
# Source: measured on an H100 host (torch 2.11, CUDA 13; bench/bench_gpu.py, bench/README.md): a
# 30k-launch x.add_() loop (one CPU op + one launch call per step) took +4.4, +8 and +10 us per
# step under InferScope in three runs (medians of 4-10 interleaved pairs): 2.2-5 us per recorded
# host event (CPU op or CUDA API call), ~3.5 us typical.  Used only for an estimate that the
# report labels as such, with that range; the true cost depends on the host CPU.
PROFILER_COST_PER_HOST_EVENT_US = 3.5
PROFILER_COST_RANGE_US = (2.2, 5.0)
# Above this estimated share of the window, the report warns that host-side categories
# (framework/launch overhead) are inflated by the collection itself.
PROFILER_COST_WARN_PCT = 10.0
# What CUPTI activity tracing (collect/gpu_activity.py, the default GPU source) adds to the launching
# thread per recorded GPU activity (kernel, copy, memset), measured on an H100 (driver 580.159.04,
# CUDA 13.0, Firecracker VM, bench/README.md "CUPTI collector"): a 30k-launch x.add_() loop ran
# 1.53-1.63x its plain time with CUPTI vs 0.92-1.09x with the sampler alone (medians of 5-8
# interleaved pairs), i.e. 4.7-6.3 us per kernel launch; API records (one per launch) add little
# (1.59 vs 1.53 without them).  On an H200 (2026-11-27, bench/cupti_cost.py, in-process): kernel
# records alone +1.4-2.5 us per launch, the collector's full set +2.2-3.9 us, but the storm's loop
# under `inferscope run` +7.9 us (sampler included): 5 us stays a middle value, the range spans both
# hosts' measurements.  Used only for the labelled estimate.
CUPTI_COST_PER_GPU_RECORD_US = 5.0
CUPTI_COST_RANGE_US = (2.2, 7.9)

# --- GPU counters (NVML): temperature, memory, utilisation ----------------------
# Source: seed 002 (monitoring chapter, "Alert Configuration"): warning alerts at GPU utilisation
# > 90 %, memory usage > 80 %, temperature > 85 °C; critical alerts at utilisation < 10 % for
# > 60 s, memory usage > 95 %, temperature > 95 °C.
GPU_TEMP_WARN_C = 85.0
GPU_TEMP_CRITICAL_C = 95.0
GPU_MEMORY_WARN_PCT = 80.0
GPU_MEMORY_CRITICAL_PCT = 95.0
GPU_UTIL_LOW_PCT = 10.0
GPU_UTIL_LOW_CRITICAL_S = 60.0
GPU_UTIL_HIGH_PCT = 90.0
# NVML utilisation (share of the sample period with a kernel running) vs the trace's GPU busy share:
# a gap this wide (percentage points) means the trace misses GPU work (another process, kernels the
# profiler did not record) or the window is too short for NVML's 1/6-1 s sampling period.
# Source: InferScope's own rule (NVML documents the counter as a per-period kernel-active share).
GPU_UTIL_DISAGREE_PTS = 25.0
# The counter needs this many samples in the window to be compared at all.
GPU_UTIL_MIN_SAMPLES = 5

# --- GPU clock throttling (NVML clock-event reasons) ------------------------------
# Source: InferScope's own rule on the deep-profiling plan's "throttling and power caps confound
# kernel analysis": throttle reasons set (power cap, thermal, HW slowdown, power brake, sync boost)
# for this share of the window make kernel times unrepresentative (medium); a third of the window
# makes them the first thing to check (high).  A clock drop without a reason: the SM clock's p5
# below this fraction of its max in the window.
THROTTLE_MEDIUM_PCT = 5.0
THROTTLE_HIGH_PCT = 30.0
CLOCK_DROP_FRACTION = 0.85

# --- slow steps vs counters ------------------------------------------------------
# Source: the "slowest 5 % of steps vs the rest" comparison (InferScope's own rule): at least
# 20 steps (or occurrences of one range name) so that 5 % is one step or more; slow steps must be at
# least 1.5x the rest on average, and a counter must differ by at least 10 % (relative) between the
# two groups to be named.  A correlation, not a cause: the finding is "low".
SLOW_STEPS_MIN_STEPS = 20
SLOW_STEPS_FRACTION = 0.05
SLOW_STEPS_MIN_RATIO = 1.5
SLOW_STEPS_MIN_DIFF_PCT = 10.0

# --- diff (inferscope diff) ----------------------------------------------------
# Source: airspeed velocity (asv compare), which calls a benchmark changed only when the change is
# statistically significant AND larger than a factor (default 1.1, i.e. 10 %).  A difference between
# two runs is a regression/improvement only when it is beyond the 95 % band of the per-step
# (per-range) variance AND at least this large: within-run variance misses run-to-run noise (machine
# load, clocks, caches).  Measured here (a shared, busy 2-core box): two runs of the same zoo program
# (examples/zoo/tokenize_requests.py) one after the other differed by 3-35 % per request; `--min-change`
# overrides it.
DIFF_MIN_CHANGE_PCT = 10.0

# --- sweep (inferscope sweep) ---------------------------------------------------
# Source: the same 10 % as DIFF_MIN_CHANGE_PCT (asv's default factor): throughput "stops scaling" at
# the first parameter value whose throughput gains less than this over the previous value (e.g.
# doubling the batch buys < 10 % more tokens/s); a smaller gain is within the run-to-run noise of one
# run per value.
SWEEP_MIN_THROUGHPUT_GAIN_PCT = 10.0

# --- device peaks (MFU / MBU denominators) --------------------------------------------
# Source: vendor datasheets, one per row below (the URL or document in its comment).  All matrix
# (tensor-core) figures are DENSE: where a datasheet quotes "with sparsity" (2:4 structured), the
# dense figure is half of it and the row says so.  fp32 is the plain (non-tensor) FP32 rate; tf32
# the dense TF32 tensor rate.  mem_gbps: peak DRAM/HBM bandwidth in GB/s (10^9 bytes/s).
# None: the datasheet does not state it (e.g. no bf16 on V100/T4): MFU for that dtype is then null.
# Matching: the first row whose every pattern occurs (case-insensitive) in the device name.
# keys: (name patterns), label, {dtype: dense TFLOP/s}, mem_gbps, source
DEVICE_PEAKS = (
    # NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100, 2023): SXM5 bf16/fp16
    # 1,979 TF with sparsity (989.4 dense), fp8 3,958 sparse (1,979 dense), tf32 989 sparse, fp32 67; 3.35 TB/s.
    (("h100", "pcie"), "NVIDIA H100 PCIe", {"bf16": 756.0, "fp16": 756.0, "fp8": 1513.0, "tf32": 378.0, "fp32": 51.0}, 2000.0,
     "NVIDIA H100 datasheet (PCIe: bf16 1,513 TF with sparsity, 756 dense; 2.0 TB/s)"),
    (("h100", "nvl"), "NVIDIA H100 NVL", {"bf16": 835.5, "fp16": 835.5, "fp8": 1670.5, "tf32": 417.5, "fp32": 60.0}, 3900.0,
     "NVIDIA H100 datasheet (NVL: bf16 1,671 TF with sparsity, 835.5 dense; 3.9 TB/s)"),
    (("h100",), "NVIDIA H100 SXM", {"bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "tf32": 494.7, "fp32": 66.9}, 3350.0,
     "NVIDIA H100 datasheet (SXM5: bf16 1,979 TF with sparsity, 989.4 dense; HBM3 3.35 TB/s)"),
    # NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200): same compute as H100 SXM, HBM3e 4.8 TB/s.
    (("h200",), "NVIDIA H200 SXM", {"bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "tf32": 494.7, "fp32": 66.9}, 4800.0,
     "NVIDIA H200 datasheet (bf16 1,979 TF with sparsity, 989.4 dense; 4.8 TB/s)"),
    # NVIDIA HGX B200 spec (nvidia.com/en-us/data-center/hgx): 8 GPUs bf16 36 PF with sparsity, 2.25 PF dense/GPU;
    # fp8 72 PF sparse, 4.5 dense/GPU; 8 TB/s per GPU.
    (("b200",), "NVIDIA B200", {"bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0, "tf32": 1100.0, "fp32": 75.0}, 8000.0,
     "NVIDIA HGX B200 spec (per GPU: bf16 4.5 PF with sparsity, 2.25 PF dense; 8 TB/s)"),
    # NVIDIA A100 datasheet (nvidia.com/en-us/data-center/a100): bf16/fp16 624 TF with sparsity (312 dense),
    # tf32 156 dense, fp32 19.5; 40GB 1,555 GB/s, 80GB SXM 2,039 GB/s, 80GB PCIe 1,935 GB/s.
    (("a100", "80gb", "pcie"), "NVIDIA A100 80GB PCIe", {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5}, 1935.0,
     "NVIDIA A100 datasheet (bf16 624 TF with sparsity, 312 dense; 1,935 GB/s)"),
    (("a100", "80gb"), "NVIDIA A100 80GB SXM", {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5}, 2039.0,
     "NVIDIA A100 datasheet (bf16 624 TF with sparsity, 312 dense; 2,039 GB/s)"),
    (("a100",), "NVIDIA A100 40GB", {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5}, 1555.0,
     "NVIDIA A100 datasheet (bf16 624 TF with sparsity, 312 dense; 40GB 1,555 GB/s)"),
    # NVIDIA A10 datasheet: bf16 250 TF with sparsity (125 dense), fp32 31.2; 600 GB/s.
    (("a10",), "NVIDIA A10", {"bf16": 125.0, "fp16": 125.0, "tf32": 62.5, "fp32": 31.2}, 600.0,
     "NVIDIA A10 datasheet (bf16 250 TF with sparsity, 125 dense; 600 GB/s)"),
    # NVIDIA L4 datasheet: bf16 242 TF with sparsity (121 dense), fp8 485 sparse, fp32 30.3; 300 GB/s.
    (("l40s",), "NVIDIA L40S", {"bf16": 362.05, "fp16": 362.05, "fp8": 733.0, "tf32": 183.0, "fp32": 91.6}, 864.0,
     "NVIDIA L40S datasheet (bf16 733 TF with sparsity, 362 dense; 864 GB/s)"),
    (("l4",), "NVIDIA L4", {"bf16": 121.0, "fp16": 121.0, "fp8": 242.5, "tf32": 60.0, "fp32": 30.3}, 300.0,
     "NVIDIA L4 datasheet (bf16 242 TF with sparsity, 121 dense; 300 GB/s)"),
    # NVIDIA V100 datasheet: tensor (fp16) 125 TF SXM2 / 112 PCIe, no sparsity, no bf16; fp32 15.7/14; 900 GB/s.
    (("v100", "pcie"), "NVIDIA V100 PCIe", {"bf16": None, "fp16": 112.0, "fp32": 14.0}, 900.0,
     "NVIDIA V100 datasheet (PCIe: fp16 tensor 112 TF dense; 900 GB/s)"),
    (("v100",), "NVIDIA V100 SXM2", {"bf16": None, "fp16": 125.0, "fp32": 15.7}, 900.0,
     "NVIDIA V100 datasheet (SXM2: fp16 tensor 125 TF dense; 900 GB/s)"),
    # NVIDIA T4 datasheet: fp16 tensor 65 TF (dense), fp32 8.1; 320 GB/s; no bf16.
    (("t4",), "NVIDIA T4", {"bf16": None, "fp16": 65.0, "fp32": 8.1}, 320.0,
     "NVIDIA T4 datasheet (fp16 tensor 65 TF dense; 320 GB/s)"),
    # GeForce/RTX: NVIDIA Ampere GA102 and Ada Lovelace whitepapers (fp16 tensor with FP32 accumulate, dense).
    (("3090",), "NVIDIA GeForce RTX 3090", {"bf16": 71.0, "fp16": 71.0, "tf32": 35.6, "fp32": 35.6}, 936.0,
     "NVIDIA Ampere GA102 whitepaper (RTX 3090: fp16/bf16 tensor, FP32 accumulate, 71 TF dense; 936 GB/s)"),
    (("4090",), "NVIDIA GeForce RTX 4090", {"bf16": 165.2, "fp16": 165.2, "fp8": 330.3, "tf32": 82.6, "fp32": 82.6}, 1008.0,
     "NVIDIA Ada Lovelace whitepaper (RTX 4090: fp16/bf16 tensor, FP32 accumulate, 165.2 TF dense; 1,008 GB/s)"),
    (("4060",), "NVIDIA GeForce RTX 4060", {"bf16": None, "fp16": None, "fp32": 15.1}, 272.0,
     "NVIDIA RTX 4060 specifications (fp32 15.1 TF; 272 GB/s; tensor rates not stated per dtype, so null)"),
    (("a5000",), "NVIDIA RTX A5000", {"bf16": 111.1, "fp16": 111.1, "tf32": 55.6, "fp32": 27.8}, 768.0,
     "NVIDIA RTX A5000 datasheet (tensor 222.2 TF with sparsity, 111.1 dense; 768 GB/s)"),
    # AMD Instinct MI300X data sheet (amd.com): bf16/fp16 1,307.4 TF dense (2,614.9 with sparsity), fp8 2,614.9 dense,
    # fp32 163.4 (matrix); 5.3 TB/s.
    (("mi300x",), "AMD Instinct MI300X", {"bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "tf32": 653.7, "fp32": 163.4}, 5300.0,
     "AMD Instinct MI300X data sheet (bf16 1,307.4 TF dense; 5.3 TB/s)"),
    # AMD Instinct MI250 data sheet: bf16/fp16 362.1 TF (dense, no sparsity), fp32 matrix 90.5; 3.2768 TB/s.
    (("mi250",), "AMD Instinct MI250", {"bf16": 362.1, "fp16": 362.1, "fp32": 90.5}, 3276.8,
     "AMD Instinct MI250 data sheet (bf16 362.1 TF dense; 3.28 TB/s)"),
)

# --- LLM efficiency and latency findings ------------------------------------------------------
# Source: InferScope's own rule, anchored on published utilisation: well-tuned large-model runs reach
# 40-60 % MFU (PaLM, Chowdhery et al. 2022: 46 % training MFU) and decode 60-80 % MBU
# (Databricks "LLM inference performance engineering", 2023); below these the hardware has headroom.
LOW_MFU_PCT = 30.0           # MFU below this: low_mfu (low); below LOW_MFU_MEDIUM_PCT: medium
LOW_MFU_MEDIUM_PCT = 10.0
DECODE_LOW_MBU_PCT = 50.0    # decode MBU below this: decode_low_mbu (low); below DECODE_LOW_MBU_MEDIUM_PCT: medium
DECODE_LOW_MBU_MEDIUM_PCT = 20.0
# A p99 at least this many times the p50 is a slow tail worth explaining (latency_tail); percentiles need
# at least LATENCY_TAIL_MIN_SAMPLES samples for a p99 that is not just the maximum of a handful.
LATENCY_TAIL_RATIO = 2.0
LATENCY_TAIL_MIN_SAMPLES = 20
# GEMM kernels below this share of the dense peak while running: the GEMMs are small or skinny.
GEMM_KERNEL_LOW_PCT_OF_PEAK = 50.0

# --- phases of a run: start-up / steady state / teardown (analyze/run_phases.py) ----------------
# Source: InferScope's own rule, relative to the trace; measured on the shared MI250 trace
# (hta_amd_mi250_minitoy): one lazy-loading hipLaunchKernel of 6.5 ms against a median of 6.3 us
# for its name (x1000) in the first step, which lasts 9.29 ms against 0.05 ms for the second.
# A host call this many times the median duration of the calls of its name is first-call work.
STARTUP_CALL_OUTLIER_FACTOR = 100.0
# ... and at least this long (a 100x outlier of a 1 us call is noise, not start-up).
STARTUP_CALL_OUTLIER_MIN_MS = 1.0
# ... and the start-up calls must explain the start-up they mark: those ending by the cut cover at least
# this share of it.  Issue 24: one 1 ms aten::silu (100x its median) in a batch-8 generate() trace cut
# 412 of 895 ms (0.24 % covered); the shared traces' real start-ups are covered 29 % (nsys p4arth:
# cudaMalloc 303 of 1,050 ms) to 98 % (AlexNet A100: aten::to 29.9 of 30.4 s).
STARTUP_CALLS_MIN_SHARE_OF_CUT = 0.10
# ... and at least this many times as densely as such slow calls cover the rest of the window, each lasting more than
# this many times the median of the rest's slow calls: start-up is
# one-off.  Issue 45: beside two CPU hogs the 100x outliers of a generate() trace are its ordinary ops, each
# preempted for a time slice, all through the trace (the rest as densely covered as the cut); chained cuts left
# 10 ms of 266 ms.  Three: the first_step rule's factor (STARTUP_STEP_OUTLIER_FACTOR).
STARTUP_CALLS_BACKGROUND_FACTOR = 3.0
# ... but calls that cover at least this share of what they cut are start-up however densely the rest is covered:
# there the rest's slow calls are start-up too (AlexNet A100: after aten::to's 29.9 s, cudnn autotuning fills 98 %
# of the remaining 13 s, so 3 x the rest's density asked for 295 % and no start-up was found - its 43.4 s whole-trace
# verdict read framework_bound, not init_bound).  Preempted ops never fill 90 % of a lead: each is one time slice
# among Python and other ops, and each must outlast 3 x the rest's slow-call median anyway.
STARTUP_CALLS_DENSE_SHARE = 0.9
# The first step is start-up when it lasts more than this many times the median of the later steps
# (torch.profiler's schedule wait/warmup steps exist for the same reason).
STARTUP_STEP_OUTLIER_FACTOR = 3.0
# ... and at least this share of its excess over that median is one-off work (names no later step runs:
# module loading, autotuning, first launches).  Issue 45: one slow 2.8 ms aten::mul (a recurring op,
# preempted beside CPU hogs) made a generate() trace's first step "start-up" and cut 973 of 1968 ms;
# a step slowed by load runs the same ops as the others, a warm-up step runs others.  Half: most of it.
STARTUP_STEP_ONE_OFF_MIN_SHARE = 0.5
# A steady-state cut must leave at least this many complete steps (when the trace has steps): a median
# of fewer is one or two samples, and issue 45's MI250 trace kept 1 step (0.29 of 9.58 ms, GPU idle 100 %).
# Three is also the fewest for which the later steps' median is not just their mean or one of them.
STEADY_MIN_STEPS = 3
# ... and its unattributed ('other') share at most this many points above the whole trace's: a cut that
# leaves the idle gaps between steps and removes the work is less informative than no cut (issue 45:
# AlexNet A100 kept 94 ms of 43.4 s at 60.3 % 'other' against 0.2 %, MI250 77.0 % against 9.7 %, GP100's
# 2.2 ms aten::empty_strided cut 32.5 % against 25.3 %).  Five points: issue 45's "a few points".
STEADY_MAX_OTHER_RISE_PCT = 5.0
# A repeated inferscope.scope() name whose first call lasts more than this many times the median of
# its later calls is a warm-up (cache fills, lazy init, first-call compilation): the scope window starts
# after it and the call is reported separately.  Same factor and reasoning as the first_step rule;
# at least SCOPE_WARMUP_MIN_LATER later calls make the median a typical duration, not one sample.
SCOPE_WARMUP_FACTOR = 3.0
SCOPE_WARMUP_MIN_LATER = STEADY_MIN_STEPS   # issue 45: was 2; the same floor as a steady-state cut
# Source: InferScope's own rule: a start-up or teardown part shorter than this share of the trace is
# left in the window (cutting it would move the numbers without changing the answer).
PHASE_CUT_MIN_PCT = 1.0

# --- child processes (live runs; analyze/children.py) ----------------------------------------
# Source: InferScope's own rule; measured on examples/zoo/mp_preprocess.py (2 spawn workers doing a
# pure-Python resize): the main process waited 3.8 s of the steady window while the workers used
# 2.4 CPU-s in it.  When the children's CPU time inside the window is at least this fraction of the
# main process's waiting time, the waiting is explained by work in the children: the verdict is
# child_process_bound, not waiting_bound.
CHILD_WAIT_EXPLAINED_FRACTION = 0.5

# --- cross-rank comparison (multi-input analyze) ------------------------------
# Source: presentation choice, not a measured threshold.  How many categories / kernels / ops / functions the "what the straggler did differently" tables list,
# largest |straggler - median of the other ranks| first.  Five keeps the section one screen per job; the
# per-rank report folders hold the full tables.
CROSS_RANK_TOP_ITEMS = 5

# Straggler finding (cross_rank.py, finding straggler_rank): the straggler's lead over the other ranks' median
# step time, in % of that median.  Source: the real A100 rank 3 (hta_trace_diff_control, 6 ProfilerSteps,
# 75.5-81.1 ms): leaving any one step out moves its median by 0.14 % (the A100-80GB rank 0, 5 steps: 0.15 %),
# so a lead under 1 % (~7x that) is within what the choice of steps alone can make.  At 10 % every rank of
# the job loses a tenth of each step waiting for this one: severity high.
CROSS_RANK_STRAGGLER_MIN_LEAD_PCT = 1.0
CROSS_RANK_STRAGGLER_HIGH_PCT = 10.0

# Communication wait (cross_rank_comm.py).  A rank "arrived last" at a collective when its start offset is more
# than this after the next latest rank's: ~ one kernel launch (5-10 us on the H100/A100 traces of ../shared),
# below which the order of arrival is launch jitter, not a slower rank.
CROSS_RANK_LAST_ARRIVAL_US = 10.0
# Collective instances kept per rank profile (4 numbers each, ~30 bytes in JSON): 100 steps of an 80-layer
# tensor-parallel model with 2 all-reduces per layer is 16k.  Beyond it later steps are left out whole.
CROSS_RANK_MAX_COLLECTIVES = 20_000

# --- host contention (analyze/contention.py; findings gil_contention, page_fault_storm, cpu_run_queue) ---
# Source: InferScope's own rules, measured on the planted zoo (examples/zoo, 2-vCPU VM, load 1.1-1.4).
# GIL: the critical thread off-CPU while another thread of its process runs Python is (at most) a
# wait for the GIL.  zoo_gil.py (3 spinning Python threads beside the main loop): 30-57 % of the
# window (3 runs); zoo_lock_wait.py (a lock held by a sleeping thread): 0 %.  A tenth of the window
# is worth a finding (the floor of host_waiting, which it refines), a quarter is medium.
GIL_WAIT_LOW_PCT = 10.0
GIL_WAIT_MEDIUM_PCT = 25.0
# The GIL explains the critical thread's waiting (verdict gil_bound instead of waiting_bound;
# host_waiting points at gil_contention) when the overlap is at least this fraction of the waiting:
# the same rule as CHILD_WAIT_EXPLAINED_FRACTION for child processes.
GIL_WAIT_EXPLAINED_FRACTION = 0.5
# Live runs match the critical thread's waiting with the other threads' Python per bin of this many sampler
# tick intervals, not instant by instant: the sampler lays a thread's on- and off-CPU parts of one interval
# out as one block each, so four threads handing the GIL over every 5 ms inside a 30 ms interval show side
# by side.  Exact overlap on zoo_gil.py: 31-100 ms of 190-350 ms of GIL wait (3 runs, 35 Hz); two
# intervals absorb a block placed at either end of its interval.  At most GIL_OVERLAP_MAX_BINS bins.
GIL_OVERLAP_BIN_TICKS = 2.0
# a live trace whose main-thread timer signals (collect/sigframes.py) came late this often gets a limitation
# line: those intervals' functions come from the sampler's tick, biased toward where the thread released the GIL.
# Measured 2026-11-27 (zoo_mixed_culprit beside one CPU hog): 2-4 % late at 1000 iterations, 5-12 % at 300
# (clean_rows 55-67 % for 63 % true at 1000); 36-56 % late beside two hogs (33-38 % for 62 %)
SIGNAL_LATE_WARN_FRACTION = 0.25
GIL_OVERLAP_MAX_BINS = 1_000_000
# Page faults: a counter interval (20 Hz system samples) is a fault storm at this many faults/s.
# Cost per fault measured on the VM (numpy writes to fresh 48 MiB arrays, THP on): 12-13 us of
# kernel time each, so 1,000 faults/s is >= 1 % of a core.  The finding is judged on the measured
# kernel-mode CPU (PAGE_FAULT_KERNEL_PCT), since a fault's cost varies ~10x with page size.
PAGE_FAULT_STORM_PER_S = 1000.0
# Kernel-mode CPU of the process (getrusage ru_stime, % of one core over the window) from which
# faults at a storm rate are worth a finding (low; medium at twice it).  zoo_pagefault.py: 38-62 %
# at 29-39k faults/s; the pure-Python and lock-wait programs: 0-2 %.
PAGE_FAULT_KERNEL_PCT = 10.0
# Kernel-mode CPU time of a sampled thread (collect/kernel_time.py, used by the sampler's perf
# resolver).  perf_event IP samples are user space only (perf_event_paranoid 2): an interval of a
# thread's on-CPU time spent in the kernel gets no sample, and used to keep the thread's previous
# verdict - zoo_pagefault.py's page-touching phase read 23-41 % user code after a Python phase
# (truth: numpy's memory work, cpu_compute), zoo_disk_io.py's kernel CPU in O_DSYNC writes/fsync/
# O_DIRECT reads 17 % user code (truth: waiting).  Per thread and tick the sampler reads its user-mode
# page faults from a perf counting event (exact, ~2 us), and /proc/self/task/<tid>/stat (stime:
# tick-sampled at CONFIG_HZ and printed in 10 ms units, so only used accumulated, as a carry; ~40-85 us
# with the tick's cold caches) only after a wait in an I/O call and when one getrusage per tick says the
# process's fault count or kernel time moved (without perf: the stat file's faults, on every such tick).
# The rules, for an on-CPU interval that perf left undecided (no user-space sample in a classified
# library or the interpreter):
#  - page faults in the interval (>= KERNEL_FAULTS_MIN): the CPU went to the kernel's memory work
#    on behalf of the code that faulted.  Native code (the thread had released the GIL - a numpy/
#    torch loop; or the last user-space samples were in numeric libraries) -> cpu_compute; the
#    interpreter (it held the GIL) -> the stack's class.
#  - no faults, and the thread was blocked for part of the interval (off-CPU: a system call that
#    waits): the kernel time of the interval (stime carry, at most its on-CPU part) is the I/O
#    call's own CPU -> waiting, like the wait itself; the rest follows the usual rule.
KERNEL_FAULTS_MIN = 1
# ... in an interval where the thread also blocked in an I/O call (or in the one before; blocking.py's
# probe), a page or two faulted by the call's buffer is not a fault storm (~12 us each): the I/O rule holds below this
# many (zoo_disk_io: one fault turned a 3 ms interval of O_DIRECT reads into user code).  Also when it blocked
# and perf took no user-space sample in the interval (the probe's tick missed a ~90 us read: one fault with the GIL
# free turned 1.5-2 ms of the reads' kernel CPU into cpu_compute, 2-8 % of the window in 8 of 16 runs, 2026-11-27;
# not for any blocked interval: a Rust tokenizer descheduled mid-batch then read 4 points less tokenization).
KERNEL_FAULTS_BLOCKED_MIN = 8
# Kernel time of an interval with faults = its faults x the thread's cost per fault, learnt from its
# stime over its faults (ThreadStat.fault_cost) - the fault count is exact per tick, stime is not -
# starting from this prior (ns per fault, weighing as KERNEL_FAULT_PRIOR_N faults): 12-13 us measured
# on the VM for numpy writes to fresh arrays (see PAGE_FAULT_STORM_PER_S).
#  The I/O rule also counts the on-CPU time the interval's user-space IP samples leave uncovered (each
#  sample stands for the perf period) as kernel time - all of it when the thread's blocking call was
#  an I/O call (read/write/fsync/..., blocking.py's probe), else scaled by its recent kernel share
#  (stime / CPU time, sums decaying by KERNEL_SHARE_DECAY per read; stime is too coarse in a short
#  run: zoo_disk_io's 130 ms window read 78 % waiting in 1 run of 4 with the share alone): an O_CREAT openat or a write's
#  submission is all of a short on-CPU part, before stime reports it, while a thread that wakes from
#  a lock to run Python (kernel share ~0) keeps its Python time.
KERNEL_SHARE_DECAY = 0.9
#  Where the probe named no I/O call (it read the thread 'running': on CPU in the call, runnable, or back
#  from it and waiting for the GIL the tick holds - /proc/<tid>/syscall names a call only while the
#  thread sleeps in it), the kernel share also comes from the perf IP samples themselves: each user-space
#  sample stands for the perf period of user time, so 1 - samples x period / CPU time is the kernel part
#  (sums over about the thread's last KERNEL_PERF_SHARE_CPU_NS of CPU time - each interval's CPU time t
#  scales them by 1 - t / that - with KERNEL_PERF_SHARE_PRIOR samples of user time as a prior that pulls a
#  thread with little CPU towards 0).  zoo_disk_io: 20 ticks in a row probed 'running' between
#  its 90 us O_DIRECT reads, the stat file (read only after I/O labels) gave no share, and the reads'
#  kernel CPU read as user code: 58-86 % waiting vs 99 % in 3 of 6 runs (issue 25).
KERNEL_PERF_SHARE_CPU_NS = 100_000_000
KERNEL_PERF_SHARE_PRIOR = 0.25
KERNEL_FAULT_NS_PRIOR = 12_000
#  The on-CPU time an interval's IP samples leave uncovered counts as kernel time of its faults up to this
#  many times their learnt cost (faults x fault_cost): the cost varies ~10x with the page size (4 KiB vs
#  transparent huge pages), and the uncovered time is a noisy estimate - with one perf sample per ~5 ms tick
#  interval it is 0-2 ms whether or not the kernel ran, so one fault turned 1-2 ms of a pure-Python loop into
#  cpu_compute (zoo py_between_ops_1.7ms: compute 12.5-63.7 % for 15 % true over runs).
KERNEL_FAULT_COST_SPREAD = 10
KERNEL_FAULT_PRIOR_N = 200
# The stime carry (kernel time reported by /proc but not yet placed in an interval) is capped: its
# 10 ms units arrive late, never more than ~2 units after the time they measure.
KERNEL_CARRY_MAX_NS = 20_000_000
# The main thread runnable but not running (/proc/self/schedstat run-queue delay), % of the window:
# a tenth lost to CPU contention is a finding (low), a quarter medium.  zoo_omp_oversub.py (8 torch
# threads on 2 cores): 36-47 %; zoo_pagefault.py (1 thread): 0.3-3 %.
RUNQ_WAIT_LOW_PCT = 10.0
RUNQ_WAIT_MEDIUM_PCT = 25.0
# Blocking calls (analyze/blocking.py; findings blocking_io, lock_wait): the critical thread's off-CPU
# time charged to the system call it was blocked in (collect/blocking.py), % of the window.  A
# twentieth of the window in file I/O or in a lock wait is named (low; it refines host_waiting, whose
# floor is a tenth, so the cause is named before the category alone would be), a fifth is medium.
# Measured on the planted zoo (2-vCPU VM, ext4 on virtio, load 3.4-4.7 from other jobs): zoo_disk_io.py
# (ZOO_ITERS=12: O_DSYNC 4 KiB writes, fsync, O_DIRECT 64 KiB reads) 6-24 % of the window named as
# file I/O (a lower bound: the call is seen at ticks, 19-57 % of its off-CPU time; 35 % on an idle
# host), 0-2 % futex; zoo_lock_wait.py (a lock held across a 40 ms sleep) 45-57 % lock;
# zoo_gil.py (3 spinning Python threads: GIL waits, untimed glibc-mutex or deadline-in-switch-interval
# futexes) 0-0.7 % lock, 0 % io.
BLOCKING_IO_LOW_PCT = 5.0
BLOCKING_IO_MEDIUM_PCT = 20.0
LOCK_WAIT_LOW_PCT = 5.0
LOCK_WAIT_MEDIUM_PCT = 20.0

# --- Nsight Compute kernel limits (analyze/kernel_limits.py; finding kernel_limiter) ---
# Source: Nsight Compute's own SpeedOfLight rule (ncu 2025.3, rule "SOLBottleneck"): "Achieved compute
# throughput and/or memory bandwidth below 60.0% of peak typically indicate latency issues"; above it
# the unit with the higher % of peak is the bottleneck.  We use the same 60 % so InferScope's limiter
# agrees with the rule text ncu prints beside it.
KERNEL_BOUND_PCT = 60.0
# Tensor pipe busy below 1 % of peak in a compute-bound kernel = "Tensor Cores unused" (the demo's
# fp32 SIMT sgemm shows 0.0 %, splitK reduce 0.002 %; a bf16 cuBLAS GEMM on H100 runs them at tens of %).
KERNEL_TENSOR_UNUSED_PCT = 1.0
# Achieved occupancy below a quarter of the SM's warp slots leaves too few warps to hide memory latency
# (CUDA C++ Best Practices Guide, "Occupancy": low occupancy limits latency hiding; ncu's
# AchievedOccupancy rule compares achieved with theoretical).  Used only to word a latency-bound limiter.
KERNEL_LOW_OCCUPANCY_PCT = 25.0
# Fewer than one full wave of blocks (launch__waves_per_multiprocessor < 1): some SMs idle for the whole
# kernel; ncu's LaunchConfiguration rule fires on the same condition (grid smaller than the SM count).
KERNEL_MIN_WAVES = 1.0
# kernel_limiter finding: the profiled kernel with the largest share of GPU time is named when it is not
# compute-bound and holds at least this share (a tenth of GPU time is worth a look; InferScope's own
# rule, the same floor as the kernels table's "hot" kernels in the demo).
KERNEL_LIMITER_MIN_SHARE_PCT = 10.0
# Warp stall reasons listed per kernel (analyze/kernel_stalls.py): those holding at least this share of the warp
# cycles between issued instructions; ncu's CPIStall rules fire from 30 %, a twentieth still names a real second cause.
KERNEL_STALL_MIN_SHARE_PCT = 5.0
# Measured (Nsight Compute) vs shape-based efficiency of the same kernel (kernel_deep_dive.measured_vs_estimated):
# the two "disagree" when one is at least this many times the other.  Below 2x the gap is explained by how the
# two are taken: ncu locks clocks to base by default (H100 SXM base 1,590 vs boost 1,980 MHz: 1.25x in duration)
# and flushes caches between replay passes (more DRAM bytes for small kernels), while the shape-based bytes are a
# lower bound (operands once).  At 2x or more the model is wrong for that kernel (L2-resident operands, re-reads,
# split-K or padded tiles, a kernel linked to the wrong op, or a profiled launch of another shape): said per kernel.
KERNEL_MEASURED_VS_EST_RATIO = 2.0
# ... and only when one of the two is at least this % of peak: between two figures under 5 % the kernel is
# latency- or launch-bound (KERNEL_BOUND_PCT rules) and their ratio says nothing about the lever.
KERNEL_MEASURED_VS_EST_MIN_PCT = 5.0

# --- thread oversubscription and under-use (analyze/diagnosis_cpu.py; issue 24) ----------------------------
# A child process counts as a busy worker competing for the process's CPUs when its CPU time inside the window
# (/proc, analyze/children.py) is at least this fraction of the window: it needs a core a quarter of the time
# or more.  Source: InferScope's own rule; DataLoader / Pool workers that keep up with the main process run
# 40-90 % of the time (examples/zoo/dl_preprocess.py, zoo_dl_oversub.py), idle ones (a queue full) near 0.
BUSY_WORKER_CPU_FRACTION = 0.25
# Under-use: torch runs fewer intra-op threads than the CPUs the process may use while CPU compute is the
# majority of the window (the same 50 % that makes a category "dominant" elsewhere: VERDICT_MIN_SHARE_PCT is
# the 35 % floor, half the window is a clear majority) and at least half a core stood idle on average
# (the process cores' mean utilisation, all processes; the sampler and other jobs included, so a busy host
# does not get the finding).  Source: InferScope's own rule; measured on zoo_underuse.py (set_num_threads(1)
# on 2 idle cores: ~0.9 core idle; on the same box beside a CPU hog: < 0.2 idle, no finding).
CPU_UNDERUSE_MIN_COMPUTE_PCT = 50.0
CPU_UNDERUSE_MIN_IDLE_CORES = 0.5

# --- Python garbage-collection pauses (collect/gcpauses.py, analyze/gc_pauses.py; finding python_gc) ---------
# Source: InferScope's own rules; CPython's collector stops every Python thread of the process (it holds the
# GIL) for the whole collection.  Gen-0/1 collections of a typical inference loop take 10-300 us and happen
# hundreds to thousands of times a second; gen-2 (full) collections walk every tracked object: 15-99 ms each
# in the main thread of examples/zoo/zoo_hf_tokenizer.py (tokenizers + transformers loaded), which is what a
# request's latency feels.  The collector records each collection of at least GC_PAUSE_RECORD_MIN_NS as a
# span (1 ms: a tenth of a typical 10 ms decode step, so a pause that moves a step's time is never left out,
# while the thousands of sub-millisecond young collections per second cost only two counter updates each)
# and at most GC_PAUSE_MAX_RECORDS spans per session (~200 bytes each in the ring buffer: 2 MB; the rest are
# counted, not recorded).
GC_PAUSE_RECORD_MIN_NS = 1_000_000
GC_PAUSE_MAX_RECORDS = 10_000
# Finding python_gc: the recorded pauses fill at least GC_PAUSE_LOW_PCT of the window (2 %: comparable to the
# sampler's own cost, and 20 ms per second of serving is a p99 effect on every request), or the longest single
# pause is at least GC_PAUSE_LONGEST_MS (50 ms: the length of a user-visible stall in a streaming response,
# several decode steps; the 54-99 ms gen-2 pauses of zoo_hf_tokenizer.py reach it).  Medium from
# GC_PAUSE_MEDIUM_PCT (5 %) or a pause of GC_PAUSE_LONGEST_MEDIUM_MS (100 ms, a tenth of a second).
GC_PAUSE_LOW_PCT = 2.0
GC_PAUSE_MEDIUM_PCT = 5.0
GC_PAUSE_LONGEST_MS = 50.0
GC_PAUSE_LONGEST_MEDIUM_MS = 100.0

# --- recorded facts of the live sampler (collect/facts.py, collect/replay.py) ------------------------------------
# Source: InferScope's own bound.  With facts kept (`inferscope run --facts`) the sampler keeps every pending tick
# and perf IP sample it decided from: ~1,000 samples and ~200 ticks a second per busy thread, ~60-70 bytes each held
# in memory until the trace is written (~25 MB per busy thread-minute: about as much again on disk as msgpack).
# FACTS_MAX_ITEMS (2,000,000 items: ~130 MB, ~30 minutes of one busy thread or a few minutes of a busy thread
# pool) bounds it; past it recording stops and the file says so (a replay needs the whole log).
FACTS_MAX_ITEMS = 2_000_000

# --- phase maps (issue 44) ------------------------------------------------------------------
# Source: InferScope's own bound.
# --phase-map: at most PHASE_MAP_MAX_PATTERNS patterns of at most PHASE_MAP_MAX_PATTERN_CHARS characters (issue 44).
# Each pattern is one regex search per distinct name of the trace (every string, for the NVTX -> kernel map), so
# the patterns multiply the trace's size: a 1 MB map of 100k one-letter patterns over 1M names never ends.  A map
# names a few phases with a few patterns each (prefill / decode / sampling: 3-10); 128 leaves room for any real one.
PHASE_MAP_MAX_PATTERNS = 128
PHASE_MAP_MAX_PATTERN_CHARS = 256

# --- live sampler's rules (collect/sampler_tick.py, collect/layout.py, collect/rules.py) --------------------------
# Source: InferScope's own rules, each measured on the planted zoo (examples/zoo, bench/README.md); the rules that use
# them are replayed on recorded facts (collect/replay.py), so a change is judged on the goldens first
# (tests/test_facts_golden.py, scripts/facts_goldens.py).
# A tick that got the GIL within GIL_WAIT_NS of its target found it free (nobody held it: the threads were in
# native code or blocked), the "GIL free" fact of the no-perf heuristic and of the fault rule.
GIL_WAIT_NS = 250_000
# A thread is on CPU in an interval when its CPU clock (+ run-queue delay) moved by at least ONCPU_MIN_BUSY_FRACTION
# of it (sampler_tick._measure); below, the tick is an off-CPU one.
ONCPU_MIN_BUSY_FRACTION = 0.25
# An interval whose thread CPU time (+ run-queue delay) covers less than 1 - SPLIT_MIN_FRACTION of it
# and more than SPLIT_MIN_FRACTION is split into an off-CPU ('waiting') part and an on-CPU part of
# the measured lengths, instead of all-or-nothing at 25 % (issue 16 item 3): a 2.6 ms model step
# between 30 ms waits on Rayon threads read as 5-12 ms cpu_compute (a whole 5 ms tick interval or
# a delayed one), 2x the truth.  Below 10 % the part is noise (GIL hand-overs to the sampler).
SPLIT_MIN_FRACTION = 0.1
# A tick interval longer than LONG_INTERVAL_TICKS nominal intervals (the sampler starved: 3 Python threads
# spinning beside the main thread kept it from the GIL 25-260 ms at a time) with off-CPU or run-queue parts
# is laid out as pieces of about one nominal interval, each with the interval's fractions, instead of one
# block per part: where in the interval the thread ran is unknown, and one block of 22 ms CPU at the start
# of a 263 ms interval put it before a window that began inside the interval (zoo_gil: user code 8.9 % vs
# 28.7 % true; 50 % vs 18 % when the block fell inside).  At most MAX_PIECES pieces.  Not an interval with
# page faults or kernel time: their rules judge an interval's counts (kernel_time.kernel_class).
LONG_INTERVAL_TICKS = 3
MAX_PIECES = 64
# In a long interval the smallest off-CPU / run-queue part kept is SPLIT_MIN_NS when that is less than
# SPLIT_MIN_FRACTION of it: both are measured (thread CPU clock, schedstat), and the noise the fraction
# guards against - the GIL hand-over to the sampler - is ~0.1-0.5 ms per tick.
SPLIT_MIN_NS = 1_000_000
# The thread's last perf-decided interval counts as native code (its kernel time is the native code's, not an I/O
# call's; a fault in it is native memory work) when at least NATIVE_RECENT_MIN_SHARE of its samples were in numeric
# libraries (or in a native tokenizer): the majority of its recent user-space time (collect/rules.py io_kernel_time,
# fault_kernel_part).
NATIVE_RECENT_MIN_SHARE = 0.5

# --- what-if savings (analyze/whatif.py: expected_saving_ms on each actionable finding) -----------
# Source: the pinned-memory section of NVIDIA's CUDA C++ Best Practices Guide (pageable copies are staged
# by the driver through a pinned bounce buffer, an extra host copy; pinned copies skip it and run as DMA).
# Used only when the trace holds no pinned copy of its own to measure the pinned bandwidth from: pinned
# copies then count as this many times faster on the wire than the trace's pageable ones.  An assumption
# (not a measurement of this machine); the range's low end takes no bandwidth gain at all (ratio 1).
WHATIF_PINNED_OVER_PAGEABLE_BW_RATIO = 2.0
# Launch storms (replace model): a fused kernel or a CUDA-graph replay still costs some host time per
# former launch; the low end of the range keeps this fraction of the measured per-launch cost.  An
# assumption bounding the range (graph replay and fused launches are not free), not a measurement.
WHATIF_LAUNCH_RESIDUAL_FRACTION = 0.25
# Scale model (CPU preprocessing in a worker pool): workers assumed when the trace does not say how many
# cores the process may use (Kineto / nsys inputs): 4, the smallest core count of a current inference
# host; live runs use their measured idle cores (counters.process_cores), at most WHATIF_SCALE_MAX_WORKERS.
WHATIF_SCALE_DEFAULT_WORKERS = 4
WHATIF_SCALE_MAX_WORKERS = 8
# CPU remove models (analyze/whatif_cpu.py: blocking_io, lock_wait, page_fault_storm without sampled storm
# ticks): the fix (read once, prefetch in the background, a shorter critical section) still leaves up to this
# fraction of the removed wait; it bounds only the range's low end.  An assumption, not a measurement.
WHATIF_WAIT_RESIDUAL_FRACTION = 0.5
# Scale-up models (cpu_underuse: more torch intra-op threads on idle cores; cpu_preprocessing: worker processes):
# the range's low end credits each added thread or worker with this fraction of one's work.  Threads: element-wise
# and small ops, bound by memory bandwidth and each op's fork/join, scale sub-linearly (large GEMMs nearly
# linearly); workers pay dispatch and result transfer (zoo_preprocess_pool's fork Pool of 2 on 2 CPUs ran the
# resizes 1.5-1.65x faster, self-timed, 2026-11-29).  An assumption bounding the range, not a measurement;
# bench/bench_whatif.py checks the expected values on zoo_underuse.py and zoo_preprocess_pool.py.
WHATIF_THREAD_SCALING_LOW_EFFICIENCY = 0.5
# Batching model (cpu_preprocessing when tokenization dominates, live runs with perf IP samples): tokenization whose
# Python around the native encode (analyze/tokenizer_split.py) is at least this share is called per item, and the
# suggestion and its prediction become "batch the calls" (replace: the per-call Python goes).  Measured under
# `inferscope run` on zoo_hf_tokenizer.py (240 short texts, HF fast tokenizer, RAYON_NUM_THREADS=1): 35-46 % per text,
# 6-21 % batched (one run of six read 21 %: the share is sampled); without the profiler 37 % per text (9.1 ms a pass
# vs 5.7 ms of native encode, self-timed) and 9 % batched (6.4 vs 5.8 ms).
TOKENIZER_PER_CALL_PYTHON_PCT = 25.0
# The combined estimate (what_if.combined_saving_ms) adds the top this-many predicted findings, with
# double-counted time removed: a user fixes the first few suggestions, not all of them.
WHATIF_COMBINED_TOP_N = 3

# --- Serving health (issue 46) ---------------------------------------------------------------------
# Source: seed 002 (chapter 16, "Alert Configuration" and "Troubleshooting Guide"); the queue-wait levels are
# InferScope's own rule.
# Seed 002's critical alert "error rates > 1 %": finding request_errors above this share of requests.
ERROR_RATE_ALERT_PCT = 1.0
# Seed 002's warning alert "cache hit rate < 60 %": finding low_cache_hit_rate below it.
CACHE_HIT_RATE_MIN_PCT = 60.0
# Exception class names that are an out-of-memory failure (torch.OutOfMemoryError and torch.cuda.OutOfMemoryError
# share the name; MemoryError is Python's host OOM): finding oom.
OOM_ERROR_TYPES = ("OutOfMemoryError", "MemoryError")
# A GPU memory peak at or above this % of the device total leaves no room for one more allocation (issue 46: within
# 2 % of total): a range failing with another exception class then is a suspected OOM (older torch raises RuntimeError).
OOM_NEAR_TOTAL_PCT = 98.0
# Seed 002's "Unexpected OOM: overcommitted GPU memory" seen before it happens: device memory (NVML used, else torch's
# reserved pool) at or above this % of the device total with no exception recorded is finding oom (at capacity). The
# last 5 % (4 GiB of 80 GiB) is what the CUDA context, library workspaces and allocator fragmentation hold, so the
# next batch / longer sequence / KV-cache growth fails; the level of GPU_MEMORY_CRITICAL_PCT.
OOM_CAPACITY_PCT = 95.0
# Requests at or above this percentile of request latency are "the tail" whose queue wait latency_tail reports.
QUEUE_TAIL_PCTL = 90.0
# The tail requests' queue wait (start to first work, or behind earlier requests) at least this % of their latency:
# latency_tail names queueing / batching / head-of-line blocking as the cause.
QUEUE_WAIT_TAIL_MIN_PCT = 25.0

# --- Clock sync (issue 46 item 5) ------------------------------------------------------------------
# Source: seed 001 ("Failure Modes & Recovery": clock sync error > 5 %): a live run's GPU-source clock alignment
# (CUPTI or torch.profiler onto perf_counter_ns) is warned about when its error exceeds this share of the
# collection's duration - a misalignment that large moves GPU work across a visible part of the timeline -
# and exceeds the fixed sync_error_margin_us too (the floor: short runs, where 5 % is a few us).
CLOCK_SYNC_ERROR_MAX_FRACTION = 0.05

# --- crash journal (collect/journal.py) ----------------------------------------
# Events per crash-journal record: each flush and each rewrite is written as records of at most this many events
# (~55 B each marshalled: ~55 KB), never as one bytes object of the whole flush.  A rewrite of a full 100 MB buffer
# (524,288 events) marshalled it into one ~26 MB bytes object plus a concatenated copy; once glibc freed such an
# mmap'd block it raised its mmap threshold to that size, so the next rewrites' tens of MB came from the heap and
# the profiled program's RSS rose at each rewrite after the buffer was full (issue 44 item 3, the soak).
# Source: InferScope's own measurement (bench/soak.py; malloc statistics of the profiled process, bench/README.md).
JOURNAL_RECORD_EVENTS = 1024
