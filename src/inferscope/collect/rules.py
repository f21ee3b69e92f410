"""The perf resolver's rules, named and in order (issue 40): how one pending tick's interval (a ``layout.Tick``) is
cut into classed parts from the facts the sampler measured and the perf IP samples taken in it.

``decide`` runs ``RULES`` for every pending tick of a thread, in the order listed; each rule is a small function of
the interval being decided (``Iv``) and says in its docstring what it does and why.  A rule that lays a part writes
it through ``put``, which also tallies the part's time under the rule's name when the sampler asks for it
(``s.rule_ns``: `inferscope analyze --replay --rules`).  The sampler calls ``decide`` at each perf drain
(resolve.py), and the replay of recorded facts calls the very same function (replay.py): rules are tested on
hand-built and recorded facts without a live run (tests/test_facts_*.py).
"""
from __future__ import annotations

from .. import thresholds as T
from . import kernel_time as K
from . import thread_state as TS
from .layout import as_tick
from .perfip import COMPUTE, FRAMEWORK, OTHER, PYTHON, TOKENIZER
from .thread_state import (CLS_COMPUTE, CLS_FRAMEWORK, CLS_RUNQ, CLS_TOKENIZATION, CLS_WAITING, KEEP, PY_CLASSES,
                           perf_kernel_share)


class Iv:
    """One pending tick's interval while the rules decide it: [prev, t], its on-CPU part [prev, end]."""
    __slots__ = ("s", "st", "samples", "n", "i", "e", "t", "cls", "label", "fallback", "gil_free", "off", "rq",
                 "prev", "end", "py_prev", "mid", "kns", "kx", "kio", "done", "rule",
                 "nc", "nk", "tot", "no", "ne", "xc", "kc", "frac", "ftok", "fp", "fx")

    def __init__(self, s, st, samples: list) -> None:
        self.s, self.st, self.samples, self.n, self.i = s, st, samples, len(samples), 0
        self.prev = st.end

    def next_tick(self, e) -> None:
        e = self.e = as_tick(e)
        self.t, self.cls, self.label, self.fallback, self.gil_free, self.off = e[:6]
        self.rq, self.kns, self.end = e.rq, e.kernel_ns, e.t
        self.kx = self.done = False
        self.kc = self.rule = None
        samples, n, i, prev = self.samples, self.n, self.i, self.prev
        while i < n and samples[i][0] <= prev:
            i += 1
        self.i = i

    def upto(self, t: int) -> int:
        """The index after the interval's last IP sample (samples at or before ``t``)."""
        j, samples, n = self.i, self.samples, self.n
        while j < n and samples[j][0] <= t:
            j += 1
        return j


def put(iv: Iv, t: int, cls, label, rule: str, exact: bool = True, tick: bool = True) -> None:
    """Lay the thread's time up to ``t`` as ``cls`` (Sampler._apply), tallied under ``rule`` when asked for."""
    s, st = iv.s, iv.st
    rn = s.rule_ns
    if rn is not None and t > st.end:
        k = (rule, cls)
        rn[k] = rn.get(k, 0) + (t - st.end)
    s._apply(st, t, cls, label, exact=exact, tick=tick)


def python_context(iv: Iv) -> None:
    """Remember the previous tick's Python class and the interval's midpoint.

    The Python class of the tick before this one and the interval's midpoint: interpreter samples of its first half
    ran nearer that tick than this one (``split_interval``: transformers' Python of a tokenizer call read framework
    when the next tick landed in the forward, +5-7 points in zoo_hf_tokenizer)."""
    st, cls = iv.st, iv.cls
    iv.py_prev = st.py_last
    st.py_last = iv.fallback if cls is None else (cls if cls in PY_CLASSES else None)
    iv.mid = iv.prev + (iv.t - iv.prev) // 2


