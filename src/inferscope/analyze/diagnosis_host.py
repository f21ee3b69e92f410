"""Finding rules on host time (registered in diagnosis.RULES): start-up in the window, CPU preprocessing,
host launch overhead, framework overhead, CPU compute, off-CPU waiting, coverage, NUMA, slow steps, the
GIL, page faults, the run queue and latency tails.  Evidence: analyze/evidence.py.
"""
from __future__ import annotations

from .. import thresholds as T  # noqa: F401
from .. import vocab as V
from ..result.headline import busiest_other_thread, thread_busy_ms, thread_figures_text
from . import advice
from .children import follow_hint
from .evidence import (CULPRIT_SOURCES, HOST_CATEGORIES, Evidence, _children_explain_waiting, _culprit,  # noqa: F401
                       _gil_explains_waiting, _ms, _off_cpu_ms, _pct, _row, _run_queue_pct, _sev, _t, _t_src,
                       _user_code_pct, _with_culprit, get_path)
from .diagnosis_gpu import _culprit_launch
from .tokenizer_split import batching_applies


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
    part = dict(zip(("tokenization", "other preprocessing", "user code"), V.PREPROCESSING_CLASSES))[dom[0]]
    c = _with_culprit(e, res, part, txt) or _with_culprit(e, res, "cpu_preprocessing", txt)
    # part of the category is the followed children's work (their samples fill the main thread's waiting)
    _with_child_culprit(e, res, txt, V.PREPROCESSING_CLASSES, same_as=c)
    named = f" (start with {c[len('Culprit: '):].rstrip('.')})" if c else ""
    tk = res.get("tokenizer")
    if dom[0] == "tokenization" and tk:
        nat = e.cite("tokenizer_native_ms", "tokenizer.native_ms")
        py = e.cite("tokenizer_python_ms", "tokenizer.python_ms")
        txt.append(f"Of the tokenization, {nat:.2f} ms is the native tokenizer's encode and {py:.2f} ms "
                   f"({tk['python_pct']:.0f}%) the Python around it (perf samples).")
    if dom[0] == "tokenization" and batching_applies(res):
        sugg = ("Batch the tokenizer calls" + named + ": one call per batch of texts (tokenizer(list_of_texts)) instead of "
                "one per text - the per-call Python goes, the native encode stays; then tokenize in a worker pool and "
                "overlap it with inference of the previous batch.")
        title = "Tokenization dominates CPU time, called once per text"
    elif dom[0] == "tokenization":
        sugg = ("Move tokenization off the critical path" + named + ": use a fast (Rust) tokenizer with batch encoding, "
                "tokenize in a worker pool, and overlap it with inference of the previous batch.")
        title = "Tokenization dominates CPU time"
    elif dom[0] == "user code":
        # plain code in the user's own files: DataLoader/GPU-decode advice does not apply; Python or native advice
        # by what the culprit is (advice.py)
        title, sugg = advice.user_code(res, named)
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
        "host_launch_bound", "high", "The host cannot issue work fast enough", txt, advice.text("host_launch_bound", res))


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
             "outside compute ops" if advice.is_native(res) else
             "outside compute ops (Python in torch/transformers, dispatch, generation loop)")
    txt = [f"Framework and runtime work on the host {where}: {fw:.1f}% of the window."] + \
        (["Parts: " + ", ".join(f"{p['name']} {p['ms']:.1f} ms" for p in parts) + "."] if parts else [])
    _with_culprit(e, res, "framework_overhead", txt)
    return e.finding("framework_overhead", "medium", "Framework / runtime overhead is a large share", txt,
                     advice.text("framework_overhead", res))


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
                sugg += " " + follow_hint(ch)
    if _gil_explains_waiting(res):
        e.cite("gil_wait_ms", "contention.gil.waiting_while_python_ms")
        txt.append(f"{res['contention']['gil']['waiting_while_python_ms']:,.1f} ms of it overlap other threads running Python: "
                   "a wait for the GIL or for those threads' results rather than for I/O (finding gil_contention).")
        sugg = ("Most of the waiting overlaps other threads' Python: see gil_contention (those threads and their hottest "
                "function).")
    return e.finding(
        "host_waiting", "medium" if wt >= T.HOST_WAITING_MEDIUM_PCT else "low", "The inference thread waits off-CPU", txt, sugg)


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
    if g.get("functions"):    # the function over all the other threads (a thread's own top can be one stretched tick)
        top, path = g["functions"][0], "contention.gil.functions[0]"
    else:
        top, path = g["threads"][0], "contention.gil.threads[0]"
    e.cite("culprit_thread", f"{path}.thread")
    e.cite("culprit", f"{path}.function", default=None)     # a name, or none sampled: never a number
    e.cite("culprit_ms", f"{path}.overlap_ms")
    where = f" ({top['file']})" if top.get("file") else ""
    txt = [f"The inference thread was off-CPU for {wait_ms:,.1f} ms of the window; for {ms:,.1f} ms of it ({pct:.1f}% of the "
           f"window, {share:.0f}% of its waiting) another thread of the process was running Python. CPython runs one thread's "
           "Python at a time: the inference thread was waiting either for the GIL or for what those threads produce (a queue, "
           "a lock); either way their Python cannot run in parallel with it or with each other.",
           f"Culprit: {top['function'] or '?'}{where} (most on {top['thread']}"
           + (f", on {top['threads']} threads in all" if top.get("threads", 1) > 1 else "")
           + f"): {top['overlap_ms']:,.1f} ms while the inference thread "
           f"waited ({n} other Python thread(s) in all; tables: contention.gil.functions, contention.gil.threads)."]
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
    part = "breakdown[cpu_compute].parts[page_faults]"
    if get_path(res, part + ".ms") is not None:     # the live sampler's fault kernel time of native code (issue 45)
        ms, pct = e.cite("page_faults_ms", part + ".ms", 1), e.cite("page_faults_pct", part + ".pct", 2)
        txt.append(f"The breakdown counts {ms:,.1f} ms ({pct:.1f}% of the window) of the inference thread's time as "
                   "this kernel time (CPU compute's part page faults).")
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
           "other threads or processes held the cores it could run on."]
    rq_ms = e.cite("run_queue_ms", "breakdown[waiting].parts[run_queue].ms", default=None)
    if rq_ms is not None:
        rq_pct = e.cite("run_queue_pct", "breakdown[waiting].parts[run_queue].pct", 2)
        txt.append(f"The breakdown counts the sampled part of that time under waiting/run_queue ({rq_ms:,.1f} ms, "
                   f"{rq_pct:.1f}% of the window), not under what the thread was doing: its other categories hold only "
                   "its time on a CPU.")
    inv = e.cite("invol_ctx_switches_per_s", "counters.invol_ctx_switches_per_s", 1, default=None)
    util = e.cite("host_cpu_util_pct", "counters.process_cores.mean_util_pct", 1, default=None)
    cores = e.cite("process_cores", "counters.process_cores.cores", default=None)
    if inv is not None:
        txt.append(f"Involuntary context switches: {inv:,.0f}/s (preempted while runnable).")
    if util is not None and cores:
        txt.append(f"The {cores} core(s) the process may use were {util:.0f}% busy on average (all processes).")
    busy = busiest_other_thread(res)          # the headline's busiest other thread (result/result/headline.py): the same figures
    if busy is not None and thread_busy_ms(busy[1]) > 0:
        i, row = busy
        e.cite("culprit", f"threads.threads[{i}].thread")
        e.cite("culprit_recorded_ms", f"threads.threads[{i}].recorded_ms")
        e.cite("culprit_waiting_ms", f"threads.threads[{i}].waiting_ms")
        if row.get("on_cpu_ms") is not None:
            e.cite("culprit_on_cpu_ms", f"threads.threads[{i}].on_cpu_ms")
            e.cite("culprit_run_queue_ms", f"threads.threads[{i}].run_queue_ms")
        txt.append(f"Culprit (busiest other thread of the process): {row['thread']}: {thread_figures_text(row)}.")
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
