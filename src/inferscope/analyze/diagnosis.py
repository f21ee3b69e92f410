"""Diagnosis: turn the analyses' numbers into findings and one verdict.

Findings are a list of small rule functions (``RULES``), one per finding id, each
``rule(res, found) -> dict | None`` over the assembled result (``found``: the findings of the
rules before it, by id).  Every finding carries a stable snake_case id, a severity, a title,
the evidence numbers it rests on and a concrete suggestion.  Each evidence number is *cited*:
``evidence_source[key]`` is the path of the result value it was read from (``syncs.blocked_ms``,
``breakdown[sync_wait].ms``, ``kernels.top[0].share_pct``), so a reader (and a test) can check
it against the table it comes from.  Suggestions never promise a speed-up figure.  Every
threshold is in ``thresholds.py`` with its source.

Verdict rule: the breakdown categories are grouped (gpu_compute -> gpu_bound;
gpu_communication -> communication_bound; h2d+d2h+other copies -> copy_bound; sync_wait ->
sync_bound; cpu_preprocessing -> cpu_bound, except its user_code part -> user_code_bound; framework_overhead -> launch_bound when a
launch_storm or host_launch_bound finding holds, else framework_bound; cpu_compute ->
cpu_compute_bound; waiting -> waiting_bound).  The largest group decides when it holds at least
thresholds.VERDICT_MIN_SHARE_PCT of the window; otherwise the verdict is 'balanced'.
Confidence = top / (top + runner-up), scaled down by the share of time nothing in the trace
explains ('other').
"""
from __future__ import annotations

import re
from typing import Any, Callable

from .. import thresholds as T
from .blocking import blocking_io, lock_wait
from .kernels import short_kernel_name

_OVERRIDES: dict = {}    # alert levels from the configuration while findings_for runs


def _t(name: str) -> float:
    """A counter alert level: the configured value (.inferscope.yaml / INFERSCOPE_*) or thresholds.py's."""
    return float(_OVERRIDES.get(name, getattr(T, name)))


def _t_src(name: str) -> str:
    return f"configured {name.lower()}" if name in _OVERRIDES else f"thresholds.{name}"


SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2, "info": 3}

_STEP = re.compile(r"([^.\[]+)(?:\[([^\]]+)\])?")
_ROW_KEYS = ("category", "name", "class", "api", "kind", "stage", "op")


def get_path(res: dict, path: str) -> Any:
    """Value at a result path: dotted keys; ``key[i]`` indexes a list, ``key[name]`` picks the
    list row whose category/name/class/api/kind is ``name``.  None when absent."""
    cur: Any = res
    for part in path.split("."):
        m = _STEP.fullmatch(part)
        if m is None or not isinstance(cur, dict):
            return None
        cur = cur.get(m.group(1))
        sel = m.group(2)
        if sel is not None:
            if not isinstance(cur, list):
                return None
            if sel.lstrip("-").isdigit():
                i = int(sel)
                cur = cur[i] if -len(cur) <= i < len(cur) else None
            else:
                cur = next((r for r in cur if isinstance(r, dict) and any(r.get(k) == sel for k in _ROW_KEYS)), None)
    return cur


class Evidence:
    """Evidence of one finding: every value read from a result path (cited) or derived from cited
    values by a formula stated next to it."""

    def __init__(self, res: dict):
        self.res = res
        self.values: dict[str, Any] = {}
        self.sources: dict[str, str] = {}
        self.derived: dict[str, str] = {}

    def cite(self, key: str, path: str, nd: int = 3, default=0.0):
        v = get_path(self.res, path)
        if v is None:
            v = default
        self.values[key] = round(float(v), nd) if isinstance(v, float) else v
        self.sources[key] = path
        return v

    def cite_all(self, base: str, **fields) -> list:
        """Cite several fields of one section: ``key=field`` or ``key=(field, digits)``; values in order."""
        out = []
        for key, f in fields.items():
            field, nd = (f, 3) if isinstance(f, str) else f
            out.append(self.cite(key, f"{base}.{field}", nd))
        return out

    def derive(self, key: str, value, formula: str, nd: int = 3):
        self.values[key] = round(float(value), nd) if isinstance(value, float) else value
        self.derived[key] = formula
        return value

    def finding(self, id: str, severity: str, title: str, text: list[str], suggestion: str) -> dict:
        return {"id": id, "severity": severity, "title": title, "evidence": self.values,
                "evidence_source": self.sources, "evidence_derived": self.derived,
                "evidence_text": text, "suggestion": suggestion}


def _row(res: dict, cat: str) -> dict:
    return next((r for r in res["breakdown"] if r["category"] == cat), {"ms": 0.0, "pct": 0.0, "parts": []})


def _pct(res: dict, cat: str) -> float:
    return float(_row(res, cat)["pct"])


def _ms(res: dict, cat: str) -> float:
    return float(_row(res, cat)["ms"])


HOST_CATEGORIES = ("sync_wait", "cpu_preprocessing", "framework_overhead", "waiting", "other")


# Culprits: where a finding's time is, by name (result['culprits'], kernels.top, syncs.top).
# (path, name field, ms field, pct field, what the pct is of, file field)
_FN = lambda cls: (f"culprits.functions[{cls}]", "function", "self_ms", "self_pct", "of the window (self time)", "file")
_OP = ("culprits.ops[0]", "name", "self_ms", "self_pct", "of the window (op self time)", None)
_API = ("culprits.apis[cuda]", "name", "total_ms", "pct_of_window", "of the window (calls summed)", None)
_OS = ("culprits.apis[os]", "name", "total_ms", "pct_of_window", "of the window (calls summed over threads)", None)
_KERNEL = ("kernels.top[0]", "name", "sum_ms", "share_pct", "of kernel time", None)
_SYNC = ("syncs.top[0]", "api", "ms", None, "", None)
CULPRIT_SOURCES = {
    "tokenization": [_FN("tokenization")],
    "preprocessing": [_FN("preprocessing")],
    "user_code": [_FN("user_code")],
    "cpu_preprocessing": [_FN("tokenization"), _FN("preprocessing"), _FN("user_code")],
    "framework_overhead": [_OP, _API, _FN("framework")],
    "cpu_compute": [_FN("cpu_compute"), _OP],
    "waiting": [_FN("waiting"), _OS],
    "sync_wait": [_SYNC, _API],
    "gpu_compute": [_KERNEL],
    "other": [_API, _OP, _KERNEL, ("culprits.functions[0]",) + _FN("x")[1:]],
}


def _culprit(e: "Evidence", res: dict, sources: list, key: str = "culprit") -> str | None:
    """Cite the first culprit found among ``sources``; returns its sentence (name, file, ms, share)."""
    for path, name_f, ms_f, pct_f, pct_of, file_f in sources:
        row = get_path(res, path)
        if not isinstance(row, dict) or not row.get(name_f):
            continue
        name = e.cite(key, f"{path}.{name_f}")
        ms = e.cite(f"{key}_ms", f"{path}.{ms_f}")
        where = f" ({row[file_f]})" if file_f and row.get(file_f) else ""
        pct = e.cite(f"{key}_pct", f"{path}.{pct_f}", 2) if pct_f else None
        shown = short_kernel_name(name) if path.startswith("kernels.") else name
        return (f"Culprit: {str(shown)[:120]}{where}: {ms:,.1f} ms" + (f", {pct:.1f}% {pct_of}" if pct is not None else "") + ".")
    return None


def _with_culprit(e: "Evidence", res: dict, cat: str, txt: list[str], key: str = "culprit") -> str | None:
    c = _culprit(e, res, CULPRIT_SOURCES.get(cat, []), key)
    if c:
        txt.append(c)
    return c


def _sev(value: float, medium: float, high: float, below: str | None = None) -> str | None:
    return "high" if value >= high else "medium" if value >= medium else below


# --------------------------------------------------------------------------------------------
# rules, one per finding id
# --------------------------------------------------------------------------------------------
def gpu_idle(res: dict, found: dict) -> dict | None:
    gpu = res.get("gpu")
    if gpu is None or gpu["idle_pct"] < T.GPU_IDLE_MEDIUM_PCT:
        return None
    e = Evidence(res)
    idle_pct = e.cite("gpu_idle_pct", "gpu.idle_pct", 2)
    idle_ms = e.cite("gpu_idle_ms", "gpu.idle_ms")
    e2e = e.cite("window_ms", "e2e_ms")
    e.cite("gpu_busy_ms", "gpu.busy_ms")
    top_host = max(HOST_CATEGORIES, key=lambda c: _ms(res, c))
    e.derive("largest_host_category_while_idle", top_host, "largest of breakdown " + ", ".join(HOST_CATEGORIES))
    e.cite("largest_host_category_ms", f"breakdown[{top_host}].ms")
    txt = [f"GPU idle {idle_pct:.1f}% of the window ({idle_ms:.2f} ms of {e2e:.2f} ms); "
           f"busy = union of kernel, memcpy and memset intervals on all streams."]
    if gpu.get("idle_pct_active_span") is not None:
        txt.append(f"Idle {gpu['idle_pct_active_span']:.1f}% of the GPU-active span ({gpu['active_span_ms']:.2f} ms, "
                   "first to last GPU activity).")
    gaps = res.get("idle_gaps") or {}
    bc = gaps.get("by_class_stream_ms") or {}
    if bc and any(bc.values()):
        n = e.cite("streams", "idle_gaps.streams")
        for k in bc:
            e.cite(f"gap_{k}_stream_ms", f"idle_gaps.by_class_stream_ms.{k}")
        txt.append(f"Per-stream gaps by cause, summed over {n} stream(s) (stream-time, not window time): "
                   + ", ".join(f"{k} {v:.2f} ms" for k, v in bc.items()) + ".")
    if gaps.get("largest"):
        g0 = gaps["largest"][0]
        e.cite("largest_gap_ms", "idle_gaps.largest[0].ms")
        e.cite("largest_gap_host_activity", "idle_gaps.largest[0].host", default=None)
        txt.append(f"Largest idle gap (no activity on any stream) {g0['ms']:.2f} ms at +{g0['offset_ms']:.2f} ms; "
                   f"host meanwhile: {g0.get('host')}.")
    txt.append(f"While the GPU was idle the largest host category was {top_host} ({_ms(res, top_host):.2f} ms).")
    _with_culprit(e, res, top_host, txt)
    sugg = {
        "sync_wait": "Remove host-device synchronisation from the hot path (see sync_stall); keep the GPU queue non-empty.",
        "cpu_preprocessing": "Overlap CPU preprocessing with GPU work: tokenize/prepare the next batch in a worker thread or process while the GPU runs the current one.",
        "framework_overhead": "Reduce per-op host overhead: capture the steady-state loop in CUDA graphs (torch.compile mode='reduce-overhead' or torch.cuda.graphs), fuse small ops, or raise the batch size.",
        "waiting": "The host is off-CPU (sleep, I/O, locks) while the GPU waits: move I/O off the inference thread and check lock contention.",
        "other": "Host activity in the gaps is not covered by the trace: profile with CPU sampling (inferscope run) or add NVTX/record_function ranges.",
    }[top_host]
    return e.finding("gpu_idle", _sev(idle_pct, T.GPU_IDLE_MEDIUM_PCT, T.GPU_IDLE_HIGH_PCT),
                     f"GPU idle {idle_pct:.0f}% of the timeline", txt, sugg)


