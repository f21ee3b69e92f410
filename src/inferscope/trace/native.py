"""InferScope's own trace format (``.iscope``).

A zip archive (stored, not deflated: loading is a memcpy) holding:
  inferscope.json        format marker, version, metadata
  strings.bin/.off       UTF-8 blob + int64 offsets of the string table
  <table>.<column>.npy   one numpy array per column of tracks/spans/flows/counters
  facts.msgpack          optional: the live sampler's recorded decision inputs (collect/facts.py), kept as bytes
Fast for millions of events: no per-event Python on either side.
"""
from __future__ import annotations

import io
import json
import os
import zipfile

import numpy as np

from ..errors import InputError
from ..util.atomic import atomic_open
from ..util.decompress import DEFAULT_MAX_DECOMPRESSED, decompress_limit  # the members' total size is capped too
from .model import Counters, Flows, Spans, Trace, Tracks
from .strings import StringTable
from .validate import check

FORMAT_NAME = "inferscope-trace"
FORMAT_VERSION = 1
MARKER = "inferscope.json"
FACTS_MEMBER = "facts.msgpack"   # (collect/facts.py MEMBER)
_TABLES = {"tracks": Tracks, "spans": Spans, "flows": Flows, "counters": Counters}


def _npy_bytes(a: np.ndarray) -> bytes:
    b = io.BytesIO()
    np.save(b, np.ascontiguousarray(a), allow_pickle=False)
    return b.getvalue()


def save(trace: Trace, path) -> None:
    strs = trace.strings.as_list()
    enc = [s.encode("utf-8", "surrogatepass") for s in strs]
    offs = np.zeros(len(enc) + 1, dtype=np.int64)
    if enc:
        offs[1:] = np.cumsum([len(e) for e in enc])
    header = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "meta": trace.meta,
              "counts": {k: len(getattr(trace, k)) for k in _TABLES}}
    with atomic_open(path, "wb", compress=False) as f:   # the own format, whatever the file name
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
            z.writestr(MARKER, json.dumps(header, default=str))
            z.writestr("strings.bin", b"".join(enc))
            z.writestr("strings.off.npy", _npy_bytes(offs))
            for tname, cls in _TABLES.items():
                table = getattr(trace, tname)
                for col in cls.COLUMNS:
                    z.writestr(f"{tname}.{col}.npy", _npy_bytes(getattr(table, col)))
            if trace.facts:
                z.writestr(FACTS_MEMBER, trace.facts)


def is_native(path) -> bool:
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"PK\x03\x04":
                return False
        with zipfile.ZipFile(path) as z:
            return MARKER in z.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


# Bounds for reading a zip whose headers are untrusted.
_MAX_HEADER = 1 << 20                     # inferscope.json
_MAX_JSON_DEPTH = 64


def _json_depth_ok(text: bytes, limit: int = _MAX_JSON_DEPTH) -> bool:
    """True when no bracket nesting in ``text`` exceeds ``limit`` (strings skipped)."""
    depth = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == 0x5C:
                esc = True
            elif ch == 0x22:
                in_str = False
        elif ch == 0x22:
            in_str = True
        elif ch in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return False
        elif ch in (0x5D, 0x7D):
            depth -= 1
    return True


def _npy(raw: bytes, member: str, dtype) -> np.ndarray:
    """A 1-D array of ``dtype`` from .npy bytes, checked against the header before any allocation."""
    f = io.BytesIO(raw)
    ver = np.lib.format.read_magic(f)
    if ver == (1, 0):
        shape, fortran, dt = np.lib.format.read_array_header_1_0(f, max_header_size=10000)
    elif ver == (2, 0):
        shape, fortran, dt = np.lib.format.read_array_header_2_0(f, max_header_size=10000)
    else:
        raise ValueError(f"{member}: unsupported npy version {ver}")
    if dt.hasobject or dt.kind not in "iufb":
        raise ValueError(f"{member}: unexpected dtype {dt}")
    if len(shape) != 1:
        raise ValueError(f"{member}: expected a 1-D column, got shape {shape}")
    count = int(shape[0])
    off = f.tell()
    if count < 0 or count * dt.itemsize != len(raw) - off:
        raise ValueError(f"{member}: header says {count} values, the member holds {len(raw) - off} bytes")
    a = np.frombuffer(raw, dtype=dt, count=count, offset=off)
    if np.dtype(dtype) != dt:
        if dt.kind == "f" and np.dtype(dtype).kind != "f":
            raise ValueError(f"{member}: float data in an integer column")
        info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
        if info is not None and count and (a.min() < info.min or a.max() > info.max):
            raise ValueError(f"{member}: values out of range for {np.dtype(dtype)}")
        a = a.astype(dtype)
    return a


