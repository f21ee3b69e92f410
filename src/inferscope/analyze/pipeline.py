"""Run every analysis over one window and assemble the result (= report.json)."""
from __future__ import annotations

import gc
import time
from typing import Callable

import numpy as np

from ..version import __version__
from .. import thresholds as T
from ..result import SCHEMA_VERSION, Report, from_dict
from .. import vocab as V
from ..trace.kinds import SpanKind
from ..trace.model import Trace
from . import breakdown as B
from .copies import copies, copy_table
from .children import children, children_warning
from .contention import contention
from .gc_pauses import gc_pauses, gc_table
from .tokenizer_split import tokenizer_split
from .culprits import culprits
from .threads import threads
from .waited_for import waited_for
from .diagnosis import lower_for_partial, findings_for, verdict_for
from .whatif import summary as whatif_summary
from .gpu import gpu_utilisation
from .efficiency import efficiency, efficiency_table
from .cublas_log import join as cublas_join
from .gemm_shapes import gemm_shapes
from .module_hotspots import module_hotspots
from .nsys_extras import analyze_nsys_extras
from .nvtx_attribution import analyze_nvtx
from .llm import llm, llm_tables
from .host_calls import one_off_host_calls
from .idle_gaps import idle_gaps
from .language import program_language
from .kernel_limits import kernel_deep_dive
from .kernels import kernel_table, kernels
from .options import AnalyzeOptions, unmatched_option_warnings
from .per_pid import analyze_pids
from .phases import phase_tables, phases
from .sampling import cpu_sampling
from .collection_cost import collection_cost
from .counters import counters as counter_stats
from .syncs import sync_table, syncs
from .run_phases import run_phases
from .window import resolve_window


# Extra analyses: (result key, fn(trace, window, options) -> dict), run in this order after the rest.  A returned dict
# may carry "tables" ({name: {columns, rows}}) and "warnings" ([str]); both are merged into the result.
# Importer-specific analyses (NVTX attribution, per-PID tables, nsys extras) and the ncu kernel deep-dive.
EXTRA_STEPS: tuple[tuple[str, Callable], ...] = (
    ("nvtx", analyze_nvtx), ("per_pid", analyze_pids), ("nsys_extras", analyze_nsys_extras),
    ("kernel_deep_dive", kernel_deep_dive))


def _source(trace: Trace) -> dict:
    m = trace.meta
    lang = program_language(trace)
    return {"language": lang["language"], "language_evidence": lang["evidence"],"format": m.get("source_format", "unknown"), "file": m.get("source_file"),
            "devices": m.get("devices", []), "tool_versions": m.get("tool_versions", {}),
            "events": int(trace.n_events), "spans": int(len(trace.spans)),
            "tracks": int(len(trace.tracks)), "counters": int(len(trace.counters)),
            "distributed": m.get("distributed")}


def _limitations(trace: Trace, res: dict) -> list[str]:
    s = trace.spans
    k = s.kind
    out = []
    smp = k == SpanKind.CPU_SAMPLE
    wid = trace.strings.get(V.CLS_WAITING)
    has_samples = bool((smp & (s.name != wid)).any())     # on-CPU samples (nsys scheduling alone gives only off-CPU time)
    if not has_samples:
        out.append("No CPU sampling in this trace: CPU preprocessing is only visible through annotated ranges "
                   "(record_function/NVTX named like tokenize/preprocess) or Python functions (with_stack); "
                   "unrecorded host time shows as 'other'.")
    hs = trace.meta.get("host_sampling")
    if isinstance(hs, dict):
        out.append(f"Nsight Systems host side: {hs.get('cpu_samples', 0)} CPU IP samples and the scheduling of "
                   f"{hs.get('sched_threads', 0)} threads imported; a sample's class comes from the first frame of its call "
                   "chain outside the kernel/libc (CUDA, profiler and Python-interpreter libraries -> framework, the "
                   "program's own code -> user_code), and it stands for the thread's on-CPU time since the previous sample; "
                   "off-CPU time counts as waiting for sampled threads and threads that call CUDA or NVTX.")
    if not bool((k == SpanKind.CPU_OP).any()) and res["source"]["format"] == "kineto":
        out.append("No CPU ops in the trace (CPU activity not recorded): host-side attribution is limited.")
    if res.get("gpu") is not None:
        out.append("GPU busy counts kernels, memcpy and memset on every stream as one union; concurrent streams are not double-counted.")
        out.append("Communication kernels are recognised by name (NCCL/RCCL/MSCCL collectives and send/recv, custom "
                   "all-reduce kernels); gpu_communication is their time with no compute kernel running, and the "
                   "compute/communication overlap is the share of communication time with compute running (as HTA reports it).")
        out.append("Idle-gap classes follow HTA's definitions (host_wait / kernel_wait / other) using launch correlation; "
                   "gaps whose next activity has no launch record count as 'other'.")
    cs = res.get("cpu_sampling")
    if cs and cs.get("ci95_pts_at_50pct") is not None:
        out.append(f"CPU classes (tokenization, preprocessing, framework: Python and torch dispatch, CPU compute, waiting) are sampled: "
                   f"an estimated {cs['samples_est']:.0f} samples in the window (~{cs['rate_hz']:.0f} Hz outside imports); "
                   f"a share near 50 % is uncertain by about ±{cs['ci95_pts_at_50pct']:.1f} points and one near 10 % by "
                   f"±{cs['ci95_pts_at_10pct']:.1f} (95 %, binomial estimate). Longer runs or a higher "
                   "cpu_sampling_frequency_hz narrow it (at a higher overhead).")
    low = [t for t in (cs or {}).get("threads") or [] if t.get("low")]
    if low:
        out.append("The sampler achieved less than half its rate on thread(s) " +
                   ", ".join(f"{t['name']} ({t['hz']:.0f} Hz)" for t in low[:4]) +
                   ": their CPU classes and culprits rest on fewer samples (host load or an expensive tick).")
    coll = trace.meta.get("collection") or {}
    n_sig, n_late = coll.get("signal_frames"), coll.get("signal_frames_late")
    if isinstance(n_sig, int) and isinstance(n_late, int) and n_sig > 0 and n_late >= T.SIGNAL_LATE_WARN_FRACTION * n_sig:
        out.append(f"{n_late} of the main thread's {n_sig} timer signals came late (it was off the CPU or in native code "
                   f"when they fired; {100.0 * n_late / n_sig:.0f} %, e.g. other processes competing for the CPUs): for "
                   "those intervals the sampled function is the one the sampler saw when the thread let go of the GIL, "
                   "which leans toward GIL-releasing calls (numpy/torch, I/O) - function shares are less certain.")
    out.append("The breakdown is an exclusive partition (categories in priority order: " + ", ".join(B.CATEGORIES) +
               "); time where several things overlap goes to the highest-priority one.")
    return out


