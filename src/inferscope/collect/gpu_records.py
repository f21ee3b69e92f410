"""CUPTI activity rows (gpu_activity.py's ``snapshot()``) -> trace spans and launch flows.

Pure: a snapshot is plain data (JSON), so this runs on rows captured on a real GPU anywhere
(tests/data/cupti).  Names and categories follow the Kineto ingest's (``kernel`` with demangled names, ``gpu_memcpy``,
``gpu_memset``, ``cuda_runtime``, ``cuda_driver``, ``cuda_sync``; "Memcpy HtoD (Pageable -> Device)",
"Stream Sync") so every analysis treats a CUPTI-collected run like a torch.profiler one.
Tracks: a GPU stream is (GPU_STREAM, pid -1, tid stream, device), as torch.profiler's merge makes
them; a synchronisation without a stream (context sync) goes on the device-wide track; API calls
go on the calling thread's CPU track (pid, tid = gettid), the track the sampler's samples use.
Timestamps move onto perf_counter_ns by the snapshot's calibrated offset.
"""
from __future__ import annotations

import numpy as np

from ..trace.kinds import CopyKind, FlowKind, MemKind, SpanKind, TrackKind
from ..util.demangle import demangle

_COPY = {"HTOD": CopyKind.H2D, "DTOH": CopyKind.D2H, "DTOD": CopyKind.D2D, "HTOH": CopyKind.H2H,
         "PTOP": CopyKind.P2P, "HTOA": CopyKind.H2D, "ATOH": CopyKind.D2H, "ATOD": CopyKind.D2D,
         "DTOA": CopyKind.D2D, "ATOA": CopyKind.D2D}
_MEM = {"PAGEABLE": MemKind.PAGEABLE, "PINNED": MemKind.PINNED, "DEVICE": MemKind.DEVICE,
        "DEVICE_STATIC": MemKind.DEVICE, "MANAGED": MemKind.MANAGED, "MANAGED_STATIC": MemKind.MANAGED,
        "ARRAY": MemKind.ARRAY}
_SYNC = {"EVENT_SYNCHRONIZE": "Event Sync", "STREAM_WAIT_EVENT": "Stream Wait Event",
         "STREAM_SYNCHRONIZE": "Stream Sync", "CONTEXT_SYNCHRONIZE": "Context Sync"}
NO_STREAM = 0xFFFFFFFF     # CUPTI's stream id of a record not tied to one stream


def _copy_label(name: str) -> str:      # HTOD -> HtoD (Kineto's spelling)
    return name[0] + "to" + name[3] if len(name) == 4 and name[1:3] == "TO" else name.title()


def _mem_label(name: str) -> str:       # DEVICE_STATIC -> Device Static
    return name.replace("_", " ").title()


def _cols(rows: list, fields: list, names: tuple) -> dict[str, np.ndarray]:
    if not rows:
        return {n: np.zeros(0, dtype=np.int64) for n in names}
    idx = [fields.index(n) for n in names]
    arr = np.asarray([[r[i] for i in idx] for r in rows], dtype=np.int64)
    return {n: arr[:, j] for j, n in enumerate(names)}


