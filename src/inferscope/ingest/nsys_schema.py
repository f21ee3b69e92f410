"""Nsight Systems export as a SQLite database: opening it and probing what it holds.

The table names InferScope knows, the read-only immutable connection (``_connect``), the probe of
tables and plain views with their columns (``_schema``; views with ``WITH`` and virtual tables are
skipped), the "is this an Nsight Systems export" test (``_is_nsys``), the tool versions recorded in
the export (``_versions``), and ``_Interrupt``: the SQLite progress handler that turns Ctrl-C or
the views' wall-clock guard into an aborted statement.  Nothing here reads event rows
(nsys_reader.py does).
"""
from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path

from ..util.signals import SigintHandler
from ..errors import InputError

PID_MASK = 0xFFFFFF

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