def sync_stall(res: dict, found: dict) -> dict | None:
    sy = res.get("syncs") or {}
    if not sy.get("count"):
        return None
    e = Evidence(res)
    n = e.cite("sync_calls", "syncs.count")
    blocked = e.cite("blocked_ms", "syncs.blocked_ms")
    blocked_pct = e.cite("blocked_pct", "syncs.blocked_pct", 2)
    idle_ms = e.cite("sync_wait_ms", "breakdown[sync_wait].ms")
    idle_pct = e.cite("sync_wait_pct", "breakdown[sync_wait].pct", 2)
    top = e.cite("top_sync_api", "syncs.top[0].api", default=None)
    e.cite("top_sync_api_issued_by", "syncs.top[0].issued_by", default=None)
    top_ms = e.cite("top_sync_api_ms", "syncs.top[0].ms")
    top_n = e.cite("top_sync_api_count", "syncs.top[0].count", default=0)
    pg_ms = e.cite("pageable_copy_calls_sum_ms", "syncs.pageable_copy_calls_sum_ms")
    td = e.cite("tiny_d2h_reads", "syncs.tiny_d2h.count", default=0)
    txt = [f"{n} blocking calls held the host {blocked:.2f} ms ({blocked_pct:.1f}% of the window, union over threads).",
           f"Top: {top} x{top_n} = {top_ms:.2f} ms, issued by {sy['top'][0]['issued_by'] if sy.get('top') else None}."]
    if pg_ms:
        txt.append(f"{pg_ms:.2f} ms of the calls are copies with a pageable host side (see pageable_copy).")
    txt.append(f"{idle_ms:.2f} ms of it with the GPU idle (breakdown sync_wait, {idle_pct:.1f}% of the window); "
               "severity follows that part: blocking while the GPU computes costs little.")
    if td:
        txt.append(f"{td} device->host reads of <= {sy['tiny_d2h']['threshold_bytes']} bytes (the .item()/.cpu() pattern).")
    return e.finding("sync_stall", _sev(idle_pct, T.SYNC_STALL_MEDIUM_PCT, T.SYNC_STALL_HIGH_PCT, "low"),
                     "Host blocked in CPU-GPU synchronisation", txt,
                     "Avoid per-step .item()/.cpu()/print of GPU tensors and explicit torch.cuda.synchronize() in the loop; "
                     "keep results on the GPU and read them once per batch, or use non_blocking copies with CUDA events.")


def pageable_copy(res: dict, found: dict) -> dict | None:
    pg = (res.get("copies") or {}).get("pageable") or {}
    if pg.get("count", 0) < T.PAGEABLE_COPY_MIN_COUNT:
        return None
    e = Evidence(res)
    n = e.cite("pageable_copies", "copies.pageable.count")
    gpu_ms = e.cite("pageable_copy_gpu_ms", "copies.pageable.ms")
    nbytes = e.cite("pageable_bytes", "copies.pageable.bytes")
    calls_ms = e.cite("pageable_copy_calls_sum_ms", "syncs.pageable_copy_calls_sum_ms")
    e2e = e.cite("window_ms", "e2e_ms")
    # what pageable copies cost is the host blocked in their calls (the driver stages them)
    # or, for copies issued without a host record, their GPU time
    cost = max(calls_ms, gpu_ms)
    pct = e.derive("cost_pct_of_window", 100.0 * cost / e2e if e2e else 0.0,
                   "100 * max(pageable_copy_calls_sum_ms, pageable_copy_gpu_ms) / window_ms")
    apis = pg.get("by_api") or []
    if apis:
        e.cite("top_pageable_copy_api", "copies.pageable.by_api[0].api", default=None)
    txt = [f"{n} copies from/to pageable host memory: {gpu_ms:.3f} ms on the GPU, {nbytes:,} bytes; "
           f"their calls blocked the host {calls_ms:.3f} ms ({pct:.2f}% of the window)."]
    if apis:
        e.cite("top_pageable_copy_api_ms", "copies.pageable.by_api[0].ms")
        txt.append("Issued by: " + ", ".join(f"{a['api']} x{a['count']} ({a['ms']:.3f} ms on the GPU)" for a in apis[:3]) + ".")
    sev = _sev(pct, T.PAGEABLE_COPY_MIN_PCT, T.SYNC_STALL_HIGH_PCT, "low")
    return e.finding("pageable_copy", sev, "Host<->device copies use pageable memory", txt,
                     "Allocate host buffers pinned (tensor.pin_memory(), DataLoader(pin_memory=True)) and copy with "
                     "non_blocking=True, so copies are true DMA and can overlap compute.")


def small_copies(res: dict, found: dict) -> dict | None:
    sm = (res.get("copies") or {}).get("small") or {}
    if not sm.get("storm"):
        return None
    e = Evidence(res)
    n, ms, thr, pct = e.cite_all("copies.small", small_copies="count", small_copy_ms="ms",
                                 threshold_bytes="threshold_bytes", pct_of_window=("pct_of_window", 2))
    txt = [f"{n} copies under {thr:,} bytes took {ms:.3f} ms on the GPU ({pct:.2f}% of the window)."]
    copy_api = next((i for i, r in enumerate((res.get("culprits") or {}).get("apis") or [])
                     if r["kind"] == "cuda" and ("Memcpy" in r["name"] or "memcpy" in r["name"])), None)
    if copy_api is not None:
        txt.append(_culprit(e, res, [(f"culprits.apis[{copy_api}]", "name", "total_ms", "pct_of_window",
                                      "of the window (calls summed)", None)], "copy_api"))
    return e.finding("small_copies", "medium" if pct >= T.SMALL_COPY_STORM_PCT else "low", "Many small host<->device copies",
                     txt,
                     "Batch small transfers: stack tensors on the host and copy once, keep per-step scalars on the GPU.")


def launch_storm(res: dict, found: dict) -> dict | None:
    k = res.get("kernels") or {}
    if not k.get("launch_storm"):
        return None
    e = Evidence(res)
    n, rate, p50, tiny, rule = e.cite_all("kernels", kernels="count", launches_per_s="launches_per_s",
                                          kernel_p50_us="p50_us", tiny_pct="tiny_pct", rule="launch_storm_rule")
    txt = [f"{n} kernels at {rate:,.0f} launches/s, median {p50:.2f} us ({rule}).",
           f"{tiny:.0f}% of kernels are shorter than {k['tiny_threshold_us']:g} us."]
    _with_culprit(e, res, "gpu_compute", txt, "top_kernel")
    _culprit_launch(e, res, txt)
    return e.finding("launch_storm", "high", "Kernel launch storm", txt,
                     "Fuse small kernels (torch.compile), capture the loop in CUDA graphs, or raise the batch size so each "
                     "launch does more work.")


def _culprit_launch(e: "Evidence", res: dict, txt: list[str]) -> None:
    """The busiest launch API in the culprit table (cudaLaunchKernel, hipLaunchKernel ...)."""
    from ..classes import LAUNCH_API_RE
    apis = (res.get("culprits") or {}).get("apis") or []
    i = next((i for i, r in enumerate(apis) if r["kind"] == "cuda" and LAUNCH_API_RE.search(r["name"])), None)
    if i is not None:
        c = _culprit(e, res, [(f"culprits.apis[{i}]", "name", "total_ms", "pct_of_window", "of the window (calls summed)", None)],
                     "launch_api")
        txt.append(c.replace("Culprit:", "Launch API:"))


def dominant_kernel(res: dict, found: dict) -> dict | None:
    k = res.get("kernels") or {}
    if not (k.get("top") and k.get("distinct", 0) >= 2 and k["top"][0]["share_pct"] >= T.DOMINANT_KERNEL_SHARE_PCT):
        return None
    e = Evidence(res)
    name, share, ms, calls, _ = e.cite_all("kernels.top[0]", top_kernel="name", top_kernel_pct=("share_pct", 2),
                                           top_kernel_sum_ms="sum_ms", top_kernel_calls="calls",
                                           top_kernel_p50_us="p50_us")
    return e.finding("dominant_kernel", "medium", "One kernel dominates GPU time",
                     [f"{short_kernel_name(name)} takes {share:.1f}% of kernel time ({ms:.2f} ms over {calls} calls)."],
                     "Start there: check its shapes and dtype (tensor-core friendly sizes, bf16/fp16), and profile it with "
                     "Nsight Compute.")


