"""The one window API (analyze/select.py): the three membership rules and clip at the edges, on planted
intervals whose answer is known by construction; window_bounds refuses anything but a Window; and no module of
analyze/ (or fleet/) writes its own window comparison."""
import re
from pathlib import Path

import numpy as np
import pytest

from inferscope.analyze.select import I64_MAX, I64_MIN, clip, inside, overlap, starts_inside, window_bounds
from inferscope.analyze.window import Window, window_from_report

W = Window(100, 200)
# planted intervals [start, end) around the window [100, 200), each with its answer under every rule:
#                  start end   overlap starts_inside inside  clipped
PLANTED = [(50, 80, False, False, False, (100, 100)),    # wholly before
           (50, 100, False, False, False, (100, 100)),   # ends at the window's start: touches, no part inside
           (50, 101, True, False, False, (100, 101)),    # one ns inside
           (100, 100, False, True, True, (100, 100)),    # zero length at the start edge
           (100, 150, True, True, True, (100, 150)),     # starts at the start edge
           (150, 150, True, True, True, (150, 150)),     # zero length inside
           (150, 200, True, True, True, (150, 200)),     # ends at the end edge
           (150, 250, True, True, False, (150, 200)),    # runs past the end
           (50, 250, True, False, False, (100, 200)),    # covers the window
           (199, 199, True, True, True, (199, 199)),     # last ns, zero length
           (200, 200, False, False, True, (200, 200)),   # zero length at the end edge: [200, 200) is in [100, 200)
           (200, 300, False, False, False, (200, 200)),  # starts at the end edge
           (250, 300, False, False, False, (250, 250))]  # wholly after (clip: empty, end never before start)


def _cols():
    st = np.array([p[0] for p in PLANTED], np.int64)
    en = np.array([p[1] for p in PLANTED], np.int64)
    return st, en


def test_rules_at_the_edges():
    st, en = _cols()
    assert overlap(st, en, W).tolist() == [p[2] for p in PLANTED]
    assert starts_inside(st, W).tolist() == [p[3] for p in PLANTED]
    assert inside(st, en, W).tolist() == [p[4] for p in PLANTED]
    # the closed variant adds exactly the starts at end_ns
    assert starts_inside(st, W, include_end=True).tolist() == [p[3] or p[0] == 200 for p in PLANTED]


def test_clip_at_the_edges():
    st, en = _cols()
    a, b = clip(st, en, W)
    assert list(zip(a.tolist(), b.tolist())) == [p[5] for p in PLANTED]
    assert (st == _cols()[0]).all() and (en == _cols()[1]).all()   # inputs untouched
    # clipped length is positive exactly where overlap holds for a positive-length interval
    pos = en > st
    assert ((b - a) > 0).tolist() == (overlap(st, en, W) & pos).tolist()


def test_none_is_the_whole_range():
    st, en = _cols()
    assert window_bounds(None) == (I64_MIN, I64_MAX)
    assert overlap(st, en, None).all() and starts_inside(st, None).all() and inside(st, en, None).all()


@pytest.mark.parametrize("bad", [{"start_ns": 100, "end_ns": 200}, (100, 200), "100-200", 5])
def test_window_bounds_refuses_anything_but_a_window(bad):
    with pytest.raises(TypeError):
        window_bounds(bad)
    with pytest.raises(TypeError):
        overlap(np.zeros(1, np.int64), np.ones(1, np.int64), bad)


def test_look_alike_object_is_refused():
    class LooksLikeAWindow:
        start_ns, end_ns = 100, 200
    with pytest.raises(TypeError):
        window_bounds(LooksLikeAWindow())


def test_window_from_report():
    w = Window(5, 9, "step 2", "step")
    assert window_from_report(w.as_dict()) == w
    assert window_from_report({}) is None and window_from_report(None) is None
    assert window_from_report({"start_ns": 1.5, "end_ns": 9}) is None


# ---- source scan: no inline window predicate outside select.py ----
_OP = r"(?:<=|>=|<|>)"
_WATTR = r"\b(?:window|win|w)\.(?:start|end)_ns\b"
_OPERAND = r"[\w.\[\]\"']+"
_INLINE = [re.compile(_OP + r"\s*" + _WATTR),                                    # x >= window.start_ns
           re.compile(_WATTR + r"\s*" + _OP),                                    # window.end_ns > x
           re.compile(r"\(\s*" + _OPERAND + r"\s*" + _OP + r"\s*(?:lo|hi)\s*\)"),  # (s.start_ns >= lo)
           re.compile(r"\(\s*(?:lo|hi)\s*" + _OP + r"\s*" + _OPERAND + r"\s*\)")]  # (hi > s.end_ns)
_SRC = Path(__file__).resolve().parents[1] / "src" / "inferscope"
_ALLOWED = {"analyze/select.py"}


def inline_predicates(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if any(p.search(line) for p in _INLINE)]


@pytest.mark.parametrize("line", ["m = (s.start_ns >= window.start_ns) & (s.start_ns < window.end_ns)",
                                  "keep = (s.end_ns > lo) & (s.start_ns < hi)",
                                  "x = [r for r in rows if r['end_ns'] <= w.end_ns]",
                                  "inw = (ts >= lo) & (ts <= hi)",
                                  "m &= (hi > s.start_ns)"])
def test_scan_catches_an_inline_predicate(line):
    assert inline_predicates(line) == [line]


@pytest.mark.parametrize("line", ["m = overlap(s.start_ns, s.end_ns, window)", "if hi <= lo:",
                                  "a = ps if ps is not None and ps < lo else lo", "lo, hi = window.start_ns, window.end_ns"])
def test_scan_lets_other_code_through(line):
    assert inline_predicates(line) == []


def test_no_inline_window_predicate_in_analyze_or_fleet():
    found = []
    for pkg in ("analyze", "fleet"):
        for f in sorted((_SRC / pkg).glob("*.py")):
            rel = f"{pkg}/{f.name}"
            if rel in _ALLOWED:
                continue
            found += [f"{rel}: {ln}" for ln in inline_predicates(f.read_text())]
    assert not found, "window membership written inline; use select.overlap/starts_inside/inside/clip:\n" + "\n".join(found)
