"""Nsight Systems SQLite export (``nsys export --type sqlite``) -> Trace.

Schema facts: /work/shared/docs/nsys-sqlite-schema.md (summarised in the docstrings below).

* The file is opened read-only and immutable (``file:...?mode=ro&immutable=1``); nothing is
  ever written, not even a journal or a lock.
* Tables are created lazily by nsys, so every table and column is probed
  (``sqlite_master`` + ``PRAGMA table_info``) and whatever is absent is listed in
  ``meta["missing"]``; absent optional columns get defaults in SQL (``COALESCE``).
* Rows are streamed with ``fetchmany`` straight into narrow, preallocated numpy columns
  (one chunk at a time); names stay integer StringIds ids until the end, when only the ids
  actually used are interned and remapped with one numpy gather.
* Assembly is bounded in memory: one stable argsort of start (ties re-sorted by -end), then
  every column is scattered from its per-table part straight into sorted order (bench/README.md).
* ``globalTid``/``globalPid`` are decoded with the hardware/VM bits masked:
  ``pid = (g >> 24) & 0xFFFFFF``, ``tid = g & 0xFFFFFF``.
* LAUNCH flows join host API rows to GPU activities on ``(pid, correlationId)``;
  correlation ids repeat across processes (vLLM server + workers).

Modules, one idea each (none imports this module, so there is no import cycle):
  nsys_schema.py    table names, the read-only connection, schema probing, versions, the SQL interrupt
  nsys_reader.py    ``_Reader``: tables streamed into numpy columns; enum and id lookups
  nsys_parts.py     event tables -> span parts (GPU activities, runtime/driver, NVTX, OS runtime)
  nsys_host.py      CPU samples, scheduling and GPU metrics (host side, when exported)
  nsys_tracks.py    string ids -> names, process/thread names, tracks, devices, session
  nsys_assemble.py  launch flows ((pid, correlationId) join) and the sorted, bounded-memory assembly
This module holds the entry points (``load``, ``describe_schema``) and ``_load``, which drives
them; the names tests and other modules use from here are re-exported.
"""
from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..trace.builder import TraceBuilder
from ..trace.kinds import SpanKind, TrackKind
from ..trace.model import Trace
from . import nsys_host
from .nsys_assemble import _assemble, _launch_flows, _span_order
from .nsys_parts import DRIVER_EVENT_CLASS, NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND
from .nsys_parts import _gpu_activity_parts, _host_api_parts
from .nsys_reader import _Reader
from .nsys_schema import (GPU_INFO_TABLES, GRAPH_TABLE, KERNEL_TABLES, MEMCPY_TABLE, MEMSET_TABLE, META_TABLES,
                          NVTX_TABLE, OSRT_TABLE, OVERHEAD_TABLE, PID_MASK, RUNTIME_TABLE, SYNC_TABLE,
                          VIEW_SQL_TIMEOUT_S, _WANTED_TABLES, _Interrupt, _connect, _is_nsys, _schema, _versions)
from .nsys_tracks import _devices, _process_thread_names, _remap_strings, _session, _thread_tracks, _tracks_for
from .nsys_units import unit_warnings

LOAD_OPTIONS: tuple[str, ...] = ("include_osrt", "include_overhead", "chunk_rows")

DEFAULT_CHUNK_ROWS = 1 << 18

# The public names, with the constants that moved to nsys_schema / nsys_parts, and the
# internals tests use (_Reader: rows_bound patched; _span_order: checked against lexsort).
__all__ = ["load", "describe_schema", "LOAD_OPTIONS", "DEFAULT_CHUNK_ROWS", "PID_MASK", "VIEW_SQL_TIMEOUT_S",
           "KERNEL_TABLES", "RUNTIME_TABLE", "MEMCPY_TABLE", "MEMSET_TABLE", "SYNC_TABLE", "GRAPH_TABLE",
           "NVTX_TABLE", "OSRT_TABLE", "OVERHEAD_TABLE", "META_TABLES", "GPU_INFO_TABLES",
           "NVTX_MARK", "NVTX_PUSHPOP", "NVTX_STARTEND", "NVTXT_PUSHPOP", "NVTXT_STARTEND", "DRIVER_EVENT_CLASS",
           "_Reader", "_span_order"]


