"""Phases: per ProfilerStep and per user range (record_function / NVTX / scope()).

Wall time is host time.  GPU time is attributed through correlation: a GPU activity
belongs to a range when the host call that launched it started inside the range on the
same thread.  Nested ranges each get their launches (inclusive).  Coverage is the share
of all GPU work time in the window whose launch falls inside at least one range.

Phases come only from explicit names (``phase_of``):
  * with ``--phase-map``: a range belongs to the first phase one of whose patterns occurs in its
    name as whole words (case-insensitive; a pattern edge that is a letter or digit must not touch
    another letter or digit: ``sample`` does not match ``downsample``, ``generation`` does not
    match ``ModelGenerationCoordinator``);
  * without it: only ranges whose whole name is a conventional phase name (``prefill``,
    ``decode``, ``sampling``, optionally followed by ``step`` and/or an index: ``decode_step``,
    ``decode:3``, ``Prefill #2``), or a stage: ``<name>_Stage`` (seed 003's profiling plan wraps
    prefill and decode in NVTX ranges ``Prefill_Stage`` / ``Decode_Stage``; also ``Decode Stage``,
    ``Vision_Encoder-Stage 2``) is phase ``<name>`` in lower case.  No substring guessing.
    A stage range wraps a whole phase, not one generation step, so llm.py does not take it as a step.
Each phase row says which names it took and by which rule.
"""
from __future__ import annotations

import re

import numpy as np

from .select import overlap
from .stats import fast_unique

from ..trace.kinds import SpanKind
from ..trace.model import Trace, codes_in
from .intervals import union
from .launched import in_ranges, launched_gpu
from .window import Window

CONVENTIONAL_PHASES = ("prefill", "decode", "sampling")
_CONVENTIONAL_RE = re.compile(r"^\s*(?P<phase>" + "|".join(CONVENTIONAL_PHASES) +
                              r")(?:[\s_\-:#.]*step)?(?:[\s_\-:#.]*\d+)?\s*$", re.I)


_STAGE_RE = re.compile(r"^\s*(?P<phase>[A-Za-z][A-Za-z0-9]*(?:[_\-][A-Za-z0-9]+)*?)[\s_\-]+stage(?:[\s_\-:#.]*\d+)?\s*$", re.I)
CONVENTIONAL_RULE = "conventional phase name (whole name)"
STAGE_RULE = "<name>_Stage range (whole name)"
DEFAULT_SOURCE = "conventional names and <name>_Stage ranges"


def _word_pattern(p: str) -> re.Pattern:
    left = r"(?<![A-Za-z0-9])" if p[:1].isalnum() else ""
    right = r"(?![A-Za-z0-9])" if p[-1:].isalnum() else ""
    return re.compile(left + re.escape(p) + right, re.I)


def phase_matcher(phase_map: dict | None):
    """``fn(name) -> (phase, rule) | None`` for the user's map, or the conventional exact names and stages."""
    if phase_map:
        pats = [(ph, p, _word_pattern(p)) for ph, ps in phase_map.items() for p in ps if p]

        def match(name: str):
            for ph, p, rx in pats:
                if rx.search(name):
                    return ph, f"--phase-map {ph}: pattern {p!r} as whole words"
            return None
    else:
        def match(name: str):
            m = _CONVENTIONAL_RE.match(name)
            if m:
                return m.group("phase").lower(), CONVENTIONAL_RULE
            m = _STAGE_RE.match(name)
            if m:
                return m.group("phase").lower(), STAGE_RULE
            return None
    return match


