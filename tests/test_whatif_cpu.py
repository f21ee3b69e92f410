"""CPU what-if models (analyze/whatif_cpu.py) on planted analysis inputs: every figure the model reads is
planted, so each saving follows by construction from the model's documented formula."""
import pytest

from inferscope import thresholds as T
from inferscope.analyze import whatif as W

R = T.WHATIF_WAIT_RESIDUAL_FRACTION


def planted(e2e_ms=1000.0, waiting=600.0, run_queue=100.0, cpu_compute=300.0, **extra):
    bd = [{"category": "waiting", "ms": waiting, "pct": 100 * waiting / e2e_ms,
           "parts": [{"name": "off_cpu", "ms": waiting - run_queue}, {"name": "run_queue", "ms": run_queue}]},
          {"category": "cpu_compute", "ms": cpu_compute, "pct": 100 * cpu_compute / e2e_ms, "parts": []},
          {"category": "cpu_preprocessing", "ms": e2e_ms - waiting - cpu_compute, "pct": 0.0, "parts": []}]
    res = {"e2e_ms": e2e_ms, "breakdown": bd, "gpu": None, "counters": {}, "contention": {}, "children": {},
           "threads": {"threads": []}}
    res.update(extra)
    return res


def pred(res, fid):
    return W.predict(res, {"id": fid, "severity": "medium"})


def test_blocking_io_remove():
    # the sampler attributed 200 ms of 400 ms off-CPU to calls, 150 ms of them file I/O
    res = planted(contention={"blocking": {"io_ms": 150.0, "waiting_ms": 400.0, "attributed_ms": 200.0}})
    p = pred(res, "blocking_io")
    assert p["saving_model"] == "remove"
    assert p["expected_saving_ms"] == pytest.approx(150.0)
    assert p["saving_low_ms"] == pytest.approx(150.0 * (1 - R))
    assert p["saving_high_ms"] == pytest.approx(150.0 + (400.0 - 200.0) * 150.0 / 200.0)
    assert p["saving_categories"] == ["waiting"]


def test_lock_wait_remove_capped_at_waiting():
    res = planted(waiting=600.0, contention={"blocking": {"lock_ms": 500.0, "futex_ms": 700.0}})
    p = pred(res, "lock_wait")
    assert p["expected_saving_ms"] == pytest.approx(500.0)
    assert p["saving_low_ms"] == pytest.approx(500.0 * (1 - R))
    assert p["saving_high_ms"] == pytest.approx(600.0)          # futex 700 ms capped at the window's waiting


@pytest.mark.parametrize("cpus,others,share", [(2, 3, 0.5), (8, 3, 1.0), (1, 1, 0.5)])
def test_gil_overlap_share_of_cores(cpus, others, share):
    res = planted(counters={"numa": {"process_cpus": cpus}},
                  contention={"gil": {"waiting_while_python_ms": 200.0, "python_threads": others}})
    p = pred(res, "gil_contention")
    assert p["saving_model"] == "overlap"
    assert p["expected_saving_ms"] == pytest.approx(200.0 * share)
    assert p["saving_low_ms"] == pytest.approx(200.0 / (others + 1))
    assert p["saving_high_ms"] == pytest.approx(200.0)


def test_gil_high_end_adds_the_run_queue_delay():
    # the main thread also waited 100 ms runnable (10 % of 1000 ms): paced threads free the cores as well
    res = planted(counters={"numa": {"process_cpus": 2}, "main_runq_pct": 10.0},
                  contention={"gil": {"waiting_while_python_ms": 200.0, "python_threads": 3}})
    p = pred(res, "gil_contention")
    assert p["expected_saving_ms"] == pytest.approx(100.0)
    assert p["saving_high_ms"] == pytest.approx(300.0)
    res["breakdown"][0]["ms"] = 250.0                              # capped at the waiting it comes from
    assert pred(res, "gil_contention")["saving_high_ms"] == pytest.approx(250.0)


