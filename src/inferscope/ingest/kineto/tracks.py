"""Kineto tracks: thread/process names from metadata events, span rows -> builder tracks (CPU
threads, GPU streams, named pids), and the ``[memory]`` instants as GPU memory counter tracks."""
from __future__ import annotations

import numpy as np

from ...trace.builder import TraceBuilder
from ...trace.kinds import TrackKind
from .columns import _int_col
from .decode import _Args


_unique_values = getattr(np, "unique_values", np.unique)   # numpy >= 2.3: hashing, no sort of all rows


def _metadata_names(is_M, name_codes, name_str, pid, tid, pid_named, args_l) -> dict:
    """{('p', pid): process_name, ('l', pid): labels, ('t', pid, tid): thread_name}."""
    out: dict = {}
    midx = np.flatnonzero(is_M)
    for i in midx.tolist():
        nm = name_str[name_codes[i]]
        a = args_l[i]
        if a is None:
            continue
        if nm == "process_name" and isinstance(a.name, str):
            out[("p", int(pid[i]))] = a.name.strip()
        elif nm == "process_labels" and isinstance(a.labels, str):
            out[("l", int(pid[i]))] = a.labels.strip()
        elif nm == "thread_name" and isinstance(a.name, str):
            out[("t", int(pid[i]), int(tid[i]))] = a.name.strip()
    return out


def _assign_tracks(b: TraceBuilder, tkind, tpid, ttid, tdev, meta_names, pid_l, tid_l, src_idx) -> np.ndarray:
    if len(tkind) == 0:
        return np.zeros(0, np.int32)
    cols4 = (tkind, tpid, ttid, tdev)
    n = len(tkind)
    # rows come in runs of one track (a thread's events, a stream's kernels): the keys are made and
    # matched per run, not per row (~70 ms less on a 2M-event trace, issue 26)
    same = np.ones(n - 1, dtype=bool)
    for c in cols4:
        same &= c[1:] == c[:-1]
    heads = np.concatenate(([0], np.flatnonzero(~same) + 1))
    del same
    hk = [c[heads] for c in cols4]
    # one mixed int64 key per run -> 1-D unique (much faster than unique(axis=0)); verified
    # column by column (every row of a run holds its head's values)
    mix = ((hk[1] * np.int64(1000003) + hk[2]) * np.int64(8191) + hk[3]) * np.int64(8) + hk[0]
    u = np.sort(_unique_values(mix))
    inv_h = np.searchsorted(u, mix)
    del mix
    first_h = np.full(len(u), len(heads), dtype=np.int64)
    np.minimum.at(first_h, inv_h, np.arange(len(heads), dtype=np.int64))
    if all(np.array_equal(h[first_h][inv_h], h) for h in hk):
        first = heads[first_h]
        inv = np.repeat(inv_h, np.diff(np.append(heads, n)))
        uk = np.stack([c[first] for c in cols4], axis=1)
    else:  # hash collision (never seen): exact path
        uk, first, inv = np.unique(np.stack(cols4, axis=1), axis=0, return_index=True, return_inverse=True)
        inv = inv.reshape(-1)
    del hk, heads, inv_h, first_h
    lut = np.empty(len(uk), dtype=np.int32)
    for j, (k, p, t, d) in enumerate(uk.tolist()):
        nm = ""
        if k == TrackKind.CPU_THREAD:
            nm = meta_names.get(("t", p, t), "")
            if not nm and ("p", p) in meta_names:
                nm = f"{meta_names[('p', p)]} tid {t}"
        elif k == TrackKind.GPU_STREAM:
            th = meta_names.get(("t", d, t), "")
            if th:
                lab = meta_names.get(("l", d), "") or f"GPU {d}"
                nm = f"{lab} {th}"
        else:
            i = int(src_idx[first[j]])
            nm = f"{pid_l[i]}/{tid_l[i]}".strip("/")
        lut[j] = b.track(TrackKind(k), pid=p, tid=t, device=d, name=nm)
    return lut[inv]


def _memory_counters(b: TraceBuilder, idx: np.ndarray, margs: list, pid, ts_ns) -> None:
    """``[memory]`` instants on CUDA devices -> counter tracks ``gpu.mem_allocated_bytes`` (Total Allocated) and
    ``gpu.mem_reserved_bytes`` (Total Reserved: the caching allocator's pool, what the device sees of it)."""
    margs = [a if a is not None else _Args() for a in margs]   # a [memory] instant without args
    dtype_ = _int_col([a.device_type for a in margs])
    did = _int_col([a.device_id for a in margs])
    for field, metric in (("total_allocated", "gpu.mem_allocated_bytes"), ("total_reserved", "gpu.mem_reserved_bytes")):
        val = np.array([getattr(a, field) if isinstance(getattr(a, field), (int, float)) else np.nan
                        for a in margs], dtype=np.float64)
        ok = ~np.isnan(val) & (dtype_ == 1)  # c10 DeviceType 1 = CUDA (ROCm also reports CUDA)
        for d in np.unique(did[ok]).tolist():
            sel = ok & (did == d)
            tr = b.track(TrackKind.COUNTER, pid=int(pid[idx[sel][0]]), device=int(d), name=metric)
            b.add_counters(tr, ts_ns[idx[sel]], val[sel])
