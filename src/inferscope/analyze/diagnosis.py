"""Diagnosis: turn the analyses' numbers into findings and one verdict.

Every finding carries a stable snake_case id, a severity, a title, the evidence numbers
it rests on (all taken from the trace by the analyses) and a concrete suggestion.
Suggestions never promise a speed-up figure.

Verdict rule: the breakdown categories are grouped (gpu_compute -> gpu_bound; h2d+d2h+
other copies -> copy_bound; sync_wait -> sync_bound; cpu_preprocessing -> cpu_bound;
framework_overhead -> launch_bound when a launch_storm or host_launch_bound finding holds,
else framework_bound; cpu_compute -> cpu_compute_bound; waiting -> waiting_bound).  The
largest group decides when it holds at least thresholds.VERDICT_MIN_SHARE_PCT of the
window; otherwise the verdict is 'balanced'.  Confidence = top / (top + runner-up),
scaled down by the share of time nothing in the trace explains ('other').
"""
from __future__ import annotations

from .. import thresholds as T
from .kernels import short_kernel_name

SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2, "info": 3}


def _f(x, nd=1):
    return "n/a" if x is None else f"{x:,.{nd}f}"


def _share(bd: list[dict], cat: str) -> float:
    for r in bd:
        if r["category"] == cat:
            return float(r["pct"])
    return 0.0


def _ms(bd: list[dict], cat: str) -> float:
    for r in bd:
        if r["category"] == cat:
            return float(r["ms"])
    return 0.0


def _part_ms(bd, cat, part):
    for r in bd:
        if r["category"] == cat:
            for p in r["parts"]:
                if p["name"] == part:
                    return float(p["ms"])
    return 0.0