def warmup_in_window(res: dict, found: dict) -> dict | None:
    oo = res.get("one_off_calls") or {}
    if not oo.get("calls"):
        return None
    e = Evidence(res)
    n, ms, pct = e.cite_all("one_off_calls", one_off_calls="count", union_ms="union_ms", union_pct=("union_pct", 2))
    e.cite_all("one_off_calls.calls[0]", longest_call="name", longest_call_ms="ms")
    return e.finding(
        "warmup_in_window", "high" if pct >= T.ONE_OFF_HIGH_PCT else "medium", "Start-up work inside the analysed window",
        [f"{n} start-up host calls (one-off calls >= {oo['threshold_ms']:.1f} ms, or >= {T.STARTUP_CALL_OUTLIER_FACTOR:g} x the "
         f"median of their name) cover {ms:.1f} ms ({pct:.1f}% of the window)."] +
        [f"{c['name'][:120]} ({c['kind']}): {c['ms']:.1f} ms at +{c['offset_ms']:.1f} ms" for c in oo["calls"][:3]],
        "These are one-off start-up costs (Python module imports, CUDA context creation, lazy kernel loading, cuDNN/cuBLAS "
        "set-up, allocator growth): warm up before profiling (torch.profiler schedule wait/warmup), analyse a steady-state "
        "step with --window, or mark the inference itself with inferscope.scope().")


def gpu_compute_bound(res: dict, found: dict) -> dict | None:
    k = res.get("kernels") or {}
    if res.get("gpu") is None or _pct(res, "gpu_compute") < T.VERDICT_MIN_SHARE_PCT or not k.get("classes"):
        return None
    e = Evidence(res)
    cl = k["classes"]
    for r in cl:
        e.cite(f"kernel_class_{r['class']}_pct", f"kernels.classes[{r['class']}].share_pct", 2)
    share = e.cite("gpu_compute_pct", "breakdown[gpu_compute].pct", 2)
    if k.get("top"):
        e.cite("top_kernel", "kernels.top[0].name")
        e.cite("top_kernel_pct", "kernels.top[0].share_pct", 2)
    ew = e.derive("elementwise_copy_pct", sum(r["share_pct"] for r in cl if r["class"] in ("elementwise", "copy_cat_transpose")),
                  "kernel_class_elementwise_pct + kernel_class_copy_cat_transpose_pct", 2)
    txt = [f"Compute kernels run {share:.1f}% of the window.",
           "Kernel time by family: " + ", ".join(f"{r['class']} {r['share_pct']:.1f}%" for r in cl) + "."]
    if k.get("top"):
        e.cite("top_kernel_sum_ms", "kernels.top[0].sum_ms")
        txt.append("Top kernels: " + "; ".join(f"{short_kernel_name(r['name'])} {r['sum_ms']:.2f} ms ({r['share_pct']:.1f}% of kernel time)"
                                               for r in k["top"][:3]) + ".")
    if ew >= T.ELEMENTWISE_COPY_SHARE_PCT:
        sugg = (f"Elementwise and copy/concat kernels take {ew:.0f}% of GPU time: fuse them (torch.compile), avoid dtype casts "
                "and .contiguous() copies, and use a static/pre-allocated KV cache instead of torch.cat growth.")
    else:
        sugg = ("The GPU is the bottleneck: cut work per token (lower precision or quantization, fused attention kernels) "
                "or raise batch size for throughput; deep-dive the top kernels with Nsight Compute.")
    return e.finding("gpu_compute_bound", "medium", "The GPU is busy: kernels dominate the time", txt, sugg)


def gpu_communication(res: dict, found: dict) -> dict | None:
    pct = _pct(res, "gpu_communication")
    if res.get("gpu") is None or pct < T.COMM_EXPOSED_MEDIUM_PCT:
        return None
    e = Evidence(res)
    e.cite("exposed_comm_pct", "breakdown[gpu_communication].pct", 2)
    exp_ms = e.cite("exposed_comm_ms", "breakdown[gpu_communication].ms")
    comm_ms = e.cite("comm_kernel_busy_ms", "gpu.comm_kernel_busy_ms")
    ov = e.cite("compute_comm_overlap_pct", "gpu.compute_comm_overlap_pct", 2, default=None)
    txt = [f"Communication kernels (NCCL/RCCL) are busy {comm_ms:.2f} ms; {exp_ms:.2f} ms of it ({pct:.1f}% of the window) "
           f"with no compute kernel running.",
           f"{'n/a' if ov is None else f'{ov:.1f}%'} of communication time overlaps compute (HTA's overlap measure)."]
    from ..classes import COMM_KERNEL_RE
    i = next((i for i, r in enumerate((res.get("kernels") or {}).get("top") or []) if COMM_KERNEL_RE.search(r["name"])), None)
    if i is not None:
        txt.append(_culprit(e, res, [(f"kernels.top[{i}]", "name", "sum_ms", "share_pct", "of kernel time", None)], "comm_kernel"))
    return e.finding(
        "gpu_communication", _sev(pct, T.COMM_EXPOSED_MEDIUM_PCT, T.COMM_EXPOSED_HIGH_PCT),
        "Communication kernels run with no compute beside them", txt,
        "Overlap communication with compute (bucketed/async collectives, separate communication stream), reduce what is "
        "communicated (tensor-parallel degree, lower precision), or check for waits on a slower rank.")


def _with_child_culprit(e: "Evidence", res: dict, txt: list[str], classes: tuple = (), same_as: str | None = None) -> str | None:
    """Name the hottest function sampled in a followed child process (its own imports and waiting
    excepted; only ``classes`` when given): the work the main process waits on."""
    ch = res.get("children") or {}
    if not ch.get("followed"):
        return None
    pids = [f"({p['pid']})" for p in ch.get("processes") or [] if p.get("followed")]
    kid_fn = next((i for i, r in enumerate((res.get("culprits") or {}).get("functions") or [])
                   if r["class"] != "waiting" and (not classes or r["class"] in classes) and r["thread"]
                   and not r["function"].startswith("import ") and any(r["thread"].endswith(p) for p in pids)), None)
    if kid_fn is None:
        return None
    c = _culprit(e, res, [(f"culprits.functions[{kid_fn}]", "function", "self_ms", "self_pct", "of the window (in a child)", "file")],
                 key="child_culprit")
    if c and c != same_as:        # (not twice when the finding's own culprit is that child's function)
        txt.append(c.replace("Culprit:", "Hottest function in the followed children:"))
    return c


def cpu_preprocessing(res: dict, found: dict) -> dict | None:
    pre = _pct(res, "cpu_preprocessing")
    if pre < T.CPU_PREPROCESSING_MEDIUM_PCT:
        return None
    e = Evidence(res)
    e.cite("cpu_preprocessing_pct", "breakdown[cpu_preprocessing].pct", 2)
    ms = e.cite("cpu_preprocessing_ms", "breakdown[cpu_preprocessing].ms")
    tok = e.cite("tokenization_ms", "breakdown[cpu_preprocessing].parts[tokenization].ms")
    prep = e.cite("other_preprocessing_ms", "breakdown[cpu_preprocessing].parts[preprocessing].ms")
    user = e.cite("user_code_ms", "breakdown[cpu_preprocessing].parts[user_code].ms")
    dom = max((("tokenization", tok), ("other preprocessing", prep), ("user code", user)), key=lambda x: x[1])
    txt = [f"CPU preprocessing holds {pre:.1f}% of end-to-end time ({ms:.2f} ms) with the GPU idle or absent.",
           f"Tokenization {tok:.2f} ms, other preprocessing {prep:.2f} ms, user code {user:.2f} ms; {dom[0]} dominates."]
    part = {"tokenization": "tokenization", "other preprocessing": "preprocessing", "user code": "user_code"}[dom[0]]
    c = _with_culprit(e, res, part, txt) or _with_culprit(e, res, "cpu_preprocessing", txt)
    # part of the category is the followed children's work (their samples fill the main thread's waiting)
    _with_child_culprit(e, res, txt, ("tokenization", "preprocessing", "user_code"), same_as=c)
    named = f" (start with {c[len('Culprit: '):].rstrip('.')})" if c else ""
    if dom[0] == "tokenization":
        sugg = ("Move tokenization off the critical path" + named + ": use a fast (Rust) tokenizer with batch encoding, "
                "tokenize in a worker pool, and overlap it with inference of the previous batch.")
        title = "Tokenization dominates CPU time"
    elif dom[0] == "user code":
        # plain code in the user's own files: DataLoader/GPU-decode advice does not apply
        sugg = ("Your own Python code holds the time" + named + ": profile and speed up the hot functions named here "
                "(vectorise loops with numpy/torch, cache repeated work, avoid per-item Python), or move them off the "
                "request path.")
        title = "User code dominates CPU time"
    else:
        sugg = ("Move preprocessing off the critical path" + named + " (worker processes / DataLoader num_workers, "
                "GPU-side decode/resize) and overlap it with inference.")
        title = "CPU preprocessing dominates CPU time"
    return e.finding("cpu_preprocessing", _sev(pre, T.CPU_PREPROCESSING_MEDIUM_PCT, T.CPU_PREPROCESSING_HIGH_PCT),
                     title, txt, sugg)


def host_launch_bound(res: dict, found: dict) -> dict | None:
    gpu, k = res.get("gpu"), res.get("kernels") or {}
    bc = (res.get("idle_gaps") or {}).get("by_class_stream_ms") or {}
    ratio = k.get("launch_api_typical_vs_kernel_ratio")
    if not (gpu is not None and gpu["idle_pct"] >= T.GPU_IDLE_MEDIUM_PCT and ratio is not None
            and k.get("count", 0) >= T.HOST_LAUNCH_MIN_KERNELS and ratio >= T.HOST_LAUNCH_API_VS_KERNEL_RATIO
            and bc and bc.get("host_wait", 0) >= max(bc.get("other", 0), bc.get("kernel_wait", 0))):
        return None
    e = Evidence(res)
    la = e.cite("launch_api_ms", "kernels.launch_api_ms")
    ks = e.cite("kernel_sum_ms", "kernels.kernel_sum_ms")
    r = e.cite("launch_api_typical_vs_kernel_ratio", "kernels.launch_api_typical_vs_kernel_ratio")
    hw = e.cite("gap_host_wait_stream_ms", "idle_gaps.by_class_stream_ms.host_wait")
    e.cite("gpu_idle_pct", "gpu.idle_pct", 2)
    e.cite("kernel_p50_us", "kernels.p50_us")
    txt = [f"{k['launch_api_calls']} launch calls at a median {k['launch_api_p50_us']:.1f} us: {r:.2f} x the {ks:.2f} ms of "
           f"kernel time (all launch calls together {la:.2f} ms).",
           f"Most stream gaps are host_wait ({hw:.2f} ms summed over streams): the next kernel was issued after the "
           "previous one ended."]
    _culprit_launch(e, res, txt)
    _with_culprit(e, res, "framework_overhead", txt)
    return e.finding(
        "host_launch_bound", "high", "The host cannot issue work fast enough", txt,
        "Cut per-kernel host cost: CUDA graphs (torch.compile mode='reduce-overhead'), fewer/fused ops, larger batches; "
        "check for Python overhead between ops.")


