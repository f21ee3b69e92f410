"""Driving the sampler's perf resolver (collect/resolve.py) on planted pending ticks and IP samples: one thread,
a fake perf ring, the runs it emits."""
from inferscope.collect import sampler as SM


class FakePerf:
    """Stands for perfip.PerfIP: ``read`` returns the planted (t_ns, role) samples once."""

    def __init__(self, samples):
        self.samples = samples

    def read(self, maps):
        out, self.samples = self.samples, []
        return out


def resolve_thread(samples, pend, cls0="user_code", native=None, py_last=None, sigobs=None):
    """Resolve ``pend`` (pending ticks) of one thread whose current class is ``cls0`` against ``samples``;
    ``sigobs``: the main thread's Python class at timer signals (sigframes.py).  Returns (emitted rows, sampler,
    thread state)."""
    buf = []
    s = SM.Sampler(buf, 200, {}, set())
    s._perf_maps = object()
    st = SM._ThreadState(tid=1, clk=None, cpu=0, t=0)
    st.cls, st.start, st.end = cls0, 0, 0
    st.native, st.native_fresh = native, native is not None
    st.py_last = py_last
    if sigobs is not None:
        st.sigobs = list(sigobs)    # (t_ns, Python class) at the main thread's timer signals
    st.perf = FakePerf(samples)
    st.pending = pend
    s._resolve(st)
    s._emit(st)
    return buf, s, st


def durations(buf) -> dict:
    """Class -> ns over the emitted rows."""
    dur = {}
    for ev in buf:
        dur[ev[5]] = dur.get(ev[5], 0) + ev[4] - ev[3]
    return dur
