"""Efficiency (achieved FLOPs, MFU/MBU), the LLM serving section and the model description."""

from typing import Optional

import msgspec

from .base import Num, _S


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
    prompt: Num      # prompt tokens (x batch) of the requests in the window / window seconds (no requests: serving steps)
    generated: Num   # generated tokens (x batch) / window seconds (token_count_basis says where the count comes from)


class TokenCounts(_S):
    prompt: Optional[int] = None     # prompt tokens in the window (x batch; serving steps: context sq)
    generated: Optional[int] = None  # generated tokens in the window (x batch; serving steps: decode sequences)


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
    achieved_tflops: Num         # flops / (steps x step_time_ms) / 1e12
    mfu_pct: Num                 # achieved_tflops / peak_tflops * 100
    mbu_pct: Num                 # decode: bytes_per_step / step_time_ms / peak bandwidth (model_config.decode_mbu)
    peak_tflops: Num
    peak_gbps: Num
    peak_source: Optional[str]
    breakdown: list[StageCategory] = []   # what the stage's time goes to (the breakdown rule, inside its steps)
    bytes_per_step: Num = None           # decode: weights (embedding rows not read left out) + KV cache read per step
    step_time_ms: Num = None             # mean step time MFU and MBU divide by: per step max(wall_ms, gpu_span_ms)
    mbu_lower_bound: Optional[bool] = None   # decode: true when bytes_per_step leaves a part out (see mbu_basis)
    mbu_basis: Optional[str] = None      # decode: the MBU formula with its numbers, and what a lower bound leaves out


class ErrorCount(_S):
    type: str                    # exception class name (never the message)
    count: int


class ScopeError(_S):
    scope: str                   # the range's name (an inferscope.scope() or hf.generate)
    type: str
    count: int


class Oom(_S):
    """Ranges an out-of-memory exception left (thresholds.OOM_ERROR_TYPES, outermost per thread)."""
    count: int = 0
    types: list[str] = []
    first_ms: Num = None         # the first one's start, from the window start
    other_errors: int = 0        # ranges left by another exception class (a suspected OOM near full GPU memory)


class CacheStats(_S):
    """Prefix/KV-cache hits where the engine or program exposes them (analyze/serving.py); null: not instrumented."""
    hits: Optional[int] = None
    queries: Optional[int] = None
    hit_rate_pct: Num = None
    basis: Optional[str] = None  # where the figure comes from: live marks/scopes, or which counters
    note: Optional[str] = None   # why there is no figure


class QueueStats(_S):
    """Queue wait per request: start to first work, else the overlap with requests started before it."""
    wait_ms: Optional[LatencyStats] = None
    from_first_work: int = 0     # requests whose wait is start-to-first-work
    from_overlap: int = 0        # requests whose wait is the overlap with earlier requests (an upper bound)
    max_concurrent: int = 0      # most requests open at one request's start, itself included
    tail_requests: int = 0       # requests at or above the QUEUE_TAIL_PCTL percentile of latency
    tail_wait_ms_mean: Num = None
    tail_wait_share_pct: Num = None   # their summed wait / their summed latency x 100


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
    tokens: TokenCounts = msgspec.field(default_factory=TokenCounts)  # the counts tokens_per_s divides by the window
    token_count_basis: Optional[str] = None  # where the counts come from: request ranges, or serving step names (derived)
    errors: int = 0                          # requests an exception left (class names in error_types)
    error_rate_pct: Num = None               # errors / requests x 100 (null: no requests)
    error_types: list[ErrorCount] = []
    scope_errors: list[ScopeError] = []      # every scope / generate() range an exception left, by name and class
    oom: Oom = msgspec.field(default_factory=Oom)
    cache_hit_rate_pct: Num = None           # = cache.hit_rate_pct; null: not instrumented (cache.note says so)
    cache: CacheStats = msgspec.field(default_factory=CacheStats)
    queue: QueueStats = msgspec.field(default_factory=QueueStats)


class FlopsPerToken(_S):
    prefill: Num                 # FLOPs per token at the mean prompt length
    decode: Num                  # FLOPs per token at the mean decode context
    prefill_context: Num
    decode_context: Num


class Model(_S):
    """Static description of the model a live generate() used (exact counts from its parameter tensors), or the
    --model-config file's (``source`` "config")."""
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
    source: Optional[str] = None        # "config": from --model-config (2 x params per token); null: a live hook
