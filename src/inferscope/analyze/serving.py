"""Serving health in the LLM section (issue 46, seed 002's metrics): errors, cache hit rate, OOM, queue wait.

Errors: a request (analyze/llm_requests.py) whose range an exception left (live: ``"error":"<class name>"`` in its
detail, collect/api.py and collect/llmhook.py; the class name only, never the message); error_rate_pct = errored
requests / requests x 100.  ``scope_errors``: every InferScope scope or generate() range in the window an exception
left, by scope name and class (nested ranges the same exception left each count).
OOM: ranges left by an exception whose class name is one of thresholds.OOM_ERROR_TYPES (torch.OutOfMemoryError,
torch.cuda.OutOfMemoryError, MemoryError), outermost per thread; ``suspected``: ranges left by another exception
while a GPU's memory peaked within thresholds.OOM_NEAR_TOTAL_PCT of its total (older torch raises RuntimeError).
Cache hit rate, from the first source present: (1) live counts: ``inferscope.mark("cache_hit")`` /
``mark("cache_miss")`` instants and ``scope(..., cache_hit=True/False)`` ranges in the window; (2) cumulative
counters named like vLLM's ``vllm:gpu_prefix_cache_hits`` / ``..._queries`` (the window's increase, summed over
devices: hits / queries); (3) a hit-rate gauge (``..prefix_cache_hit_rate``: mean of the window's samples, a
fraction when every sample is <= 1 and the name has no ``_pct``).  None of them: null and a note, never a figure.
Queue wait per request: first work (its first nested request range, generate() call or model step) - its start;
without nested work, the time it overlapped requests that started before it (of requests that started together,
the one that ended first counts as started first; an upper bound: requests a batch serves together overlap too).  Concurrency: requests open at each request's start, itself included.
"""
from __future__ import annotations

import json
import re

import numpy as np

from .. import thresholds as T
from ..trace.kinds import SpanKind, TrackKind
from ..trace.model import Trace
from .select import inside, starts_inside
from .window import Window

_CACHE_CTR = re.compile(r"(?:^|[:._/])(?:gpu_|cpu_)?(?:prefix_|kv_)?cache_(hits|queries|hit_rate)(?:_total|_pct)?$", re.I)
SCOPE_CATS = ("inferscope.scope", "inferscope.llm")


def serving(trace: Trace, window: Window, reqs: list[dict], stats) -> tuple[dict, list[str]]:
    """(fields of the llm section, warnings); ``stats``: llm.stats (ms samples -> LatencyStats).  ``_waits_ms``:
    each request's queue wait, in ``reqs`` order (for the llm_requests table; not part of the section)."""
    warnings: list[str] = []
    n = len(reqs)
    errs = [r["error"] for r in reqs if r.get("error")]
    types, counts = np.unique(np.array(errs, dtype=object).astype(str), return_counts=True) if errs else ([], [])
    out = {"errors": len(errs), "error_rate_pct": 100.0 * len(errs) / n if n else None,
           "error_types": sorted(({"type": str(t), "count": int(c)} for t, c in zip(types, counts)),
                                 key=lambda r: (-r["count"], r["type"]))}
    scope_rows, oom = _scope_errors(trace, window)
    out["scope_errors"] = scope_rows
    out["oom"] = oom
    cache = _cache(trace, window, reqs)
    out["cache"] = cache
    out["cache_hit_rate_pct"] = cache["hit_rate_pct"]
    out["queue"], waits = _queue(reqs, stats, warnings)
    out["_waits_ms"] = waits
    return out, warnings


def has_evidence(sec: dict) -> bool:
    """Serving evidence without any request or step: errored scopes or a cache source."""
    return bool(sec["scope_errors"]) or sec["cache"]["basis"] is not None


