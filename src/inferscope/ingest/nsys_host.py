"""Nsight Systems host side: CPU IP samples (COMPOSITE_EVENTS + SAMPLING_CALLCHAINS) and thread
scheduling (SCHED_EVENTS) as CPU_SAMPLE spans with the live sampler's classes, and GPU_METRICS
as counter tracks.  Every table is optional: absent tables are listed in ``meta["missing"]``.

Rules (exact):
- **class of a sample**: walk its call chain from the leaf (stackDepth 0) outwards; the first frame
  whose module is not *transparent* (kernel, libc/libpthread/ld.so/vdso, libstdc++/libgcc/libm,
  unresolved) decides, by vocab.library_role (the table the live perf samples use): CUDA
  driver/runtime/CUPTI/NCCL/NVIDIA libraries, the profiler's injection libraries and the host side of the GPU
  math libraries (cuBLAS, cuDNN, NVRTC, TensorRT: set-up and launches, never CPU math) -> ``framework``;
  torch/oneDNN/BLAS/OpenMP libraries and numpy's/scipy's compiled loops -> ``framework`` when the export has
  GPU activity tables, else ``cpu_compute``; native tokenizers (HF tokenizers, sentencepiece, tiktoken) ->
  ``tokenization``; the Python interpreter -> ``framework`` (nsys does not see Python frames); the program's
  own executable or any other library -> ``user_code``; a chain
  of transparent frames only -> ``framework`` (system code on the program's behalf).  A sample whose
  threadState is not Running -> ``waiting``.  A sample without a call chain takes its thread's
  previous class.  ``detail``: the deciding frame's ``symbol (module)``.  Samples with a call chain and those
  with a Python-interpreter frame at any depth are counted (``chained_samples``, ``interpreter_samples`` in
  ``meta["host_sampling"]``): the program's language (analyze/language.py), so native host time is not
  called Python.
- **time of a sample** (perf samples fire after a fixed count of CPU cycles, so a sample stands for
  the CPU time since the thread's previous sample): with SCHED_EVENTS for the thread, its on-CPU
  intervals (sched-in -> next sched-out) are cut at the sample times and each piece goes to the
  first sample at or after its end; pieces after the thread's last sample go to that sample when
  they start within two median sample gaps of it (else they stay unexplained).  Without scheduling
  data a sample owns the time since the previous one, at most two median gaps.
- **off-CPU**: each sched-out -> next sched-in interval of a thread is ``waiting`` (detail: the
  threadBlock reason when recorded), as the live sampler classes an off-CPU thread - for threads that
  were sampled or that call CUDA APIs / push NVTX ranges: a helper thread asleep all run long says
  nothing about the program's critical path and would otherwise turn every unexplained moment into
  ``waiting``.
- the profiler's own threads (``[NSys...]``, ``CUPTI worker thread``, ``*CommsProcesso``) are skipped.
"""
from __future__ import annotations

import os
import re
import sqlite3

import numpy as np

from .. import vocab as V
from ..trace.kinds import SpanKind

COMPOSITE = "COMPOSITE_EVENTS"
CALLCHAINS = "SAMPLING_CALLCHAINS"
SCHED = "SCHED_EVENTS"
GPU_METRICS = "GPU_METRICS"
HOST_TABLES = (COMPOSITE, CALLCHAINS, SCHED, GPU_METRICS)

TOOL_THREAD_RE = re.compile(r"^\[NSys|^CUPTI worker thread|CommsProcesso")
# class codes (indices into CLASS_NAMES)
USER, FRAMEWORK, CPU_COMPUTE, WAITING, TOKENIZATION = 0, 1, 2, 3, 4
CLASS_NAMES = (V.CLS_USER_CODE, V.CLS_FRAMEWORK, V.CLS_CPU_COMPUTE, V.CLS_WAITING, V.CLS_TOKENIZATION)
# library role (vocab.library_role, the table the live perf samples use) -> class code; SYSTEM: transparent (-1)
_ROLE_CLASS = {V.TOKENIZER: TOKENIZATION, V.FRAMEWORK: FRAMEWORK, V.RUNTIME: FRAMEWORK, V.PYTHON: FRAMEWORK,
               V.OTHER: USER, V.SYSTEM: -1}


