"""Kernels: top kernels by total time, launch rate, tiny-kernel share, launch storms,
launch-API time vs kernel time.

Kernel selection and time, the same rule as per_pid and nvtx: every kernel (and CUDA-graph
execution) overlapping the window; ``*_sum_ms`` is the sum of their durations clipped to the
window, summed over streams (stream-time: it can exceed the window when streams overlap; the
wall-time union is ``gpu.kernel_busy_ms``).  Per-call statistics (mean, p50, p90, max) use
whole durations."""
from __future__ import annotations

import re

import numpy as np

from .. import thresholds
from ..classes import COMM_KERNEL_RE
from ..trace.kinds import SpanKind
from ..wording import short_kernel_name  # noqa: F401  (evidence, diagnosis_gpu*, kernel_limits import it from here)
from ..trace.model import Trace
from .classify import GRAPH_LAUNCH_API_RE, kernel_mask, launch_api_mask, spans_matching
from .select import clipped_durations, group_sum, in_window, starts_inside
from .stats import fast_unique, grouped_stats, percentile
from .window import Window


def classify_launch_storm(launches_per_s: float, p50_us: float) -> tuple[bool, str]:
    for min_rate, max_p50 in thresholds.LAUNCH_STORM_RULES:
        if launches_per_s >= min_rate and p50_us <= max_p50:
            return True, f">= {min_rate:,.0f} launches/s with p50 <= {max_p50:g} us"
    return False, "below every storm rule (" + "; ".join(
        f">= {r:,.0f}/s and p50 <= {p:g} us" for r, p in thresholds.LAUNCH_STORM_RULES) + ")"


def kernels(trace: Trace, window: Window, top_n: int = 20) -> dict:
    s = trace.spans
    idx = in_window(trace, kernel_mask(trace), window)
    n = len(idx)
    out: dict = {"count": int(n)}
    if n == 0:
        out.update({"kernel_sum_ms": 0.0, "top": [], "launch_storm": False})
        return out
    st, en = s.start_ns[idx], s.end_ns[idx]
    span_ns = int(en.max() - st.min())
    first_last_ns = int(st.max() - st.min())
    dur = en
    dur -= st
    del st, en
    cdur = clipped_durations(trace, idx, window)
    total_ns = int(cdur.sum())
    nm = s.name[idx]
    g = grouped_stats(nm, dur)
    g["sum"] = group_sum(nm, cdur)[1]     # same key order (sorted unique names)
    order = np.argsort(-g["sum"], kind="stable")
    rows = []
    names = trace.strings.as_list()
    # device of each name's first kernel (g["key"] is the sorted unique names)
    so = np.argsort(nm, kind="stable")
    first = so[np.concatenate(([0], np.flatnonzero(np.diff(nm[so])) + 1))]
    del so
    dev_of = trace.tracks.device[s.track[idx[first]]]
    for k in order.tolist():
        key = int(g["key"][k])
        rows.append({
            "name": names[key] if key >= 0 else "", "device": int(dev_of[k]),
            "sum_ms": g["sum"][k] / 1e6, "calls": int(g["count"][k]),
            "mean_us": g["mean"][k] / 1e3, "p50_us": g["p50"][k] / 1e3, "p90_us": g["p90"][k] / 1e3,
            "max_us": g["max"][k] / 1e3, "share_pct": 100.0 * g["sum"][k] / total_ns if total_ns else 0.0,
        })
    rate = (n - 1) / (first_last_ns / 1e9) if first_last_ns > 0 else 0.0
    p50_us = percentile(dur, 50) / 1e3
    storm, storm_rule = classify_launch_storm(rate, p50_us)
    if n < thresholds.LAUNCH_STORM_MIN_KERNELS:
        storm, storm_rule = False, f"fewer than {thresholds.LAUNCH_STORM_MIN_KERNELS} kernels: rate not meaningful"
    tiny = dur < thresholds.TINY_KERNEL_US * 1e3
    # launch API time (host side) for the launches in the window
    la = launch_api_mask(trace) & starts_inside(s.start_ns, window)
    la_dur = s.end_ns[la] - s.start_ns[la]
    launch_api_ns = int(la_dur.sum())
    launch_p50_ns = percentile(la_dur, 50) if len(la_dur) else 0.0
    typical_ns = launch_p50_ns * len(la_dur)
    out.update({
        "kernel_sum_ms": total_ns / 1e6, "distinct": int(len(g["key"])),
        "mean_us": float(dur.mean()) / 1e3, "p50_us": p50_us, "p90_us": percentile(dur, 90) / 1e3,
        "max_us": float(dur.max()) / 1e3,
        "launches_per_s": rate, "active_span_ms": span_ns / 1e6,
        "tiny_threshold_us": thresholds.TINY_KERNEL_US,
        "tiny_count": int(tiny.sum()), "tiny_pct": 100.0 * float(tiny.mean()),
        "tiny_time_pct": 100.0 * float(cdur[tiny].sum()) / total_ns if total_ns else 0.0,
        "launch_storm": bool(storm), "launch_storm_rule": storm_rule,
        "launch_api_calls": int(la.sum()), "launch_api_ms": launch_api_ns / 1e6,
        "launch_api_vs_kernel_ratio": launch_api_ns / total_ns if total_ns else None,
        "launch_api_p50_us": launch_p50_ns / 1e3,
        "launch_api_typical_vs_kernel_ratio": typical_ns / total_ns if total_ns else None,
        "classes": kernel_classes(trace, nm, cdur, total_ns),
        "graph_launches": int((la & (_graph_launch_mask(trace))).sum()),
        "top": rows[:top_n],
        "_all": rows,      # every kernel name: tables/kernels.csv (popped by the pipeline)
    })
    return out