def findings_for(res: dict) -> list[dict]:
    bd = res["breakdown"]
    e2e = res["e2e_ms"]
    gpu = res.get("gpu")
    gaps = res.get("idle_gaps") or {}
    k = res.get("kernels") or {}
    c = res.get("copies") or {}
    sy = res.get("syncs") or {}
    out: list[dict] = []

    def add(id, severity, title, evidence, evidence_text, suggestion):
        out.append({"id": id, "severity": severity, "title": title, "evidence": evidence,
                    "evidence_text": evidence_text, "suggestion": suggestion})

    host_cats = ["sync_wait", "cpu_preprocessing", "framework_overhead", "waiting", "other"]
    top_host = max(host_cats, key=lambda x: _ms(bd, x))

    # --- gpu_idle -----------------------------------------------------------
    if gpu is not None and gpu["idle_pct"] >= T.GPU_IDLE_MEDIUM_PCT:
        sev = "high" if gpu["idle_pct"] >= T.GPU_IDLE_HIGH_PCT else "medium"
        ev = {"gpu_idle_pct": round(gpu["idle_pct"], 2), "gpu_idle_ms": round(gpu["idle_ms"], 3),
              "window_ms": round(e2e, 3), "gpu_busy_ms": round(gpu["busy_ms"], 3),
              "largest_host_category_while_idle": top_host,
              "largest_host_category_ms": round(_ms(bd, top_host), 3)}
        txt = [f"GPU idle {gpu['idle_pct']:.1f}% of the window ({gpu['idle_ms']:.2f} ms of {e2e:.2f} ms); "
               f"busy = union of kernel, memcpy and memset intervals on all streams."]
        if gpu.get("idle_pct_active_span") is not None:
            txt.append(f"Idle {gpu['idle_pct_active_span']:.1f}% of the GPU-active span ({gpu['active_span_ms']:.2f} ms, first to last GPU activity).")
        bc = gaps.get("by_class_ms") or {}
        if bc:
            ev.update({f"gap_{k2}_ms": round(v, 3) for k2, v in bc.items()})
            txt.append("Per-stream gaps: " + ", ".join(f"{k2} {v:.2f} ms" for k2, v in bc.items()) + ".")
        if gaps.get("largest"):
            g0 = gaps["largest"][0]
            ev["largest_gap_ms"] = round(g0["ms"], 3)
            ev["largest_gap_host_activity"] = g0.get("host")
            txt.append(f"Largest idle gap {g0['ms']:.2f} ms at +{g0['offset_ms']:.2f} ms; host meanwhile: {g0.get('host')}.")
        txt.append(f"While the GPU was idle the largest host category was {top_host} ({_ms(bd, top_host):.2f} ms).")
        sugg = {
            "sync_wait": "Remove host-device synchronisation from the hot path (see sync_stall); keep the GPU queue non-empty.",
            "cpu_preprocessing": "Overlap CPU preprocessing with GPU work: tokenize/prepare the next batch in a worker thread or process while the GPU runs the current one.",
            "framework_overhead": "Reduce per-op host overhead: capture the steady-state loop in CUDA graphs (torch.compile mode='reduce-overhead' or torch.cuda.graphs), fuse small ops, or raise the batch size.",
            "waiting": "The host is off-CPU (sleep, I/O, locks) while the GPU waits: move I/O off the inference thread and check lock contention.",
            "other": "Host activity in the gaps is not covered by the trace: profile with CPU sampling (inferscope run) or add NVTX/record_function ranges.",
        }[top_host]
        add("gpu_idle", sev, f"GPU idle {gpu['idle_pct']:.0f}% of the timeline", ev, txt, sugg)

    # --- sync_stall ---------------------------------------------------------
    if sy.get("count"):
        idle_sync_pct = _share(bd, "sync_wait")
        # what the syncs cost is the part with the GPU idle; blocking while the GPU computes is benign
        sev = "high" if idle_sync_pct >= T.SYNC_STALL_HIGH_PCT else "medium" if idle_sync_pct >= T.SYNC_STALL_MEDIUM_PCT \
            else "low"
        top = sy["top"][0] if sy.get("top") else {}
        ev = {"sync_calls": sy["count"], "blocked_ms": round(sy["blocked_ms"], 3), "blocked_pct": round(sy["blocked_pct"], 2),
              "top_api": top.get("api"), "top_api_issued_by": top.get("issued_by"),
              "top_api_ms": round(top.get("ms", 0.0), 3), "top_api_count": top.get("count"),
              "sync_wait_ms_gpu_idle": round(_ms(bd, "sync_wait"), 3),
              "tiny_d2h_reads": (sy.get("tiny_d2h") or {}).get("count", 0)}
        txt = [f"{sy['count']} sync-like calls blocked the host {sy['blocked_ms']:.2f} ms ({sy['blocked_pct']:.1f}% of the window).",
               f"Top: {top.get('api')} x{top.get('count')} = {top.get('ms', 0):.2f} ms, issued by {top.get('issued_by')}.",
               f"{_ms(bd, 'sync_wait'):.2f} ms of it with the GPU idle (breakdown sync_wait, {idle_sync_pct:.1f}% of the window); "
               f"severity follows that part: blocking while the GPU computes costs little."]
        td = sy.get("tiny_d2h") or {}
        if td.get("count"):
            txt.append(f"{td['count']} device->host reads of <= {td['threshold_bytes']} bytes (the .item()/.cpu() pattern).")
        add("sync_stall", sev, "Host blocked in CPU-GPU synchronisation", ev, txt,
            "Avoid per-step .item()/.cpu()/print of GPU tensors and explicit torch.cuda.synchronize() in the loop; "
            "keep results on the GPU and read them once per batch, or use non_blocking copies with CUDA events.")

    # --- pageable_copy ------------------------------------------------------
    pg = c.get("pageable") or {}
    if pg.get("count", 0) >= T.PAGEABLE_COPY_MIN_COUNT:
        pct = 100.0 * pg["ms"] / e2e if e2e else 0.0
        sev = "medium" if pct >= T.PAGEABLE_COPY_MIN_PCT else "low"
        apis = pg.get("by_api") or []
        ev = {"pageable_copies": pg["count"], "pageable_ms": round(pg["ms"], 3), "pageable_bytes": pg["bytes"],
              "pct_of_window": round(pct, 3), "top_api": apis[0]["api"] if apis else None}
        txt = [f"{pg['count']} copies from/to pageable host memory, {pg['ms']:.3f} ms, {pg['bytes']:,} bytes ({pct:.2f}% of the window)."]
        if apis:
            txt.append("Issued by: " + ", ".join(f"{a['api']} x{a['count']}" for a in apis[:3]) + ".")
        add("pageable_copy", sev, "Host<->device copies use pageable memory", ev, txt,
            "Allocate host buffers pinned (tensor.pin_memory(), DataLoader(pin_memory=True)) and copy with non_blocking=True, "
            "so copies are true DMA and can overlap compute.")

    # --- small_copies -------------------------------------------------------
    sm = c.get("small") or {}
    if sm.get("storm"):
        ev = {"small_copies": sm["count"], "small_copy_ms": round(sm["ms"], 3), "threshold_bytes": sm["threshold_bytes"],
              "pct_of_window": round(sm["pct_of_window"], 2)}
        add("small_copies", "medium" if sm["pct_of_window"] >= T.SMALL_COPY_STORM_PCT else "low",
            "Many small host<->device copies", ev,
            [f"{sm['count']} copies under {sm['threshold_bytes']:,} bytes took {sm['ms']:.3f} ms ({sm['pct_of_window']:.2f}% of the window)."],
            "Batch small transfers: stack tensors on the host and copy once, keep per-step scalars on the GPU.")

    # --- launch_storm -------------------------------------------------------
    if k.get("launch_storm"):
        ev = {"kernels": k["count"], "launches_per_s": round(k["launches_per_s"], 1), "p50_us": round(k["p50_us"], 3),
              "tiny_pct": round(k["tiny_pct"], 1), "rule": k["launch_storm_rule"]}
        add("launch_storm", "high", "Kernel launch storm", ev,
            [f"{k['count']} kernels at {k['launches_per_s']:,.0f} launches/s, median {k['p50_us']:.2f} us ({k['launch_storm_rule']}).",
             f"{k['tiny_pct']:.0f}% of kernels are shorter than {k['tiny_threshold_us']:g} us."],
            "Fuse small kernels (torch.compile), capture the loop in CUDA graphs, or raise the batch size so each launch does more work.")

    # --- dominant_kernel ----------------------------------------------------
    if k.get("top") and k.get("distinct", 0) >= 2 and k["top"][0]["share_pct"] >= T.DOMINANT_KERNEL_SHARE_PCT:
        t0 = k["top"][0]
        ev = {"kernel": t0["name"][:200], "share_pct": round(t0["share_pct"], 2), "total_ms": round(t0["total_ms"], 3),
              "calls": t0["calls"], "p50_us": round(t0["p50_us"], 3)}
        add("dominant_kernel", "medium", "One kernel dominates GPU time", ev,
            [f"{short_kernel_name(t0['name'])} takes {t0['share_pct']:.1f}% of kernel time ({t0['total_ms']:.2f} ms over {t0['calls']} calls)."],
            "Start there: check its shapes and dtype (tensor-core friendly sizes, bf16/fp16), and profile it with Nsight Compute.")

    # --- one-off host calls (start-up inside the window) --------------------
    oo = res.get("one_off_calls") or {}
    if oo.get("calls"):
        sev = "high" if oo["union_pct"] >= T.ONE_OFF_HIGH_PCT else "medium"
        top = oo["calls"][0]
        add("warmup_in_window", sev, "Start-up work inside the analysed window",
            {"one_off_calls": oo["count"], "union_ms": round(oo["union_ms"], 3), "union_pct": round(oo["union_pct"], 2),
             "longest_call": top["name"][:200], "longest_call_ms": round(top["ms"], 3)},
            [f"{oo['count']} single host calls each longer than {oo['threshold_ms']:.1f} ms cover {oo['union_ms']:.1f} ms "
             f"({oo['union_pct']:.1f}% of the window)."] +
            [f"{c['name'][:120]} ({c['kind']}): {c['ms']:.1f} ms at +{c['offset_ms']:.1f} ms" for c in oo["calls"][:3]],
            "These are one-off start-up costs (Python module imports, CUDA context creation, lazy kernel loading, cuDNN/cuBLAS "
            "set-up, allocator growth): warm up before profiling (torch.profiler schedule wait/warmup), analyse a steady-state "
            "step with --window, or mark the inference itself with inferscope.scope().")

    # --- gpu busy: what the GPU spends its time on -----------------------
    if gpu is not None and _share(bd, "gpu_compute") >= T.VERDICT_MIN_SHARE_PCT and k.get("classes"):
        cl = k["classes"]
        ew = sum(r["share_pct"] for r in cl if r["class"] in ("elementwise", "copy_cat_transpose"))
        ev = {f"{r['class']}_pct": round(r["share_pct"], 2) for r in cl}
        ev.update({"gpu_compute_pct": round(_share(bd, "gpu_compute"), 2),
                   "top_kernel": k["top"][0]["name"][:200] if k.get("top") else None,
                   "top_kernel_pct": round(k["top"][0]["share_pct"], 2) if k.get("top") else None})
        txt = [f"Kernels run {_share(bd, 'gpu_compute'):.1f}% of the window.",
               "Kernel time by family: " + ", ".join(f"{r['class']} {r['share_pct']:.1f}%" for r in cl) + "."]
        if k.get("top"):
            txt.append("Top kernels: " + "; ".join(f"{short_kernel_name(r['name'])} {r['share_pct']:.1f}%" for r in k["top"][:3]) + ".")
        if ew >= T.ELEMENTWISE_COPY_SHARE_PCT:
            sugg = (f"Elementwise and copy/concat kernels take {ew:.0f}% of GPU time: fuse them (torch.compile), avoid dtype casts "
                    "and .contiguous() copies, and use a static/pre-allocated KV cache instead of torch.cat growth.")
        else:
            sugg = ("The GPU is the bottleneck: cut work per token (lower precision or quantization, fused attention kernels) "
                    "or raise batch size for throughput; deep-dive the top kernels with Nsight Compute.")
        add("gpu_compute_bound", "medium", "The GPU is busy: kernels dominate the time", ev, txt, sugg)

    # --- cpu_preprocessing --------------------------------------------------
    pre = _share(bd, "cpu_preprocessing")
    if pre >= T.CPU_PREPROCESSING_MEDIUM_PCT:
        tok = _part_ms(bd, "cpu_preprocessing", "tokenization")
        prep = _part_ms(bd, "cpu_preprocessing", "preprocessing")
        user = _part_ms(bd, "cpu_preprocessing", "user_code")
        ev = {"cpu_preprocessing_pct": round(pre, 2), "cpu_preprocessing_ms": round(_ms(bd, "cpu_preprocessing"), 3),
              "tokenization_ms": round(tok, 3), "other_preprocessing_ms": round(prep, 3), "user_code_ms": round(user, 3)}
        dom = max((("tokenization", tok), ("other preprocessing", prep), ("user code", user)), key=lambda x: x[1])
        txt = [f"CPU preprocessing holds {pre:.1f}% of end-to-end time ({_ms(bd, 'cpu_preprocessing'):.2f} ms) with the GPU idle or absent.",
               f"Tokenization {tok:.2f} ms, other preprocessing {prep:.2f} ms, user code {user:.2f} ms; {dom[0]} dominates."]
        sugg = ("Move tokenization off the critical path: use a fast (Rust) tokenizer with batch encoding, tokenize in a worker "
                "pool, and overlap it with inference of the previous batch." if dom[0] == "tokenization" else
                "Move preprocessing off the critical path (worker processes / DataLoader num_workers, GPU-side decode/resize) "
                "and overlap it with inference.")
        add("cpu_preprocessing", "high" if pre >= T.CPU_PREPROCESSING_HIGH_PCT else "medium",
            f"{'Tokenization' if dom[0] == 'tokenization' else 'CPU preprocessing'} dominates CPU time", ev, txt, sugg)

    # --- host_launch_bound --------------------------------------------------
    ratio = k.get("launch_api_typical_vs_kernel_ratio")
    bc = gaps.get("by_class_ms") or {}
    if gpu is not None and gpu["idle_pct"] >= T.GPU_IDLE_MEDIUM_PCT and ratio is not None \
            and k.get("count", 0) >= T.HOST_LAUNCH_MIN_KERNELS \
            and ratio >= T.HOST_LAUNCH_API_VS_KERNEL_RATIO and bc and bc.get("host_wait", 0) >= max(bc.get("other", 0), bc.get("kernel_wait", 0)):
        ev = {"launch_api_ms": round(k["launch_api_ms"], 3), "kernel_ms": round(k["total_ms"], 3),
              "launch_api_vs_kernel_ratio": round(ratio, 3), "gap_host_wait_ms": round(bc.get("host_wait", 0), 3),
              "gpu_idle_pct": round(gpu["idle_pct"], 2), "kernel_p50_us": round(k.get("p50_us", 0), 3)}
        add("host_launch_bound", "high", "The host cannot issue work fast enough", ev,
            [f"{k['launch_api_calls']} launch calls at a median {k['launch_api_p50_us']:.1f} us: {ratio:.2f} x the {k['total_ms']:.2f} ms of kernel time "
             f"(all launch calls together {k['launch_api_ms']:.2f} ms).",
             f"Most stream gaps are host_wait ({bc.get('host_wait', 0):.2f} ms): the next kernel was issued after the previous one ended."],
            "Cut per-kernel host cost: CUDA graphs (torch.compile mode='reduce-overhead'), fewer/fused ops, larger batches; "
            "check for Python overhead between ops.")

    # --- framework_overhead -------------------------------------------------
    fw = _share(bd, "framework_overhead")
    if fw >= 30.0 and not any(f["id"] == "host_launch_bound" for f in out):
        parts = {p["name"]: p["ms"] for r in bd if r["category"] == "framework_overhead" for p in r["parts"]}
        where = ("with no GPU work running" if gpu is not None else
                 "outside compute ops (Python in torch/transformers, dispatch, generation loop)")
        add("framework_overhead", "medium", "Framework / runtime overhead is a large share",
            {"framework_overhead_pct": round(fw, 2), **{f"{k2}_ms": round(v, 3) for k2, v in parts.items()}},
            [f"Framework and runtime work on the host {where}: {fw:.1f}% of the window."] +
            (["Parts: " + ", ".join(f"{k2} {v:.1f} ms" for k2, v in parts.items()) + "."] if parts else []),
            "Reduce op count and Python between ops (torch.compile, fused modules, inference_mode), or batch more work per call.")

    # --- cpu_compute (CPU-only runs) ----------------------------------------
    cc = _share(bd, "cpu_compute")
    if gpu is None and cc >= 30.0:
        add("cpu_compute", "info", "Model compute runs on the CPU", {"cpu_compute_pct": round(cc, 2), "cpu_compute_ms": round(_ms(bd, "cpu_compute"), 3)},
            [f"Framework ops computing on the CPU take {cc:.1f}% of the window (no GPU activity in the trace)."],
            "On CPU: check torch.get_num_threads() matches the cores you own, use bf16/int8 (quantization) or a GPU for the model.")

    # --- waiting ------------------------------------------------------------
    wt = _share(bd, "waiting")
    if wt >= 10.0:
        add("host_waiting", "medium" if wt >= 20 else "low", "The inference thread waits off-CPU",
            {"waiting_pct": round(wt, 2), "waiting_ms": round(_ms(bd, "waiting"), 3)},
            [f"Threads were off-CPU (sleep, I/O, locks) for {wt:.1f}% of the window with nothing else running."],
            "Find the blocking call (I/O, queue get, lock) on the inference path and move it off or make it asynchronous.")

    # --- coverage -----------------------------------------------------------
    oth = _share(bd, "other")
    if oth >= 30.0:
        add("low_coverage", "info", "Much of the window is not explained by the trace",
            {"other_pct": round(oth, 2), "other_ms": round(_ms(bd, "other"), 3)},
            [f"{oth:.1f}% of the window has no recorded GPU work, API call, op or sampled CPU activity."],
            "Record more: run under `inferscope run` (CPU sampling) or enable CPU activities / with_stack in torch.profiler.")
    out.sort(key=lambda f: SEVERITY_ORDER.get(f["severity"], 9))
    return out


