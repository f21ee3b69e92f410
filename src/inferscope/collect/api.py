"""Library API: scope(), mark(), mark_token(), serve_metrics(), and the collected trace inferscope.save_report() (app.py) analyses.

``with scope("name"):`` / ``@scope("name")`` records an ANNOTATION span on the calling thread
(nestable; the open-scope stack is per context, a ``contextvars.ContextVar`` holding an immutable tuple:
per thread, and per asyncio task, so overlapping scopes in concurrent tasks on one event loop each
close their own range), a torch ``record_function`` of the same name while InferScope's torch profiler
runs (so it nests with the ops), and an NVTX range when the ``nvtx`` package is installed (a
start/end range, not push/pop, so that overlapping tasks cannot pop each other's).  With
INFERSCOPE_ENABLED=0 everything is a no-op.

A request scope (``tokens=`` / ``batch=``) gets an id (``rid``) and the id of the request scope it is
nested in, in this context (``parent``); ``mark_token()`` and the generate() hook record the innermost
open request's id, so request accounting (analyze/llm.py) keeps one request per outermost range and
each token mark with its own request, also when requests overlap on one thread.

An exception (an ``Exception`` subclass) leaving a scope marks its range: ``"error":"<type name>"`` in the
detail JSON - the class name only, never the message (it may hold user data) - and counts in the live
``inferscope_scope_errors_total{scope,type}``; ``scope(..., cache_hit=True/False)`` records a prefix/KV-cache hit
or miss for the range (analyze/serving.py turns both into error and cache-hit rates).
"""
from __future__ import annotations

import contextvars
import functools
import itertools
import sys
import threading
import time

from . import session as _S
from .errname import error_name
from .layout import LONG_INTERVAL_TICKS

_open: contextvars.ContextVar = contextvars.ContextVar("inferscope_scopes", default=())
_rids = itertools.count(1)
_nvtx = None          # module, False when unavailable
_ANN = 8    # SpanKind.ANNOTATION (no trace import here: importing inferscope must stay light)
_MARK = 13  # SpanKind.MARK


def _get_nvtx():
    global _nvtx
    if _nvtx is None:
        try:
            import nvtx  # noqa: F401
            _nvtx = nvtx
        except Exception:
            _nvtx = False
    return _nvtx


MAX_CPU_MARKS = 256     # per thread between two sampler ticks (the sampler takes them at each tick)


# A scope edge reads every program thread's CPU clock, not only its own (~0.5 us each): where the sampler starves
# of the GIL, long intervals are cut at the window's edges for all threads (sampler._split_at_marks), not only
# for the thread in the scope - three spinning threads' CPU spread over 100-300 ms intervals that straddled the
# window read 75-156 % of a core for a true 98 % (zoo_gil, the all-threads view).  Always with up to
# ALWAYS_MARKED_THREADS other threads (the edge that opens the window comes before the sampler's first late
# tick: 3 runs of 3 at zoo_gil); with more, only while the sampler starves (a tick late in the last
# STARVED_MARK_NS, or none for LONG_INTERVAL_TICKS intervals now), at most MAX_MARKED_THREADS.
ALWAYS_MARKED_THREADS = 8
STARVED_MARK_NS = 1_000_000_000
MAX_MARKED_THREADS = 32


def _cpu_mark(s, ident: int, t_ns: int) -> None:
    """This thread's CPU clock at a scope edge, for the sampler (sampler._split_at_marks): ~0.3 us; and every
    other program thread's while the sampler starves."""
    marks = getattr(s, "cpu_marks", None)
    if marks is None:
        return
    m = marks.get(ident)
    if m is None:
        m = marks[ident] = []
    if len(m) < MAX_CPU_MARKS:
        m.append((t_ns, time.thread_time_ns()))
    smp = getattr(s, "sampler", None)
    if smp is None:
        return
    others = list(threading._active.values())
    if len(others) > ALWAYS_MARKED_THREADS + 1:
        at, last = smp.starved_at, smp.last_tick_ns
        if (at is None or t_ns - at > STARVED_MARK_NS) and \
                (last is None or t_ns - last <= LONG_INTERVAL_TICKS * smp.interval_ns):
            return
    elif len(others) < 2:
        return
    skip = getattr(s, "skip_idents", ())
    k = 0
    for th in others:
        oid = th.ident
        if oid == ident or oid in skip or oid is None:
            continue
        k += 1
        if k > MAX_MARKED_THREADS:
            break
        try:
            c = time.clock_gettime_ns(time.pthread_getcpuclockid(oid))
        except (OSError, OverflowError, AttributeError):
            continue
        m = marks.get(oid)
        if m is None:
            m = marks[oid] = []
        if len(m) < MAX_CPU_MARKS:
            m.append((t_ns, c))