KERNEL_CLASSES = [
    ("communication", COMM_KERNEL_RE.pattern.replace("(?i)", "")),
    ("attention", r"flash|fmha|attention|attn|sdpa|paged|mha_|xformers"),
    ("gemm", r"gemm|matmul|xmma|cutlass|cublas|s16816|h16816|sm\d\d_x|wgmma|hgemm|sgemm|bmm|_mm_|dot_|conv|implicit_convolve|cudnn"),
    ("norm_softmax_reduce", r"norm|softmax|reduce|welford|topk|argmax|sort|cumsum|scan"),
    ("copy_cat_transpose", r"copy|cat_?array|catarray|transpose|permute|gather|scatter|index|embedding|memcpy|fill|clone"),
    ("elementwise", r"elementwise|vectorized|unrolled|pointwise|triton_poi|act_and_mul|silu|gelu|rotary|rope|add|mul"),
]


_KC_PATTERNS: tuple | None = None


def _kernel_class_patterns() -> tuple[list, list | None]:
    """(KERNEL_CLASSES compiled with re.I, the same without re.I for lower-cased ASCII names --
    None unless every pattern is free of upper-case letters, so both give the same matches)."""
    global _KC_PATTERNS
    if _KC_PATTERNS is None:
        pats = [re.compile(p, re.I) for _c, p in KERNEL_CLASSES]
        safe = all(re.search(r"[A-Z]", p) is None for _c, p in KERNEL_CLASSES)
        _KC_PATTERNS = (pats, [re.compile(p) for _c, p in KERNEL_CLASSES] if safe else None)
    return _KC_PATTERNS


def kernel_classes(trace: Trace, name_ids: np.ndarray, dur: np.ndarray, total_ns: int) -> list[dict]:
    """Share of kernel time per kernel family, by name (first matching family wins)."""
    pats, lower_pats = _kernel_class_patterns()

    def cls(name: str) -> int:
        # an ASCII name is searched in lower case by the same patterns without re.I (the same
        # matches: they hold no upper-case letter or escape; ~6x faster on long C++ names)
        if lower_pats is not None and name.isascii():
            name, ps = name.lower(), lower_pats
        else:
            ps = pats
        for i, p in enumerate(ps):
            if p.search(name):
                return i
        return len(ps)

    # once per distinct kernel name (not per interned string: most are op and API names)
    uniq, inv = fast_unique(name_ids, return_inverse=True)
    lst = trace.strings.as_list()     # list indexing as the former per-string table: id -1 -> the last string
    k = np.fromiter((cls(lst[i]) for i in uniq.tolist()), dtype=np.int8, count=len(uniq))[inv.reshape(-1)]
    labels = [c for c, _ in KERNEL_CLASSES] + ["other"]
    out = []
    for i, lab in enumerate(labels):
        m = k == i
        if m.any():
            t = int(dur[m].sum())
            out.append({"class": lab, "ms": t / 1e6, "calls": int(m.sum()), "share_pct": 100.0 * t / total_ns if total_ns else 0.0})
    out.sort(key=lambda r: -r["ms"])
    return out


def _graph_launch_mask(trace: Trace) -> np.ndarray:
    return spans_matching(trace, GRAPH_LAUNCH_API_RE, kinds=(SpanKind.RUNTIME, SpanKind.DRIVER))


def kernel_table(k: dict) -> dict:
    cols = ["kernel_name", "device_id", "sum_ms", "calls", "avg_us", "p50_us", "p90_us", "max_us", "pct_kernel_time"]
    rows = [[r["name"], r["device"], round(r["sum_ms"], 6), r["calls"], round(r["mean_us"], 3),
             round(r["p50_us"], 3), round(r["p90_us"], 3), round(r["max_us"], 3), round(r["share_pct"], 3)]
            for r in k.get("_all", k.get("top", []))]
    return {"columns": cols, "rows": rows}


_LAMBDA_CUPTI = re.compile(r"\{lambda\(([^)]*)\)#(\d+)\}")
_LAMBDA_NCU = re.compile(r"\[lambda\(([^)]*)\) \(instance (\d+)\)\]")


def join_key(name: str) -> str:
    """A name both demanglers agree on: no 'void', no namespaces, no argument list, no spaces,
    lambdas as lambda(args)#n, integer literal suffixes dropped (2ul -> 2)."""
    n = re.sub(r"^void ", "", name.strip())
    n = _LAMBDA_CUPTI.sub(r"lambda(\1)#\2", n)
    n = _LAMBDA_NCU.sub(r"lambda(\1)#\2", n)
    n = n.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    n = re.sub(r"\b[A-Za-z_]\w*::", "", n)
    depth = 0
    for i, c in enumerate(n):                       # cut at the argument list (outside template brackets)
        depth += (c == "<") - (c == ">")
        if c == "(" and depth <= 0 and not n[:i].endswith("lambda"):
            n = n[:i]
            break
    n = re.sub(r"\b(\d+)(?:ull|ul|ll|u|l)\b", r"\1", n, flags=re.I)
    return re.sub(r"\s+", "", n)
