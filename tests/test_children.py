"""Followed child processes: traces merged on one clock; children counted from /proc."""
import numpy as np
import pytest

from helpers import Synth
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.pipeline import analyze
from inferscope.trace import SpanKind, TrackKind
from inferscope.trace.merge import merge_traces


def _proc(pid, cls, det, a, b, root=None, launch=True):
    t = Synth()
    tr = t.b.track(TrackKind.CPU_THREAD, pid=pid, tid=pid, name=f"main ({pid})")
    t.span(SpanKind.CPU_SAMPLE, cls, a, b, track=tr, detail=t.b.strings.intern(det))
    if launch:
        t.launch(a, a + 1, a + 1, a + 2)
    tr_ = t.done()
    if root:
        tr_.meta["collection"] = {"pid": root}
    return tr_


def test_merge_keeps_everything_and_the_clock():
    a = _proc(10, "waiting", "app.py:main", 0, 1000, root=10)
    b = _proc(11, "preprocessing", "app.py:resize_bilinear", 100, 900)
    m = merge_traces(a, [b])
    assert len(m.spans) == len(a.spans) + len(b.spans) and len(m.flows) == len(a.flows) + len(b.flows)
    assert m.meta["collection"]["pid"] == 10
    # every launch flow still joins a launch call to its kernel, within one process
    s = m.spans
    assert all(s.kind[i] == SpanKind.RUNTIME and s.kind[j] == SpanKind.KERNEL for i, j in zip(m.flows.src, m.flows.dst))
    pids = m.tracks.pid[s.track]
    assert set(np.unique(pids[s.kind == SpanKind.CPU_SAMPLE]).tolist()) == {10, 11}
    i = int(np.flatnonzero(s.kind == SpanKind.CPU_SAMPLE)[1])
    assert m.name_of(i) == "preprocessing" and m.strings[int(s.detail[i])] == "app.py:resize_bilinear"
    assert s.start_ns[i] == 100_000


def test_followed_child_fills_the_main_threads_waiting():
    a = _proc(10, "waiting", "app.py:main", 0, 1000, root=10, launch=False)
    b = _proc(11, "preprocessing", "app.py:resize_bilinear", 100, 900, launch=False)
    res = analyze(merge_traces(a, [b]), AnalyzeOptions(window="all"))
    cats = {r["category"]: r for r in res["breakdown"]}
    # the main thread waits 1 ms; the child works 0.8 ms of it: that is the child's preprocessing
    assert cats["cpu_preprocessing"]["ms"] == pytest.approx(0.8, abs=1e-6)
    assert cats["waiting"]["ms"] == pytest.approx(0.2, abs=0.01)
    assert res["threads"]["critical"] == ["main (10)"]
    fn = {f["function"]: f for f in res["culprits"]["functions"]}
    assert fn["resize_bilinear"]["thread"] == "main (11)"
