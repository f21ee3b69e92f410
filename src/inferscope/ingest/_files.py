"""Reading an input file with one-line errors (shared by format detection and the importers), and
the ncu CSV header sniff (format detection must not import an importer it does not use)."""
from __future__ import annotations

import re
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


NCU_HEADER = re.compile(r'^\s*"?ID"?\s*,\s*"?Process ID"?\s*,')
NCU_LOG = ("==PROF==", "==ERROR==", "==WARNING==")


def ncu_sniff(head_text: str) -> bool:
    """True when the text starts (after ncu's ``==PROF==``/``==WARNING==`` lines) with the CSV header, or is
    nothing but those lines."""
    log = False
    for line in head_text.splitlines():
        if not line.strip() or line.startswith("=="):
            log = log or line.startswith(NCU_LOG)
            continue
        return bool(NCU_HEADER.match(line))
    return log                    # only ncu's log (a failed export): the importer quotes its errors
