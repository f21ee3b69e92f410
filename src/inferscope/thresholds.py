"""Every heuristic threshold InferScope uses, in one place, with its rationale.

Analyses import from here; reports quote them so a reader can see the rule.
"""

# --- launch storms (seed 004, nsys-llm-explainer heuristics.py) -------------
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
TINY_KERNEL_US = 10.0

# --- dominant kernel (seed 004) ----------------------------------------------
DOMINANT_KERNEL_SHARE_PCT = 50.0

# --- GPU idle ----------------------------------------------------------------
# Seed 002 alerts below 10% utilisation; we flag idle above 30% of the window as
# worth a look (medium) and above 60% as the first thing to fix (high).
GPU_IDLE_MEDIUM_PCT = 30.0
GPU_IDLE_HIGH_PCT = 60.0

# --- copies ------------------------------------------------------------------
# Copies under 64 KiB are latency-bound (PCIe latency ~ several us dominates).
SMALL_COPY_BYTES = 64 * 1024
# More than this many small copies, or small copies taking more than this share
# of the window, is a small-copy storm.
SMALL_COPY_STORM_COUNT = 100
SMALL_COPY_STORM_PCT = 5.0
# Pageable copies: flag when they take more than this share of the window.
PAGEABLE_COPY_MIN_PCT = 1.0
PAGEABLE_COPY_MIN_COUNT = 1
# A D2H read of at most this many bytes followed by a sync is the `.item()` pattern.
TINY_D2H_BYTES = 16

# --- synchronisation ---------------------------------------------------------
SYNC_STALL_MEDIUM_PCT = 5.0   # host blocked in sync calls, share of window
SYNC_STALL_HIGH_PCT = 20.0

# --- CPU preprocessing -------------------------------------------------------
CPU_PREPROCESSING_MEDIUM_PCT = 10.0
CPU_PREPROCESSING_HIGH_PCT = 30.0

# --- host launch bound -------------------------------------------------------
# GPU mostly idle between kernels and the host busy launching: launch API time
# is at least this share of total kernel time.
# Uses the typical (median) launch call x launches, so one slow first launch (lazy module
# loading) does not make a run launch-bound.
HOST_LAUNCH_API_VS_KERNEL_RATIO = 0.5
HOST_LAUNCH_MIN_KERNELS = 10

# --- idle-gap attribution (HTA definitions) ----------------------------------
# A gap shorter than this after a kernel is counted as launch latency, not host wait.
IDLE_GAP_MIN_NS = 1_000

# --- one-off host calls (initialisation inside the window) --------------------
# A single non-sync host API call / op longer than this share of the window and this
# absolute time is start-up work (CUDA context creation, lazy module loading,
# cuDNN/cuBLAS handle creation, allocator growth), not steady-state inference.
ONE_OFF_CALL_MIN_PCT = 10.0
ONE_OFF_CALL_MIN_MS = 10.0
ONE_OFF_HIGH_PCT = 30.0   # their union above this share decides the verdict (init_bound)

# --- GPU-bound details ---------------------------------------------------------
# Elementwise + copy kernels above this share of kernel time: fusion is the lever.
ELEMENTWISE_COPY_SHARE_PCT = 30.0

# --- verdict -----------------------------------------------------------------
# A category must hold at least this share of e2e time to decide the verdict;
# below it, and without a finding at "high", the verdict is "balanced".
VERDICT_MIN_SHARE_PCT = 35.0

# --- NVTX attribution coverage (seed 004 default) ---------------------------
NVTX_COVERAGE_WARN_THRESHOLD = 0.7
