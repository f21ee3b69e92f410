"""End-to-end breakdown: an exclusive partition of the window's wall time.

Rule (documented in ARCHITECTURE.md and quoted in every report):
  The window is cut into elementary segments at every span boundary.  Each segment is
  given to the FIRST category in this priority list that has an active span in it:

    gpu_compute        kernels (and CUDA-graph executions) on any stream, communication kernels excepted
    gpu_communication  communication kernels (NCCL/RCCL collectives, send/recv; classes.COMM_KERNEL_RE)
    h2d_copy           host->device memcpy
    d2h_copy           device->host memcpy
    other_copy         other memcpy (D2D, P2P, H2H) and memset
    -- below here the GPU is idle --
    sync_wait          host blocked in a synchronising API call (cuda*Synchronize, blocking cudaMemcpy/Memset,
                       *MemcpyAsync of a pageable host buffer: classify.sync_api_mask)
    cpu_preprocessing  tokenization > other preprocessing > user code  (sampled classes; ranges named
                       like tokenize / preprocess; self time of Python functions in tokenizer,
                       image/data libraries, or in user files; user code only outside recorded
                       torch ops and CUDA API calls)
    framework_overhead kernel launch API > other CUDA runtime/driver API > host side of collective ops
                       (c10d / NCCL / Gloo, classes.COMM_OP_RE) > framework ops on the CPU in
                       GPU runs > framework Python (self time of torch/transformers/stdlib Python
                       functions; sampled framework code; outside ops in CPU-only runs)
    cpu_compute        framework ops computing on the CPU in CPU-only runs (no GPU activity in the trace)
    waiting            host off-CPU: sampled 'waiting' (sleep, I/O, locks) and OS-runtime waits >
                       run queue (live runs: runnable but not running - waiting for a CPU, from
                       schedstat; its parts are listed only when the run queue has time)
    other              nothing recorded explains this time
  The sums add up to the window exactly (integer nanoseconds).
"""
from __future__ import annotations

import numpy as np

from .stats import fast_unique

from ..trace.kinds import CopyKind, SpanKind, TrackKind
from ..trace.model import Trace
from .. import classes as CL
from ..result.base import CATEGORIES, CATEGORY_LABELS  # noqa: F401  (the vocabulary lives with the report types)
from .. import vocab as V
from . import classify as C
from .intervals import clip, coverage_on_bounds, union
from .language import part_labels
from .threads import critical_tracks, helper_tracks
from .window import Window

PART_LABELS = {
    "tokenization": "tokenization", "preprocessing": "other preprocessing", "user_code": "user code",
    "launch_api": "kernel launch API", "runtime_api": "other CUDA runtime API",
    "communication_ops": "collective ops (host side: c10d / NCCL / Gloo)", "framework_ops": "framework ops (host side)",
    "framework_python": "framework (Python and torch dispatch)",
    "off_cpu": "off-CPU (sleep, I/O, locks)", "run_queue": "run queue (runnable, waiting for a CPU)",
    "page_faults": "page faults (kernel time of the native code that faulted)",
}

SAMPLE_CLASSES = V.SAMPLE_CLASSES

Intervals = tuple  # (starts int64[], ends int64[])


def _iv(trace: Trace, mask: np.ndarray) -> Intervals:
    s = trace.spans
    idx = np.flatnonzero(mask)      # one pass over the mask for both columns
    return s.start_ns[idx], s.end_ns[idx]


def _cat(*ivs: Intervals) -> Intervals:
    ivs = [iv for iv in ivs if len(iv[0])]
    if not ivs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate([iv[0] for iv in ivs]), np.concatenate([iv[1] for iv in ivs])


