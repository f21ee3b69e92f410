"""report.md: headline (seed 000's example shape), findings, tables, warnings, limitations - read from the typed
``result.Report`` by attribute (an optional section is None when absent).  Escaping: ``md_text.py`` (re-exported)."""
from __future__ import annotations

import datetime
import re

from ..result.headline import busiest_other_row, row_figures_text
from ..result import Report
from ..util.atomic import atomic_write_text
from ..wording import partial_trace, short_kernel_name
from .llm_text import LATENCY_COLS, STAGE_COLS, efficiency_lines, llm_lines
from .kernel_text import capture_only, kernel_capture_lines, stall_words
from .md_text import _fmt, md_code, md_escape, md_heading, plain  # noqa: F401  (md_code: diff.py imports it from here)
from .shown import TABLE_TITLES, more_rows_note, shown_tables, table_title
from .whatif_text import headline_lines, saving_text

LABEL_W = 22


def _msf(ms: float, total: float) -> str:
    nd = 1 if total >= 10 else (2 if total >= 1 else 3)
    return f"{ms:.{nd}f}"


def run_phase_lines(report: Report) -> list[str]:
    """Raw (unescaped) lines for the start-up and teardown parts of the run, with their top items
    and the rule that found them; the caller escapes them."""
    rp = report.run_phases
    if rp is None:
        return []
    out = []
    for seg, what in ((rp.startup, "Start-up"), (rp.teardown, "Teardown")):
        if seg is None:
            continue
        items = ", ".join(f"{r.name[:60]} {r.ms:,.1f} ms" + (f" ({r.count:,} calls)" if r.count > 1 else "")
                          for r in seg.top[:3])
        state = "left out of the window" if rp.applied else "inside the window" if report.window.kind == "trace" else "outside or partly inside the window"
        out.append(f"{what} {seg.ms:,.1f} ms at {seg.offset_ms:+,.1f} ms ({state})" + (f": {items}" if items else "")
                   + f" [rule {seg.rule.split(':')[0]}]")
    if rp.justification and rp.applied:
        out.append(f"Steady-state cut: {rp.justification}")
    for k in rp.not_cut:
        what = "Start-up" if k.part == "startup" else "Teardown"
        out.append(f"{what} {k.ms:,.1f} ms found by rule {k.rule} but not cut: {k.reason}")
    return out


def headline(report: Report) -> str:
    if capture_only(report):
        return _diagnosis(report, [plain(x, 400) for x in kernel_capture_lines(report)], capture=True)
    e2e = report.e2e_ms
    lines = [f"End-to-end latency: {_msf(e2e, e2e)} ms  ({plain(report.window.label)})"]
    pt = partial_trace(report.about.collection)
    if pt:
        lines.append(plain(pt["text"], 400))
    lines += [plain(x, 400) for x in run_phase_lines(report)]
    th = report.threads
    busiest = busiest_other_row(th)
    if busiest is not None and th.critical:
        others = [t for t in th.threads if not t.critical]
        lines.append(plain(f"Critical thread: {', '.join(th.critical[:3])} ({th.rule_text}); {len(others)} other "
                           f"thread(s) in parallel, not in the host categories (busiest: {busiest[1].thread}, "
                           f"{row_figures_text(busiest[1])})", 400))
        if th.all_threads_on_cpu_pct is not None:
            lines.append(plain(f"All threads together on CPU: {th.all_threads_on_cpu_pct:.1f}% of the window (% of one "
                               f"core; the critical thread(s) {th.critical_on_cpu_pct:.1f}%, sampled)", 400))
    ch = report.children
    if ch is not None and ch.cpu_s_total > 0:
        top = ", ".join(f"{r.comm} [{r.pid}] {r.cpu_s:.2f} CPU-s" for r in ch.processes[:2])
        how = (f"{ch.followed} followed (sampled), the rest not profiled" if ch.followed
               else "that were not profiled")
        lines.append(plain(f"Child processes: {ch.count} used {ch.cpu_s_total:.2f} CPU-s, {how} "
                           f"(~{ch.cpu_s_in_window:.2f} in the window, estimate"
                           + (f"; {ch.unlisted_cpu_s_in_window:.2f} of it in children no /proc listing named"
                              if ch.unlisted_cpu_s_in_window and ch.unlisted_cpu_s_in_window >= 0.005 else "")
                           + ")" + (f"; {top}" if top else ""), 400))
    lines += ["", "Breakdown:"]
    for r in report.breakdown:
        if r.ns == 0:
            continue
        lab = (r.label + ":").ljust(LABEL_W)
        lines.append(f"- {lab} {_msf(r.ms, e2e):>8} ms ({r.pct:.1f}%)")
        for p in r.parts:
            if p.pct >= 0.05:
                lines.append(f"    - {p.label}: {_msf(p.ms, e2e)} ms ({p.pct:.1f}%)")
                if p.name == "tokenization" and report.tokenizer is not None:
                    lines.append(f"        {tokenizer_split_text(report.tokenizer)}")
    return _diagnosis(report, lines)


