"""The live sampler's recorded facts (collect/facts.py) and their offline replay (collect/replay.py).

- planted ticks and IP samples, recorded while the sampler decides them, replay to the very same runs;
- hand-built facts whose runs are known by construction (a perf split, off-CPU and run-queue parts) replay to them;
- bad facts are one-line errors (exit 2 from the CLI), never a traceback;
- live: for every zoo program the harness does not already check (zoo_harness.compare replays each run it scores),
  `inferscope analyze --replay` of a `run --facts` trace gives the live report.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from inferscope.collect import sampler as SM
from inferscope.collect.facts import FactLog, decode
from inferscope.collect.layout import Tick
from inferscope.collect.perfip import COMPUTE, OTHER, PYTHON, TOKENIZER
from inferscope.collect.replay import replay_runs, replay_trace
from inferscope.errors import InputError

from resolve_helpers import FakePerf

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "examples" / "zoo"
MS = 1_000_000


def _recorded(samples, pend, cls0="user_code", native=None):
    """Decide ``pend`` against ``samples`` on a real Sampler with facts kept; returns (live rows, facts dict)."""
    buf = []
    s = SM.Sampler(buf, 200, {}, set())
    s._perf_maps = object()
    s.facts = FactLog(s.interval_ns, SM.PERF_PERIOD_NS)
    st = SM._ThreadState(tid=7, clk=None, cpu=0, t=0)
    st.cls, st.start, st.end = cls0, 0, 0
    st.native, st.native_fresh = native, native is not None
    st.perf = FakePerf(samples)
    st.pending = pend
    s._resolve(st)
    s.facts.close(st, True)
    s._emit(st)
    # (the ticks were planted, not observed by a tick: their log is a version-1 one, whose drains' ticks are the input)
    return buf, dict(decode(s.facts.encode(pid=1)), version=1)


PLANTED = [
    # a native/interpreter split of one interval, then a decided tick kept
    ([(1 * MS, COMPUTE), (2 * MS, COMPUTE), (3 * MS, PYTHON), (4 * MS, OTHER), (9 * MS, COMPUTE)],
     [Tick(5 * MS, None, ("a.py:f", 3), "user_code", False), Tick(10 * MS, None, ("a.py:f", 4), "user_code", False)]),
    # off-CPU first, run queue, then a tokenizer's samples; a KEEP tick after it
    ([(16 * MS, TOKENIZER), (17 * MS, TOKENIZER), (18 * MS, OTHER)],
     [Tick(20 * MS, None, ("tok.py:enc", 9), "tokenization", True, 4 * MS, 2 * MS),
      Tick(25 * MS, "keep", None, None, False)]),
    # off-CPU last, page faults with kernel time, a piece of a long interval
    ([(2 * MS, COMPUTE)],
     [Tick(6 * MS, None, ("m.py:step", 1), "framework", True, -2 * MS, 0, 40, 1 * MS, 1, 4 * MS, True, True)]),
]


@pytest.mark.parametrize("case", range(len(PLANTED)))
def test_recorded_decisions_replay_to_the_same_runs(case):
    samples, pend = PLANTED[case]
    live, facts = _recorded(list(samples), list(pend))
    assert live, "the planted ticks emitted no run"
    assert replay_runs(facts) == live


def _facts(events, perf_period_ns=SM.PERF_PERIOD_NS, **kw):
    """Hand-built facts of the resolver's inputs (version 1: each drain's recorded ticks are its input)."""
    d = {"version": 1, "pid": 1, "idle_tids": [], "interval_ns": 5 * MS, "perf_period_ns": perf_period_ns,
         "truncated": False, "items": 0, "threads": [[3, events]]}
    d.update(kw)
    return decode(msgspec.msgpack.encode(d))


def _state(cls="user_code"):
    #        start end cls label n lines on_cls on_label py_last pcpu pn native native_tok native_fresh
    return ["I", [0, 0, cls, None, 0, [], None, None, None, 0.0, 0.0, None, 0.0, False]]


def _by_class(rows):
    out = {}
    for r in rows:
        out.setdefault(r[5], []).append((r[3], r[4]))
    return out


def test_hand_built_perf_split_is_known_by_construction():
    """10 ms on CPU with 6 native-compute and 4 interpreter IP samples: the first 60 % is cpu_compute, the rest the
    stack's class (resolve.decide's split rule), both naming the tick's function."""
    samples = [[k * MS, COMPUTE] for k in range(1, 7)] + [[k * MS, PYTHON] for k in range(7, 11)]
    rows = replay_runs(_facts([_state(), ["R", [[10 * MS, None, ["u.py:f", 5], "user_code", False]], samples, [],
                                          None, True, False, None], ["X"]]))
    assert _by_class(rows) == {"cpu_compute": [(0, 6 * MS)], "user_code": [(6 * MS, 10 * MS)]}
    assert {r[6] for r in rows} == {"u.py:f:5"}


