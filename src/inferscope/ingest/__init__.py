"""Importers: turn a file into a Trace.  ``load_trace`` detects the format."""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError
from ..trace.model import Trace

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"
ZIP_MAGIC = b"PK\x03\x04"


def detect_format(path: str | os.PathLike) -> str:
    """Return 'native', 'nsys' or 'kineto' by content (not by extension)."""
    from ._files import read_input
    p = Path(path)
    head = read_input(p, 16)
    if not head:
        raise InputError(f"{p}: empty file, not a trace")
    if head.startswith(ZIP_MAGIC):
        return "native"
    if head.startswith(SQLITE_MAGIC):
        return "nsys"
    if head.startswith(GZIP_MAGIC):
        return "kineto"
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"[") or (not stripped and p.stat().st_size > 16):
        return "kineto"
    raise InputError(f"{p}: not a recognised trace (expected PyTorch profiler JSON[.gz], Nsight Systems .sqlite or InferScope .iscope)")


def load_trace(path: str | os.PathLike, **options) -> Trace:
    fmt = detect_format(path)
    if fmt == "native":
        from ..trace import native
        return native.load(path)
    if fmt == "nsys":
        from . import nsys
        return nsys.load(path, **{k: v for k, v in options.items() if k in nsys.LOAD_OPTIONS})
    from . import kineto
    return kineto.load(path)
