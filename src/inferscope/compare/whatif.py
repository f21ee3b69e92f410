"""``inferscope diff`` closes the what-if loop (issue 42): for each finding of ``before`` with a predicted
saving (analyze/whatif.py), did the saving materialise in ``after``?

Measured saving, in ``before``'s ms and for ``before``'s amount of work (``_scale``): with work on both sides
(work.py) the after window is scaled to the before side's work (``e2e_b - e2e_a x k``, ``k`` =
before work / after work); else with repeated steps/ranges (noise.noise_for) the per-unit mean change
x the before side's unit count; else the plain e2e change.  The finding's own categories (``saving_categories``)
are measured the same way (before ms - after ms x k), with a status of their own (``category_status``): when
other changes move e2e too, the categories say whether this finding's time went.

Noise: the larger of the 95 % band of the per-unit means (x the unit count; only with repeated units) and the
minimum change (``--min-change``, thresholds.DIFF_MIN_CHANGE_PCT) of the before e2e, the two rules the diff's
own verdict uses.  Status: ``below_noise`` (the predicted high end is inside the noise: the diff cannot tell),
``not_materialised`` (measured within noise or a slow-down), ``partly`` (below the low end by more than the
noise), ``exceeded`` (above the high end by more than the noise: something else changed too), else
``materialised``.
"""
from __future__ import annotations


def _scale(d: dict, eb: float, ea: float) -> tuple[float, str]:
    """k: after-side quantities x k are for the before side's work; and the rule that gave it."""
    w = d.get("work")
    if w:
        return (eb * w["before"]) / (ea * w["after"]) if ea > 0 and w["after"] > 0 else 1.0, \
            f"after scaled to the before side's work ({w['label']})"
    n = d.get("noise")
    if n and n["after"]["n"]:
        return n["before"]["n"] / n["after"]["n"], f"after scaled to the before side's {n['unit']} count"
    return 1.0, "plain e2e change (no work or repeated units known)"


def _status(measured: float, lo: float, hi: float, noise_ms: float) -> str:
    if hi <= noise_ms:
        return "below_noise"
    if measured <= noise_ms:
        return "not_materialised"
    if measured < lo - noise_ms:
        return "partly"
    if measured > hi + noise_ms:
        return "exceeded"
    return "materialised"


def predictions(rb: dict, ra: dict, d: dict) -> dict | None:
    rows_b = [f for f in rb.get("findings") or [] if isinstance(f, dict) and f.get("expected_saving_ms") is not None]
    if not rows_b:
        return None
    eb, ea = float(rb["e2e_ms"]), float(ra["e2e_ms"])
    k, how = _scale(d, eb, ea)
    n = d.get("noise")
    if n and not d.get("work"):
        measured = (n["before"]["mean_ms"] - n["after"]["mean_ms"]) * n["before"]["n"]
        band = n["band_ms"] * n["before"]["n"]
    else:
        measured, band = eb - ea * k, 0.0
    noise_ms = max(band, eb * d["change"]["min_change_pct"] / 100.0)
    cats = {c["category"]: c for c in d["categories"]}
    after_ids = {f["id"] for f in ra.get("findings") or [] if isinstance(f, dict)}
    rows = []
    for f in rows_b:
        lo, hi = float(f["saving_low_ms"]), float(f["saving_high_ms"])
        cs = [cats[c] for c in f.get("saving_categories") or [] if c in cats]
        cat = sum(c["before_ms"] - c["after_ms"] * k for c in cs) if cs else None
        rows.append({"id": f["id"], "model": f.get("saving_model"), "predicted_ms": float(f["expected_saving_ms"]),
                     "low_ms": lo, "high_ms": hi, "measured_ms": measured, "category_measured_ms": cat,
                     "resolved": f["id"] not in after_ids, "status": _status(measured, lo, hi, noise_ms),
                     "category_status": None if cat is None else _status(cat, lo, hi, noise_ms)})
    return {"rows": rows, "noise_ms": noise_ms, "scale": k, "basis": how,
            "rule": "measured = before e2e - after e2e x scale (per-unit means x unit count with repeated units); "
                    "noise = max(95% band x units, min change x before e2e); materialised when measured is beyond the "
                    "noise and inside [low - noise, high + noise]"}
