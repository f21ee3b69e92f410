"""The one prediction record of every what-if model (``whatif.py``'s GPU/host models and ``whatif_cpu.py``'s CPU
ones import it from here, so neither imports the other): capped at the categories it draws from and at e2e."""
from __future__ import annotations

from .evidence import _ms, _row

HOST_CATS = ("sync_wait", "cpu_preprocessing", "framework_overhead", "cpu_compute", "waiting", "other")


def _part_ms(res: dict, cat: str, part: str) -> float:
    return float(next((p["ms"] for p in _row(res, cat)["parts"] if p["name"] == part), 0.0))


def _pred(res, model, exp, low, high, basis, cats, intervals=None, key=None) -> dict:
    """One prediction, capped at the categories it draws from and at e2e; low <= expected <= high."""
    e2e = float(res.get("e2e_ms") or 0.0)
    cap = min(e2e, sum(_ms(res, c) for c in cats))
    high = max(0.0, min(high, cap))
    exp = max(0.0, min(exp, high))
    low = max(0.0, min(low, exp))
    return {"expected_saving_ms": exp, "expected_saving_pct": 100.0 * exp / e2e if e2e else 0.0,
            "saving_low_ms": low, "saving_high_ms": high, "saving_model": model, "saving_basis": basis,
            "saving_categories": list(cats), "_intervals": intervals, "_key": key or model}
