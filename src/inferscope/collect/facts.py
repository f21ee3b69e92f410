"""What the live sampler observed, recorded so its decisions can be re-derived offline (replay.py).

The sampler decides each thread's classes from measured facts: per tick the interval's CPU-clock, run-queue,
page-fault and kernel readings, the stack's class and function (a ``layout.Tick``), the perf IP samples taken in
it with their library role, and the main thread's Python class at timer signals.  With facts kept
(``inferscope run --facts``, INFERSCOPE_FACTS=1) every input of the decision path is appended to a per-thread
event log, in the order the sampler used it:

Besides the logs: the process id, the sampler's interval and perf period, and the threads never seen on CPU.

  ("I", <state>)                      the thread's decision state when first seen (``STATE_FIELDS``)
  ("B", <observation>)                a tick's observations of the thread (``OBS_FIELDS``: its interval's measured
                                      parts, the stack's domain and function, the GIL and probe state): the inputs
                                      of the tick's rules (sampler_tick._tick_class, _queue)
  ("P", ns)                           run-queue time found at a tick for the pending ticks before it (owed_run_queue)
  ("F", ticks)                        the pending Ticks a thread's end laid (sampler_threads._finish)
  ("R", ticks, samples, sigobs, role, perf, clk, kst)
                                      a perf drain: the pending Ticks (a replay checks its own against them), the IP
                                      samples [(t_ns, role)], the signal
                                      classes [(t_ns, class, open)], the process's native-thread role, whether
                                      perf / the CPU clock were on, the kernel stats' (fault cost, kernel share)
  ("T", t, cls, label, clk)           a tick decided at once (its class known from the stack or off-CPU); with "B"
  ("K", t, label)                     a tick that keeps the current class     events these are checks, not inputs
  ("O", ns)                           run-queue time owed to the open 'waiting' run (layout.owed_run_queue)
  ("E",) / ("X",)                     the open run closed (a thread's end; X: the sampler's stop)

The log is written into the ``.iscope`` as ``facts.msgpack`` (FACTS_VERSION; a file without it loads as
before).  Recording only keeps references to what the sampler made anyway (the perf drain's sample lists), and
stops at thresholds.FACTS_MAX_ITEMS samples + ticks (the file then says ``truncated``: a replay needs all of
it).  Off (the default), the sampler's cost is one attribute test per drain and per decided tick.
"""
from __future__ import annotations

import os

from .. import thresholds as T
from ..errors import InputError

FACTS_VERSION = 2     # 2: the ticks' own observations ("B", "P", "F"); 1 (still read): the resolver's inputs only
MEMBER = "facts.msgpack"
# the decision state a thread's log starts with (thread_state._ThreadState slots the rules read or write)
STATE_FIELDS = ("start", "end", "cls", "label", "n", "lines", "on_cls", "on_label", "py_last", "pcpu", "pn",
                "native", "native_tok", "native_fresh", "last_fb", "prev_vol")
# what a tick observed (sampler_tick.tick_threads), the inputs of its own rules (_tick_class, _queue)
OBS_FIELDS = ("t", "prev_t", "mod", "dom", "label", "fair", "oncpu", "off", "rqn", "kf", "kns", "kblk", "kio",
              "first_iv", "marks", "cpu", "dcpu", "gil_free", "voluntary", "perf_pending", "torch_seen", "perf", "clk",
              "perf_off", "perf_on_at", "perf_at")


def enabled() -> bool:
    """Facts are kept for this process (INFERSCOPE_FACTS=1, set by ``inferscope run --facts``)."""
    return os.environ.get("INFERSCOPE_FACTS", "") == "1"


