"""Diagnosis: turn the analyses' numbers into findings and one verdict.

Findings are a list of small rule functions (``RULES``), one per finding id, each
``rule(res, found) -> dict | None`` over the assembled result (``found``: the findings of the
rules before it, by id).  Every finding carries a stable snake_case id, a severity, a title,
the evidence numbers it rests on and a concrete suggestion.  Each evidence number is *cited*:
``evidence_source[key]`` is the path of the result value it was read from (``syncs.blocked_ms``,
``breakdown[sync_wait].ms``, ``kernels.top[0].share_pct``), so a reader (and a test) can check
it against the table it comes from.  Suggestions never promise a speed-up figure in their text; the
predicted saving is in separate fields (analyze/whatif.py: model, range, basis).  Every
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

from typing import Callable

from .. import thresholds as T
from ..wording import kernel_capture_only, partial_trace  # noqa: F401  (re-exported: tests and callers read them here)

from .diagnosis_blocking import blocking_io, lock_wait
from .gc_pauses import python_gc
from .diagnosis_cpu import cpu_oversubscription, cpu_underuse
from .diagnosis_gpu import (dominant_kernel, gpu_communication, gpu_compute_bound, gpu_idle, launch_storm,
                            pageable_copy, small_copies, sync_stall)
from .diagnosis_gpu_counters import gpu_memory_pressure, gpu_temperature, gpu_throttling, gpu_util_counter
from .diagnosis_gpu_efficiency import decode_low_mbu, kernel_limiter, low_mfu
from .diagnosis_host import (cpu_compute, cpu_preprocessing, cpu_run_queue, framework_overhead, gil_contention,
                             host_launch_bound, host_waiting, low_coverage, numa_placement,
                             page_fault_storm, slow_steps, warmup_in_window)
from .diagnosis_serving import latency_tail, low_cache_hit_rate, oom, request_errors
from .whatif import annotate
from .evidence import (_OVERRIDES, SEVERITY_ORDER, Evidence, _children_explain_waiting, _gil_explains_waiting,  # noqa: F401
                       _ms, _pct, _run_queue_pct, _user_code_pct, get_path)

# Order matters only where a rule reads an earlier one: framework_overhead after host_launch_bound; oom before
# gpu_memory_pressure (silent when oom fired: one cause, one finding) and before request_errors (which names it).

RULES: list[Callable[[dict, dict], dict | None]] = [
    gpu_idle, sync_stall, pageable_copy, small_copies, launch_storm, dominant_kernel, warmup_in_window,
    gpu_compute_bound, gpu_communication, cpu_preprocessing, host_launch_bound, framework_overhead,
    cpu_oversubscription, cpu_underuse, cpu_compute,
    gil_contention, host_waiting, low_coverage, gpu_throttling, gpu_temperature, oom, gpu_memory_pressure, gpu_util_counter,
    numa_placement, page_fault_storm, cpu_run_queue, python_gc, blocking_io, lock_wait, slow_steps,
    low_mfu, decode_low_mbu, latency_tail, kernel_limiter, request_errors, low_cache_hit_rate,
]
FINDING_IDS = [r.__name__ for r in RULES]


# An Nsight Compute capture analysed alone has no timeline (its launches are laid back to back): only the
# rules that read the capture's own measurements apply; the timeline rules (idle, share of the window,
# host) would judge the synthetic layout.
KERNEL_CAPTURE_RULES: list[Callable[[dict, dict], dict | None]] = [kernel_limiter]


def findings_for(res: dict, alert_thresholds: dict | None = None) -> list[dict]:
    found: dict[str, dict] = {}
    _OVERRIDES.clear()
    _OVERRIDES.update(alert_thresholds or {})
    try:
        for rule in (KERNEL_CAPTURE_RULES if kernel_capture_only(res) else RULES):
            f = rule(res, found)
            if f is not None:
                assert f["id"] == rule.__name__, (f["id"], rule.__name__)
                found[f["id"]] = f
    finally:
        _OVERRIDES.clear()
    # each actionable finding with its predicted saving (analyze/whatif.py), ordered by it, then severity
    return annotate(res, sorted(found.values(), key=lambda f: SEVERITY_ORDER.get(f["severity"], 9)))


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
    "kernel_profile": "Kernel profile: Nsight Compute measured each kernel alone (no timeline); see each kernel's limiter",
}


def _kernel_profile_verdict(res: dict) -> dict:
    dd = res["kernel_deep_dive"]
    ks = dd.get("kernels") or []
    ev = [f"{len(ks)} kernel(s) in {dd.get('launches', 0)} profiled launch(es), no timeline: no end-to-end time or "
          "share of a window to judge"]
    ev += [f"{k['short_name'][:80]}: {k['share_pct']:.1f}% of the profiled time, {k['limiter_text']}" for k in ks[:3]]
    return {"id": "kernel_profile", "title": VERDICT_TITLES["kernel_profile"], "confidence": 1.0,
            "confidence_basis": "the input's kind (an Nsight Compute capture alone), not a share of time", "evidence": ev}


def verdict_for(res: dict, findings: list[dict]) -> dict:
    if res["e2e_ms"] <= 0:
        return {"id": "empty", "title": VERDICT_TITLES["empty"], "confidence": 0.0, "evidence": [],
                "confidence_basis": "no time in the window"}
    if kernel_capture_only(res):
        return _kernel_profile_verdict(res)
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