def _scope_errors(trace: Trace, window: Window) -> tuple[list[dict], dict]:
    s = trace.spans
    strs = trace.strings
    cats = [i for i in (strs.get(c) for c in SCOPE_CATS) if i >= 0]
    idx = np.flatnonzero((s.kind == SpanKind.ANNOTATION) & (s.detail >= 0) & np.isin(s.cat, cats)
                         & inside(s.start_ns, s.end_ns, window)) if cats else np.zeros(0, np.int64)
    uniq = np.unique(s.detail[idx])
    err_of = {}
    for d in uniq.tolist():
        txt = strs[int(d)]
        if '"error"' in txt:
            try:
                v = json.loads(txt).get("error")
            except (ValueError, AttributeError):
                continue
            if isinstance(v, str):
                err_of[d] = v[:80]
    rows: dict[tuple[str, str], int] = {}
    oom_spans = []
    if err_of:
        idx = idx[np.isin(s.detail[idx], np.fromiter(err_of, dtype=np.int64, count=len(err_of)))]
        for i in idx.tolist():
            k = (strs[int(s.name[i])][:120], err_of[int(s.detail[i])])
            rows[k] = rows.get(k, 0) + 1
            if k[1] in T.OOM_ERROR_TYPES:
                oom_spans.append((int(s.track[i]), int(s.start_ns[i]), int(s.end_ns[i]), k[1]))
    outer = [a for a in oom_spans if not any(b is not a and b[0] == a[0] and b[1] <= a[1] and a[2] <= b[2]
                                             and (b[1], -b[2]) < (a[1], -a[2]) for b in oom_spans)]
    susp = sum(c for (_, t), c in rows.items() if t not in T.OOM_ERROR_TYPES)
    oom = {"count": len(outer), "types": sorted({a[3] for a in outer}),
           "first_ms": (min(a[1] for a in outer) - window.start_ns) / 1e6 if outer else None,
           "other_errors": susp}
    table = [{"scope": k[0], "type": k[1], "count": c} for k, c in sorted(rows.items(), key=lambda kv: (-kv[1], kv[0]))]
    return table, oom


def _cache(trace: Trace, window: Window, reqs: list[dict]) -> dict:
    out = {"hits": None, "queries": None, "hit_rate_pct": None, "basis": None, "note": None}
    s = trace.spans
    strs = trace.strings
    hit_id, miss_id = strs.get("cache_hit"), strs.get("cache_miss")
    inw = starts_inside(s.start_ns, window, include_end=True)   # closed: a mark at end_ns counts
    mk = inw & (s.kind == SpanKind.MARK)
    hits = int(np.count_nonzero(mk & (s.name == hit_id))) if hit_id >= 0 else 0
    miss = int(np.count_nonzero(mk & (s.name == miss_id))) if miss_id >= 0 else 0
    by_scope = _scope_cache(trace, window)
    if hits + miss + by_scope[0] + by_scope[1] > 0:
        h, q = hits + by_scope[0], hits + miss + by_scope[0] + by_scope[1]
        out.update(hits=h, queries=q, hit_rate_pct=100.0 * h / q,
                   basis="live: inferscope.mark('cache_hit'/'cache_miss') instants and scope(..., cache_hit=) ranges")
        return out
    c = trace.counters
    tk = trace.tracks
    sums: dict[str, float] = {}
    rates: list[float] = []
    names: list[str] = []
    for t in np.unique(c.track).tolist():
        if int(tk.kind[t]) != int(TrackKind.COUNTER) or tk.name[t] < 0:
            continue
        nm = strs[int(tk.name[t])]
        m = _CACHE_CTR.search(nm)
        if m is None:
            continue
        sel = (c.track == t) & starts_inside(c.ts_ns, window, include_end=True)
        ts, v = c.ts_ns[sel], c.value[sel]
        o = np.argsort(ts, kind="stable")
        v = v[o][np.isfinite(v[o])]
        kind = m.group(1).lower()
        if kind == "hit_rate":
            if len(v):
                frac = (not nm.lower().endswith("_pct")) and float(v.max()) <= 1.0
                rates.append(float(v.mean()) * (100.0 if frac else 1.0))
                names.append(nm)
        elif len(v) >= 2:
            d = np.diff(v)
            sums[kind] = sums.get(kind, 0.0) + float(d[d > 0].sum())       # a counter reset is not a negative count
            names.append(nm)
    if sums.get("queries", 0) > 0 and "hits" in sums:
        out.update(hits=int(round(sums["hits"])), queries=int(round(sums["queries"])),
                   hit_rate_pct=100.0 * sums["hits"] / sums["queries"],
                   basis=f"counters {', '.join(sorted(set(names)))[:200]}: the window's increase of hits / of queries")
    elif rates:
        out.update(hit_rate_pct=float(np.mean(rates)),
                   basis=f"counters {', '.join(sorted(set(names)))[:200]}: mean of the window's hit-rate samples")
    else:
        out["note"] = ("not instrumented: no inferscope.mark('cache_hit'/'cache_miss'), scope(..., cache_hit=) range or "
                       "prefix-cache counter (vllm:gpu_prefix_cache_hits/_queries, ..prefix_cache_hit_rate) in the window")
    return out


