"""The slowest 5 % of steps vs the rest, the ``counters.slow_steps`` comparison: each counter's value in force at each
step's midpoint, averaged over the slow steps and over the others (finding ``slow_steps``).

Steps: ProfilerStep ranges, else generation steps of one kind (analyze/llm.py: decode with decode), else the most
frequent range name; at least SLOW_STEPS_MIN_STEPS of them, SLOW_STEPS_FRACTION of them (at least one) slow.
"""
from __future__ import annotations

import numpy as np

from .. import thresholds as T
from ..trace.kinds import SpanKind
from ..trace.model import Trace
from .select import inside
from .window import Window
from .llm import _steps

SLOW_METRICS = ("gpu.sm_clock_mhz", "gpu.power_w", "gpu.temp_c", "gpu.util_pct", "cpu.util_pct", "proc.cpu_pct",
                "proc.page_faults", "proc.ctx_switches")


def _llm_steps_of_one_kind(trace: Trace, window: Window, inw: np.ndarray) -> tuple[np.ndarray, str]:
    """Generation steps (analyze/llm.py: live hf.forward, vLLM/SGLang steps) of the most frequent kind
    (decode, as a rule): a prefill is slower than a decode step by design, so only like is compared with like."""
    rows = [r for r in _steps(trace, window, None) if inw[r["i"]]]
    if not rows:
        return np.zeros(0, dtype=np.int64), ""
    kinds: dict[str, list] = {}
    for r in rows:
        kinds.setdefault(r["kind"], []).append(r)
    kind, rs = max(kinds.items(), key=lambda kv: len(kv[1]))
    names = sorted({r["name"] for r in rs})
    label = names[0] if len(names) == 1 else "generation steps"
    return np.asarray(sorted(r["i"] for r in rs), dtype=np.int64), f"{kind} steps ({label[:60]})"


def slow_steps(trace: Trace, window: Window, full: dict, cumulative: dict[str, str]) -> dict | None:
    """The slowest 5 % of steps vs the rest: each counter's value in force at each step's midpoint
    (the last sample at or before it; cumulative counters - ``cumulative``: metric -> its rate's name - as the rate
    over the surrounding interval).
    Steps: ProfilerStep ranges, else generation steps of one kind (decode with decode), else the most
    frequent range name."""
    s = trace.spans
    inw = inside(s.start_ns, s.end_ns, window) & (s.end_ns > s.start_ns)
    idx = np.flatnonzero(inw & (s.kind == int(SpanKind.STEP)))
    source = "steps"
    if len(idx) < T.SLOW_STEPS_MIN_STEPS:
        idx, source = _llm_steps_of_one_kind(trace, window, inw)
    if len(idx) < T.SLOW_STEPS_MIN_STEPS:
        ann = np.flatnonzero(inw & (s.kind == int(SpanKind.ANNOTATION)))
        if not len(ann):
            return None
        u, inv, cnt = np.unique(s.name[ann], return_inverse=True, return_counts=True)
        j = int(np.argmax(cnt))
        if cnt[j] < T.SLOW_STEPS_MIN_STEPS:
            return None
        idx = ann[inv == j]
        source = trace.strings[int(u[j])]
    dur = (s.end_ns[idx] - s.start_ns[idx]).astype(np.float64)
    mid = (s.start_ns[idx] + s.end_ns[idx]) // 2
    n_slow = max(1, int(round(len(idx) * T.SLOW_STEPS_FRACTION)))
    order = np.argsort(-dur, kind="stable")
    slow = np.zeros(len(idx), bool)
    slow[order[:n_slow]] = True
    rows = []
    for metric, dev, ts, v in full.values():
        if metric not in SLOW_METRICS or len(ts) < 2:
            continue
        if metric in cumulative:
            dt = np.diff(ts) / 1e9
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.where(dt > 0, np.diff(v) / dt, np.nan)
            ts = ts[:-1]                                   # the rate from this sample to the next one
            metric = cumulative[metric]
        k = np.searchsorted(ts, mid, side="right") - 1
        ok = (k >= 0) & (mid <= ts[-1] + (ts[-1] - ts[0]) / max(1, len(ts) - 1) * 2)
        val = np.full(len(idx), np.nan)
        val[ok] = v[k[ok]]
        a, b = val[slow & np.isfinite(val)], val[~slow & np.isfinite(val)]
        if not len(a) or not len(b):
            continue
        sm, rm = float(a.mean()), float(b.mean())
        rows.append({"metric": metric, "device": dev, "slow_mean": sm, "rest_mean": rm,
                     "diff_pct": 100.0 * (sm - rm) / abs(rm) if rm else None})
    rows.sort(key=lambda r: -abs(r["diff_pct"] or 0.0))
    return {"source": source, "steps": int(len(idx)), "slow_count": n_slow,
            "slow_mean_ms": float(dur[slow].mean()) / 1e6, "rest_mean_ms": float(dur[~slow].mean()) / 1e6 if (~slow).any() else None,
            "metrics": rows}