def phases(trace: Trace, window: Window, phase_map: dict | None = None, max_steps: int = 100) -> dict:
    s = trace.spans
    lo, hi = window.start_ns, window.end_ns
    rng = codes_in(s.kind, [SpanKind.STEP, SpanKind.ANNOTATION]) & overlap(s.start_ns, s.end_ns, window) & (s.end_ns > s.start_ns)
    ridx = np.flatnonzero(rng)
    lg = launched_gpu(trace, window)                   # whole durations of the GPU work starting in the window
    total_gpu = int(lg.whole_ns.sum())
    rl = in_ranges(trace, lg, s.start_ns[ridx], s.end_ns[ridx], s.track[ridx])
    attributed = rl.sum(lg.whole_ns)
    # coverage: launches inside the union of the ranges on their thread
    ldur = lg.whole_ns[rl.order]
    ltrack, lstart = s.track[lg.launcher[rl.order]], s.start_ns[lg.launcher[rl.order]]
    covered_mask = np.zeros(len(ldur), dtype=bool)
    if len(ridx) and len(ldur):
        rt = s.track[ridx]
        for t in fast_unique(rt).tolist():
            a = np.searchsorted(ltrack, t, side="left")
            b = np.searchsorted(ltrack, t, side="right")
            if a == b:
                continue
            ls = lstart[a:b]
            sel = np.flatnonzero(rt == t)
            us, ue = union(s.start_ns[ridx[sel]], s.end_ns[ridx[sel]])
            k = np.searchsorted(us, ls, side="right") - 1
            inside = (k >= 0) & (ls < ue[np.maximum(k, 0)])
            covered_mask[a:b] |= inside
    coverage = float(ldur[covered_mask].sum()) / total_gpu if total_gpu else None
    names = trace.names(ridx)
    wall = (np.minimum(s.end_ns[ridx], hi) - np.maximum(s.start_ns[ridx], lo)).astype(np.int64)
    steps = []
    by_name: dict[str, list] = {}
    # per range: plain Python lists (no numpy scalar or enum lookup per range: 16k ranges on a 2M-event trace)
    rk = s.kind[ridx]
    is_step, is_ann = (rk == SpanKind.STEP).tolist(), (rk == SpanKind.ANNOTATION).tolist()
    start_l, wall_l, attr_l = s.start_ns[ridx].tolist(), wall.tolist(), attributed.tolist()
    for j, nm in enumerate(names):
        if is_step[j] and len(steps) < max_steps:
            steps.append({"name": nm, "start_ms": (start_l[j] - lo) / 1e6, "wall_ms": wall_l[j] / 1e6,
                          "gpu_ms": attr_l[j] / 1e6})
        if is_ann[j]:
            w = wall_l[j]
            r = by_name.setdefault(nm, [0, 0, 0, 0])
            r[0] += 1
            r[1] += w
            r[2] += attr_l[j]
            r[3] = max(r[3], w)
    ranges = [{"name": k, "count": v[0], "wall_ms": v[1] / 1e6, "mean_ms": v[1] / v[0] / 1e6, "max_ms": v[3] / 1e6,
               "gpu_ms": v[2] / 1e6} for k, v in sorted(by_name.items(), key=lambda kv: -kv[1][1])]
    match = phase_matcher(phase_map)
    per_phase: dict[str, list] = {}
    for r in ranges:
        m = match(r["name"])
        if m is None:
            continue
        p = per_phase.setdefault(m[0], [0, 0.0, 0.0, []])
        p[0] += r["count"]
        p[1] += r["wall_ms"]
        p[2] += r["gpu_ms"]
        p[3].append({"name": r["name"], "rule": m[1]})
    phase_rows = [{"phase": k, "ranges": v[0], "wall_ms": v[1], "gpu_ms": v[2], "mapped_from": v[3][:20]}
                  for k, v in per_phase.items()]
    return {
        "steps": steps, "step_count": int((s.kind[ridx] == SpanKind.STEP).sum()),
        "ranges": ranges, "phase_map_source": "--phase-map" if phase_map else DEFAULT_SOURCE,
        "phase_map": phase_map or None, "conventional_phase_names": None if phase_map else list(CONVENTIONAL_PHASES),
        "phases": phase_rows,
        "gpu_attribution_coverage_pct": None if coverage is None else 100.0 * coverage,
        "rule": "GPU time attributed to a range when its launching host call started inside the range on the same thread",
    }


def phase_tables(ph: dict) -> dict:
    t = {}
    if ph.get("steps"):
        t["steps"] = {"columns": ["step", "start_ms", "wall_ms", "gpu_ms"],
                      "rows": [[r["name"], round(r["start_ms"], 6), round(r["wall_ms"], 6), round(r["gpu_ms"], 6)] for r in ph["steps"]]}
    if ph.get("ranges"):
        t["ranges"] = {"columns": ["range", "count", "wall_ms", "mean_ms", "max_ms", "gpu_ms"],
                       "rows": [[r["name"], r["count"], round(r["wall_ms"], 6), round(r["mean_ms"], 6), round(r["max_ms"], 6),
                                 round(r["gpu_ms"], 6)] for r in ph["ranges"][:200]]}
    if ph.get("phases"):
        t["phases"] = {"columns": ["phase", "ranges", "wall_ms", "gpu_ms", "mapped_from"],
                       "rows": [[r["phase"], r["ranges"], round(r["wall_ms"], 6), round(r["gpu_ms"], 6),
                                 "; ".join(f"{m['name']} ({m['rule']})" for m in r["mapped_from"])] for r in ph["phases"]]}
    return t
