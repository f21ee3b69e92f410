"""CUPTI activity records out of cupti-python's buffer callback at numpy speed.

The callback runs on CUPTI's thread and holds the GIL while it runs, so every microsecond spent
per record there is taken from the workload's own Python threads.  Reading 17 attributes per
record into a tuple cost 1.9 us per record on an H200 host (192-200 ms of GIL for a 102k-launch
loop, bench/README.md "CUPTI record decoding").  Here the callback reads only each record's
``kind`` and ``ptr`` (cupti-python's objects wrap the record's C struct; 0.07 us per record), then
copies the records' bytes with one vectorised gather per kind and buffer into packed numpy arrays
of the ROW_FIELDS, using cupti-python's own numpy dtype of the record's struct
(``ActivityKernel11`` -> ``activity_kernel11_dtype``).  Kernel names are C string pointers in the
record: each distinct pointer is read once (``ctypes.string_at``) while the buffer is alive.

Safety: the first record of each kind is decoded both ways (gather and attributes); a kind whose
values differ, or objects without ``ptr``/a known dtype, take the attribute path (``slow``) for the
rest of the run.  Both paths give the same rows (``rows()``: lists in ROW_FIELDS order).
"""
from __future__ import annotations

import ctypes
import operator
import re
import time

import numpy as np

BLOCK_RECORDS = 8192        # records per gather block: bounds the index array (~block x words x 8 bytes)
SPAN_LIMIT = 64             # one address-range view only if it spans <= 64x the records' own bytes
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def dtype_name(cls_name: str) -> str:
    """cupti-python's class name -> its numpy dtype's attribute: ActivityKernel11 ->
    activity_kernel11_dtype, ActivityAPI -> activity_api_dtype."""
    if cls_name == "ActivityAPI":
        return "activity_api_dtype"
    return _CAMEL.sub("_", cls_name).lower() + "_dtype"


