"""Re-deriving the live sampler's runs offline from its recorded facts (facts.py), with the current rules.

``replay_runs(facts)`` feeds each thread's event log, in order, through the same code the sampler ran: the
resolver's ``decide`` for a perf drain, ``Sampler._apply`` for a tick decided at once, ``_owed_open_run`` and
``_emit`` - on a stand-in sampler that holds only what those read (the interval, the process's native-thread
role at the drain, the run buffer).  The rows it returns are the ``CPU_SAMPLE`` runs the live session emitted when
the rules are unchanged (tests/test_facts_replay.py checks that on live runs), and what a changed rule would have
emitted on the same observations otherwise: a rule is judged on recorded runs, not on fresh ones that drift.

``replay_trace(trace)`` puts the replayed runs in place of the recorded ones (``inferscope analyze run.iscope
--replay``).  What it re-derives and what it keeps:
- re-derived: the recorded threads' CPU_SAMPLE runs, and the counters the rules make while deciding
  (kernel_time.RULE_COUNTERS: ``proc.native_tokenizer_cpu_s``, ``proc.kernel_fault_cpu_s``, ``proc.kernel_faults``,
  ``proc.kernel_io_cpu_s`` - read by the ``tokenizer`` section's native/Python split): each replayed drain's
  ``kernel_time.Totals``, flushed at the time the live sampler flushed that drain (the recording's samples of those
  counters give the drains' times; replay_counters.py), replace the recorded samples - with unchanged rules they are
  the recorded ones, sample for sample (tests/test_replay_counters.py);
- kept as recorded: every other span, flow and counter (/proc, NVML, the GPU's), the meta, the facts; and what the
  measuring step decided (sampler_tick._measure): the observations themselves.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from . import kernel_time as K
from . import rules as R
from . import thread_state as TS
from . import classify as C
from . import replay_counters as RC
from .facts import OBS_FIELDS, STATE_FIELDS, decode
from .layout import Tick, owed_run_queue
from .sampler import Sampler
from .sampler_threads import ThreadsMixin
from .sampler_tick import _queue
from .tick_rules import tick_class
from ..trace.builder import TraceBuilder
from ..trace.kinds import SpanKind, TrackKind

_ON = object()      # st.perf / st.clk stand-in: "was on" (the rules test only `is not None`)
# the class names the rules compare by identity (`is`): decoded strings are mapped back to these objects
_CANON = {c: c for c in (TS.CLS_WAITING, TS.CLS_RUNQ, TS.CLS_COMPUTE, TS.CLS_FAULTS, TS.CLS_FRAMEWORK,
                         TS.CLS_TOKENIZATION, TS.KEEP, *TS.PY_CLASSES)}


def _c(v):
    return _CANON.get(v, v) if isinstance(v, str) else v


def _label(v):
    return tuple(v) if isinstance(v, list) else v


class _Kst:
    """kernel_time.ThreadStat as the resolver read it at the drain."""
    __slots__ = ("fc", "ks")

    def __init__(self, fc: float, ks: float) -> None:
        self.fc, self.ks = float(fc), float(ks)

    def fault_cost(self) -> float:
        return self.fc

    def kernel_share(self) -> float:
        return self.ks


class _Replayer:
    """What the decision code reads of the Sampler."""
    _sampler_apply = Sampler._apply
    _emit = Sampler._emit
    _detail = staticmethod(Sampler._detail)
    _owed_open_run = ThreadsMixin._owed_open_run

    def __init__(self, interval_ns: int) -> None:
        self.interval_ns = interval_ns
        self.buffer: list = []
        self.class_totals = None
        self.kernel_totals = K.Totals()
        self.facts = None
        self.role = None
        self.rule_ns = None      # {(rule, class): ns} when the rules' tally is asked for
        self.tick_rule = None    # the tick rule (tick_rules.py) laying a run at once now, tallied by _apply
        self.drains = self.divergent = 0   # perf drains replayed from ticks' observations; those whose ticks differ
        self.totals = None       # [(prev_t, t, where, fallback, Totals)] of each drain that added (replay_counters.py)

    def _native_role(self):
        return self.role

    def _apply(self, st, t: int, cls, label, exact: bool = False, tick: bool = True) -> None:
        if self.tick_rule is not None:
            _tally(self, st, t, cls, self.tick_rule)
        self._sampler_apply(st, t, cls, label, exact, tick)


def _restore(st, state) -> None:
    if not isinstance(state, list) or len(state) not in (len(STATE_FIELDS), len(STATE_FIELDS) - 2):
        raise ValueError("thread state of the wrong shape")
    for f, v in zip(STATE_FIELDS, state):     # (version 1: without last_fb, prev_vol)
        if f == "lines":
            v = {int(ln): int(n) for ln, n in v}
        elif f in ("cls", "on_cls", "py_last", "last_fb"):
            v = _c(v)
        elif f == "on_label":
            v = _label(v)
        setattr(st, f, v)


def _tally(r: _Replayer, st, t: int, cls, rule: str) -> None:
    """A tick decided in the tick itself (sampler_tick.py: its stack's class, off CPU all of it, or KEEP): its time
    in the rules' tally (rules.put does this for the resolver's rules)."""
    if r.rule_ns is not None and t > st.end:
        k = (rule, cls)
        r.rule_ns[k] = r.rule_ns.get(k, 0) + (t - st.end)


def _ticks(ticks: list) -> list:
    return [Tick(int(e[0]), _c(e[1]), _label(e[2]), _c(e[3]), bool(e[4]), *e[5:]) for e in ticks]


def _observed(r: _Replayer, st, ev: list) -> None:
    """A tick's own rules (sampler_tick._tick_class, _queue) on its recorded observations: its Tick queued, or its
    class applied at once."""
    o = dict(zip(OBS_FIELDS, ev[1:]))
    if len(ev) != len(OBS_FIELDS) + 1:
        raise ValueError("tick observation of the wrong shape")
    st.perf = _ON if o["perf"] else None
    st.clk = _ON if o["clk"] else None
    st.kio, st.perf_at = bool(o["kio"]), int(o["perf_at"])
    label = _label(o["label"])
    marks = [(int(a), int(b)) for a, b in o["marks"]] if o["marks"] else o["marks"]
    cls, label, fallback, rule = tick_class(C.DOMAIN_NAMES, C.USER, C.FW, st, o["mod"], int(o["dom"]), label,
                                            bool(o["fair"]), bool(o["oncpu"]), int(o["off"]), int(o["kf"]),
                                            bool(o["kblk"]), bool(o["gil_free"]), bool(o["voluntary"]),
                                            bool(o["perf_pending"]), bool(o["torch_seen"]))
    r.tick_rule = rule       # (the tick rule that laid what _queue applies at once; rules.put tallies the rest)
    try:
        _queue(r, st, None, int(o["t"]), int(o["prev_t"]), cls, label, fallback, bool(o["fair"]), bool(o["gil_free"]),
               bool(o["oncpu"]), int(o["off"]), int(o["rqn"]), int(o["kf"]), int(o["kns"]), bool(o["kblk"]),
               bool(o["first_iv"]), marks, int(o["cpu"]), int(o["dcpu"]), bool(o["perf_off"]), o["perf_on_at"])
    finally:
        r.tick_rule = None


def _drained(r: _Replayer, pend: list, when: list, where: int) -> None:
    """The kernel totals one drain added (decide's ``s.kernel_totals``), with where it sits in the log: its flush
    time (replay_counters.flush_time)."""
    k = r.kernel_totals
    last = max((int(e.t) for e in pend), default=when[1])
    if where is None:            # (version 1: no observations - the drains' own ticks place them)
        when[0], when[1], where = when[1], last, RC.TICK
    if r.totals is not None and (k.dirty or k.tok_dirty):
        r.totals.append((when[0], when[1], where, max(last, when[1]), k))
    r.kernel_totals = K.Totals()


def _thread(r: _Replayer, tid: int, events: list, ticks_observed: bool) -> None:
    """Replay one thread's log.  ``ticks_observed`` (version 2): the pending ticks come from the ticks' own rules on
    their observations ("B"), and each drain's recorded ticks check them; else (version 1) the recorded ticks are
    the input."""
    st = TS._ThreadState(int(tid), None, 0, 0)
    last_b = max((i for i, ev in enumerate(events) if isinstance(ev, list) and ev[:1] == ["B"]), default=-1)
    when = [-1, -1]          # the thread's previous and last observed tick times (its drains' flush times)
    ended = False            # its end laid its last ticks ("F")
    for i, ev in enumerate(events):
        op = ev[0]
        if op == "B":
            _observed(r, st, ev)
            when = [int(ev[2]), int(ev[1])]      # (OBS_FIELDS: t, prev_t)
            ended = False
        elif op == "P":
            owed_run_queue(st.pending, int(ev[1]))
        elif op == "F":
            st.pending = _ticks(ev[1])
            ended = True
        elif op == "R":
            _, ticks, samples, sigobs, role, perf, clk, kst = ev
            r.role = _c(role)
            st.perf = _ON if perf else None
            st.clk = _ON if clk else None
            st.kst = _Kst(*kst) if kst is not None else None
            st.sigobs = [(int(t), _c(c), bool(o)) for t, c, o in sigobs]
            if ticks_observed:
                pend, st.pending = st.pending, []
                r.drains += 1
                r.divergent += pend != _ticks(ticks)
            else:
                pend = _ticks(ticks)
            R.decide(r, st, pend, [(int(t), int(k)) for t, k in samples])
            _drained(r, pend, when, None if not ticks_observed else RC.END if ended else
                     RC.TICK if i < last_b else RC.TAIL)
        elif ticks_observed and op in ("T", "K"):
            pass             # (laid by the tick's rules on its observation: "B")
        elif op == "T":
            _, t, cls, label, clk = ev
            cls = _c(cls)
            st.clk = _ON if clk else None
            _tally(r, st, int(t), cls, "tick_class")
            r._apply(st, int(t), cls, _label(label), exact=bool(clk) and (
                cls is TS.CLS_WAITING or st.cls is TS.CLS_WAITING or st.cls is TS.CLS_RUNQ))
        elif op == "K":
            _tally(r, st, int(ev[1]), st.cls, "tick_keep")
            r._apply(st, int(ev[1]), st.cls, _label(ev[2]))
        elif op == "O":
            r._owed_open_run(st, int(ev[1]))
        elif op in ("E", "X"):
            r._emit(st)
            if op == "X":
                st.cls = None
        elif op == "I":
            _restore(st, ev[1])
        else:
            raise ValueError(f"unknown event {str(op)[:20]!r}")


def replay_runs(facts: dict, where: str = "facts", rule_ns: dict | None = None, stats: dict | None = None,
                totals: list | None = None) -> list:
    """The runs [(0, CPU_SAMPLE, tid, start_ns, end_ns, class, function, "sample", ticks)] the current rules give on
    the recorded facts (a dict from facts.decode); ``rule_ns``: a dict that receives {(rule, class): ns} - the time
    each rule laid (rules.put; the tick's own rules for the ticks decided at once - tick_class / tick_keep in a
    version-1 log); ``stats``: a dict that receives
    the drains replayed from the ticks' observations and how many of them found other pending ticks than the live
    sampler's (0 with unchanged rules); ``totals``: a list that receives each replayed drain's kernel_time.Totals
    with where it sits in its thread's log (replay_counters.counter_samples makes the counters of them)."""
    if facts.get("truncated"):
        raise InputError(f"{where}: the recorded facts stop part-way (over thresholds.FACTS_MAX_ITEMS): "
                         "they cannot be replayed")
    r = _Replayer(int(facts["interval_ns"]))
    r.rule_ns = rule_ns
    r.totals = totals
    observed = facts["version"] >= 2
    # the perf period the samples stand for (INFERSCOPE_PERF_PERIOD_US in the recorded run)
    saved = TS.PERF_PERIOD_NS        # (read by the rules at each use: collect/rules.py)
    TS.PERF_PERIOD_NS = int(facts["perf_period_ns"])
    try:
        for item in facts["threads"]:
            tid, events = item
            _thread(r, tid, events, observed)
    except InputError:
        raise
    except (TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError, ZeroDivisionError) as e:
        raise InputError(f"{where}: corrupt recorded facts ({type(e).__name__}: "
                         f"{' '.join(str(e).split())[:120]})") from None
    finally:
        TS.PERF_PERIOD_NS = saved
    lim = 1 << 63                 # (the trace's int64 ns columns)
    if not all(-lim <= x < lim for x in (*(v for row in r.buffer for v in row[3:5]),
                                         *(v for d in r.totals or () for v in (d[0], d[1], d[3])))):
        raise InputError(f"{where}: corrupt recorded facts (a time outside the 64-bit nanosecond range)")
    if stats is not None:
        stats.update(drains=r.drains, divergent_drains=r.divergent)
    return r.buffer


def replay_trace(trace, where: str = "trace"):
    """``trace`` with the CPU_SAMPLE runs of its recorded threads re-derived from its facts (``trace.facts``);
    InputError when it has none.  Returns (new trace, {"threads", "runs_recorded", "runs_replayed", "rules_ms":
    {rule: {class: ms}} over all recorded threads (idle ones included: the rules' own view)}."""
    if not getattr(trace, "facts", None):
        raise InputError(f"{where}: no recorded facts to replay (record them with `inferscope run --facts`)")
    facts = decode(trace.facts, where)
    tally: dict = {}
    stats: dict = {}
    drains: list = []
    rows = replay_runs(facts, where, tally, stats, drains)
    pid = facts["pid"]
    tk, tr = trace.tracks, trace.spans
    tids = {int(t) for t, _ in facts["threads"]}
    host = (tk.kind == int(TrackKind.CPU_THREAD)) & (tk.pid == pid)
    track_of = {int(tk.tid[i]): int(i) for i in np.flatnonzero(host)}
    cs = int(SpanKind.CPU_SAMPLE)
    on = np.zeros(len(tk), dtype=bool)
    on[[track_of[t] for t in tids if t in track_of]] = True
    drop = (tr.kind == cs) & on[tr.track]
    keep = ~drop
    b = TraceBuilder(trace.strings)
    rows_t = b.track_rows()
    for k in rows_t:
        rows_t[k].extend(getattr(tk, k).tolist())
    b.add_spans(**{k: v[keep] for k, v in tr.columns().items()})
    S = b.strings.intern
    idle = {int(t) for t in facts.get("idle_tids") or ()}     # never on CPU: their runs are left out (assemble.py)
    mine = [r for r in rows if int(r[2]) in track_of and int(r[2]) not in idle]
    if mine:
        b.add_spans(start_ns=np.array([r[3] for r in mine], dtype=np.int64),
                    end_ns=np.array([r[4] for r in mine], dtype=np.int64),
                    track=np.array([track_of[int(r[2])] for r in mine], dtype=np.int32),
                    kind=cs, name=np.array([S(r[5]) for r in mine], dtype=np.int32),
                    detail=np.array([S(r[6]) if r[6] else -1 for r in mine], dtype=np.int32),
                    cat=S("sample"), correlation=np.array([r[8] for r in mine], dtype=np.int64))
    if len(trace.flows):
        new_index = np.cumsum(keep) - 1
        fl = trace.flows
        ok = keep[fl.src] & keep[fl.dst]
        b.add_flows(new_index[fl.src[ok]], new_index[fl.dst[ok]], fl.kind[ok])
    # the counters the rules made (kernel_time.RULE_COUNTERS): the replay's own; the others stay as recorded
    c = trace.counters
    rc_on = RC.rule_tracks(trace, pid)
    if len(c):
        k_ = ~rc_on[c.track]
        b.add_counters(c.track[k_], c.ts_ns[k_], c.value[k_])
    samples = RC.counter_samples(drains, RC.recorded_flush_times(trace, rc_on))
    if samples:
        ctrack = {trace.strings[int(tk.name[i])]: int(i) for i in np.flatnonzero(rc_on)}
        for m, _, _ in samples:
            if m not in ctrack:
                ctrack[m] = b.track(TrackKind.COUNTER, pid=pid, name=m)
        b.add_counters(np.array([ctrack[m] for m, _, _ in samples], dtype=np.int32),
                       np.array([t_ for _, t_, _ in samples], dtype=np.int64),
                       np.array([v for _, _, v in samples], dtype=np.float64))
    b.meta = dict(trace.meta)
    coll = dict(b.meta.get("collection") or {})
    rules_ms: dict = {}
    for (rule, cls), ns in sorted(tally.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        rules_ms.setdefault(rule, {})[str(cls)] = round(ns / 1e6, 3)
    coll["replayed_facts"] = {"threads": len(tids), "runs_recorded": int(drop.sum()), "runs_replayed": len(mine),
                              "rules_ms": rules_ms, **stats,
                              "counter_samples_recorded": int(rc_on[c.track].sum()) if len(c) else 0,
                              "counter_samples_replayed": len(samples)}
    b.meta["collection"] = coll
    out = b.finalize()
    out.facts = trace.facts
    return out, coll["replayed_facts"]
