"""Deciding a thread's pending sampler ticks from its perf IP samples (Sampler._resolve): the class of
each tick interval - its off-CPU, run-queue and kernel parts, then the on-CPU rest split by the roles
of the user-space IP samples taken in it (collect/sampler.py explains the rules)."""
from __future__ import annotations

from .. import thresholds as T
from . import kernel_time as K
from .perfip import COMPUTE, OTHER, PYTHON, TOKENIZER
from .layout import as_tick
from .thread_state import (CLS_COMPUTE, CLS_FRAMEWORK, CLS_RUNQ, CLS_TOKENIZATION, CLS_WAITING, KEEP, PERF_PERIOD_NS,
                           PY_CLASSES,
                           _ThreadState, perf_kernel_share)


def read_samples(s, st: _ThreadState) -> list:
    """The thread's perf IP samples since the last drain, [(t_ns, role)] oldest first ([] without perf)."""
    if st.perf is not None and s._perf_maps is not None:
        try:
            return st.perf.read(s._perf_maps)
        except (OSError, ValueError, IndexError):   # a closed/unmapped ring: no verdicts
            return []
    return []


def resolve(s, st: _ThreadState) -> None:
    """Decide the pending ticks of one thread from its perf IP samples (read now), in order (``decide``)."""
    pend = st.pending
    if not pend:
        return
    st.pending = []
    decide(s, st, pend, read_samples(s, st))


