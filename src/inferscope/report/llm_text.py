"""The LLM and efficiency sections as plain rows/lines, shared by the Markdown and HTML renderers
(each escapes what it prints)."""
from __future__ import annotations

from ..result import LatencyStats, Llm, Report


def _n(v, nd=3):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _si(v, unit=""):
    if v is None:
        return "n/a"
    for div, p in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:,.2f} {p}{unit}"
    return f"{v:,.2f} {unit}".rstrip()


LATENCY_COLS = ["metric", "count", "mean", "p50", "p90", "p95", "p99", "max"]
STAGE_COLS = ["stage", "steps", "batch", "tokens", "wall ms", "GPU ms", "mean step ms", "p50 step ms", "MFU %", "MBU %"]


def llm_lines(report: Report) -> tuple[list[str], list[list], list[list], list[str]]:
    """(summary lines, latency rows, stage rows, model lines); empty when there is no llm section."""
    llm = report.llm
    lines: list[str] = []
    lat: list[list] = []
    stages: list[list] = []
    model: list[str] = []
    if llm is not None:
        tps = llm.tokens_per_s
        if llm.requests:
            lines.append(f"Requests: {llm.requests} ({llm.sequences} sequences); generated {_n(tps.generated, 1)} "
                         f"tokens/s, prompt {_n(tps.prompt, 1)} tokens/s, {_n(llm.requests_per_s, 3)} requests/s "
                         f"over the window. Token times from: {', '.join(llm.token_time_basis) or 'n/a'}.")
        else:
            lines.append("No requests recorded in the window: TTFT, TPOT and request latency are unknown (see Warnings).")
            if tps.generated is not None:
                tk = llm.tokens
                lines.append(f"Generated {_n(tk.generated)} tokens ({_n(tps.generated, 1)} tokens/s), prompt "
                             f"{_n(tk.prompt)} tokens ({_n(tps.prompt, 1)} tokens/s) over the window, from "
                             f"{llm.token_count_basis or 'n/a'}.")
        lines += serving_lines(llm)
        for s, label in ((llm.ttft_ms, "TTFT ms (time to first token)"), (llm.tpot_ms, "TPOT ms (time per output token)"),
                         (llm.request_ms, "request ms (end to end)")):
            lat.append([label, s.count] + _stats(s))
        q = llm.queue
        s = q.wait_ms
        if s is not None and s.count:
            how = ("start to first work" if not q.from_overlap else "behind earlier requests, upper bound"
                   if not q.from_first_work else "to first work, else behind earlier requests")
            lat.append([f"queue wait ms ({how})", s.count] + _stats(s))
        for st in llm.stages:
            if st.breakdown:
                lines.append(f"{st.stage.capitalize()} time goes to: " + ", ".join(
                    f"{r.category} {r.pct:.1f}% ({r.ms:.3f} ms)" for r in sorted(st.breakdown, key=lambda r: -r.ms)) + ".")
            if st.mbu_basis:
                lines.append(f"{st.stage.capitalize()} MBU = {st.mbu_basis}.")
            sm = st.step_ms
            if (st.mfu_pct is not None or st.mbu_pct is not None) and st.step_time_ms is not None and sm.mean is not None \
                    and st.step_time_ms > sm.mean:
                lines.append(f"{st.stage.capitalize()} MFU and MBU divide by a mean step of {_n(st.step_time_ms)} ms, not "
                             f"the ranges' {_n(sm.mean)} ms: the GPU work launched in a step outlasts its range "
                             "(per step the longer of the two).")
            mbu = _n(st.mbu_pct, 2)
            stages.append([st.stage, st.steps, _n(st.batch), _n(st.tokens), _n(st.wall_ms), _n(st.gpu_ms),
                           _n(sm.mean), _n(sm.p50), _n(st.mfu_pct, 2),
                           f"≥ {mbu}" if st.mbu_lower_bound and st.mbu_pct is not None else mbu])
    m = report.model
    if m is not None:
        fpt = m.flops_per_token
        bd = ", ".join(f"{k} {_si(v, 'B')}" for k, v in m.bytes_by_dtype.items())
        model.append(f"{m.name or m.class_}: {m.params:,} parameters, {_si(m.param_bytes, 'B')} ({bd}); "
                     f"{_n(m.layers)} layers, hidden {_n(m.hidden)}, {_n(m.heads)} heads / "
                     f"{_n(m.kv_heads)} KV heads, intermediate {_n(m.intermediate)}, vocab {_n(m.vocab)}.")
        model.append(f"FLOPs per token: prefill {_si(fpt.prefill, 'FLOP')} (prompt {_n(fpt.prefill_context, 0)}), "
                     f"decode {_si(fpt.decode, 'FLOP')} (context {_n(fpt.decode_context, 0)}); "
                     f"KV cache {_si(m.kv_bytes_per_token, 'B')} per token. Basis: {m.flops_basis}.")
    return lines, lat, stages, model