def keep_current(iv: Iv) -> None:
    """A KEEP tick continues the thread's current class.

    A KEEP tick (an isolated voluntary GIL hand-over: the frame says where the thread released the GIL, not what
    it ran) continues the thread's current class (a pending KEEP always follows a decided tick)."""
    if iv.cls is KEEP:
        iv.cls = iv.st.cls or CLS_FRAMEWORK


def off_cpu_part(iv: Iv) -> None:
    """The off-CPU time (CPU clock) is 'waiting': first if on CPU at the tick, else last.

    The interval's off-CPU time, measured by the thread's CPU clock, is 'waiting': first when the thread is on CPU
    at the tick (it ran after it woke up), last when it is off CPU (it ran, then blocked); exact boundaries."""
    off = iv.off
    if off > 0:
        iv.prev += off
        put(iv, iv.prev, CLS_WAITING, None, "off_cpu_part")
    elif off < 0:
        iv.end = iv.t + off


def run_queue_part(iv: Iv) -> None:
    """The run-queue delay (schedstat) is 'run_queue', before the on-CPU part.

    Runnable but not running (schedstat's run-queue delay) is 'run_queue', placed right before the on-CPU part (a
    thread waits for a CPU after it wakes up) - not the program's work: a disk-I/O loop beside other jobs read 31-56 %
    cpu_compute before."""
    rq = iv.rq
    if 0 < rq < iv.end - iv.prev:
        iv.prev += rq
        put(iv, iv.prev, CLS_RUNQ, None, "run_queue_part")


def perf_cpu_share(iv: Iv) -> None:
    """Update the thread's kernel share by perf from fully sampled intervals.

    Where perf sampled all of the interval, its CPU time and user-space samples feed the thread's decaying sums
    (thresholds.KERNEL_PERF_SHARE_CPU_NS): its kernel share by perf (thread_state.perf_kernel_share)."""
    pc, st = iv.e.perf_cpu_ns, iv.st
    if pc >= 0 and st.perf is not None:
        d = 1.0 - min(1.0, pc / T.KERNEL_PERF_SHARE_CPU_NS)
        st.pcpu = st.pcpu * d + pc
        st.pn = st.pn * d + (iv.upto(iv.t) - iv.i)


def io_kernel_time(iv: Iv) -> None:
    """A blocking I/O call's kernel CPU is 'waiting', beside the off-CPU part.

    A blocking I/O call's kernel CPU is part of its wait ('waiting'), next to the off-CPU part.  I/O: the probe saw
    an I/O call (blocked == 2), or the thread blocked and perf saw no user code run in the interval - an O_DIRECT read
    of ~90 us the probe missed read as cpu_compute, 2-8 % of zoo_disk_io's window - unless its last samples were native
    code (a Rust tokenizer's allocations are the tokenizer's).  Its length: the stime carry, or the on-CPU time the IP
    samples leave uncovered (each stands for PERF_PERIOD_NS) at the thread's kernel share (all of it for an I/O call;
    a piece of a long interval takes the expected value: zoo_gil lost 20-40 % of its loop's CPU to waiting otherwise).
    A part that fills the interval decides it."""
    st, e, prev, end = iv.st, iv.e, iv.prev, iv.end
    kb = e.blocked
    j = iv.upto(iv.t)
    kio = iv.kio = kb == 2 or (bool(kb) and st.perf is not None and j == iv.i and not (
        st.native_fresh and ((st.native or 0) >= T.NATIVE_RECENT_MIN_SHARE
                             or (st.native_tok or 0) >= T.NATIVE_RECENT_MIN_SHARE)))
    kr = K.kernel_class(e.faults, bool(kb), False, iv.fallback, CLS_COMPUTE, CLS_WAITING, kio)
    if kr is None or kr[1] != K.IO or end <= prev:
        return
    if st.perf is not None:
        share = 1.0 if kb == 2 else max(st.kst.kernel_share() if st.kst is not None else 0.0,
                                        perf_kernel_share(st.pcpu, st.pn))
        if e.piece:
            iv.kns = max(iv.kns, int((end - prev) * share * share))
        else:
            iv.kns = max(iv.kns, int((end - prev - (j - iv.i) * TS.PERF_PERIOD_NS) * share))
    if iv.kns <= 0:
        return
    k = min(iv.kns, end - prev)
    iv.s.kernel_totals.add(K.IO, k, 0)
    if iv.off < 0:
        iv.end -= k
    else:
        iv.prev += k
        put(iv, iv.prev, CLS_WAITING, None, "io_kernel_time")
    if iv.end <= iv.prev:
        if iv.t > iv.prev:
            put(iv, iv.t, CLS_WAITING, None, "io_kernel_time")
        iv.prev = iv.t
        iv.done = True


