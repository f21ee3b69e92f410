"""Which language the profiled program's host code is in, from evidence in the trace (issue 47).

Advice must fit the program: "vectorise loops with numpy" is wrong for a C/CUDA binary, and nsys samples in
libcuda are not "framework Python".  Rule (first that applies):
  python   Python frames recorded (PYTHON spans: Kineto with_stack, the live sampler's Python frames), a live
           InferScope run (its sampler walks Python frames), nsys CPU samples with a Python interpreter frame
           (libpython / python executable) in a call chain, or a process named python*;
  native   nsys CPU samples with call chains and no interpreter frame in any of them, and no process named python*;
  unknown  nothing tells (e.g. a Kineto trace without Python frames: PyTorch from C++ or from Python alike).
"""
from __future__ import annotations

import re

from ..trace.kinds import SpanKind, TrackKind
from ..trace.model import Trace

_PY_PROCESS = re.compile(r"(^|[/\s(])python[\d.]*\b", re.I)


def program_language(trace: Trace) -> dict:
    """{"language": "python" | "native" | "unknown", "evidence": one sentence}."""
    m = trace.meta
    if bool((trace.spans.kind == SpanKind.PYTHON).any()):
        return {"language": "python", "evidence": "Python frames recorded"}
    if m.get("source_format") == "inferscope":
        return {"language": "python", "evidence": "live InferScope run (Python sampler)"}
    hs = m.get("host_sampling") if isinstance(m.get("host_sampling"), dict) else {}
    if hs.get("interpreter_samples"):
        return {"language": "python", "evidence": f"{hs['interpreter_samples']:,} CPU samples in a Python interpreter frame"}
    names = trace.strings.as_list()
    cpu = trace.tracks.kind == TrackKind.CPU_THREAD
    procs = sorted({names[n] for n in trace.tracks.name[cpu].tolist() if n >= 0})
    py = next((p for p in procs if _PY_PROCESS.search(p)), None)
    if py is not None:
        return {"language": "python", "evidence": f"a thread of a Python process ({py[:80]})"}
    if hs.get("chained_samples"):
        return {"language": "native", "evidence": f"{hs['chained_samples']:,} CPU samples with call chains, none in a "
                "Python interpreter, and no Python process"}
    return {"language": "unknown", "evidence": "no Python frames, interpreter samples or native call chains recorded"}


# Nsight Systems host samples: their 'framework' class is the native code of CUDA / profiler / interpreter / system
# libraries (ingest/nsys_host.py), never Python frames - named by what it is (issue 47)
NSYS_SAMPLE_CAT = "nsys_cpu_sample"
NATIVE_PART_LABELS = {"framework_python": "CUDA, driver, profiler and system libraries (sampled native code)",
                      "user_code": "user code (the program's own native code)"}
NSYS_PYTHON_PART_LABELS = {"framework_python": "framework: interpreter, CUDA and system libraries (sampled native code)"}


def part_labels(trace: Trace, base: dict[str, str]) -> dict[str, str]:
    """The breakdown's part labels (``base``: breakdown.PART_LABELS) for this trace: the sampled-framework and
    user-code parts named by the program's language and by what its samples are."""
    lang = program_language(trace)["language"]
    if lang == "native":
        return {**base, **NATIVE_PART_LABELS}
    cid = trace.strings.get(NSYS_SAMPLE_CAT)
    if cid >= 0 and not (trace.spans.kind == SpanKind.PYTHON).any() and bool((trace.spans.cat == cid).any()):
        return {**base, **NSYS_PYTHON_PART_LABELS}
    return base
