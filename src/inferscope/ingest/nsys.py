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
"""
from __future__ import annotations

import itertools
import os
import re
import time
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from ..util.signals import SigintHandler
from ..errors import InputError
from ..trace.builder import TraceBuilder, assemble_counters, compute_depth_parent
from ..trace.kinds import CopyKind, FlowKind, MemKind, SpanKind, TrackKind
from ..trace.model import SPAN_COLUMNS, SPAN_DEFAULTS, Flows, Spans, Trace, Tracks

LOAD_OPTIONS: tuple[str, ...] = ("include_osrt", "include_overhead", "chunk_rows")

PID_MASK = 0xFFFFFF
DEFAULT_CHUNK_ROWS = 1 << 18

KERNEL_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL")
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNC_TABLE = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
GRAPH_TABLE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
NVTX_TABLE = "NVTX_EVENTS"
OSRT_TABLE = "OSRT_API"
OVERHEAD_TABLE = "PROFILER_OVERHEAD"
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")
GPU_INFO_TABLES = ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU")
# Tables whose presence says "this SQLite file is an Nsight Systems export".
_NSYS_MARKERS = ("StringIds", "ANALYSIS_DETAILS", "TARGET_INFO_SESSION_START_TIME", "ThreadNames",
                 *META_TABLES, *GPU_INFO_TABLES, *KERNEL_TABLES, RUNTIME_TABLE, NVTX_TABLE, OSRT_TABLE)
# What InferScope reads (reported as missing when absent).
_WANTED_TABLES = ("StringIds", KERNEL_TABLES[0], RUNTIME_TABLE, MEMCPY_TABLE, MEMSET_TABLE, SYNC_TABLE,
                  NVTX_TABLE, OSRT_TABLE, "PROCESSES", "ThreadNames", "ANALYSIS_DETAILS", "TARGET_INFO_GPU")

# NVTX event types (ENUM_NSYS_EVENT_TYPE)
NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND = 34, 59, 60, 70, 71
_NVTX_CAT = {NVTX_MARK: "NvtxMark", NVTX_PUSHPOP: "NvtxPushPopRange", NVTX_STARTEND: "NvtxStartEndRange",
             NVTXT_PUSHPOP: "NvtxtPushPopRange", NVTXT_STARTEND: "NvtxtStartEndRange"}
DRIVER_EVENT_CLASS = 1   # ENUM_NSYS_EVENT_CLASS: 0 CUDA runtime, 1 CUDA driver

# ENUM_CUDA_MEMCPY_OPER (name suffix after CUDA_MEMCPY_KIND_) -> CopyKind
_COPY_BY_NAME = {"UNKNOWN": CopyKind.UNKNOWN, "HTOD": CopyKind.H2D, "DTOH": CopyKind.D2H,
                 "HTOA": CopyKind.H2D, "ATOH": CopyKind.D2H, "ATOA": CopyKind.D2D, "ATOD": CopyKind.D2D,
                 "DTOA": CopyKind.D2D, "DTOD": CopyKind.D2D, "HTOH": CopyKind.H2H, "PTOP": CopyKind.P2P,
                 "UVM_HTOD": CopyKind.H2D, "UVM_DTOH": CopyKind.D2H, "UVM_DTOD": CopyKind.D2D}
_COPY_FALLBACK = [(0, "UNKNOWN", "Unknown"), (1, "HTOD", "Host-to-Device"), (2, "DTOH", "Device-to-Host"),
                  (3, "HTOA", "Host-to-Array"), (4, "ATOH", "Array-to-Host"), (5, "ATOA", "Array-to-Array"),
                  (6, "ATOD", "Array-to-Device"), (7, "DTOA", "Device-to-Array"), (8, "DTOD", "Device-to-Device"),
                  (9, "HTOH", "Host-to-Host"), (10, "PTOP", "Peer-to-Peer"), (11, "UVM_HTOD", "Unified Host-to-Device"),
                  (12, "UVM_DTOH", "Unified Device-to-Host"), (13, "UVM_DTOD", "Unified Device-to-Device")]
# ENUM_CUDA_MEM_KIND: nsys numbering (0 PAGEABLE, 1 PINNED, 2 DEVICE, 3 ARRAY, 4 MANAGED ...) -> MemKind
_MEM_BY_NAME = {"PAGEABLE": MemKind.PAGEABLE, "PINNED": MemKind.PINNED, "DEVICE": MemKind.DEVICE,
                "ARRAY": MemKind.ARRAY, "MANAGED": MemKind.MANAGED, "DEVICE_STATIC": MemKind.DEVICE,
                "MANAGED_STATIC": MemKind.MANAGED, "UNKNOWN": MemKind.UNKNOWN}
_MEM_FALLBACK = [(0, "PAGEABLE"), (1, "PINNED"), (2, "DEVICE"), (3, "ARRAY"), (4, "MANAGED"),
                 (5, "DEVICE_STATIC"), (6, "MANAGED_STATIC"), (7, "UNKNOWN")]
_SYNC_FALLBACK = {0: "Unknown", 1: "Event sync", 2: "Stream wait sync", 3: "Stream sync", 4: "Context sync"}


# ---------------------------------------------------------------------------
# connection and schema probing
# ---------------------------------------------------------------------------
def _connect(path) -> sqlite3.Connection:
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    uri = p.resolve().as_uri() + "?mode=ro&immutable=1"
    try:
        con = sqlite3.connect(uri, uri=True, check_same_thread=False)
        # names in a damaged or odd export may not be UTF-8: show them with U+FFFD, never fail
        con.text_factory = lambda b: b.decode("utf-8", "replace")
        con.execute("PRAGMA query_only = 1")
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as e:
        raise InputError(f"{p}: not a readable SQLite database ({e})") from None
    except UnicodeDecodeError:  # sqlite3 could not decode the error text of a damaged schema
        raise InputError(f"{p}: corrupt SQLite database (malformed schema)") from None
    return con


_MAX_TABLES = 10000


_WITH_RE = re.compile(r"\bWITH\b", re.IGNORECASE)
# Wall-clock guard for statements while the export holds views (arbitrary SQL): seconds.
VIEW_SQL_TIMEOUT_S = 120.0


def _schema(con, skipped: list | None = None) -> dict[str, list[str]]:
    """Tables (and plain views) with their columns.

    A view is arbitrary SQL: one with a common table expression (``WITH``, the only way SQL
    can recurse; a recursive CTE may never finish) and virtual tables are never read; they are
    listed in ``skipped``.  Other views are read under a wall-clock guard (``load``)."""
    out = {}
    rows = con.execute("SELECT type, name, sql FROM sqlite_master WHERE type IN ('table','view') "
                       f"LIMIT {_MAX_TABLES}").fetchall()
    for typ, t, sql in rows:
        if not isinstance(t, str) or "]" in t:
            continue
        sql = sql if isinstance(sql, str) else ""
        if (typ == "view" and _WITH_RE.search(sql)) or sql.lstrip()[:14].upper().startswith("CREATE VIRTUAL"):
            if skipped is not None:
                skipped.append(t)
            continue
        out[t] = [r[1] for r in con.execute(f"PRAGMA table_info([{t}])") if isinstance(r[1], str)]
    return out


def _is_nsys(schema: dict) -> bool:
    return any(t in schema for t in _NSYS_MARKERS) or any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in schema)


def _versions(con, schema) -> dict:
    for t in META_TABLES:
        if t in schema and {"name", "value"} <= set(schema[t]):
            rows = dict(con.execute(f"SELECT name, value FROM [{t}] WHERE name IN "
                                    "('EXPORT_SCHEMA_VERSION','EXPORT_PRODUCT_VERSION')").fetchall())
            out = {}
            if rows.get("EXPORT_PRODUCT_VERSION"):
                out["nsys"] = str(rows["EXPORT_PRODUCT_VERSION"])
            if rows.get("EXPORT_SCHEMA_VERSION"):
                out["nsys_export_schema"] = str(rows["EXPORT_SCHEMA_VERSION"])
            return out
    return {}


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


# ---------------------------------------------------------------------------
# streaming reads
# ---------------------------------------------------------------------------
class _Reader:
    def __init__(self, con, schema, chunk_rows: int, progress=None, name: str = "") -> None:
        self.con = con
        self.schema = schema
        self.chunk = max(1024, int(chunk_rows))
        self.progress = progress             # util.progress.Progress or None: one stage per table read
        self.name = name
        self.missing: list[str] = []
        self.bad_rows: dict[str, int] = {}   # rows skipped: a non-integer value in an integer column
        self.bad_ids: dict[str, int] = {}    # name ids outside 0..2^32-2: shown as unknown

    def has(self, table: str, col: str) -> bool:
        return col in self.schema.get(table, ())

    def expr(self, table: str, col: str, default: int, note_missing: bool = True) -> str:
        if self.has(table, col):
            return f"COALESCE([{col}], {int(default)})"
        if note_missing:
            self.missing.append(f"{table}.{col}")
        return str(int(default))

    def rows_bound(self, table: str, where: str = "") -> int:
        """An upper bound on the rows SELECTed from table, for preallocating the columns.

        The rowid range costs two B-tree lookups; only when it is unavailable (views, WITHOUT
        ROWID tables, empty tables) or implausibly sparse is ``count(*)`` (a full scan) used.
        Over-allocation is cheap: untouched pages of np.empty are never committed, and the
        columns are shrunk in place at the end.
        """
        try:
            lo, hi = self.con.execute(f"SELECT min(rowid), max(rowid) FROM [{table}]").fetchone()
        except sqlite3.Error:
            lo = hi = None
        if isinstance(lo, int) and isinstance(hi, int) and 0 <= hi - lo < (1 << 25):
            return hi - lo + 1
        try:
            sql = f"SELECT count(*) FROM [{table}]" + (f" WHERE {where}" if where else "")
            return int(self.con.execute(sql).fetchone()[0] or 0)
        except sqlite3.Error:
            return 0   # the SELECT itself reports the problem; columns grow as needed

    def columns(self, table: str, exprs: list, dtypes: list, where: str = "") -> list[np.ndarray]:
        """SELECT exprs FROM table -> list of numpy columns, streamed in chunks.

        The columns are preallocated (``rows_bound``) and filled chunk by chunk, so no list
        of chunks is ever concatenated (which would briefly hold every column twice).

        An expr may be a pair (hi, lo) of small non-negative integer expressions: SQLite packs
        them into one 64-bit value (hi << 32 | lo), which halves the Python ints created per
        row; they are unpacked in numpy chunk by chunk (lo == 0xFFFFFFFF, i.e. a -1 default,
        becomes -1).
        """
        sel: list[str] = []
        packed: list[bool] = []
        out_dtypes: list = []
        it = iter(dtypes)
        for e in exprs:
            if isinstance(e, tuple):
                # hi must fit 32 signed bits and lo 32 unsigned bits; anything else (text, huge ids)
                # becomes hi -1 / lo 0xFFFFFFFE, counted and treated as unknown (never wrapped)
                hi = f"(CASE WHEN ({e[0]}) BETWEEN -2147483648 AND 2147483647 THEN ({e[0]}) ELSE -1 END)"
                lo = f"(CASE WHEN ({e[1]}) BETWEEN -1 AND 4294967293 THEN (({e[1]}) & 4294967295) ELSE 4294967294 END)"
                sel.append(f"(({hi} << 32) | {lo})")
                packed.append(True)
                out_dtypes += [next(it), next(it)]
            else:
                sel.append(e)
                packed.append(False)
                out_dtypes.append(next(it))
        k = len(sel)
        prog = self.progress
        if prog is not None:
            prog.stage(f"reading table {table} of {self.name}", unit="rows")
        cap = self.rows_bound(table, where)
        out = [np.empty(cap, dtype=d) for d in out_dtypes]
        sql = f"SELECT {', '.join(sel)} FROM [{table}]" + (f" WHERE {where}" if where else "")
        cur = self.con.execute(sql)
        chain = itertools.chain.from_iterable
        pos = 0
        while True:
            rows = cur.fetchmany(self.chunk)
            if not rows:
                break
            m = len(rows)
            try:
                a = np.fromiter(chain(rows), dtype=np.int64, count=m * k).reshape(m, k)
            except (TypeError, ValueError, OverflowError):
                rows, nbad = _int_rows(rows)   # text, NULL or out-of-range values: skip those rows
                self.bad_rows[table] = self.bad_rows.get(table, 0) + nbad
                m = len(rows)
                if not m:
                    continue
                a = np.fromiter(chain(rows), dtype=np.int64, count=m * k).reshape(m, k)
            del rows
            if pos + m > cap:   # the bound was wrong (rows added to a live file?): grow in place
                cap = max(2 * cap, pos + m)
                for c in out:
                    c.resize(cap, refcheck=False)
            j = 0
            for i in range(k):
                v = a[:, i]
                if packed[i]:
                    out[j][pos:pos + m] = v >> 32
                    lo = v & 0xFFFFFFFF
                    big = lo == 0xFFFFFFFE   # out of 32-bit range in the file (SQL below)
                    if big.any():
                        self.bad_ids[table] = self.bad_ids.get(table, 0) + int(big.sum())
                    lo[(lo == 0xFFFFFFFF) | big] = -1
                    out[j + 1][pos:pos + m] = lo
                    j += 2
                else:
                    out[j][pos:pos + m] = v
                    j += 1
            del a
            pos += m
            if prog is not None:
                prog.update(pos)
        if pos < cap:   # shrink in place (realloc; no copy for large, mmap-backed columns)
            for c in out:
                c.resize(pos, refcheck=False)
        return out

    def texts(self, table: str, col: str, where: str, strings) -> np.ndarray:
        """Intern the non-NULL TEXT values of col (in table order) -> int32 string ids."""
        cur = self.con.execute(f"SELECT [{col}] FROM [{table}] WHERE ({where}) AND [{col}] IS NOT NULL")
        parts = []
        while True:
            rows = cur.fetchmany(self.chunk)
            if not rows:
                break
            parts.append(strings.intern_many(r[0] if isinstance(r[0], str) else str(r[0]) for r in rows))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)


def _int_rows(rows: list) -> tuple[list, int]:
    """Keep the rows whose values are all integers within int64 (finite floats are truncated)."""
    out = []
    bad = 0
    lo, hi = -(1 << 63), (1 << 63) - 1
    for r in rows:
        ok = True
        vals = []
        for v in r:
            if type(v) is int and lo <= v <= hi:
                vals.append(v)
            elif type(v) is float and v == v and -9.2e18 < v < 9.2e18:
                vals.append(int(v))
            else:
                ok = False
                break
        if ok:
            out.append(tuple(vals))
        else:
            bad += 1
    return out, bad


def _as_int(v) -> int | None:
    """An integer SQLite value within int64, else None (text, blobs, reals, huge values)."""
    return v if type(v) is int and -(1 << 63) <= v < (1 << 63) else None


def _enum(con, schema, table) -> list[tuple]:
    if table in schema and {"id", "name"} <= set(schema[table]):
        lab = "label" if "label" in schema[table] else "name"
        try:
            return [tuple(r) for r in con.execute(f"SELECT id, name, {lab} FROM [{table}] "
                                                  "WHERE typeof(id) = 'integer' LIMIT 100000")]
        except sqlite3.Error:
            return []
    return []


class _Lut:
    """An enum lookup {id: value}: sized by the enum's rows, never by its largest id."""

    def __init__(self, rows: dict[int, Any], default) -> None:
        self.rows = rows
        self.default = default

    def __getitem__(self, k: int):
        return self.rows.get(k, self.default)


