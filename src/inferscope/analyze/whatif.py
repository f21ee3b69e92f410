"""What-if: how much end-to-end time a finding's suggestion would save (issue 42).

Pure functions over the analysis dict the findings see.  ``predict(res, finding)`` gives one finding's
prediction; ``annotate(res, findings)`` puts it on each finding and orders them by predicted saving
(then severity); ``summary(res, findings)`` is report.json's ``what_if``: the combined saving of the top
``thresholds.WHATIF_COMBINED_TOP_N`` predictions with double-counted time removed.

Fields on a finding (null where not actionable): ``expected_saving_ms``, ``expected_saving_pct`` (of the
window's e2e), ``saving_low_ms`` / ``saving_high_ms`` (the range), ``saving_model``, ``saving_basis`` (the
formula with the cited values) and ``saving_categories`` (the breakdown categories the time comes from).
Every prediction is capped at those categories' time and at e2e: a suggestion cannot save time the window
does not spend there.

A range whose end is read from a sampled figure (the live CPU classes, the sampler's blocking and page-fault
attributions) is widened at that end by the sampling's 95 % half-width at the expected saving's share of e2e
(``whatif_pred.sampling_half_width_ms``: the measurement's uncertainty beside the model's); exact figures (GPU
spans, timed GC pauses, schedstat run-queue delay) are not widened.

Models (assumption; where the range comes from):

- ``remove``: the time disappears.  Saving = the removed time that nothing else ran beside: for
  ``sync_stall`` the breakdown's sync_wait (blocked with the GPU idle, exact); for ``warmup_in_window`` and
  ``python_gc`` the calls' / pauses' union x the GPU-idle share of the window (no exclusive measure: GPU
  work is assumed spread evenly).  Range: that exclusive part (for ``python_gc`` less
  ``WHATIF_WAIT_RESIDUAL_FRACTION`` of it: young collections stay after gc.freeze(), a collection between
  requests moves) .. the whole removed time (if the GPU work beside it was itself waiting on it).
- ``overlap``: the time hides behind the longest parallel activity (compute kernels).  Saving = exposed
  time, capped at the compute time it can hide behind.  Range: low hides only behind compute not already
  hosting that activity; high = all the exposed time.  Used by ``gpu_communication``.
- ``scale``: Amdahl over added workers.  Saving = category time x (1 - 1/n), n = the core that runs it now
  plus the idle cores of the process (live runs: counters.process_cores) or ``WHATIF_SCALE_DEFAULT_WORKERS``, at most
  ``WHATIF_SCALE_MAX_WORKERS``.  Range: each added worker at ``WHATIF_THREAD_SCALING_LOW_EFFICIENCY`` of one
  (zoo_preprocess_pool: a fork Pool of 2 on 2 CPUs ran the resizes 1.5-1.65x faster, not 2x) .. the whole time
  (fully overlapped with the GPU).
  Used by ``cpu_preprocessing`` (unless batching applies, below).
- ``replace``: a measured faster alternative.  ``pageable_copy``: cost (max of the blocked calls and the
  copies' GPU time) - bytes / pinned bandwidth, the pinned bandwidth measured from the trace's own pinned
  copies, else the pageable one x ``WHATIF_PINNED_OVER_PAGEABLE_BW_RATIO``; range: no bandwidth gain
  (only the staging goes) .. the whole cost (the pinned copy also overlaps compute).  ``launch_storm`` /
  ``host_launch_bound``: launches x the measured median launch-call time, capped at the launch time with
  the GPU idle (breakdown framework_overhead/launch_api); range: keep ``WHATIF_LAUNCH_RESIDUAL_FRACTION``
  of it .. every launch call's time.  ``small_copies``: one coalesced copy instead of n - the larger of the host
  side (the calls' own time less one median call; a call's time before its copy began on the GPU waited for earlier
  GPU work, which the coalesced copy waits for too, and is not counted) and the GPU side (their GPU time less the
  bytes at the bandwidth the window's large copies reached, else less one small copy's mean); range: keep
  ``WHATIF_LAUNCH_RESIDUAL_FRACTION`` of it (packing the items into one buffer) .. every call's own time or all
  the GPU time.  ``cpu_preprocessing`` when tokenization is called per item (its Python
  around the native encode >= ``TOKENIZER_PER_CALL_PYTHON_PCT``, analyze/tokenizer_split.py): batched calls;
  saving = the tokenizer's Python (the native encode stays); range: keep ``WHATIF_WAIT_RESIDUAL_FRACTION`` of it
  (per-item conversion, the caller's loop) .. all of it.

CPU findings (live runs; their models and ranges in whatif_cpu.py): ``blocking_io``, ``lock_wait``,
``page_fault_storm`` (remove), ``gil_contention`` (overlap), ``cpu_oversubscription`` (scale down threads),
``cpu_run_queue`` (remove, only when the process's own threads or workers hold the cores), ``cpu_underuse``
(scale up the torch threads onto the idle cores).

Not actionable (null fields): the findings in ``NOT_ACTIONABLE``, each with the reason no saving is predicted
(tests/test_whatif.py checks that every finding id the rules can emit is in ``MODELS``, the CPU models or there).
"""
from __future__ import annotations

