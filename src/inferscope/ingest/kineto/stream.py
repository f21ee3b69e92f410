"""Streamed Kineto decode: ``traceEvents`` cut into batches, each decoded in place and reduced to
columns at once; anything unusual raises ``_Fallback`` (the whole-file decode takes over)."""
from __future__ import annotations

import msgspec

from .decode import _Fallback, _LIST_DEC, _STREAM_DECS, _TOP_DEC
from .scan import CutFinder, KeyScan
from .timestamps import _TS_RE

# Streaming decode: traceEvents is cut into batches of about this many bytes.  Small enough that a
# batch's Structs (~2x its bytes) stay in the CPU caches while ``_Cols.add`` makes its ~15 passes over
# them: 1 MB batches load a 2M-event trace in ~25 % less time than 16 MB ones (issue 26).
STREAM_BATCH_BYTES = 1 << 20
# one event (no cut found) may grow the buffer to this much before the whole-file decode takes over
_LONG_EVENT_BYTES = 4 * (16 << 20) + (64 << 20)
_STREAM_TRIES = 8                  # candidate cuts tried per batch before giving up (-> whole-file decode)
_STREAM_PREFIX_MAX = 64 << 20      # top-level content before traceEvents kept at most


def stream_decode(chunks, batch_bytes: int, cols, progress):
    """Feed ``cols`` (a ``columns._Cols``) batch by batch from ``chunks`` (the inflated file: an
    iterator of ``bytes`` pieces, or a binary file object, read with ``readinto``); returns the
    top-level metadata.
    Raises _Fallback for anything unusual (a list at top level, a BOM, invalid or damaged JSON,
    malformed events, a cut that cannot be confirmed): the whole-file decode then handles it
    exactly as before, with its repairs and messages.

    The input is read into one reused buffer (``buf[:n]`` holds the unread rest; what follows the
    last cut is moved to its front), not appended to a growing bytearray: 16 MB pieces appended and
    cut from the front cost ~0.3 s of reallocations and copies on a 535 MB trace (issue 26)."""
    fill = _filler(chunks)
    dec = [0]
    buf = bytearray()
    n = 0
    eof = False
    nread = 0

    def more(want: int = 0) -> bool:
        nonlocal eof, nread, n
        if eof:
            return False
        want = max(batch_bytes + 1 - n, want, _READ_MIN)   # up to one batch, else (a long event) more
        if len(buf) - n < want:   # grow: to one batch first, doubling beyond; the data kept
            buf.extend(bytes(max(want - (len(buf) - n), len(buf))))
        with memoryview(buf) as mv:
            k = fill(mv[n:n + want])
        if not k:
            eof = True
            return False
        n += k
        nread += k
        return True

    def consume(x: int) -> None:
        """Drop ``buf[:x]``: the rest moves to the front (no resize)."""
        nonlocal n
        buf[:n - x] = buf[x:n]
        n -= x

    # ---- prefix up to and including '"traceEvents": [' -------------------------------
    # (the key is searched for in the new bytes only: linear however long the prefix, issue 44)
    key = KeyScan()
    while True:
        m = key.feed(buf, n)
        cols.scan_bytes = key.scanned
        if m:
            break
        if n > _STREAM_PREFIX_MAX or not more():
            raise _Fallback
    if bytes(buf[:m[0]]).lstrip(b" \t\r\n")[:1] != b"{":
        raise _Fallback
    prefix = bytes(buf[:m[0]])
    # buf[0] is kept as the '[' in front of the next event, so a batch is decoded in place
    # (buf[:k + 2] with the ',' after its last event turned into ']' for the moment): no copy
    consume(m[1] - 1)
    cut_max = max(4 * batch_bytes + (64 << 20), _LONG_EVENT_BYTES)
    # ---- the array, batch by batch ------------------------------------------------------------
    while True:
        while n - 1 < batch_bytes and more():
            pass
        if eof:
            break
        # candidate cuts: '}' followed by ',' and '{' (whitespace allowed), latest first
        hi = n
        cuts = CutFinder(buf, n, _STREAM_TRIES)
        for _ in range(_STREAM_TRIES):
            k, cut_end = cuts.last_before(hi)
            if k < 0:
                break
            sep = buf[k + 1]
            buf[k + 1] = 0x5D   # ']'
            try:
                evs, raw = _decode_in_place(buf, k + 2, dec)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError):
                buf[k + 1] = sep
                hi = k
                continue
            cols.add(evs, raw)
            del evs
            _release(raw)
            consume(cut_end - 2)
            buf[0] = 0x5B       # '['
            if progress is not None:
                progress(nread, cols.n)
            break
        else:
            raise _Fallback
        cols.scan_bytes += cuts.scanned
        if k < 0:
            if n - 1 > cut_max:
                raise _Fallback  # one huge event (or no cut at all): let the whole decode judge it
            # no cut yet: read as much again as the buffer holds (up to the cap; a gzip piece is at
            # most 1 MB, hence the loop), so that the searches of a long event sum to a few times
            # its size, not one search per 64 KiB or 1 MB read (issue 44)
            target = n + min(n, cut_max + 2 - n)
            while n < target and more(target - n):
                pass
    # ---- last events, the closing ']' and the rest of the top-level object --------------------
    tail = buf
    hi = n
    for _ in range(_STREAM_TRIES * 4):
        r = tail.rfind(b"]", 0, hi)
        if r < 0:
            raise _Fallback
        hi = r
        try:
            evs, raw = _decode_in_place(tail, r + 1, dec)     # tail[0] is '[', tail[r] is ']'
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError):
            continue
        rest = prefix + b'"traceEvents":[]' + bytes(memoryview(tail)[r + 1:n])
        try:
            top = _TOP_DEC.decode(rest)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError):
            raise _Fallback from None
        if top.traceEvents:  # a second traceEvents key: the whole decode decides which one counts
            raise _Fallback
        cols.add(evs, raw)
        del evs
        _release(raw)
        cols.outer_ts = bool(_TS_RE.search(rest))
        cols.nread = nread
        if cols.n == 0:
            raise _Fallback
        if progress is not None:
            progress(nread, cols.n)
        return top
    raise _Fallback