def describe_schema(path) -> str:
    """Tables, row counts and columns of an export, and what InferScope reads from it."""
    con = _connect(path)
    guard = _Interrupt(con)
    guard.deadline = time.monotonic() + VIEW_SQL_TIMEOUT_S   # count(*) on a plain view is arbitrary SQL
    try:
        try:
            schema = _schema(con)
        except (sqlite3.Error, UnicodeDecodeError) as e:
            raise InputError(f"{path}: corrupt or truncated SQLite file ({type(e).__name__})") from None
        if not _is_nsys(schema):
            raise InputError(f"{path}: SQLite database but not an Nsight Systems export (no StringIds / CUPTI / NVTX tables)")
        v = _versions(con, schema)
        lines = [f"# {Path(path).name}: Nsight Systems export"
                 + (f", nsys {v['nsys']}" if "nsys" in v else "")
                 + (f", schema {v['nsys_export_schema']}" if "nsys_export_schema" in v else "")]
        enums = sorted(t for t in schema if t.startswith("ENUM_"))
        for t in sorted(t for t in schema if not t.startswith("ENUM_")):
            try:
                with guard:
                    n = con.execute(f"SELECT count(*) FROM [{t}]").fetchone()[0]
            except sqlite3.Error as e:
                if guard.hit:
                    raise KeyboardInterrupt from None
                n = "unreadable: took too long (a view)" if guard.timed_out else f"unreadable: {e}"
            used = " *" if t in _WANTED_TABLES or t in KERNEL_TABLES or t in META_TABLES or t in (
                GRAPH_TABLE, OVERHEAD_TABLE, "TARGET_INFO_CUDA_GPU") else ""
            lines.append(f"{t}{used} ({n} rows): {', '.join(schema[t])}")
        if enums:
            lines.append(f"ENUM tables ({len(enums)}): {', '.join(enums)}")
        missing = [t for t in _WANTED_TABLES if t not in schema
                   and not (t == KERNEL_TABLES[0] and KERNEL_TABLES[1] in schema)]
        lines.append("(* = read by InferScope)")
        if missing:
            lines.append("absent (nsys creates tables lazily; absent usually means no such events): " + ", ".join(missing))
        return "\n".join(lines)
    finally:
        con.close()


def load(path, include_osrt: bool = True, include_overhead: bool = True,
         chunk_rows: int = DEFAULT_CHUNK_ROWS, progress=None) -> Trace:
    """progress: a ``util.progress.Progress`` (one stage per table read, its rows) or None."""
    con = _connect(path)
    guard = _Interrupt(con)
    try:
        with guard:
            try:
                return _load(con, path, include_osrt, include_overhead, chunk_rows, guard, progress)
            except sqlite3.Error as e:
                if guard.hit:
                    raise KeyboardInterrupt from None
                if guard.timed_out:
                    raise InputError(f"{path}: reading the export's views took longer than {VIEW_SQL_TIMEOUT_S:.0f} s; "
                                     "aborted (a view is arbitrary SQL: export the data as tables)") from None
                if isinstance(e, sqlite3.DatabaseError):
                    raise InputError(f"{path}: corrupt or truncated Nsight Systems export ({e})") from None
                raise InputError(f"{path}: cannot read Nsight Systems export ({e})") from None
            except UnicodeDecodeError:
                raise InputError(f"{path}: corrupt Nsight Systems export (undecodable text)") from None
            except (InputError, KeyboardInterrupt, MemoryError):
                raise
            except (ValueError, TypeError, OverflowError, IndexError, KeyError, AttributeError) as e:
                # Backstop for value combinations the checks did not foresee: still bad input.
                if os.environ.get("INFERSCOPE_DEBUG"):
                    raise
                msg = " ".join(str(e).split())[:160]
                raise InputError(f"{path}: unsupported or damaged Nsight Systems export ({type(e).__name__}: {msg})") from None
    finally:
        con.close()


