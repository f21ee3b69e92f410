"""The optional ``llm`` section of ``inferscope diff``: every numeric leaf of either report's ``llm``
section, before / after / delta, and whether the change is for the better.
"""
from __future__ import annotations

import math


# ---------------------------------------------------------------------------------------------
# LLM metrics (the optional ``llm`` section): every numeric leaf present on both sides
# ---------------------------------------------------------------------------------------------
def _numeric_leaves(d, prefix="", depth=0) -> dict[str, float]:
    out = {}
    if not isinstance(d, dict) or depth > 2:
        return out
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)) and math.isfinite(v):
            out[key] = float(v)
        elif isinstance(v, dict):
            out.update(_numeric_leaves(v, key + ".", depth + 1))
    return out


# lower is better unless the name says a rate (or a cache hit count / rate)
def _higher_is_better(key: str) -> bool:
    k = key.lower()
    return any(w in k for w in ("per_s", "_per_sec", "throughput", "tokens_s", "qps", "rps", "hit_rate", "cache.hits"))


def llm_diff(rb: dict, ra: dict) -> dict | None:
    lb, la = rb.get("llm"), ra.get("llm")
    if not isinstance(lb, dict) and not isinstance(la, dict):
        return None
    fb, fa = _numeric_leaves(lb or {}), _numeric_leaves(la or {})
    rows = []
    for k in sorted(set(fb) | set(fa)):
        b, a = fb.get(k), fa.get(k)
        d = None if (a is None or b is None) else a - b
        rows.append({"metric": k, "before": b, "after": a, "delta": d,
                     "delta_pct": (100 * d / b) if (d is not None and b) else None,
                     "better": None if d is None or d == 0 else ((d > 0) == _higher_is_better(k))})
    return {"present": {"before": isinstance(lb, dict), "after": isinstance(la, dict)}, "metrics": rows}
