"""Streaming reads of Nsight Systems tables into numpy columns.

``_Reader`` SELECTs a table chunk by chunk (``fetchmany``) into preallocated, narrow numpy columns
(a packed (hi, lo) pair of small ids halves the Python ints made per row; rows with a non-integer
value are skipped and counted), gives absent optional columns their defaults in SQL (noting them
as missing) and interns TEXT columns.  Also the small value helpers every table reader uses:
``_as_int``, enum tables (``_enum``) and per-distinct-id lookups (``_Lut``, ``_lookup``,
``_gather``).
"""
from __future__ import annotations

import itertools
import sqlite3
from typing import Any

import numpy as np


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
