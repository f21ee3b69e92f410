"""LLM view: generation steps, requests, TTFT/TPOT/latency percentiles, tokens/s, the model's static
description (parameters, FLOPs per token, KV bytes per token) and per-stage MFU/MBU (issue 11).

Steps (one forward of the model) come from, in this order:
  * live ``hf.forward`` ranges (collect/llmhook.py: detail JSON tokens/batch/kv_len; step 0 of a
    ``generate()`` is the prefill, the rest decode);
  * serving annotations ``execute_N_context_C(sq..sk..sqsq..sqsk..)_generation_G(sq..sk..sqsq..sqsk..)``
    (vLLM/SGLang, as TraceLens' traces carry them): C context (prefill) and G generation (decode)
    requests; sq = query tokens computed, sk = KV length read, each summed over the batch;
  * SGLang ``step[DECODE bs=N]`` / ``step[PREFILL|EXTEND bs=N]`` (unless inside an execute_ range);
  * ranges whose name is a phase by the phase rule (``phases.phase_matcher``: --phase-map whole words,
    or conventional whole names prefill/decode; not ``<name>_Stage`` ranges, which wrap a whole phase): a step of that
    kind with unknown batch and tokens.
Requests: live ``hf.generate`` ranges, and ``scope(name, tokens=..., batch=...)`` ranges; one per outermost
range (a generate() call or request scope inside a request scope is part of it: ``_requests``).  Token times of
a request: ``inferscope.mark_token()`` marks in it when present; else the start of each forward after
the first (the previous token was sampled and emitted before it) and the end of the request for the
last one.  TTFT = first token time - request start; TPOT = gaps between consecutive token times.
Tokens and tokens/s: the requests' generated (prompt) tokens x batch; without requests, derived from the names of the
serving steps wholly inside the window (llm_tokens.py: one generated token per decode sequence per step, prompt tokens =
the context part's sq), per window second either way.
"""
from __future__ import annotations

import numpy as np

from ..trace.kinds import SpanKind
from ..trace.model import Trace
from .breakdown import CATEGORIES, segment_classes
from .device_peaks import resolve_peaks
from .intervals import union
from .launched import in_ranges, launched_gpu
from .llm_requests import detail as _detail, requests as _requests
from .llm_tokens import step_tokens
from .model_config import decode_mbu, embedding_unread, live_embedding, model_section, step_times_ms
from .phases import STAGE_RULE, phase_matcher
from .serving import has_evidence, serving
from .select import overlap
from .step_names import EXEC_RE, SGL_RE
from .window import Window

PCTS = (50, 90, 95, 99)


def stats(samples, what: str, warnings: list) -> dict:
    """count, mean, p50, p90, p95, p99, max (ms); percentiles null below 2 samples (with a warning)."""
    a = np.asarray(samples, dtype=np.float64)
    out = {"count": int(len(a)), "mean": None, "p50": None, "p90": None, "p95": None, "p99": None, "max": None}
    if len(a):
        out["mean"] = float(a.mean())
        out["max"] = float(a.max())
    if len(a) >= 2:
        for p, v in zip(PCTS, np.percentile(a, PCTS).tolist()):
            out[f"p{p}"] = float(v)
    elif what:
        warnings.append(f"{what}: {len(a)} sample(s); percentiles need at least 2, so they are null")
    return out


def forward_flops(m: dict, batch: int, seq: int, past: int = 0, logits_tokens: int | None = None) -> float | None:
    """Analytical FLOPs of one forward: 2 x matmul weights x tokens (the LM head only for the tokens whose
    logits are computed) + attention 4 x layers x heads x head_dim x (query, key) pairs: seq x past plus, for a
    causal block of seq > 1 new tokens, seq^2 / 2 (as torch's FlopCounterMode counts causal attention)."""
    w, lm = m.get("linear_weight_elems"), m.get("lm_head_elems") or 0
    L, H, D = m.get("layers"), m.get("heads"), m.get("head_dim")
    if not w or not (L and H and D):
        return None
    tokens = batch * seq
    lt = tokens if logits_tokens is None else logits_tokens
    pairs = seq * past + (seq * seq / 2.0 if seq > 1 else seq)
    return float(2 * (w - lm) * tokens + 2 * lm * lt + 4 * L * H * D * batch * pairs)