# smallest read into the buffer (when the rest of a batch is smaller, or no cut was found in it)
_READ_MIN = 1 << 16


def _filler(chunks):
    """``fill(mv) -> bytes written into mv (0: end of input)`` over a binary file or an iterator of bytes."""
    if hasattr(chunks, "readinto"):
        return chunks.readinto
    it = iter(chunks)
    pending = b""
    off = 0

    def fill(mv) -> int:
        nonlocal pending, off
        while off >= len(pending):
            c = next(it, None)
            if c is None:
                return 0
            pending, off = c, 0
        k = min(len(mv), len(pending) - off)
        with memoryview(pending) as pv:
            mv[:k] = pv[off:off + k]
        off += k
        return k
    return fill


def _decode_in_place(buf: bytearray, end: int, dec: list):
    """(events of ``buf[:end]``, the view they were decoded from) without copying the batch; the
    view must be given to ``_release`` once the events are dropped (msgspec.Raw fields point into it).
    dec: [index into _STREAM_DECS]: a batch failing the validation of one decoder is decoded again by
    the next (fewer constraints, the same values), which then serves the rest; the last (_LIST_DEC, the
    whole-file decode's types) decides."""
    view = memoryview(buf)[:end]
    try:
        while dec[0] < len(_STREAM_DECS) - 1:
            try:
                return _STREAM_DECS[dec[0]].decode(view), view
            except msgspec.ValidationError:
                dec[0] += 1
        return _LIST_DEC.decode(view), view
    except BaseException:
        view.release()
        raise


def _release(view: memoryview) -> None:
    """Release a batch view so ``buf`` can be cut again; a Raw still alive in kept args (never in
    a normal trace) leaves it exported: the whole-file decode takes over."""
    try:
        view.release()
    except BufferError:
        raise _Fallback from None