class FactLog:
    """The per-thread event logs of one sampler (module docstring)."""

    def __init__(self, interval_ns: int, perf_period_ns: int, max_items: int | None = None) -> None:
        self.interval_ns = int(interval_ns)
        self.perf_period_ns = int(perf_period_ns)
        self.logs: list = []          # [(tid, events)] in the order the threads were first seen
        self.items = 0
        self.max_items = T.FACTS_MAX_ITEMS if max_items is None else int(max_items)
        self.truncated = False

    def _log(self, st):
        ev = st.facts
        if ev is None:
            if self.truncated:
                return None
            lines = st.lines
            state = [getattr(st, f) for f in STATE_FIELDS]
            state[STATE_FIELDS.index("lines")] = list(lines.items())
            ev = st.facts = [("I", state)]
            self.logs.append((st.tid, ev))
        return ev

    def _count(self, k: int) -> bool:
        self.items += k
        if self.items > self.max_items:
            self.truncated = True
            return False
        return True

    def _append(self, st, ev: tuple, items: int = 0) -> None:
        """``ev`` appended to the thread's log; ``items`` ticks / samples count toward FACTS_MAX_ITEMS."""
        if self.truncated or (items and not self._count(items)):
            return
        log = self._log(st)
        if log is not None:
            log.append(ev)

    def drain(self, s, st, pend: list, samples: list) -> None:
        if self.truncated:
            return
        k = st.kst
        self._append(st, ("R", pend, samples, list(st.sigobs), s._native_role(), st.perf is not None,
                          st.clk is not None, None if k is None else (k.fault_cost(), k.kernel_share())),
                     len(pend) + len(samples))

    def tick(self, st, t: int, cls, label) -> None:
        self._append(st, ("T", t, cls, label, st.clk is not None), 1)

    def keep(self, st, t: int, label) -> None:
        self._append(st, ("K", t, label), 1)

    def obs(self, st, rec: tuple) -> None:
        self._append(st, ("B", *rec), 1)

    def owed_pending(self, st, ns: int) -> None:
        self._append(st, ("P", ns))

    def finish(self, st, ticks: list) -> None:
        self._append(st, ("F", list(ticks)))

    def owed(self, st, ns: int) -> None:
        self._append(st, ("O", ns))

    def close(self, st, stop: bool) -> None:
        self._append(st, ("X",) if stop else ("E",))

    def encode(self, pid: int, idle_tids=()) -> bytes:
        """The log as msgpack; ``idle_tids``: threads never seen on CPU, whose runs the trace leaves out
        (assemble.py) - and so does a replay."""
        import msgspec
        return msgspec.msgpack.encode({"version": FACTS_VERSION, "pid": int(pid), "idle_tids": sorted(idle_tids),
                                       "interval_ns": self.interval_ns,
                                       "perf_period_ns": self.perf_period_ns, "truncated": self.truncated,
                                       "items": self.items, "threads": self.logs})


def decode(blob: bytes, where: str = "facts") -> dict:
    """The facts of a ``.iscope`` (``MEMBER``) as a dict; bad input is an InputError (one line)."""
    import msgspec
    try:
        d = msgspec.msgpack.decode(blob)
    except (msgspec.DecodeError, ValueError, TypeError, RecursionError) as e:
        raise InputError(f"{where}: corrupt recorded facts ({' '.join(str(e).split())[:120]})") from None
    if not isinstance(d, dict) or not isinstance(d.get("threads"), list):
        raise InputError(f"{where}: corrupt recorded facts (no thread logs)")
    ver = d.get("version")
    if not isinstance(ver, int) or isinstance(ver, bool) or ver < 1:
        raise InputError(f"{where}: corrupt recorded facts (version is not a positive integer)")
    if ver > FACTS_VERSION:
        raise InputError(f"{where}: recorded facts version {ver} is newer than this InferScope reads ({FACTS_VERSION})")
    for k in ("pid", "interval_ns", "perf_period_ns"):
        if not isinstance(d.get(k), int) or isinstance(d.get(k), bool):
            raise InputError(f"{where}: corrupt recorded facts ({k} is not an integer)")
    return d
