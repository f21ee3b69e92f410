"""The tick's own rules (collect/tick_rules.py) on hand-built observations: each rule decides its case, the first
class rule that applies wins, and the two rules after them change what they should.  (The recorded goldens,
tests/test_facts_golden.py, run them on real ticks; plumbing_without_perf and kernel_rules_decide fire only
without perf or with faults under a KEEP, so here is where they are pinned.)"""
import pytest

from inferscope.collect import classify as C
from inferscope.collect.thread_state import KEEP, _ThreadState
from inferscope.collect.tick_rules import CLASS_RULES, TICK_RULES, tick_class

LABEL = ("app.py:step", 12)


def _st(cls="user_code", perf=True, pending=(), prev_vol=False, last_fb=None, kio=False):
    st = _ThreadState(1, None, 0, 0)
    st.cls, st.perf, st.pending, st.prev_vol, st.last_fb, st.kio = cls, (object() if perf else None), list(pending), \
        prev_vol, last_fb, kio
    return st


def _tick(st, dom=None, mod=None, label=LABEL, fair=False, oncpu=True, off=0, kf=0, kblk=False, gil_free=False,
          voluntary=False, perf_pending=False, torch_seen=True):
    return tick_class(C.DOMAIN_NAMES, C.USER, C.FW, st, mod, C.USER if dom is None else dom, label, fair, oncpu, off,
                      kf, kblk, gil_free, voluntary, perf_pending, torch_seen)


def test_off_cpu_all_interval_is_waiting():
    assert _tick(_st(), oncpu=False)[::3] == ("waiting", "off_cpu_tick")
    # on CPU for part of it (an off-CPU part): not this rule
    assert _tick(_st(), oncpu=False, off=1_000_000)[3] != "off_cpu_tick"


def test_an_import_is_framework():
    cls, label, fb, rule = _tick(_st(), mod="numpy", label=("import numpy", 0))
    assert (cls, rule) == ("framework", "import_tick")


def test_without_perf_gil_free_plumbing_keeps_the_class():
    cls, _, _, rule = _tick(_st(perf=False), label=None, gil_free=True)
    assert (cls, rule) == (KEEP, "plumbing_without_perf")
    # with a frame that decides (label), or with perf, it does not apply
    assert _tick(_st(perf=False), gil_free=True)[3] != "plumbing_without_perf"
    assert _tick(_st(perf=True), label=None, gil_free=True)[3] != "plumbing_without_perf"


def test_native_by_role_perf_decides_or_the_gil_heuristic():
    cls, _, fb, rule = _tick(_st(perf=True))
    assert (cls, fb, rule) == (None, "user_code", "native_by_role")           # perf decides at the drain
    assert _tick(_st(perf=False), gil_free=True)[:3:2] == ("cpu_compute", "user_code")   # the GIL was free: native
    assert _tick(_st(perf=False), gil_free=False)[0] == "user_code"
    fw = _tick(_st(perf=True), dom=C.FW)
    assert (fw[0], fw[2]) == (None, "framework")


def test_otherwise_the_stack_class():
    # no perf, torch not imported, plain user code: the stack's class, known at the tick
    cls, _, fb, rule = _tick(_st(perf=False), torch_seen=False)
    assert (cls, fb, rule) == ("user_code", None, "stack_class")


def test_the_first_class_rule_that_applies_wins():
    # off CPU and importing: off_cpu_tick comes first
    assert _tick(_st(), oncpu=False, mod="numpy")[3] == "off_cpu_tick"
    assert [f.__name__ for f in CLASS_RULES][-1] == "stack_class"      # (the catch-all is last)
    assert len(TICK_RULES) == len(CLASS_RULES) + 2


def test_an_isolated_voluntary_tick_keeps_or_follows_the_perf_split():
    st = _st(prev_vol=False)
    cls, label, fb, rule = _tick(st, voluntary=True)
    assert (cls, label, rule) == (KEEP, None, "isolated_voluntary") and st.prev_vol
    # a signal's function still names it
    assert _tick(_st(), voluntary=True, fair=True)[1] == LABEL
    # after a tick perf split, this one is split too, with that tick's stack class
    assert _tick(_st(last_fb="tokenization"), voluntary=True)[:3] == (None, None, "tokenization")
    # consecutive voluntary ticks are classified
    assert _tick(_st(prev_vol=True), voluntary=True)[3] == "native_by_role"


@pytest.mark.parametrize("kw", [dict(kf=3), dict(kblk=True, kio=True), dict(off=2_000_000, kio=True)])
def test_a_keep_with_faults_or_after_io_goes_to_the_kernel_rules(kw):
    kio = kw.pop("kio", False)
    st = _st(kio=kio, last_fb=None)
    st.last_fb = None
    # an isolated voluntary tick over a perf-decided frame: KEEP, then handed to the kernel rules
    cls, _, fb, rule = _tick(st, voluntary=True, **kw)
    assert (cls, fb, rule) == (None, "user_code", "kernel_rules_decide")


def test_a_keep_after_a_lock_wait_stays_keep():
    st = _st(kio=False)
    assert _tick(st, voluntary=True, kblk=True)[0] is KEEP