def count_samples(iv: Iv) -> None:
    """Count the interval's IP samples by role (libc follows native code; interpreter samples by signal).

    Three rules in one pass over the samples:
    - libc follows native code: a sample in libc / the loader / unknown libraries (OTHER) right after a native
      library's sample in the interval is that code's helper (a Rust tokenizer's malloc, a torch op's memset) and
      takes its kind; after an interpreter sample it follows the interval's mix (a forward's libc spread over a
      tokenizer's interval read zoo_hf_tokenizer's tokenization as cpu_compute; following the interpreter cost
      zoo_numpy_mlp 4-7 points of cpu_compute);
    - interpreter samples by signal: each takes the main thread's Python class at the timer signal nearest to it
      (sigframes.py, within a signal period; an open garbage-collection record holds until the next), else the tick
      nearer to it (``ne``: before the midpoint); a class that is neither tick's gets its own part (``xc``);
    - torch's own plumbing is framework overhead: samples perfip.symbol_role puts in torch's dispatcher, TensorIterator
      set-up, allocator or autograd (role FRAMEWORK) are 'framework' - the previous tick's share when that was
      framework, else a part of their own (``xc``) - not the tick's stack class: a loop of 8x8 torch ops read 73.5 %
      cpu_compute with every libtorch sample compute, 0.4 % framework with them given the stack's class (user code),
      51 % framework with this rule (zoo_tinyops, truth: the math is 0.8-0.9 % of the loop's CPU)."""
    st, samples, n, t = iv.st, iv.samples, iv.n, iv.t
    i = iv.i
    nc = nk = tot = no = ne = 0
    last = None          # the kind of the interval's last native sample (None after an interpreter sample)
    obs, oj, near = st.sigobs, 0, iv.s.interval_ns
    xc = None
    mid, py_prev, fallback = iv.mid, iv.py_prev, iv.fallback
    while i < n and samples[i][0] <= t:
        k = samples[i][1]
        if k == OTHER:
            k = last if last is not None else OTHER
        elif k != PYTHON:
            last = k
        else:
            last = None
        if k == COMPUTE:
            nc += 1
        elif k == TOKENIZER:
            nk += 1
        elif k == OTHER:
            no += 1
            tot -= 1
        elif k == FRAMEWORK:
            if py_prev == CLS_FRAMEWORK and py_prev != fallback:
                ne += 1
            elif fallback != CLS_FRAMEWORK:
                xc = xc or {}
                xc[CLS_FRAMEWORK] = xc.get(CLS_FRAMEWORK, 0) + 1
        elif k == PYTHON:
            ts = samples[i][0]
            pc_ = None
            if obs:
                while oj < len(obs) and obs[oj][0] <= ts:
                    oj += 1
                b_ = obs[oj - 1] if oj else None
                if b_ is not None and b_[2]:
                    pc_ = b_[1]       # a garbage collection that began there (sigframes._gc)
                else:
                    if b_ is not None and ts - b_[0] > near:
                        b_ = None
                    n_ = obs[oj] if oj < len(obs) else None
                    if n_ is not None and n_[0] - ts <= near and (b_ is None or n_[0] - ts < ts - b_[0]):
                        b_ = n_
                    if b_ is not None:
                        pc_ = b_[1]
            if pc_ is None:
                if ts < mid:
                    ne += 1
            elif pc_ == py_prev and py_prev != fallback:
                ne += 1
            elif pc_ != fallback:
                xc = xc or {}
                xc[pc_] = xc.get(pc_, 0) + 1
        tot += 1
        i += 1
    if obs:
        k_ = 0
        while k_ < len(obs) and obs[k_][0] < t - near:
            k_ += 1
        del obs[:max(0, k_ - 1)]      # (the last one before: an open record holds until the next)
    iv.i, iv.nc, iv.nk, iv.tot, iv.no, iv.ne, iv.xc = i, nc, nk, tot, no, ne, xc