def framework_overhead(res: dict, found: dict) -> dict | None:
    fw = _pct(res, "framework_overhead")
    if fw < T.FRAMEWORK_OVERHEAD_MEDIUM_PCT or "host_launch_bound" in found:
        return None
    e = Evidence(res)
    e.cite("framework_overhead_pct", "breakdown[framework_overhead].pct", 2)
    parts = _row(res, "framework_overhead")["parts"]
    for p in parts:
        e.cite(f"{p['name']}_ms", f"breakdown[framework_overhead].parts[{p['name']}].ms")
    where = ("with no GPU work running" if res.get("gpu") is not None else
             "outside compute ops (Python in torch/transformers, dispatch, generation loop)")
    txt = [f"Framework and runtime work on the host {where}: {fw:.1f}% of the window."] + \
        (["Parts: " + ", ".join(f"{p['name']} {p['ms']:.1f} ms" for p in parts) + "."] if parts else [])
    _with_culprit(e, res, "framework_overhead", txt)
    return e.finding("framework_overhead", "medium", "Framework / runtime overhead is a large share", txt,
                     "Reduce op count and Python between ops (torch.compile, fused modules, inference_mode), or batch more "
                     "work per call.")


def _category_evidence(res: dict, cat: str) -> Evidence:
    """Evidence of a finding about one breakdown category: its share and time."""
    e = Evidence(res)
    e.cite(f"{cat}_pct", f"breakdown[{cat}].pct", 2)
    e.cite(f"{cat}_ms", f"breakdown[{cat}].ms")
    return e


def cpu_compute(res: dict, found: dict) -> dict | None:
    cc = _pct(res, "cpu_compute")
    if res.get("gpu") is not None or cc < T.CPU_COMPUTE_INFO_PCT:
        return None
    e = _category_evidence(res, "cpu_compute")
    txt = [f"Framework ops computing on the CPU take {cc:.1f}% of the window (no GPU activity in the trace)."]
    _with_culprit(e, res, "cpu_compute", txt)
    threads = next((f for f in ("cpu_oversubscription", "cpu_underuse") if f in found), None)
    return e.finding(
        "cpu_compute", "info", "Model compute runs on the CPU", txt,
        (f"First match the threads to the cores (finding {threads}: {found[threads]['suggestion']}); then " if threads else
         "On CPU: check torch.get_num_threads() matches the cores you own; ")
        + "use bf16/int8 (quantization) or a GPU for the model.")


def host_waiting(res: dict, found: dict) -> dict | None:
    # off-CPU only: the run-queue part (runnable, waiting for a CPU) is cpu_run_queue's
    rq = _run_queue_pct(res)
    wt = _pct(res, "waiting") - rq
    if wt < T.HOST_WAITING_LOW_PCT:
        return None
    e = _category_evidence(res, "waiting")
    txt = [f"Threads were off-CPU (sleep, I/O, locks) for {wt:.1f}% of the window with nothing else running."]
    if rq > 0:
        e.cite("run_queue_pct", "breakdown[waiting].parts[run_queue].pct", 2)
        txt[0] = (f"Threads were off-CPU (sleep, I/O, locks) for {wt:.1f}% of the window with nothing else running "
                  f"(besides {rq:.1f}% runnable in the run queue, waiting for a CPU).")
    _with_culprit(e, res, "waiting", txt)
    sugg = "Find the blocking call (I/O, queue get, lock) on the inference path and move it off or make it asynchronous."
    ch = res.get("children") or {}
    if ch.get("cpu_s_in_window", 0) > 0:
        n = e.cite("child_processes", "children.count")
        cs = e.cite("children_cpu_s_in_window", "children.cpu_s_in_window")
        top = e.cite("child_top_comm", "children.processes[0].comm", default=None)
        e.cite("child_top_cpu_s", "children.processes[0].cpu_s")
        how = f"{ch['followed']} followed" if ch.get("followed") else "not profiled"
        txt.append(f"{n} child process(es) ({how}; top: {top}) used ~{cs:.2f} CPU-s inside the window (estimate): "
                   "the main process waits on work done in them.")
        _with_child_culprit(e, res, txt)
        if _children_explain_waiting(res):
            sugg = ("The work runs in child processes (multiprocessing / DataLoader workers): speed up their hottest "
                    "functions (named above when the children were followed), add workers if the cores are free, or make "
                    "the per-item work cheaper.")
            if not ch.get("followed"):
                from .children import follow_hint
                sugg += " " + follow_hint(ch)
    if _gil_explains_waiting(res):
        e.cite("gil_wait_ms", "contention.gil.waiting_while_python_ms")
        txt.append(f"{res['contention']['gil']['waiting_while_python_ms']:,.1f} ms of it overlap other threads running Python: "
                   "a wait for the GIL or for those threads' results rather than for I/O (finding gil_contention).")
        sugg = ("Most of the waiting overlaps other threads' Python: see gil_contention (those threads and their hottest "
                "function).")
    return e.finding(
        "host_waiting", "medium" if wt >= T.HOST_WAITING_MEDIUM_PCT else "low", "The inference thread waits off-CPU", txt, sugg)


def _gil_explains_waiting(res: dict) -> bool:
    g = (res.get("contention") or {}).get("gil") or {}
    wait_ms = _off_cpu_ms(res)
    return wait_ms > 0 and g.get("pct_of_window", 0) >= T.GIL_WAIT_LOW_PCT and \
        g.get("waiting_while_python_ms", 0) >= T.GIL_WAIT_EXPLAINED_FRACTION * wait_ms


def _children_explain_waiting(res: dict) -> bool:
    ch = res.get("children") or {}
    wait_ms = _off_cpu_ms(res)
    if wait_ms <= 0:
        return False
    if ch.get("waiting_on_children_ms") is not None:      # followed children: measured overlap
        return ch["waiting_on_children_ms"] >= T.CHILD_WAIT_EXPLAINED_FRACTION * wait_ms
    return ch.get("cpu_s_in_window", 0) * 1e3 >= T.CHILD_WAIT_EXPLAINED_FRACTION * wait_ms


def low_coverage(res: dict, found: dict) -> dict | None:
    oth = _pct(res, "other")
    if oth < T.LOW_COVERAGE_OTHER_PCT:
        return None
    e = _category_evidence(res, "other")
    txt = [f"{oth:.1f}% of the window has no recorded GPU work, API call, op or sampled CPU activity."]
    c = _culprit(e, res, CULPRIT_SOURCES["other"], "largest_recorded")
    if c:
        txt.append(c.replace("Culprit:", "Largest recorded item:"))
    return e.finding(
        "low_coverage", "info", "Much of the window is not explained by the trace", txt,
        "Record more: run under `inferscope run` (CPU sampling) or enable CPU activities / with_stack in torch.profiler.")


# ---- counters (NVML, /proc, NUMA) ------------------------------------------------------------
def _series_index(res: dict, metric: str) -> list[int]:
    ser = ((res.get("counters") or {}).get("series")) or []
    return [i for i, r in enumerate(ser) if r["metric"] == metric]


def gpu_throttling(res: dict, found: dict) -> dict | None:
    thr = (res.get("counters") or {}).get("throttle") or []
    if not thr:
        return None
    i = max(range(len(thr)), key=lambda j: thr[j]["affected_pct"])
    t = thr[i]
    base = f"counters.throttle[{i}]"
    e = Evidence(res)
    if t["samples"] and t["affected_pct"] >= T.THROTTLE_MEDIUM_PCT:
        dev = e.cite("device", f"{base}.device")
        pct = e.cite("affected_pct_of_window", f"{base}.affected_pct", 2)
        n = e.cite("affected_samples", f"{base}.affected_samples")
        e.cite("reason_samples", f"{base}.samples")
        top = e.cite("top_reason", f"{base}.reasons[0].reason", default=None)
        top_pct = e.cite("top_reason_pct_of_window", f"{base}.reasons[0].window_pct", 2)
        txt = [f"GPU {dev}: NVML clock-event reasons report a slowdown for {pct:.1f}% of the window ({n} of "
               f"{t['samples']} samples; each sample holds until the next).",
               "Reasons: " + ", ".join(f"{r['reason']} (0x{r['bit']:x}) {r['window_pct']:.1f}%" for r in t["reasons"]) + "."]
        if t.get("sm_clock_mhz_throttled") is not None and t.get("sm_clock_mhz_other") is not None:
            a = e.cite("sm_clock_mhz_throttled", f"{base}.sm_clock_mhz_throttled", 0)
            b = e.cite("sm_clock_mhz_other", f"{base}.sm_clock_mhz_other", 0)
            txt.append(f"Mean SM clock {a:.0f} MHz while throttled vs {b:.0f} MHz otherwise.")
        pw = _series_index(res, "gpu.power_w")
        if pw:
            e.cite("power_w_max", f"counters.series[{pw[0]}].max", 1)
            txt.append(f"Power draw up to {res['counters']['series'][pw[0]]['max']:.0f} W.")
        sugg = {"sw_power_cap": "The GPU runs at its power limit: kernel times include power-capped clocks. Compare with "
                                "`nvidia-smi -q -d POWER` (enforced limit), check other work on the GPU, and benchmark with "
                                "the same limit you deploy with; lower precision (bf16/fp8) or smaller batches draw less power.",
                "sw_thermal_slowdown": "The GPU slows down for heat: check cooling/airflow and the temperature finding.",
                "hw_thermal_slowdown": "Hardware thermal slowdown: check cooling/airflow; kernel times are not representative.",
                "hw_slowdown": "Hardware slowdown (power brake or thermal): check the power supply, cooling and `nvidia-smi -q -d PERFORMANCE`.",
                "hw_power_brake_slowdown": "External power brake asserted: check the system's power supply/PSU limits.",
                "sync_boost": "Clocks follow another GPU in a sync-boost group: profile with the group idle or leave it."}.get(
                    str(top), "Check `nvidia-smi -q -d PERFORMANCE` while the workload runs.")
        return e.finding("gpu_throttling", _sev(pct, T.THROTTLE_MEDIUM_PCT, T.THROTTLE_HIGH_PCT),
                         f"GPU clocks throttled ({top}) for {pct:.0f}% of the window", txt, sugg)
    if not t["samples"] and (t.get("clock_drop_pct") or 0.0) >= T.THROTTLE_MEDIUM_PCT:
        dev = e.cite("device", f"{base}.device")
        pct = e.cite("clock_drop_pct_of_window", f"{base}.clock_drop_pct", 2)
        cmax = e.cite("sm_clock_mhz_max", f"{base}.sm_clock_mhz_max", 0)
        return e.finding("gpu_throttling", "low", f"GPU SM clock below {T.CLOCK_DROP_FRACTION:.0%} of its max for {pct:.0f}% of the window",
                         [f"GPU {dev}: SM clock below {T.CLOCK_DROP_FRACTION * cmax:.0f} MHz ({T.CLOCK_DROP_FRACTION:.0%} of the "
                          f"window's max {cmax:.0f} MHz) for {pct:.1f}% of the window; no clock-event reasons were recorded "
                          "(an idle GPU also lowers its clocks)."],
                         "Record clock-event reasons (nvidia-ml-py with a recent driver) to tell power/thermal throttling from idle clocks.")
    return None