def flops_per_token(m: dict, context: float, prefill: bool = False) -> float | None:
    """Per token: prefill of a ``context``-token prompt (all logits), or one decode step at ``context``."""
    c = max(1, int(round(context)))
    if prefill:
        f = forward_flops(m, 1, c)
        return None if f is None else f / c
    return forward_flops(m, 1, 1, c - 1)


def kv_bytes_per_token(m: dict) -> int | None:
    L, kv, D, e = m.get("layers"), m.get("kv_heads"), m.get("head_dim"), m.get("kv_elem_bytes")
    return 2 * L * kv * D * e if (L and kv and D and e) else None


def _steps(trace: Trace, window: Window, phase_map, stage_tokens: dict | None = None) -> list[dict]:
    s = trace.spans
    strs = trace.strings.as_list()
    ann = np.flatnonzero((s.kind == SpanKind.ANNOTATION) & overlap(s.start_ns, s.end_ns, window))
    if not len(ann):
        return []
    names = s.name[ann]
    uniq = np.unique(names[names >= 0]).tolist()
    match = phase_matcher(phase_map)
    kind_of: dict[int, tuple] = {}
    for u in uniq:
        nm = strs[u]
        if nm == "hf.forward":
            kind_of[u] = ("hf",)
        elif (m := EXEC_RE.search(nm)):
            kind_of[u] = ("exec", m)
        elif (m := SGL_RE.match(nm.strip())):
            kind_of[u] = ("sgl", m)
        else:
            ph = match(nm)
            if ph and ph[0] in ("prefill", "decode") and ph[1] != STAGE_RULE:    # a stage wraps the whole phase
                kind_of[u] = ("phase", ph)
            elif ph and ph[0] in ("prefill", "decode") and stage_tokens is not None:   # --model-config: stages
                kind_of[u] = ("stage", ph)
    if not kind_of:
        return []
    sel = ann[np.isin(names, np.fromiter(kind_of, dtype=np.int64, count=len(kind_of)))]
    out = []
    for i in sel.tolist():
        k = kind_of[int(s.name[i])]
        row = {"i": i, "track": int(s.track[i]), "start_ns": int(s.start_ns[i]), "end_ns": int(s.end_ns[i]),
               "source": k[0], "name": strs[int(s.name[i])], "batch": None, "tokens": None, "kv_tokens": None}
        if k[0] == "hf":
            d = _detail(strs, int(s.detail[i]))
            step = d.get("step")
            row.update(kind="prefill" if step == 0 else "decode", batch=d.get("batch"),
                       tokens=(d["tokens"] * d["batch"]) if isinstance(d.get("tokens"), int) and isinstance(d.get("batch"), int) else None,
                       kv_tokens=(d["kv_len"] * d["batch"]) if isinstance(d.get("kv_len"), int) and isinstance(d.get("batch"), int) else None,
                       step=step)
        elif k[0] == "exec":
            g = [int(x) for x in k[1].groups()]
            n, c, c_sq, c_sk, _, _, gen, g_sq, g_sk, _, _ = g
            kind = "decode" if c == 0 and gen > 0 else ("prefill" if gen == 0 and c > 0 else "mixed")
            row.update(kind=kind, batch=c + gen, tokens=c_sq + g_sq, kv_tokens=c_sk + g_sk, scheduled_tokens=n,
                       context_sq=c_sq, generation=gen)
        elif k[0] == "sgl":
            mode = k[1].group(1).upper()
            row.update(kind={"DECODE": "decode", "PREFILL": "prefill", "EXTEND": "prefill"}.get(mode, "mixed"),
                       batch=int(k[1].group(2)), sgl_mode=mode)
        else:
            row.update(kind=k[1][0], tokens=stage_tokens.get(k[1][0]) if k[0] == "stage" else None)
        out.append(row)
    # a <name>_Stage range is a step only where no finer step of its kind was recorded
    finer = {r["kind"] for r in out if r["source"] != "stage"}
    out = [r for r in out if r["source"] != "stage" or r["kind"] not in finer]
    # an SGLang step[...] or a phase range inside an execute_ / hf step on the same thread is the same step
    strong = [r for r in out if r["source"] in ("exec", "hf")]
    if strong:
        st = np.array([[r["track"], r["start_ns"], r["end_ns"]] for r in strong], dtype=np.int64)

        def inside(r):
            return bool(np.any((st[:, 0] == r["track"]) & (st[:, 1] <= r["start_ns"]) & (st[:, 2] >= r["end_ns"])))
        dup = [r for r in out if r["source"] in ("sgl", "phase") and inside(r)]
        for r in dup:
            for q in strong:
                if q["track"] == r["track"] and q["start_ns"] <= r["start_ns"] and q["end_ns"] >= r["end_ns"]:
                    q.setdefault("also", []).append(r["name"])
                    if q["batch"] is None:
                        q["batch"] = r["batch"]
                    break
        out = [r for r in out if not (r["source"] in ("sgl", "phase") and inside(r))]
    out.sort(key=lambda r: r["start_ns"])
    # GPU time per step: work launched from inside it on its thread (phases' rule); and the span from the first
    # start to the last end of that work (CUDA-graph replays run after the host has left the step)
    lg = launched_gpu(trace, window)
    rl = in_ranges(trace, lg, [r["start_ns"] for r in out], [r["end_ns"] for r in out], [r["track"] for r in out])
    whole = rl.sum(lg.whole_ns)
    gs, ge = s.start_ns[lg.gpu[rl.order]], s.end_ns[lg.gpu[rl.order]]
    for r, w, i0, i1 in zip(out, whole.tolist(), rl.i0.tolist(), rl.i1.tolist()):
        r["gpu_ms"] = float(w) / 1e6 if trace.has_gpu else None
        r["gpu_span_ms"] = float(ge[i0:i1].max() - gs[i0:i1].min()) / 1e6 if i1 > i0 else (0.0 if trace.has_gpu else None)
        r["wall_ms"] = (r["end_ns"] - r["start_ns"]) / 1e6
    return out