def fault_kernel_part(iv: Iv) -> None:
    """Page-fault kernel time goes to the code that faulted (compute, tokenizer, or the stack's class).

    Page faults: the kernel's memory work for the code that faulted (kernel_time.kernel_class, thresholds.KERNEL_*),
    not the previous verdict.  Its length: the stime carry, or the on-CPU time the IP samples leave uncovered - at most
    KERNEL_FAULT_COST_SPREAD times the thread's cost per fault each (one fault in a 5.7 ms interval read 1.7 ms of
    kernel time: 10-20 ms of zoo py_between_ops' Python loop read cpu_compute).  Native code faulted (the interval's or
    the next sample is numeric, the GIL was free, or its last verdict was compute) -> cpu_compute, a native
    tokenizer's -> tokenization (zoo_tokenizers serial read 75-79 % vs 91 % true as compute), else the stack's class.
    With user-space samples too, the kernel part comes first and the samples decide the rest."""
    st, e, samples, n, i = iv.st, iv.e, iv.samples, iv.n, iv.i
    kf, tot = e.faults, iv.tot
    if kf and st.perf is not None:
        cap = int(kf * (st.kst.fault_cost() if st.kst is not None else T.KERNEL_FAULT_NS_PRIOR)
                  * T.KERNEL_FAULT_COST_SPREAD)
        iv.kns = max(iv.kns, min(cap, iv.end - iv.prev - (tot + iv.no) * TS.PERF_PERIOD_NS))
    if not (kf and (not tot or iv.kns > 0)):
        return
    native = (iv.nc > 0 or iv.gil_free or (i < n and samples[i][1] == COMPUTE)
              or (st.native_fresh and (st.native or 0) >= T.NATIVE_RECENT_MIN_SHARE))
    kc = K.kernel_class(kf, bool(e.blocked), native, iv.fallback, CLS_COMPUTE, CLS_WAITING, iv.kio)
    if kc is not None and kc[1] != K.FAULTS:
        kc = None                      # (the I/O part was placed by io_kernel_time)
    elif kc is not None and kc[0] == CLS_COMPUTE and (
            iv.nk > iv.nc or (i < n and samples[i][1] == TOKENIZER)
            or (not iv.nc and st.native_fresh and (st.native_tok or 0) >= T.NATIVE_RECENT_MIN_SHARE)
            or (not iv.nc and not iv.nk and iv.s._native_role() == TOKENIZER)):
        kc = (CLS_TOKENIZATION, kc[1])
    if tot and kc is not None:
        k = min(iv.kns, iv.end - iv.prev)
        iv.s.kernel_totals.add(kc[1], k, kf)
        if k > 0:
            iv.prev += k
            iv.kx = True
            put(iv, iv.prev, kc[0], iv.label, "fault_kernel_part", tick=iv.e.tick)
        kc = None
    iv.kc = kc


