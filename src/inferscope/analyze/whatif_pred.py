"""The one prediction record of every what-if model (``whatif.py``'s GPU/host models and ``whatif_cpu.py``'s CPU
ones import it from here, so neither imports the other): capped at the categories it draws from and at e2e."""
from __future__ import annotations

from .evidence import _ms, _row
from .sampling import half_width_pts

RESIDUAL = "thresholds.WHATIF_WAIT_RESIDUAL_FRACTION"     # how a range end that keeps that fraction cites it


def scaled_saving_ms(ms: float, now: float, n: float, efficiency: float = 1.0) -> float:
    """Amdahl over added workers: ``ms`` done by ``now`` workers, spread over ``n`` of which each added one does
    ``efficiency`` of a worker's work (1: linear)."""
    return ms * (1.0 - now / (now + (n - now) * efficiency)) if n > now else 0.0


HOST_CATS = ("sync_wait", "cpu_preprocessing", "framework_overhead", "cpu_compute", "waiting", "other")


def _part_ms(res: dict, cat: str, part: str) -> float:
    return float(next((p["ms"] for p in _row(res, cat)["parts"] if p["name"] == part), 0.0))


def sampling_half_width_ms(res: dict, ms: float) -> float:
    """The 95 % binomial half-width, in ms, of a sampled figure of ``ms`` (its share of e2e estimated from
    cpu_sampling.samples_est ticks, analyze/sampling.py); 0 without sampling (imported traces)."""
    e2e = float(res.get("e2e_ms") or 0.0)
    n = float((res.get("cpu_sampling") or {}).get("samples_est") or 0.0)
    if e2e <= 0 or n < 1:
        return 0.0
    return half_width_pts(min(1.0, max(0.0, ms / e2e)), n) / 100.0 * e2e


def _pred(res, model, exp, low, high, basis, cats, intervals=None, key=None, sampled: str = "") -> dict:
    """One prediction, capped at the categories it draws from and at e2e; low <= expected <= high.  ``sampled``
    names the range ends read from sampled figures ("low", "high", "low,high"): those are widened by the sampling's
    95 % half-width at the expected saving's share (the measurement's own uncertainty, beside the model's)."""
    e2e = float(res.get("e2e_ms") or 0.0)
    hw = sampling_half_width_ms(res, exp) if sampled else 0.0
    if hw > 0:
        low -= hw if "low" in sampled else 0.0
        high += hw if "high" in sampled else 0.0
        basis += (f"; {' and '.join(x for x in ('low', 'high') if x in sampled)} widened by the sampling's 95 % "
                  f"half-width {hw:.3f} ms (cpu_sampling.samples_est "
                  f"{float(res['cpu_sampling']['samples_est']):g} ticks)")
    cap = min(e2e, sum(_ms(res, c) for c in cats))
    high = max(0.0, min(high, cap))
    exp = max(0.0, min(exp, high))
    low = max(0.0, min(low, exp))
    return {"expected_saving_ms": exp, "expected_saving_pct": 100.0 * exp / e2e if e2e else 0.0,
            "saving_low_ms": low, "saving_high_ms": high, "saving_model": model, "saving_basis": basis,
            "saving_categories": list(cats), "_intervals": intervals, "_key": key or model}