class _Records:
    """One CUPTI snapshot being added to a TraceBuilder: its columns per record kind, the span parts made of them."""

    def __init__(self, b, snap: dict, off: int) -> None:
        self.b, self.snap, self.off = b, snap, off
        self.F = snap["fields"]
        self.CS = snap.get("columns")     # live: int64 columns per kind (kernel names as ids); files: rows
        self.R = snap.get("rows") or {}
        self.enums = {k: {int(i): n for i, n in v.items()} for k, v in (snap.get("enums") or {}).items()}
        self.intern = b.strings.intern
        self.parts: list = []
        self.ctx_dev: dict[int, int] = {}
        self._tracks: dict = {}

    def columns_of(self, which: str, names: tuple) -> dict[str, np.ndarray]:
        if self.CS is not None:
            c = self.CS.get(which) or {}
            return {n: np.asarray(c.get(n, ()), np.int64) for n in names}
        return _cols(self.R.get(which) or [], self.F[which], names)

    def count(self, which: str) -> int:
        CS = self.CS
        return len((CS.get(which) or {}).get("start", ())) if CS is not None else len(self.R.get(which) or [])

    def part(self, kind, cat, c, name, track, **extra) -> None:
        n, off = len(c["start"]), self.off
        if n:
            d = dict(start_ns=c["start"] - off, end_ns=np.maximum(c["end"], c["start"]) - off,
                     kind=np.full(n, int(kind), np.uint8), cat=np.full(n, self.intern(cat), np.int32),
                     name=np.asarray(name, np.int32), track=np.asarray(track, np.int32),
                     correlation=c["correlation_id"])
            d.update(extra)
            self.parts.append(d)

    def stream_tracks(self, dev, strm) -> np.ndarray:
        keys, b = self._tracks, self.b
        out_t = np.empty(len(dev), np.int32)
        for i, (d, s) in enumerate(zip(dev.tolist(), strm.tolist())):
            t = keys.get((d, s))
            if t is None:
                if s == NO_STREAM or s < 0:
                    t = b.track(TrackKind.GPU_DEVICE, pid=-1, tid=-1, device=d, name=f"GPU {d} (device-wide)")
                else:
                    t = b.track(TrackKind.GPU_STREAM, pid=-1, tid=s, device=d)
                keys[(d, s)] = t
            out_t[i] = t
        return out_t

    def kernels(self) -> None:
        c = self.columns_of("kernel", ("start", "end", "device_id", "context_id", "stream_id", "correlation_id"))
        intern, CS = self.intern, self.CS
        if CS is not None:    # CUPTI gives mangled names; Kineto and nsys show them demangled
            table = np.asarray([intern(demangle(str(n))) for n in self.snap.get("kernel_names") or ()], np.int32)
            ids = np.asarray((CS.get("kernel") or {}).get("name", ()), np.int64)
            names = table[ids] if len(ids) else np.zeros(0, np.int32)
        else:
            kr = self.R.get("kernel") or []
            ni = self.F["kernel"].index("name")
            nm_ids: dict = {}
            names = np.asarray([nm_ids[r[ni]] if r[ni] in nm_ids else nm_ids.setdefault(r[ni], intern(demangle(str(r[ni]))))
                                for r in kr], np.int32)
        self.ctx_dev.update(zip(c["context_id"].tolist(), c["device_id"].tolist()))
        self.part(SpanKind.KERNEL, "kernel", c, names, self.stream_tracks(c["device_id"], c["stream_id"]))

    def copies(self) -> None:
        c = self.columns_of("memcpy", ("start", "end", "device_id", "context_id", "stream_id", "correlation_id",
                                       "copy_kind", "src_kind", "dst_kind", "bytes"))
        self.ctx_dev.update(zip(c["context_id"].tolist(), c["device_id"].tolist()))
        ck_names, mk_names = self.enums.get("ActivityMemcpyKind", {}), self.enums.get("ActivityMemoryKind", {})
        labels = {}
        for k, s_, d_ in zip(c["copy_kind"].tolist(), c["src_kind"].tolist(), c["dst_kind"].tolist()):
            if (k, s_, d_) not in labels:
                kn, sn, dn = ck_names.get(k, "UNKNOWN"), mk_names.get(s_, "UNKNOWN"), mk_names.get(d_, "UNKNOWN")
                labels[(k, s_, d_)] = (self.intern(f"Memcpy {_copy_label(kn)} ({_mem_label(sn)} -> {_mem_label(dn)})"),
                                       int(_COPY.get(kn, CopyKind.UNKNOWN)), int(_MEM.get(sn, MemKind.UNKNOWN)),
                                       int(_MEM.get(dn, MemKind.UNKNOWN)))
        lab = [labels[t] for t in zip(c["copy_kind"].tolist(), c["src_kind"].tolist(), c["dst_kind"].tolist())]
        self.part(SpanKind.MEMCPY, "gpu_memcpy", c, [x[0] for x in lab], self.stream_tracks(c["device_id"], c["stream_id"]),
                  bytes=c["bytes"], copy_kind=np.asarray([x[1] for x in lab], np.uint8),
                  src_mem=np.asarray([x[2] for x in lab], np.uint8), dst_mem=np.asarray([x[3] for x in lab], np.uint8))

    def memsets(self) -> None:
        c = self.columns_of("memset", ("start", "end", "device_id", "context_id", "stream_id", "correlation_id",
                                       "bytes", "memory_kind"))
        self.ctx_dev.update(zip(c["context_id"].tolist(), c["device_id"].tolist()))
        mk_names = self.enums.get("ActivityMemoryKind", {})
        mlab = {m: (self.intern(f"Memset ({_mem_label(mk_names.get(m, 'UNKNOWN'))})"),
                    int(_MEM.get(mk_names.get(m, ""), MemKind.UNKNOWN)))
                for m in set(c["memory_kind"].tolist())}
        self.part(SpanKind.MEMSET, "gpu_memset", c, [mlab[m][0] for m in c["memory_kind"].tolist()],
                  self.stream_tracks(c["device_id"], c["stream_id"]), bytes=c["bytes"],
                  dst_mem=np.asarray([mlab[m][1] for m in c["memory_kind"].tolist()], np.uint8))

    def syncs(self) -> None:
        """The GPU-side record of a host wait, on its context's device."""
        c = self.columns_of("sync", ("start", "end", "context_id", "stream_id", "correlation_id", "type"))
        dev = np.asarray([self.ctx_dev.get(x, 0) for x in c["context_id"].tolist()], np.int64)
        sy_names = self.enums.get("ActivitySynchronizationType", {})
        ynm = {t: self.intern(_SYNC.get(sy_names.get(t, ""), "Unknown Sync")) for t in set(c["type"].tolist())}
        self.part(SpanKind.GPU_SYNC, "cuda_sync", c, [ynm[t] for t in c["type"].tolist()],
                  self.stream_tracks(dev, c["stream_id"]))

    def host_apis(self) -> int:
        """The runtime and driver API calls, on their threads' tracks; returns how many."""
        n = 0
        for which, kind in (("runtime", SpanKind.RUNTIME), ("driver", SpanKind.DRIVER)):
            c = self.columns_of(which, ("start", "end", "cbid", "process_id", "thread_id", "correlation_id"))
            api = {int(k): v for k, v in (self.snap.get("api_names", {}).get(which) or {}).items()}
            ids = {cb: self.intern(api.get(cb, f"{which} api {cb}")) for cb in set(c["cbid"].tolist())}
            trk = {}
            for p, t in set(zip(c["process_id"].tolist(), c["thread_id"].tolist())):
                trk[(p, t)] = self.b.track(TrackKind.CPU_THREAD, pid=p, tid=t)
            self.part(kind, f"cuda_{which}", c, [ids[x] for x in c["cbid"].tolist()],
                      [trk[k] for k in zip(c["process_id"].tolist(), c["thread_id"].tolist())])
            n += self.count(which)
        return n