VERDICT_TITLES = {
    "gpu_bound": "GPU-bound: the GPU is busy most of the time; speed up the kernels themselves",
    "copy_bound": "Copy-bound: host<->device transfers dominate",
    "sync_bound": "Sync-bound: the host waits on the GPU in synchronising calls",
    "cpu_bound": "CPU-bound: CPU preprocessing (tokenization, data preparation) dominates",
    "launch_bound": "Launch-bound: the host cannot issue kernels fast enough",
    "framework_bound": "Framework-bound: host-side framework/runtime overhead dominates",
    "cpu_compute_bound": "CPU compute-bound: the model itself runs on the CPU",
    "waiting_bound": "Waiting-bound: threads are off-CPU (I/O, sleep, locks)",
    "balanced": "Balanced: no single cause holds a clear majority",
    "init_bound": "Initialisation-dominated: one-off start-up calls fill the window; analyse a steady-state window",
    "empty": "Empty window: nothing to analyse",
}


def verdict_for(res: dict, findings: list[dict]) -> dict:
    bd = res["breakdown"]
    if res["e2e_ms"] <= 0:
        return {"id": "empty", "title": VERDICT_TITLES["empty"], "confidence": 0.0, "evidence": [],
                "confidence_basis": "no time in the window"}
    ids = {f["id"] for f in findings}
    fw_id = "launch_bound" if ({"launch_storm", "host_launch_bound"} & ids) else "framework_bound"
    groups = {
        "gpu_bound": _share(bd, "gpu_compute"),
        "copy_bound": _share(bd, "h2d_copy") + _share(bd, "d2h_copy") + _share(bd, "other_copy"),
        "sync_bound": _share(bd, "sync_wait"),
        "cpu_bound": _share(bd, "cpu_preprocessing"),
        fw_id: _share(bd, "framework_overhead"),
        "cpu_compute_bound": _share(bd, "cpu_compute"),
        "waiting_bound": _share(bd, "waiting"),
    }
    ranked = sorted(groups.items(), key=lambda kv: -kv[1])
    (top, top_pct), (second, second_pct) = ranked[0], ranked[1]
    other = _share(bd, "other")
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