def test_hand_built_off_cpu_and_run_queue_parts():
    """A decided 10 ms interval with 3 ms off CPU first and 2 ms in the run queue: waiting, run_queue, then the
    class, at the measured lengths; then a tick decided at once (off CPU all of it) continues as waiting."""
    rows = replay_runs(_facts([
        _state(), ["R", [[10 * MS, "user_code", ["u.py:f", 5], None, False, 3 * MS, 2 * MS]], [], [], None, False, True,
                   None],
        ["T", 14 * MS, "waiting", None, True], ["X"]]))
    assert _by_class(rows) == {"waiting": [(0, 3 * MS), (10 * MS, 14 * MS)], "run_queue": [(3 * MS, 5 * MS)],
                               "user_code": [(5 * MS, 10 * MS)]}


def test_replay_uses_the_recorded_perf_period():
    """Each IP sample stands for the recorded period: the uncovered on-CPU time of an interval with faults is kernel
    time by that period (a 2 ms period leaves less uncovered than 1 ms), so the replay is not the analysing
    process's setting."""
    # 50 faults at 200 us each in native code (the GIL free): the kernel part is the on-CPU time the 3 samples
    # leave uncovered (kernel_time.kernel_class -> page_faults), the rest the samples' class (interpreter: user code)
    ev = [_state(), ["R", [[10 * MS, None, ["u.py:f", 5], "user_code", True, 0, 0, 50, 0, 0, 10 * MS]],
                     [[k * MS, PYTHON] for k in (2, 4, 6)], [], None, True, True, [200_000.0, 0.0]], ["X"]]
    from inferscope.collect import thread_state as TS
    before = TS.PERF_PERIOD_NS
    a = _by_class(replay_runs(_facts(ev, perf_period_ns=1 * MS)))
    b = _by_class(replay_runs(_facts(ev, perf_period_ns=2 * MS)))
    assert a == {"page_faults": [(0, 7 * MS)], "user_code": [(7 * MS, 10 * MS)]}
    assert b == {"page_faults": [(0, 4 * MS)], "user_code": [(4 * MS, 10 * MS)]}
    assert TS.PERF_PERIOD_NS == before       # the analysing process's setting is restored


@pytest.mark.parametrize("blob, msg", [
    (b"\xc1not msgpack", "corrupt recorded facts"),
    (msgspec.msgpack.encode([1, 2]), "no thread logs"),
    (msgspec.msgpack.encode({"version": 99, "threads": []}), "newer than this InferScope"),
    (msgspec.msgpack.encode({"version": 1, "threads": [], "pid": "x", "interval_ns": 1, "perf_period_ns": 1}),
     "pid is not an integer"),
])
def test_bad_facts_are_one_line_errors(blob, msg):
    with pytest.raises(InputError, match=msg):
        decode(blob)