def gpu_temperature(res: dict, found: dict) -> dict | None:
    idx = _series_index(res, "gpu.temp_c")
    if not idx:
        return None
    ser = res["counters"]["series"]
    i = max(idx, key=lambda j: ser[j]["max"])
    if ser[i]["max"] < _t('GPU_TEMP_WARN_C'):
        return None
    e = Evidence(res)
    dev, mx, mean, n = e.cite_all(f"counters.series[{i}]", device="device", temp_c_max=("max", 1), temp_c_mean=("mean", 1),
                                  samples="samples")
    e.derive("warn_c", _t('GPU_TEMP_WARN_C'), _t_src('GPU_TEMP_WARN_C'))
    e.derive("critical_c", _t('GPU_TEMP_CRITICAL_C'), _t_src('GPU_TEMP_CRITICAL_C'))
    return e.finding("gpu_temperature", _sev(mx, _t('GPU_TEMP_WARN_C'), _t('GPU_TEMP_CRITICAL_C')),
                     f"GPU temperature reached {mx:.0f} °C",
                     [f"GPU {dev}: up to {mx:.0f} °C (mean {mean:.0f} °C over {n} samples); alerts at "
                      f"> {_t('GPU_TEMP_WARN_C'):g} °C (warning) and > {_t('GPU_TEMP_CRITICAL_C'):g} °C (critical)."],
                     "Check cooling and airflow (fans, inlet temperature, neighbouring GPUs); hot GPUs throttle their clocks "
                     "(see gpu_throttling), which slows kernels.")


def gpu_memory_pressure(res: dict, found: dict) -> dict | None:
    gm = (res.get("counters") or {}).get("gpu_memory") or []
    rows = [(j, g) for j, g in enumerate(gm) if g.get("peak_pct") is not None]
    if not rows:
        return None
    i, g = max(rows, key=lambda r: r[1]["peak_pct"])
    if g["peak_pct"] < _t('GPU_MEMORY_WARN_PCT'):
        return None
    e = Evidence(res)
    dev, pct, peak, total, head = e.cite_all(f"counters.gpu_memory[{i}]", device="device", peak_pct=("peak_pct", 2),
                                             peak_bytes="peak_bytes", total_bytes="total_bytes", headroom_bytes="headroom_bytes")
    return e.finding("gpu_memory_pressure", _sev(pct, _t('GPU_MEMORY_WARN_PCT'), _t('GPU_MEMORY_CRITICAL_PCT')),
                     f"GPU memory {pct:.0f}% used at peak",
                     [f"GPU {dev}: peak {peak / 2**30:.2f} GiB of {total / 2**30:.2f} GiB ({pct:.1f}%), headroom "
                      f"{head / 2**30:.2f} GiB; alerts at > {_t('GPU_MEMORY_WARN_PCT'):g}% (warning) and "
                      f"> {_t('GPU_MEMORY_CRITICAL_PCT'):g}% (critical)."],
                     "Leave headroom for longer sequences and larger batches: cap the KV cache (paged attention, a smaller "
                     "max length), quantize weights, or lower the batch size; an OOM mid-run loses the batch.")


def gpu_util_counter(res: dict, found: dict) -> dict | None:
    idx = _series_index(res, "gpu.util_pct")
    ser = (res.get("counters") or {}).get("series") or []
    idx = [j for j in idx if ser[j]["samples"] >= T.GPU_UTIL_MIN_SAMPLES]
    if not idx:
        return None
    i = idx[0]
    e = Evidence(res)
    dev, mean, n = e.cite_all(f"counters.series[{i}]", device="device", nvml_util_mean_pct=("mean", 1), samples="samples")
    win = e.cite("window_ms", "e2e_ms")
    gpu = res.get("gpu")
    busy = e.cite("trace_busy_pct", "gpu.busy_pct", 1) if gpu is not None else 0.0
    diff = e.derive("disagreement_pts", abs(mean - busy), "|nvml_util_mean_pct - trace_busy_pct|", 1)
    txt = [f"GPU {dev}: NVML utilisation {mean:.0f}% on average over {n} samples; the trace's GPU busy time is "
           f"{busy:.0f}% of the window."]
    if mean < _t('GPU_UTIL_LOW_PCT'):
        sev = "high" if win / 1e3 >= T.GPU_UTIL_LOW_CRITICAL_S else "medium"
        txt.append(f"Below the alert level of {_t('GPU_UTIL_LOW_PCT'):g}% (critical when it lasts > "
                   f"{T.GPU_UTIL_LOW_CRITICAL_S:g} s; this window is {win / 1e3:.1f} s).")
        return e.finding("gpu_util_counter", sev, f"NVML GPU utilisation {mean:.0f}%", txt,
                         "The GPU has little to do: batch more requests, overlap host work with GPU work, or share the GPU.")
    if diff >= T.GPU_UTIL_DISAGREE_PTS:
        txt.append(f"They differ by {diff:.0f} points (>= {T.GPU_UTIL_DISAGREE_PTS:g}): "
                   + ("another process or unrecorded kernels keep the GPU busy" if mean > busy else
                      "NVML's coarse sampling period (1/6-1 s) misses short bursts, or the profiler recorded work NVML did not see")
                   + ".")
        return e.finding("gpu_util_counter", "low", "NVML GPU utilisation disagrees with the trace", txt,
                         "Check `nvidia-smi pmon` for other processes on the GPU; analyse a longer window so NVML's period "
                         "fits inside it.")
    if mean >= _t('GPU_UTIL_HIGH_PCT'):
        txt.append(f"Above the warning level of {_t('GPU_UTIL_HIGH_PCT'):g}%: the GPU is saturated.")
        return e.finding("gpu_util_counter", "info", f"NVML GPU utilisation {mean:.0f}% (saturated)", txt,
                         "Throughput now depends on the kernels themselves (see the kernel table); more load will queue.")
    return None


def numa_placement(res: dict, found: dict) -> dict | None:
    nm = (res.get("counters") or {}).get("numa") or {}
    if nm.get("gpu_local") is not False and not (nm.get("remote_numa_possible") and (nm.get("numa_nodes") or 0) > 1):
        return None
    e = Evidence(res)
    e.cite("numa_nodes", "counters.numa.numa_nodes")
    e.cite("process_numa_nodes", "counters.numa.process_numa_nodes", default=None)
    e.cite("gpu_numa_node", "counters.numa.gpu_numa_nodes[0].numa_node", default=None)
    e.cite("gpu_local", "counters.numa.gpu_local", default=None)
    g = (nm.get("gpu_numa_nodes") or [{}])[0].get("numa_node")
    remote = nm.get("gpu_local") is False
    return e.finding("numa_placement", "medium" if remote else "low",
                     "The process runs on a NUMA node away from its GPU" if remote else "The process may run on several NUMA nodes",
                     [f"GPU NUMA node {g}; the process may run on node(s) {nm.get('process_numa_nodes')} of {nm.get('numa_nodes')} "
                      "(sysfs and sched_getaffinity at collection)."],
                     f"Pin the process to the GPU's node: `numactl --cpunodebind={g} --membind={g} python ...` (or `taskset -c "
                     "<cpus of that node>`); with several GPUs, order CUDA_VISIBLE_DEVICES so each process gets the GPU on its node.")

def slow_steps(res: dict, found: dict) -> dict | None:
    ss = (res.get("counters") or {}).get("slow_steps") or {}
    if not ss or not ss.get("rest_mean_ms") or ss["slow_mean_ms"] < T.SLOW_STEPS_MIN_RATIO * ss["rest_mean_ms"]:
        return None
    ms = [(i, m) for i, m in enumerate(ss.get("metrics") or []) if m.get("diff_pct") is not None
          and abs(m["diff_pct"]) >= T.SLOW_STEPS_MIN_DIFF_PCT]
    if not ms:
        return None
    e = Evidence(res)
    n, k, a, b = e.cite_all("counters.slow_steps", steps="steps", slow_steps="slow_count", slow_mean_ms="slow_mean_ms",
                            rest_mean_ms="rest_mean_ms")
    for i, m in ms[:4]:
        e.cite(f"{m['metric']}_slow", f"counters.slow_steps.metrics[{i}].slow_mean", 2)
        e.cite(f"{m['metric']}_rest", f"counters.slow_steps.metrics[{i}].rest_mean", 2)
    txt = [f"The slowest {k} of {n} {ss['source']} average {a:.2f} ms vs {b:.2f} ms for the rest.",
           "Counters in force at their midpoints, slow vs rest: " +
           "; ".join(f"{m['metric']} {m['slow_mean']:.4g} vs {m['rest_mean']:.4g} ({m['diff_pct']:+.0f}%)" for _, m in ms[:4]) + ".",
           "A correlation at the counters' sampling period (system 20 Hz, NVML 20 Hz by default), not a proven cause."]
    return e.finding("slow_steps", "low", "Slow steps coincide with different counter values", txt,
                     "Look at what differs: lower SM clocks or power (throttling), higher CPU use or context switches (CPU "
                     "contention from other work), more page faults (memory growth, swapping) during the slow steps.")