def test_oversubscription_scale_down():
    # 8 torch threads + a busy worker process on 2 CPUs, main thread runnable-not-running 15 % of a 1000 ms window
    busy = [{"comm": "w", "pid": 1, "cpu_s_in_window": T.BUSY_WORKER_CPU_FRACTION + 0.01}]
    res = planted(counters={"numa": {"torch_threads": 8, "process_cpus": 2}, "main_runq_pct": 15.0},
                  children={"processes": busy})
    p = pred(res, "cpu_oversubscription")
    assert p["saving_model"] == "scale"
    assert p["expected_saving_ms"] == pytest.approx(150.0)
    assert p["saving_low_ms"] == pytest.approx(150.0 * 7 / 9)
    assert p["saving_high_ms"] == pytest.approx(150.0 + 300.0 * (1 - 2 / 9))


def test_torch_threads_alone_predict_no_saving_up_to_the_delay():
    """8 torch threads on 2 CPUs and nothing else busy: the main thread's run-queue delay is its own ops' threads doing
    the same work - expected 0 (measured on zoo_omp_oversub), high the delay plus the stretched compute."""
    res = planted(counters={"numa": {"torch_threads": 8, "process_cpus": 2}, "main_runq_pct": 15.0})
    for fid, high in (("cpu_oversubscription", 150.0 + 300.0 * (1 - 2 / 8)), ("cpu_run_queue", 150.0)):
        p = pred(res, fid)
        assert p["expected_saving_ms"] == 0.0 and p["saving_low_ms"] == 0.0, (fid, p)
        assert p["saving_high_ms"] == pytest.approx(high), fid
        assert "intra-op threads only" in p["saving_basis"]


def test_oversubscription_counts_busy_workers():
    # 2 torch threads + 2 workers busy for >= BUSY_WORKER_CPU_FRACTION of the 1 s window on 2 CPUs: demand 4
    busy = T.BUSY_WORKER_CPU_FRACTION * 1.0 + 0.01
    res = planted(counters={"numa": {"torch_threads": 2, "process_cpus": 2}, "main_runq_pct": 10.0},
                  children={"processes": [{"comm": "w", "pid": i, "cpu_s_in_window": busy} for i in (1, 2)]})
    p = pred(res, "cpu_oversubscription")
    assert p["saving_low_ms"] == pytest.approx(100.0 * 2 / 4)
    assert p["saving_high_ms"] == pytest.approx(100.0 + 300.0 * 0.5)
    no_busy = planted(counters={"numa": {"torch_threads": 2, "process_cpus": 2}, "main_runq_pct": 10.0})
    assert pred(no_busy, "cpu_oversubscription") is None           # demand <= CPUs: nothing to scale down


def test_run_queue_only_when_the_process_causes_it():
    c = {"numa": {"torch_threads": 1, "process_cpus": 2}, "main_runq_pct": 20.0}
    assert pred(planted(counters=c), "cpu_run_queue") is None      # the cores went to other processes
    busy = planted(counters=c, run_queue=150.0,
                   threads={"threads": [{"thread": "main", "critical": True, "recorded_ms": 1000.0, "waiting_ms": 600.0},
                                        {"thread": "spinner", "critical": False, "recorded_ms": 900.0,
                                         "waiting_ms": 0.0, "on_cpu_ms": 800.0, "run_queue_ms": 100.0}]})
    p = pred(busy, "cpu_run_queue")
    assert p is not None and p["saving_model"] == "remove"
    assert p["expected_saving_ms"] == pytest.approx(200.0) and p["saving_high_ms"] == pytest.approx(200.0)
    assert p["saving_low_ms"] == pytest.approx(min(200.0 * (1 - R), 150.0))   # the residual rule, or the sampled part


def test_page_faults_remove_kernel_time():
    res = planted(counters={"sys_cpu_pct": 25.0}, contention={"page_faults": {"kernel_ms": 180.0}})
    p = pred(res, "page_fault_storm")
    assert p["expected_saving_ms"] == pytest.approx(250.0)
    assert p["saving_low_ms"] == pytest.approx(180.0)
    assert "waiting" not in p["saving_categories"]


