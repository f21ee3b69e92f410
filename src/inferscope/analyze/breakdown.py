"""End-to-end breakdown: an exclusive partition of the window's wall time.

Rule (documented in ARCHITECTURE.md and quoted in every report):
  The window is cut into elementary segments at every span boundary.  Each segment is
  given to the FIRST category in this priority list that has an active span in it:

    gpu_compute        kernels (and CUDA-graph executions) on any stream
    h2d_copy           host->device memcpy
    d2h_copy           device->host memcpy
    other_copy         other memcpy (D2D, P2P, H2H) and memset
    -- below here the GPU is idle --
    sync_wait          host blocked in a synchronising API call (cuda*Synchronize, blocking cudaMemcpy/Memset)
    cpu_preprocessing  tokenization > other preprocessing > user code  (sampled classes, or ranges /
                       Python functions whose names say tokenize / preprocess)
    framework_overhead CUDA runtime/driver calls, framework ops on the CPU in GPU runs, sampled
                       framework Python (torch/transformers code outside an op in CPU-only runs)
    cpu_compute        framework ops computing on the CPU in CPU-only runs (no GPU activity in the trace)
    waiting            host off-CPU: sampled 'waiting' (sleep, I/O, locks) and OS-runtime waits
    other              nothing recorded explains this time
  The sums add up to the window exactly (integer nanoseconds).
"""
from __future__ import annotations

import numpy as np

from ..trace.kinds import CopyKind, SpanKind
from ..trace.model import Trace
from . import classify as C
from .intervals import active_at
from .window import Window

CATEGORIES = ("gpu_compute", "h2d_copy", "d2h_copy", "other_copy", "sync_wait", "cpu_preprocessing",
              "framework_overhead", "cpu_compute", "waiting", "other")

CATEGORY_LABELS = {
    "gpu_compute": "GPU compute",
    "h2d_copy": "H2D copy",
    "d2h_copy": "D2H copy",
    "other_copy": "Other copies / memset",
    "sync_wait": "Sync wait",
    "cpu_preprocessing": "CPU preprocessing",
    "framework_overhead": "Framework overhead",
    "cpu_compute": "CPU compute",
    "waiting": "Waiting (off-CPU)",
    "other": "Other / unattributed",
}

PART_LABELS = {
    "tokenization": "tokenization", "preprocessing": "other preprocessing", "user_code": "user code",
    "launch_api": "CUDA runtime / launch API", "framework_ops": "framework ops (host side)",
    "framework_python": "framework Python",
}

SAMPLE_CLASSES = ("tokenization", "preprocessing", "user_code", "framework", "cpu_compute", "waiting")


def source_masks(trace: Trace) -> dict[str, np.ndarray]:
    """Boolean span masks for every evidence source the categories are built from."""
    s = trace.spans
    k = s.kind
    gpu_run = trace.has_gpu
    memcpy = k == SpanKind.MEMCPY
    h2d = memcpy & (s.copy_kind == CopyKind.H2D)
    d2h = memcpy & (s.copy_kind == CopyKind.D2H)
    sample = k == SpanKind.CPU_SAMPLE

    def sample_class(name: str) -> np.ndarray:
        sid = trace.strings.get(name)
        return sample & (s.name == sid) if sid >= 0 else np.zeros(len(s), dtype=bool)

    named_kinds = (SpanKind.ANNOTATION, SpanKind.PYTHON)
    sync = C.sync_api_mask(trace)
    host_api = C.host_api_mask(trace)
    cpu_op = k == SpanKind.CPU_OP
    m = {
        "kernel": np.isin(k, [SpanKind.KERNEL, SpanKind.GRAPH_LAUNCH]),
        "h2d": h2d,
        "d2h": d2h,
        "copy_other": (memcpy & ~h2d & ~d2h) | (k == SpanKind.MEMSET),
        "sync": sync,
        "tokenization": sample_class("tokenization") | C.spans_matching(trace, C.TOKENIZE_RE, kinds=named_kinds),
        "preprocessing": sample_class("preprocessing") | C.spans_matching(trace, C.PREPROCESS_RE, kinds=named_kinds),
        "user_code": sample_class("user_code"),
        "launch_api": host_api & ~sync,
        "framework_ops": cpu_op if gpu_run else np.zeros(len(s), dtype=bool),
        "framework_python": sample_class("framework") | (sample_class("cpu_compute") if gpu_run else False),
        "cpu_ops": (cpu_op | sample_class("cpu_compute")) if not gpu_run else np.zeros(len(s), dtype=bool),
        "waiting": sample_class("waiting") | (k == SpanKind.OS_RUNTIME),
    }
    return m