def add_to(b, snap: dict, room: int | None = None) -> dict:
    """Add the snapshot's spans (+ flows) to TraceBuilder ``b``; keeps the newest ``room`` spans
    when there are more.  Returns {"spans", "dropped", "flows", "host_api_calls", "warnings"}."""
    off = snap.get("clock_offset_ns")
    out = {"spans": 0, "dropped": 0, "flows": 0, "host_api_calls": 0, "warnings": []}
    if off is None:
        out["warnings"].append("CUPTI records without a clock calibration; GPU activity not merged")
        return out
    r = _Records(b, snap, off)
    r.kernels()
    r.copies()
    r.memsets()
    n_gpu_parts = len(r.parts)
    r.syncs()
    n_dst_parts = len(r.parts)
    out["host_api_calls"] += r.host_apis()
    if r.parts:
        _add_spans(b, r.parts, n_gpu_parts, n_dst_parts, room, out)
    return out


def _add_spans(b, parts: list, n_gpu_parts: int, n_dst_parts: int, room: int | None, out: dict) -> None:
    """The parts as spans (the newest ``room`` when there are more), then the launch flows: API call -> GPU work
    (LAUNCH) / GPU-side sync record (OTHER), by correlation id."""
    cols = {k: np.concatenate([p[k] if k in p else np.full(len(p["start_ns"]), _DEFAULT[k], _DTYPE[k]) for p in parts])
            for k in ("start_ns", "end_ns", "kind", "cat", "name", "track", "correlation", "bytes",
                      "copy_kind", "src_mem", "dst_mem")}
    sizes = [len(p["start_ns"]) for p in parts]
    role = np.repeat(np.asarray([0] * n_gpu_parts + [1] * (n_dst_parts - n_gpu_parts)
                                + [2] * (len(parts) - n_dst_parts), np.int8), sizes)
    keep = np.arange(len(cols["start_ns"]))
    if room is not None and len(keep) > room:
        order = np.argsort(cols["start_ns"], kind="stable")
        keep = np.sort(order[len(order) - max(0, room):])
        out["dropped"] = len(order) - len(keep)
    cols = {k: v[keep] for k, v in cols.items()}
    role = role[keep]
    prov = b.add_spans(**{k: v for k, v in cols.items()})
    out["spans"] = len(keep)
    corr = cols["correlation"]
    src = np.flatnonzero((role == 2) & (corr > 0))
    dst = np.flatnonzero((role < 2) & (corr > 0))
    if len(src) and len(dst):
        o = np.argsort(corr[src], kind="stable")
        sc = corr[src][o]
        pos = np.searchsorted(sc, corr[dst])
        hit = (pos < len(sc)) & (sc[np.minimum(pos, len(sc) - 1)] == corr[dst])
        s_i, d_i = src[o][pos[hit]], dst[hit]
        fk = np.where(role[d_i] == 1, FlowKind.OTHER, FlowKind.LAUNCH).astype(np.uint8)
        b.add_flows(prov[s_i], prov[d_i], fk)
        out["flows"] = int(len(d_i))


_DEFAULT = {"bytes": -1, "copy_kind": 0, "src_mem": 0, "dst_mem": 0}
_DTYPE = {"bytes": np.int64, "copy_kind": np.uint8, "src_mem": np.uint8, "dst_mem": np.uint8}