def test_run_queue_and_oversubscription_count_once():
    busy = [{"comm": "w", "pid": 1, "cpu_s_in_window": T.BUSY_WORKER_CPU_FRACTION + 0.01}]
    res = planted(counters={"numa": {"torch_threads": 8, "process_cpus": 2}, "main_runq_pct": 15.0},
                  children={"processes": busy})
    fs = [{"id": i, "severity": "medium"} for i in ("cpu_oversubscription", "cpu_run_queue")]
    fs = W.annotate(res, fs)
    assert W.combined(res, fs) == pytest.approx(150.0)             # the same run-queue delay, once


@pytest.mark.parametrize("threads, cpus, util, busy, n", [
    (1, 2, 50.0, 0, 2.0),          # one of two cores idle: 2 threads
    (1, 4, 25.0, 0, 4.0),          # 3 idle cores: all four
    (1, 4, 75.0, 0, 2.0),          # one idle core of four (others' load): 2 threads, not 4
    (2, 8, 50.0, 2, 6.0),          # 4 idle cores but 2 busy workers: 8 - 2 = 6 threads at most
])
def test_underuse_scales_compute_over_the_idle_cores(threads, cpus, util, busy, n):
    # busy workers: CPU in the 1 s window >= BUSY_WORKER_CPU_FRACTION of it
    procs = [{"comm": "w", "pid": i, "cpu_s_in_window": T.BUSY_WORKER_CPU_FRACTION + 0.01} for i in range(busy)]
    res = planted(cpu_compute=400.0, counters={"numa": {"torch_threads": threads, "process_cpus": cpus},
                                               "process_cores": {"cores": cpus, "mean_util_pct": util}},
                  children={"processes": procs})
    top = cpus - busy
    p = pred(res, "cpu_underuse")
    eff = T.WHATIF_THREAD_SCALING_LOW_EFFICIENCY
    assert p["saving_model"] == "scale" and p["saving_categories"] == ["cpu_compute"]
    assert p["expected_saving_ms"] == pytest.approx(400.0 * (1 - threads / min(top, n)))
    assert p["saving_low_ms"] == pytest.approx(400.0 * (1 - threads / (threads + (min(top, n) - threads) * eff)))
    assert p["saving_high_ms"] == pytest.approx(400.0 * (1 - threads / top))
    assert p["saving_low_ms"] <= p["expected_saving_ms"] <= p["saving_high_ms"]


def test_underuse_without_idle_capacity_predicts_nothing():
    res = planted(counters={"numa": {"torch_threads": 2, "process_cpus": 2},
                            "process_cores": {"cores": 2, "mean_util_pct": 40.0}})
    assert pred(res, "cpu_underuse") is None                   # already as many threads as CPUs
    res = planted(counters={"numa": {"torch_threads": 1, "process_cpus": 2},
                            "process_cores": {"cores": 2, "mean_util_pct": 100.0}})
    assert pred(res, "cpu_underuse") is None                   # no core stood idle


def test_lock_wait_high_adds_the_unattributed_wait_at_the_locks_share():
    # 600 ms off-CPU, 500 ms attributed (400 lock waits, 100 sleep): 100 ms unattributed, 80 % of it taken as lock
    res = planted(waiting=700.0, contention={"blocking": {"lock_ms": 400.0, "futex_ms": 400.0, "waiting_ms": 600.0,
                                                          "attributed_ms": 500.0}})
    p = pred(res, "lock_wait")
    assert p["expected_saving_ms"] == pytest.approx(400.0)
    assert p["saving_high_ms"] == pytest.approx(400.0 + 100.0 * 400.0 / 500.0)