def decide(s, st: _ThreadState, pend: list, samples: list) -> None:
    """Decide the pending ticks ``pend`` (layout.Tick) of one thread from its perf IP ``samples``, in order.

    Reads the thread's state and, from the sampler ``s``, only ``_native_role()``, ``interval_ns`` and
    ``kernel_totals``; writes runs through ``s._apply`` - so a recorded call replays offline (facts.py).

    A tick whose class needs the native verdict (cls None) covers the interval since the
    previous tick; the fraction f of the IP samples taken in it that fell in torch's libraries
    splits it: the first f of the interval is cpu_compute, the rest framework.  Splitting (not
    a majority vote) keeps the estimate unbiased: a vote turns a 70 % native interval into
    100 %, and the more samples per tick the stronger that pull (measured on the demo's
    generate(): 65 % -> 87 % cpu_compute as the perf period went from 1 per tick to 5 per
    tick).  With no sample in the interval the thread's last fraction holds; without perf,
    the GIL heuristic (gil_free) decides the whole interval.
    """
    i, n = 0, len(samples)
    prev = st.end
    for e in pend:
        e = as_tick(e)
        t, cls, label, fallback, gil_free, off = e[:6]
        while i < n and samples[i][0] <= prev:
            i += 1
        # the Python class of the tick before this one (its frame's domain), and the interval's midpoint: the
        # interpreter samples of its first half ran nearer that tick than this one (split_python below)
        py_prev = st.py_last
        st.py_last = fallback if cls is None else (cls if cls in PY_CLASSES else None)
        mid = prev + (t - prev) // 2
        if cls is KEEP:
            cls = st.cls or CLS_FRAMEWORK     # (a pending KEEP always follows a decided tick)
        # the off-CPU part of the interval: first (off > 0) or last (off < 0); then the run-queue
        # part (e.rq ns, runnable: waiting for a CPU); the on-CPU part [prev, end] is
        # classified below, with exact boundaries
        end = t
        if off > 0:
            prev = prev + off
            s._apply(st, prev, CLS_WAITING, None, exact=True)
        elif off < 0:
            end = t + off
        rq = e.rq
        if 0 < rq < end - prev:
            prev = prev + rq
            s._apply(st, prev, CLS_RUNQ, None, exact=True)
        kf = e.faults                            # page faults of the interval (kernel_time.py)
        kns = e.kernel_ns                        # its kernel-mode CPU time (stime carry)
        kx = False                               # a kernel part was placed: exact boundaries
        kb = e.blocked                           # blocked in this interval or the previous one (2: in I/O)
        pc = e.perf_cpu_ns                       # its CPU time, where perf sampled all of the interval
        tk = e.tick                              # the tick's function counts (the last of _pieces only)
        pz = e.piece                             # a piece of a long interval (_pieces)
        if pc >= 0 and st.perf is not None:
            j = i
            while j < n and samples[j][0] <= t:
                j += 1
            d = 1.0 - min(1.0, pc / T.KERNEL_PERF_SHARE_CPU_NS)
            st.pcpu = st.pcpu * d + pc
            st.pn = st.pn * d + (j - i)
        # blocked in an I/O call (the probe saw it), or blocked with no user-space IP sample in the interval (perf
        # saw no user code run: its kernel CPU is the blocking call's - an O_DIRECT read of ~90 us the probe's
        # tick missed, with one fault and the GIL free, read as cpu_compute: 2-8 % of zoo_disk_io's window in 8
        # of 16 runs): a few faults are the call's buffer's (thresholds.KERNEL_FAULTS_BLOCKED_MIN) - unless its last
        # samples were native code (a Rust tokenizer's allocations: their kernel CPU is the tokenizer's)
        j = i
        while j < n and samples[j][0] <= t:
            j += 1
        kio = kb == 2 or (bool(kb) and st.perf is not None and j == i and not (
            st.native_fresh and ((st.native or 0) >= 0.5 or (st.native_tok or 0) >= 0.5)))
        kr = K.kernel_class(kf, bool(kb), False, fallback, CLS_COMPUTE, CLS_WAITING, kio)
        if kr is not None and kr[1] == K.IO and end > prev and st.perf is not None:
            # the on-CPU time the interval's user-space IP samples leave uncovered (each stands for
            # PERF_PERIOD_NS) is kernel time too - all of it when the thread's blocking call was an
            # I/O call (blocking.py probe), else at its recent kernel share (thresholds.
            # KERNEL_SHARE_DECAY): a system call's CPU (openat O_CREAT, a write's submission) is
            # often all of a short on-CPU part, before stime reports it
            j = i
            while j < n and samples[j][0] <= t:
                j += 1
            share = 1.0 if kb == 2 else max(st.kst.kernel_share() if st.kst is not None else 0.0,
                                            perf_kernel_share(st.pcpu, st.pn))
            if pz:
                # a piece: its expected value - per piece the uncovered time is mostly all of its CPU (no sample
                # in a ~1 ms part) or none, and only the positive ones counted: zoo_gil lost 20-40 % of its
                # loop's CPU to 'waiting' this way
                kns = max(kns, int((end - prev) * share * share))
            else:
                kns = max(kns, int((end - prev - (j - i) * PERF_PERIOD_NS) * share))
        if kr is not None and kr[1] == K.IO and end > prev and kns > 0:
            # blocked, no faults: the kernel CPU of the call it waited in is part of the I/O wait
            # (thresholds.KERNEL_*), next to the off-CPU part - after it (off > 0), or before it
            # (off < 0: the tail below)
            k = min(kns, end - prev)
            s.kernel_totals.add(K.IO, k, 0)
            if off < 0:
                end -= k
            else:
                prev += k
                s._apply(st, prev, CLS_WAITING, None, exact=True)
            if end <= prev:
                if t > prev:
                    s._apply(st, t, CLS_WAITING, None, exact=True)
                prev = t
                continue
        if cls is None:
            # samples in libc / the loader / unknown extensions (OTHER) are helpers of whatever
            # runs (a Rust tokenizer's malloc/memcpy: 316 of 1011 samples measured): the native
            # library's sampled right before them, else the mix of the classified ones (compute,
            # tokenizer, interpreter) of the interval
            nc = nk = tot = no = ne = 0
            last = None      # the kind of the interval's last native sample (None after an interpreter sample)
            # the main thread's Python class at timer signals (sigframes.py): each interpreter sample takes the
            # one nearest to it, where one is within a signal period - else the tick nearer to it (mid)
            obs, oj, near = st.sigobs, 0, s.interval_ns
            xc = None        # interpreter samples by a signal's class that is neither tick's
            while i < n and samples[i][0] <= t:
                k = samples[i][1]
                if k == OTHER:
                    # a libc sample right after a native library's in the interval is that code's helper (the
                    # Rust tokenizer's malloc and its free() of the Encodings it dropped, a torch op's memset):
                    # it takes that kind, not the interval's mix - a forward's libc spread over a tokenizer's
                    # interval read zoo_hf_tokenizer's tokenization as cpu_compute (bench/README.md).  After an
                    # interpreter sample it follows the mix: Python's small objects are the interpreter's own
                    # allocator's, and a loop of small numpy calls spends its libc time in numpy (zoo_numpy_mlp
                    # lost 4-7 points of cpu_compute when libc followed the interpreter sample before it)
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
            fp = 0.0     # the interval's share of interpreter time that was the previous tick's Python class
            fx = None    # ... and of a third Python class (xc)
            kc = None
            if kf and st.perf is not None:
                # each user-space IP sample stands for PERF_PERIOD_NS of user time: the on-CPU time
                # they leave uncovered is kernel time too (unbiased on average; per interval the
                # larger of the two estimates - faults x cost comes from a learnt mean cost)
                # - at most KERNEL_FAULT_COST_SPREAD times the thread's cost per fault each: one fault in a
                # 5.7 ms interval that held one sample gave 1.7 ms of "kernel time" (zoo py_between_ops_1.7ms:
                # 10-20 ms of its Python loop read cpu_compute per run)
                cap = int(kf * (st.kst.fault_cost() if st.kst is not None else T.KERNEL_FAULT_NS_PRIOR)
                          * T.KERNEL_FAULT_COST_SPREAD)
                kns = max(kns, min(cap, end - prev - (tot + no) * PERF_PERIOD_NS))
            if kf and (not tot or kns > 0):
                # page faults: the kernel's memory work for the code that faulted (kernel_time.kernel_class,
                # thresholds.KERNEL_*), not the previous verdict.  Native code faulted when the interval
                # or the thread's next user-space sample (drained with it) is in numeric libraries, the
                # GIL was free at the tick, or its last verdict was compute
                native = (nc > 0 or gil_free or (i < n and samples[i][1] == COMPUTE)
                          or (st.native_fresh and (st.native or 0) >= 0.5))
                kc = K.kernel_class(kf, bool(kb), native, fallback, CLS_COMPUTE, CLS_WAITING, kio)
                if kc is not None and kc[1] != K.FAULTS:
                    kc = None                      # (the I/O part was placed above)
                elif kc is not None and kc[0] == CLS_COMPUTE and (
                        nk > nc or (i < n and samples[i][1] == TOKENIZER)
                        or (not nc and st.native_fresh and (st.native_tok or 0) >= 0.5)
                        or (not nc and not nk and s._native_role() == TOKENIZER)):
                    # the native code that faulted is a tokenizer's (a Rust tokenizer runs with the GIL
                    # free): its memory work is tokenization (zoo_tokenizers serial read 75-79 % vs 91 %
                    # true when it went to cpu_compute)
                    kc = (CLS_TOKENIZATION, kc[1])
                if tot and kc is not None:
                    # user-space samples too: the kernel part (stime carry) first, by the rule; the
                    # rest below by the samples
                    k = min(kns, end - prev)
                    s.kernel_totals.add(kc[1], k, kf)
                    if k > 0:
                        prev += k
                        kx = True
                        s._apply(st, prev, kc[0], label, exact=True, tick=tk)
                    kc = None
            if kc is not None:
                s.kernel_totals.add(kc[1], end - prev, kf)
                # (the rule's class: native memory work is compute, or a tokenizer's - that one read as the
                # stack's class, user code: 9 of 24 ms of zoo_tokenizers' misread user code)
                frac, ftok = (1.0 if kc[0] == CLS_COMPUTE else 0.0), (1.0 if kc[0] == CLS_TOKENIZATION else 0.0)
            elif tot:
                frac, ftok = nc / tot, nk / tot
                st.native, st.native_tok = frac, ftok
                st.native_fresh = True
                if ne and py_prev is not None and py_prev != fallback:
                    # the thread ran Python of two classes in the interval (the tick before it in a
                    # tokenizer's Python, this one at the forward's first GIL release): its interpreter samples
                    # of the first half take the class of the tick before, not all the later one's
                    # (zoo_hf_tokenizer: transformers' Python read framework, +5-7 points)
                    fp = ne / tot
                    if py_prev == CLS_TOKENIZATION:
                        ftok, fp = ftok + fp, 0.0
                if xc:
                    fx = {}
                    for c_, n_ in xc.items():
                        if c_ == CLS_TOKENIZATION:
                            ftok += n_ / tot
                        else:
                            fx[c_] = n_ / tot
            elif no:
                # only libc / unknown-library samples: the helpers of the previous interval's mix
                # when it had classified samples (a tokenizer's malloc), else the stack's class
                # (hashlib in libcrypto after a tokenizer phase is user code, not what came before).
                # While the process's native threads run a native tokenizer (Rayon's encode_batch),
                # the thread that waits for them spends its on-CPU moments in libc on the same work:
                # tokenization, not the mix of the model step before it (zoo_tokenizers --parallel:
                # 32 ms of the main thread read cpu_compute, +15 points)
                if s._native_role() == TOKENIZER:
                    frac, ftok = 0.0, 1.0
                elif st.native_fresh and st.native is not None:
                    frac, ftok = st.native, st.native_tok
                else:
                    frac, ftok = 0.0, 0.0
                st.native_fresh = False
            elif st.native is not None:
                frac, ftok = st.native, st.native_tok   # no new IP sample: keep the last fractions
            elif st.perf is not None:
                # perf is on and has never sampled this thread in user space: its CPU so far went to
                # the kernel (I/O system calls) or was too short for a sample - not native compute
                # (the GIL heuristic read a disk-I/O loop's post-syscall time as 31-56 % cpu_compute)
                frac, ftok = 0.0, 0.0
            else:
                frac, ftok = (1.0 if gil_free else 0.0), 0.0
            # the interval's own samples decided it: its class starts at the interval's start, as a split's
            # parts do - not at the midpoint since the tick before (the rule for a class seen at a tick), which
            # gave the last part of a split interval before it (the stack's class) half of this one: 2.6 ms of
            # user code at each Rust encode_batch's second interval, zoo_tokenizers serial's +4-10 points of
            # user code (-> +1-2, the same runs' ticks and samples laid both ways).  Not where the fault rule
            # decided it (kc): where a page-touching phase began in it is unknown, the midpoint stays
            # (zoo_pagefault's user code -3.3..-4.1 points when exact, +0.7..+3.8 as before)
            kx = kx or (kc is None and tot + no > 0)
            if frac >= 1.0:
                cls = CLS_COMPUTE
            elif ftok >= 1.0:
                cls = CLS_TOKENIZATION
            elif frac <= 0.0 and ftok <= 0.0 and fp <= 0.0 and not fx:
                cls = fallback
            elif fx and max(fx.values()) >= 1.0:
                cls = max(fx, key=fx.get)
            else:
                # the previous tick's Python class first, then compute, then native tokenization, then the
                # stack's class; each part names the tick's function (its time is the function's, whatever the
                # class)
                dt = end - prev
                if fp > 0.0:
                    prev += int(dt * fp)
                    s._apply(st, prev, py_prev, label, exact=True, tick=tk)
                    dt = end - prev
                    frac, ftok = (frac / (1.0 - fp), ftok / (1.0 - fp)) if fp < 1.0 else (0.0, 0.0)
                    if fx:
                        fx = {c_: (f_ / (1.0 - fp) if fp < 1.0 else 0.0) for c_, f_ in fx.items()}
                a = prev + int(dt * frac)
                b = a + int(dt * ftok)
                if a > prev:
                    s._apply(st, a, CLS_COMPUTE, label, exact=True, tick=tk)
                if b > a:
                    s._apply(st, b, CLS_TOKENIZATION, label, exact=True, tick=tk)
                for c_, f_ in (fx or {}).items():
                    e_ = min(end, b + int(dt * f_))
                    if e_ > b:
                        s._apply(st, e_, c_, label, exact=True, tick=tk)
                        b = e_
                if end > b:
                    s._apply(st, end, fallback, label, exact=True, tick=tk)
                if t > end:
                    s._apply(st, t, CLS_WAITING, None, exact=True)
                prev = t
                continue
        # (exact also next to an off-CPU interval: pending, a tick off CPU for all of it is known so by the
        # thread's CPU clock - the midpoint gave half of it to the class before, as in the tick loop)
        s._apply(st, end, cls, label, exact=bool(off) or rq > 0 or kx or (st.clk is not None and (
                    cls is CLS_WAITING or st.cls is CLS_WAITING or st.cls is CLS_RUNQ)), tick=tk)
        if t > end:
            s._apply(st, t, CLS_WAITING, None, exact=True)
        prev = t