def python_self_intervals(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Self time of PYTHON spans: each span minus its children, as (start, end, owner span).

    A Python frame's time belongs to its innermost frame, so a long outer frame
    (threading bootstrap, main()) only owns the moments when nothing deeper is recorded.
    """
    s = trace.spans
    py = np.flatnonzero(s.kind == SpanKind.PYTHON)
    if len(py) == 0:
        z = np.zeros(0, np.int64)
        return z, z, z
    par = s.parent.astype(np.int64)
    child = np.flatnonzero((par >= 0) & (s.kind[np.maximum(par, 0)] == SpanKind.PYTHON))
    child = child[np.argsort(par[child], kind="stable")]  # by (parent, start): spans are start-sorted
    cp = par[child]
    c_st, c_en = s.start_ns[child], s.end_ns[child]
    # running max end within a parent guards against overlapping siblings
    same_next = np.zeros(len(child), dtype=bool)
    same_next[:-1] = cp[1:] == cp[:-1]
    nxt_start = np.where(same_next, np.roll(c_st, -1), s.end_ns[cp])
    gap_s = c_en
    gap_e = nxt_start
    first = np.ones(len(child), dtype=bool)
    first[1:] = cp[1:] != cp[:-1]
    lead_s = s.start_ns[cp[first]]
    lead_e = c_st[first]
    has_child = np.zeros(len(s), dtype=bool)
    has_child[cp] = True
    leaf = py[~has_child[py]]
    st = np.concatenate((gap_s, lead_s, s.start_ns[leaf]))
    en = np.concatenate((gap_e, lead_e, s.end_ns[leaf]))
    owner = np.concatenate((cp, cp[first], leaf))
    ok = en > st
    return st[ok], en[ok], owner[ok]


_PY_CLASS = {CL.TOK: 0, CL.PRE: 1, CL.FW: 2, CL.USER: 3}


def _python_class_of_names(trace: Trace) -> np.ndarray:
    """Per string id: 0 tokenization, 1 preprocessing, 2 framework, 3 user code
    (``classes.recorded_frame_domain``, the rule the live sampler uses too)."""
    return np.fromiter((_PY_CLASS[CL.recorded_frame_domain(x)] for x in trace.strings.as_list()),
                       dtype=np.int8, count=len(trace.strings))


# source key -> breakdown category (CATEGORIES), in priority order within the category
SOURCE_CATEGORY = {
    "kernel": "gpu_compute", "comm": "gpu_communication", "h2d": "h2d_copy", "d2h": "d2h_copy",
    "copy_other": "other_copy", "sync": "sync_wait",
    "tokenization": "cpu_preprocessing", "preprocessing": "cpu_preprocessing", "user_code": "cpu_preprocessing",
    "launch_api": "framework_overhead", "runtime_api": "framework_overhead", "communication_ops": "framework_overhead",
    "framework_ops": "framework_overhead",
    "framework_python": "framework_overhead", "cpu_ops": "cpu_compute", "page_faults": "cpu_compute",
    "waiting": "waiting", "run_queue": "waiting",
}


CHILD_SOURCES = ("tokenization", "preprocessing", "user_code", "framework_python", "cpu_ops", "run_queue")


def source_masks(trace: Trace, critical_only: bool = True) -> dict[str, np.ndarray]:
    """Per evidence source, the spans it is made of (PYTHON spans: whole frames by name; the
    breakdown itself counts only their self time).  critical_only: host classes only on the
    critical thread(s) (the breakdown); False: on every thread (the class a span is evidence of,
    drawn in the HTML strip as parallel activity)."""
    s = trace.spans
    k = s.kind
    gpu_run = trace.has_gpu
    memcpy = k == SpanKind.MEMCPY
    h2d = memcpy & (s.copy_kind == CopyKind.H2D)
    d2h = memcpy & (s.copy_kind == CopyKind.D2H)
    sample = k == SpanKind.CPU_SAMPLE
    none = np.zeros(len(s), dtype=bool)

    def sample_class(name: str) -> np.ndarray:
        sid = trace.strings.get(name)
        return sample & (s.name == sid) if sid >= 0 else none

    sync = C.sync_api_mask(trace)
    host_api = C.host_api_mask(trace)
    launch = C.launch_api_mask(trace)
    cpu_op = k == SpanKind.CPU_OP
    ann = k == SpanKind.ANNOTATION
    py = k == SpanKind.PYTHON
    pcls = np.full(len(s), -1, np.int8)
    if py.any():
        pcls[py] = _python_class_of_names(trace)[s.name[py]]
    # host classes count on the critical thread(s) only (analyze/threads.py); spans on GPU tracks and
    # blocking syncs count wherever they are
    crit, _ = critical_tracks(trace)
    on = (crit | (trace.tracks.kind != TrackKind.CPU_THREAD))[s.track] if len(s) else np.zeros(0, dtype=bool)
    kids = helper_tracks(trace)[s.track] if len(s) else np.zeros(0, dtype=bool)
    masks = {
        "kernel": C.compute_kernel_mask(trace),
        "comm": C.comm_kernel_mask(trace),
        "h2d": h2d,
        "d2h": d2h,
        "copy_other": (memcpy & ~h2d & ~d2h) | (k == SpanKind.MEMSET),
        "sync": sync,
        "tokenization": sample_class(V.CLS_TOKENIZATION) | C.spans_matching(trace, C.TOKENIZE_NAME_RE, base_mask=ann) | (pcls == 0),
        "preprocessing": sample_class(V.CLS_PREPROCESSING) | C.spans_matching(trace, C.PREPROCESS_NAME_RE, base_mask=ann) | (pcls == 1),
        "user_code": sample_class(V.CLS_USER_CODE) | (pcls == 3),
        "launch_api": launch & ~sync,
        "runtime_api": host_api & ~launch & ~sync,
        "communication_ops": C.spans_matching(trace, CL.COMM_OP_RE, base_mask=cpu_op) if gpu_run else none,
        "framework_ops": cpu_op if gpu_run else none,
        "framework_python": sample_class(V.CLS_FRAMEWORK) | (sample_class(V.CLS_CPU_COMPUTE) if gpu_run else none) | (pcls == 2),
        "cpu_ops": (cpu_op | sample_class(V.CLS_CPU_COMPUTE)) if not gpu_run else none,
        # the live sampler's page-fault kernel time of native code (collect/rules_perf.fault_kernel_part)
        "page_faults": sample_class(V.CLS_PAGE_FAULTS),
        # exact records that the host is inside the framework (a torch op, a CUDA API call)
        "in_op": cpu_op | host_api,
        "waiting": sample_class(V.CLS_WAITING) | (k == SpanKind.OS_RUNTIME),
        "run_queue": sample_class(V.CLS_RUN_QUEUE),
    }
    if critical_only:
        # followed child processes' and native threads' CPU work: counted only where the critical
        # thread does nothing of its own (segment_classes), so it explains its waiting on them
        if kids.any():
            # a child's own start-up (its module imports) is not the work the main process waits for
            imp = np.zeros(len(s), dtype=bool)
            sm = sample & (s.detail >= 0)
            imp[sm] = trace.strings.ids_matching(lambda x: x.startswith("import "))[s.detail[sm]]
            for key in CHILD_SOURCES:
                masks["child_" + key] = masks[key] & kids & ~imp
        for key in list(masks):
            if key not in ("kernel", "comm", "h2d", "d2h", "copy_other", "sync") and not key.startswith("child_"):
                masks[key] = masks[key] & on
    return masks


def span_categories(trace: Trace) -> np.ndarray:
    """Breakdown category index (into CATEGORIES) of every span that is evidence for one, by the
    same sources and priority as the breakdown; -1 for spans that are evidence for none (markers,
    ranges with no class).  The HTML strip draws spans with these classes, on every thread (the
    breakdown counts host classes on the critical thread(s) only)."""
    out = np.full(len(trace.spans), -1, dtype=np.int8)
    for key, m in source_masks(trace, critical_only=False).items():   # dict order = priority order
        if key in SOURCE_CATEGORY:                # 'in_op' only narrows user_code
            out[m & (out < 0)] = CATEGORIES.index(SOURCE_CATEGORY[key])
    return out


def source_intervals(trace: Trace) -> dict[str, Intervals]:
    """Intervals for every evidence source the categories are built from (Python frames: self time)."""
    return dict(iter_source_intervals(trace))


def iter_source_intervals(trace: Trace):
    """(source, intervals) for each evidence source in priority order, one at a time: a source's mask
    is dropped once its intervals are made (a consumer that keeps less than the intervals, as
    segment_classes does, holds one source's full-length arrays at a time)."""
    s = trace.spans
    masks = source_masks(trace)
    py = s.kind == SpanKind.PYTHON
    pst, pen, powner = python_self_intervals(trace)
    not_py = ~py
    none = np.zeros(0, dtype=s.start_ns.dtype), np.zeros(0, dtype=s.end_ns.dtype)
    for key in list(masks):
        m = masks.pop(key)
        if not m.any():     # most sources are empty in a given trace: no pass over the spans for them
            yield key, none
            continue
        iv = _iv(trace, m & not_py)
        if len(powner) and m[py].any():
            sel = m[powner]
            iv = _cat(iv, (pst[sel], pen[sel]))
        del m
        yield key, iv
        del iv


def segment_classes(trace: Trace, window: Window):
    """Elementary segments of the window and the category index of each.

    Returns (seg_start_ns, seg_end_ns, cat_idx, part_names, part_idx) — part_idx is -1
    where the category has no sub-parts.
    """
    lo, hi = int(window.start_ns), int(window.end_ns)
    # coverage only changes at the edges of each source's union, so segment there
    unions = {}
    for key, (a, b) in iter_source_intervals(trace):
        unions[key] = union(*clip(a, b, lo, hi))
        del a, b
    if hi <= lo:
        bounds = np.zeros(1, dtype=np.int64)
    else:
        edges = [np.asarray([lo, hi], dtype=np.int64)] + [x for u in unions.values() for x in u]
        bounds = fast_unique(np.concatenate(edges))
        del edges
    seg_s = bounds[:-1]
    seg_e = bounds[1:]
    # 'in_op' only narrows user_code: without user code its coverage is never read (its edges stay in bounds)
    c = {key: (np.zeros(len(seg_s), dtype=bool) if key == "in_op" and not len(unions["user_code"][0])
               else coverage_on_bounds(us, ue, bounds)) for key, (us, ue) in unions.items()}
    del unions
    gpu_run = trace.has_gpu
    framework_python = c["framework_python"] if gpu_run else (c["framework_python"] & ~c["cpu_ops"])
    # 'user code' says the innermost *Python* frame is in a user file; while an exact record (torch
    # op, CUDA API call) shows the host inside the framework below that frame, the time is the
    # framework's.  (Measured on an H100: a Python loop of 30k x.add_() was 'user code' 380 ms of
    # 460 ms although ~all host time is in torch dispatch and cudaLaunchKernel.)  Tokenization and
    # preprocessing keep their time: there the frame names the purpose of the op.
    user_code = c["user_code"] & ~c["in_op"]
    if any(k.startswith("child_") for k in c):
        # a followed child's work fills the moments the critical thread has nothing of its own
        # (it waits on the child, or nothing is recorded)
        own = c["tokenization"] | c["preprocessing"] | user_code | c["launch_api"] | c["runtime_api"] | \
            c["communication_ops"] | c["framework_ops"] | framework_python | c["cpu_ops"] | c["sync"]
        # (runnable in the run queue: the thread waits for a CPU, not for a child)
        own |= c["run_queue"]
        free = ~own
        tok_c = c["tokenization"] | (c["child_tokenization"] & free)
        pre_c = c["preprocessing"] | (c["child_preprocessing"] & free)
        user_code = user_code | (c["child_user_code"] & free)
        framework_python = framework_python | (c["child_framework_python"] & free)
        cpu_ops_c = c["cpu_ops"] | (c["child_cpu_ops"] & free)
        # a helper (native worker thread, followed child) runnable but waiting for a core while the
        # critical thread waits on it: CPU contention, the run-queue part of waiting (not off-CPU);
        # its own work wins where both are recorded
        helper_rq = c["child_run_queue"] & free & ~(c["child_tokenization"] | c["child_preprocessing"] |
                                                      c["child_user_code"] | c["child_framework_python"] | c["child_cpu_ops"])
        c["waiting"] = c["waiting"] & ~helper_rq
        c["run_queue"] = c["run_queue"] | helper_rq
        c["tokenization"], c["preprocessing"], c["cpu_ops"] = tok_c, pre_c, cpu_ops_c
    rules = [
        ("gpu_compute", [], [c["kernel"]]),
        ("gpu_communication", [], [c["comm"]]),
        ("h2d_copy", [], [c["h2d"]]),
        ("d2h_copy", [], [c["d2h"]]),
        ("other_copy", [], [c["copy_other"]]),
        ("sync_wait", [], [c["sync"]]),
        ("cpu_preprocessing", list(V.PREPROCESSING_CLASSES),
         [c["tokenization"], c["preprocessing"], user_code]),
        ("framework_overhead", ["launch_api", "runtime_api", "communication_ops", "framework_ops", "framework_python"],
         [c["launch_api"], c["runtime_api"], c["communication_ops"], c["framework_ops"], framework_python]),
        ("cpu_compute", ["page_faults", None], [c["page_faults"], c["cpu_ops"]]),   # (None: no part of its own)
        ("waiting", ["off_cpu", "run_queue"], [c["waiting"], c["run_queue"]]),
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
            if parts and parts[pi] is not None:
                part[take] = len(part_names) + pi
            any_cov |= cv
        take = unassigned & any_cov
        cat[take] = ci
        unassigned &= ~take
        part_names.extend(parts)
    return seg_s, seg_e, cat, part_names, part


def labelled_segments(trace: Trace, window: Window) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read-only view of segment_classes: (start_ns, end_ns, label) per elementary segment of the
    window, label = "category" or "category/part" (the breakdown's own partition, nothing recomputed).
    Used by the zoo truth harness (examples/zoo/zoo_harness.py)."""
    seg_s, seg_e, cat, part_names, part = segment_classes(trace, window)
    table = np.array([f"{c}/{p}" for c in CATEGORIES for p in part_names] + list(CATEGORIES), dtype=object)
    code = np.where(part < 0, len(CATEGORIES) * len(part_names) + cat.astype(np.int64),
                    cat.astype(np.int64) * len(part_names) + part)
    return seg_s, seg_e, table[code]


def breakdown(trace: Trace, window: Window) -> dict:
    seg_s, seg_e, cat, part_names, part = segment_classes(trace, window)
    dur = seg_e - seg_s
    total_ns = int(window.dur_ns)
    cat_ns = np.array([int(dur[cat == i].sum()) for i in range(len(CATEGORIES))], dtype=np.int64)
    part_ns = np.array([int(dur[part == i].sum()) for i in range(len(part_names))], dtype=np.int64)
    # part index -> category
    part_cat = {}
    for pn in part_names:
        if pn in V.PREPROCESSING_CLASSES:
            part_cat[pn] = "cpu_preprocessing"
        elif pn in ("off_cpu", "run_queue"):
            part_cat[pn] = "waiting"
        elif pn in ("page_faults", None):
            part_cat[pn] = "cpu_compute"
        else:
            part_cat[pn] = "framework_overhead"
    rows = []
    labels = part_labels(trace, PART_LABELS)
    for i, name in enumerate(CATEGORIES):
        ns = int(cat_ns[i])
        row = {"category": name, "label": CATEGORY_LABELS[name], "ns": ns, "ms": ns / 1e6,
               "pct": (100.0 * ns / total_ns) if total_ns else 0.0, "parts": []}
        for j, pn in enumerate(part_names):
            if name == "waiting" and not part_ns[part_names.index("run_queue")]:
                break                         # waiting's parts only when the run queue has time
            if part_cat[pn] == name and part_ns[j] > 0:
                pns = int(part_ns[j])
                row["parts"].append({"name": pn, "label": labels.get(pn, pn), "ns": pns, "ms": pns / 1e6,
                                     "pct": (100.0 * pns / total_ns) if total_ns else 0.0})
        rows.append(row)
    if total_ns and int(cat_ns.sum()) != total_ns:  # an invariant, not an input problem
        raise RuntimeError(f"breakdown does not partition the window ({int(cat_ns.sum())} != {total_ns} ns)")
    return {"e2e_ns": total_ns, "e2e_ms": total_ns / 1e6, "breakdown": rows,
            "rule": "exclusive partition, categories in priority order: " + ", ".join(CATEGORIES)}


def share(result_breakdown: list[dict], category: str) -> float:
    for r in result_breakdown:
        if r["category"] == category:
            return float(r["pct"])
    return 0.0