class scope:
    """Context manager and decorator recording a named range."""

    __slots__ = ("name", "detail", "extra")

    def __init__(self, name: str, tokens: int | None = None, batch: int | None = None,
                 cache_hit: bool | None = None) -> None:
        """``tokens``/``batch``: this range is one request (or batch of requests) generating ``tokens``
        tokens per sequence for ``batch`` sequences; ``inferscope.mark_token()`` inside it times each token.
        ``cache_hit``: the engine's prefix/KV cache hit (True) or missed (False) for this range."""
        self.name = str(name)
        self.detail = None
        self.extra = None if cache_hit is None else f'"cache_hit":{"true" if cache_hit else "false"}'
        if tokens is not None or batch is not None:
            t = None if tokens is None else int(tokens)
            b = None if batch is None else int(batch)
            self.detail = f'"request":true,"generated_tokens":{"null" if t is None else t},"batch":{"null" if b is None else b}'

    def __enter__(self):
        s = _S._session or _S.get_or_start()
        st = _open.get()
        if s is None or s.finalized:
            _open.set(st + ((self, None),))
            return self
        ident = threading.get_ident()
        names = s.scope_stacks.get(ident)
        if names is None:
            names = s.scope_stacks[ident] = []
        s.scope_names.add(self.name)
        rf = None
        tp = s.torch
        if tp is not None and tp.prof is not None:
            try:
                from torch.autograd.profiler import record_function
                rf = record_function(self.name)
                rf.__enter__()
            except Exception:
                rf = None
        nv = _get_nvtx()
        rng = None
        if nv:
            try:
                if _in_task():
                    rng = ("end", nv.start_range(self.name))
                else:
                    nv.push_range(self.name)
                    rng = ("pop", None)
            except Exception:
                rng = None
        detail, rid = self.detail, None
        if detail is not None:
            parent = current_request()
            rid = next(_rids)
            detail = f'{{{detail},"rid":{rid},"parent":{"null" if parent is None else parent}}}'
        if self.extra is not None:
            detail = f'{{{self.extra}}}' if detail is None else f'{detail[:-1]},{self.extra}}}'
        names.append(self.name)
        t0 = time.perf_counter_ns()
        _cpu_mark(s, ident, t0)
        _open.set(st + ((self, (s, t0, rf, rng, detail, rid)),))
        return self

    def __exit__(self, et, ev, tb):
        t1 = time.perf_counter_ns()
        st = _open.get()
        k = len(st) - 1
        while k >= 0 and st[k][0] is not self:      # this object's innermost open entry in this context
            k -= 1
        if k < 0:
            return False
        ent = st[k][1]
        _open.set(st[:k] + st[k + 1:])
        if ent is None:
            return False
        s, t0, rf, rng, detail, _ = ent
        ident = threading.get_ident()
        _cpu_mark(s, ident, t1)
        names = s.scope_stacks.get(ident)
        if names:        # the sampler's per-thread view: drop this name's last entry (tasks may close out of order)
            for j in range(len(names) - 1, -1, -1):
                if names[j] == self.name:
                    del names[j]
                    break
        if rng is not None:
            try:
                if rng[0] == "pop":
                    _nvtx.pop_range()
                else:
                    _nvtx.end_range(rng[1])
            except Exception:
                pass
        if rf is not None:
            try:
                rf.__exit__(None, None, None)
            except Exception:
                pass
        err = error_name(et)
        if err is not None:
            detail = f'{{"error":"{err}"}}' if detail is None else f'{detail[:-1]},"error":"{err}"}}'
        s.buffer.append((0, _ANN, threading.get_native_id(), t0, t1, self.name, detail, "inferscope.scope"))
        m = s.metrics
        if m is not None:
            m.observe_scope(self.name, (t1 - t0) / 1e9)
            if err is not None:
                m.observe_error(self.name, err)
        return False

    def __call__(self, fn):
        name = self.name
        detail = self.detail

        @functools.wraps(fn)
        def wrapper(*a, **kw):
            sc = scope(name)
            sc.detail, sc.extra = detail, self.extra
            with sc:
                return fn(*a, **kw)
        return wrapper


def current_request() -> int | None:
    """The id of the innermost request scope open in this context (thread / asyncio task), else None."""
    for _, ent in reversed(_open.get()):
        if ent is not None and ent[5] is not None:
            return ent[5]
    return None


def _in_task() -> bool:
    """Inside a running asyncio task: NVTX push/pop is a per-thread stack that overlapping tasks would
    pop out of order, so there a start/end range is used."""
    aio = sys.modules.get("asyncio")
    if aio is None:
        return False
    try:
        return aio.current_task() is not None
    except RuntimeError:
        return False


def mark(name: str) -> None:
    """Record an instant event (MARK) on the calling thread."""
    s = _S._session or _S.get_or_start()
    if s is None or s.finalized:
        return
    t = time.perf_counter_ns()
    s.buffer.append((0, _MARK, threading.get_native_id(), t, t, str(name), None, "inferscope.mark"))


def mark_token() -> None:
    """Record that one output token (per sequence) was produced, on the calling thread: inside a
    ``scope(name, tokens=..., batch=...)`` range the first mark gives TTFT and the gaps between marks TPOT."""
    s = _S._session or _S.get_or_start()
    if s is None or s.finalized:
        return
    t = time.perf_counter_ns()
    rid = current_request()
    s.buffer.append((0, _MARK, threading.get_native_id(), t, t, "token", None if rid is None else f'{{"rid":{rid}}}',
                     "inferscope.token"))


def collected_trace(trace_path: str | None = None):
    """The trace collected so far and its session's configuration, for ``inferscope.save_report`` (app.py), or
    None when collection is off.  Library mode: stops collection (torch profiler included) first - the next scope()
    starts a new session; under ``inferscope run``: a snapshot, collection continues.  ``trace_path``: also saved
    there (.iscope)."""
    s = _S._session or _S.get_or_start()
    if s is None:
        return None
    if s.mode == "run" and not s.finalized:
        trace = s.build_trace(final=False)
    else:
        trace = s.finalize()
        _S.set_current(None)
    if trace_path:
        from ..trace import native  # lazy: only save_report() reads a trace back (numpy)
        native.save(trace, trace_path)
    return trace, s.cfg


def serve_metrics(port: int = 0, host: str = "127.0.0.1") -> int | None:
    """Serve live Prometheus metrics (``GET /metrics``) from this process: scope latency histograms,
    system/NVML counters, InferScope's own event counts.  Starts collection when needed.  Returns the
    bound port (``port=0``: a free one), or None when collection is disabled or the port is taken."""
    s = _S._session or _S.get_or_start()
    if s is None:
        return None
    srv = s.serve_metrics(host, port)
    return srv.port if srv is not None else None