def _lookup(table_rows: dict[int, Any], size_hint: int, default) -> _Lut:
    return _Lut(table_rows, default)


def _gather(table: _Lut, idx: np.ndarray, default) -> np.ndarray:
    """table[idx] per row, one dict lookup per *distinct* id (np.unique), default when absent."""
    if not len(idx):
        return np.zeros(0, dtype=np.int64)
    u, inv = np.unique(idx, return_inverse=True)
    lut = np.fromiter((table.rows.get(k, default) for k in u.tolist()), dtype=np.int64, count=len(u))
    return lut[inv.reshape(-1)]


# ---------------------------------------------------------------------------
# load
# ---------------------------------------------------------------------------
class _Interrupt(SigintHandler):
    """Ctrl-C while SQLite runs C code: the SIGINT handler sets a flag and SQLite's progress
    handler (called every few thousand VM steps) aborts the statement, so a long query stops
    within milliseconds and the load ends with KeyboardInterrupt (exit 130), not a database error."""

    def __init__(self, con) -> None:
        self.hit = False
        self.deadline = None     # set when the export has views
        self.timed_out = False
        con.set_progress_handler(self._check, 20000)

    def _check(self) -> int:
        if self.hit:
            return 1
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.timed_out = True
            return 1
        return 0

    def on_sigint(self) -> None:
        self.hit = True
        raise KeyboardInterrupt


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


