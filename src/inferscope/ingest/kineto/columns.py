"""Compact columns of the decoded Kineto events (``_Cols``), filled batch by batch, and the
conversions of JSON values to int64 columns (ids, args numbers)."""
from __future__ import annotations

import re
from itertools import compress
from operator import attrgetter

import numpy as np

from ...trace.kinds import SpanKind
from .categories import _CAT_KIND, _FLOW_FWDBWD_CATS, _GPU
from .decode import _Args, _EventSI, _Fallback
from .timestamps import _DUR_MAX_US, _FAST_TS_LIMIT, _TS_MAX_US, _ts_from_text

_INT_TAIL = re.compile(r"(-?\d+)\s*$")


def _to_int_slow(v) -> int:
    if v is None or isinstance(v, bool):
        return -1
    if isinstance(v, int):
        return _in_int64(v)
    if isinstance(v, float):
        return int(v) if v == v and abs(v) < 9e18 else -1
    if isinstance(v, str):
        s = v.strip()[:64]
        try:
            return _in_int64(int(s, 0))
        except ValueError:
            pass
        try:
            f = float(s)
            return int(f) if f == f and abs(f) < 9e18 else -1
        except ValueError:
            m = _INT_TAIL.search(s)
            return _in_int64(int(m.group(1))) if m else -1
    return -1


def _in_int64(v: int) -> int:
    return v if -(2 ** 63) <= v < 2 ** 63 else -1


def _int_col(values: list) -> np.ndarray:
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.fromiter((_to_int_slow(v) for v in values), dtype=np.int64, count=len(values))


def _int_col_of(seq: list, get, n: int) -> np.ndarray:
    """``_int_col(list(map(get, seq)))`` without the list when every value converts as is
    (np.fromiter converts exactly as np.array does, and raises where it raises)."""
    try:
        return np.fromiter(map(get, seq), dtype=np.int64, count=n)
    except (TypeError, ValueError, OverflowError):
        return _int_col(list(map(get, seq)))


_GET = {f: attrgetter(f) for f in ("ts", "dur", "args", "correlation", "ext_id", "device", "stream", "bytes",
                                    "kind", "input_dims", "input_type", "concrete")}
_A0 = _Args()
_SHAPE3 = attrgetter("input_dims", "input_type", "concrete")


def _first_seen_codes(d: dict, keys, n: int) -> np.ndarray:
    """Codes of ``n`` hashable ``keys`` (an iterable) in first-seen order; ``d`` (empty) receives the
    distinct keys in that order.  One C-level dict pass: each key is hashed once."""
    first = np.fromiter(map(d.setdefault, keys, range(n)), dtype=np.int64, count=n)  # index of its first event
    lut = np.empty(n, dtype=np.int32)
    lut[np.fromiter(d.values(), dtype=np.int64, count=len(d))] = np.arange(len(d), dtype=np.int32)
    return lut[first]


_KEY5 = attrgetter("ph", "cat", "name", "pid", "tid")


def _factorize(values: list) -> tuple[np.ndarray, list]:
    """codes (int32) and the distinct values in first-seen order (dict-based)."""
    uniq = list(dict.fromkeys(values))
    idx = {v: i for i, v in enumerate(uniq)}
    codes = np.fromiter(map(idx.__getitem__, values), dtype=np.int32, count=len(values))
    return codes, uniq


def _id_col(values) -> tuple[np.ndarray, np.ndarray]:
    """pid/tid column: ints stay; numeric strings parse; 'stream 7' -> 7;
    other strings ('Spans', '') get distinct negative ids <= -2 and are flagged named."""
    try:
        arr = np.array(values, dtype=np.int64)
        return arr, np.zeros(len(arr), bool)
    except (TypeError, ValueError, OverflowError):
        pass
    codes, uniq = _factorize(list(values))
    vals = np.empty(len(uniq), np.int64)
    named = np.zeros(len(uniq), bool)
    nxt = -2
    for i, u in enumerate(uniq):
        if isinstance(u, bool) or u is None:
            vals[i] = -1
        elif isinstance(u, int):
            vals[i] = u if -(2 ** 63) <= u < 2 ** 63 else -1
        elif isinstance(u, float):
            vals[i] = int(u) if u == u and abs(u) < 9e18 else -1
        else:
            s = str(u).strip()
            m = re.fullmatch(r"(?:[A-Za-z_ ]*?\s)?(-?\d{1,18})", s[:80])
            if m:
                vals[i] = int(m.group(1))
            else:
                vals[i] = nxt
                nxt -= 1
                named[i] = True
    return vals[codes], named[codes]