def gil_contention(res: dict, found: dict) -> dict | None:
    """The critical thread off-CPU while other threads of its process run Python (contention.gil)."""
    g = (res.get("contention") or {}).get("gil") or {}
    pct = float(g.get("pct_of_window") or 0.0)
    if pct < T.GIL_WAIT_LOW_PCT or not g.get("threads"):
        return None
    e = Evidence(res)
    ms, wait_ms, share, n = e.cite_all("contention.gil", gil_wait_ms="waiting_while_python_ms",
                                       waiting_ms="critical_waiting_ms", pct_of_waiting=("pct_of_waiting", 2),
                                       python_threads="python_threads")
    e.cite("gil_wait_pct", "contention.gil.pct_of_window", 2)
    top = g["threads"][0]
    e.cite_all("contention.gil.threads[0]", culprit_thread="thread", culprit="function", culprit_ms="overlap_ms")
    where = f" ({top['file']})" if top.get("file") else ""
    txt = [f"The inference thread was off-CPU for {wait_ms:,.1f} ms of the window; for {ms:,.1f} ms of it ({pct:.1f}% of the "
           f"window, {share:.0f}% of its waiting) another thread of the process was running Python. CPython runs one thread's "
           "Python at a time: the inference thread was waiting either for the GIL or for what those threads produce (a queue, "
           "a lock); either way their Python cannot run in parallel with it or with each other.",
           f"Culprit: {top['function'] or '?'}{where} on {top['thread']}: {top['overlap_ms']:,.1f} ms while the inference thread "
           f"waited ({n} other Python thread(s) in all; table: contention.gil.threads)."]
    return e.finding(
        "gil_contention", "medium" if pct >= T.GIL_WAIT_MEDIUM_PCT else "low",
        "The inference thread waits while other threads of its process run Python (GIL)", txt,
        "Move the other threads' Python work out of the process (multiprocessing, a separate service) or make it release the "
        "GIL (numpy/torch ops on large arrays, I/O); pace background threads (sleep between polls); keep request handling "
        "and inference on one thread.")


def page_fault_storm(res: dict, found: dict) -> dict | None:
    """Kernel-mode CPU above thresholds.PAGE_FAULT_KERNEL_PCT while page faults come at a storm rate."""
    c = res.get("counters") or {}
    sys_pct, rate = c.get("sys_cpu_pct"), c.get("page_faults_per_s")
    if sys_pct is None or rate is None or sys_pct < T.PAGE_FAULT_KERNEL_PCT or rate < T.PAGE_FAULT_STORM_PER_S:
        return None
    e = Evidence(res)
    e.cite("sys_cpu_pct", "counters.sys_cpu_pct", 2)
    e.cite("page_faults_per_s", "counters.page_faults_per_s", 1)
    pf = (res.get("contention") or {}).get("page_faults") or {}
    txt = [f"The process spent {sys_pct:.1f}% of one core in the kernel (getrusage system time) while taking "
           f"{rate:,.0f} page faults/s on average (first touches of freshly allocated memory, or file-backed pages read "
           "from disk): the kernel zeroes or reads every new page on the program's behalf."]
    if pf.get("functions"):
        e.cite_all("contention.page_faults", storm_ms="ms", storm_faults="faults")
        e.cite_all("contention.page_faults.functions[0]", culprit="function", culprit_ms="ms")
        top = pf["functions"][0]
        where = f" ({top['file']})" if top.get("file") else ""
        if pf.get("ranked_by") == "kernel_ms":
            e.cite_all("contention.page_faults.functions[0]", culprit_kernel_ms="kernel_ms")
            txt.append(f"Culprit: {top['function']}{where} was running during {top['kernel_ms']:,.1f} ms of the "
                       f"{pf['kernel_ms']:,.1f} ms of kernel time taken in sampler ticks at >= "
                       f"{pf['rate_threshold_per_s']:,.0f} faults/s ({pf['faults']:,} faults in the window's storm "
                       "intervals): which code ran while the kernel worked (sampled per tick), not which instruction "
                       "faulted.")
        else:
            txt.append(f"Culprit: {top['function']}{where} was running for {top['ms']:,.1f} ms of the {pf['ms']:,.1f} ms of "
                       f"counter intervals at >= {pf['rate_threshold_per_s']:,.0f} faults/s ({pf['faults']:,} faults): which "
                       "code ran while the faults happened (sampled), not which instruction faulted.")
    return e.finding(
        "page_fault_storm", "medium" if sys_pct >= 2 * T.PAGE_FAULT_KERNEL_PCT else "low",
        "Page faults cost kernel time on the inference path", txt,
        "Reuse buffers instead of allocating per request (preallocate, `out=` arguments, keep tensors alive); large "
        "allocations from glibc malloc are fresh mmap()s each time: raise MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_ or "
        "use jemalloc/tcmalloc; for file-backed weights (mmap/safetensors) touch them once at start-up.")


def cpu_run_queue(res: dict, found: dict) -> dict | None:
    """The main thread runnable but not running (schedstat run-queue delay) for a share of the window."""
    c = res.get("counters") or {}
    rq = c.get("main_runq_pct")
    if rq is None or rq < T.RUNQ_WAIT_LOW_PCT:
        return None
    e = Evidence(res)
    e.cite("main_runq_pct", "counters.main_runq_pct", 2)
    txt = [f"The main thread was runnable but waiting for a CPU {rq:.1f}% of the window (/proc schedstat run-queue delay): "
           "other threads or processes held the cores it could run on. That time counts in the breakdown under what the "
           "thread was doing, so its categories are stretched by CPU contention."]
    inv = e.cite("invol_ctx_switches_per_s", "counters.invol_ctx_switches_per_s", 1, default=None)
    util = e.cite("host_cpu_util_pct", "counters.process_cores.mean_util_pct", 1, default=None)
    cores = e.cite("process_cores", "counters.process_cores.cores", default=None)
    if inv is not None:
        txt.append(f"Involuntary context switches: {inv:,.0f}/s (preempted while runnable).")
    if util is not None and cores:
        txt.append(f"The {cores} core(s) the process may use were {util:.0f}% busy on average (all processes).")
    busy = [t for t in ((res.get("threads") or {}).get("threads") or []) if not t.get("critical")]
    busy = sorted(busy, key=lambda t: -(t["recorded_ms"] - t["waiting_ms"]))
    if busy and busy[0]["recorded_ms"] - busy[0]["waiting_ms"] > 0:
        i = (res["threads"]["threads"]).index(busy[0])
        e.cite("culprit", f"threads.threads[{i}].thread")
        e.cite("culprit_recorded_ms", f"threads.threads[{i}].recorded_ms")
        e.cite("culprit_waiting_ms", f"threads.threads[{i}].waiting_ms")
        txt.append(f"Culprit (busiest other thread of the process): {busy[0]['thread']}: "
                   f"{busy[0]['recorded_ms'] - busy[0]['waiting_ms']:,.1f} ms sampled not waiting.")
    else:
        txt.append("No other thread of this process was busy: the cores went to other processes on the host.")
    if "cpu_oversubscription" in found:
        txt.append("More busy threads (torch intra-op threads, busy worker processes) than the process has CPUs "
                   "(finding cpu_oversubscription).")
    return e.finding(
        "cpu_run_queue", "medium" if rq >= T.RUNQ_WAIT_MEDIUM_PCT else "low",
        "The inference thread waits for a CPU (run-queue delay)", txt,
        "Run fewer busy threads than cores: torch.set_num_threads / OMP_NUM_THREADS, fewer worker processes, or pin the "
        "inference process to cores nothing else uses (taskset, cgroup cpuset); check other processes on the host.")


