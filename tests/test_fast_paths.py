"""The issue-26 fast paths give exactly the results of the plain numpy code they replace."""
from types import SimpleNamespace

import numpy as np

from inferscope.analyze.select import in_window, window_bounds
from inferscope.analyze.window import Window
from inferscope.analyze.stats import grouped_stats
from inferscope.trace.builder import TraceBuilder
from inferscope.trace.kinds import TrackKind
from inferscope.trace.model import codes_in
from inferscope.ingest.kineto.tracks import _assign_tracks


def _plain_in_window(st, en, mask, lo, hi):
    idx = np.flatnonzero(mask)
    a, b = st[idx], en[idx]
    return idx[(a <= hi) & (b >= lo) & ((b > lo) | (a >= lo))]


def test_in_window_sorted_path_matches_plain_selection():
    rng = np.random.default_rng(7)
    for _ in range(2000):
        n = int(rng.integers(0, 40))
        st = np.sort(rng.integers(0, 50, n)).astype(np.int64)
        en = st + rng.integers(0, 20, n) * (rng.random(n) < 0.7)      # marks (zero length) too
        mask = rng.random(n) < 0.6
        lo, hi = (int(v) for v in rng.integers(-5, 75, 2))              # empty windows (hi < lo) too
        window = Window(lo, hi) if rng.random() < 0.9 else None
        trace = SimpleNamespace(spans=SimpleNamespace(start_ns=st, end_ns=en))
        got = in_window(trace, mask, window)
        want = _plain_in_window(st, en, mask, *window_bounds(window))
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_in_window_unsorted_spans_take_the_plain_path():
    st = np.array([30, 10, 20], dtype=np.int64)
    en = np.array([40, 15, 25], dtype=np.int64)
    trace = SimpleNamespace(spans=SimpleNamespace(start_ns=st, end_ns=en))
    got = in_window(trace, np.ones(3, bool), Window(12, 35))
    assert got.tolist() == [0, 1, 2]


def test_codes_in_matches_isin():
    rng = np.random.default_rng(3)
    k = rng.integers(0, 20, 5000).astype(np.uint8)
    for wanted in ([], [3], [3, 5, 7], list(range(20))):
        assert np.array_equal(codes_in(k, wanted), np.isin(k, wanted))


def test_grouped_stats_sorted_key_matches_argsort():
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 30, 4000).astype(np.int32)
    vals = rng.integers(0, 10_000, 4000).astype(np.int64)
    got = grouped_stats(keys, vals)                       # integer values: the sorted combined key
    want = grouped_stats(keys, vals.astype(np.float64))   # float values: the argsort path it replaces
    assert got.keys() == want.keys()
    for k in got:
        assert np.array_equal(got[k], want[k]), k


def test_assign_tracks_runs_give_the_tracks_of_rows():
    rng = np.random.default_rng(11)
    n = 3000
    # runs of equal rows, values repeating across runs
    run = np.repeat(rng.integers(0, 6, 700), rng.integers(1, 8, 700))[:n]
    kind = np.where(run % 2 == 0, TrackKind.CPU_THREAD, TrackKind.GPU_STREAM).astype(np.uint8)
    pid = np.where(kind == TrackKind.GPU_STREAM, -1, 100 + run).astype(np.int64)
    tid = (run * 7).astype(np.int64)
    dev = np.where(kind == TrackKind.GPU_STREAM, run % 3, -1).astype(np.int64)
    b = TraceBuilder()
    tr = _assign_tracks(b, kind, pid, tid, dev, {}, None, None, np.arange(len(run)))
    t = SimpleNamespace(**{k: np.asarray(v) for k, v in b._tracks.items()})
    assert np.array_equal(t.kind[tr], kind) and np.array_equal(t.pid[tr], pid)
    assert np.array_equal(t.tid[tr], tid) and np.array_equal(t.device[tr], dev)
    # one track per distinct row, made in the order of the mixed key (as before the runs)
    assert len(t.kind) == len({(a, b_, c, d) for a, b_, c, d in zip(kind.tolist(), pid.tolist(), tid.tolist(),
                                                                     dev.tolist())})
