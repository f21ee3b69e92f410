"""Named things in ``inferscope diff``: kernels, CPU ops, sampled hottest functions and ranges, each
summed per name on both sides (all in the window from a trace; the top lists from a report.json), and
which appeared, disappeared or changed most.
"""
from __future__ import annotations

import numpy as np

from .sides import Side
from ..analyze.sample_labels import function_of
from ..analyze.select import clipped_durations, group_sum, in_window
from ..analyze.window import Window
from ..trace.kinds import SpanKind

TOP_CHANGED = 15


# ---------------------------------------------------------------------------------------------
# tables of named things: kernels, CPU ops, sampled functions, ranges
# ---------------------------------------------------------------------------------------------
def _named_from_trace(side: Side) -> dict[str, dict[str, tuple[float, int]]]:
    t = side.trace
    s = t.spans
    w = side.report.get("window") or {}

    _W = Window(int(w.get("start_ns", -2**62)), int(w.get("end_ns", 2**62)))
    out: dict[str, dict[str, tuple[float, int]]] = {}
    for label, mask, key in (("kernel", (s.kind == SpanKind.KERNEL) | (s.kind == SpanKind.GRAPH_LAUNCH), s.name),
                             ("cpu_op", s.kind == SpanKind.CPU_OP, s.name),
                             ("function", (s.kind == SpanKind.CPU_SAMPLE) & (s.detail >= 0), s.detail),
                             ("range", (s.kind == SpanKind.ANNOTATION) | (s.kind == SpanKind.STEP), s.name)):
        idx = in_window(t, mask, _W)
        if not len(idx):
            continue
        d = clipped_durations(t, idx, _W)
        uk, sums, cnt = group_sum(key[idx], d)
        lst = t.strings.as_list()
        names = [lst[int(k)] if k >= 0 else "" for k in uk.tolist()]
        if label == "function":      # one row per function, whatever its hottest line ("file:func:line")
            names = [function_of(n) for n in names]
        tab = out.setdefault(label, {})
        for nm, sm, c in zip(names, sums.tolist(), np.asarray(cnt).tolist()):
            if label == "range" and str(nm).startswith("ProfilerStep#"):
                continue       # step numbers differ between runs by construction
            prev = tab.get(nm, (0.0, 0))
            tab[nm] = (prev[0] + sm / 1e6, prev[1] + int(c))
    return out


def _named_from_report(rep: dict) -> dict[str, dict[str, tuple[float, int]]]:
    out: dict[str, dict[str, tuple[float, int]]] = {}
    k = {}
    for r in (rep.get("kernels") or {}).get("top") or []:
        prev = k.get(r["name"], (0.0, 0))
        k[r["name"]] = (prev[0] + float(r["sum_ms"]), prev[1] + int(r["calls"]))
    if k:
        out["kernel"] = k
    rg = {r["name"]: (float(r["wall_ms"]), int(r["count"])) for r in (rep.get("phases") or {}).get("ranges") or []}
    if rg:
        out["range"] = rg
    return out


def named(side: Side) -> tuple[dict, str]:
    if side.trace is not None:
        return _named_from_trace(side), "all in the window (from the trace)"
    return _named_from_report(side.report), "report.json lists only its top kernels and ranges"


def _named_diff(nb: dict, na: dict) -> dict:
    out = {}
    for kind in sorted(set(nb) | set(na)):
        b, a = nb.get(kind, {}), na.get(kind, {})
        if not b or not a:
            # one side did not record this kind at all: not 'appeared' or 'disappeared'
            out[kind] = {"recorded": {"before": bool(b), "after": bool(a)}, "appeared": [], "disappeared": [], "changed": []}
            continue
        appeared = sorted(({"name": n, "ms": v[0], "count": v[1]} for n, v in a.items() if n not in b), key=lambda r: -r["ms"])
        disappeared = sorted(({"name": n, "ms": v[0], "count": v[1]} for n, v in b.items() if n not in a), key=lambda r: -r["ms"])
        changed = []
        for n in set(a) & set(b):
            d = a[n][0] - b[n][0]
            changed.append({"name": n, "before_ms": b[n][0], "after_ms": a[n][0], "delta_ms": d,
                            "delta_pct": 100 * d / b[n][0] if b[n][0] else None,
                            "before_count": b[n][1], "after_count": a[n][1]})
        changed.sort(key=lambda r: (-abs(r["delta_ms"]), r["name"]))
        out[kind] = {"recorded": {"before": True, "after": True}, "appeared_count": len(appeared),
                     "disappeared_count": len(disappeared), "appeared": appeared[:TOP_CHANGED],
                     "disappeared": disappeared[:TOP_CHANGED], "changed": changed[:TOP_CHANGED]}
    return out
