"""Names, tracks and devices of an Nsight Systems export.

The nsys StringIds ids actually used, interned once each (``_remap_strings`` -> ``_NameMap``:
a dense array only when bounded by the input's size, else sorted ids + searchsorted), process
and thread names (PROCESSES, ThreadNames), one track per GPU stream or device-wide queue and per
CPU thread (``_tracks_for``, ``_thread_tracks``; ``globalPid``/``globalTid`` decoded with the
hardware/VM bits masked), the devices (TARGET_INFO_GPU / TARGET_INFO_CUDA_GPU) and the session
extent (ANALYSIS_DETAILS).
"""
from __future__ import annotations

import numpy as np

from ..trace.builder import TraceBuilder
from ..trace.kinds import TrackKind
from .nsys_reader import _as_int
from .nsys_schema import GPU_INFO_TABLES, PID_MASK


class _NameMap:
    """nsys StringIds id -> our string id.  Dense (an array indexed by id) only when the largest
    id is within a small multiple of the rows read; otherwise sorted distinct ids + searchsorted,
    so a single huge or negative id costs nothing."""

    def __init__(self, ids: np.ndarray, ours: np.ndarray, dense_ok: bool) -> None:
        self.ids = ids        # sorted distinct nsys ids (int64)
        self.ours = ours      # int32, -1 = unknown
        self.dense = None
        if dense_ok and len(ids):
            self.dense = np.full(int(ids[-1]) + 1, -1, dtype=np.int32)
            self.dense[ids] = ours

    def __call__(self, q: np.ndarray, default: int) -> np.ndarray:
        out = np.full(len(q), default, dtype=np.int32)
        if not len(q) or not len(self.ids):
            return out
        if self.dense is not None:
            ok = (q >= 0) & (q < len(self.dense))
            out[ok] = self.dense[q[ok]]
            out[out < 0] = default
            return out
        pos = np.searchsorted(self.ids, q)
        np.minimum(pos, len(self.ids) - 1, out=pos)
        ok = self.ids[pos] == q
        v = self.ours[pos[ok]]
        out[ok] = np.where(v >= 0, v, default)
        return out


def _remap_strings(con, schema, rd, strings, used_ids: list[np.ndarray], warnings) -> _NameMap | None:
    """Intern the names of the nsys string ids actually used (sized by their number)."""
    used_ids = [a for a in used_ids if len(a)]
    if not used_ids:
        return None
    mx = max(int(a.max()) for a in used_ids)
    if mx < 0:
        return None
    dense_ok = mx <= max(1 << 22, 2 * sum(len(a) for a in used_ids))   # bounded by the input's size
    if dense_ok:
        present = np.zeros(mx + 1, dtype=bool)
        for a in used_ids:
            present[a[a >= 0]] = True
        uids = np.flatnonzero(present).astype(np.int64)
        del present
    else:
        parts = [np.unique(a[a >= 0]) for a in used_ids]
        uids = np.unique(np.concatenate(parts))
        del parts
    ours = np.full(len(uids), -1, dtype=np.int32)
    want = dict(zip(uids.tolist(), range(len(uids))))
    table = "StringIds" if "StringIds" in schema else None
    if table is None:   # seed 004 fallback: any table with id + value
        table = next((t for t, cols in schema.items() if {"id", "value"} <= set(cols) and not t.startswith("ENUM_")), None)
    if table is None:
        warnings.append("no StringIds table: names are shown as ids")
        for j, i in enumerate(uids.tolist()):
            ours[j] = strings.intern(f"#{i}")
        return _NameMap(uids, ours, dense_ok)
    cur = con.execute(f"SELECT id, value FROM [{table}] WHERE typeof(id) = 'integer' "
                      f"AND id BETWEEN {int(uids[0])} AND {int(uids[-1])}")
    while True:
        rows = cur.fetchmany(rd.chunk)
        if not rows:
            break
        for i, v in rows:
            j = want.get(i)
            if j is not None and ours[j] < 0:
                ours[j] = strings.intern(v if isinstance(v, str) else str(v))
    unresolved = np.flatnonzero(ours < 0)
    if len(unresolved):
        warnings.append(f"{len(unresolved)} name id(s) not found in {table}")
        for j in unresolved.tolist():
            ours[j] = strings.intern(f"#{int(uids[j])}")
    return _NameMap(uids, ours, dense_ok)


def _process_thread_names(con, schema) -> tuple[dict[int, str], dict[int, str]]:
    procs: dict[int, str] = {}
    threads: dict[int, str] = {}
    if "PROCESSES" in schema and {"globalPid", "name"} <= set(schema["PROCESSES"]):
        for g, name in con.execute("SELECT globalPid, name FROM PROCESSES WHERE name IS NOT NULL LIMIT 1000000"):
            g = _as_int(g)
            if g is not None:
                procs[(g >> 24) & PID_MASK] = str(name)[:4096]
    if "ThreadNames" in schema and {"globalTid", "nameId"} <= set(schema["ThreadNames"]) and "StringIds" in schema:
        for g, name in con.execute("SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId "
                                   "LIMIT 1000000"):
            g = _as_int(g)
            if g is not None and name:
                threads[g & 0xFFFFFFFFFFFF] = str(name)[:4096]   # (pid<<24 | tid), hw/vm bits dropped
    return procs, threads


