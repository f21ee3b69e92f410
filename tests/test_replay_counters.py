"""The counters the rules make (collect/kernel_time.RULE_COUNTERS: the native tokenizer's CPU time, page-fault and I/O
kernel time), re-derived by a replay of recorded facts (collect/replay_counters.py) instead of copied:

- with the rules unchanged the replay gives the recorded counters sample for sample (the five goldens recorded with
  the native tokenizer counter), and the same report;
- with a rule changed the replayed counter follows the new decisions (planted input whose value is known by
  construction, and equal to what the live sampler flushes under the changed rule), not the recorded value;
- several threads' drains sum in time order; the other counters stay as recorded.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import msgspec
import numpy as np
import pytest

from inferscope.collect import kernel_time as K
from inferscope.collect import replay_counters as RC
from inferscope.collect import rules as R
from inferscope.collect import sampler as SM
from inferscope.collect.facts import FactLog, decode
from inferscope.collect.layout import Tick
from inferscope.collect.perfip import COMPUTE, PYTHON, TOKENIZER
from inferscope.collect.replay import replay_trace
from inferscope.trace import native
from inferscope.trace.builder import TraceBuilder
from inferscope.trace.kinds import TrackKind
from inferscope.vocab import NATIVE_TOKENIZER_METRIC

from resolve_helpers import FakePerf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "examples" / "zoo"))
import facts_goldens as G  # noqa: E402

MS = 1_000_000
FAULT_S, FAULTS, IO_S = K.RULE_COUNTERS[1:]


def _series(trace, pid: int | None = None) -> dict:
    """metric -> [(ts_ns, value)] of the trace's counters (of process ``pid`` when given)."""
    c, tk = trace.counters, trace.tracks
    out: dict = {}
    for i in range(len(c)):
        tr = int(c.track[i])
        if pid is None or int(tk.pid[tr]) == pid:
            out.setdefault(trace.strings[int(tk.name[tr])], []).append((int(c.ts_ns[i]), float(c.value[i])))
    return out


def _rule(d: dict) -> dict:
    return {m: v for m, v in d.items() if m in K.RULE_COUNTERS}


@pytest.mark.parametrize("name", sorted(G.GOLDENS))
def test_unchanged_rules_replay_the_recorded_counters(name):
    """The goldens' rule-made counters, re-derived from the replayed drains, are the recorded ones sample for sample
    (times: the recording's drains; values: the replayed rules' sums); the report is the recorded trace's."""
    from zoo_harness import _derived
    from inferscope.analyze.pipeline import analyze
    t = native.load(G.paths(name)["trace"])
    r, n = replay_trace(t)
    rec, rep = _series(t), _series(r)
    assert _rule(rec), f"{name}: the golden has no rule-made counter"
    assert _rule(rep) == _rule(rec)
    assert {m: v for m, v in rep.items() if m not in K.RULE_COUNTERS} == \
        {m: v for m, v in rec.items() if m not in K.RULE_COUNTERS}
    assert n["counter_samples_replayed"] == n["counter_samples_recorded"] == sum(map(len, _rule(rec).values()))

    def rep_of(tr):
        return _derived(json.loads(json.dumps(analyze(tr), default=str)))
    a, b = rep_of(t), rep_of(r)
    assert [k for k in set(a) | set(b) if a.get(k) != b.get(k)] == []


def _decided(samples: list, pend: list, facts: bool) -> tuple[list, dict | None]:
    """``pend`` decided live against ``samples`` (one thread, tid 7) and the totals flushed at the drain's tick (the
    last pending tick): (the sampler's buffer, its recorded facts or None)."""
    buf: list = []
    s = SM.Sampler(buf, 200, {}, set())
    s._perf_maps = object()
    if facts:
        s.facts = FactLog(s.interval_ns, SM.PERF_PERIOD_NS)
    st = SM._ThreadState(tid=7, clk=None, cpu=0, t=0)
    st.cls, st.start, st.end = "user_code", 0, 0
    st.perf = FakePerf(list(samples))
    st.pending = list(pend)
    s._resolve(st)
    s.kernel_totals.flush(buf.append, pend[-1].t)
    if facts:
        s.facts.close(st, True)
    s._emit(st)
    # (planted ticks, not observed by a tick: a version-1 log, whose drains' ticks are the input)
    return buf, (dict(decode(s.facts.encode(pid=1)), version=1) if facts else None)