@pytest.mark.parametrize("events", [
    [["I", [1, 2]]],                                       # a state of the wrong shape
    [["Z"]],                                               # an unknown event
    [_state(), ["R", [[1, None]], [], [], None, True, True, None]],   # a tick without its fields
    [_state(), ["R", [], [["x", 1]], [], None, True, True, None]],    # a sample time that is no number
    [_state(), ["R", [[2**63 + 5, None, ["u.py:f", 5], "user_code", False]], [[2**63, TOKENIZER]], [], None, True,
                False, None], ["X"]],                      # a time past the trace's int64 ns
])
def test_malformed_events_are_input_errors(events):
    with pytest.raises(InputError, match="corrupt recorded facts"):
        replay_runs(_facts(events))


def test_truncated_facts_are_not_replayed():
    with pytest.raises(InputError, match="stop part-way"):
        replay_runs(_facts([_state(), ["X"]], truncated=True))


def test_recording_stops_at_its_bound():
    """Past FACTS_MAX_ITEMS ticks + samples the log stops and says so (a replay needs all of it)."""
    fl = FactLog(5 * MS, MS, max_items=3)
    st = SM._ThreadState(tid=1, clk=None, cpu=0, t=0)
    for k in range(5):
        fl.tick(st, k * MS, "user_code", None)
    assert fl.truncated and fl.items == 4
    assert decode(fl.encode(1))["truncated"] is True


def _run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "inferscope", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def test_cli_replay_without_facts_or_with_bad_facts_exits_2(tmp_path):
    from inferscope.trace import native
    from inferscope.trace.builder import TraceBuilder
    from inferscope.trace.kinds import SpanKind, TrackKind
    b = TraceBuilder()
    tr = b.track(TrackKind.CPU_THREAD, pid=1, tid=1, name="main")
    b.add_spans(start_ns=[0], end_ns=[MS], track=[tr], kind=int(SpanKind.CPU_SAMPLE), name=[b.strings.intern("user_code")])
    t = b.finalize()
    native.save(t, tmp_path / "none.iscope")
    r = _run("analyze", "--replay", tmp_path / "none.iscope", "-o", tmp_path / "o1")
    assert r.returncode == 2 and "no recorded facts" in r.stderr and "Traceback" not in r.stderr
    t.facts = b"\x93garbage"
    native.save(t, tmp_path / "bad.iscope")
    assert native.load(tmp_path / "bad.iscope").facts == b"\x93garbage"      # carried as bytes, decoded on replay
    r = _run("analyze", "--replay", tmp_path / "bad.iscope", "-o", tmp_path / "o2")
    assert r.returncode == 2 and "corrupt recorded facts" in r.stderr and "Traceback" not in r.stderr
    assert len([ln for ln in r.stderr.splitlines() if "corrupt recorded facts" in ln]) == 1


def _harness_programs() -> set[str]:
    """The zoo programs tests/test_zoo_truth.py and test_zoo_reads.py run through the harness (whose compare() checks
    every replay)."""
    return {m for f in ("test_zoo_truth.py", "test_zoo_reads.py")
            for m in re.findall(r'"(zoo_[a-z0-9_]+\.py)"', (Path(__file__).parent / f).read_text())}


OTHER_ZOO = sorted(p.name for p in ZOO.glob("zoo_*.py") if p.name != "zoo_harness.py" and p.name not in _harness_programs())


def _derived(d):
    if isinstance(d, dict):
        return {k: _derived(v) for k, v in d.items() if k not in ("about", "generated_at")}
    if isinstance(d, list):
        return [_derived(x) for x in d]
    return d


