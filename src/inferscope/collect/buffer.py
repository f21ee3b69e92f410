"""Bounded in-process ring buffer of events.

Events are small tuples appended from any thread (deque.append is atomic under the GIL):
  span:    (0, span_kind, tid, start_ns, end_ns, name, detail, cat)
  counter: (1, metric, device, ts_ns, value)
Capacity = INFERSCOPE_TRACE_SIZE_MB / BYTES_PER_EVENT.  BYTES_PER_EVENT is an estimate of the
resident size of one event (tuple of 8 + three fresh ints; strings are shared): ~200 bytes.
On overflow the oldest events are dropped; ``dropped`` counts them.
With ``journal=True`` (``inferscope run``) every event is also queued for the crash journal
(journal.py); ``take_new`` empties that queue (bounded by the same capacity).
"""
from __future__ import annotations

import collections
import itertools

BYTES_PER_EVENT = 200


class RingBuffer:
    def __init__(self, size_mb: float, journal: bool = False) -> None:
        self.capacity = max(16, int(size_mb * 1024 * 1024 / BYTES_PER_EVENT))
        self._d: collections.deque = collections.deque(maxlen=self.capacity)
        self._count = itertools.count()
        self._new: collections.deque | None = collections.deque(maxlen=self.capacity) if journal else None
        self.append = self._append_journal if journal else self._append

    def _append(self, ev: tuple) -> None:
        next(self._count)
        self._d.append(ev)

    def _append_journal(self, ev: tuple) -> None:
        next(self._count)
        self._d.append(ev)
        self._new.append(ev)

    def take_new(self) -> list:
        """Events appended since the previous call (oldest first); safe against concurrent appends."""
        q = self._new
        if q is None:
            return []
        pop = q.popleft
        return [pop() for _ in range(len(q))]

    @property
    def total(self) -> int:
        # itertools.count has no public value; its repr is 'count(N)'
        return int(repr(self._count)[6:-1])

    @property
    def dropped(self) -> int:
        return max(0, self.total - len(self._d))

    def snapshot(self) -> list:
        return list(self._d)  # one C call under the GIL: consistent

    def __len__(self) -> int:
        return len(self._d)
