"""TraceBuilder: importers and collectors append column chunks, then finalize().

finalize() concatenates, sorts spans by (start_ns, -end_ns), remaps flow
endpoints to the sorted order, and computes per-track nesting (depth, parent)
with vectorised searchsorted (no per-event Python).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .kinds import SpanKind, TrackKind
from .model import (COUNTER_COLUMNS, SPAN_COLUMNS, SPAN_DEFAULTS,
                    Counters, Flows, Spans, Trace, Tracks, codes_in)
from .strings import StringTable


class TraceBuilder:
    def __init__(self, strings: StringTable | None = None) -> None:
        self.strings = strings if strings is not None else StringTable()
        self._track_index: dict[tuple, int] = {}
        self._tracks: dict[str, list] = {"kind": [], "pid": [], "tid": [], "device": [], "name": []}
        self._span_chunks: list[dict[str, np.ndarray]] = []
        self._n_spans = 0
        self._flow_chunks: list[dict[str, np.ndarray]] = []
        self._counter_chunks: list[dict[str, np.ndarray]] = []
        self.meta: dict[str, Any] = {}

    # ---- tracks ------------------------------------------------------------
    def track(self, kind: TrackKind, pid: int = -1, tid: int = -1, device: int = -1, name: str = "") -> int:
        key = (int(kind), int(pid), int(tid), int(device), name if kind == TrackKind.COUNTER else "")
        i = self._track_index.get(key)
        if i is None:
            i = len(self._tracks["kind"])
            self._track_index[key] = i
            self._tracks["kind"].append(int(kind))
            self._tracks["pid"].append(int(pid))
            self._tracks["tid"].append(int(tid))
            self._tracks["device"].append(int(device))
            self._tracks["name"].append(self.strings.intern(name) if name else -1)
        elif name and self._tracks["name"][i] < 0:
            self._tracks["name"][i] = self.strings.intern(name)
        return i

    def name_track(self, track: int, name: str) -> None:
        self._tracks["name"][track] = self.strings.intern(name)

    @property
    def n_tracks(self) -> int:
        return len(self._tracks["kind"])

    def track_rows(self) -> dict[str, list]:
        return self._tracks

    # ---- spans -------------------------------------------------------------
    def add_spans(self, **cols) -> np.ndarray:
        """Append a chunk of spans; returns their provisional indices (for flows).

        Required: start_ns, end_ns, track, kind, name.  Others default.
        Scalars broadcast.
        """
        n = None
        for k in ("start_ns", "end_ns", "track", "kind", "name"):
            v = cols.get(k)
            if v is not None and np.ndim(v) > 0:
                n = len(v)
                break
        if n is None:
            raise ValueError("add_spans needs at least one array column")
        chunk = {}
        for k, dtype in SPAN_COLUMNS.items():
            v = cols.get(k, SPAN_DEFAULTS.get(k))
            if v is None:
                raise ValueError(f"add_spans: missing {k}")
            if np.ndim(v) == 0:
                chunk[k] = np.full(n, v, dtype=dtype)
            else:
                a = np.asarray(v, dtype=dtype)
                if len(a) != n:
                    raise ValueError(f"add_spans: column {k} length {len(a)} != {n}")
                chunk[k] = a
        unknown = set(cols) - set(SPAN_COLUMNS)
        if unknown:
            raise ValueError(f"add_spans: unknown columns {sorted(unknown)}")
        self._span_chunks.append(chunk)
        first = self._n_spans
        self._n_spans += n
        return np.arange(first, first + n, dtype=np.int64)

    def add_flows(self, src, dst, kind) -> None:
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        k = np.broadcast_to(np.asarray(kind, dtype=np.uint8), src.shape)
        self._flow_chunks.append({"src": src, "dst": dst, "kind": np.array(k)})

    def add_counters(self, track, ts_ns, value) -> None:
        ts = np.asarray(ts_ns, dtype=np.int64)
        tr = np.broadcast_to(np.asarray(track, dtype=np.int32), ts.shape)
        self._counter_chunks.append({"track": np.array(tr), "ts_ns": ts,
                                     "value": np.asarray(value, dtype=np.float64)})

    # ---- finalize ----------------------------------------------------------
    def finalize(self, compute_nesting: bool = True, release: bool = False) -> Trace:
        """``release``: hand the span chunks over (the builder is not used again), so that the
        peak is one copy of the span table plus one column (big Kineto traces, issue 13)."""
        tracks = Tracks(**{k: np.asarray(v) for k, v in self._tracks.items()}) if self.n_tracks else Tracks.empty()
        # one column at a time (with release=True the chunks are freed as they are used)
        chunks = self._span_chunks
        if release:
            self._span_chunks = []
        cols = {}
        for k, dtype in SPAN_COLUMNS.items():
            parts = [c.pop(k) if release else c[k] for c in chunks]
            cols[k] = parts[0] if len(parts) == 1 else \
                np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
            del parts
        del chunks
        if (cols["end_ns"] < cols["start_ns"]).any():  # never emit negative durations
            cols["end_ns"] = np.maximum(cols["end_ns"], cols["start_ns"])  # new array: chunks may be the caller's
        order = span_order(cols["start_ns"], cols["end_ns"])
        for k in list(cols):
            cols[k] = cols[k][order]
        spans = Spans(**cols)
        # flows: provisional index -> sorted position
        if self._flow_chunks:
            inv = np.empty(len(order), dtype=np.int64)
            inv[order] = np.arange(len(order))
            fsrc = np.concatenate([c["src"] for c in self._flow_chunks])
            fdst = np.concatenate([c["dst"] for c in self._flow_chunks])
            fkind = np.concatenate([c["kind"] for c in self._flow_chunks])
            ok = (fsrc >= 0) & (fdst >= 0) & (fsrc < len(order)) & (fdst < len(order))
            flows = Flows(src=inv[fsrc[ok]], dst=inv[fdst[ok]], kind=fkind[ok])
        else:
            flows = Flows.empty()
        counters = assemble_counters(self._counter_chunks)
        trace = Trace(strings=self.strings, tracks=tracks, spans=spans, flows=flows,
                      counters=counters, meta=dict(self.meta))
        if compute_nesting:
            compute_depth_parent(trace)
        return trace


def span_order(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``np.lexsort((-end, start))`` (by start, then longest first, then input order), in less time:
    one stable argsort of start, then a lexsort of only the spans whose start is shared (issue 26)."""
    o = np.argsort(start, kind="stable")
    if len(o) < 2:
        return o
    s = start[o]
    t = np.flatnonzero(s[1:] == s[:-1])
    del s
    if len(t):
        m = np.zeros(len(o), dtype=bool)
        m[t] = True
        m[t + 1] = True
        pos = np.flatnonzero(m)              # every position in a run of equal starts (whole runs)
        del m
        sub = o[pos]                         # each run in input order (stable argsort)
        o[pos] = sub[np.lexsort((-end[sub], start[sub]))]
    return o


