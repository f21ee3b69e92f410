"""The interval one pending tick's rules decide (``Iv``) and the one way they lay a part (``put``): collect/rules.py
and collect/rules_perf.py."""
from __future__ import annotations

from .layout import as_tick


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