def low_mfu(res: dict, found: dict) -> dict | None:
    """MFU below thresholds.LOW_MFU_PCT: from recorded shapes (efficiency) or the prefill stage of a live run."""
    eff = res.get("efficiency") or {}
    stages = {s["stage"]: s for s in ((res.get("llm") or {}).get("stages") or [])}
    e = Evidence(res)
    if eff.get("mfu_pct") is not None:
        mfu = e.cite("mfu_pct", "efficiency.mfu_pct", 3)
        e.cite("achieved_tflops", "efficiency.achieved_tflops")
        peak = e.cite("peak_tflops", "efficiency.peak_tflops")
        e.cite("peak_source", "efficiency.peak_source", default=None)
        where = "over the window (FLOPs from recorded shapes)"
    elif stages.get("prefill", {}).get("mfu_pct") is not None:
        mfu = e.cite("mfu_pct", "llm.stages[prefill].mfu_pct", 3)
        e.cite("achieved_tflops", "llm.stages[prefill].achieved_tflops")
        peak = e.cite("peak_tflops", "llm.stages[prefill].peak_tflops")
        where = "in prefill (analytical FLOPs of the model)"
    else:
        return None
    if mfu >= T.LOW_MFU_PCT:
        return None
    txt = [f"MFU {mfu:.1f}% {where}: achieved {e.values['achieved_tflops']:.2f} of {peak:g} TFLOP/s dense peak."]
    reasons = []
    gpu = res.get("gpu")
    if gpu is not None and gpu["idle_pct"] >= T.GPU_IDLE_MEDIUM_PCT:
        idle = e.cite("gpu_idle_pct", "gpu.idle_pct", 2)
        reasons.append(("idle", f"the GPU is idle {idle:.1f}% of the window (gaps between kernels)"))
    if eff.get("gemm_kernel_tflops") is not None and peak:
        gk = e.cite("gemm_kernel_tflops", "efficiency.gemm_kernel_tflops")
        pk = e.derive("gemm_kernel_pct_of_peak", 100.0 * gk / peak, "100 * gemm_kernel_tflops / peak_tflops", 2)
        if pk < T.GEMM_KERNEL_LOW_PCT_OF_PEAK:
            reasons.append(("small_gemms", f"GEMM kernels run at only {pk:.0f}% of peak while running (small or skinny "
                                           "matrix products: too few rows per GEMM)"))
    k = res.get("kernels") or {}
    cl = {r["class"]: r["share_pct"] for r in (k.get("classes") or [])}
    if cl and cl.get("gemm", 0.0) + cl.get("attention", 0.0) < 50.0:
        for c in ("gemm", "attention"):
            if c in cl:
                e.cite(f"kernel_class_{c}_pct", f"kernels.classes[{c}].share_pct", 2)
        mm = e.derive("matmul_kernel_pct", cl.get("gemm", 0.0) + cl.get("attention", 0.0),
                      "kernel_class_gemm_pct + kernel_class_attention_pct", 2)
        reasons.append(("non_matmul", f"matrix-multiply and attention kernels are only {mm:.0f}% of kernel time; "
                                      "elementwise, copy and normalisation kernels take the rest at low FLOP rates"))
    if k.get("launch_storm") or k.get("tiny_pct", 0) >= 50:
        tiny = e.cite("tiny_kernel_pct", "kernels.tiny_pct", 2)
        reasons.append(("launch", f"{tiny:.0f}% of kernels are shorter than {k.get('tiny_threshold_us', 10):g} us "
                                  "(launch overhead per kernel)"))
    e.derive("reasons", [r[0] for r in reasons], "rules above, in order: GPU idle >= GPU_IDLE_MEDIUM_PCT, GEMM kernels "
             "< GEMM_KERNEL_LOW_PCT_OF_PEAK of peak, matmul+attention kernels < 50% of kernel time, launch storm or >= 50% tiny kernels")
    txt += [f"Why (from the trace): {r[1]}." for r in reasons] or ["The trace shows no single cause (GPU busy, GEMMs efficient)."]
    if (res.get("kernels") or {}).get("top"):       # where the GPU time goes: the kernel to look at first
        kn = e.cite("top_kernel", "kernels.top[0].name")
        kms = e.cite("top_kernel_sum_ms", "kernels.top[0].sum_ms", 3)
        kpct = e.cite("top_kernel_pct", "kernels.top[0].share_pct", 2)
        txt.append(f"Top kernel: {short_kernel_name(kn)}, {kms:.2f} ms ({kpct:.1f}% of kernel time).")
    sugg = {"idle": "Keep the GPU fed first (see gpu_idle): larger batches, CUDA graphs, overlap host work.",
            "small_gemms": "Raise the tokens per GEMM (bigger batches, continuous batching, longer prefill chunks) so matrix "
                           "products reach tensor-core efficiency.",
            "non_matmul": "Fuse the elementwise/copy kernels (torch.compile, fused RMSNorm/rotary/SiLU kernels) and avoid "
                          "dtype casts and .contiguous() copies.",
            "launch": "Cut per-kernel launch overhead: CUDA graphs or torch.compile to fuse small kernels."}
    return e.finding("low_mfu", "medium" if mfu < T.LOW_MFU_MEDIUM_PCT else "low", f"Model FLOPs utilisation {mfu:.1f}%",
                     txt, " ".join(sugg[r[0]] for r in reasons) or "Profile the top kernels with Nsight Compute.")


def decode_low_mbu(res: dict, found: dict) -> dict | None:
    stages = {s["stage"]: s for s in ((res.get("llm") or {}).get("stages") or [])}
    d = stages.get("decode")
    if not d or d.get("mbu_pct") is None or d["mbu_pct"] >= T.DECODE_LOW_MBU_PCT:
        return None
    e = Evidence(res)
    mbu = e.cite("decode_mbu_pct", "llm.stages[decode].mbu_pct", 2)
    e.cite("bytes_per_step", "llm.stages[decode].bytes_per_step")
    e.cite("mean_step_ms", "llm.stages[decode].step_ms.mean")
    gb = e.cite("peak_gbps", "llm.stages[decode].peak_gbps")
    return e.finding("decode_low_mbu", "medium" if mbu < T.DECODE_LOW_MBU_MEDIUM_PCT else "low",
                     f"Decode reads memory at {mbu:.0f}% of the peak bandwidth",
                     [f"Each decode step must read the weights and the KV cache ({e.values['bytes_per_step'] / 1e9:.3f} GB); "
                      f"at a mean step of {e.values['mean_step_ms']:.3f} ms that is {mbu:.1f}% of {gb:g} GB/s."],
                     "Decode is memory-bound by nature: raise the batch (more tokens per weight read), use CUDA graphs to "
                     "remove per-step host gaps, and quantize weights / KV cache to read fewer bytes.")


def latency_tail(res: dict, found: dict) -> dict | None:
    llm = res.get("llm") or {}
    for key, what in (("tpot_ms", "time per output token"), ("request_ms", "request latency")):
        st = llm.get(key) or {}
        if st.get("count", 0) < T.LATENCY_TAIL_MIN_SAMPLES or not st.get("p50") or st.get("p99") is None:
            continue
        if st["p99"] < T.LATENCY_TAIL_RATIO * st["p50"]:
            continue
        e = Evidence(res)
        p50 = e.cite("p50_ms", f"llm.{key}.p50")
        p99 = e.cite("p99_ms", f"llm.{key}.p99")
        e.cite("samples", f"llm.{key}.count")
        ratio = e.derive("p99_over_p50", p99 / p50, "p99_ms / p50_ms", 2)
        txt = [f"{what}: p99 {p99:.3f} ms is {ratio:.1f}x the p50 {p50:.3f} ms over {st['count']} samples."]
        steps = [s for s in (llm.get("steps") or []) if s["kind"] == "decode"]
        if key == "tpot_ms" and len(steps) >= T.LATENCY_TAIL_MIN_SAMPLES:
            walls = sorted(s["wall_ms"] for s in steps)
            cut = walls[int(0.99 * (len(walls) - 1))]
            slow = [s for s in steps if s["wall_ms"] >= cut]
            fast = [s for s in steps if s["wall_ms"] < cut]
            e.derive("slow_steps", len(slow), "decode steps (llm.steps) with wall_ms >= their p99")
            s0 = max(slow, key=lambda s: s["wall_ms"])
            e.derive("slowest_step_start_ms", s0["start_ms"], "max wall_ms over llm.steps (decode)")
            txt.append(f"The slowest decode steps ({len(slow)}) took {min(x['wall_ms'] for x in slow):.3f}-{s0['wall_ms']:.3f} ms "
                       f"(the slowest at +{s0['start_ms']:.1f} ms) against a median step of {walls[len(walls) // 2]:.3f} ms.")
            if all(x.get("gpu_ms") is not None for x in steps) and fast:
                g_slow = sum(x["gpu_ms"] for x in slow) / len(slow)
                g_fast = sum(x["gpu_ms"] for x in fast) / len(fast)
                e.derive("slow_steps_gpu_ms_mean", g_slow, "mean gpu_ms of the slow steps")
                e.derive("other_steps_gpu_ms_mean", g_fast, "mean gpu_ms of the other decode steps")
                txt.append(f"Their GPU time averages {g_slow:.3f} ms against {g_fast:.3f} ms for the others: "
                           + ("the extra time is GPU work." if g_slow > 1.5 * max(g_fast, 1e-9) else
                              "the extra time is on the host (not GPU work)."))
        return e.finding("latency_tail", "low", f"Slow tail in {what} (p99 {ratio:.1f}x p50)", txt,
                         "Look at what the slow steps/requests did differently in the timeline (their offsets are "
                         "above): host pauses (garbage collection, I/O, tokenization on the same thread), KV-cache growth "
                         "reallocations, or batch changes; pin the host thread and pre-allocate the cache.")
    return None


def kernel_limiter(res: dict, found: dict) -> dict | None:
    """Nsight Compute deep-dive: the profiled kernel with the largest share of GPU time, its limiter and lever."""
    ks = (res.get("kernel_deep_dive") or {}).get("kernels") or []
    if not ks:
        return None
    k = ks[0]
    if k["limiter"] == "unknown" or k["share_pct"] < T.KERNEL_LIMITER_MIN_SHARE_PCT:
        return None
    if k["limiter"] == "compute" and (k.get("tensor_pct") or 0.0) >= T.KERNEL_TENSOR_UNUSED_PCT:
        return None                                  # already on the tensor roof: nothing cheap to change
    e = Evidence(res)
    base = "kernel_deep_dive.kernels[0]"
    e.cite("kernel", f"{base}.name")
    share = e.cite("kernel_share_pct", f"{base}.share_pct", 2)
    e.cite("duration_us", f"{base}.duration_us")
    e.cite("limiter", f"{base}.limiter")
    for key in ("sm_pct", "mem_pct", "dram_pct", "tensor_pct", "occupancy_pct", "waves"):
        if k.get(key) is not None:
            e.cite(key, f"{base}.{key}", 2)
    short = short_kernel_name(k["name"].replace("<unnamed>::", ""), 80)
    txt = [f"{short} ({share:.1f}% of {'kernel time in the trace' if (res.get('kernel_deep_dive') or {}).get('joined') else 'the profiled launches'}, "
           f"{k['duration_us']:.2f} us per launch): {k['limiter_text']} (Nsight Compute, {k['launches']} launch(es))."]
    txt += [f"ncu: {r}" for r in k.get("ncu_rules", [])[:1]]
    return e.finding("kernel_limiter", "medium" if share >= 2 * T.KERNEL_LIMITER_MIN_SHARE_PCT else "low",
                     f"Top profiled kernel is {k['limiter_text'].split(':')[0]}", txt, k["lever"])


# Order matters only where a rule reads an earlier one (framework_overhead after host_launch_bound).
from .diagnosis_cpu import cpu_oversubscription, cpu_underuse  # noqa: E402 (reads Evidence above)