from .. import thresholds as T
from .evidence import SEVERITY_ORDER, _ms
from .whatif_cpu import MODELS as CPU_MODELS
from .tokenizer_split import batching_applies
from .whatif_pred import HOST_CATS, RESIDUAL, _part_ms, _pred, scaled_saving_ms

COPY_CATS = ("h2d_copy", "d2h_copy", "other_copy", "sync_wait")
FIELDS = ("expected_saving_ms", "expected_saving_pct", "saving_low_ms", "saving_high_ms", "saving_model",
          "saving_basis", "saving_categories")


def _idle_frac(res: dict) -> float:
    g = res.get("gpu")
    return 1.0 if g is None else max(0.0, min(1.0, float(g["idle_pct"]) / 100.0))


def _intervals(rows: list, total_ms: float) -> list[tuple[float, float]] | None:
    """(start, end) offsets in ms of the listed items, when they cover the whole total (else None)."""
    iv = [(float(r["offset_ms"]), float(r["offset_ms"]) + float(r["ms"])) for r in rows or []]
    return iv if iv and _union_ms(iv) >= 0.999 * total_ms else None


def _union_ms(iv: list[tuple[float, float]]) -> float:
    out, end = 0.0, float("-inf")
    for a, b in sorted(iv):
        if b > end:
            out += b - max(a, end)
            end = b
    return out


def _remove(res, removed_ms, exclusive_ms, basis, cats, intervals=None, key=None):
    return _pred(res, "remove", exclusive_ms, exclusive_ms, removed_ms, basis, cats, intervals, key)


def _sync_stall(res: dict) -> dict | None:
    sw, blocked = _ms(res, "sync_wait"), float((res.get("syncs") or {}).get("blocked_ms") or 0.0)
    return _remove(res, blocked, sw, f"breakdown[sync_wait].ms {sw:.3f} (blocked, GPU idle) .. syncs.blocked_ms "
                   f"{blocked:.3f}", ("sync_wait",), key="sync")


def _warmup(res: dict) -> dict | None:
    oo = res.get("one_off_calls") or {}
    u, f = float(oo.get("union_ms") or 0.0), _idle_frac(res)
    return _remove(res, u, u * f, f"one_off_calls.union_ms {u:.3f} x GPU-idle share {f:.3f} .. union_ms", HOST_CATS,
                   _intervals(oo.get("calls"), u), key="one_off")


