"""Reading an input file with one-line errors (shared by format detection and the importers)."""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError


def read_input(p: Path, n: int = -1, expected: str = "a trace file") -> bytes:
    """The first ``n`` bytes of ``p`` (all when n < 0); InputError when missing, a directory or unreadable."""
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, expected {expected}")
    try:
        with open(p, "rb") as f:
            return f.read(n)
    except OSError as e:
        raise InputError(f"{p}: cannot read ({e.strerror or e})") from None