def segment_classes(trace: Trace, window: Window):
    """Elementary segments of the window and the category index of each.

    Returns (seg_start_ns, seg_end_ns, cat_idx, part_names, part_idx) — part_idx is -1
    where the category has no sub-parts.
    """
    lo, hi = int(window.start_ns), int(window.end_ns)
    s = trace.spans
    masks = source_masks(trace)
    relevant = np.zeros(len(s), dtype=bool)
    for v in masks.values():
        relevant |= v
    st = np.maximum(s.start_ns[relevant], lo)
    en = np.minimum(s.end_ns[relevant], hi)
    ok = en > st
    bounds = np.unique(np.concatenate(([lo, hi], st[ok], en[ok])))
    seg_s = bounds[:-1]
    seg_e = bounds[1:]
    if hi <= lo:
        seg_s = seg_e = np.zeros(0, dtype=np.int64)

    def cov(key: str) -> np.ndarray:
        mk = masks[key]
        if not mk.any() or len(seg_s) == 0:
            return np.zeros(len(seg_s), dtype=bool)
        return active_at(s.start_ns[mk], s.end_ns[mk], seg_s) > 0

    c = {key: cov(key) for key in masks}
    gpu_run = trace.has_gpu
    framework_python = c["framework_python"] if gpu_run else (c["framework_python"] & ~c["cpu_ops"])
    rules = [
        ("gpu_compute", [], [c["kernel"]]),
        ("h2d_copy", [], [c["h2d"]]),
        ("d2h_copy", [], [c["d2h"]]),
        ("other_copy", [], [c["copy_other"]]),
        ("sync_wait", [], [c["sync"]]),
        ("cpu_preprocessing", ["tokenization", "preprocessing", "user_code"],
         [c["tokenization"], c["preprocessing"], c["user_code"]]),
        ("framework_overhead", ["launch_api", "framework_ops", "framework_python"],
         [c["launch_api"], c["framework_ops"], framework_python]),
        ("cpu_compute", [], [c["cpu_ops"]]),
        ("waiting", [], [c["waiting"]]),
    ]
    n = len(seg_s)
    cat = np.full(n, len(CATEGORIES) - 1, dtype=np.int8)  # default: other
    part = np.full(n, -1, dtype=np.int8)
    unassigned = np.ones(n, dtype=bool)
    part_names: list[str] = []
    for ci, (name, parts, covs) in enumerate(rules):
        any_cov = np.zeros(n, dtype=bool)
        for pi, cv in enumerate(covs):
            take = unassigned & cv & ~any_cov
            if parts:
                part[take] = len(part_names) + pi
            any_cov |= cv
        take = unassigned & any_cov
        cat[take] = ci
        unassigned &= ~take
        part_names.extend(parts)
    return seg_s, seg_e, cat, part_names, part


def breakdown(trace: Trace, window: Window) -> dict:
    seg_s, seg_e, cat, part_names, part = segment_classes(trace, window)
    dur = seg_e - seg_s
    total_ns = int(window.dur_ns)
    cat_ns = np.array([int(dur[cat == i].sum()) for i in range(len(CATEGORIES))], dtype=np.int64)
    part_ns = np.array([int(dur[part == i].sum()) for i in range(len(part_names))], dtype=np.int64)
    # part index -> category
    part_cat = {}
    for pn in part_names:
        if pn in ("tokenization", "preprocessing", "user_code"):
            part_cat[pn] = "cpu_preprocessing"
        else:
            part_cat[pn] = "framework_overhead"
    rows = []
    for i, name in enumerate(CATEGORIES):
        ns = int(cat_ns[i])
        row = {"category": name, "label": CATEGORY_LABELS[name], "ns": ns, "ms": ns / 1e6,
               "pct": (100.0 * ns / total_ns) if total_ns else 0.0, "parts": []}
        for j, pn in enumerate(part_names):
            if part_cat[pn] == name and part_ns[j] > 0:
                pns = int(part_ns[j])
                row["parts"].append({"name": pn, "label": PART_LABELS.get(pn, pn), "ns": pns, "ms": pns / 1e6,
                                     "pct": (100.0 * pns / total_ns) if total_ns else 0.0})
        rows.append(row)
    assert int(cat_ns.sum()) == total_ns or total_ns == 0
    return {"e2e_ns": total_ns, "e2e_ms": total_ns / 1e6, "breakdown": rows,
            "rule": "exclusive partition by priority: " + " > ".join(CATEGORIES)}


def share(result_breakdown: list[dict], category: str) -> float:
    for r in result_breakdown:
        if r["category"] == category:
            return float(r["pct"])
    return 0.0