def _gc(res: dict) -> dict | None:
    """The pauses go (with the GPU-idle share as the part nothing ran beside); the low end keeps
    WHATIF_WAIT_RESIDUAL_FRACTION of that: gc.freeze() leaves the young collections and a cheaper full one, and
    collecting between requests moves a pause rather than removing it when the requests are back to back."""
    g = res.get("gc_pauses") or {}
    t, f = float(g.get("total_ms") or 0.0), _idle_frac(res)
    return _pred(res, "remove", t * f, t * f * (1.0 - T.WHATIF_WAIT_RESIDUAL_FRACTION), t,
                 f"gc_pauses.total_ms {t:.3f} x GPU-idle share {f:.3f}; low keeps {RESIDUAL} (young collections stay, "
                 "a collection between requests moves); high: total_ms", HOST_CATS, _intervals(g.get("longest"), t),
                 key="gc")


def _pageable(res: dict) -> dict | None:
    pg = (res.get("copies") or {}).get("pageable") or {}
    calls = float((res.get("syncs") or {}).get("pageable_copy_calls_sum_ms") or 0.0)
    gpu_ms, nbytes = float(pg.get("ms") or 0.0), int(pg.get("bytes") or 0)
    cost = max(calls, gpu_ms)
    rows = (res.get("copies") or {}).get("by_kind") or []
    pin_b = sum(int(r.get("pinned_bytes") or 0) for r in rows)
    pin_ms = sum(float(r.get("pinned_ms") or 0.0) for r in rows)
    page_bw = nbytes / (gpu_ms * 1e6) if gpu_ms > 0 else None                  # bytes/ns = GB/s
    if pin_b > 0 and pin_ms > 0:
        bw, how = pin_b / (pin_ms * 1e6), f"pinned bandwidth measured from the trace's pinned copies {pin_b / (pin_ms * 1e6):.3f} GB/s"
    elif page_bw:
        bw = page_bw * T.WHATIF_PINNED_OVER_PAGEABLE_BW_RATIO
        how = f"pinned = pageable {page_bw:.3f} GB/s x thresholds.WHATIF_PINNED_OVER_PAGEABLE_BW_RATIO"
    else:
        return None
    pinned_ms = nbytes / bw / 1e6
    slow_ms = nbytes / page_bw / 1e6 if page_bw else pinned_ms
    return _pred(res, "replace", cost - pinned_ms, cost - slow_ms, cost,
                 f"cost max(calls {calls:.3f}, GPU {gpu_ms:.3f}) - {nbytes} B / pinned bandwidth ({how}); low: no "
                 "bandwidth gain; high: the whole cost (the copy overlaps compute)", COPY_CATS, key="pageable")


def _launch(res: dict) -> dict | None:
    k = res.get("kernels") or {}
    n, p50_us, tot = int(k.get("launch_api_calls") or 0), float(k.get("launch_api_p50_us") or 0.0), float(k.get("launch_api_ms") or 0.0)
    if n == 0:
        return None
    exposed = _part_ms(res, "framework_overhead", "launch_api")
    exp = min(n * p50_us / 1e3, exposed)
    return _pred(res, "replace", exp, exp * (1.0 - T.WHATIF_LAUNCH_RESIDUAL_FRACTION), min(tot, _ms(res, "framework_overhead")),
                 f"{n} launches x median launch call {p50_us:.3f} us, capped at the launch time with the GPU idle "
                 f"(breakdown[framework_overhead].parts[launch_api].ms {exposed:.3f}); low keeps "
                 f"thresholds.WHATIF_LAUNCH_RESIDUAL_FRACTION; high: every launch call (kernels.launch_api_ms {tot:.3f})",
                 ("framework_overhead",), key="launch")


