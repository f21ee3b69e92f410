"""``inferscope diff`` judged by work done (issue 24): when both reports say how much work their window did,
the change is called on throughput (work per second) as well as on latency.

Work (``work_of``, from result/headline.py's flattened LLM numbers): generated tokens per second
(``llm.tokens_per_s.generated``) when both sides have it, else requests per second (``llm.requests_per_s``);
None when either side lacks both.  Per unit of work the window costs ``1000 / rate`` ms (ms per generated
token, ms per request): a run that takes longer but does more work can be cheaper per unit.

Call (``combine``): with work on both sides, the verdict rests on the throughput change (the cost per unit
of work): ``improvement`` / ``regression`` when it rises / falls by at least the minimum change
(``--min-change``, ``thresholds.DIFF_MIN_CHANGE_PCT``), else ``within_noise`` (one rate per side: its
run-to-run noise is unknown, the minimum change stands for it).  The latency call (per step / range, or
e2e) is kept under ``latency``; ``tradeoff`` is true when the two calls point opposite ways (a larger batch:
more tokens/s, longer steps).  Without work on both sides the latency call is the verdict, unchanged.
"""
from __future__ import annotations

from ..result.headline import llm_headline

_UNITS = (("tokens_per_s", "generated token", "generated tokens/s", "llm.tokens_per_s.generated"),
          ("requests_per_s", "request", "requests/s", "llm.requests_per_s"))


def work_of(rb: dict, ra: dict) -> dict | None:
    """Throughput of both sides in the first unit both know, and the window's cost per unit."""
    hb, ha = llm_headline(rb) or {}, llm_headline(ra) or {}
    for key, unit, label, path in _UNITS:
        b, a = hb.get(key), ha.get(key)
        if b and a and b > 0 and a > 0:
            return {"metric": key, "unit": unit, "label": label, "source": f"report.json {path}",
                    "before": b, "after": a, "delta_pct": 100.0 * (a / b - 1.0),
                    "ms_per_unit_before": 1e3 / b, "ms_per_unit_after": 1e3 / a}
    return None


def combine(latency: dict, work: dict | None, min_change_pct: float) -> dict:
    """The diff's change verdict: on throughput when both sides know their work, the latency call beside it."""
    if work is None:
        return latency
    pct = work["delta_pct"]
    if abs(pct) < min_change_pct:
        vid, why = "within_noise", f"below the {min_change_pct:g}% minimum change"
    else:
        vid, why = ("improvement" if pct > 0 else "regression"), f"beyond the {min_change_pct:g}% minimum change"
    moves = {"improvement": 1, "regression": -1}
    tradeoff = moves.get(vid, 0) * moves.get(latency["id"], 0) < 0
    text = (f"{vid.replace('_', ' ')}: {work['label']} {work['before']:.4g} -> {work['after']:.4g} ({pct:+.1f}%; {why}; "
            f"{work['ms_per_unit_before']:.4g} -> {work['ms_per_unit_after']:.4g} ms of window per {work['unit']})"
            f"; latency: {latency['text']}" + ("; a trade-off: more work per second, each unit of time longer"
                                               if tradeoff and vid == "improvement" else
                                               "; a trade-off: less work per second, shorter times" if tradeoff else ""))
    # a rate: lower is worse, so a fall of x % is x % worse (--fail-on-regression compares worse_pct)
    return {"id": vid, "change_pct": pct, "worse_pct": -pct, "basis": "throughput", "noise_known": False, "min_change_pct": min_change_pct,
            "text": text, "latency": latency, "tradeoff": tradeoff, "work_unit": work["unit"]}