def native_fractions(iv: Iv) -> None:
    """The fractions of compute / tokenizer / Python classes, from the samples or the thread's last ones.

    The interval's split by what ran: ``frac`` native compute, ``ftok`` native tokenizer, ``fp`` the previous tick's
    Python class, ``fx`` a third Python class, the rest the stack's class - in this order of evidence:
    - all of it faulted (fault_kernel_part, no user-space sample): the fault rule's class;
    - its samples (a split, not a vote: a vote turned a 70 % native interval into 100 %, and more samples per tick
      pulled harder: the demo's generate() read 65 -> 87 % cpu_compute as the perf rate went 1 -> 5 per tick);
    - only libc samples: a native tokenizer's threads running (Rayon encode_batch) -> tokenization (zoo_tokenizers
      --parallel: +15 points of compute before), else the previous interval's mix when it had classified samples, else
      the stack's class (hashlib after a tokenizer phase is user code);
    - no sample: the thread's last fractions; with perf on and never a user-space sample: none native (kernel time of
      I/O calls; the GIL rule read a disk-I/O loop as 31-56 % compute); without perf: the GIL free at the tick ->
      compute."""
    st, kc, tot = iv.st, iv.kc, iv.tot
    iv.fp, iv.fx = 0.0, None
    if kc is not None:
        iv.s.kernel_totals.add(kc[1], iv.end - iv.prev, iv.e.faults)
        frac, ftok = (1.0 if kc[0] == CLS_COMPUTE else 0.0), (1.0 if kc[0] == CLS_TOKENIZATION else 0.0)
    elif tot:
        frac, ftok = iv.nc / tot, iv.nk / tot
        st.native, st.native_tok = frac, ftok
        st.native_fresh = True
        py_prev = iv.py_prev
        if iv.ne and py_prev is not None and py_prev != iv.fallback:
            iv.fp = iv.ne / tot
            if py_prev == CLS_TOKENIZATION:
                ftok, iv.fp = ftok + iv.fp, 0.0
        if iv.xc:
            fx = {}
            for c_, n_ in iv.xc.items():
                if c_ == CLS_TOKENIZATION:
                    ftok += n_ / tot
                else:
                    fx[c_] = n_ / tot
            iv.fx = fx
    elif iv.no:
        if iv.s._native_role() == TOKENIZER:
            frac, ftok = 0.0, 1.0
        elif st.native_fresh and st.native is not None:
            frac, ftok = st.native, st.native_tok
        else:
            frac, ftok = 0.0, 0.0
        st.native_fresh = False
    elif st.native is not None:
        frac, ftok = st.native, st.native_tok
    elif st.perf is not None:
        frac, ftok = 0.0, 0.0
    else:
        frac, ftok = (1.0 if iv.gil_free else 0.0), 0.0
    iv.frac, iv.ftok = frac, ftok
    # the interval's own samples decided it: its class starts at the interval's start, as a split's parts do - not at
    # the midpoint (the rule for a class seen at a tick: 2.6 ms of user code at each Rust encode_batch's second
    # interval).  Not where the fault rule decided it: where a page-touching phase began is unknown (zoo_pagefault's
    # user code -3.3..-4.1 points when exact)
    iv.kx = iv.kx or (kc is None and tot + iv.no > 0)


def split_interval(iv: Iv) -> None:
    """Lay the on-CPU part in order by the fractions, each part naming the tick's function.

    Lay the on-CPU part by the fractions: one class when one fraction is all of it, else the parts in the order
    previous tick's Python class, cpu_compute, tokenization, third Python classes, the stack's class; each part names
    the tick's function (its time is the function's, whatever the class), then the off-CPU tail."""
    frac, ftok, fp, fx = iv.frac, iv.ftok, iv.fp, iv.fx
    iv.rule = "split_interval"           # (one class from the fractions: decided_class lays it)
    if frac >= 1.0:
        iv.cls = CLS_COMPUTE
        return
    if ftok >= 1.0:
        iv.cls = CLS_TOKENIZATION
        return
    if frac <= 0.0 and ftok <= 0.0 and fp <= 0.0 and not fx:
        iv.cls = iv.fallback
        return
    if fx and max(fx.values()) >= 1.0:
        iv.cls = max(fx, key=fx.get)
        return
    end, label, tk = iv.end, iv.label, iv.e.tick
    dt = end - iv.prev
    if fp > 0.0:
        iv.prev += int(dt * fp)
        put(iv, iv.prev, iv.py_prev, label, "split_interval", tick=tk)
        dt = end - iv.prev
        frac, ftok = (frac / (1.0 - fp), ftok / (1.0 - fp)) if fp < 1.0 else (0.0, 0.0)
        if fx:
            fx = {c_: (f_ / (1.0 - fp) if fp < 1.0 else 0.0) for c_, f_ in fx.items()}
    a = iv.prev + int(dt * frac)
    b = a + int(dt * ftok)
    if a > iv.prev:
        put(iv, a, CLS_COMPUTE, label, "split_interval", tick=tk)
    if b > a:
        put(iv, b, CLS_TOKENIZATION, label, "split_interval", tick=tk)
    for c_, f_ in (fx or {}).items():
        e_ = min(end, b + int(dt * f_))
        if e_ > b:
            put(iv, e_, c_, label, "split_interval", tick=tk)
            b = e_
    if end > b:
        put(iv, end, iv.fallback, label, "split_interval", tick=tk)
    if iv.t > end:
        put(iv, iv.t, CLS_WAITING, None, "off_cpu_part")
    iv.prev = iv.t
    iv.done = True