def _trace(buf: list, facts: dict | None, pid: int = 1):
    from inferscope.collect.assemble import add_events
    b = TraceBuilder()
    add_events(b, buf, pid=pid, main_tid=7, thread_names={}, idle_tids=())
    t = b.finalize()
    t.facts = msgspec.msgpack.encode(facts) if facts is not None else None
    return t


def test_a_changed_rule_moves_the_replayed_counter(monkeypatch):
    """A 10 ms interval of a tokenizer call with 5 IP samples in the tokenizer library and 5 in native compute: the
    recording's counter says 5 ms of native tokenizer CPU (half the samples).  Replayed with a changed rule - native
    compute samples in a tokenizer call are the tokenizer's - it says 10 ms (all of them), which is what the live
    sampler flushes under that rule; the /proc counter beside it stays as recorded, and the tokenizer section's
    native/Python split follows the replay."""
    from inferscope.analyze.tokenizer_split import tokenizer_split
    from inferscope.analyze.window import Window
    samples = [(k * MS, TOKENIZER) for k in range(1, 6)] + [(k * MS, COMPUTE) for k in range(6, 11)]
    pend = [Tick(10 * MS, None, ("tok.py:enc", 3), "tokenization", False)]
    buf, facts = _decided(samples, pend, True)
    buf.append((1, "proc.page_faults", -1, 10 * MS, 123.0))       # measured (/proc): never re-derived
    t = _trace(buf, facts)
    assert _series(t)[NATIVE_TOKENIZER_METRIC] == [(10 * MS, 0.005)]

    count = R.count_samples

    def tokenizer_takes_compute(iv):         # the changed rule
        count(iv)
        iv.nk, iv.nc = iv.nk + iv.nc, 0
    monkeypatch.setattr(R, "count_samples", tokenizer_takes_compute)
    live_b, _ = _decided(samples, pend, False)
    r, n = replay_trace(t)
    got = _series(r)
    assert got[NATIVE_TOKENIZER_METRIC] == [(10 * MS, 0.010)] == _series(_trace(live_b, None))[NATIVE_TOKENIZER_METRIC]
    assert got["proc.page_faults"] == [(10 * MS, 123.0)]
    assert n["counter_samples_recorded"] == n["counter_samples_replayed"] == 1
    bd = [{"category": "cpu_preprocessing", "parts": [{"name": "tokenization", "ms": 10.0}]}]
    w = Window(0, 10 * MS)
    assert tokenizer_split(t, w, bd)["native_ms"] == pytest.approx(5.0)
    assert tokenizer_split(r, w, bd)["native_ms"] == pytest.approx(10.0)
    assert tokenizer_split(r, w, bd)["python_ms"] == pytest.approx(0.0)


def _v1(threads: list, perf_period_ns: int = SM.PERF_PERIOD_NS) -> dict:
    return {"version": 1, "pid": 1, "idle_tids": [], "interval_ns": 5 * MS, "perf_period_ns": perf_period_ns,
            "truncated": False, "items": 0, "threads": threads}


def _state(cls="user_code"):
    return ["I", [0, 0, cls, None, 0, [], None, None, None, 0.0, 0.0, None, 0.0, False]]


def _bare_trace(tids, counters=()):
    b = TraceBuilder()
    for tid in tids:
        b.track(TrackKind.CPU_THREAD, pid=1, tid=tid, name=str(tid))
    for metric, pid, ts, v in counters:
        b.add_counters(b.track(TrackKind.COUNTER, pid=pid, name=metric), [ts], [v])
    return b.finalize()


