"""Is the change between the two sides of ``inferscope diff`` beyond noise?

Noise rule (``noise_for``): the two runs are compared per *repeated unit* when both hold one:
profiler steps (``ProfilerStep#N``) when both have at least two, else the user range
(record_function / NVTX / ``scope()``) that repeats at least twice on both sides and covers the
most time.  The per-unit means are compared with Welch's t statistic; a change whose magnitude
is within the 95 % band (``t_0.975(df) x standard error of the difference``), or smaller than
``thresholds.DIFF_MIN_CHANGE_PCT`` (``--min-change``), is called ``within_noise``.  Without repeats the noise is unknown and the verdict says so (it then rests on
the e2e change alone).  When both reports say how much work they did (generated tokens/s, else requests/s),
the verdict rests on throughput, with the latency call beside it (``work.py``).  Within-run step variance does not capture everything that differs between
runs (machine load, clocks), so the band is a lower bound on the real noise.

``environment``: the machine-load counters of a live trace (system CPU utilisation, the process's CPU),
so the diff can warn when a run shared a busy machine.  ``_change_verdict``: the latency call
(regression / improvement / within_noise / no_change) from the noise comparison, else from e2e; a time, so
its ``worse_pct`` (the change in the worse direction, what ``--fail-on-regression`` compares) is ``change_pct``.
"""
from __future__ import annotations

import math

import numpy as np

from ..trace.kinds import SpanKind
from .sides import Side

# two-sided 95 % Student t quantiles for df = 1..30 (larger df: 1.96)
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t975(df: float) -> float:
    if not math.isfinite(df) or df >= 30.5:
        return 1.96 if not (math.isfinite(df) and df < 120) else 2.0
    return _T975[max(1, int(round(df))) - 1]


# ---------------------------------------------------------------------------------------------
# repeated units (noise)
# ---------------------------------------------------------------------------------------------
def repeats(side: Side) -> dict[str, list[float]]:
    """{unit name: [wall ms per occurrence]} for units occurring at least twice in the window.
    ``"<steps>"`` is the profiler steps; other keys are user range names."""
    out: dict[str, list[float]] = {}
    ph = side.report.get("phases") or {}
    steps = [s.get("wall_ms") for s in ph.get("steps") or [] if isinstance(s, dict)]
    steps = [float(x) for x in steps if isinstance(x, (int, float))]
    if len(steps) >= 2:
        out["<steps>"] = steps
    if side.trace is not None:
        t = side.trace
        s = t.spans
        w = side.report.get("window") or {}
        lo, hi = int(w.get("start_ns", -2**62)), int(w.get("end_ns", 2**62))
        m = (s.kind == SpanKind.ANNOTATION) & (s.end_ns > lo) & (s.start_ns < hi) & (s.end_ns > s.start_ns)
        idx = np.flatnonzero(m)
        if len(idx):
            wall = (np.minimum(s.end_ns[idx], hi) - np.maximum(s.start_ns[idx], lo)) / 1e6
            for nm, ms in zip(t.names(idx), wall.tolist()):
                if nm != "<steps>":
                    out.setdefault(nm, []).append(ms)
    return {k: v for k, v in out.items() if len(v) >= 2}


def _mean_var(x: list[float]) -> tuple[float, float]:
    n = len(x)
    m = sum(x) / n
    return m, (sum((v - m) ** 2 for v in x) / (n - 1) if n > 1 else 0.0)