def _tracks_for(b: TraceBuilder, pid, dev, stream, device_wide, proc_names) -> np.ndarray:
    n = len(pid)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    # combine into one uint64 when possible (fast unique), else unique over rows
    fast = (pid.max(initial=0) < (1 << 24)) and dev.max(initial=0) < 256 and stream.max(initial=0) < (1 << 31)
    if fast:
        key = None
        k = (((pid.astype(np.uint64) + np.uint64(1)) << np.uint64(40))
             | ((dev.astype(np.uint64) & np.uint64(0xFF)) << np.uint64(32))
             | (stream.astype(np.uint64) + np.uint64(1)))
        uk, inv = np.unique(k, return_inverse=True)
        first = np.zeros(len(uk), dtype=np.int64)
        first[inv[::-1]] = np.arange(n - 1, -1, -1)
    else:
        key = np.stack([pid.astype(np.int64), dev.astype(np.int64), stream.astype(np.int64),
                        device_wide.astype(np.int64)], axis=1)
        _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
    tids = np.empty(len(first), dtype=np.int32)
    for j, i in enumerate(first.tolist()):
        p, d, s, w = int(pid[i]), int(dev[i]), int(stream[i]), int(device_wide[i])
        if w:
            name = f"GPU {d} (device-wide)" + (f" pid {p}" if p >= 0 else "")
            tids[j] = b.track(TrackKind.GPU_DEVICE, pid=p, tid=-1, device=d, name=name)
        else:
            tids[j] = b.track(TrackKind.GPU_STREAM, pid=p, tid=s, device=d)
    return tids[np.asarray(inv).reshape(-1)]


def _thread_tracks(b: TraceBuilder, gtid, proc_names, thread_names) -> np.ndarray:
    n = len(gtid)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    k = np.where(gtid >= 0, gtid & 0xFFFFFFFFFFFF, -1)
    uk, inv = np.unique(k, return_inverse=True)
    tids = np.empty(len(uk), dtype=np.int32)
    for j, g in enumerate(uk.tolist()):
        if g < 0:
            tids[j] = b.track(TrackKind.CPU_THREAD, pid=-1, tid=-1, name="unknown thread")
            continue
        pid, tid = (g >> 24) & PID_MASK, g & PID_MASK
        tn = thread_names.get(g)
        pn = proc_names.get(pid)
        name = f"{pn} [{pid}]" if pn else f"pid {pid}"
        name += f" / {tn} [{tid}]" if tn else f" / tid {tid}"
        tids[j] = b.track(TrackKind.CPU_THREAD, pid=pid, tid=tid, name=name)
    return tids[np.asarray(inv).reshape(-1)]


def _devices(con, schema, used: set[int], warnings) -> list[dict]:
    out = []
    t = next((t for t in GPU_INFO_TABLES if t in schema), None)
    if t is None:
        return [{"id": d, "name": None, "total_memory_bytes": None, "sm_count": None, "compute_capability": None}
                for d in sorted(used)]
    cols = set(schema[t])

    def pick(*names):
        return next((c for c in names if c in cols), None)
    c_id = pick("id", "deviceId", "cuDevice")
    c_name = pick("name")
    c_mem = pick("totalMemory", "globalMemorySize")
    c_sm = pick("smCount", "numMultiprocessors", "multiprocessorCount")
    c_maj = pick("computeMajor", "computeCapabilityMajor", "smMajor")
    c_min = pick("computeMinor", "computeCapabilityMinor", "smMinor")
    sel = [c if c else "NULL" for c in (c_id, c_name, c_mem, c_sm, c_maj, c_min)]
    rows = con.execute(f"SELECT {', '.join(f'[{c}]' if c != 'NULL' else c for c in sel)} FROM [{t}] LIMIT 4096").fetchall()
    seen = set()
    for i, name, mem, sm, maj, mi in rows:
        i, mem, sm = _as_int(i), _as_int(mem), _as_int(sm)
        maj, mi = _as_int(maj), _as_int(mi)
        name = str(name)[:256] if name is not None else None
        did = i if i is not None and -1 <= i < (1 << 31) else -1
        if did in seen:
            continue
        seen.add(did)
        if used and did not in used:
            continue
        out.append({"id": did, "name": name, "total_memory_bytes": int(mem) if mem is not None else None,
                    "sm_count": int(sm) if sm is not None else None,
                    "compute_capability": f"{maj}.{mi}" if maj is not None and mi is not None else None})
    for d in sorted(used - seen):
        out.append({"id": d, "name": None, "total_memory_bytes": None, "sm_count": None, "compute_capability": None})
    out.sort(key=lambda d: d["id"])
    return out


def _session(con, schema) -> dict | None:
    if "ANALYSIS_DETAILS" in schema and "duration" in schema["ANALYSIS_DETAILS"]:
        r = con.execute("SELECT duration FROM ANALYSIS_DETAILS LIMIT 1").fetchone()
        d = _as_int(r[0]) if r else None
        if d is not None and 0 <= d < (1 << 61):
            return {"start_ns": 0, "end_ns": d, "duration_ns": d}
    return None