RULES: list[Callable[[dict, dict], dict | None]] = [
    gpu_idle, sync_stall, pageable_copy, small_copies, launch_storm, dominant_kernel, warmup_in_window,
    gpu_compute_bound, gpu_communication, cpu_preprocessing, host_launch_bound, framework_overhead,
    cpu_oversubscription, cpu_underuse, cpu_compute,
    gil_contention, host_waiting, low_coverage, gpu_throttling, gpu_temperature, gpu_memory_pressure, gpu_util_counter,
    numa_placement, page_fault_storm, cpu_run_queue, blocking_io, lock_wait, slow_steps,
    low_mfu, decode_low_mbu, latency_tail, kernel_limiter,
]
FINDING_IDS = [r.__name__ for r in RULES]


def findings_for(res: dict, alert_thresholds: dict | None = None) -> list[dict]:
    global _OVERRIDES
    found: dict[str, dict] = {}
    _OVERRIDES = dict(alert_thresholds or {})
    try:
        for rule in RULES:
            f = rule(res, found)
            if f is not None:
                assert f["id"] == rule.__name__, (f["id"], rule.__name__)
                found[f["id"]] = f
    finally:
        _OVERRIDES = {}
    return sorted(found.values(), key=lambda f: SEVERITY_ORDER.get(f["severity"], 9))


def _user_code_pct(res: dict) -> float:
    return float(next((p["pct"] for p in _row(res, "cpu_preprocessing")["parts"] if p["name"] == "user_code"), 0.0))


def _off_cpu_ms(res: dict) -> float:
    """The waiting category without its run-queue part (ms): what blocking calls, children or the GIL can explain."""
    rq = next((p["ms"] for p in _row(res, "waiting")["parts"] if p["name"] == "run_queue"), 0.0)
    return _ms(res, "waiting") - float(rq)


def _run_queue_pct(res: dict) -> float:
    """The waiting category's run-queue part (live runs: runnable, waiting for a CPU), % of the window."""
    return float(next((p["pct"] for p in _row(res, "waiting")["parts"] if p["name"] == "run_queue"), 0.0))


VERDICT_TITLES = {
    "gpu_bound": "GPU-bound: the GPU is busy most of the time; speed up the kernels themselves",
    "communication_bound": "Communication-bound: collective/send-recv kernels run with no compute beside them",
    "copy_bound": "Copy-bound: host<->device transfers dominate",
    "sync_bound": "Sync-bound: the host waits on the GPU in synchronising calls",
    "cpu_bound": "CPU-bound: CPU preprocessing (tokenization, data preparation) dominates",
    "user_code_bound": "User-code-bound: plain Python in the program's own files dominates; speed up the hot functions",
    "launch_bound": "Launch-bound: the host cannot issue kernels fast enough",
    "framework_bound": "Framework-bound: host-side framework/runtime overhead dominates",
    "cpu_compute_bound": "CPU compute-bound: the model itself runs on the CPU",
    "waiting_bound": "Waiting-bound: threads are off-CPU (I/O, sleep, locks)",
    "child_process_bound": "Child-process-bound: the main process waits on work done in its child processes",
    "gil_bound": "GIL-bound: the inference thread waits while other threads of the process run Python",
    "cpu_contention_bound": "CPU-contention-bound: the inference thread is runnable but waits for a CPU (run queue)",
    "balanced": "Balanced: no single cause holds a clear majority",
    "init_bound": "Initialisation-dominated: one-off start-up calls fill the window; analyse a steady-state window",
    "empty": "Empty window: nothing to analyse",
}


def verdict_for(res: dict, findings: list[dict]) -> dict:
    if res["e2e_ms"] <= 0:
        return {"id": "empty", "title": VERDICT_TITLES["empty"], "confidence": 0.0, "evidence": [],
                "confidence_basis": "no time in the window"}
    ids = {f["id"] for f in findings}
    fw_id = "launch_bound" if ({"launch_storm", "host_launch_bound"} & ids) else "framework_bound"
    groups = {
        "gpu_bound": _pct(res, "gpu_compute"),
        "communication_bound": _pct(res, "gpu_communication"),
        "copy_bound": _pct(res, "h2d_copy") + _pct(res, "d2h_copy") + _pct(res, "other_copy"),
        "sync_bound": _pct(res, "sync_wait"),
        # user code is a part of cpu_preprocessing in the breakdown; in the verdict it stands alone
        "cpu_bound": _pct(res, "cpu_preprocessing") - _user_code_pct(res),
        "user_code_bound": _user_code_pct(res),
        fw_id: _pct(res, "framework_overhead"),
        "cpu_compute_bound": _pct(res, "cpu_compute"),
        # the run-queue part of waiting (live runs: runnable, waiting for a CPU) is a group of its own:
        # contention with other work on the host is not a blocking call in the program, and it wins the
        # verdict only when it is the largest group (the program's own largest class otherwise, with
        # finding cpu_run_queue beside it)
        "waiting_bound": _pct(res, "waiting") - _run_queue_pct(res),
        "cpu_contention_bound": _run_queue_pct(res),
    }
    ranked = sorted(groups.items(), key=lambda kv: -kv[1])
    (top, top_pct), (second, second_pct) = ranked[0], ranked[1]
    other = _pct(res, "other")
    conf = (top_pct / (top_pct + second_pct) if top_pct + second_pct > 0 else 0.0) * (1.0 - other / 100.0)
    evidence = [f"{top.replace('_bound', '')} holds {top_pct:.1f}% of the window; runner-up {second.replace('_bound', '')} {second_pct:.1f}%"]
    if other > 0:
        evidence.append(f"{other:.1f}% of the window is unattributed ('other')")
    oo = res.get("one_off_calls") or {}
    if oo.get("union_pct", 0) >= T.ONE_OFF_HIGH_PCT:
        return {"id": "init_bound", "title": VERDICT_TITLES["init_bound"],
                "confidence": round(min(1.0, oo["union_pct"] / 100.0), 2),
                "confidence_basis": "share of the window inside one-off host calls",
                "shares_pct": {k2: round(v, 2) for k2, v in ranked},
                "evidence": [f"one-off host calls cover {oo['union_pct']:.1f}% of the window; longest "
                             f"{oo['calls'][0]['name'][:80]} {oo['calls'][0]['ms']:.1f} ms"] + evidence}
    if top == "waiting_bound" and top_pct >= T.VERDICT_MIN_SHARE_PCT and _children_explain_waiting(res):
        ch = res["children"]
        if ch.get("waiting_on_children_ms") is not None:
            evidence.insert(0, f"the main process waited {_ms(res, 'waiting'):.1f} ms, {ch['waiting_on_children_ms']:.1f} ms of it "
                               f"while a followed child process was on-CPU (>= {T.CHILD_WAIT_EXPLAINED_FRACTION:g} x)")
        else:
            evidence.insert(0, f"child processes (not profiled) used ~{ch['cpu_s_in_window']:.2f} CPU-s inside the window while the "
                               f"main process waited {_ms(res, 'waiting') / 1e3:.2f} s (>= {T.CHILD_WAIT_EXPLAINED_FRACTION:g} x)")
        top = "child_process_bound"
    elif top == "waiting_bound" and top_pct >= T.VERDICT_MIN_SHARE_PCT and _gil_explains_waiting(res):
        g = res["contention"]["gil"]
        evidence.insert(0, f"the inference thread waited {_ms(res, 'waiting'):.1f} ms, {g['waiting_while_python_ms']:.1f} ms of it "
                           f"while another thread of the process ran Python (>= {T.GIL_WAIT_EXPLAINED_FRACTION:g} x)")
        top = "gil_bound"
    if top_pct < T.VERDICT_MIN_SHARE_PCT:
        vid = "balanced"
        evidence.insert(0, f"no group reaches {T.VERDICT_MIN_SHARE_PCT:g}% of the window")
        conf = 1.0 - top_pct / 100.0 if top_pct > 0 else 0.0
        conf *= (1.0 - other / 100.0)
    else:
        vid = top
    for f in findings:
        if f["severity"] == "high":
            evidence.append(f"finding {f['id']}: {f['title']}")
    return {"id": vid, "title": VERDICT_TITLES[vid], "confidence": round(max(0.0, min(1.0, conf)), 2),
            "confidence_basis": "top share / (top + runner-up share), scaled by the attributed fraction of the window",
            "shares_pct": {k2: round(v, 2) for k2, v in ranked}, "evidence": evidence}


def partial_trace(coll) -> dict | None:
    """A live run that ended before InferScope could finalise (os._exit, a signal): the trace holds only
    the data flushed before the end.  {covered_ms, run_ms, fraction, text} or None for complete traces."""
    if not isinstance(coll, dict) or coll.get("mode") != "live" or coll.get("complete", True) is not False:
        return None
    covered, run = coll.get("duration_ms"), coll.get("run_wall_ms")
    if not isinstance(covered, (int, float)):
        return None
    frac = min(1.0, max(0.0, covered / run)) if isinstance(run, (int, float)) and run > 0 else None
    how = (f"exit code {coll['exit_code']}" if coll.get("exit_code") is not None
           else f"killed by {coll['exit_signal']}" if coll.get("exit_signal") else "ended")
    span = f"{covered:,.0f} ms of the {run:,.0f} ms run" if frac is not None else f"the first {covered:,.0f} ms of the run"
    return {"covered_ms": covered, "run_ms": run, "fraction": frac,
            "text": f"Partial trace: the program ended ({how}) before InferScope could finalise; the report covers "
                    f"{span}" + (f" ({100 * frac:.0f}%), confidence scaled by it" if frac is not None else "")}


def lower_for_partial(verdict: dict, coll) -> dict:
    """The verdict of a partial trace: confidence x the covered share of the run, and the reason first."""
    p = partial_trace(coll)
    if p is None:
        return verdict
    f = p["fraction"] if p["fraction"] is not None else 0.5
    v = dict(verdict)
    v["confidence"] = round(max(0.0, min(1.0, v["confidence"] * f)), 2)
    v["confidence_basis"] = (v["confidence_basis"] + f"; x {f:.2f}, the share of the run the partial trace covers"
                             + ("" if p["fraction"] is not None else " (unknown: 0.5)"))
    v["evidence"] = [p["text"]] + list(v["evidence"])
    return v
