"""Serving findings (issue 46, seed 002's alert and troubleshooting tables): request_errors, oom (an out-of-memory
exception, or device memory at thresholds.OOM_CAPACITY_PCT of its total without one),
low_cache_hit_rate, and latency_tail (a slow p99, with queueing / head-of-line blocking when requests wait).
Their numbers come from the llm section (analyze/llm.py, analyze/serving.py)."""
from __future__ import annotations

from .. import thresholds as T
from .evidence import Evidence, _t


def request_errors(res: dict, found: dict) -> dict | None:
    llm = res.get("llm") or {}
    rate = llm.get("error_rate_pct")
    if rate is None or rate <= T.ERROR_RATE_ALERT_PCT:
        return None
    e = Evidence(res)
    n = e.cite("errors", "llm.errors")
    total = e.cite("requests", "llm.requests")
    e.cite("error_rate_pct", "llm.error_rate_pct", 2)
    types = llm.get("error_types") or []
    for j, t in enumerate(types[:3]):
        e.cite(f"type_{j}", f"llm.error_types[{j}].type")
        e.cite(f"type_{j}_count", f"llm.error_types[{j}].count")
    listed = ", ".join(f"{t['type']} x{t['count']}" for t in types[:5])
    txt = [f"{n} of {total} requests ({rate:.1f}%) ended with an exception: {listed}; seed 002's critical alert is an "
           f"error rate > {T.ERROR_RATE_ALERT_PCT:g}%. Only the exception class is recorded, never its message."]
    oom = "oom" in found
    if oom:
        txt.append("Out-of-memory failures are among them (finding oom).")
    return e.finding("request_errors", "high", f"{rate:.1f}% of requests failed", txt,
                     "Look up the failing requests (the llm_requests table's error column, with their start times) in the "
                     "program's logs; fix the most frequent exception class first. Alert on "
                     "inferscope_scope_errors_total over inferscope_scope_duration_seconds_count (docs/prometheus.md).")


def _memory_peak(res: dict):
    """(index, row) of the counters.gpu_memory row with the highest peak_pct, or None."""
    gm = [(j, g) for j, g in enumerate((res.get("counters") or {}).get("gpu_memory") or []) if g.get("peak_pct") is not None]
    return max(gm, key=lambda r: r[1]["peak_pct"]) if gm else None


def _cite_memory(e: Evidence, j: int) -> tuple:
    """gpu_memory_pressure's evidence (device, peak, total, headroom of counters.gpu_memory[j]), cited into oom's."""
    return tuple(e.cite_all(f"counters.gpu_memory[{j}]", gpu_device="device", gpu_mem_peak_pct=("peak_pct", 2),
                            gpu_mem_peak_bytes="peak_bytes", gpu_mem_total_bytes="total_bytes",
                            gpu_mem_headroom_bytes="headroom_bytes"))


def oom(res: dict, found: dict) -> dict | None:
    """Out of memory: a range failed with an OOM exception (or another one while memory was full), or memory is at
    capacity.  One cause, one finding: gpu_memory_pressure (diagnosis_gpu_counters.py, run after this rule) stays
    silent whenever oom fires, and oom carries its numbers (peak, total, headroom) when the peak is at or above
    its warning level - see gpu_memory_pressure for why oom is the one kept."""
    llm = res.get("llm") or {}
    o = llm.get("oom") or {}
    top = _memory_peak(res)
    top_pct = top[1]["peak_pct"] if top is not None else -1.0
    cap = top if top_pct >= T.OOM_CAPACITY_PCT and top[1].get("total_bytes") else None
    near = top if top_pct >= T.OOM_NEAR_TOTAL_PCT else None
    e = Evidence(res)
    if o.get("count"):
        n = e.cite("oom_ranges", "llm.oom.count")
        first = e.cite("first_oom_ms", "llm.oom.first_ms", 3)
        txt = [f"{n} range(s) ended with an out-of-memory exception ({', '.join(o.get('types') or [])}); the first at "
               f"+{first:.1f} ms into the window."]
    elif near is not None and o.get("other_errors"):
        n = e.cite("failed_ranges", "llm.oom.other_errors")
        txt = [f"{n} range(s) ended with an exception while GPU memory peaked within "
               f"{100 - T.OOM_NEAR_TOTAL_PCT:g}% of its total: likely an out-of-memory failure (older torch raises "
               "RuntimeError for it; only the class name is recorded)."]
    elif cap is not None:
        j, g = cap
        dev, pct, peak, total, head = _cite_memory(e, j)
        what = "torch's reserved pool" if g.get("metric") == "gpu.mem_reserved_bytes" else "used memory (NVML)"
        txt = [f"No range ended with an exception, but GPU {dev} memory ({what}) peaked at "
               f"{peak / 2**30:.2f} GiB of {total / 2**30:.2f} GiB ({pct:.1f}%, at or above {T.OOM_CAPACITY_PCT:g}%; "
               f"headroom {head / 2**30:.2f} GiB): at capacity, the next larger batch, longer sequence or KV-cache "
               "growth runs out of memory."]
        return e.finding("oom", "high", f"GPU memory at capacity ({pct:.0f}%): out of memory is next", txt, _OOM_ADVICE)
    else:
        return None
    if top is not None and top_pct >= _t("GPU_MEMORY_WARN_PCT"):     # what gpu_memory_pressure would have said
        dev, pct, peak, total, head = _cite_memory(e, top[0])
        txt.append(f"GPU {dev} memory peaked at {peak / 2**30:.2f} GiB of {total / 2**30:.2f} GiB ({pct:.1f}% of its "
                   f"total, headroom {head / 2**30:.2f} GiB).")
    return e.finding("oom", "high", "Out of memory", txt, _OOM_ADVICE)