def gather(ptrs: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The structs at addresses ``ptrs`` (uint64, each ``dtype.itemsize`` bytes, alive) -> one
    structured array.  8-byte words gathered from one view of the address range when the records
    are near each other (one CUPTI buffer), else one memmove per record."""
    size = dtype.itemsize
    n = len(ptrs)
    out = np.empty(n, dtype)
    if n == 0:
        return out
    lo = int(ptrs.min())
    span = int(ptrs.max()) + size - lo
    rel = ptrs - np.uint64(lo)
    if size % 8 == 0 and lo % 8 == 0 and not np.any(rel % np.uint64(8)) and span <= SPAN_LIMIT * n * size:
        words = np.ctypeslib.as_array((ctypes.c_uint64 * (span // 8)).from_address(lo))
        w = size // 8
        dst = out.view(np.uint64).reshape(n, w)
        step = np.arange(w, dtype=np.intp)
        first = (rel // np.uint64(8)).astype(np.intp)
        for i in range(0, n, BLOCK_RECORDS):
            dst[i:i + BLOCK_RECORDS] = words[first[i:i + BLOCK_RECORDS, None] + step]
        return out
    mm, base = ctypes.memmove, out.ctypes.data
    for i, p in enumerate(ptrs.tolist()):
        mm(base + i * size, p, size)
    return out


class RecordSink:
    """Records of the wanted kinds, per record kind (``which``): packed arrays (gather path) or tuples
    (attribute path).  ``kinds``: CUPTI activity kind -> which; ``fields``: which -> ROW_FIELDS;
    ``dtype_for(obj)``: the numpy dtype of an object's C struct, or None."""

    def __init__(self, kinds: dict[int, str], fields: dict[str, tuple], dtype_for=None) -> None:
        self.kinds = dict(kinds)
        self.fields = {k: tuple(v) for k, v in fields.items()}
        self.dtype_for = dtype_for
        self.get = {k: operator.attrgetter(*v) for k, v in self.fields.items()}
        self.slow: dict[str, list] = {k: [] for k in self.fields}      # tuples, attribute path
        self.packed: dict[str, list] = {k: [] for k in self.fields}    # arrays, gather path
        self.mode: dict[int, object] = {}      # kind -> (dtype, packed dtype) or False (attribute path)
        self.names: dict[int, str] = {0: ""}   # kernel name pointer -> text
        self.fast_records = 0
        self.steps_ns = {"list": 0, "kinds": 0, "gather": 0, "attributes": 0}   # callback CPU by step

    def add(self, acts, room: int) -> int:
        """Keep up to ``room`` records of the wanted kinds from one buffer; returns how many wanted
        records the buffer had (kept + dropped)."""
        clk = time.thread_time_ns
        c0 = clk()
        acts = acts if isinstance(acts, list) else list(acts)
        c1 = clk()
        kinds = np.fromiter((a.kind for a in acts), np.int64, len(acts))
        wanted = np.flatnonzero(np.isin(kinds, np.fromiter(self.kinds, np.int64)))
        keep = wanted[:max(0, room)]
        st = self.steps_ns
        st["list"] += c1 - c0
        st["kinds"] += clk() - c1
        for k in np.unique(kinds[keep]).tolist():
            c0 = clk()
            idx = keep[kinds[keep] == k]
            which = self.kinds[k]
            mode = self.mode.get(k)
            if mode is None:
                mode = self.mode[k] = self._probe(acts[idx[0]], which)
            if mode is False:
                g, rows = self.get[which], self.slow[which]
                rows.extend(g(acts[i]) for i in idx.tolist())
                st["attributes"] += clk() - c0
                continue
            ptrs = np.fromiter((acts[i].ptr for i in idx.tolist()), np.uint64, len(idx))
            self._keep(which, gather(ptrs, mode[0]), mode[1])
            self.fast_records += len(idx)
            st["gather"] += clk() - c0
        return len(wanted)

    def _probe(self, obj, which: str):
        """The gather path for this kind, if the object's struct decodes to its own attributes."""
        dt = None
        if self.dtype_for is not None and hasattr(obj, "ptr"):
            try:
                dt = self.dtype_for(obj)
            except Exception:    # noqa: BLE001 - any failure: attribute path
                dt = None
        if dt is None or any(f not in (dt.names or ()) for f in self.fields[which]):
            return False
        packed = np.dtype([(f, dt[f]) for f in self.fields[which]])
        try:
            rec = gather(np.array([int(obj.ptr)], np.uint64), dt)
            want = self.get[which](obj)
        except Exception:    # noqa: BLE001
            return False
        for f, v in zip(self.fields[which], want):
            got = rec[f][0].item()
            if f == "name":
                got = self._name(int(got))
            if got != v:
                return False
        return dt, packed

    def _name(self, p: int) -> str:
        s = self.names.get(p)
        if s is None:
            s = self.names[p] = ctypes.string_at(p).decode("utf-8", "replace")
        return s

    def _keep(self, which: str, rec: np.ndarray, packed: np.dtype) -> None:
        out = np.empty(len(rec), packed)
        for f in packed.names:
            out[f] = rec[f]
        if "name" in packed.names:
            for p in np.unique(out["name"]).tolist():
                self._name(p)
        self.packed[which].append(out)

    def count(self, which: str) -> int:
        return len(self.slow[which]) + sum(len(a) for a in self.packed[which])

    def columns(self, which: str, name_ids: dict[str, int]) -> dict[str, np.ndarray]:
        """Every kept record of this kind as int64 columns by field, without a Python object per
        record; the ``name`` column holds ids into ``name_ids`` (text -> id, extended here)."""
        fields = self.fields[which]
        parts = []
        if self.slow[which]:
            rows = self.slow[which]
            cols = {}
            for j, f in enumerate(fields):
                vals = [r[j] for r in rows]
                if f == "name":
                    vals = [name_ids.setdefault(v, len(name_ids)) for v in vals]
                cols[f] = np.asarray(vals, np.int64)
            parts.append(cols)
        for arr in self.packed[which]:
            cols = {f: arr[f].astype(np.int64) for f in fields if f != "name"}
            if "name" in fields:
                ptr, inv = np.unique(arr["name"], return_inverse=True)
                ids = np.asarray([name_ids.setdefault(self.names[p], len(name_ids)) for p in ptr.tolist()], np.int64)
                cols["name"] = ids[inv.reshape(-1)] if len(ids) else np.zeros(0, np.int64)
            parts.append(cols)
        if not parts:
            return {f: np.zeros(0, np.int64) for f in fields}
        return {f: np.concatenate([c[f] for c in parts]) for f in fields}

    def rows(self, which: str) -> list[list]:
        """Every kept record of this kind as a list in ROW_FIELDS order (names as text)."""
        out = [list(r) for r in self.slow[which]]
        fields = self.fields[which]
        ni = fields.index("name") if "name" in fields else -1
        for arr in self.packed[which]:
            cols = [arr[f].tolist() for f in fields]
            if ni >= 0:
                nm = self.names
                cols[ni] = [nm[p] for p in cols[ni]]
            out.extend(map(list, zip(*cols)))
        return out
