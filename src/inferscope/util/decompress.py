"""Decompression caps shared by every reader of compressed input (a Kineto .json.gz / .zip, a deflated member of
an .iscope): a 1 MB gzip bomb must not take gigabytes.  By default the output may be at most DECOMPRESS_RATIO x the
compressed size (real Kineto traces compress 7-22x), with a floor of DECOMPRESS_FLOOR and an absolute
DEFAULT_MAX_DECOMPRESSED; an explicit --max-decompressed-mb replaces all three."""
from __future__ import annotations

DECOMPRESS_RATIO = 50
DECOMPRESS_FLOOR = 64 << 20
DEFAULT_MAX_DECOMPRESSED = 4096 << 20


def decompress_limit(compressed: int, explicit: int | None) -> int:
    """The most bytes a reader may inflate from ``compressed`` bytes of input (``explicit``: the user's cap)."""
    if explicit is not None:
        return int(explicit)
    return min(DEFAULT_MAX_DECOMPRESSED, max(DECOMPRESS_FLOOR, DECOMPRESS_RATIO * compressed))