def tokenizer_split_text(tk) -> str:
    """The tokenization part split by perf samples (analyze/tokenizer_split.py), in words."""
    return (f"(native tokenizer encode {tk.native_ms:,.1f} ms, the Python around it {tk.python_ms:,.1f} ms = "
            f"{tk.python_pct:.0f}%: perf samples)")


def _diagnosis(report: Report, lines: list[str], capture: bool = False) -> str:
    """The headline's Diagnosis and Suggestions: every high/medium finding with its suggestion."""
    lines += ["", "Diagnosis:"]
    gpu = report.gpu
    if capture:                                  # a synthetic timeline: no idle time to state
        lines.append("- Kernels measured one at a time by Nsight Compute: no timeline, GPU idle time or host time")
    elif gpu is not None:
        lines.append(f"- GPU is idle for {gpu.idle_pct:.0f}% of the timeline")
    else:
        lines.append("- No GPU activity in this trace (CPU-only run)")
    v = report.verdict
    lines.append(f"- Verdict: {v.id} (confidence {v.confidence:.2f}): {v.title}")
    lines += [plain(f"- {x}", 400) for x in headline_lines(report)]
    for f in report.findings:
        if f.severity in ("high", "medium") or capture:     # a capture alone has only kernel findings: all shown
            lines.append(f"- [{f.severity}] {plain(f.title)}")
    sugg = [f.suggestion for f in report.findings if f.severity in ("high", "medium")]
    ks = report.kernel_deep_dive.kernels if report.kernel_deep_dive is not None else []
    if capture and ks and ks[0].lever not in sugg:
        sugg.append(plain(f"{ks[0].short_name}: {ks[0].lever}", 400))
    if sugg:
        lines += ["", "Suggestions:"]
        seen = set()
        for s in sugg:
            if s not in seen:
                seen.add(s)
                lines.append(f"- {s}")
    return "\n".join(lines)