def _stats(s: LatencyStats) -> list[str]:
    return [_n(s.mean), _n(s.p50), _n(s.p90), _n(s.p95), _n(s.p99), _n(s.max)]


def serving_lines(llm: Llm) -> list[str]:
    """Errors, OOM and cache hit rate (analyze/serving.py), one line each when there is something to say."""
    out = []
    if llm.requests:
        types = ", ".join(f"{t.type} x{t.count}" for t in llm.error_types[:5])
        out.append(f"Errors: {llm.errors} of {llm.requests} requests ({_n(llm.error_rate_pct, 2)}%)"
                   + (f": {types}." if types else "."))
    elif llm.scope_errors:
        out.append("Errors: " + ", ".join(f"{r.scope} {r.type} x{r.count}" for r in llm.scope_errors[:5]) + ".")
    oom = llm.oom
    if oom.count:
        out.append(f"Out of memory: {oom.count} range(s) ({', '.join(oom.types)}).")
    c = llm.cache
    if c.hit_rate_pct is not None:
        out.append(f"Cache hit rate: {_n(c.hit_rate_pct, 1)}%"
                   + (f" ({c.hits:,} of {c.queries:,})" if c.queries else "") + f", from {c.basis}.")
    elif c.note:
        out.append(f"Cache hit rate: {c.note}.")
    return out


def efficiency_lines(report: Report) -> list[str]:
    e = report.efficiency
    if e is None:
        return measured_lines(report)
    out = [f"FLOPs from recorded shapes: GEMM {_si(e.gemm_flops, 'FLOP')}, attention {_si(e.attention_flops, 'FLOP')}, "
           f"convolution {_si(e.conv_flops, 'FLOP')} ({e.counted_ops:,} op calls, dominant dtype {e.dtype or 'n/a'}).",
           f"Achieved {_n(e.achieved_tflops, 3)} TFLOP/s over the window; MFU {_n(e.mfu_pct, 2)} % of "
           f"{_n(e.peak_tflops, 1)} TFLOP/s; bytes moved (estimate, lower bound) {_si(e.bytes_moved_est, 'B')}, "
           f"MBU {_n(e.mbu_pct, 2)} % of {_n(e.peak_gbps, 0)} GB/s. Peak source: {e.peak_source or 'unknown'}."]
    if e.gemm_kernel_tflops is not None:
        out.append(f"GEMM kernels ran at {_n(e.gemm_kernel_tflops, 1)} TFLOP/s while running ({_n(e.gemm_kernel_ms)} ms of GPU time).")
    return out + measured_lines(report)


def measured_lines(report: Report) -> list[str]:
    """Measured (ncu) vs shape-based MFU/MBU over the kernels a joined capture matched."""
    dd = report.kernel_deep_dive
    mve = dd.measured_vs_estimated if dd is not None else None
    if mve is None:
        return []
    out = []
    for f, label, meas in ((mve.mfu, "MFU", "busiest math pipe"), (mve.mbu, "MBU", "DRAM throughput")):
        both = (f"; on the {f.both_kernels} kernel(s) with both ({_n(f.both_share_pct, 1)}% of that time): measured "
                f"{_n(f.both_measured_pct, 2)}% vs estimated {_n(f.both_est_pct, 2)}%"
                + (f", disagree: {f.disagreement}" if f.disagreement else " (within the disagreement rule)")
                if f.both_kernels else "; no kernel has both figures")
        out.append(f"Measured vs estimated {label} (Nsight Compute, {mve.matched_kernels} matched kernel(s), "
                   f"{_n(mve.matched_share_pct, 1)}% of kernel time, weighted by GPU time): measured ({meas}, % of peak) "
                   f"{_n(f.measured_pct, 2)}% over {_n(f.measured_share_pct, 1)}% of their time; shape-based estimate "
                   f"{_n(f.est_pct, 2)}% over {_n(f.est_share_pct, 1)}%{both}.")
    return out