def noise_for(before: Side, after: Side) -> dict | None:
    """Welch comparison of the per-unit wall times, or None when the sides share no repeated unit."""
    rb, ra = repeats(before), repeats(after)
    common = [k for k in rb if k in ra]
    if not common:
        return None
    if "<steps>" in common:
        unit = "<steps>"
    else:   # the repeated range covering the most time on both sides
        unit = max(common, key=lambda k: (min(sum(rb[k]), sum(ra[k])), k))
    xb, xa = rb[unit], ra[unit]
    mb, vb = _mean_var(xb)
    ma, va = _mean_var(xa)
    nb, na = len(xb), len(xa)
    se = math.sqrt(vb / nb + va / na)
    if se > 0:
        df = (vb / nb + va / na) ** 2 / (((vb / nb) ** 2 / (nb - 1)) + ((va / na) ** 2 / (na - 1)))
    else:
        df = float(nb + na - 2)
    band = t975(df) * se
    d = ma - mb
    return {
        "unit": "profiler steps" if unit == "<steps>" else unit,
        "unit_kind": "steps" if unit == "<steps>" else "range",
        "before": {"n": nb, "mean_ms": mb, "std_ms": math.sqrt(vb), "cv_pct": 100 * math.sqrt(vb) / mb if mb else None},
        "after": {"n": na, "mean_ms": ma, "std_ms": math.sqrt(va), "cv_pct": 100 * math.sqrt(va) / ma if ma else None},
        "delta_ms": d, "delta_pct": 100 * d / mb if mb else None,
        "se_ms": se, "df": df, "band_ms": band, "band_pct": 100 * band / mb if mb else None,
        "t": d / se if se > 0 else None,
        "beyond_noise": abs(d) > band,
        "rule": "Welch: |mean_after - mean_before| > t_0.975(df) x sqrt(var_b/n_b + var_a/n_a) over the per-unit wall "
                "times; within-run variance only (a lower bound on run-to-run noise)",
    }


ENV_COUNTERS = ("cpu.util_pct", "proc.cpu_pct")
BUSY_MACHINE_PCT = 80.0


def environment(side: Side) -> dict:
    """Mean of the machine-load counters in the window (live traces only): {metric: mean}."""
    if side.trace is None or not len(side.trace.counters):
        return {}
    t = side.trace
    c = t.counters
    w = side.report.get("window") or {}
    lo, hi = int(w.get("start_ns", -2**62)), int(w.get("end_ns", 2**62))
    lst = t.strings.as_list()
    out = {}
    for i in range(len(t.tracks)):
        nid = int(t.tracks.name[i])
        name = lst[nid] if nid >= 0 else ""
        if name in ENV_COUNTERS:
            m = (c.track == i) & (c.ts_ns >= lo) & (c.ts_ns <= hi)
            if m.any():
                out[name] = float(np.mean(c.value[m]))
    return out


def _change_verdict(e2e: dict, noise: dict | None, min_change_pct: float) -> dict:
    """regression | improvement | within_noise | no_change, with the rule that decided it."""
    if noise is not None and noise["delta_pct"] is not None:
        pct, basis = noise["delta_pct"], ("mean wall time per profiler step" if noise["unit_kind"] == "steps"
                                      else f"mean wall time per {noise['unit']!r} range")
        if not noise["beyond_noise"]:
            vid, why = "within_noise", f"inside the 95% band ±{noise['band_pct']:.1f}%"
        elif abs(pct) < min_change_pct:
            vid, why = "within_noise", (f"beyond the 95% band ±{noise['band_pct']:.1f}% but below the {min_change_pct:g}% "
                                        "minimum change (run-to-run noise)")
        else:
            vid = "regression" if noise["delta_ms"] > 0 else "improvement"
            why = f"beyond the 95% band ±{noise['band_pct']:.1f}% and the {min_change_pct:g}% minimum change"
        text = (f"{vid.replace('_', ' ')}: {basis} {noise['before']['mean_ms']:.3f} -> {noise['after']['mean_ms']:.3f} ms "
                f"({pct:+.1f}%; {why}; n={noise['before']['n']}/{noise['after']['n']})")
        return {"id": vid, "change_pct": pct, "worse_pct": pct, "basis": basis, "noise_known": True,
                "min_change_pct": min_change_pct, "text": text}
    pct = e2e["delta_pct"]
    if pct is None or e2e["delta_ms"] == 0:
        vid = "no_change"
    elif abs(pct) < min_change_pct:
        vid = "within_noise"
    else:
        vid = "regression" if e2e["delta_ms"] > 0 else "improvement"
    text = (f"{vid.replace('_', ' ')}: e2e {e2e['before_ms']:.3f} -> {e2e['after_ms']:.3f} ms"
            + (f" ({pct:+.1f}%" if pct is not None else " (") + f"; minimum change {min_change_pct:g}%)"
            "; per-run noise unknown (no repeated steps or ranges on both sides)")
    return {"id": vid, "change_pct": pct, "worse_pct": pct, "basis": "e2e", "noise_known": False,
            "min_change_pct": min_change_pct, "text": text}