def _host_call_part(rd, t: str, kind: SpanKind, cat: int, name_default: int) -> dict:
    """Rows of a host-call table with (start, end, globalTid, nameId): OSRT_API, PROFILER_OVERHEAD."""
    st, en, gtid, nid = rd.columns(t, [rd.expr(t, "start", 0), "COALESCE([end], [start])" if rd.has(t, "end") else "[start]",
                                       rd.expr(t, "globalTid", -1), rd.expr(t, "nameId", -1)],
                                   [np.int64, np.int64, np.int64, np.int64])
    return dict(start_ns=st, end_ns=en, gtid=gtid, nsname=nid, kind=kind, cat=cat, name_default=name_default)


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

    # ---- GPU activities ----------------------------------------------------
    ktab = next((t for t in KERNEL_TABLES if t in schema), None)
    if ktab:
        name_col = "demangledName" if rd.has(ktab, "demangledName") else ("shortName" if rd.has(ktab, "shortName") else None)
        if name_col is None:
            rd.missing.append(f"{ktab}.demangledName")
        st, en, dev, strm, corr, gpid, nm, sn = rd.columns(ktab, [
            rd.expr(ktab, "start", 0), rd.expr(ktab, "end", 0),
            (rd.expr(ktab, "deviceId", 0), rd.expr(ktab, "streamId", 0)),
            rd.expr(ktab, "correlationId", -1), rd.expr(ktab, "globalPid", -1),
            (rd.expr(ktab, name_col, -1, False) if name_col else "-1", rd.expr(ktab, "shortName", -1))],
            [np.int64, np.int64, np.int32, np.int64, np.int64, np.int64, np.int64, np.int64])
        if name_col is None:
            nm = np.full(len(st), -1, dtype=np.int64)
        gpu_parts.append(dict(start_ns=st, end_ns=en, device=dev, stream=strm, correlation=corr, gpid=gpid,
                              nsname=nm, nsdetail=sn, kind=SpanKind.KERNEL, cat=intern(ktab),
                              name_default=intern("kernel")))
        del st, en, dev, strm, corr, gpid, nm, sn   # the part dicts own the arrays now
    else:
        warnings.append("no kernel table (CUPTI_ACTIVITY_KIND_KERNEL): the capture has no CUDA kernels "
                        "(was it taken with --trace=cuda?)")

    if MEMCPY_TABLE in schema:
        t = MEMCPY_TABLE
        st, en, dev, strm, corr, gpid, nbytes, ck, sk, dk = rd.columns(t, [
            rd.expr(t, "start", 0), rd.expr(t, "end", 0), rd.expr(t, "deviceId", 0), rd.expr(t, "streamId", 0),
            rd.expr(t, "correlationId", -1), rd.expr(t, "globalPid", -1), rd.expr(t, "bytes", -1),
            rd.expr(t, "copyKind", 0), rd.expr(t, "srcKind", 7), rd.expr(t, "dstKind", 7)],
            [np.int64, np.int64, np.int32, np.int64, np.int64, np.int64, np.int64, np.int16, np.int16, np.int16])
        rows = _enum(con, schema, "ENUM_CUDA_MEMCPY_OPER") or [(i, "CUDA_MEMCPY_KIND_" + n, lab) for i, n, lab in _COPY_FALLBACK]
        ck_map = _lookup({int(i): int(_COPY_BY_NAME.get(str(n).replace("CUDA_MEMCPY_KIND_", ""), CopyKind.UNKNOWN))
                          for i, n, _ in rows}, 16, int(CopyKind.UNKNOWN))
        ck_name = {int(i): intern(f"[CUDA memcpy {lab}]") for i, _, lab in rows}
        nm_map = _lookup(ck_name, 16, intern("[CUDA memcpy Unknown]"))
        mrows = _enum(con, schema, "ENUM_CUDA_MEM_KIND") or [(i, "CUDA_MEMOPR_MEMORY_KIND_" + n, n) for i, n in _MEM_FALLBACK]
        mk_map = _lookup({int(i): int(_MEM_BY_NAME.get(str(n).replace("CUDA_MEMOPR_MEMORY_KIND_", ""), MemKind.UNKNOWN))
                          for i, n, _ in mrows}, 8, int(MemKind.UNKNOWN))
        gpu_parts.append(dict(start_ns=st, end_ns=en, device=dev, stream=strm, correlation=corr, gpid=gpid,
                              name=_gather(nm_map, ck.astype(np.int64), nm_map[0]).astype(np.int32),
                              bytes=nbytes, kind=SpanKind.MEMCPY, cat=intern(t),
                              copy_kind=_gather(ck_map, ck.astype(np.int64), int(CopyKind.UNKNOWN)).astype(np.uint8),
                              src_mem=_gather(mk_map, sk.astype(np.int64), 0).astype(np.uint8),
                              dst_mem=_gather(mk_map, dk.astype(np.int64), 0).astype(np.uint8)))
        del ck, sk, dk, st, en, dev, strm, corr, gpid, nbytes

    if MEMSET_TABLE in schema:
        t = MEMSET_TABLE
        st, en, dev, strm, corr, gpid, nbytes, mk = rd.columns(t, [
            rd.expr(t, "start", 0), rd.expr(t, "end", 0), rd.expr(t, "deviceId", 0), rd.expr(t, "streamId", 0),
            rd.expr(t, "correlationId", -1), rd.expr(t, "globalPid", -1), rd.expr(t, "bytes", -1),
            rd.expr(t, "memKind", 7)],
            [np.int64, np.int64, np.int32, np.int64, np.int64, np.int64, np.int64, np.int16])
        mrows = _enum(con, schema, "ENUM_CUDA_MEM_KIND") or [(i, "CUDA_MEMOPR_MEMORY_KIND_" + n, n) for i, n in _MEM_FALLBACK]
        mk_map = _lookup({int(i): int(_MEM_BY_NAME.get(str(n).replace("CUDA_MEMOPR_MEMORY_KIND_", ""), MemKind.UNKNOWN))
                          for i, n, _ in mrows}, 8, int(MemKind.UNKNOWN))
        gpu_parts.append(dict(start_ns=st, end_ns=en, device=dev, stream=strm, correlation=corr, gpid=gpid,
                              name=intern("[CUDA memset]"), bytes=nbytes, kind=SpanKind.MEMSET, cat=intern(t),
                              dst_mem=_gather(mk_map, mk.astype(np.int64), 0).astype(np.uint8)))
        del st, en, dev, strm, corr, gpid, nbytes, mk

    if GRAPH_TABLE in schema:
        t = GRAPH_TABLE
        st, en, dev, strm, corr, gpid, gid = rd.columns(t, [
            rd.expr(t, "start", 0), rd.expr(t, "end", 0), rd.expr(t, "deviceId", 0), rd.expr(t, "streamId", 0),
            rd.expr(t, "correlationId", -1), rd.expr(t, "globalPid", -1), rd.expr(t, "graphId", -1)],
            [np.int64, np.int64, np.int32, np.int64, np.int64, np.int64, np.int64])
        ug, inv = np.unique(gid, return_inverse=True)
        gname = np.asarray([intern(f"[CUDA graph {int(g)}]" if g >= 0 else "[CUDA graph]") for g in ug.tolist()],
                           dtype=np.int32)
        gpu_parts.append(dict(start_ns=st, end_ns=en, device=dev, stream=strm, correlation=corr, gpid=gpid,
                              name=gname[inv] if len(ug) else np.zeros(0, np.int32),
                              kind=SpanKind.GRAPH_LAUNCH, cat=intern(t)))
        del st, en, dev, strm, corr, gpid, gid, inv

    if SYNC_TABLE in schema:
        t = SYNC_TABLE
        st, en, dev, strm, corr, gpid, sty = rd.columns(t, [
            rd.expr(t, "start", 0), rd.expr(t, "end", 0), rd.expr(t, "deviceId", 0), rd.expr(t, "streamId", -1),
            rd.expr(t, "correlationId", -1), rd.expr(t, "globalPid", -1), rd.expr(t, "syncType", 0)],
            [np.int64, np.int64, np.int32, np.int64, np.int64, np.int64, np.int16])
        rows = _enum(con, schema, "ENUM_CUPTI_SYNC_TYPE")
        labels = {int(i): lab for i, _, lab in rows} if rows else dict(_SYNC_FALLBACK)
        nm_map = _lookup({k: intern(f"[CUDA {v}]") for k, v in labels.items()}, 8, intern("[CUDA sync]"))
        sync_parts.append(dict(start_ns=st, end_ns=en, device=dev, stream=strm, correlation=corr, gpid=gpid,
                               name=_gather(nm_map, sty.astype(np.int64), nm_map[0]).astype(np.int32),
                               kind=SpanKind.GPU_SYNC, cat=intern(t)))
        del st, en, dev, strm, corr, gpid, sty

    # ---- host-side -------------------------------------------------------
    runtime_part = None
    if RUNTIME_TABLE in schema:
        t = RUNTIME_TABLE
        st, en, ecl, nid, gtid, corr = rd.columns(t, [
            rd.expr(t, "start", 0), "COALESCE([end], [start])" if rd.has(t, "end") else rd.expr(t, "start", 0),
            (rd.expr(t, "eventClass", 0), rd.expr(t, "nameId", -1)), rd.expr(t, "globalTid", -1),
            rd.expr(t, "correlationId", -1)],
            [np.int64, np.int64, np.int16, np.int64, np.int64, np.int64])
        kind = np.where(ecl == DRIVER_EVENT_CLASS, np.uint8(SpanKind.DRIVER), np.uint8(SpanKind.RUNTIME)).astype(np.uint8)
        del ecl
        runtime_part = dict(start_ns=st, end_ns=en, gtid=gtid, correlation=corr, nsname=nid, kind=kind,
                            cat=intern(t), name_default=intern("cuda_api"))
        host_parts.append(runtime_part)
        del st, en, gtid, corr, nid, kind
    elif ktab:
        warnings.append("no CUPTI_ACTIVITY_KIND_RUNTIME table: kernels cannot be linked to their launching API calls")

    nvtx_unclosed = 0
    if NVTX_TABLE in schema:
        t = NVTX_TABLE
        types = (NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND)
        where = f"[eventType] IN ({','.join(map(str, types))})" if rd.has(t, "eventType") else "1"
        has_text = rd.has(t, "text")
        st, en, ety, gtid, tid_, has_t = rd.columns(t, [
            rd.expr(t, "start", 0), rd.expr(t, "end", -(1 << 62)), rd.expr(t, "eventType", NVTX_PUSHPOP),
            rd.expr(t, "globalTid", -1), rd.expr(t, "textId", -1),
            "([text] IS NOT NULL)" if has_text else "0"], [np.int64, np.int64, np.int16, np.int64, np.int64, np.bool_],
            where=where)
        if not has_text and not rd.has(t, "textId"):
            rd.missing.append(f"{t}.text")
        name = np.full(len(st), -1, dtype=np.int64)   # final ids for text rows; nsys ids otherwise
        if has_text and has_t.any():
            name[has_t] = rd.texts(t, "text", where, strings)
        is_mark = ety == NVTX_MARK
        open_ = (en == -(1 << 62)) & ~is_mark
        nvtx_unclosed = int(open_.sum())
        en = np.where(is_mark, st, en)
        kind = np.where(is_mark, np.uint8(SpanKind.MARK), np.uint8(SpanKind.ANNOTATION)).astype(np.uint8)
        cat_map = {k: intern(v) for k, v in _NVTX_CAT.items()}
        cat = np.full(len(st), intern("NVTX"), dtype=np.int32)
        for k, v in cat_map.items():
            cat[ety == k] = v
        host_parts.append(dict(start_ns=st, end_ns=en, gtid=gtid, final_name=name, textid=tid_, has_text=has_t,
                               kind=kind, cat=cat, open=open_, name_default=intern("(unnamed range)")))
        del st, en, ety, gtid, tid_, has_t, name, is_mark, open_, kind, cat

    for t, wanted, kind, default in ((OSRT_TABLE, include_osrt, SpanKind.OS_RUNTIME, "osrt"),
                                     (OVERHEAD_TABLE, include_overhead, SpanKind.OVERHEAD, "profiler overhead")):
        if wanted and t in schema:
            host_parts.append(_host_call_part(rd, t, kind, intern(t), intern(default)))

    # ---- host samples and scheduling (CPU_SAMPLE spans, live classes), GPU metrics ----------
    from . import nsys_host
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


