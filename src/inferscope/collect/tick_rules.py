"""The tick's own rules, named and in order (issue 40): the class a sampler tick gives the interval since the thread's
previous tick, from what the tick observed (sampler_tick.tick_threads: on/off CPU by the thread's CPU clock, the
stack's domain and function, the GIL and perf state).  The first of CLASS_RULES that applies gives the class - a class
name, None (the perf IP samples decide at the next drain: collect/rules.py) or KEEP (the thread's current class) -,
then isolated_voluntary and kernel_rules_decide may change it.  The sampler runs them live (sampler_tick._tick_class)
and the replay of recorded facts on each tick's observation (replay.py), so they are tested on recorded runs too.
"""
from __future__ import annotations

from .thread_state import CLS_COMPUTE, CLS_FRAMEWORK, CLS_TOKENIZATION, CLS_WAITING, KEEP


class TickIn:
    """One tick's observation of one thread while its rules run, and the class they give."""
    __slots__ = ("st", "mod", "dom", "label", "fair", "oncpu", "off", "kf", "kblk", "gil_free", "voluntary",
                 "perf_pending", "torch_seen", "names", "USER", "FW", "cls", "fallback", "rule")


def off_cpu_tick(k: TickIn) -> bool:
    """Off CPU for the whole interval (the thread's CPU clock did not move): 'waiting'."""
    if not k.oncpu and not k.off:
        k.cls = CLS_WAITING
        return True
    return False


def import_tick(k: TickIn) -> bool:
    """In an import (the thread owns a module lock): library loading is 'framework'."""
    if k.mod is not None:
        k.cls = CLS_FRAMEWORK
        return True
    return False


def plumbing_without_perf(k: TickIn) -> bool:
    """Without perf, the GIL free at once on a stack of stdlib / unknown-library frames only keeps the current class.

    A Pool worker on its task queue, a lock or a pipe is a blocking wait, not native compute; its CPU in the interval
    went to what it did before (measured: 40 % of a spawn worker's resize time read as cpu_compute)."""
    st = k.st
    if k.gil_free and k.label is None and k.dom == k.USER and st.perf is None and st.cls is not None:
        k.cls = KEEP
        return True
    return False


def native_by_role(k: TickIn) -> bool:
    """Framework or user frames (once torch is imported, or with perf) and, with perf, a tokenizer's Python: perf decides.

    Python vs native code by role, decided from the perf IP samples at the next drain (numeric libraries ->
    cpu_compute, native tokenizers -> tokenization, the rest the stack's class; numpy/BLAS-only programs too), or
    without perf by the GIL heuristic (free at once -> cpu_compute).  A tokenizer's Python (transformers'
    tokenization_*.py) too, with perf: the tick lands in it for intervals that also hold the model step after it
    (PreTrainedTokenizerFast per text, then a 2 ms forward: the whole interval read tokenization, zoo_hf_tokenizer's
    compute 3.8 % vs 13.8 %)."""
    st, dom, names = k.st, k.dom, k.names
    if dom == k.FW or (dom == k.USER and (k.torch_seen or st.perf is not None or k.perf_pending)) or (
            st.perf is not None and names[dom] == CLS_TOKENIZATION):
        k.fallback = names[dom]
        if st.perf is None:
            k.cls = CLS_COMPUTE if k.gil_free else k.fallback
        else:
            k.cls = None
        return True
    return False


def stack_class(k: TickIn) -> bool:
    """Otherwise the stack's class (its innermost deciding frame's domain: tokenization, preprocessing, user code)."""
    k.cls = k.names[k.dom]
    return True


def isolated_voluntary(k: TickIn) -> None:
    """An isolated voluntary tick (the thread let the sampler have the GIL) is not classified: it keeps the current class.

    Consecutive voluntary ticks are (a thread that releases the GIL every few ms is only ever seen at release
    points); after a tick perf split, this one is split too; a timer signal's function still names it."""
    st = k.st
    vol = k.voluntary and k.oncpu
    if vol and not st.prev_vol and (st.cls is not None or st.pending):
        if st.last_fb is not None:    # the previous tick was split by perf: so is this
            k.cls, k.label, k.fallback = None, None, st.last_fb
        else:
            k.cls, k.label = KEEP, (k.label if k.fair else None)
        k.rule = "isolated_voluntary"
    else:
        st.last_fb = k.fallback if k.cls is None else None
    st.prev_vol = vol


def kernel_rules_decide(k: TickIn) -> None:
    """A KEEP with page faults in the interval, or after / containing an I/O call's wait, goes to the kernel rules.

    Its kernel time is not the previous class's: the perf resolver decides (rules.fault_kernel_part, io_kernel_time).
    Not after GIL/lock waits: zoo_mixed_culprit's clean_rows read 0 % in 2 runs of 6."""
    st = k.st
    if k.cls is KEEP and (k.kf or ((k.kblk or k.off) and st.kio)) and k.fallback is not None and st.perf is not None:
        k.cls = None
        k.rule = "kernel_rules_decide"


# The first of CLASS_RULES that applies gives the class; the POST_RULES then run on every tick.
CLASS_RULES = (off_cpu_tick, import_tick, plumbing_without_perf, native_by_role, stack_class)
POST_RULES = (isolated_voluntary, kernel_rules_decide)
TICK_RULES = CLASS_RULES + POST_RULES


def tick_class(names, USER, FW, st, mod, dom, label, fair: bool, oncpu: bool, off: int, kf: int, kblk: bool,
               gil_free: bool, voluntary: bool, perf_pending: bool, torch_seen: bool):
    """The tick's class by TICK_RULES: (class, label, the stack's class where perf decides, the rule that decided)."""
    k = TickIn()
    k.st, k.mod, k.dom, k.label, k.fair, k.oncpu, k.off, k.kf, k.kblk = st, mod, dom, label, fair, oncpu, off, kf, kblk
    k.gil_free, k.voluntary, k.perf_pending, k.torch_seen = gil_free, voluntary, perf_pending, torch_seen
    k.names, k.USER, k.FW = names, USER, FW
    k.cls = k.fallback = None
    for r in CLASS_RULES:
        if r(k):
            k.rule = r.__name__
            break
    isolated_voluntary(k)
    kernel_rules_decide(k)
    return k.cls, k.label, k.fallback, k.rule