def llm(trace: Trace, window: Window, phase_map=None, peak_tflops=None, peak_gbps=None,
        model_config: dict | None = None) -> tuple[dict | None, dict | None, list]:
    """(llm section, model section, warnings).  ``model_config`` (--model-config, model_config.py) describes the
    model when no live hook recorded one: stage FLOPs 2 x params x tokens, ``<name>_Stage`` ranges as steps."""
    warnings: list[str] = []
    models = [m for m in (trace.meta.get("models") or []) if isinstance(m, dict) and "params" in m]
    cfg = model_config if not models else None
    steps = _steps(trace, window, phase_map, cfg["stage_tokens"] if cfg else None)
    reqs = _requests(trace, window, steps)
    srv, sw = serving(trace, window, reqs, stats)
    model = None
    if model_config and models:
        warnings.append(f"--model-config {model_config['file']}: not used, the live hook recorded the model itself")
    if not steps and not reqs and not models and not has_evidence(srv):
        warnings.extend([f"--model-config {cfg['file']}: no prefill/decode step or stage range in the window"] if cfg else [])
        return None, None, warnings
    warnings.extend(sw)
    waits = srv.pop("_waits_ms")
    win_s = (window.end_ns - window.start_ns) / 1e9
    ttft, itl, rms, rrows = [], [], [], []
    prompt_tok = gen_tok = 0
    known_tokens = True
    for j, r in enumerate(reqs):
        rms.append((r["end_ns"] - r["start_ns"]) / 1e6)
        t = r["token_times_ns"]
        if len(t):
            ttft.append((int(t[0]) - r["start_ns"]) / 1e6)
            if len(t) > 1:
                itl.extend((np.diff(t) / 1e6).tolist())
        rrows.append([r["name"][:120], round((r["start_ns"] - window.start_ns) / 1e6, 6), r["batch"], r["prompt_tokens"],
                      r["generated_tokens"], round((int(t[0]) - r["start_ns"]) / 1e6, 6) if len(t) else None,
                      round((int(t[-1]) - int(t[0])) / (len(t) - 1) / 1e6, 6) if len(t) > 1 else None, round(rms[-1], 6),
                      round(waits[j], 6), r["error"]])
        b = r["batch"] if isinstance(r["batch"], int) else None
        if b is None or not isinstance(r["generated_tokens"], int):
            known_tokens = False
        else:
            gen_tok += b * r["generated_tokens"]
            if isinstance(r["prompt_tokens"], int):
                prompt_tok += b * r["prompt_tokens"]
    sec = {"requests": len(reqs),
           "sequences": int(sum(r["batch"] for r in reqs if isinstance(r["batch"], int))),
           "ttft_ms": stats(ttft, "ttft_ms" if reqs else "", warnings),
           "tpot_ms": stats(itl, "tpot_ms" if reqs else "", warnings),
           "request_ms": stats(rms, "request_ms" if reqs else "", warnings),
           "tokens_per_s": {"prompt": None, "generated": None}, "requests_per_s": None,
           "tokens": {"prompt": None, "generated": None}, "token_count_basis": None,
           "token_time_basis": sorted({r["basis"] for r in reqs}),
           "steps": None, "stages": [], "rule": __doc__.split("\n\n", 1)[1].strip() if __doc__ else ""}
    sec.update(srv)
    sec["_requests"] = rrows[:500]
    if reqs and win_s > 0:
        sec["requests_per_s"] = len(reqs) / win_s
        if known_tokens:
            has_prompt = any(isinstance(r["prompt_tokens"], int) for r in reqs)
            sec["tokens"] = {"prompt": prompt_tok if has_prompt else None, "generated": gen_tok}
            sec["tokens_per_s"] = {"prompt": prompt_tok / win_s if has_prompt else None, "generated": gen_tok / win_s}
            sec["token_count_basis"] = "requests: generated_tokens (and prompt_tokens) x batch of each request range"
        else:
            warnings.append("tokens/s unknown: a request range lacks its batch or generated-token count")
    elif not reqs:
        served, w = step_tokens(steps, window)
        warnings.extend(w)
        if served is not None and win_s > 0:
            sec["tokens"] = {"prompt": served["prompt"], "generated": served["generated"]}
            sec["tokens_per_s"] = {k: None if v is None else v / win_s for k, v in sec["tokens"].items()}
            sec["token_count_basis"] = served["basis"]
        what = "TTFT, TPOT and request latency are" if served is not None else "TTFT, TPOT, request latency and tokens/s are"
        warnings.append("LLM latency: no requests in the window (no generate() call recorded, no scope(name, tokens=..., "
                        f"batch=...) range): {what} null")
    # model
    m = models[0] if models else None
    if m:
        prompt_mean = np.mean([r["prompt_tokens"] for r in reqs if isinstance(r["prompt_tokens"], int)]) if any(
            isinstance(r["prompt_tokens"], int) for r in reqs) else None
        gen_mean = np.mean([r["generated_tokens"] for r in reqs if isinstance(r["generated_tokens"], int)]) if any(
            isinstance(r["generated_tokens"], int) for r in reqs) else None
        dec_ctx = (prompt_mean + gen_mean / 2.0) if (prompt_mean is not None and gen_mean is not None) else None
        model = {k: m.get(k) for k in ("name", "class", "model_type", "params", "param_bytes", "params_by_dtype",
                                       "bytes_by_dtype", "layers", "hidden", "heads", "kv_heads", "head_dim",
                                       "intermediate", "vocab", "linear_weight_elems", "lm_head_elems")}
        model["params_by_dtype"] = model["params_by_dtype"] or {}
        model["bytes_by_dtype"] = model["bytes_by_dtype"] or {}
        model["flops_per_token"] = {
            "prefill": flops_per_token(m, prompt_mean, prefill=True) if prompt_mean is not None else None,
            "decode": flops_per_token(m, dec_ctx) if dec_ctx is not None else None,
            "prefill_context": None if prompt_mean is None else float(prompt_mean),
            "decode_context": None if dec_ctx is None else float(dec_ctx)}
        model["kv_bytes_per_token"] = kv_bytes_per_token(m)
        model["flops_basis"] = ("2 x matmul weight elements (every nn.Linear and transformers Conv1D, LM head included) + attention 4 x layers x "
                                "heads x head_dim x keys attended per token (prefill: causal, half the prompt on average; "
                                "decode: the whole context), as torch's FlopCounterMode counts them; prefill at the mean "
                                "prompt length, decode at the mean context (prompt + half the generated tokens)")
        if prompt_mean is None:
            warnings.append("FLOPs per token unknown: no request with a prompt length in the window")
        if len(models) > 1:
            warnings.append(f"{len(models)} models were used by generate(); the model section describes the first")
    elif cfg:
        model = model_section(cfg)
    # steps and stages
    if steps:
        sec["steps"] = [{k: r.get(k) for k in ("name", "kind", "source", "batch", "tokens", "kv_tokens", "wall_ms", "gpu_ms",
                                                "gpu_span_ms")}
                        | {"start_ms": (r["start_ns"] - window.start_ns) / 1e6} for r in steps[:500]]
        devs = trace.meta.get("devices") or []
        dtype = None
        if m:
            bd = m.get("params_by_dtype") or {}
            top = max(bd, key=bd.get) if bd else None
            dtype = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(top or "", top)
        elif cfg:
            dtype = cfg["dtype"]
        cfg_peak = cfg.get("peak_tflops") if (cfg and peak_tflops is None) else None
        tf = gb = src = None
        if devs or peak_tflops or peak_gbps or cfg_peak:
            tf, gb, src, _, w = resolve_peaks(trace, dtype, peak_tflops or cfg_peak, peak_gbps)
            if cfg_peak and src:
                src = src.replace("TFLOP/s from --peak-tflops", f"TFLOP/s from --model-config {cfg['file']}")
        seg = segment_classes(trace, window)
        for kind in ("prefill", "decode", "mixed"):
            rs = [r for r in steps if r["kind"] == kind]
            if not rs:
                continue
            wall = np.array([r["wall_ms"] for r in rs])
            step_t = np.asarray(step_times_ms(rs))      # the step time MFU and MBU divide by (model_config.py)
            busy_s = float(step_t.sum()) / 1e3
            st = {"stage": kind, "steps": len(rs), "wall_ms": float(wall.sum()),
                  "gpu_ms": float(sum(r["gpu_ms"] for r in rs)) if trace.has_gpu else None,
                  "step_ms": stats(wall, "", warnings),
                  "batch": _common([r["batch"] for r in rs]),
                  "tokens": int(sum(r["tokens"] for r in rs)) if all(isinstance(r["tokens"], int) for r in rs) else None,
                  "kv_tokens_mean": float(np.mean([r["kv_tokens"] for r in rs])) if all(isinstance(r["kv_tokens"], int) for r in rs) else None,
                  "flops": None, "achieved_tflops": None, "mfu_pct": None, "mbu_pct": None,
                  "step_time_ms": float(step_t.mean()),
                  "peak_tflops": tf, "peak_gbps": gb, "peak_source": src,
                  "breakdown": stage_breakdown(seg, [max(r["start_ns"], window.start_ns) for r in rs],
                                               [min(r["end_ns"], window.end_ns) for r in rs])}
            if cfg and st["tokens"] is not None and busy_s > 0:
                st["flops"] = 2.0 * cfg["params"] * st["tokens"]
                st["achieved_tflops"] = st["flops"] / busy_s / 1e12
                st["mfu_pct"] = 100.0 * st["achieved_tflops"] / tf if tf else None
            if m and st["tokens"] is not None and all(isinstance(r.get("batch"), int) for r in rs):
                fl = 0.0
                okf = True
                for r in rs:
                    b = r["batch"]
                    seq = r["tokens"] // max(b, 1)
                    past = (r["kv_tokens"] or 0) // max(b, 1)
                    f = forward_flops(m, b, seq, past, logits_tokens=b if r["source"] == "hf" else None)
                    if f is None:
                        okf = False
                        break
                    fl += f
                if okf and busy_s > 0:
                    st["flops"] = fl
                    st["achieved_tflops"] = fl / busy_s / 1e12
                    st["mfu_pct"] = 100.0 * st["achieved_tflops"] / tf if tf else None
                kvb = kv_bytes_per_token(m)
                if kind == "decode" and gb and kvb and st["kv_tokens_mean"] is not None and m.get("param_bytes"):
                    st.update(decode_mbu(m["param_bytes"], kvb, st["kv_tokens_mean"], st["step_time_ms"], gb,
                                         embedding=embedding_unread(live_embedding(m), st["tokens"] / len(rs)))[0])
            if cfg and kind == "decode":             # --model-config: MBU beside MFU (model_config.py: formula)
                rows = (st["tokens"] / len(rs) if st["tokens"] is not None else st["batch"])   # embedding rows a step reads
                mb, w = decode_mbu(cfg.get("param_bytes"), kv_bytes_per_token(cfg), st["kv_tokens_mean"], st["step_time_ms"],
                                   gb, all(r["source"] != "stage" for r in rs), embedding_unread(cfg, rows))
                st.update(mb)
                warnings.extend(w)
            if st["mfu_pct"] is None:
                why = ("no model description (FLOPs per step unknown: a live generate() run records it, or pass "
                       "--model-config)" if not (m or cfg)
                       else "no peak FLOP/s for this device (CPU, or unknown: pass --peak-tflops)" if not tf
                       else "token counts unknown (the ranges do not name their tokens: give stage_tokens in "
                             "--model-config)" if cfg else "token counts unknown")
                warnings.append(f"{kind} MFU is null: {why}")
            sec["stages"].append(st)
    return sec, model, warnings