def load(path, max_decompressed: int | None = None) -> Trace:
    """Load an .iscope file; every structural problem is an InputError (one line)."""
    name = getattr(path, "name", None) or str(path)
    try:
        trace = _load(path, DEFAULT_MAX_DECOMPRESSED if max_decompressed is None else int(max_decompressed),
                      max_decompressed)
    except InputError:
        raise
    except MemoryError:
        raise InputError(f"{path}: corrupt InferScope trace (a column is too large to load)") from None
    except Exception as e:  # untrusted container: any failure to parse it is bad input, not a bug
        msg = " ".join(str(e).split())[:200]
        raise InputError(f"{path}: corrupt or truncated InferScope trace ({type(e).__name__}: {msg})") from None
    return check(trace, str(name))


def _load(path, cap: int, explicit: int | None = None) -> Trace:
    with zipfile.ZipFile(path) as z:
        infos = {}
        total = 0
        for zi in z.infolist():
            if zi.flag_bits & 0x1:
                raise InputError(f"{path}: corrupt InferScope trace (encrypted member {zi.filename!r})")
            if zi.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise InputError(f"{path}: corrupt InferScope trace (unsupported compression in {zi.filename!r})")
            infos[zi.filename] = zi
        if MARKER not in infos:
            raise InputError(f"{path}: a zip file but not an InferScope trace")
        deflated = 0
        for zi in infos.values():
            if zi.filename in (MARKER, "strings.bin", FACTS_MEMBER) or zi.filename.endswith(".npy"):
                total += zi.file_size
                if zi.compress_type == zipfile.ZIP_DEFLATED:
                    deflated += zi.file_size
                elif zi.file_size != zi.compress_size:
                    raise InputError(f"{path}: corrupt InferScope trace (size mismatch in {zi.filename!r})")
        # stored members are bounded by the file itself; deflated ones (InferScope never writes
        # them) by the same caps as a .json.gz (ratio to the file size, absolute)
        try:
            fsize = os.path.getsize(path)
        except (OSError, TypeError):
            fsize = 0
        limit = decompress_limit(fsize, explicit)
        if deflated > limit or total > cap:
            raise InputError(f"{path}: the trace would expand to {max(total, deflated) >> 20} MB, over the "
                             f"{min(limit, cap) >> 20} MB limit (if it is genuine, raise it with --max-decompressed-mb "
                             "or INFERSCOPE_MAX_DECOMPRESSED_MB)")
        if infos[MARKER].file_size > _MAX_HEADER:
            raise InputError(f"{path}: corrupt InferScope trace (header larger than {_MAX_HEADER >> 20} MB)")
        raw_header = z.read(MARKER)
        if not _json_depth_ok(raw_header):
            raise InputError(f"{path}: corrupt InferScope trace (header nested deeper than {_MAX_JSON_DEPTH})")
        header = json.loads(raw_header)
        if not isinstance(header, dict):
            raise InputError(f"{path}: corrupt InferScope trace (header is not an object)")
        if header.get("format") != FORMAT_NAME:
            raise InputError(f"{path}: unknown trace format {str(header.get('format'))[:60]!r}")
        ver = header.get("version", 0)
        if not isinstance(ver, int) or isinstance(ver, bool):
            raise InputError(f"{path}: corrupt InferScope trace (version is not an integer)")
        if ver > FORMAT_VERSION:
            raise InputError(f"{path}: trace format version {ver} is newer than this InferScope supports ({FORMAT_VERSION})")
        meta = header.get("meta") or {}
        if not isinstance(meta, dict):
            raise InputError(f"{path}: corrupt InferScope trace (meta is not an object)")

        def member(m: str) -> bytes:
            if m not in infos:
                raise InputError(f"{path}: corrupt InferScope trace (missing {m})")
            return z.read(m)

        blob = member("strings.bin")
        offs = _npy(member("strings.off.npy"), "strings.off.npy", np.int64)
        if len(offs) == 0 or offs[0] != 0 or offs[-1] != len(blob) or (len(offs) > 1 and (np.diff(offs) < 0).any()):
            raise InputError(f"{path}: corrupt InferScope trace (string offsets do not match strings.bin)")
        strings = StringTable()
        ol = offs.tolist()
        lst = strings.as_list()
        for i in range(len(ol) - 1):
            lst.append(blob[ol[i]:ol[i + 1]].decode("utf-8", "surrogatepass"))
        # ids are positions: a repeated string keeps its first id in the index
        for i, s in enumerate(lst):
            strings._index.setdefault(s, i)
        tables = {}
        for tname, cls in _TABLES.items():
            cols = {}
            for col, dt in cls.COLUMNS.items():
                m = f"{tname}.{col}.npy"
                cols[col] = _npy(member(m), m, dt)
            try:
                tables[tname] = cls(**cols)
            except ValueError as e:
                raise InputError(f"{path}: corrupt InferScope trace ({e})") from None
        facts = z.read(FACTS_MEMBER) if FACTS_MEMBER in infos else None   # (decoded only by a replay)
    return Trace(strings=strings, meta=meta, facts=facts, **tables)