def decided_class(iv: Iv) -> None:
    """One class for the whole on-CPU part, then the off-CPU tail.

    The interval's one class (the tick's, or the one the samples gave all of it) up to its end, then the off-CPU
    tail.  Exact boundaries next to a measured part (off-CPU, run queue, kernel) or a wait known by the CPU clock;
    else the change is placed at the midpoint since the previous tick (Sampler._apply)."""
    st, end = iv.st, iv.end
    cls = iv.cls
    put(iv, end, cls, iv.label, iv.rule or "decided_class", exact=bool(iv.off) or iv.rq > 0 or iv.kx or (st.clk is not None and (
        cls is CLS_WAITING or st.cls is CLS_WAITING or st.cls is CLS_RUNQ)), tick=iv.e.tick)
    if iv.t > end:
        put(iv, iv.t, CLS_WAITING, None, "off_cpu_part")
    iv.prev = iv.t


# The rules in the order ``decide`` runs them; the rules of a perf-decided interval (a tick whose class needs the IP
# samples) run only for those (PERF_RULES).  `inferscope rules` prints this list.
PERF_RULES = (count_samples, fault_kernel_part, native_fractions, split_interval)
RULES = (python_context, keep_current, off_cpu_part, run_queue_part, perf_cpu_share, io_kernel_time,
         *PERF_RULES, decided_class)


def decide(s, st, pend: list, samples: list) -> None:
    """Decide the pending ticks ``pend`` (layout.Tick) of one thread from its perf IP ``samples``, in order, by RULES.

    Reads the thread's state and, of the sampler ``s``, only ``_native_role()``, ``interval_ns``, ``kernel_totals`` and
    ``rule_ns``; writes runs through ``s._apply`` - so a recorded call replays offline (facts.py, replay.py)."""
    iv = Iv(s, st, samples)
    for e in pend:
        iv.next_tick(e)
        python_context(iv)
        keep_current(iv)
        off_cpu_part(iv)
        run_queue_part(iv)
        perf_cpu_share(iv)
        io_kernel_time(iv)
        if iv.done:
            continue
        if iv.cls is None:
            count_samples(iv)
            fault_kernel_part(iv)
            native_fractions(iv)
            split_interval(iv)
            if iv.done:
                continue
        decided_class(iv)


def rules_table() -> str:
    """The rules in order, one line each (their docstrings' first line): `inferscope rules`, ARCHITECTURE.md."""
    lines = ["| # | rule | applies to | what it decides |", "|---|---|---|---|"]
    for k, f in enumerate(RULES, 1):
        first = (f.__doc__ or "").strip().splitlines()[0].rstrip(".")
        scope = "ticks perf decides" if f in PERF_RULES else "every pending tick"
        lines.append(f"| {k} | `{f.__name__}` | {scope} | {first} |")
    return "\n".join(lines)