def test_threads_drains_sum_in_time_order():
    """Thread 3's drain at 20 ms lays 20 ms of native tokenizer CPU, thread 4's at 10 ms lays 10 ms: the replay (thread
    by thread) gives the process's cumulative counter in time order - 10 ms at 10 ms, 30 ms at 20 ms; the old
    recording's samples of the rule-made counters are replaced, another process's are kept."""
    def tok(t_ms, step):
        return ["R", [[t_ms * MS, None, ["tok.py:enc", 3], "tokenization", False]],
                [[k * MS, TOKENIZER] for k in range(step, t_ms + 1, step)], [], None, True, False, None]
    facts = _v1([[3, [_state(), tok(20, 2), ["X"]]], [4, [_state(), tok(10, 1), ["X"]]]])
    t = _bare_trace([3, 4], [(NATIVE_TOKENIZER_METRIC, 1, 20 * MS, 0.5), (FAULTS, 1, 20 * MS, 9.0),
                             (NATIVE_TOKENIZER_METRIC, 2, 20 * MS, 0.25)])
    t.facts = msgspec.msgpack.encode(facts)
    r, _ = replay_trace(t)
    assert _rule(_series(r, 1)) == {NATIVE_TOKENIZER_METRIC: [(10 * MS, 0.010), (20 * MS, 0.030)]}
    assert _series(r, 2) == {NATIVE_TOKENIZER_METRIC: [(20 * MS, 0.25)]}
    # no recorded counter at all: the replay makes the track (the process's), at the drains' ticks
    t2 = _bare_trace([3, 4])
    t2.facts = t.facts
    r2, n2 = replay_trace(t2)
    assert _series(r2, 1) == {NATIVE_TOKENIZER_METRIC: [(10 * MS, 0.010), (20 * MS, 0.030)]}
    assert n2["counter_samples_recorded"] == 0 and n2["counter_samples_replayed"] == 2


def test_fault_counters_follow_the_laid_page_fault_time():
    """50 faults in native code in a 10 ms interval with 3 interpreter samples (1 ms perf period): the fault rule lays
    the 7 ms the samples leave uncovered as page_faults; the replayed kernel counters say the same 7 ms and 50 faults
    (I/O kernel time 0), whatever the recording said."""
    ev = [_state(), ["R", [[10 * MS, None, ["u.py:f", 5], "user_code", True, 0, 0, 50, 0, 0, 10 * MS]],
                     [[k * MS, PYTHON] for k in (2, 4, 6)], [], None, True, True, [200_000.0, 0.0]], ["X"]]
    t = _bare_trace([3], [(FAULT_S, 1, 10 * MS, 1.0), (FAULTS, 1, 10 * MS, 1.0), (IO_S, 1, 10 * MS, 1.0)])
    t.facts = msgspec.msgpack.encode(_v1([[3, ev]], perf_period_ns=1 * MS))
    r, _ = replay_trace(t)
    laid = {r.name_of(i): int(r.spans.end_ns[i] - r.spans.start_ns[i]) for i in range(len(r.spans))}
    assert laid["page_faults"] == 7 * MS
    assert _series(r, 1) == {FAULT_S: [(10 * MS, 0.007)], FAULTS: [(10 * MS, 50.0)], IO_S: [(10 * MS, 0.0)]}


@pytest.mark.parametrize("prev_t, t, where, want", [
    (50, 120, RC.TICK, 100),        # the drain at this tick flushed in (previous tick, tick]
    (110, 150, RC.TICK, 150),       # none there (the recording added nothing then): the tick's own time
    (50, 120, RC.TAIL, 100),        # after the last tick: that tick's flush when there is one ...
    (110, 150, RC.TAIL, 200),       # ... else the next one (the thread's end, flushed at the next drain)
    (50, 120, RC.END, 200),         # laid by the thread's end: after its last tick
    (250, 310, RC.END, 999),        # no later flush recorded: the end its last interval was laid to
])
def test_flush_time_places_a_drain(prev_t, t, where, want):
    assert RC.flush_time(np.array([100, 200, 300]), prev_t, t, where, 999) == want