def test_busy_native_pool_threads_are_the_ops_own_but_a_python_thread_is_other_load():
    from inferscope import vocab as V
    pool = [{"thread": f"{V.NATIVE_THREAD_LABEL} python ({100 + i})", "critical": False, "recorded_ms": 80.0,
             "waiting_ms": 0.0, "on_cpu_ms": 30.0} for i in range(7)]
    main = {"thread": "main", "critical": True, "recorded_ms": 1000.0, "waiting_ms": 600.0}
    c = {"numa": {"torch_threads": 8, "process_cpus": 2}, "main_runq_pct": 15.0}
    p = pred(planted(counters=c, threads={"threads": [main] + pool}), "cpu_oversubscription")
    assert p["expected_saving_ms"] == 0.0                          # the OpenMP pool: the ops' own threads
    spin = {"thread": "spinner", "critical": False, "recorded_ms": 900.0, "waiting_ms": 0.0, "on_cpu_ms": 800.0}
    p = pred(planted(counters=c, threads={"threads": [main, spin] + pool}), "cpu_oversubscription")
    assert p["expected_saving_ms"] == pytest.approx(150.0)         # a busy Python thread competes: its share goes


def test_sampled_figures_widen_their_range_by_the_sampling_error():
    # 100 ticks behind the sampled classes: a 150 ms share of 1000 ms is uncertain by 1.96 sqrt(.15 x .85 / 100)
    import math
    hw = 1000.0 * 1.96 * math.sqrt(0.15 * 0.85 / 100)                 # 70.0 ms
    blocking = {"blocking": {"io_ms": 150.0, "waiting_ms": 400.0, "attributed_ms": 200.0}}
    res = planted(contention=blocking, cpu_sampling={"samples_est": 100.0})
    p = pred(res, "blocking_io")
    assert p["expected_saving_ms"] == pytest.approx(150.0)
    assert p["saving_low_ms"] == pytest.approx(150.0 * (1 - R) - hw)
    assert p["saving_high_ms"] == pytest.approx(150.0 + 200.0 * 150.0 / 200.0 + hw)
    assert "half-width" in p["saving_basis"]
    # page faults: only the low end is sampled (the high end is the kernel's CPU counter)
    res = planted(counters={"sys_cpu_pct": 15.0}, contention={"page_faults": {"kernel_ms": 120.0}},
                  cpu_sampling={"samples_est": 100.0})
    p = pred(res, "page_fault_storm")
    assert p["saving_high_ms"] == pytest.approx(150.0)
    assert p["saving_low_ms"] == pytest.approx(120.0 - hw)
    # no sampling (an imported trace): the model's range alone
    res = planted(contention=blocking)
    assert pred(res, "blocking_io")["saving_low_ms"] == pytest.approx(150.0 * (1 - R))


def test_blocking_io_high_end_adds_the_issuing_functions_cpu():
    # the reads are issued at app.py:12 load(); load's own Python (20 ms user code on main) goes with them, another
    # function's CPU (run, 50 ms) and load's samples on another thread do not
    calls = [{"kind": "io", "syscall": "read", "frame": "app.py:12 load", "thread": "main (1)", "ms": 150.0}]
    funcs = [{"function": "load", "file": "app.py:10", "class": "user_code", "thread": "main (1)", "self_ms": 20.0},
             {"function": "run", "file": "app.py:30", "class": "user_code", "thread": "main (1)", "self_ms": 50.0},
             {"function": "load", "file": "app.py:10", "class": "user_code", "thread": "w (2)", "self_ms": 7.0}]
    res = planted(contention={"blocking": {"io_ms": 150.0, "waiting_ms": 400.0, "attributed_ms": 200.0, "calls": calls}},
                  culprits={"functions": funcs})
    p = pred(res, "blocking_io")
    assert p["expected_saving_ms"] == pytest.approx(150.0)
    assert p["saving_high_ms"] == pytest.approx(150.0 + 200.0 * 150.0 / 200.0 + 20.0)
    assert p["saving_categories"] == ["waiting", "cpu_preprocessing"]