def module_class(module: str, has_gpu: bool) -> int:
    """Class code of a frame's module, or -1 when the module is transparent (system code, unresolved)."""
    if not module:
        return -1
    r = V.library_role(module)
    if r == V.COMPUTE:
        return FRAMEWORK if has_gpu else CPU_COMPUTE
    return _ROLE_CLASS[r]


def _strings(con, ids) -> dict[int, str]:
    ids = sorted({int(i) for i in ids if i is not None and i >= 0})
    out: dict[int, str] = {}
    for k in range(0, len(ids), 900):
        chunk = ids[k:k + 900]
        q = f"SELECT id, value FROM StringIds WHERE id IN ({','.join('?' * len(chunk))})"
        out.update({int(i): str(v) for i, v in con.execute(q, chunk)})
    return out


def _tool_threads(con, schema) -> set[int]:
    # StringIds must be a readable table: `schema` leaves out views with WITH (may never finish)
    if "ThreadNames" not in schema or "StringIds" not in schema:
        return set()
    try:
        rows = con.execute("SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId").fetchall()
    except sqlite3.Error:
        return set()
    return {int(g) for g, n in rows if n and TOOL_THREAD_RE.search(str(n))}


def _cols(schema, table) -> set[str]:
    return set(schema.get(table, ()))


def sample_classes(con, schema, has_gpu: bool, counts: dict | None = None):
    """(ts, gtid, class code, detail string) per CPU sample, sorted by (gtid, ts); None when absent.
    ``counts`` (optional) receives ``chained_samples`` (samples with a call chain) and ``interpreter_samples``
    (of which a frame at any depth is in a Python interpreter): the program's language (analyze/language.py)."""
    if COMPOSITE not in schema or not {"id", "start", "globalTid"} <= _cols(schema, COMPOSITE):
        return None
    st_col = "threadState" if "threadState" in _cols(schema, COMPOSITE) else "1"
    ev = np.array(con.execute(f"SELECT id, start, globalTid, COALESCE({st_col}, 1) FROM {COMPOSITE}").fetchall(),
                  dtype=np.int64).reshape(-1, 4)
    if not len(ev):
        return None
    cls = np.full(len(ev), -1, np.int64)
    detail_of: dict[int, str] = {}
    if CALLCHAINS in schema and {"id", "module", "stackDepth"} <= _cols(schema, CALLCHAINS):
        sym = "symbol" if "symbol" in _cols(schema, CALLCHAINS) else "-1"
        ch = np.array(con.execute(f"SELECT id, COALESCE(module, -1), COALESCE({sym}, -1), stackDepth FROM {CALLCHAINS} "
                                  "ORDER BY id, stackDepth").fetchall(), dtype=np.int64).reshape(-1, 4)
        if len(ch):
            s = _strings(con, np.unique(np.concatenate((ch[:, 1], ch[:, 2]))).tolist()) if "StringIds" in schema else {}
            mods, inv = np.unique(ch[:, 1], return_inverse=True)
            mcode = np.array([module_class(s.get(int(m), ""), has_gpu) for m in mods.tolist()], np.int64)
            code = mcode[inv]
            decisive = code >= 0
            # first decisive frame per chain id (rows are sorted by id, depth)
            ids_d = ch[decisive, 0]
            first = np.unique(ids_d, return_index=True)[1]
            rows = np.flatnonzero(decisive)[first]
            chain_cls = dict(zip(ch[rows, 0].tolist(), code[rows].tolist()))
            for r in rows.tolist():
                detail_of[int(ch[r, 0])] = f"{s.get(int(ch[r, 2]), '?')} ({os.path.basename(s.get(int(ch[r, 1]), '?'))})"
            has_chain = set(np.unique(ch[:, 0]).tolist())
            pymod = np.array([V.library_role(s.get(int(m), "")) == V.PYTHON for m in mods.tolist()], dtype=bool)
            if counts is not None:
                py_ids = np.unique(ch[pymod[inv], 0])
                counts["chained_samples"] = int(np.isin(ev[:, 0], ch[:, 0]).sum())
                counts["interpreter_samples"] = int(np.isin(ev[:, 0], py_ids).sum())
            for i, eid in enumerate(ev[:, 0].tolist()):
                c = chain_cls.get(eid)
                if c is not None:
                    cls[i] = c
                elif eid in has_chain:
                    cls[i] = FRAMEWORK
                    detail_of.setdefault(eid, "system code (kernel/libc)")
    cls[ev[:, 3] != 1] = WAITING
    o = np.lexsort((ev[:, 1], ev[:, 2]))
    ev, cls = ev[o], cls[o]
    # a sample without a chain takes its thread's previous class (forward fill within a thread)
    idx = np.where(cls >= 0, np.arange(len(cls)), -1)
    new_thread = np.r_[True, ev[1:, 2] != ev[:-1, 2]]
    idx[new_thread & (cls < 0)] = -1
    # forward fill by running maximum within threads (indices grow, threads are contiguous)
    starts = np.flatnonzero(new_thread)
    for a, b in zip(starts.tolist(), np.r_[starts[1:], len(cls)].tolist()):
        idx[a:b] = np.maximum.accumulate(idx[a:b])
    filled = np.where(idx >= 0, cls[np.maximum(idx, 0)], -1)
    det = [detail_of.get(int(ev[j, 0]), "") if j >= 0 else "" for j in idx.tolist()]
    return ev[:, 1], ev[:, 2], filled, det