def compute_depth_parent(trace: Trace) -> None:
    """Fill spans.depth / spans.parent for host tracks (CPU threads).

    For properly nested intervals sorted by (start, -end), the depth of span i
    is the number of earlier spans still open at start_i = i - #(end_j <= start_i).
    The parent is the latest earlier span at depth-1.  Improperly nested input
    (overlapping siblings) gets a best-effort answer, never an error.

    Spans that are not part of a call stack are left out (depth 0, parent -1): STEP ranges
    (ProfilerStep#N opens inside profiler.step() and outlives it), marks, and CPU samples.
    """
    s = trace.spans
    n = len(s)
    depth = np.zeros(n, dtype=np.int16)
    parent = np.full(n, -1, dtype=np.int32)
    if n:
        host = (trace.tracks.kind[s.track] == TrackKind.CPU_THREAD) & \
            ~codes_in(s.kind, [SpanKind.STEP, SpanKind.MARK, SpanKind.CPU_SAMPLE])
        idx_host = np.flatnonzero(host)
        if len(idx_host):
            tr = s.track[idx_host]
            o = np.argsort(tr, kind="stable")  # stable keeps (start,-end) order inside a track
            idx_sorted = idx_host[o]
            tr_sorted = tr[o]
            bounds = np.flatnonzero(np.diff(tr_sorted)) + 1
            for grp in np.split(idx_sorted, bounds):
                st = s.start_ns[grp]
                en = s.end_ns[grp]
                ends_sorted = np.sort(en)
                closed = np.searchsorted(ends_sorted, st, side="right")
                d = np.arange(len(grp)) - closed
                np.clip(d, 0, 32767, out=d)
                depth[grp] = d
                # the positions of each depth, ascending: one stable (radix) sort of the depths instead
                # of two passes over the group per level
                by_d = np.argsort(d.astype(np.int16), kind="stable")
                cut = np.concatenate(([0], np.cumsum(np.bincount(d))))
                for lvl in range(1, len(cut) - 1):
                    child = by_d[cut[lvl]:cut[lvl + 1]]
                    cand = by_d[cut[lvl - 1]:cut[lvl]]
                    if len(child) == 0 or len(cand) == 0:
                        continue
                    pos = np.searchsorted(cand, child) - 1
                    ok = pos >= 0
                    parent[grp[child[ok]]] = grp[cand[pos[ok]]]
    s.depth = depth
    s.parent = parent


def assemble_counters(chunks: list) -> Counters:
    """Counter chunks ({track, ts_ns, value} arrays) -> one Counters table sorted by (track, ts_ns)."""
    if not chunks:
        return Counters.empty()
    cc = {k: np.concatenate([c[k] for c in chunks]) for k in COUNTER_COLUMNS}
    o = np.lexsort((cc["ts_ns"], cc["track"]))
    return Counters(**{k: v[o] for k, v in cc.items()})