def _table(cols: list, rows: list, limit: int = 20) -> list[str]:
    out = ["| " + " | ".join(md_escape(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for row in rows[:limit]:
        out.append("| " + " | ".join(_fmt(v) for v in row) + " |")
    if len(rows) > limit:
        out.append("\n" + more_rows_note(len(rows) - limit))
    return out


def _bytes(n) -> str:
    return "n/a" if n is None else f"{n / 2**30:,.2f} GiB" if abs(n) >= 2**30 else f"{n / 2**20:,.1f} MiB"


def _counters_md(report: Report) -> list[str]:
    c = report.counters
    if c is None:
        return []
    L = ["## Counters", "", f"Rule: {md_escape(c.rule, 400)}.", ""]
    for g in c.gpu_memory:
        L.append(f"- GPU {g.device} memory: peak {_bytes(g.peak_bytes)}"
                 + (f" of {_bytes(g.total_bytes)} ({g.peak_pct:.1f}%), headroom {_bytes(g.headroom_bytes)}"
                    if g.total_bytes else " (total memory unknown)"))
    for t in c.throttle:
        if t.samples:
            rs = ", ".join(f"{md_escape(r.reason)} {r.window_pct:.1f}%" for r in t.reasons) or "none"
            L.append(f"- GPU {t.device} clock-event reasons: slowdown {t.affected_pct:.1f}% of the window "
                     f"({t.affected_samples} of {t.samples} samples; reasons: {rs})")
        if t.clock_drop_pct is not None:
            L.append(f"- GPU {t.device} SM clock: max {_fmt(t.sm_clock_mhz_max, 0)} MHz, below 85% of it for "
                     f"{t.clock_drop_pct:.1f}% of the window")
    if c.rss_peak_bytes is not None:
        L.append(f"- Process RSS peak: {_bytes(c.rss_peak_bytes)}")
    if c.page_faults_per_s is not None or c.ctx_switches_per_s is not None:
        L.append(f"- Page faults: {_fmt(c.page_faults_per_s, 1)}/s; context switches: {_fmt(c.ctx_switches_per_s, 1)}/s"
                 + (f" ({_fmt(c.invol_ctx_switches_per_s, 1)}/s involuntary)" if c.invol_ctx_switches_per_s is not None else ""))
    if c.sys_cpu_pct is not None or c.main_runq_pct is not None:
        L.append(f"- Kernel-mode CPU of the process: {_fmt(c.sys_cpu_pct, 1)}% of one core; main thread waiting for a CPU "
                 f"(run queue): {_fmt(c.main_runq_pct, 1)}% of the time")
    pc = c.process_cores
    if pc is not None:
        L.append(f"- CPU cores of the process ({pc.cores}; {md_escape(pc.basis)}): mean utilisation "
                 f"{pc.mean_util_pct:.1f}%, busiest core {pc.max_core_mean_util_pct:.1f}% on average (table: {TABLE_TITLES['counters_cores']})")
    nm = c.numa
    if nm is not None:
        gn = ", ".join(f"{md_escape(g.pci_bus_id)} on node {g.numa_node}" for g in nm.gpu_numa_nodes)
        L.append(f"- NUMA: {_fmt(nm.numa_nodes)} node(s); the process may run on node(s) "
                 f"{md_escape(nm.process_numa_nodes)} ({_fmt(nm.process_cpus)} CPUs)"
                 + (f"; GPU {gn}; GPU local: {nm.gpu_local}" if gn else "; no GPU PCI device recorded")
                 + (f"; torch intra-op threads: {nm.torch_threads}" if nm.torch_threads else ""))
    if c.dropped_samples:
        L.append(f"- {c.dropped_samples} sample(s) dropped (NaN, infinite or negative)")
    if len(L) == 4:          # nothing beyond the rule: the per-counter table below says it all
        return []
    L.append("")
    return L


def _deep_dive_md(report: Report) -> list[str]:
    """Kernel deep-dive (Nsight Compute): one row per profiled kernel, then each limiter's lever."""
    dd = report.kernel_deep_dive
    if dd is None or not dd.kernels:
        return []
    dev = dd.device
    L = ["## Kernel deep-dive (Nsight Compute)", "",
         f"- {md_escape(dd.file)} ({md_escape(dd.layout)} page): {dd.launches} launch(es), {len(dd.kernels)} kernel(s); "
         f"{md_escape(dd.basis, 300)}.",
         f"- Peaks: DRAM {_fmt(dev.peak_dram_gbps, 1)} GB/s, FP32 {_fmt(dev.peak_fp32_tflops, 2)} TFLOP/s, "
         f"tensor (bf16 dense) {_fmt(dev.peak_tensor_tflops, 1)} TFLOP/s; {md_escape(dev.peak_source or 'no peaks known', 400)}."]
    if dd.missing:
        L.append(f"- Not in the capture: {md_escape(', '.join(dd.missing))} (estimates are labelled).")
    L += ["", "| kernel | share % | us/launch | limiter | SM % | mem % | DRAM % | tensor % | occupancy % | waves | DRAM GB/s |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for k in dd.kernels[:20]:
        gb = _fmt(k.dram_gbps, 1) + (" (est.)" if k.dram_bytes_estimated and k.dram_gbps is not None else "")
        L.append(f"| {md_escape(k.short_name, 80)} | {k.share_pct:.1f} | {k.duration_us:.2f} | "
                 f"{md_escape(k.limiter_text, 160)} | {_fmt(k.sm_pct, 1)} | {_fmt(k.mem_pct, 1)} | {_fmt(k.dram_pct, 1)} | "
                 f"{_fmt(k.tensor_pct, 1)} | {_fmt(k.occupancy_pct, 1)} | {_fmt(k.waves, 2)} | {gb} |")
    L += ["", "Levers:", ""]
    L += [f"- **{md_escape(k.short_name, 80)}**: {md_escape(k.lever, 500)}" for k in dd.kernels[:5]]
    st = [k for k in dd.kernels[:5] if k.stall_reasons]
    if st:
        L += ["", f"Warp stalls (share of the cycles between issued instructions; {md_escape(st[0].stall_basis or '', 120)}):", ""]
        L += [f"- **{md_escape(k.short_name, 80)}**: {md_escape(stall_words(k.stall_reasons), 400)}" for k in st]
    if dd.launch_range is not None:
        L += ["", f"Launches: {md_escape(dd.launch_range.text, 600)}."]
    mve = dd.measured_vs_estimated
    if mve is not None:
        L += ["", "### Measured vs estimated efficiency", "",
              "- GPU-time-weighted figures: see the Efficiency section above.",
              f"- Estimates (shape-based) against {_fmt(mve.peak_tflops, 1)} TFLOP/s ({md_escape(mve.dtype or 'n/a')}) "
              f"and {_fmt(mve.peak_gbps, 0)} GB/s; whole-window shape-based MFU {_fmt(mve.window_mfu_pct, 2)}%, "
              f"MBU {_fmt(mve.window_mbu_pct, 2)}% (window wall time, not kernel time).", "",
              "| kernel | share % | measured MFU-like % | measured as | est. MFU % | measured MBU-like % | est. MBU % | estimate over | disagreement |",
              "|---|---|---|---|---|---|---|---|---|"]
        for k in dd.kernels[:20]:
            L.append(f"| {md_escape(k.short_name, 80)} | {k.share_pct:.1f} | {_fmt(k.measured_mfu_pct, 2)} | "
                     f"{md_escape(k.measured_mfu_basis, 200)} | {_fmt(k.est_mfu_pct, 2)} | {_fmt(k.measured_mbu_pct, 2)} | "
                     f"{_fmt(k.est_mbu_pct, 2)} | {md_escape(k.est_basis if k.est_mfu_pct is None else k.pairing, 200)} | "
                     f"{md_escape('; '.join(k.disagreement) or '-', 600)} |")
    return L + [""]


def _fenced(text: str) -> list[str]:
    """A code block whose fence is longer than any backtick run inside (a name cannot close it)."""
    runs = [len(m) for m in re.findall(r"`+", text)]
    fence = "`" * max(3, (max(runs) + 1) if runs else 3)
    return [fence, text, fence]


def render_markdown(report: Report) -> str:
    src = report.source
    L = ["# InferScope report", "",
         f"Source: {md_escape(src.file or ('live run' if src.format == 'inferscope' else 'unnamed trace'))} "
         f"({md_escape(src.format)}, {src.events:,} events)"
         + (f"; device: {md_escape(src.devices[0].name)}" if src.devices else ""), "",
         *_fenced(headline(report)), ""]
    L += _run_phases_md(report)
    L += ["## Breakdown", "", f"Rule: {md_escape(report.breakdown_rule, 400)}.", "",
          "| category | ms | % |", "|---|---|---|"]
    for r in report.breakdown:
        L.append(f"| {r.label} | {r.ms:.3f} | {r.pct:.2f} |")
        for p in r.parts:
            L.append(f"| ↳ {p.label} | {p.ms:.3f} | {p.pct:.2f} |")
    total_pct = sum(r.pct for r in report.breakdown)
    L.append(f"| **total** | **{sum(r.ms for r in report.breakdown):.3f}** | **{total_pct:.2f}** |")
    if report.tokenizer is not None:
        L += ["", f"Tokenization {tokenizer_split_text(report.tokenizer)}."]
    v = report.verdict
    L += ["", "## Verdict", "", f"**{md_escape(v.id)}** — {md_escape(v.title, 400)} (confidence {v.confidence:.2f}; "
                                f"{md_escape(v.confidence_basis, 400)})", ""]
    L += [f"- {md_escape(e, 300)}" for e in v.evidence]
    L += ["", "## Findings", ""]
    if not report.findings:
        L.append("No finding crossed its threshold (thresholds in `inferscope/thresholds.py`).")
    for f in report.findings:
        L += [f"### [{md_escape(f.severity)}] {md_escape(f.title, 300)} (`{plain(f.id).replace('`', '')}`)", ""]
        L += [f"- {md_escape(t, 400)}" for t in f.evidence_text]
        L += ["", f"**Suggestion:** {md_escape(f.suggestion, 1000)}", ""]
        st = saving_text(f)
        if st:
            L += [f"**Predicted saving (estimate):** {md_escape(st, 900)}", ""]
        L += [
              "<details><summary>evidence values</summary>", "",
              "| key | value |", "|---|---|"]
        L += [f"| {md_escape(k)} | {_fmt(val)} |" for k, val in f.evidence.items()]
        L += ["", "</details>", ""]
    ll, lat, stg, mdl = llm_lines(report)
    if ll or mdl:
        L += ["## LLM: requests, TTFT, TPOT, stages", ""] + [f"- {md_escape(x, 600)}" for x in ll] + [""]
        if lat:
            L += _table(LATENCY_COLS, lat) + [""]
        if stg:
            L += ["Stages (prefill / decode steps):", ""] + _table(STAGE_COLS, stg) + [""]
        if mdl:
            L += ["Model:", ""] + [f"- {md_escape(x, 900)}" for x in mdl] + [""]
    el = efficiency_lines(report)
    if el:
        L += ["## Efficiency (FLOPs, MFU, MBU)", ""] + [f"- {md_escape(x, 600)}" for x in el] + [""]
    L += _gpu_md(report)
    L += _counters_md(report)
    L += _deep_dive_md(report)
    L += _kernels_md(report)
    L += _tables_md(report)
    if report.warnings:
        L += ["## Warnings", ""] + [f"- {md_escape(w, 400)}" for w in report.warnings] + [""]
    L += ["## Limitations", ""] + [f"- {md_escape(x, 600)}" for x in report.limitations] + [""]
    L += _about_md(report)
    return "\n".join(L) + "\n"


def _run_phases_md(report: Report) -> list[str]:
    rp = report.run_phases
    if rp is None or not (rp.startup is not None or rp.teardown is not None or rp.not_cut):
        return []
    L = ["## Phases of the run", "",
         f"Trace {rp.trace_ms:,.3f} ms; steady state {rp.steady_ms:,.3f} ms "
         f"({'the default window' if rp.applied else 'not the window: ' + md_escape(report.window.label, 400)}).", ""]
    if rp.justification:
        L += [f"Why the cut is safe: {md_escape(rp.justification, 400)}.", ""]
    for k in rp.not_cut:
        L += [f"- **{'Start-up' if k.part == 'startup' else 'Teardown'} not cut** ({k.ms:,.3f} ms, rule "
              f"{md_escape(k.rule)}): {md_escape(k.reason, 400)}"]
    for seg, what in ((rp.startup, "Start-up"), (rp.teardown, "Teardown")):
        if seg is not None:
            L += [f"- **{what}** {seg.ms:,.3f} ms at {seg.offset_ms:+,.3f} ms from the trace's first event; rule: {md_escape(seg.rule, 400)}"]
            L += [f"    - {md_escape(r.name, 120)}: {r.ms:,.3f} ms, {r.count:,} call(s)/sample(s)" for r in seg.top]
    return L + [""]


def _gpu_md(report: Report) -> list[str]:
    gpu = report.gpu
    if gpu is None:
        return []
    L = ["## GPU utilisation", "",
         f"- Busy {gpu.busy_ms:.3f} ms, idle {gpu.idle_pct:.2f}% of the window; "
         f"idle {_fmt(gpu.idle_pct_active_span, 2)}% of the GPU-active span ({gpu.active_span_ms:.3f} ms).",
         f"- Kernels busy {gpu.kernel_busy_ms:.3f} ms (compute {gpu.compute_kernel_busy_ms:.3f} ms, communication "
         f"{gpu.comm_kernel_busy_ms:.3f} ms), copies {gpu.copy_busy_ms:.3f} ms, memset {gpu.memset_busy_ms:.3f} ms "
         f"(unions over {gpu.streams} streams)."
         + (f" {gpu.compute_comm_overlap_pct:.1f}% of communication time overlaps compute."
            if gpu.compute_comm_overlap_pct is not None else ""), ""]
    ig = report.idle_gaps
    if ig is not None and ig.per_stream:
        L += ["Idle gaps per stream (HTA classes; stream-time, the streams' gaps overlap in wall time):", "", "| stream | gaps | idle ms | host_wait ms | kernel_wait ms | other ms |", "|---|---|---|---|---|---|"]
        for r in ig.per_stream:
            L.append(f"| {md_escape(r.stream)} | {r.gaps} | {r.idle_ms:.3f} | {r.host_wait_ms:.3f} | {r.kernel_wait_ms:.3f} | {r.other_ms:.3f} |")
        L += ["", "Gap sizes (all streams): " + ", ".join(f"{d.bucket}: {d.count} ({d.stream_ms:.2f} stream-ms)" for d in ig.distribution), ""]
    return L


def _kernels_md(report: Report) -> list[str]:
    k = report.kernels
    if not k.count:
        return []
    return ["## Kernels", "",
            f"- {k.count:,} kernels, {k.kernel_sum_ms:.3f} ms summed over streams; {k.launches_per_s:,.0f} launches/s; "
            f"median {k.p50_us:.2f} us, p90 {k.p90_us:.2f} us; {k.tiny_pct:.1f}% shorter than {k.tiny_threshold_us:g} us.",
            f"- Launch storm: {'yes' if k.launch_storm else 'no'} ({md_escape(k.launch_storm_rule, 200)}).",
            f"- Launch API calls: {k.launch_api_calls:,}, {k.launch_api_ms:.3f} ms host time "
            f"(ratio to kernel time {_fmt(k.launch_api_vs_kernel_ratio, 2)}).", ""]


def _tables_md(report: Report) -> list[str]:
    L: list[str] = []
    tables = report.tables
    show = set(shown_tables(report))
    for name, title in TABLE_TITLES.items():
        if name in show:
            t = tables[name]
            rows = t.rows
            if name == "kernels":  # readable names here; tables/kernels.csv keeps the full ones
                rows = [[short_kernel_name(str(r[0]))] + list(r[1:]) for r in rows]
            L += [f"## {title}", ""] + _table(t.columns, rows, 10 if name.startswith("top_") else 20) + [""]
    for name, t in tables.items():
        if name not in TABLE_TITLES and name in show:
            L += [f"## {md_heading(table_title(name))}", ""] + _table(t.columns, t.rows) + [""]
    return L


# report.md's words for the live collection's keys (about.collection)
_COLLECTION_LABELS = {
    "collection_ms": "collection time (ms)", "events": "events collected", "dropped_events": "events dropped (buffer full)",
    "clock_sync_error_us": "clock-sync error (us)", "clock_sync_limit_us": "clock-sync error allowed (us; 5 % of the collection, sync_error_margin_us the floor)",
    "estimated_overhead_pct": "estimated profiling overhead (%)",
    "report_ms": "report generation (ms)",
    "sampler_gil_held_ms": "sampler time holding the GIL (ms)",
    "signal_frames": "main-thread timer signals handled (frames at uniform moments)",
    "signal_frames_late": "timer signals handled late (off the CPU or in native code meanwhile: frame not used)"}


def _about_md(report: Report) -> list[str]:
    ab = report.about
    L = ["## About this trace", "",
         f"- Window: {md_escape(report.window.label, 400)} ({report.window.dur_ms:.3f} ms)",
         f"- Events: {ab.events:,}; report generation: analysis {ab.analysis_ms:.1f} ms"
         + (f"; load {ab.load_ms:.1f} ms" if ab.load_ms is not None else "")]
    for key, val in (ab.collection or {}).items():
        if key == "wall_start_unix_ns" and isinstance(val, int):
            ts = datetime.datetime.fromtimestamp(val / 1e9, tz=datetime.timezone.utc)
            L.append(f"- collection started (UTC): {ts.isoformat(timespec='milliseconds')}")
        elif isinstance(val, (int, float, str)) or val is None:
            L.append(f"- {_COLLECTION_LABELS.get(key, md_escape(key))}: {_fmt(val, 2)}")
    L.append(f"- InferScope {report.tool.version}, report schema {report.schema_version}")
    return L


def render(report: Report, trace, path) -> None:
    atomic_write_text(path, render_markdown(report))
