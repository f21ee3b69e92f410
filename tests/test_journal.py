"""Crash journal: incremental flushes a SIGKILLed child leaves, rebuilt into a trace by the parent."""
from __future__ import annotations

import marshal
import os
import time

import pytest

from inferscope.collect import journal
from inferscope.errors import InferScopeError

SPAN, CS, ANN = 0, 11, 8


def _meta(total, capacity=1000, open_runs=()):
    return {"pid": 42, "main_tid": 7, "thread_names": {7: "MainThread", 8: "worker"}, "idle_tids": [9],
            "open_runs": list(open_runs), "capacity": capacity, "total_events": total,
            "trace_meta": {"source_format": "inferscope", "devices": [], "tool_versions": {"python": "3"},
                           "warnings": ["w1"], "missing": ["torch_ops"],
                           "collection": {"mode": "live", "complete": False, "duration_ms": 12.5,
                                          "trace_size_mb": 1.0}}}


def _events(t0, n):
    out = []
    for i in range(n):
        s = t0 + i * 1000
        out.append((SPAN, CS, 7, s, s + 1000, "user_code", "app.py:f", "sample"))
    out.append((SPAN, ANN, 8, t0, t0 + n * 1000, "step", None, "inferscope.scope"))
    out.append((SPAN, CS, 9, t0, t0 + 5, "waiting", None, "sample"))      # idle thread: dropped
    out.append((1, "proc.rss_bytes", -1, t0, 1.5e6))
    return out


def _names(trace):
    strs = trace.strings.as_list()
    return [strs[i] for i in trace.spans.name]


def test_round_trip_across_flushes(tmp_path):
    p = str(tmp_path / "t.iscope.journal")
    w = journal.JournalWriter(p)
    a, b = _events(1_000, 3), _events(10_000, 2)
    w.append(a, _meta(len(a)))
    w.append(b, _meta(len(a) + len(b), open_runs=[(SPAN, CS, 7, 20_000, 25_000, "framework", None, "sample")]))
    w.close()
    tr = journal.load(p)
    names = _names(tr)
    assert names.count("user_code") == 5 and names.count("step") == 2 and names.count("framework") == 1
    assert "waiting" not in names                      # the idle thread's samples are dropped
    assert len(tr.counters) == 2
    assert not tr.meta["collection"]["complete"] and tr.meta["collection"]["dropped_events"] == 0
    assert tr.meta["warnings"] == ["w1"]
    tracks = {tr.strings.as_list()[n] for n in tr.tracks.name if n >= 0}
    assert {"main (7)", "worker (8)"} <= tracks


