"""Crash journal of a live run: what a SIGKILLed child leaves for the parent's report.

The child appends, every ``flush_interval_s``, the events collected since the previous flush and
a small metadata record to ``<trace>.journal`` (marshal records, O_APPEND).
A flush therefore costs time in proportion to the new events only (~1 ms), where writing a full
snapshot of the trace cost ~15 ms on the demo and grew with every event held (a 100 MB buffer
would stall the workload's GIL for about a second per flush).  At a normal exit the child writes
the final trace and removes the journal; after a SIGKILL the parent rebuilds the trace from it
(``load``).  A record cut by the kill is ignored.

Records (marshal, in order):  ("ev", [event, ...])  and  ("meta", {...})  (Session.journal_meta); a flush is
its events in records of at most ``JOURNAL_RECORD_EVENTS`` (thresholds.py), each marshalled and written on its
own, then its meta record: no flush or rewrite ever holds more than one record's bytes (a rewrite of a full
100 MB buffer was one ~26 MB bytes object plus a copy, and the heap grew at each rewrite).  A kill between
records leaves whole records and the previous flush's meta: ``load`` reads them.
Bounded on disk: when the journal holds more than ``REWRITE_FACTOR`` x the ring buffer's
capacity it is rewritten from the buffer's current content.
A followed child process ends its journal instead of writing a trace (session_trace.finalize_journal): its last
flush, with the final metadata, then renamed to ``<trace>.final`` (``final_path``), which the parent loads like a
journal.  Building a Trace imports numpy and the trace builder (~100 ms of CPU in a worker that never imported
numpy: 64 short-lived pool workers took ~10 s instead of ~0.8 s); the parent has them loaded.
"""
from __future__ import annotations

import marshal
import os

from ..errors import InferScopeError
from ..thresholds import JOURNAL_RECORD_EVENTS

SUFFIX = ".journal"
FINAL_SUFFIX = ".final"      # a child's complete journal (its final trace, built by the parent)
REWRITE_FACTOR = 2


def path_for(trace_path: str) -> str:
    return trace_path + SUFFIX


def final_path(trace_path: str) -> str:
    return trace_path + FINAL_SUFFIX


class JournalWriter:
    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = self._open(path)
        self.events = 0

    @staticmethod
    def _open(path: str) -> int:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o600)

    def _write(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]

    def _records(self, fd: int, events: list, meta: dict) -> None:
        """``events`` in records of at most JOURNAL_RECORD_EVENTS, then ``meta``, each marshalled and written alone."""
        n = JOURNAL_RECORD_EVENTS
        for i in range(0, len(events), n):
            self._write(fd, marshal.dumps(("ev", events[i:i + n])))
        self._write(fd, marshal.dumps(("meta", meta)))

    def append(self, events: list, meta: dict) -> None:
        self._records(self.fd, events, meta)
        self.events += len(events)

    def rewrite(self, events: list, meta: dict) -> None:
        """Replace the journal by ``events`` (the ring buffer's content) atomically."""
        tmp = self.path + ".tmp"
        fd = self._open(tmp)
        try:
            self._records(fd, events, meta)
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        os.replace(tmp, self.path)
        os.close(self.fd)
        self.fd = fd
        self.events = len(events)

    def close(self, remove: bool = False) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if remove:
            try:
                os.unlink(self.path)
            except OSError:
                pass


def read(path: str) -> tuple[list, dict | None, int]:
    """(events, last metadata record, number of records) from a journal; a cut tail is ignored."""
    events: list = []
    meta = None
    n = 0
    with open(path, "rb") as f:
        while True:
            try:
                rec = marshal.load(f)
            except (EOFError, ValueError, TypeError):
                break
            if not (isinstance(rec, tuple) and len(rec) == 2):
                break
            kind, body = rec
            if kind == "ev" and isinstance(body, list):
                events.extend(body)
            elif kind == "meta" and isinstance(body, dict):
                meta = body
            else:
                break
            n += 1
    return events, meta, n


def load(path: str):
    """Rebuild a Trace from a journal (the child was killed before writing its trace, or a followed child's
    complete journal, ``final_path``)."""
    from ..trace.builder import TraceBuilder  # lazy: the parent reads journals; the child's writer never needs numpy
    # lazy: the parent reads journals; the child's writer never needs numpy
    from .assemble import add_events, overflow_warning
    try:
        events, meta, _ = read(path)
    except OSError as e:
        raise InferScopeError(f"cannot read the collection journal {path}: {e.strerror or e}") from None
    if meta is None:
        raise InferScopeError(f"the collection journal {path} holds no complete record")
    cap = int(meta.get("capacity") or len(events) or 1)
    if len(events) > cap:
        events = events[-cap:]
    dropped = max(0, int(meta.get("total_events", 0)) - len(events))
    events = events + list(meta.get("open_runs") or [])
    b = TraceBuilder()
    add_events(b, events, pid=int(meta.get("pid", -1)), main_tid=meta.get("main_tid"),
               thread_names=meta.get("thread_names") or {}, idle_tids=meta.get("idle_tids") or ())
    tm = dict(meta.get("trace_meta") or {})
    coll = dict(tm.get("collection") or {})
    coll["dropped_events"] = dropped
    warnings = list(tm.get("warnings") or [])
    if dropped:
        warnings.append(overflow_warning(dropped, float(coll.get("trace_size_mb", 0) or 0), cap))
    tm["warnings"] = warnings
    tm["collection"] = coll
    b.meta.update(tm)
    trace = b.finalize()
    coll["events"] = int(trace.n_events)
    return trace
