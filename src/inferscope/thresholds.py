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

# --- phases of a run: start-up / steady state / teardown (analyze/run_phases.py) ----------------
# Source: InferScope's own rule, relative to the trace; measured on the shared MI250 trace
# (hta_amd_mi250_minitoy): one lazy-loading hipLaunchKernel of 6.5 ms against a median of 6.3 us
# for its name (x1000) in the first step, which lasts 9.29 ms against 0.05 ms for the second.
# A host call this many times the median duration of the calls of its name is first-call work.
STARTUP_CALL_OUTLIER_FACTOR = 100.0
# ... and at least this long (a 100x outlier of a 1 us call is noise, not start-up).
STARTUP_CALL_OUTLIER_MIN_MS = 1.0
# The first step is start-up when it lasts more than this many times the median of the later steps
# (torch.profiler's schedule wait/warmup steps exist for the same reason).
STARTUP_STEP_OUTLIER_FACTOR = 3.0
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