def analyze(trace: Trace, options: AnalyzeOptions | None = None) -> dict:
    """The result as report.json's dict: ``analyze_report(...)`` in its JSON form."""
    return analyze_report(trace, options).to_dict()


def analyze_report(trace: Trace, options: AnalyzeOptions | None = None) -> Report:
    """Run every analysis over one window; the typed result (``inferscope.result.Report``)."""
    # the analyses make many short-lived containers and no reference cycles: a full collection
    # in the middle (~20 ms on a 109k-event trace) only costs time, as in the importers
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _analyze_report(trace, options)
    finally:
        if enabled:
            gc.enable()


def _analyze_report(trace: Trace, options: AnalyzeOptions | None) -> Report:
    options = options or AnalyzeOptions()
    t0 = time.perf_counter()
    rp = run_phases(trace)
    window = resolve_window(trace, options.window, rp)
    res: dict = {"schema_version": SCHEMA_VERSION, "tool": {"name": "inferscope", "version": __version__},
                 "source": _source(trace), "window": window.as_dict()}
    rp["applied"] = window.kind == "steady"
    res["run_phases"] = rp
    b = B.breakdown(trace, window)
    res["e2e_ms"] = b["e2e_ms"]
    res["breakdown"] = b["breakdown"]
    res["breakdown_rule"] = b["rule"]
    res["gpu"] = gpu_utilisation(trace, window)
    res["idle_gaps"] = idle_gaps(trace, window) if res["gpu"] is not None else None
    res["kernels"] = kernels(trace, window, options.top_n)
    res["copies"] = copies(trace, window)
    res["syncs"] = syncs(trace, window, options.top_n)
    res["phases"] = phases(trace, window, options.phase_map)
    res["one_off_calls"] = one_off_host_calls(trace, window)
    res["cpu_sampling"] = cpu_sampling(trace, window)
    res["collection_cost"] = collection_cost(trace, window)
    res["threads"] = threads(trace, window)
    res["threads"]["waited_for"] = waited_for(trace, window)
    res["children"] = children(trace, window)
    res["contention"] = contention(trace, window)
    res["gc_pauses"] = gc_pauses(trace, window)
    res["tokenizer"] = tokenizer_split(trace, window, res["breakdown"])
    cu = culprits(trace, window, options.top_n)
    culprit_tables = cu.pop("tables")
    res["culprits"] = cu
    warnings = list(trace.meta.get("warnings", []))
    cw = children_warning(res["children"])
    if cw:
        warnings.append(cw)
    cc = res["collection_cost"]
    if cc and cc["pct_of_window"] >= T.PROFILER_COST_WARN_PCT:
        warnings.append(f"Collection cost (estimate): {cc['source']} recorded {cc['profiler_host_events']:,} {cc['what']} "
                        f"in the window, ~{cc['estimated_ms']:.1f} ms at ~{cc['cost_per_event_us']:g} us each "
                        f"({cc['estimated_ms_range'][0]:.1f}-{cc['estimated_ms_range'][1]:.1f} ms over the per-event costs measured "
                        f"on an H100 host; ~{cc['pct_of_window']:.0f}% of the window): host-side framework/launch time is inflated by about "
                        "that much; GPU kernel times are not. Without InferScope the loop runs faster, and host-bound "
                        "verdicts are somewhat overstated.")
    eff = efficiency(trace, window, options.peak_tflops, options.peak_gbps, options.top_n)
    if eff is not None:
        warnings.extend(eff.pop("_warnings", []) or [])
        warnings.extend(eff.pop("_warnings_only", []) or [])
    res["efficiency"] = eff if eff else None
    res["llm"], res["model"], lw = llm(trace, window, options.phase_map, options.peak_tflops, options.peak_gbps,
                                          options.model_config)
    warnings.extend(lw)
    tables = {}
    tables.update(llm_tables(res["llm"]))
    if res["llm"] is not None:
        res["llm"].pop("_requests", None)
    if eff:
        tables["efficiency_by_op"] = efficiency_table(eff)
        gs = gemm_shapes(trace, window, options.top_n)
        if gs:
            tables["gemm_shapes"] = gs
    if options.cublas_log is not None:
        gs, ct, cw = cublas_join(tables.get("gemm_shapes"), options.cublas_log)
        if gs:
            tables["gemm_shapes"] = gs
        if ct:
            tables["cublas_gemms"] = ct
        warnings.extend(cw)
    mh = module_hotspots(trace, window, options.top_n)
    if mh:
        tables["module_hotspots"] = mh
    if res["kernels"]["count"]:
        tables["kernels"] = kernel_table(res["kernels"])     # every kernel name, not only the top
    res["kernels"].pop("_all", None)
    if res["copies"]["count"]:
        tables["copies"] = copy_table(res["copies"])
    if res["syncs"]["count"]:
        tables["syncs"] = sync_table(res["syncs"])
    tables.update(phase_tables(res["phases"]))
    if res["threads"].get("waited_for"):
        tables["waited_for"] = {"columns": ["thread", "pid", "ms", "pct_of_waiting", "class", "class_ms", "function",
                                            "function_ms"],
                                "rows": [[r[c] for c in ("thread", "pid", "ms", "pct_of_waiting", "class", "class_ms",
                                                         "function", "function_ms")] for r in res["threads"]["waited_for"]]}
    if res["gc_pauses"] and res["gc_pauses"]["by_thread"]:
        tables["gc_pauses"] = gc_table(res["gc_pauses"])
    tables.update(culprit_tables)
    if res["idle_gaps"] and res["idle_gaps"]["largest"]:
        # the largest gaps; tables/gpu_idle_gaps.csv holds every gap (report/csv_tables.py: these columns + start/end ns)
        tables["gpu_idle_gaps"] = {"columns": ["offset_ms", "ms", "host_activity", "host_overlap_pct"],
                                   "rows": [[round(g["offset_ms"], 6), round(g["ms"], 6), g.get("host"), g.get("host_overlap_pct")]
                                            for g in res["idle_gaps"]["largest"]]}
    tables["breakdown"] = {"columns": ["category", "ms", "pct"],
                           "rows": [[r["category"], round(r["ms"], 6), round(r["pct"], 4)] for r in res["breakdown"]]}
    ctr = counter_stats(trace, window)
    if ctr is not None:
        tables.update(ctr.pop("tables"))
        warnings.extend(ctr.pop("warnings"))
    res["counters"] = ctr
    for key, fn in EXTRA_STEPS:
        try:
            extra = fn(trace, window, options)
        except Exception as e:  # an optional analysis must never sink the report
            warnings.append(f"analysis {key} failed: {type(e).__name__}: {e}")
            continue
        if not extra:
            continue
        tables.update(extra.pop("tables", {}) or {})
        warnings.extend(extra.pop("warnings", []) or [])
        res[key] = extra
    warnings.extend(unmatched_option_warnings(options, res))
    findings = findings_for(res, options.alert_thresholds)
    res["findings"] = findings
    res["what_if"] = whatif_summary(res, findings)
    res["verdict"] = lower_for_partial(verdict_for(res, findings), trace.meta.get("collection"))
    res["warnings"] = warnings
    res["limitations"] = _limitations(trace, res)
    res["tables"] = tables
    res["about"] = {"analysis_ms": round((time.perf_counter() - t0) * 1e3, 3), "events": int(trace.n_events),
                    "collection": trace.meta.get("collection")}
    return from_dict(_jsonable(res))


_PLAIN = (str, int, bool, type(None))      # exact types returned as they are (subclasses take the slow path)


def _jsonable(x):
    """numpy scalars -> Python; NaN/inf -> None (JSON has neither)."""
    tx = type(x)
    if tx is list or tx is tuple:   # table rows: plain leaves inline, without a call each
        out = []
        for v in x:
            tv = type(v)
            if tv in _PLAIN:
                out.append(v)
            elif tv is float:
                out.append(None if (v != v or v in (float("inf"), float("-inf"))) else v)
            else:
                out.append(_jsonable(v))
        return out
    if isinstance(x, dict):
        return {str(k): v if type(v) in _PLAIN else _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return None
    return x