def _launch_flows(runtime_part, gpu_parts, sync_parts, all_parts, warnings):
    """(pid, correlation) join of GPU activities to runtime/driver rows.

    Returns (src, dst, kind) in provisional indices (parts concatenated in order), or
    (None, None, None) when there are none.
    """
    offs = {}
    off = 0
    for p in all_parts:
        offs[id(p)] = off
        off += len(p["start_ns"])
    if runtime_part is None or not len(runtime_part["start_ns"]):
        return None, None, None
    rkey = _corr_key(runtime_part["pid"], runtime_part["correlation"])
    valid = np.flatnonzero(rkey >= 0)
    o = valid[np.argsort(rkey[valid], kind="stable")]
    del valid
    rk_sorted = rkey[o]
    del rkey
    dup = int(np.count_nonzero(rk_sorted[1:] == rk_sorted[:-1])) if len(rk_sorted) > 1 else 0
    targets = [(q, FlowKind.LAUNCH) for q in gpu_parts] + [(q, FlowKind.OTHER) for q in sync_parts]
    hits = []
    for p, fk in targets:
        k = _corr_key(p["pid"], p["correlation"])
        if len(rk_sorted):
            pos = np.searchsorted(rk_sorted, k, side="left")
            np.minimum(pos, len(rk_sorted) - 1, out=pos)
            hit = rk_sorted[pos] == k
            hit &= k >= 0
        else:
            pos = np.zeros(len(k), dtype=np.int64)
            hit = np.zeros(len(k), dtype=bool)
        if fk == FlowKind.LAUNCH and len(k):
            miss = int(np.count_nonzero(k >= 0)) - int(np.count_nonzero(hit))
            if miss and p["kind"] is SpanKind.KERNEL:
                warnings.append(f"{miss} of {len(k)} kernels have no matching runtime/driver call on (pid, correlationId)")
        del k
        dst_local = np.flatnonzero(hit)
        src_pos = pos[dst_local]     # positions in rk_sorted
        del pos, hit
        hits.append((p, fk, dst_local, src_pos))
    if dup:
        warnings.append(f"{dup} runtime/driver rows share a (pid, correlationId) with another row; the first is used for launch links")
    del rk_sorted
    # one output array per end, filled part by part (no list of pieces to concatenate)
    nf = sum(len(h[2]) for h in hits)
    src = np.empty(nf, dtype=np.int64)
    dst = np.empty(nf, dtype=np.int64)
    kind = np.empty(nf, dtype=np.uint8)
    i = 0
    r_off = offs[id(runtime_part)]
    while hits:
        p, fk, dst_local, src_pos = hits.pop(0)
        m = len(dst_local)
        np.add(o[src_pos], r_off, out=src[i:i + m])
        del src_pos
        np.add(dst_local, offs[id(p)], out=dst[i:i + m])
        del dst_local
        kind[i:i + m] = int(fk)
        i += m
    return src, dst, kind


