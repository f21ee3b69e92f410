"""The resolver's rules for an interval the perf IP samples decide (collect/rules.py runs them in order, after the
rules every pending tick goes through): the samples counted by role, page-fault kernel time, the fractions of
compute / tokenizer / Python classes, and the on-CPU part laid by them."""
from __future__ import annotations

from .. import thresholds as T
from . import kernel_time as K
from . import thread_state as TS
from .perfip import COMPUTE, FRAMEWORK, OTHER, PYTHON, TOKENIZER
from .rule_interval import Iv, put
from .thread_state import CLS_COMPUTE, CLS_FAULTS, CLS_FRAMEWORK, CLS_TOKENIZATION, CLS_WAITING


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
    """Page-fault kernel time: page_faults for native compute, else the tokenizer or the stack's class.

    Page faults: the kernel's memory work for the code that faulted (kernel_time.kernel_class, thresholds.KERNEL_*),
    not the previous verdict.  Its length: the stime carry, or the on-CPU time the IP samples leave uncovered - at most
    KERNEL_FAULT_COST_SPREAD times the thread's cost per fault each (one fault in a 5.7 ms interval read 1.7 ms of
    kernel time: 10-20 ms of zoo py_between_ops' Python loop read cpu_compute).  Native code faulted (the interval's or
    the next sample is numeric, the GIL was free, or its last verdict was compute) -> cpu_compute, a native
    tokenizer's -> tokenization (zoo_tokenizers serial read 75-79 % vs 91 % true as compute), else the stack's class.
    Native compute's fault time is its own class, ``page_faults`` (a part of cpu_compute: the kernel's memory work, not
    the library's code; issue 45: zoo_pagefault's touch() read as plain compute).  With user-space samples too, the
    kernel part comes first and the samples decide the rest."""
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
    elif kc is not None and kc[0] == CLS_COMPUTE:
        kc = (CLS_FAULTS, kc[1])
    if tot and kc is not None:
        k = min(iv.kns, iv.end - iv.prev)
        iv.s.kernel_totals.add(kc[1], k, kf)
        if k > 0:
            if kc[0] == CLS_TOKENIZATION:
                iv.s.kernel_totals.add_native_tokenizer(k)
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
      compute.
    The native tokenizer's own share (``ftok`` before interpreter samples of a tokenizer stack join it) is added to
    the sampler's ``kernel_totals`` (counter proc.native_tokenizer_cpu_s): the encode batching cannot remove."""
    st, kc, tot = iv.st, iv.kc, iv.tot
    iv.fp, iv.fx = 0.0, None
    if kc is not None:
        iv.s.kernel_totals.add(kc[1], iv.end - iv.prev, iv.e.faults)
        frac, ftok = 0.0, (1.0 if kc[0] == CLS_TOKENIZATION else 0.0)
        fnat = ftok
        if kc[0] == CLS_FAULTS:
            iv.fx = {CLS_FAULTS: 1.0}   # (split_interval: one class, laid by decided_class)
    elif tot:
        frac, ftok = iv.nc / tot, iv.nk / tot
        fnat = ftok
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
        fnat = ftok
        st.native_fresh = False
    elif st.native is not None:
        frac, ftok = st.native, st.native_tok
        fnat = ftok
    elif st.perf is not None:
        frac, ftok, fnat = 0.0, 0.0, 0.0
    else:
        frac, ftok, fnat = (1.0 if iv.gil_free else 0.0), 0.0, 0.0
    iv.frac, iv.ftok = frac, ftok
    if fnat > 0.0:        # the native tokenizer's own share (not the interpreter samples ftok took in above)
        iv.s.kernel_totals.add_native_tokenizer(int((iv.end - iv.prev) * fnat))
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
