"""perf_event set-up and adoption of the live sampler (a mixin of collect/sampler.py's Sampler): the main
thread's perf IP sampler opened in a short-lived side thread, then one per sampled thread (perfip.py)."""
from __future__ import annotations

import threading

from .perfip import Maps, PerfIP
from .thread_state import PERF_PERIOD_NS, PERF_STACK_BYTES, _ThreadState


class PerfMixin:
    """Sampler methods that open, enable and adopt the threads' perf IP samplers."""

    def _setup_perf(self) -> None:
        """Open the main thread's perf IP sampler (own short-lived thread; the sampler adopts it
        at its next tick and meanwhile decides by the GIL heuristic, so sampling starts at once)."""
        self.skip.add(threading.get_ident())
        try:
            main = PerfIP.open(self.main_tid, PERF_PERIOD_NS, PERF_STACK_BYTES)   # the system call releases the GIL
            if main is not None:
                maps = Maps()
                self._perf_main = main
                self.perf_stack = main.stack_bytes > 0
                self._PerfIP = PerfIP
                self._perf_maps = maps        # set last: the sampler adopts perf when it appears
        except Exception:
            self._perf_maps = self._perf_main = None
        self.perf_active = self._perf_maps is not None

    def _perf_enable(self, on: bool) -> None:
        for st in self.threads.values():
            if st.perf is not None:
                try:
                    st.perf.enable(on)
                except OSError:
                    pass

    def _open_perf(self, st: _ThreadState, off: bool) -> None:
        """Give a thread its perf IP sampler: the main thread's pre-opened one, else a new one."""
        if self._perf_main is not None and st.tid == self.main_tid:
            st.perf, self._perf_main = self._perf_main, None
        else:
            try:
                st.perf = self._PerfIP.open(st.tid, PERF_PERIOD_NS, PERF_STACK_BYTES)
            except Exception:
                st.perf = None
        if st.perf is not None and off:
            try:
                st.perf.enable(False)
            except OSError:
                pass
        if st.perf is not None and st.kst is not None:
            try:                          # its page faults from a perf counter from now on (kernel_time.py)
                st.kst.add_counter(st.tid)
            except (OSError, ValueError, IndexError):
                pass

    def _adopt_perf(self, off: bool) -> None:
        """perf became available: open it for the threads already being sampled."""
        for st in self.threads.values():
            if st.perf is None:
                self._open_perf(st, off)

    def _native_role(self):
        nt = self.native_threads
        return nt.active_role if nt is not None else None

