"""Host sections: steps, ranges and phases, one-off calls, run phases, culprits, threads, child
processes, CPU sampling and the collection cost."""

from typing import Optional

import msgspec

from .base import Num, _S


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


class NotCut(_S):
    """A start-up or teardown part a rule found but the window keeps (analyze/steady.py): why."""
    part: str
    ms: float
    rule: str
    reason: str


class RunPhases(_S):
    """Start-up / steady state / teardown of the whole trace (analyze/run_phases.py).  The default
    window is the steady state when a part was cut (applied); scope() ranges and --window win.
    steady_steps: complete steps in the steady state (None: the trace has no steps); justification: why
    the cut is safe (empty without a cut); not_cut: parts found but kept, with the reason."""
    startup: Optional[RunPart]
    teardown: Optional[RunPart]
    steady_start_ns: int
    steady_end_ns: int
    steady_ms: float
    trace_ms: float
    cut: bool
    applied: bool = False
    steady_steps: Optional[int] = None
    justification: str = ""
    not_cut: list[NotCut] = []


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
    shapes: str = ""           # most frequent recorded input shapes with call counts (analyze/op_shapes.py)


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


class WaitedFor(_S):
    """Another thread's sampled on-CPU work while the critical thread(s) waited (analyze/waited_for.py)."""
    thread: str
    pid: int
    ms: float                      # its on-CPU time overlapping the critical thread's waiting
    pct_of_waiting: float          # of the critical thread's waiting time in the window
    cls: str = msgspec.field(name="class")   # its dominant sampled class then
    class_ms: float = 0.0
    function: Optional[str] = None           # its dominant function then ('module imports': all imports)
    function_ms: Num = None


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
    # "waiting for thread X doing Y": other threads' on-CPU work during the critical thread's waiting (evidence
    # beside the breakdown's waiting category, not in its totals)
    waited_for: Optional[list[WaitedFor]] = None


class ChildProcess(_S):
    pid: int
    comm: str
    cpu_s: float
    cpu_s_in_window: float      # estimate (cumulative counter observed every ~0.5 s)
    first_seen_ms: Num          # relative to the window start (None: a followed child /proc never saw)
    last_seen_ms: Num
    alive_at_end: bool
    followed: bool = False      # sampled into the trace (its own pid's threads)
    startup_ms: Num = None      # followed: its start-up (first event to its imports' end, analyze/children.child_startups)


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
    waiting_on_child_startup_ms: Num = None   # of the critical thread's waiting: while a followed child was starting
    unlisted_cpu_s_in_window: Num = None   # of cpu_s_in_window: children no /proc listing named (started and reaped
    #                                        between two, or a child's CPU after its last); None: not recorded (older traces)


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


class TokenizerSplit(_S):
    """Live runs with perf IP sampling: tokenization split into the native encode and the Python around it
    (analyze/tokenizer_split.py)."""
    tokenization_ms: float         # breakdown[cpu_preprocessing].parts[tokenization].ms
    native_ms: float               # perf samples in a native tokenizer library (window delta of its counter)
    python_ms: float               # the rest: the wrapper's per-call Python and the loop around it
    python_pct: float              # python_ms in % of tokenization_ms
    basis: str


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