def test_cut_last_record_is_ignored(tmp_path):
    p = str(tmp_path / "j")
    w = journal.JournalWriter(p)
    a = _events(1_000, 4)
    w.append(a, _meta(len(a)))
    b, mb = _events(50_000, 4), _meta(2 * len(a))
    w.append(b, mb)
    w.close()
    size = os.path.getsize(p)
    ev2, meta2 = len(marshal.dumps(("ev", b))), len(marshal.dumps(("meta", mb)))
    with open(p, "r+b") as f:          # a SIGKILL in the middle of the second write's events
        f.truncate(size - meta2 - ev2 // 2)
    events, meta, n = journal.read(p)
    assert events == a and n == 2 and meta["total_events"] == len(a)
    assert _names(journal.load(p)).count("user_code") == 4
    with open(p, "r+b") as f:          # ... or in its metadata: the events are complete and kept
        f.truncate(0)
    w = journal.JournalWriter(p)
    w.append(a, _meta(len(a)))
    w.append(b, mb)
    w.close()
    with open(p, "r+b") as f:
        f.truncate(os.path.getsize(p) - meta2 // 2)
    events, meta, n = journal.read(p)
    assert events == a + b and n == 3 and meta["total_events"] == len(a)


def test_capacity_bounds_the_rebuilt_trace(tmp_path):
    p = str(tmp_path / "j")
    w = journal.JournalWriter(p)
    ev = _events(0, 30)          # 33 events, capacity 10: the newest 10 kept
    w.append(ev, _meta(len(ev) + 5, capacity=10))
    w.close()
    tr = journal.load(p)
    assert tr.meta["collection"]["dropped_events"] == len(ev) + 5 - 10
    assert any("overflow" in x for x in tr.meta["warnings"])


def test_rewrite_replaces_content(tmp_path):
    p = str(tmp_path / "j")
    w = journal.JournalWriter(p)
    w.append(_events(0, 5), _meta(8))
    w.rewrite(_events(0, 1), _meta(4))
    w.append(_events(9_000, 1), _meta(8))
    w.close()
    events, _, n = journal.read(p)
    assert n == 4 and len(events) == 8 and w.events == 8


@pytest.mark.parametrize("content", [b"", b"\x00garbage", b"not a journal at all"])
def test_unusable_journal_is_one_clear_error(tmp_path, content):
    p = tmp_path / "j"
    p.write_bytes(content)
    with pytest.raises(InferScopeError, match="no complete record") as e:
        journal.load(str(p))
    assert "\n" not in str(e.value)


def test_session_flush_appends_only_new_events_and_final_trace_removes_journal(tmp_path):
    from inferscope import scope
    from inferscope.collect import session as S
    from inferscope.config import Config
    from inferscope.trace import native
    out = str(tmp_path / "t.iscope")
    s = S.Session(Config(cpu_sampling_frequency_hz=200, system_sampling_hz=0, flush_interval_s=3600),
                  trace_out=out, mode="run")
    S.set_current(s)
    try:
        s.start()
        with scope("first"):
            time.sleep(0.05)
        s.flush()
        n1 = s.journal.events
        with scope("second"):
            time.sleep(0.05)
        s.flush()
        assert 0 < n1 < s.journal.events
        events, _, n = journal.read(journal.path_for(out))
        assert n == 4                                         # two (ev, meta) pairs
        # no event written twice (the sampler thread may append to the buffer after the flush: <=)
        assert len(events) == s.journal.events <= len(s.buffer)
        names = _names(journal.load(journal.path_for(out)))
        assert names.count("first") == 1 and names.count("second") == 1
        s.finalize()
    finally:
        S.set_current(None)
    assert os.path.exists(out) and not os.path.exists(journal.path_for(out))
    assert native.load(out).meta["collection"]["complete"]


def test_records_and_writes_stay_bounded_past_the_record_bound(tmp_path, monkeypatch):
    """A flush or rewrite far past JOURNAL_RECORD_EVENTS is written as records of at most that many events, one
    os.write each (retries of a short write aside), never one bytes object of the whole flush: the largest write
    is the same for 5x and 40x the bound (issue 44 item 3: a whole-buffer rewrite grew the heap), and every event
    reads back in order."""
    from inferscope.thresholds import JOURNAL_RECORD_EVENTS as N
    sizes = []
    real_write = os.write

    def write(fd, data):
        sizes.append(len(data))
        return real_write(fd, data)
    monkeypatch.setattr(journal.os, "write", write)

    def ev(t0, n):        # n events of one size (a fixed-width detail), time stamps from t0
        return [(SPAN, CS, 7, t0 + i, t0 + i + 1, "user_code", f"app.py:{i % 10}", "sample") for i in range(n)]

    def largest(n_events, rewrite):
        sizes.clear()
        p = str(tmp_path / f"j{n_events}{rewrite}")
        w = journal.JournalWriter(p)
        e = ev(1_000_000, n_events)
        (w.rewrite if rewrite else w.append)(e, _meta(n_events, capacity=n_events))
        w.close()
        got, meta, n = journal.read(p)
        assert got == e and meta["total_events"] == n_events
        assert n == -(-n_events // N) + 1           # ceil(n / N) event records + the meta record
        with open(p, "rb") as f:                     # every event record holds at most N events
            for _ in range(n - 1):
                kind, body = marshal.load(f)
                assert kind == "ev" and 0 < len(body) <= N
        return max(sizes)
    for rewrite in (False, True):
        small, big = largest(5 * N + 3, rewrite), largest(40 * N + 3, rewrite)
        assert big == small, (rewrite, small, big)
        assert big <= len(marshal.dumps(("ev", ev(1_000_000, N))))