def sched_intervals(con, schema):
    """{gtid: (on_starts, on_ends, off_starts, off_ends, off_reason_ids)} from SCHED_EVENTS; None when absent."""
    if SCHED not in schema or not {"start", "isSchedIn", "globalTid"} <= _cols(schema, SCHED):
        return None
    blk = "threadBlock" if "threadBlock" in _cols(schema, SCHED) else "NULL"
    a = np.array(con.execute(f"SELECT globalTid, start, isSchedIn, COALESCE({blk}, -1) FROM {SCHED} ORDER BY globalTid, start")
                 .fetchall(), dtype=np.int64).reshape(-1, 4)
    out = {}
    if not len(a):
        return out
    cut = np.flatnonzero(np.diff(a[:, 0])) + 1
    for seg in np.split(a, cut):
        g = int(seg[0, 0])
        t, inn = seg[:, 1], seg[:, 2] != 0
        on = inn[:-1] & ~inn[1:]
        off = ~inn[:-1] & inn[1:]
        out[g] = (t[:-1][on], t[1:][on], t[:-1][off], t[1:][off], seg[:-1, 3][off])
    return out


def cpu_sample_part(con, schema, has_gpu: bool, intern, active_threads: set | None = None) -> tuple[dict | None, dict]:
    """The host-sample span part (final string ids) and a summary for meta.  ``active_threads``: the
    globalTids with CUDA API calls or NVTX ranges; off-CPU time is counted for those and for sampled threads."""
    tools = _tool_threads(con, schema)
    counts = {"chained_samples": 0, "interpreter_samples": 0}
    samples = sample_classes(con, schema, has_gpu, counts)
    sched = sched_intervals(con, schema)
    info = {"cpu_samples": 0 if samples is None else int(len(samples[0])), "sched_threads": 0 if sched is None else len(sched),
            **counts}
    if samples is None and not sched:
        return None, info
    block_names = {}
    if sched and "ENUM_SCHEDULING_THREAD_BLOCK" in schema:
        try:
            block_names = {int(i): str(n) for i, n in con.execute("SELECT id, name FROM ENUM_SCHEDULING_THREAD_BLOCK")}
        except sqlite3.Error:
            block_names = {}
    S, E, G, C, D = [], [], [], [], []

    def add(s, e, g, c, d):
        keep = e > s
        if keep.any():
            S.append(s[keep]); E.append(e[keep]); G.append(np.full(int(keep.sum()), g, np.int64))
            C.append(np.broadcast_to(np.asarray(c, np.int64), s.shape)[keep])
            D.extend([d[i] for i in np.flatnonzero(keep).tolist()] if isinstance(d, list) else [d] * int(keep.sum()))

    threads = set()
    sampled = set()
    if samples is not None:
        ts, gt, cls, det = samples
        cut = np.flatnonzero(np.diff(gt)) + 1
        bounds = np.r_[0, cut, len(gt)]
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            g = int(gt[a])
            if g in tools:
                continue
            threads.add(g)
            sampled.add(g)
            sts, scl, sdet = ts[a:b], cls[a:b], det[a:b]
            ok = scl >= 0
            sts, scl = sts[ok], scl[ok]
            sdet = [x for x, k in zip(sdet, ok.tolist()) if k]
            if not len(sts):
                continue
            gap = int(np.median(np.diff(sts))) if len(sts) > 1 else 0
            if sched and g in sched and len(sched[g][0]):
                on_s, on_e = sched[g][0], sched[g][1]
                # cut the on-CPU intervals at the sample times
                k0 = np.searchsorted(sts, on_s, side="right")
                k1 = np.searchsorted(sts, on_e, side="left")
                inner = k1 - k0                                           # samples strictly inside each interval
                n = len(on_s) + int(inner.sum())
                rep = np.repeat(np.arange(len(on_s)), inner + 1)
                pos = np.arange(n) - np.repeat(np.cumsum(inner + 1) - (inner + 1), inner + 1)
                cuts_idx = np.repeat(k0, inner + 1) + pos                  # sample index at the end of each piece
                ps = np.where(pos == 0, on_s[rep], sts[np.clip(cuts_idx - 1, 0, len(sts) - 1)])
                pe = np.where(pos == inner[rep], on_e[rep], sts[np.clip(cuts_idx, 0, len(sts) - 1)])
                owner = np.searchsorted(sts, pe, side="left")
                after = owner >= len(sts)
                owner = np.minimum(owner, len(sts) - 1)
                keep = ~after | (ps - sts[-1] <= 2 * gap)
                add(ps[keep], pe[keep], g, scl[owner[keep]], [sdet[i] for i in owner[keep].tolist()])
            else:
                prev = np.r_[sts[0] - gap, sts[:-1]]
                start = np.maximum(prev, sts - 2 * gap) if gap else sts
                add(start, sts, g, scl, sdet)
    if sched:
        wid = WAITING
        for g, (_, _, off_s, off_e, why) in sched.items():
            if g in tools or not (g in sampled or g in (active_threads or ())):
                continue
            threads.add(g)
            add(off_s, off_e, g, wid, [f"off-CPU ({block_names.get(int(w), 'unknown reason')})" if w >= 0 else "off-CPU"
                                      for w in why.tolist()])
    if not S:
        return None, info
    s = np.concatenate(S)
    e = np.concatenate(E)
    c = np.concatenate(C)
    names = np.array([intern(n) for n in CLASS_NAMES], np.int32)[c]
    uniq = {d: intern(d) if d else -1 for d in dict.fromkeys(D)}  # first-seen order, not hash order
    detail = np.array([uniq[d] for d in D], np.int32)
    info["threads"] = len(threads)
    return dict(start_ns=s, end_ns=e, gtid=np.concatenate(G), name=names, detail=detail, kind=SpanKind.CPU_SAMPLE,
                cat=intern("nsys_cpu_sample")), info


