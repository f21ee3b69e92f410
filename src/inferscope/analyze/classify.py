"""Name-based classification, computed once per distinct string (never per event).

Every rule here is a documented regular expression over a name as the source recorded it.
"""
from __future__ import annotations

import re

import numpy as np

from ..trace.kinds import CopyKind, SpanKind
from ..trace.model import Trace

# Host API calls that block the calling thread until the GPU reaches a point.
SYNC_API_RE = re.compile(
    r"^(cuda|hip)(DeviceSynchronize|StreamSynchronize|EventSynchronize|ThreadSynchronize|StreamQuery_blocking)"
    r"|^cu(Ctx|Stream|Event)Synchronize"
    r"|^(cuda|hip)Memcpy(_v\d+)?$|^(cuda|hip)Memcpy(2D|3D|ToSymbol|FromSymbol|Peer)(_v\d+)?$"
    r"|^cuMemcpy(HtoD|DtoH|DtoD|)(_v\d+)?(_v\d+)?$"
    r"|^(cuda|hip)Memset(_v\d+)?$"
)
# Calls that make a stream wait (GPU-side dependency, host not blocked) — counted, not blocked time.
STREAM_WAIT_RE = re.compile(r"^(cuda|hip)StreamWaitEvent|^cuStreamWaitEvent")
LAUNCH_API_RE = re.compile(
    r"^(cuda|hip)(LaunchKernel|LaunchCooperativeKernel|ExtLaunchKernel|LaunchKernelExC|GraphLaunch|ModuleLaunchKernel|ExtModuleLaunchKernel)"
    r"|^cu(LaunchKernel|LaunchKernelEx|LaunchCooperativeKernel|GraphLaunch)"
    r"|^hipLaunchKernel|^hipGraphLaunch"
)
GRAPH_LAUNCH_RE = re.compile(r"GraphLaunch")
ASYNC_COPY_API_RE = re.compile(r"^(cuda|hip)Memcpy\w*Async|^cuMemcpy\w*Async")

# User ranges and Python functions that mean tokenization / data preparation.
TOKENIZE_RE = re.compile(r"tokeni[sz]|tokenizer|sentencepiece|tiktoken|detokeni|\bencode_batch|apply_chat_template", re.I)
PREPROCESS_RE = re.compile(
    r"pre[-_ ]?process|preproc|data[-_ ]?load|collate|resize|decode_image|image_decode|imdecode|augment|"
    r"\bPIL\b|PIL/|cv2|torchvision/transforms|feature_extract|image_processing|normali[sz]e_image|prepare_inputs",
    re.I)
STEP_RE = re.compile(r"^ProfilerStep#\d+$")


def _memo(trace: Trace, key: str, fn) -> np.ndarray:
    """Per-trace cache of span masks (a Trace is immutable once built).  Returns a copy, so
    callers may modify the result in place."""
    cache = trace.__dict__.setdefault("_mask_cache", {})
    m = cache.get(key)
    if m is None or len(m) != len(trace.spans):
        m = cache[key] = fn()
    return m.copy()


def name_mask(trace: Trace, pattern: re.Pattern) -> np.ndarray:
    """Boolean per string id: does the pattern match that string?"""
    return trace.strings.ids_matching(lambda s: pattern.search(s) is not None)


def spans_matching(trace: Trace, pattern: re.Pattern, kinds=None, base_mask: np.ndarray | None = None) -> np.ndarray:
    """Boolean mask over spans whose name matches ``pattern`` (and kind in kinds)."""
    s = trace.spans
    m = np.ones(len(s), dtype=bool) if base_mask is None else base_mask.copy()
    if kinds is not None:
        m &= np.isin(s.kind, [int(k) for k in kinds])
    if not m.any():
        return m
    nm = name_mask(trace, pattern)
    ids = s.name
    ok = ids >= 0
    res = np.zeros(len(s), dtype=bool)
    res[ok] = nm[ids[ok]]
    return m & res


def host_api_mask(trace: Trace) -> np.ndarray:
    return _memo(trace, "host_api", lambda: np.isin(trace.spans.kind, [SpanKind.RUNTIME, SpanKind.DRIVER]))


def sync_api_mask(trace: Trace) -> np.ndarray:
    """Host calls that block until the GPU gets somewhere: explicit syncs, blocking copies,
    and *Async copies whose host side is pageable (the driver stages them through a pinned
    buffer and the call returns only when the copy is done)."""
    return _memo(trace, "sync_api", lambda: spans_matching(trace, SYNC_API_RE, base_mask=host_api_mask(trace))
                 | pageable_copy_launch_mask(trace))


def pageable_copy_launch_mask(trace: Trace) -> np.ndarray:
    from ..trace.kinds import FlowKind, MemKind
    s = trace.spans
    out = np.zeros(len(s), dtype=bool)
    f = trace.flows
    if not len(f):
        return out
    dst = f.dst[f.kind == FlowKind.LAUNCH]
    src = f.src[f.kind == FlowKind.LAUNCH]
    ck = s.copy_kind[dst]
    host_mem = np.where(ck == CopyKind.H2D, s.src_mem[dst], np.where(ck == CopyKind.D2H, s.dst_mem[dst], 0))
    pg = (s.kind[dst] == SpanKind.MEMCPY) & (host_mem == MemKind.PAGEABLE)
    out[src[pg]] = True
    return out


def stream_wait_mask(trace: Trace) -> np.ndarray:
    return spans_matching(trace, STREAM_WAIT_RE, base_mask=host_api_mask(trace))


def launch_api_mask(trace: Trace) -> np.ndarray:
    return _memo(trace, "launch_api", lambda: spans_matching(trace, LAUNCH_API_RE, base_mask=host_api_mask(trace)))


def gpu_work_mask(trace: Trace) -> np.ndarray:
    return _memo(trace, "gpu_work", lambda: np.isin(trace.spans.kind, [SpanKind.KERNEL, SpanKind.MEMCPY,
                                                                       SpanKind.MEMSET, SpanKind.GRAPH_LAUNCH]))


def api_base_name(name: str) -> str:
    """cudaStreamSynchronize_v3020 -> cudaStreamSynchronize."""
    return re.sub(r"_v\d+$", "", name)
