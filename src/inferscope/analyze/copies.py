"""Copies: H2D/D2H/D2D counts, bytes, time, achieved bandwidth, pageable vs pinned,
small-copy storms, and the host API that issued them.

Selection and time, the rule kernels use (select.py): copies overlapping the window, durations
clipped to it (``*_ms`` here are sums of copy time, not unions); bandwidth uses whole copies."""
from __future__ import annotations

import numpy as np

from .. import thresholds
from ..trace.kinds import CopyKind, MemKind, SpanKind
from ..trace.model import Trace
from .classify import host_side_mem
from .launched import launched_gpu
from .select import clipped_durations, group_sum, in_window
from .window import Window


def copies(trace: Trace, window: Window) -> dict:
    s = trace.spans
    lg = launched_gpu(trace, window, mask=s.kind == SpanKind.MEMCPY, select="overlaps")
    idx, full, dur = lg.gpu, lg.whole_ns, lg.clipped_ns      # clipped: ms; whole: bandwidth
    msi = in_window(trace, s.kind == SpanKind.MEMSET, window)
    nbytes = np.maximum(s.bytes[idx], 0)
    ck = s.copy_kind[idx]
    hostmem = host_side_mem(trace, idx)
    out = {"count": int(len(idx)), "copy_sum_ms": float(dur.sum()) / 1e6, "by_kind": [],
           "memset": {"count": int(len(msi)), "ms": float(clipped_durations(trace, msi, window).sum()) / 1e6,
                      "bytes": int(np.maximum(s.bytes[msi], 0).sum())}}
    for kind in (CopyKind.H2D, CopyKind.D2H, CopyKind.D2D, CopyKind.H2H, CopyKind.P2P, CopyKind.UNKNOWN):
        mk = ck == kind
        if not mk.any():
            continue
        t = int(dur[mk].sum())
        b = int(nbytes[mk].sum())
        tf = int(full[mk].sum())
        row = {"kind": kind.name, "count": int(mk.sum()), "bytes": b, "ms": t / 1e6,
               "bandwidth_gbps": (b / tf) if tf > 0 else None,  # bytes/ns == GB/s, whole copies
               "pageable_count": int((mk & (hostmem == MemKind.PAGEABLE)).sum()),
               "pinned_count": int((mk & (hostmem == MemKind.PINNED)).sum()),
               "pageable_ms": float(dur[mk & (hostmem == MemKind.PAGEABLE)].sum()) / 1e6,
               "pinned_ms": float(dur[mk & (hostmem == MemKind.PINNED)].sum()) / 1e6,
               "pageable_bytes": int(nbytes[mk & (hostmem == MemKind.PAGEABLE)].sum()),
               "pinned_bytes": int(nbytes[mk & (hostmem == MemKind.PINNED)].sum())}
        out["by_kind"].append(row)
    pg = hostmem == MemKind.PAGEABLE
    small = nbytes < thresholds.SMALL_COPY_BYTES
    out["pageable"] = {"count": int(pg.sum()), "ms": float(dur[pg].sum()) / 1e6, "bytes": int(nbytes[pg].sum())}
    out["small"] = {"threshold_bytes": thresholds.SMALL_COPY_BYTES, "count": int(small.sum()),
                    "ms": float(dur[small].sum()) / 1e6,
                    "pct_of_window": 100.0 * float(dur[small].sum()) / window.dur_ns if window.dur_ns else 0.0}
    out["small"]["storm"] = bool(out["small"]["count"] >= thresholds.SMALL_COPY_STORM_COUNT
                                 or out["small"]["pct_of_window"] >= thresholds.SMALL_COPY_STORM_PCT)
    out["small"].update(_small_costs(trace, idx, lg.launcher, nbytes, full, small))
    # issuing host API (e.g. cudaMemcpyAsync vs cudaMemcpy) for pageable copies
    plaunch = lg.launcher[pg]
    api_name = np.where(plaunch >= 0, s.name[np.maximum(plaunch, 0)], -2).astype(np.int64)
    uk, cnt_ms, cnt = group_sum(api_name, dur[pg])
    out["pageable"]["by_api"] = [
        {"api": (trace.strings[int(k)] if k >= 0 else "(unknown)"), "count": int(c), "ms": float(v) / 1e6}
        for k, v, c in sorted(zip(uk.tolist(), cnt_ms.tolist(), cnt.tolist()), key=lambda r: -r[1])]
    return out


def _small_costs(trace: Trace, gpu: np.ndarray, launchers: np.ndarray, nbytes: np.ndarray, whole_ns: np.ndarray,
                 small: np.ndarray) -> dict:
    """What the small copies cost beside their GPU time, for the small_copies what-if (analyze/whatif.py): their bytes;
    their issuing calls' own host time - each call less its part before its copy began on the GPU, which was waiting
    for earlier GPU work (a coalesced copy waits for it too) - summed, median and that wait; and the bandwidth the
    window's other copies (>= SMALL_COPY_BYTES, whole copies) reached: what one coalesced copy would run at."""
    s = trace.spans
    ok = small & (launchers >= 0)
    lau, g = launchers[ok], gpu[ok]
    a, b = s.start_ns[lau].astype(np.int64), s.end_ns[lau].astype(np.int64)
    gs = s.start_ns[g].astype(np.int64)
    own = (b - a) - np.where(gs <= b, np.clip(gs, a, b) - a, 0)     # (a copy queued past its call: no wait in it)
    big_t, big_b = int(whole_ns[~small].sum()), int(nbytes[~small].sum())
    return {"bytes": int(nbytes[small].sum()), "calls": int(len(lau)), "call_ms": float(own.sum()) / 1e6,
            "call_p50_us": float(np.median(own)) / 1e3 if len(own) else None,
            "call_wait_ms": float((b - a).sum() - own.sum()) / 1e6,
            "bulk_gbps": big_b / big_t if big_t > 0 and big_b > 0 else None}


def copy_table(c: dict) -> dict:
    cols = ["kind", "count", "bytes", "ms", "bandwidth_gbps", "pageable_count", "pinned_count", "pageable_ms", "pinned_ms"]
    rows = [[r["kind"], r["count"], r["bytes"], round(r["ms"], 6),
             None if r["bandwidth_gbps"] is None else round(r["bandwidth_gbps"], 3),
             r["pageable_count"], r["pinned_count"], round(r["pageable_ms"], 6), round(r["pinned_ms"], 6)]
            for r in c.get("by_kind", [])]
    return {"columns": cols, "rows": rows}