def _load(con, path, include_osrt, include_overhead, chunk_rows, guard=None, progress=None) -> Trace:
    views: list[str] = []
    schema = _schema(con, views)
    if guard is not None and con.execute("SELECT count(*) FROM sqlite_master WHERE type = 'view'").fetchone()[0]:
        guard.deadline = time.monotonic() + VIEW_SQL_TIMEOUT_S
    if not _is_nsys(schema):
        raise InputError(f"{path}: SQLite database but not an Nsight Systems export (no StringIds / CUPTI / NVTX tables)")
    fname = os.path.basename(str(path))
    rd = _Reader(con, schema, chunk_rows, progress, fname)
    b = TraceBuilder()
    strings = b.strings
    warnings: list[str] = []
    if views:
        warnings.append(f"{len(views)} view(s) with a WITH clause or virtual table(s) not read: "
                        + ", ".join(sorted(views)[:5]))
    wal = Path(str(path) + "-wal")
    try:
        if wal.is_file() and wal.stat().st_size > 0:
            warnings.append(f"{wal.name} (a non-empty SQLite write-ahead log) sits beside the export; data committed "
                            "there is not read (the file is opened read-only, immutable). Checkpoint it first: "
                            f"sqlite3 {Path(str(path)).name} 'PRAGMA wal_checkpoint'")
    except OSError:
        pass
    missing = [t for t in _WANTED_TABLES if t not in schema
               and not (t == KERNEL_TABLES[0] and KERNEL_TABLES[1] in schema)]

    # parts: list of dicts of span columns; name columns hold *nsys* string ids in "nsname"
    # (remapped at the end) or final ids in "name".
    gpu_parts: list[dict] = []     # kernels, memcpy, memset, graph: LAUNCH-flow targets
    host_parts: list[dict] = []    # runtime/driver, nvtx, osrt, overhead
    sync_parts: list[dict] = []

    def intern(s: str) -> int:
        return strings.intern(s)

    # ---- GPU activities (nsys_parts) ----------------------------------------
    ktab = _gpu_activity_parts(con, schema, rd, intern, warnings, gpu_parts, sync_parts)

    # ---- host-side (nsys_parts) ----------------------------------------------
    runtime_part, nvtx_unclosed = _host_api_parts(schema, rd, strings, intern, warnings, ktab,
                                                  include_osrt, include_overhead, host_parts)

    # ---- host samples and scheduling (CPU_SAMPLE spans, live classes), GPU metrics ----------
    if progress is not None:
        progress.stage(f"reading CPU samples and scheduling of {fname}")
    try:
        has_gpu = bool(gpu_parts) and any(len(p["start_ns"]) for p in gpu_parts)
        active = set()
        for p in host_parts:
            if isinstance(p.get("kind"), np.ndarray):           # CUDA runtime/driver and NVTX parts
                active.update(np.unique(p["gtid"]).tolist())
        sample_part, host_info = nsys_host.cpu_sample_part(con, schema, has_gpu, intern, active)
        gpu_metrics = nsys_host.gpu_metric_counters(con, schema)
    except (sqlite3.Error, ValueError, TypeError, OverflowError, IndexError, KeyError) as e:   # optional tables: a bad one costs only itself
        warnings.append(f"nsys CPU samples / scheduling / GPU metrics not imported ({type(e).__name__}: {e})")
        sample_part, host_info, gpu_metrics = None, {}, []
    if sample_part is not None:
        # scheduling covers the profiler's start-up and tear-down around the program: keep the samples
        # inside the extent of the other recorded events, so they explain that time, not extend it
        others = [p for p in gpu_parts + sync_parts + host_parts if len(p["start_ns"])]
        if others:
            lo = min(int(p["start_ns"].min()) for p in others)
            hi = max(int((p["end_ns"] if "open" not in p else np.where(p["open"], p["start_ns"], p["end_ns"])).max()) for p in others)
            st = np.maximum(sample_part["start_ns"], lo)
            en = np.minimum(sample_part["end_ns"], hi)
            keep = en > st
            sample_part.update({k: v[keep] for k, v in sample_part.items() if isinstance(v, np.ndarray)})
            sample_part["start_ns"], sample_part["end_ns"] = st[keep], en[keep]
        host_parts.append(sample_part)
    missing += [t for t in nsys_host.HOST_TABLES if t not in schema]

    # ---- strings: intern only the nsys ids actually used -----------------
    used_ids = [p[k] for p in gpu_parts + host_parts for k in ("nsname", "nsdetail", "textid") if k in p]
    if progress is not None:
        progress.stage(f"reading strings and threads of {fname}")
    remap = _remap_strings(con, schema, rd, strings, used_ids, warnings)

    def names_of(ids: np.ndarray, default: int) -> np.ndarray:
        if remap is None:
            return np.full(len(ids), default, dtype=np.int32)
        return remap(ids, default)

    for p in gpu_parts + host_parts:
        if "nsname" in p:
            p["name"] = names_of(p.pop("nsname"), p["name_default"])
        if "nsdetail" in p:
            p["detail"] = names_of(p.pop("nsdetail"), -1)
        if "final_name" in p:   # NVTX: COALESCE(text, StringIds[textId])
            fn = p.pop("final_name")
            tid_ids = p.pop("textid")
            ht = p.pop("has_text")
            fromid = names_of(tid_ids, p["name_default"])
            p["name"] = np.where(ht, fn, fromid).astype(np.int32)
        p.pop("name_default", None)

    # ---- tracks ------------------------------------------------------------
    proc_names, thread_names = _process_thread_names(con, schema)
    all_parts = gpu_parts + sync_parts + host_parts
    bounds_end = 0
    for p in all_parts:
        e = p["end_ns"] if "open" not in p else p["end_ns"][~p["open"]]
        if len(e):
            bounds_end = max(bounds_end, int(e.max()))
        del e
    for p in host_parts:
        op = p.pop("open", None)
        if op is not None and op.any():
            p["end_ns"][op] = np.maximum(p["start_ns"][op], bounds_end)
    if nvtx_unclosed:
        warnings.append(f"{nvtx_unclosed} NVTX range(s) never ended inside the capture; they are closed at the end of the trace")

    for p in gpu_parts + sync_parts:
        g = p.pop("gpid")
        pid = np.where(g >= 0, (g >> 24) & PID_MASK, -1)
        dev = p.pop("device")
        strm = p.pop("stream")
        device_wide = strm < 0 if p["kind"] is not SpanKind.GPU_SYNC else (strm < 0) | (strm >= 0xFFFFFFFF)
        key = np.where(device_wide, -1, strm)
        p["track"] = _tracks_for(b, pid, dev, key, device_wide, proc_names)
        p["pid"] = pid
        del g, pid, dev, strm, device_wide, key   # (the last part's would outlive the loop)
    for p in host_parts:
        g = p.pop("gtid")
        p["pid"] = np.where(g >= 0, (g >> 24) & PID_MASK, -1)
        p["track"] = _thread_tracks(b, g, proc_names, thread_names)
        del g

    # ---- flows: (pid, correlation) join -------------------------------------
    # (in a function, so that its full-length temporaries are gone before assembly)
    flows = list(_launch_flows(runtime_part, gpu_parts, sync_parts, all_parts, warnings))   # _assemble empties it

    for p in all_parts:
        p.pop("pid", None)

    # ---- meta ------------------------------------------------------------------
    meta: dict[str, Any] = {"source_format": "nsys", "source_file": os.path.basename(str(path))}
    meta["tool_versions"] = _versions(con, schema)
    used_devices = set()
    for p in gpu_parts:
        if len(p["track"]):
            tr = np.unique(p["track"])
            used_devices.update(int(d) for d in np.asarray(b.track_rows()["device"])[tr].tolist())
    meta["devices"] = _devices(con, schema, used_devices, warnings)
    sess = _session(con, schema)
    if sess:
        meta["session"] = sess
    warnings.extend(unit_warnings(all_parts, sess))
    for t, nb in sorted(rd.bad_rows.items()):
        warnings.append(f"skipped {nb} row(s) of {t} with a non-integer or out-of-range value in an integer column")
    for t, nb in sorted(rd.bad_ids.items()):
        warnings.append(f"{nb} row(s) of {t} have an id outside the 32-bit range; shown as unknown")
    if host_info.get("cpu_samples") or host_info.get("sched_threads"):
        meta["host_sampling"] = host_info
    rd_missing = sorted(set(rd.missing))
    meta["missing"] = missing + rd_missing
    for m in rd_missing:
        if m.endswith((".correlationId",)) and not m.startswith(SYNC_TABLE):
            warnings.append(f"{m} is absent: GPU work cannot be linked to launching API calls")
        elif m.endswith((".globalPid", ".globalTid")):
            warnings.append(f"{m} is absent: process/thread attribution is unavailable for that table")
    if not any(len(p["start_ns"]) for p in all_parts):
        warnings.append("the export contains no CUDA, NVTX or OS runtime events")
    meta["warnings"] = warnings
    b.meta = meta

    for metric, dev, ts, val in gpu_metrics:
        b.add_counters(b.track(TrackKind.COUNTER, device=dev, name=metric), ts, val)

    del runtime_part, gpu_parts, sync_parts, host_parts
    if progress is not None:
        progress.stage(f"building the trace of {fname}")
    return _assemble(b, all_parts, flows)

