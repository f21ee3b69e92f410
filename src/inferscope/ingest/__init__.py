"""Importers: turn a file into a Trace.  ``load_trace`` detects the format."""
from __future__ import annotations

import os
import zlib
from pathlib import Path

from ..errors import InputError
from ..trace.model import Trace
from ..trace.validate import check
from ._files import ncu_sniff as sniff, read_input

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGIC = b"PK\x03\x04"


def detect_format(path: str | os.PathLike) -> str:
    """Return 'native', 'nsys', 'ncu' or 'kineto' by content (not by extension)."""
    p = Path(path)
    if p.suffix.lower() in (".nsys-rep", ".qdrep") and p.is_file():
        raise InputError(f"{p}: an Nsight Systems report file; export it first with "
                         f"`nsys export --type sqlite {p.name}` and analyse the .sqlite file")
    head = read_input(p, 16)
    if not head:
        raise InputError(f"{p}: empty file, not a trace")
    if head.startswith(ZIP_MAGIC):
        return "native"
    if head.startswith(SQLITE_MAGIC):
        return "nsys"
    if head.startswith(GZIP_MAGIC):
        return "ncu" if _ncu_head(p, True) else "kineto"
    if _ncu_head(p, False):
        return "ncu"
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"[") or (not stripped and p.stat().st_size > 16):
        return "kineto"
    raise InputError(f"{p}: not a recognised trace (expected PyTorch profiler JSON[.gz], Nsight Systems .sqlite, "
                     "Nsight Compute --csv or InferScope .iscope)")


def _ncu_head(p: Path, gz: bool) -> bool:
    """Does the file (inflated: its first 64 KB at most) start like ``ncu --csv`` output?"""
    raw = read_input(p, 65536)
    if gz:
        try:
            raw = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, 65536)
        except zlib.error:
            return False
    return sniff(raw.decode("utf-8", errors="replace"))


def load_trace(path: str | os.PathLike, max_decompressed: int | None = None, progress=None, **options) -> Trace:
    """Load any supported trace; bad input raises InputError (one line), never another exception.

    ``max_decompressed``: explicit cap in bytes on decompressed data (.json.gz, .iscope);
    None applies the default caps (see util/decompress.py).  Every trace passes
    ``trace.validate.check`` (ranges, references, order) before it is returned.
    ``progress``: a ``util.progress.Progress`` told each stage (bytes read for Kineto, tables for
    nsys), or None.
    """
    fmt = detect_format(path)
    name = Path(path).name
    if progress is not None and fmt in ("native", "ncu"):
        progress.stage(f"reading {name}")
    if fmt == "native":
        from ..trace import native  # lazy: one importer per format (collect/torchprof reads kineto only)
        return native.load(path, max_decompressed=max_decompressed)   # checked inside
    if fmt == "ncu":
        from . import ncu  # lazy: one importer per format (collect/torchprof reads kineto only)
        trace = ncu.load(path, max_decompressed=max_decompressed)
    elif fmt == "nsys":
        from . import nsys  # lazy: one importer per format (collect/torchprof reads kineto only)
        trace = nsys.load(path, progress=progress, **{k: v for k, v in options.items() if k in nsys.LOAD_OPTIONS})
    else:
        from . import kineto  # lazy: one importer per format (collect/torchprof reads kineto only)
        trace = kineto.load(path, max_decompressed=max_decompressed, progress=progress)
    if progress is not None:
        progress.stage(f"checking {name}")
    return check(trace, name)