def _corr_key(pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    ok = (pid >= 0) & (corr >= 0) & (corr <= 0xFFFFFFFF)
    return np.where(ok, (pid.astype(np.int64) << 32) | corr.astype(np.int64), -1)


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


def _span_order(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Permutation sorting spans by (start, -end), stable: exactly ``np.lexsort((-ends, starts))``.

    One stable argsort of start (timsort: the parts are each nearly sorted, so this is a
    merge of long runs, ~10x cheaper than lexsort at 20M rows), then only the runs of equal
    starts are re-sorted by -end.
    """
    o = np.argsort(starts, kind="stable")
    if len(o) < 2:
        return o
    s = starts[o]
    eq = s[1:] == s[:-1]
    if eq.any():
        member = np.zeros(len(o), dtype=bool)
        member[1:] = eq
        member[:-1] |= eq
        tp = np.flatnonzero(member)
        del member
        sub = np.lexsort((-ends[o[tp]], s[tp]))   # stable: provisional order kept on full ties
        o[tp] = o[tp][sub]
    return o


def _assemble(b: TraceBuilder, parts: list[dict], flows: list) -> Trace:
    """Build the sorted span columns from the parts with bounded memory.

    Only start/end are ever concatenated; every other column is scattered from the parts
    straight into its sorted position (one preallocated output, each part's column dropped
    as soon as it is placed), so an unsorted full-length copy of a column never exists.
    ``parts`` and ``flows`` ([src, dst, kind] in provisional indices) are emptied, so the
    caller's references do not keep anything alive.
    """
    fsrc, fdst, fkind = flows
    flows.clear()
    n = sum(len(p["start_ns"]) for p in parts)
    tracks = Tracks(**{k: np.asarray(v) for k, v in b.track_rows().items()}) if b.n_tracks else Tracks.empty()
    sizes = [len(p["start_ns"]) for p in parts]
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64).tolist()

    def concat(key, dtype):
        out = np.empty(n, dtype=dtype)
        for p, a, z in zip(parts, offs[:-1], offs[1:]):
            out[a:z] = p.pop(key)
        return out

    starts = concat("start_ns", np.int64)
    ends = concat("end_ns", np.int64)
    np.maximum(ends, starts, out=ends)  # never a negative duration
    order = _span_order(starts, ends)
    cols = {"start_ns": starts[order]}
    del starts
    cols["end_ns"] = ends[order]
    del ends
    # inverse permutation: provisional index -> sorted position (int32 halves its size)
    idt = np.int32 if n < (1 << 31) else np.int64
    inv = np.empty(n, dtype=idt)
    inv[order] = np.arange(n, dtype=idt)
    del order
    for k, dtype in SPAN_COLUMNS.items():
        if k in cols:
            continue
        if k in ("depth", "parent"):
            # never set by parts; compute_depth_parent (below) replaces both with fresh arrays.
            # np.zeros is calloc'd: the placeholder costs no resident memory.
            cols[k] = np.zeros(n, dtype=dtype)
            for p in parts:
                p.pop(k, None)
            continue
        col = np.empty(n, dtype=dtype)
        for p, a, z in zip(parts, offs[:-1], offs[1:]):
            v = p.pop(k, None)
            if v is None:
                v = SPAN_DEFAULTS.get(k, -1)
            if np.ndim(v) == 0:
                col[inv[a:z]] = int(v)
            else:
                col[inv[a:z]] = np.asarray(v, dtype=dtype)
            del v
        cols[k] = col
        del col
    spans = Spans(**cols)
    del cols
    if fsrc is not None and len(fsrc):
        fl = Flows(src=inv[fsrc], dst=inv[fdst], kind=fkind)
    else:
        fl = Flows.empty()
    del inv, fsrc, fdst, fkind
    ctr = assemble_counters(b._counter_chunks)      # GPU_METRICS
    trace = Trace(strings=b.strings, tracks=tracks, spans=spans, flows=fl,
                  counters=ctr, meta=dict(b.meta))
    compute_depth_parent(trace)
    return trace