def gpu_metric_counters(con, schema) -> list[tuple[str, int, np.ndarray, np.ndarray]]:
    """GPU_METRICS rows as (metric name, gpu id, ts, value) series; [] when absent.  Names:
    ``gpu.metric.<nsys metric name>`` (units as nsys reports them, mostly percent of peak)."""
    if GPU_METRICS not in schema or not {"timestamp", "typeId", "metricId", "value"} <= _cols(schema, GPU_METRICS):
        return []
    names = {}
    if "TARGET_INFO_GPU_METRICS" in schema:
        try:
            names = {(int(t), int(m)): str(n) for t, m, n in
                     con.execute("SELECT DISTINCT typeId, metricId, metricName FROM TARGET_INFO_GPU_METRICS")}
        except sqlite3.Error:
            names = {}
    a = np.array(con.execute(f"SELECT typeId, metricId, timestamp, value FROM {GPU_METRICS} ORDER BY typeId, metricId, timestamp")
                 .fetchall(), dtype=np.float64).reshape(-1, 4)
    out = []
    if not len(a):
        return out
    key = a[:, 0].astype(np.int64) * (1 << 32) + a[:, 1].astype(np.int64)
    cut = np.flatnonzero(np.diff(key)) + 1
    for seg in np.split(a, cut):
        t, m = int(seg[0, 0]), int(seg[0, 1])
        nm = re.sub(r"[^A-Za-z0-9_]+", "_", names.get((t, m), f"metric{m}")).strip("_").lower()
        out.append((f"gpu.metric.{nm}", t & 0xFF, seg[:, 2].astype(np.int64), seg[:, 3]))
    return out