def _small_copies(res: dict) -> dict | None:
    sm = (res.get("copies") or {}).get("small") or {}
    n, gpu_ms, nbytes = int(sm.get("count") or 0), float(sm.get("ms") or 0.0), int(sm.get("bytes") or 0)
    own, p50, bw = float(sm.get("call_ms") or 0.0), float(sm.get("call_p50_us") or 0.0) / 1e3, sm.get("bulk_gbps")
    if n < 2:
        return None
    if bw:
        one_gpu, how = nbytes / float(bw) / 1e6, f"{nbytes} B at the window's large copies' {float(bw):.3f} GB/s"
    else:
        one_gpu, how = gpu_ms / n, "one small copy's mean GPU time (no large copy measured the bandwidth)"
    exp = max(own - p50, gpu_ms - one_gpu)
    return _pred(res, "replace", exp, exp * (1.0 - T.WHATIF_LAUNCH_RESIDUAL_FRACTION), max(own, gpu_ms),
                 f"one coalesced copy instead of {n}: max(host: the calls' own time copies.small.call_ms {own:.3f} less "
                 f"one median call {p50:.3f}; GPU: copies.small.ms {gpu_ms:.3f} less one copy, {how}: {one_gpu:.3f}); "
                 f"the calls' wait for earlier GPU work (call_wait_ms {float(sm.get('call_wait_ms') or 0.0):.3f}) stays; "
                 "low keeps thresholds.WHATIF_LAUNCH_RESIDUAL_FRACTION (packing the items into one buffer still costs per "
                 "item); high: every call's own time or all the GPU time", COPY_CATS + ("framework_overhead",),
                 key="small_copies")


def _workers(res: dict) -> tuple[float, str]:
    pc = (res.get("counters") or {}).get("process_cores") or {}
    if pc.get("cores"):
        idle = max(0.0, float(pc["cores"]) * (1.0 - float(pc.get("mean_util_pct") or 0.0) / 100.0))
        # the core that runs the preprocessing now, plus the idle capacity (one idle core takes half of it: n = 2;
        # a fraction counts: 0.91 of a core idle on average is 0.91 of a worker, not none)
        return (max(1.0, min(1.0 + idle, float(T.WHATIF_SCALE_MAX_WORKERS))),
                f"its thread's core + {idle:.2f} idle core(s) of counters.process_cores")
    return T.WHATIF_SCALE_DEFAULT_WORKERS, "thresholds.WHATIF_SCALE_DEFAULT_WORKERS (cores not recorded)"


def _batching(res: dict) -> dict:
    tk = res["tokenizer"]
    py, nat = float(tk["python_ms"]), float(tk["native_ms"])
    return _pred(res, "replace", py, py * (1.0 - T.WHATIF_WAIT_RESIDUAL_FRACTION), py,
                 f"batched calls: tokenizer.python_ms {py:.3f} (the Python around {int(round(nat))} ms of native encode, "
                 f"tokenizer.native_ms {nat:.3f}, which stays) goes; low keeps {RESIDUAL} (a batched call still "
                 "converts each item in Python, and the caller's loop stays); high: all of it",
                 ("cpu_preprocessing",), key="preprocessing", sampled="low,high")


def _preprocessing(res: dict) -> dict | None:
    if batching_applies(res):
        return _batching(res)
    ms = _ms(res, "cpu_preprocessing")
    n, why = _workers(res)
    eff = T.WHATIF_THREAD_SCALING_LOW_EFFICIENCY
    return _pred(res, "scale", scaled_saving_ms(ms, 1.0, n), scaled_saving_ms(ms, 1.0, n, eff), ms,
                 f"breakdown[cpu_preprocessing].ms {ms:.3f} x (1 - 1/{n:.2f}) workers ({why}); low: each added worker "
                 f"does thresholds.WHATIF_THREAD_SCALING_LOW_EFFICIENCY {eff:g} of one (dispatch, result transfer, the "
                 "cores shared with the main thread); high: all of it (overlapped with inference)",
                 ("cpu_preprocessing",), key="preprocessing", sampled="low,high")