@pytest.mark.live
@pytest.mark.parametrize("program", OTHER_ZOO)
def test_live_report_equals_the_replay_of_its_facts(tmp_path, program):
    """`inferscope run --facts --trace t.iscope` then `inferscope analyze --replay t.iscope`: the same report.json
    (everything derived from the trace: breakdown, culprits, findings, threads, tables)."""
    env_py = [sys.executable, str(ZOO / program)]
    r = subprocess.run([sys.executable, "-m", "inferscope", "run", "-q", "--facts", "--format", "json", "--report",
                        str(tmp_path / "live.json"), "--trace", str(tmp_path / "t.iscope"), "--", *env_py],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    r = _run("analyze", "-q", "--replay", tmp_path / "t.iscope", "-o", tmp_path / "rep", "--format", "json")
    assert r.returncode == 0, r.stderr[-2000:]
    live = json.loads((tmp_path / "live.json").read_text())
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert live["breakdown"], "the live report has no breakdown"
    a, b = _derived(live), _derived(rep)
    assert [k for k in a if a[k] != b.get(k)] == []
    from inferscope.trace import native
    _, info = replay_trace(native.load(tmp_path / "t.iscope"))
    assert info["divergent_drains"] == 0, info     # the ticks' own rules, replayed on their observations, agree


def test_replay_trace_keeps_everything_but_the_recorded_threads_runs(tmp_path):
    """replay_trace swaps only the CPU_SAMPLE runs of the logged threads: other spans, flows and counters stay."""
    from inferscope.trace.builder import TraceBuilder
    from inferscope.trace.kinds import FlowKind, SpanKind, TrackKind
    b = TraceBuilder()
    S = b.strings.intern
    t3 = b.track(TrackKind.CPU_THREAD, pid=1, tid=3, name="main")
    t4 = b.track(TrackKind.CPU_THREAD, pid=1, tid=4, name="other")
    idx = b.add_spans(start_ns=[0, 0, 0, 2 * MS], end_ns=[10 * MS, 9 * MS, 5 * MS, 3 * MS], track=[t3, t3, t4, t4],
                      kind=[int(SpanKind.CPU_SAMPLE), int(SpanKind.CPU_OP), int(SpanKind.CPU_SAMPLE),
                            int(SpanKind.CPU_OP)],
                      name=[S("framework"), S("aten::mm"), S("user_code"), S("aten::add")])
    b.add_flows([idx[1]], [idx[3]], int(FlowKind.LAUNCH))
    b.add_counters(b.track(TrackKind.COUNTER, name="cpu.util"), [0, MS], [1.0, 2.0])
    t = b.finalize()
    samples = [[k * MS, COMPUTE] for k in range(1, 11)]
    t.facts = msgspec.msgpack.encode({
        "version": 1, "pid": 1, "idle_tids": [], "interval_ns": 5 * MS, "perf_period_ns": SM.PERF_PERIOD_NS,
        "truncated": False, "items": 0,
        "threads": [[3, [_state(), ["R", [[10 * MS, None, ["u.py:f", 5], "user_code", False]], samples, [], None,
                                    True, False, None], ["X"]]]]})
    out, n = replay_trace(t)
    assert n == {"threads": 1, "runs_recorded": 1, "runs_replayed": 1,
                 "rules_ms": {"split_interval": {"cpu_compute": 10.0}}, "drains": 0, "divergent_drains": 0,
                 "counter_samples_recorded": 0, "counter_samples_replayed": 0}
    names = sorted((int(out.tracks.tid[out.spans.track[i]]), out.name_of(i)) for i in range(len(out.spans)))
    assert names == [(3, "aten::mm"), (3, "cpu_compute"), (4, "aten::add"), (4, "user_code")]
    assert len(out.flows) == 1 and out.name_of(int(out.flows.src[0])) == "aten::mm"
    assert out.name_of(int(out.flows.dst[0])) == "aten::add"
    assert out.counters.value.tolist() == [1.0, 2.0]
    assert out.meta["collection"]["replayed_facts"] == n


def test_architecture_lists_the_rules_as_the_code_runs_them():
    """ARCHITECTURE.md's rules table is generated (scripts/update_rules_table.py) and `inferscope rules` prints it."""
    from inferscope.collect.rules import RULES, rules_table
    text = (ROOT / "ARCHITECTURE.md").read_text()
    assert rules_table() in text, "ARCHITECTURE.md's rules table is stale: run python scripts/update_rules_table.py"
    r = _run("rules")
    assert r.returncode == 0 and r.stdout.strip() == rules_table()
    from inferscope.collect.tick_rules import TICK_RULES
    assert [ln.split("`")[1] for ln in rules_table().splitlines()[2:]] == [f.__name__ for f in TICK_RULES + RULES]
    assert all(f.__doc__ and len(f.__doc__.strip().splitlines()[0]) <= 120 for f in TICK_RULES + RULES)


def test_replay_tallies_the_ms_each_rule_laid(tmp_path):
    """--replay --rules: the tally's ms per rule add up to the replayed runs' time (every part is laid by one rule)."""
    from inferscope.trace import native
    t = native.load(ROOT / "tests" / "data" / "facts" / "tokenizers_serial.iscope")
    _, n = replay_trace(t)
    rows = replay_runs(decode(t.facts))
    total_ms = sum(r[4] - r[3] for r in rows) / 1e6
    assert abs(sum(sum(v.values()) for v in n["rules_ms"].values()) - total_ms) < 0.01 * len(rows)
    from inferscope.collect.tick_rules import TICK_RULES
    assert "split_interval" in n["rules_ms"] and set(n["rules_ms"]) & {f.__name__ for f in TICK_RULES}
    r = _run("analyze", "--replay", "--rules", ROOT / "tests" / "data" / "facts" / "tokenizers_serial.iscope",
             "-o", tmp_path / "o", "--format", "json")
    assert r.returncode == 0 and "| split_interval |" in r.stdout
    r = _run("analyze", "--rules", ROOT / "tests" / "data" / "facts" / "tokenizers_serial.iscope", "-o", tmp_path / "p")
    assert r.returncode == 2 and "add --replay" in r.stderr


def test_driven_sampler_ticks_replay_from_their_observations():
    """The sampler loop driven deterministically (fake clock, frames, CPU clock: tests/test_sampler_ticks.py) with facts
    kept: the tick's own rules replayed on its recorded observations ("B" events) give the same runs, and every drain's
    replayed pending ticks equal the recorded ones."""
    import test_sampler_ticks as TT
    tok, pre = next(TT.tokenize_text()), next(TT.preprocess_images())
    script = [(tok, True)] * 11 + [(pre, True)] * 10 + [(pre, False)] * 10 + [(tok, True)] * 5
    class HalfOff(TT.Clock):      # every third interval half off CPU: its off-CPU part is queued for a drain
        def sleep(self, sec):
            before = self.cpu
            super().sleep(sec)
            if self.tick % 3 == 0 and self.cpu > before:
                self.cpu -= (self.cpu - before) // 2

    buf = []
    c = HalfOff(script, None)
    s = SM.Sampler(buf, 200, {}, set(), clock=c.clock, sleep=c.sleep, frames=c.frames, cputime=c.cputime,
                   getclk=lambda ident: "fake-clk" if ident == TT.IDENT else 0)
    s.facts = FactLog(s.interval_ns, SM.PERF_PERIOD_NS)
    c.stop = s._stop.set
    TT.loop(s)
    live = [r for r in buf if r[0] == 0 and r[1] == SM.CPU_SAMPLE]
    facts = decode(s.facts.encode(pid=1))
    ops = [ev[0] for _, evs in facts["threads"] for ev in evs]
    assert ops.count("B") >= len(script) - 2 and "T" in ops
    stats: dict = {}
    assert replay_runs(facts, stats=stats) == live
    assert stats["drains"] >= 2 and stats["divergent_drains"] == 0
    assert {r[5] for r in live} == {"tokenization", "preprocessing", "waiting"}
    # version-1 logs (the recorded ticks are the input) replay the same: drop the observations
    v1 = dict(facts, version=1, threads=[[tid, [ev for ev in evs if ev[0] not in ("B", "P", "F")]]
                                         for tid, evs in facts["threads"]])
    assert replay_runs(v1) == live
