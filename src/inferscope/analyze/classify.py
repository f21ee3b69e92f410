"""Span masks from the name rules in ``inferscope/classes.py``, computed once per distinct
string (never per event) and cached per trace.
"""
from __future__ import annotations

import re

import numpy as np

from ..trace.kinds import CopyKind, SpanKind
from ..trace.model import Trace, codes_in

# re-exported for the analyses: every name rule lives in classes.py
from ..classes import (BLOCKING_SYNC_API_RE, COMM_KERNEL_RE, GRAPH_LAUNCH_API_RE, LAUNCH_API_RE,  # noqa: F401
                       PREPROCESS_NAME_RE, STREAM_WAIT_API_RE, SYNC_LIKE_NAME_RE, TOKENIZE_NAME_RE, api_base_name)
from ..trace.kinds import FlowKind, MemKind


def _memo(trace: Trace, key: str, fn) -> np.ndarray:
    """Per-trace cache of span masks (a Trace is immutable once built), kept as packed bits (1 bit a
    span, not 8: the cache lives as long as the trace).  Returns a new array, so callers may modify
    the result in place (unpacking reads 8x less than a copy)."""
    cache = trace.__dict__.setdefault("_mask_cache", {})
    n = len(trace.spans)
    v = cache.get(key)
    if v is None or v[1] != n:
        m = fn()
        cache[key] = (np.packbits(m), n)
        return m
    return np.unpackbits(v[0], count=n).view(bool)


_TWINS: dict = {}
_UNSAFE_ESCAPES = set("xu0123456789")


def lower_twin(pattern: re.Pattern) -> re.Pattern | None:
    """For a case-insensitive pattern written in lower case: the same pattern without re.I, which
    finds the same matches in ``s.lower()`` for every ASCII ``s`` (several times faster on long
    names).  None when that cannot be guaranteed (upper-case letters or escapes such as \\D, \\x41,
    inline flag groups, non-ASCII text in the pattern)."""
    tw = _TWINS.get(pattern, False)
    if tw is not False:
        return tw
    tw = None
    src = pattern.pattern
    if isinstance(src, str) and pattern.flags & re.I:
        body = src[4:] if src.startswith("(?i)") else src
        plain = body
        for g in ("(?<!", "(?<=", "(?:", "(?=", "(?!"):
            plain = plain.replace(g, "")
        if (body.isascii() and "(?" not in plain and re.search(r"[A-Z]", body) is None
                and not _UNSAFE_ESCAPES.intersection(re.findall(r"\\(.)", body))):
            tw = re.compile(body, pattern.flags & ~re.I)
    _TWINS[pattern] = tw
    return tw


def name_mask(trace: Trace, pattern: re.Pattern, ids: np.ndarray | None = None) -> np.ndarray:
    """Boolean per string id: does the pattern match that string?  ``ids``: only the names these
    ids refer to are searched (the mask is False elsewhere; see ``StringTable.ids_matching``)."""
    tw = lower_twin(pattern)
    if tw is None:
        return trace.strings.ids_matching(lambda s: pattern.search(s) is not None, ids)
    return trace.strings.ids_matching(
        lambda s: (tw.search(s.lower()) if s.isascii() else pattern.search(s)) is not None, ids)


def spans_matching(trace: Trace, pattern: re.Pattern, kinds=None, base_mask: np.ndarray | None = None) -> np.ndarray:
    """Boolean mask over spans whose name matches ``pattern`` (and kind in kinds)."""
    s = trace.spans
    m = np.ones(len(s), dtype=bool) if base_mask is None else base_mask.copy()
    if kinds is not None:
        m &= codes_in(s.kind, [int(k) for k in kinds])
    if not m.any():
        return m
    nm = name_mask(trace, pattern, s.name[m])      # only the names of the candidate spans are searched
    nm = np.append(nm, False)      # id -1 (no name) reads the last entry: False
    res = nm[s.name]
    res &= m
    return res