def stage_breakdown(seg, starts, ends) -> list[dict]:
    """What a stage's time goes to: the window's breakdown segments (breakdown.segment_classes) inside the
    union of the stage's steps, per category (the rows add up to the union's length)."""
    seg_s, seg_e, cat = seg[0], seg[1], seg[2]
    us, ue = union(np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64))
    if not len(us) or not len(seg_s):
        return []
    cum = np.concatenate(([0], np.cumsum(ue - us)))

    def covered_until(x):   # length of the union left of x
        k = np.searchsorted(us, x, side="right")          # intervals starting at or before x
        full = cum[np.maximum(k - 1, 0)]
        part = np.where(k > 0, np.minimum(x, ue[np.maximum(k - 1, 0)]) - us[np.maximum(k - 1, 0)], 0)
        return np.where(k > 0, full + part, 0)
    ov = (covered_until(seg_e) - covered_until(seg_s)).astype(np.int64)
    tot = np.bincount(cat.astype(np.int64), weights=ov, minlength=len(CATEGORIES))
    total = float(tot.sum())
    return [{"category": c, "ms": float(tot[i]) / 1e6, "pct": 100.0 * float(tot[i]) / total if total else 0.0}
            for i, c in enumerate(CATEGORIES) if tot[i] > 0]


def _common(vals):
    v = [x for x in vals if isinstance(x, int)]
    if not v:
        return None
    return max(set(v), key=v.count)


def llm_tables(sec: dict) -> dict:
    t = {}
    if sec and sec.get("_requests"):
        t["llm_requests"] = {"columns": ["request", "start_ms", "batch", "prompt_tokens", "generated_tokens", "ttft_ms",
                                         "tpot_ms", "request_ms", "queue_wait_ms", "error"], "rows": sec["_requests"]}
    if sec and sec.get("steps"):
        t["llm_steps"] = {"columns": ["step", "kind", "batch", "tokens", "kv_tokens", "start_ms", "wall_ms", "gpu_ms", "gpu_span_ms"],
                          "rows": [[r["name"][:120], r["kind"], r["batch"], r["tokens"], r["kv_tokens"], round(r["start_ms"], 6),
                                    round(r["wall_ms"], 6), None if r["gpu_ms"] is None else round(r["gpu_ms"], 6),
                                    None if r["gpu_span_ms"] is None else round(r["gpu_span_ms"], 6)]
                                   for r in sec["steps"]]}
    return t
