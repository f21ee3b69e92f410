import numpy as np
import pytest

from inferscope.analyze.intervals import (active_at, active_at_sorted, clip, coverage_on_bounds, gaps, overlap_with_union,
                                         summed_until, total, union)


def brute_cover(starts, ends, lo, hi):
    cov = np.zeros(hi - lo, dtype=bool)
    for s, e in zip(starts, ends):
        cov[max(s, lo) - lo:max(min(e, hi) - lo, 0)] = True
    return cov


@pytest.mark.parametrize("seed", range(8))
def test_union_total_and_overlap_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 200
    s = rng.integers(0, 5000, n)
    e = s + rng.integers(0, 300, n)
    cov = brute_cover(s, e, 0, 6000)
    assert total(s, e) == int(cov.sum())
    us, ue = union(s, e)
    assert np.all(us[1:] > ue[:-1])  # disjoint, sorted, non-touching
    qs = rng.integers(0, 5500, 50)
    qe = qs + rng.integers(0, 500, 50)
    got = overlap_with_union(qs, qe, us, ue)
    want = [int(cov[a:b].sum()) for a, b in zip(qs, qe)]
    assert got.tolist() == want
    gs, ge = gaps(us, ue, 0, 6000)
    assert int((ge - gs).sum()) == 6000 - int(cov.sum())
    pts = rng.integers(0, 6000, 100)
    assert (active_at(s, e, pts) > 0).tolist() == [bool(cov[p]) for p in pts]
    b = np.unique(np.concatenate(([0, 6000], us, ue, rng.integers(0, 6000, 300))))
    assert coverage_on_bounds(us, ue, b).tolist() == [bool(cov[x]) for x in b[:-1]]
    sp = np.sort(pts)
    assert active_at_sorted(s, e, sp).tolist() == active_at(s, e, sp).tolist()


def test_clip_drops_empty():
    s, e = clip(np.array([0, 10, 50]), np.array([5, 20, 60]), 8, 55)
    assert s.tolist() == [10, 50] and e.tolist() == [20, 55]


@pytest.mark.parametrize("seed", range(4))
def test_summed_until_counts_overlapping_intervals_each(seed):
    """summed_until(x) = summed length of the intervals before x, overlaps counted once per interval: a
    recount per point from a per-interval loop."""
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 5000, 300)
    e = s + rng.integers(0, 400, 300)
    x = np.sort(rng.integers(-100, 6000, 80))
    want = [int(sum(min(max(xi - a, 0), b - a) for a, b in zip(s.tolist(), e.tolist()))) for xi in x.tolist()]
    assert summed_until(s, e, x).tolist() == want
    assert summed_until(s[:0], e[:0], x).tolist() == [0] * len(x)