def _scope_cache(trace: Trace, window: Window) -> tuple[int, int]:
    """(hits, misses) of scope(..., cache_hit=) ranges in the window."""
    s = trace.spans
    strs = trace.strings
    idx = np.flatnonzero((s.kind == SpanKind.ANNOTATION) & (s.detail >= 0)
                         & inside(s.start_ns, s.end_ns, window))
    d, cnt = np.unique(s.detail[idx], return_counts=True)
    h = m = 0
    for di, k in zip(d.tolist(), cnt.tolist()):
        txt = strs[int(di)]
        if '"cache_hit":true' in txt:
            h += k
        elif '"cache_hit":false' in txt:
            m += k
    return h, m


def _queue(reqs: list[dict], stats, warnings: list) -> dict:
    out = {"wait_ms": stats([], "", warnings), "from_first_work": 0, "from_overlap": 0, "max_concurrent": 0,
           "tail_requests": 0, "tail_wait_ms_mean": None, "tail_wait_share_pct": None}
    if not reqs:
        return out, []
    st = np.array([r["start_ns"] for r in reqs], dtype=np.int64)
    en = np.array([r["end_ns"] for r in reqs], dtype=np.int64)
    fw = np.array([-1 if r.get("first_work_ns") is None else r["first_work_ns"] for r in reqs], dtype=np.int64)
    o = np.lexsort((en, st))          # requests that start together: the one that ended first was served first
    prev_end = np.empty(len(o), dtype=np.int64)
    prev_end[0] = np.iinfo(np.int64).min
    prev_end[1:] = np.maximum.accumulate(en[o])[:-1]      # the latest end among requests started before each
    behind = np.empty(len(o), dtype=np.int64)
    behind[o] = np.maximum(np.minimum(en[o], prev_end) - st[o], 0)
    known = fw >= 0
    wait = np.where(known, np.clip(fw - st, 0, None), behind)
    out["wait_ms"] = stats(wait / 1e6, "", warnings)
    out["from_first_work"] = int(known.sum())
    out["from_overlap"] = int((~known).sum())
    ss, se = np.sort(st), np.sort(en)
    out["max_concurrent"] = int((np.searchsorted(ss, st, side="right") - np.searchsorted(se, st, side="right")).max())
    lat = (en - st).astype(np.float64)
    tail = lat >= np.percentile(lat, T.QUEUE_TAIL_PCTL)
    out["tail_requests"] = int(tail.sum())
    out["tail_wait_ms_mean"] = float(wait[tail].mean() / 1e6)
    out["tail_wait_share_pct"] = float(100.0 * wait[tail].sum() / lat[tail].sum()) if lat[tail].sum() > 0 else None
    return out, (wait / 1e6).tolist()