def _comm(res: dict) -> dict | None:
    exposed, compute = _ms(res, "gpu_communication"), _ms(res, "gpu_compute")
    busy = float((res.get("gpu") or {}).get("comm_kernel_busy_ms") or 0.0)
    hosted = max(0.0, busy - exposed)                      # comm already hidden under compute
    return _pred(res, "overlap", min(exposed, compute), min(exposed, max(0.0, compute - hosted)), exposed,
                 f"exposed breakdown[gpu_communication].ms {exposed:.3f} hidden behind breakdown[gpu_compute].ms "
                 f"{compute:.3f}; low: behind compute not already hosting communication ({hosted:.3f} ms); high: all",
                 ("gpu_communication",), key="comm")


MODELS = {"sync_stall": _sync_stall, "warmup_in_window": _warmup, "python_gc": _gc, "pageable_copy": _pageable,
          "small_copies": _small_copies,
          "launch_storm": _launch, "host_launch_bound": _launch, "cpu_preprocessing": _preprocessing,
          "gpu_communication": _comm}


_NO_FASTER_KERNEL = "no faster kernel is measured in the trace to replace it with"
_NO_ALTERNATIVE = "no alternative is measured in the trace"
NOT_ACTIONABLE = {
    "gpu_idle": "its time is the host findings' time: their predictions carry it",
    "dominant_kernel": _NO_FASTER_KERNEL, "gpu_compute_bound": _NO_FASTER_KERNEL, "low_mfu": _NO_FASTER_KERNEL,
    "decode_low_mbu": _NO_FASTER_KERNEL, "kernel_limiter": _NO_FASTER_KERNEL,
    "framework_overhead": _NO_ALTERNATIVE + " (a compiled or graph-captured model is another program)",
    "cpu_compute": _NO_ALTERNATIVE + " (moving the math to an accelerator or a faster library)",
    "host_waiting": "what the thread waits for is not named: the blocking, lock and GIL findings predict what is",
    "numa_placement": _NO_ALTERNATIVE + " (the same run on the GPU's NUMA node)",
    "gpu_throttling": "a host or cooling setting, not a change to the program",
    "gpu_temperature": "a host or cooling setting, not a change to the program",
    "gpu_memory_pressure": "memory, not time: nothing in the window would run faster",
    "gpu_util_counter": "a counter reading: the breakdown's findings predict the time it stands for",
    "oom": "a failure, not time: the run cannot continue at this size",
    "request_errors": "failed requests, not time",
    "low_cache_hit_rate": _NO_ALTERNATIVE + " (the prefix-cache hit rate a different request mix would reach)",
    "slow_steps": "the slow steps' cause is another finding's; they are its symptom",
    "latency_tail": "the tail's cause is another finding's (queueing, host pauses); it is their symptom",
    "low_coverage": "nothing to change in the program: the profile saw too little of it",
}


def predict(res: dict, finding: dict) -> dict | None:
    fn = MODELS.get(finding["id"]) or CPU_MODELS.get(finding["id"])
    return fn(res) if fn is not None else None


def _rank_key(f: dict):
    s = f.get("expected_saving_ms")
    return (0 if s else 1, -(s or 0.0), SEVERITY_ORDER.get(f["severity"], 9))


def llm_terms(res: dict, saving_ms: float | None) -> dict:
    """A saving in the units of the llm section: per request, the saving x mean request latency / e2e (the saved time
    assumed spread evenly over the window, so each request shortens by the saved time during its life - S / N for N
    requests served one after another); generated tokens per second over the shortened window."""
    out = {"expected_saving_request_ms": None, "expected_tokens_per_s": None}
    llm, e2e = res.get("llm") or {}, float(res.get("e2e_ms") or 0.0)
    if saving_ms is None or e2e <= 0 or not llm:
        return out
    mean = (llm.get("request_ms") or {}).get("mean")
    if llm.get("requests") and mean is not None:
        out["expected_saving_request_ms"] = float(saving_ms) * float(mean) / e2e
    gen = (llm.get("tokens") or {}).get("generated")
    if gen and e2e - float(saving_ms) > 0:
        out["expected_tokens_per_s"] = float(gen) / ((e2e - float(saving_ms)) / 1e3)
    return out


