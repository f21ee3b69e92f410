"""Kineto flows: launch flows (host API call -> GPU work) and ``fwdbwd`` flows between CPU ops.

Launch flows (FlowKind.LAUNCH) join host RUNTIME/DRIVER spans to GPU work (kernel, memcpy,
memset) on (host pid, correlation).  GPU events carry the device as pid, so each GPU
activity is assigned to a host process: with a single host process (the normal
torch.profiler case) all GPU activity belongs to it.  With several host processes a GPU
activity binds to the only process that has a host API call with that correlation; if
correlations collide across processes it binds to the candidate call that started last
at or before the GPU start -- the same rule by which Chrome pairs an ``ac2g`` ``f`` event
with the latest preceding ``s`` event of the same id (Kineto's ac2g ids *are* the
correlation ids, so the flow events carry no extra information beyond that ordering).
GPU-side sync records (cat ``cuda_sync`` -> GPU_SYNC) are linked to their host call with
FlowKind.OTHER.  ``fwdbwd`` flow events become FlowKind.FWDBWD between the innermost
CPU ops enclosing each endpoint.
"""
from __future__ import annotations

import numpy as np

from ...trace.builder import TraceBuilder
from ...trace.kinds import FlowKind, SpanKind, TrackKind
from ...trace.model import Flows, Trace, codes_in


def _launch_flows(b: TraceBuilder, skind, spid, corr, start, named, warnings) -> None:
    host = np.flatnonzero(((skind == SpanKind.RUNTIME) | (skind == SpanKind.DRIVER)) & (corr >= 0) & ~named)
    work = codes_in(skind, [SpanKind.KERNEL, SpanKind.MEMCPY, SpanKind.MEMSET])
    gdst = np.flatnonzero((work | (skind == SpanKind.GPU_SYNC)) & (corr >= 0))
    if not len(host) or not len(gdst):
        return
    hp = spid[host]
    hc = corr[host]
    # sort host calls by (pid, corr, start); duplicates within a pid keep the first
    o = np.lexsort((start[host], hc, hp))
    host, hp, hc = host[o], hp[o], hc[o]
    dup = np.zeros(len(host), bool)
    dup[1:] = (hp[1:] == hp[:-1]) & (hc[1:] == hc[:-1])
    if dup.any():
        warnings.append(f"{int(dup.sum())} host API call(s) repeat a (pid, correlation) pair; the first is used for launch flows")
        host, hp, hc = host[~dup], hp[~dup], hc[~dup]
    gc = corr[gdst]
    if hp[0] == hp[-1]:      # sorted by pid first: one process (no np.unique of every call)
        pos = np.searchsorted(hc, gc)
        pos_c = np.minimum(pos, len(hc) - 1)
        ok = hc[pos_c] == gc
        src = host[pos_c[ok]]
        dst = gdst[ok]
    else:
        # candidates: host calls with equal correlation in any process
        oc = np.lexsort((start[host], hc))
        hc2, host2 = hc[oc], host[oc]
        lo = np.searchsorted(hc2, gc, "left")
        hi = np.searchsorted(hc2, gc, "right")
        cnt = hi - lo
        uniq = cnt == 1
        src_l = [host2[lo[uniq]]]
        dst_l = [gdst[uniq]]
        amb = np.flatnonzero(cnt > 1)
        if len(amb):
            # several processes used this correlation: latest call starting at or before
            # the GPU start (Chrome's s->f pairing rule for ac2g flows with equal ids).
            gs = start[gdst]
            s_l, d_l = [], []
            for j in amb.tolist():
                cand = host2[lo[j]:hi[j]]
                cs = start[cand]
                k = np.searchsorted(cs, gs[j], "right") - 1
                if k >= 0:
                    s_l.append(cand[k])
                    d_l.append(gdst[j])
            src_l.append(np.asarray(s_l, np.int64))
            dst_l.append(np.asarray(d_l, np.int64))
        src = np.concatenate(src_l)
        dst = np.concatenate(dst_l)
    if not len(src):
        return
    fk = np.where(skind[dst] == SpanKind.GPU_SYNC, FlowKind.OTHER, FlowKind.LAUNCH).astype(np.uint8)
    b.add_flows(src, dst, fk)


def _fwdbwd_flows(trace: Trace, fidx, ph_codes, ph_uniq, ids_of: dict, pid, tid, ts_ns, warnings) -> None:
    """Bind fwdbwd s/f endpoints to the innermost CPU op enclosing them, pair by id."""
    s = trace.spans
    tr = trace.tracks
    ops = np.flatnonzero(s.kind == SpanKind.CPU_OP)
    if not len(ops):
        return
    # (pid, tid) -> track index for CPU threads
    cpu = np.flatnonzero(tr.kind == TrackKind.CPU_THREAD)
    tkey = {(int(tr.pid[i]), int(tr.tid[i])): int(i) for i in cpu.tolist()}
    ep_track = np.array([tkey.get((int(pid[i]), int(tid[i])), -1) for i in fidx.tolist()], np.int64)
    ep_ts = ts_ns[fidx]
    ep_span = np.full(len(fidx), -1, np.int64)
    op_tr = s.track[ops]
    for t in np.unique(ep_track[ep_track >= 0]).tolist():
        cand = ops[op_tr == t]  # sorted by start (spans are sorted)
        if not len(cand):
            continue
        st = s.start_ns[cand]
        en = s.end_ns[cand]
        sel = np.flatnonzero(ep_track == t)
        pos = np.searchsorted(st, ep_ts[sel], "right") - 1
        res = np.full(len(sel), -1, np.int64)
        todo = pos >= 0
        for _ in range(64):  # walk back to the enclosing op (rarely more than a few steps)
            if not todo.any():
                break
            w = np.flatnonzero(todo)
            enc = en[pos[w]] >= ep_ts[sel[w]]
            res[w[enc]] = cand[pos[w[enc]]]
            todo[w[enc]] = False
            pos[w[~enc]] -= 1
            todo &= pos >= 0
        ep_span[sel] = res
    phs = [ph_uniq[c] for c in ph_codes[fidx].tolist()]
    ids = [ids_of[i] for i in fidx.tolist()]
    starts: dict = {}
    src, dst = [], []
    for j in np.argsort(ep_ts, kind="stable").tolist():
        if ep_span[j] < 0:
            continue
        key = ids[j]
        if phs[j] == "s":
            starts[key] = ep_span[j]
        elif phs[j] == "f" and key in starts:
            src.append(starts.pop(key))
            dst.append(ep_span[j])
    if not src:
        return
    fl = trace.flows
    trace.flows = Flows(src=np.concatenate([fl.src, np.asarray(src, np.int32)]),
                        dst=np.concatenate([fl.dst, np.asarray(dst, np.int32)]),
                        kind=np.concatenate([fl.kind, np.full(len(src), FlowKind.FWDBWD, np.uint8)]))
