"""Deciding a thread's pending sampler ticks from its perf IP samples (Sampler._resolve): the samples read from the
thread's perf ring, then the named rules of collect/rules.py (``decide``) - the class of each tick interval: its
off-CPU, run-queue and kernel parts, then the on-CPU rest split by the roles of the user-space IP samples in it."""
from __future__ import annotations

from .rules import decide  # noqa: F401 - the rules' driver (re-exported)
from .thread_state import PERF_PERIOD_NS, _ThreadState  # noqa: F401 - PERF_PERIOD_NS: set by replay.py


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