def host_api_mask(trace: Trace) -> np.ndarray:
    return _memo(trace, "host_api", lambda: codes_in(trace.spans.kind, [SpanKind.RUNTIME, SpanKind.DRIVER]))


def sync_api_mask(trace: Trace) -> np.ndarray:
    """Host calls that block until the GPU gets somewhere: explicit syncs, blocking copies,
    and *Async copies whose host side is pageable (the driver stages them through a pinned
    buffer and the call returns only when the copy is done)."""
    return _memo(trace, "sync_api", lambda: spans_matching(trace, BLOCKING_SYNC_API_RE, base_mask=host_api_mask(trace))
                 | pageable_copy_launch_mask(trace))


def host_side_mem(trace: Trace, idx: np.ndarray) -> np.ndarray:
    """Memory kind of the host side of copies ``idx`` (H2D: source, D2H: destination; else UNKNOWN)."""
    s = trace.spans
    ck = s.copy_kind[idx]
    return np.where(ck == CopyKind.H2D, s.src_mem[idx], np.where(ck == CopyKind.D2H, s.dst_mem[idx], MemKind.UNKNOWN))


def pageable_copy_mask(trace: Trace) -> np.ndarray:
    """MEMCPY spans whose host side is pageable (the driver stages them through a pinned buffer)."""

    def build():
        s = trace.spans
        out = np.zeros(len(s), dtype=bool)
        cp = np.flatnonzero(s.kind == SpanKind.MEMCPY)
        out[cp[host_side_mem(trace, cp) == MemKind.PAGEABLE]] = True
        return out
    return _memo(trace, "pageable_copy", build)


def pageable_copy_launch_mask(trace: Trace) -> np.ndarray:
    """Host calls that launched a pageable copy (via LAUNCH flows)."""
    s = trace.spans
    out = np.zeros(len(s), dtype=bool)
    f = trace.flows
    if not len(f):
        return out
    lm = f.kind == FlowKind.LAUNCH
    dst, src = f.dst[lm], f.src[lm]
    out[src[pageable_copy_mask(trace)[dst]]] = True
    return out


def stream_wait_mask(trace: Trace) -> np.ndarray:
    return spans_matching(trace, STREAM_WAIT_API_RE, base_mask=host_api_mask(trace))


def launch_api_mask(trace: Trace) -> np.ndarray:
    return _memo(trace, "launch_api", lambda: spans_matching(trace, LAUNCH_API_RE, base_mask=host_api_mask(trace)))


def gpu_work_mask(trace: Trace) -> np.ndarray:
    return _memo(trace, "gpu_work", lambda: codes_in(trace.spans.kind, [SpanKind.KERNEL, SpanKind.MEMCPY,
                                                                       SpanKind.MEMSET, SpanKind.GRAPH_LAUNCH]))


def kernel_mask(trace: Trace) -> np.ndarray:
    """Every GPU kernel and CUDA-graph execution (compute and communication)."""
    return _memo(trace, "kernel", lambda: codes_in(trace.spans.kind, [SpanKind.KERNEL, SpanKind.GRAPH_LAUNCH]))


def comm_kernel_mask(trace: Trace) -> np.ndarray:
    """GPU kernels that are communication (NCCL/RCCL collectives, send/recv, custom all-reduce)."""
    return _memo(trace, "comm_kernel", lambda: spans_matching(trace, COMM_KERNEL_RE, kinds=(SpanKind.KERNEL,)))


def compute_kernel_mask(trace: Trace) -> np.ndarray:
    """GPU kernels and CUDA-graph executions that are not communication."""
    return _memo(trace, "compute_kernel", lambda: kernel_mask(trace) & ~comm_kernel_mask(trace))


def sync_like_name_mask(trace: Trace) -> np.ndarray:
    """Host API calls whose name is sync-like by seed 004's rule (a name view, not blocked time)."""
    return spans_matching(trace, SYNC_LIKE_NAME_RE, base_mask=host_api_mask(trace))