class _Lookup:
    """``x[i]`` = the i-th event's original value (factorised column)."""

    def __init__(self, uniq: list, codes: np.ndarray):
        self.uniq, self.codes = uniq, codes

    def __getitem__(self, i):
        return self.uniq[self.codes[i]]


class _Cols:
    """Compact columns of the decoded events, filled batch by batch (the Structs of a batch are
    dropped after ``add``).  Per-event numbers become numpy columns; strings are factorised with
    one dict per field in first-seen order (so the result does not depend on the batching);
    args are kept only where a later step reads them (metadata, instants, shapes, flow ids)."""

    _KEEP_ARGS = {"M", "i", "I"}
    _FLOW_PH = {"s", "f", "t"}

    def __init__(self):
        self.n = 0
        self.nread = 0            # (inflated) bytes the streamed decode read
        self.scan_bytes = 0       # bytes the streamed decode's key and cut scanners examined (tests: linear)
        self.d = {k: {} for k in ("ph", "cat", "name", "pid", "tid")}
        self.parts: dict[str, list] = {k: [] for k in ("row", "ts_f", "ts_i", "dur_f",
                                                        "corr", "ext", "device", "stream", "bytes", "ts_x",
                                                        "shape", "gpu")}
        self.ts_types: set = set()
        self.outer_ts = False     # a "ts" key outside traceEvents (streamed)
        self.insane = 0
        self.kind: dict = {}      # event index -> args.kind (not None)
        self.shapes: dict = {}    # distinct record_shapes details (bytes) -> code in the "shape" column
        self.margs: dict = {}     # event index -> args (M / i / I events)
        self.ids: dict = {}       # event index -> id (flow events)
        self._rows: dict = {}     # distinct (ph, cat, name, pid, tid) -> row of _row_codes
        # per field: its code in each row; per row: GPU side, CPU op, args kept, fwdbwd flow (room for
        # more rows than len(self._rows): _row_room)
        self._row_codes = [np.zeros(0, np.int32) for _ in self._KEYS]
        self._row_flags = np.zeros((4, 0), dtype=bool)
        self._scattered: set = set()   # GPU-only columns (device, stream, bytes) already made full columns
        self._shape_keys: dict = {}   # distinct record_shapes keys (_shape_codes) -> code in self.shapes or -1

    _KEYS = ("ph", "cat", "name", "pid", "tid")

    def _key_rows(self, events: list, raw) -> np.ndarray:
        """Row of each event's (ph, cat, name, pid, tid) in ``_row_codes`` (its code in each field's dict,
        first-seen order) and the per-row flags ``add`` reads.  One factorisation of the tuples;
        a field value is first seen in the first distinct tuple holding it, so every field's dict fills
        in the same first-seen order (and merges the same Python-equal values) as per field.  Tuples of
        earlier batches keep their row: only the new ones are looked at in Python."""
        cd: dict = {}
        codes = _first_seen_codes(cd, map(_KEY5, events), len(events))
        g = self._rows
        new = [c for c in cd if c not in g]
        if new:
            n0 = len(g)
            for c in new:
                g[c] = len(g)
            self._row_room(len(g))
            rows = self._row_codes
            for j, k in enumerate(self._KEYS):
                d = self.d[k]
                add = []
                for c in new:
                    v = c[j]
                    if v not in d:
                        d[v] = len(d)
                    add.append(d[v])
                rows[j][n0:len(g)] = add
            # pid / tid keep each event's original value (a track name may show it): float ids, which
            # would merge with equal ints in the factorisation, are left to the whole-file decode
            for k in ("pid", "tid"):
                if float in set(map(type, self.d[k])) and raw is not None:
                    raise _Fallback
            ph, cat = [c[0] for c in new], [c[1] for c in new]
            ckey = [c.strip().lower().replace(" ", "_") if isinstance(c, str) else "" for c in cat]
            side_kind = [_CAT_KIND.get(c, (None, 0)) for c in ckey]
            flags = np.array([[side == _GPU for _k, side in side_kind],         # device, stream, bytes, args.kind
                              [k == SpanKind.CPU_OP for k, _side in side_kind],  # record_shapes details
                              [v in self._KEEP_ARGS for v in ph],                 # args kept (M / i / I)
                              [v in self._FLOW_PH and isinstance(c, str) and k in _FLOW_FWDBWD_CATS
                               for v, c, k in zip(ph, cat, ckey)]], dtype=bool)  # fwdbwd flow ids
            self._row_flags[:, n0:len(g)] = flags
        return np.fromiter(map(g.__getitem__, cd), dtype=np.int32, count=len(cd))[codes]

    def _row_room(self, n: int) -> None:
        """Room for ``n`` rows in ``_row_codes`` / ``_row_flags`` (rows past ``len(self._rows)`` unused):
        doubled when short, so a trace whose every event is a new tuple copies them a few times in all,
        not once per batch (issue 44)."""
        cap = len(self._row_flags[0])
        if n <= cap:
            return
        cap = max(n, 2 * cap, 1024)
        for j, a in enumerate(self._row_codes):
            self._row_codes[j] = np.concatenate([a, np.zeros(cap - len(a), np.int32)])
        self._row_flags = np.concatenate([self._row_flags, np.zeros((4, cap - len(self._row_flags[0])), bool)], axis=1)

    def _shape_codes(self, al: list, is_op: np.ndarray) -> np.ndarray:
        """Code of each event's record_shapes detail in ``self.shapes`` (-1: none); ``is_op``: the CPU-op
        events (the only ones whose details are read). The (dims, types, concrete) triples are factorised
        in C-level passes; the detail text is built once per distinct triple, in first-seen order."""
        shape = np.full(len(al), -1, np.int32)
        sel = is_op.tolist()      # the ops' args by itertools.compress: no index list, no lookup per op
        if not any(map(_GET["input_dims"], compress(al, sel))):   # no record_shapes (empty Raw = missing key)
            return shape
        ops = np.flatnonzero(is_op)
        # one key per op: the three raw texts joined by \x01, which valid JSON text never holds (a control
        # character must be escaped inside a string), so distinct triples keep distinct keys; one
        # buffer-protocol join instead of three bytes() copies and a tuple
        kc: dict = {}
        codes = _first_seen_codes(kc, map(b"\x01".join, map(_SHAPE3, compress(al, sel))), len(ops))
        sd, gs = self.shapes, self._shape_keys
        for key in [k for k in kc if k not in gs]:    # keys of earlier batches keep their code
            d, t, c = key.split(b"\x01")
            gs[key] = sd.setdefault(b'{"dims":' + d + b',"types":' + (t or b"null") + b',"concrete":'
                                    + (c or b"null") + b"}", len(sd)) if d and d != b"null" else -1
        shape[ops] = np.fromiter(map(gs.__getitem__, kc), dtype=np.int32, count=len(kc))[codes]
        return shape

    def exact_ok(self) -> bool:
        return not self.outer_ts and all(x is not None for x in self.parts["ts_x"])

    def add(self, events: list, raw=None) -> None:
        n0, n = self.n, len(events)
        if not n:
            return
        P = self.parts
        row = self._key_rows(events, raw)
        P["row"].append(row)
        is_gpu, is_op, keep_args, fwdbwd = self._row_flags[:, row]
        # C-level passes (map + attrgetter + fromiter: the values np.array would make of the lists)
        ts_a = ts_l = None
        if type(events[0]) is _EventSI:   # streamed, every ts an int or missing: one int64 pass if none is missing
            try:
                ts_a = np.fromiter(map(_GET["ts"], events), dtype=np.int64, count=n)
            except (TypeError, ValueError, OverflowError):   # a missing ts (None), or beyond int64
                ts_a = None
        if ts_a is not None:
            types, ts_f = {int}, ts_a.astype(np.float64)
        else:
            ts_l = list(map(_GET["ts"], events))
            # one conversion that also tells the types (None makes an object array): int64 = every ts an
            # int, float64 = ints and floats (an int too big for int64 is out of range: insane below)
            ts_a = np.array(ts_l)
            if ts_a.dtype == np.int64:
                types, ts_f = {int}, ts_a.astype(np.float64)    # the floats fromiter would make of the ints
            elif ts_a.dtype == np.float64:
                types, ts_f, ts_a = {float}, ts_a, None
            else:
                types, ts_f, ts_a = None, np.fromiter(ts_l, dtype=np.float64, count=n), None  # None -> nan
        dur_f = np.fromiter(map(_GET["dur"], events), dtype=np.float64, count=n)
        # Times beyond these cannot be real and would overflow int64 nanoseconds downstream:
        # |ts| < 4e15 us (year ~2096 on an epoch clock), 0 <= dur < 1e12 us (11.6 days).
        insane = (~np.isnan(ts_f) & ~(np.abs(ts_f) < _TS_MAX_US)) | (~np.isnan(dur_f) & ~(np.abs(dur_f) < _DUR_MAX_US))
        if insane.any():
            self.insane += int(insane.sum())
            ts_f[insane] = np.nan
            if ts_l is None:
                ts_l = ts_a.tolist()
            for i in np.flatnonzero(insane).tolist():
                ts_l[i] = None
            types = ts_a = None
        if types is None:
            types = set(map(type, ts_l))
        self.ts_types |= types
        if types <= {int}:
            P["ts_i"].append(ts_a if ts_a is not None else np.array(ts_l, dtype=np.int64))
        elif types <= {int, type(None)}:
            P["ts_i"].append(np.array([0 if t is None else t for t in ts_l], dtype=np.int64))
        else:
            P["ts_i"].append(None)
        P["ts_f"].append(ts_f)
        # exact ns of epoch-us float timestamps need the text: read it from this batch now
        has = ~np.isnan(ts_f)
        x = None
        if raw is not None and has.any():
            if float not in types:
                x = P["ts_i"][-1] * 1000 if len(has) == int(np.count_nonzero(has)) else P["ts_i"][-1][has] * 1000
                P["ts_i"][-1] = None   # x holds the same times (one copy less of the biggest column)
            elif np.isfinite(ts_f[has]).all() and float(np.abs(ts_f[has]).max()) >= _FAST_TS_LIMIT:
                x = _ts_from_text(raw, ts_f[has])
        elif not has.any():
            x = np.zeros(0, np.int64)
        P["ts_x"].append(x)
        P["dur_f"].append(dur_f)
        args_l = list(map(_GET["args"], events))
        al = [a or _A0 for a in args_l] if None in args_l else args_l
        for k, f in (("corr", "correlation"), ("ext", "ext_id")):
            P[k].append(_int_col_of(al, _GET[f], n))
        # device, stream, bytes and args.kind are read for GPU-side spans only (_build): -1 / absent elsewhere
        gpu = np.flatnonzero(is_gpu)
        ga = list(compress(al, is_gpu.tolist())) if len(gpu) < n else al
        # kept for the GPU events only (their indices in "gpu"); col() scatters them into -1 columns
        P["gpu"].append(gpu + n0 if n0 else gpu)
        for k in ("device", "stream", "bytes"):
            P[k].append(_int_col_of(ga, _GET[k], len(ga)))
        kinds = list(map(_GET["kind"], ga))
        if kinds.count(None) != len(kinds):      # args.kind is rare (AMD memcpy): skip the scan without one
            for j in [j for j, k in enumerate(kinds) if k is not None]:
                self.kind[n0 + int(gpu[j])] = kinds[j]
        del kinds, ga
        # record_shapes details are read for CPU_OP spans only (_shape_details): look at ops only
        P["shape"].append(self._shape_codes(al, is_op))
        for i in np.flatnonzero(keep_args).tolist():
            self.margs[n0 + i] = args_l[i]
        # flow ids: only fwdbwd flows are paired by id (launch flows use the correlation)
        for i in np.flatnonzero(fwdbwd).tolist():
            self.ids[n0 + i] = events[i].id
        self.n += n

    _GPU_ONLY = ("device", "stream", "bytes")

    def col(self, k: str) -> np.ndarray:
        parts = self.parts[k]
        if k in self._GPU_ONLY and k not in self._scattered:
            # GPU events' values -> a full column, -1 elsewhere
            out = np.full(self.n, -1, dtype=np.int64)
            if parts:
                out[self.col("gpu")] = parts[0] if len(parts) == 1 else np.concatenate(parts)
            self._scattered.add(k)
            if self._scattered.issuperset(self._GPU_ONLY):
                self.parts["gpu"] = []
            self.parts[k] = [out]
            return out
        out = parts[0] if len(parts) == 1 else np.concatenate(parts)
        self.parts[k] = [out]
        return out

    def pop(self, k: str) -> np.ndarray:
        """The whole column, released from ``self`` (peak memory: _build drops each column once used).
        ph, cat, name, pid, tid: gathered from the one row column (freed with tid, the last one read)."""
        if k in self._KEYS:
            out = self._row_codes[self._KEYS.index(k)][self.col("row")]
            if k == "tid":
                self.parts["row"] = []
            return out
        out = self.col(k)
        self.parts[k] = []
        return out

    def uniq(self, k: str) -> list:
        return list(self.d[k])

    def id_col(self, k: str):
        """(int64 ids, named flags, original values) of pid/tid, as _id_col on the whole column."""
        uniq = list(self.d[k])
        mcodes, muniq = _factorize(uniq)          # Python-equal values merged, as in one list
        vals, named = _id_col(muniq)
        codes = self.pop(k)
        return vals[mcodes][codes], named[mcodes][codes], _Lookup(uniq, codes)