_OOM_ADVICE = ("Seed 002: overcommitted GPU memory. Reduce the batch size (or max tokens per batch), cap the KV "
               "cache (PagedAttention, a smaller max length / gpu_memory_utilization), quantize the weights, or "
               "enable CPU/NVMe offload of weights or KV cache.")


def low_cache_hit_rate(res: dict, found: dict) -> dict | None:
    c = (res.get("llm") or {}).get("cache") or {}
    rate = c.get("hit_rate_pct")
    if rate is None or rate >= T.CACHE_HIT_RATE_MIN_PCT:
        return None
    e = Evidence(res)
    e.cite("cache_hit_rate_pct", "llm.cache.hit_rate_pct", 2)
    txt = [f"Cache hit rate {rate:.1f}% (below seed 002's warning level of {T.CACHE_HIT_RATE_MIN_PCT:g}%)"
           + (f": {c['hits']} hits of {c['queries']} lookups" if c.get("queries") else "") + f"; from {c.get('basis')}."]
    if c.get("queries"):
        e.cite("cache_hits", "llm.cache.hits")
        e.cite("cache_queries", "llm.cache.queries")
    return e.finding("low_cache_hit_rate", "medium", f"Cache hit rate {rate:.0f}%", txt,
                     "Seed 002: poor prefix matching or a small cache. Increase the cache size (more KV blocks / "
                     "gpu_memory_utilization), optimize prefix detection: put the shared system prompt first and keep it "
                     "byte-identical, route requests with a common prefix to the same replica.")


def _queue_text(e: Evidence, llm: dict) -> str | None:
    """The tail requests' queue wait, when it is at least QUEUE_WAIT_TAIL_MIN_PCT of their latency."""
    q = llm.get("queue") or {}
    share = q.get("tail_wait_share_pct")
    if share is None or share < T.QUEUE_WAIT_TAIL_MIN_PCT or not q.get("tail_wait_ms_mean"):
        return None
    wait = e.cite("tail_wait_ms_mean", "llm.queue.tail_wait_ms_mean")
    e.cite("tail_wait_share_pct", "llm.queue.tail_wait_share_pct", 1)
    n = e.cite("tail_requests", "llm.queue.tail_requests")
    conc = e.cite("max_concurrent", "llm.queue.max_concurrent")
    how = ("start to first work" if not q.get("from_overlap") else
           "overlap with requests started before them, an upper bound" if not q.get("from_first_work") else
           "start to first work, or the overlap with earlier requests")
    return (f"Queueing: the {n} slowest requests (>= p{T.QUEUE_TAIL_PCTL:g} latency) waited {wait:.3f} ms on average "
            f"before their first work ({how}): {share:.0f}% of their latency; up to {conc} requests were open at once. "
            "They queue behind one another (head-of-line blocking).")


def latency_tail(res: dict, found: dict) -> dict | None:
    llm = res.get("llm") or {}
    keys = [("tpot_ms", "time per output token"), ("request_ms", "request latency")]
    if ((llm.get("queue") or {}).get("tail_wait_share_pct") or 0) >= T.QUEUE_WAIT_TAIL_MIN_PCT:
        keys.reverse()          # requests queue: the request-latency tail is the one to explain
    for key, what in keys:
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
        qt = _queue_text(e, llm) if key == "request_ms" else None
        if qt is not None:
            txt.append(qt)
            return e.finding("latency_tail", "medium", f"Slow tail in {what} (p99 {ratio:.1f}x p50): requests queue", txt,
                             "Seed 002 (high tail latency: decode bottlenecks or head-of-line blocking): batch waiting "
                             "requests together instead of serving them one after another - continuous batching (vLLM, "
                             "SGLang, TGI) or a dynamic batcher with a short max delay (2-10 ms); cap tokens per batch so "
                             "one long prompt does not hold the queue (chunked prefill), and route across replicas.")
        return e.finding("latency_tail", "low", f"Slow tail in {what} (p99 {ratio:.1f}x p50)", txt,
                         "Look at what the slow steps/requests did differently in the timeline (their offsets are "
                         "above): host pauses (garbage collection, I/O, tokenization on the same thread), KV-cache growth "
                         "reallocations, or batch changes; pin the host thread and pre-allocate the cache.")
    return None