def annotate(res: dict, findings: list[dict]) -> list[dict]:
    """Each finding with its prediction (null fields when not actionable), ordered by saving, then severity."""
    for f in findings:
        p = predict(res, f) or {}
        for k in FIELDS:
            f[k] = p.get(k)
        f.update(llm_terms(res, f["expected_saving_ms"]))
    return sorted(findings, key=_rank_key)


def combined(res: dict, findings: list[dict], field: str = "expected_saving_ms") -> float:
    """The saving of ``findings`` together: the same removed quantity (key) counted once; findings whose
    categories touch form one pool, capped at the pool's categories' time; inside a pool, findings with
    the intervals they remove count the union of those intervals (each scaled by its own saving); a ``scale``
    prediction is a fraction of its categories' time (more workers make the time shorter, they do not remove a
    quantity), so it applies to what the pool's other savings leave: remaining x (1 - prod(1 - fraction)); the
    total capped at e2e."""
    best: dict = {}
    for f in findings:
        p = predict(res, f) or {}
        key, iv = p.get("_key", f["id"]), p.get("_intervals")
        if f.get(field) is not None and (key not in best or f[field] > best[key][0]):
            cats = set(f["saving_categories"])
            base = sum(_ms(res, c) for c in sorted(cats))
            frac = min(1.0, float(f[field]) / base) if f.get("saving_model") == "scale" and base > 0 else None
            best[key] = (float(f[field]), cats, iv, frac)
    pools: list[list] = []                                   # [categories, [(saving, intervals, scale fraction)]]
    for saving, cats, iv, frac in best.values():
        merged = [p for p in pools if p[0] & cats]
        pool = [set(cats), [(saving, iv, frac)]]
        for p in merged:
            pools.remove(p)
            pool[0] |= p[0]
            pool[1] += p[1]
        pools.append(pool)
    total = 0.0
    for cats, items in pools:
        cap = sum(_ms(res, c) for c in sorted(cats))
        with_iv = [(s, iv) for s, iv, fr in items if iv and fr is None]
        s_iv = sum(s for s, _ in with_iv)
        if len(with_iv) > 1:
            lens = sum(_union_ms(iv) for _, iv in with_iv)
            s_iv *= _union_ms([x for _, iv in with_iv for x in iv]) / lens if lens else 1.0
        s = min(cap, s_iv + sum(s for s, iv, fr in items if not iv and fr is None))
        keep = 1.0
        for _, _, fr in items:
            if fr is not None:
                keep *= 1.0 - fr
        total += s + (cap - s) * (1.0 - keep)
    return min(total, float(res.get("e2e_ms") or 0.0))


def summary(res: dict, findings: list[dict]) -> dict | None:
    """report.json ``what_if``: the top predictions and their combined saving (double counting removed)."""
    top = [f for f in findings if f.get("expected_saving_ms")][:T.WHATIF_COMBINED_TOP_N]
    if not top:
        return None
    e2e = float(res.get("e2e_ms") or 0.0)
    c = combined(res, top)
    return {"findings": [f["id"] for f in top], "combined_saving_ms": c,
               "combined_saving_pct": 100.0 * c / e2e if e2e else 0.0,
               "combined_low_ms": combined(res, top, "saving_low_ms"),
               "combined_high_ms": combined(res, top, "saving_high_ms"),
               "sum_saving_ms": sum(f["expected_saving_ms"] for f in top),
               "rule": (f"the top {len(top)} predicted savings together: a quantity two findings remove counted once; "
                        "findings drawing on the same breakdown categories capped at those categories' time (and "
                        "intervals they both remove counted once); the total capped at e2e")}
