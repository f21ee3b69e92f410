"""The analysis result as types: msgspec Structs, one per report.json section.

``analyze/pipeline.py`` converts what the analyses computed into ``Report`` (strictly: a key the
model does not declare is an error, so the documented schema cannot drift from what is emitted),
and the renderers write its JSON form.  The JSON Schema of report.json is generated from these
types (``inferscope schema``, ``docs/report.schema.json``).  Units are in the names: ``_ms``
milliseconds (float), ``_ns`` integer nanoseconds, ``_us`` microseconds, ``_pct`` percent (0-100).
``*_busy_ms`` are unions over streams (wall time, at most the window); ``*_sum_ms`` and
``*_stream_ms`` add up per-stream or per-call time (can exceed the window).

Importing this package needs msgspec only (no numpy).  No ``from __future__ import annotations``
in its modules: msgspec would then evaluate every annotation string on the first conversion (~10 ms per
command, issue 26); evaluated at class creation they come from the byte code.

Modules, each importing only the ones before it: ``base`` (``_S``, ``Num``, ``SCHEMA_VERSION``; tool,
source, window, breakdown), ``gpu``, ``host``, ``counters``, ``contention``, ``llm``, ``deep_dive``,
``report`` (``Report``, ``from_dict``, ``json_schema``).  Every name is re-exported here.  ``views`` (plain
dataclasses, not encoded: the timeline strip and every idle gap, ``report.views``) is imported by its users.
"""

from .base import (
    SCHEMA_VERSION, Num, _S, Tool, Device, ProcessGroup, Distributed, Source, WindowInfo, Part, Category,
)
from .gpu import (
    DeviceBusy, Gpu, StreamGaps, GapBucket, DeviceGap, IdleGaps, KernelClass, TopKernel, Kernels,
    CopyKindRow, ApiCount, Pageable, SmallCopies, Memset, Copies, SyncRow, OpCount, TinyD2HReads, Syncs,
    NvtxAttribution, NvtxPhase, Nvtx, PidKernels, PidNvtx, PerPid, LaunchLatency, MemoryOps, NsysExtras,
)
from .host import (
    Step, RangeRow, PhaseSource, PhaseRow, Phases, OneOffCall, OneOffCalls, PhaseItem, RunPart, NotCut, RunPhases,
    CulpritFunction, CulpritOp, CulpritApi, Culprits, ThreadRow, Threads, ChildProcess, Children,
    SamplingThread, CpuSampling, CollectionCost, TokenizerSplit,
)
from .counters import (
    CounterSeries, GpuMemory, ProcessCores, ThrottleReason, Throttle, NumaGpu, Numa, SlowStepMetric,
    SlowSteps, CountersSection,
)
from .contention import (
    GilThread, GilFunction, GilWait, FaultFunction, FaultStorms, BlockingCall, BlockingOther,
    BlockingSyscall, Blocking, Contention, GcGeneration, GcThread, GcPause, GcRun, GcPauses,
)
from .llm import (
    EfficiencyOp, Efficiency, LatencyStats, TokensPerS, TokenCounts, LlmStep, StageCategory, LlmStage, Llm,
    FlopsPerToken, Model, ErrorCount, ScopeError, Oom, CacheStats, QueueStats,
)
from .deep_dive import (
    DeepDiveDevice, DeepDiveKernel, StallReason, MveFigure, MeasuredVsEstimated, LaunchRange, KernelDeepDive,
)
from .report import (
    Finding, WhatIf, Verdict, Table, About, Report, from_dict, json_schema,
)

__all__ = [
    "SCHEMA_VERSION", "Num", "_S", "Tool", "Device", "ProcessGroup", "Distributed", "Source", "WindowInfo",
    "Part", "Category", "DeviceBusy", "Gpu", "StreamGaps", "GapBucket", "DeviceGap", "IdleGaps",
    "KernelClass", "TopKernel", "Kernels", "CopyKindRow", "ApiCount", "Pageable", "SmallCopies", "Memset",
    "Copies", "SyncRow", "OpCount", "TinyD2HReads", "Syncs", "NvtxAttribution", "NvtxPhase", "Nvtx",
    "PidKernels", "PidNvtx", "PerPid", "LaunchLatency", "MemoryOps", "NsysExtras", "Step", "RangeRow",
    "PhaseSource", "PhaseRow", "Phases", "OneOffCall", "OneOffCalls", "PhaseItem", "RunPart", "NotCut", "RunPhases",
    "CulpritFunction", "CulpritOp", "CulpritApi", "Culprits", "ThreadRow", "Threads", "ChildProcess",
    "Children", "SamplingThread", "CpuSampling", "CollectionCost", "TokenizerSplit", "CounterSeries", "GpuMemory",
    "ProcessCores", "ThrottleReason", "Throttle", "NumaGpu", "Numa", "SlowStepMetric", "SlowSteps",
    "CountersSection", "GilThread", "GilFunction", "GilWait", "FaultFunction", "FaultStorms",
    "BlockingCall", "BlockingOther", "BlockingSyscall", "Blocking", "Contention", "GcGeneration",
    "GcThread", "GcPause", "GcRun", "GcPauses", "EfficiencyOp", "Efficiency", "LatencyStats", "TokensPerS", "TokenCounts",
    "LlmStep", "StageCategory", "LlmStage", "Llm", "FlopsPerToken", "Model", "ErrorCount", "ScopeError", "Oom",
    "CacheStats", "QueueStats", "DeepDiveDevice",
    "DeepDiveKernel", "StallReason", "MveFigure", "MeasuredVsEstimated", "LaunchRange", "KernelDeepDive", "Finding",
    "WhatIf",
    "Verdict", "Table", "About", "Report", "from_dict", "json_schema",
]
