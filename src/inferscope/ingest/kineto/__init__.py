"""PyTorch profiler (Kineto) Chrome-trace importer: ``load(path) -> Trace``.

Accepts ``.json`` and ``.json.gz`` written by ``torch.profiler`` (export_chrome_trace,
tensorboard_trace_handler), current and legacy categories, and a bare top-level JSON list
of events (legacy Chrome format).  The input file is only ever opened for reading.

Speed: the JSON is decoded by ``msgspec`` straight into small typed Structs that name only
the fields we use (everything else, including big ``args`` payloads and all top-level
metadata we do not whitelist, is skipped by the decoder without building Python objects).
After the decode, each field becomes one numpy column and everything else (kinds, tracks,
timestamps, copy kinds, the launch join) is vectorised; per-*distinct*-string work (names,
categories) is done once per string, not per event.

Modules, one idea each (none imports this package, so there is no import cycle):
  decode.py      typed decode targets (msgspec Structs) and the whole-file decode with its repairs
  stream.py      the streamed decode: traceEvents cut into batches, each reduced to columns at once
  columns.py     ``_Cols``: compact per-event columns (factorised strings, numbers, kept args)
  timestamps.py  ts/dur -> exact int64 ns
  categories.py  category -> span kind and side, flow categories, ProfilerStep and memcpy names
  build.py       columns -> Trace (``_build``)
  tracks.py      metadata names, span rows -> tracks, memory counters
  flows.py       launch flows (correlation join) and fwdbwd flows
  meta.py        top-level metadata -> ``Trace.meta`` (devices, versions, config, distributedInfo)
This module reads the input (decompression caps, gzip in bounded steps), drives the streamed or
whole-file decode and reports progress (util/progress.py) when given a Progress.
"""
from __future__ import annotations

import ctypes
import gc
import sys
import zlib
from pathlib import Path

from ...errors import InputError
from .._files import read_input
from ...trace.model import Trace
from ...util.decompress import decompress_limit
from .build import _build
from .columns import _Cols
from .decode import _TOP_DEC, _Fallback, _one_line, decode_events  # noqa: F401  (_TOP_DEC: bench_kineto)
from .stream import STREAM_BATCH_BYTES, stream_decode

__all__ = ["load", "decode_events"]

# --------------------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------------------
# Decompression caps: util/decompress.py (shared with the .iscope reader).


def _read_bytes(p: Path, max_decompressed: int | None = None) -> bytes:
    out = [c for c in _iter_bytes(p, max_decompressed, whole=True) if c]
    return out[0] if len(out) == 1 else b"".join(out)


def _iter_bytes(p: Path, max_decompressed: int | None = None, whole: bool = False, step: int = 1 << 24,
                progress=None):
    """The (inflated) content of ``p`` in chunks of at most ``step`` bytes; the decompression caps
    and gzip errors raise InputError as soon as they are seen.  whole=True reads the file at once
    (the compressed size is what the caps are relative to).  progress: gets the compressed bytes
    consumed so far (gzip, read in steps only)."""
    if whole:
        data = read_input(p, expected="a PyTorch profiler trace")
        size = len(data)
    else:
        head = read_input(p, 2, expected="a PyTorch profiler trace")
        size = p.stat().st_size
        data = None
    if (data if data is not None else head)[:2] != b"\x1f\x8b":
        if data is not None:
            yield data
            return
        with open(p, "rb") as f:
            while True:
                c = f.read(step)
                if not c:
                    return
                yield c
    limit = decompress_limit(size, max_decompressed)
    f = None if data is not None else open(p, "rb")
    try:
        total = 0
        d = zlib.decompressobj(47)
        buf = data if data is not None else f.read(step)
        try:
            while True:
                while True:   # bounded steps: never more than `limit` bytes held
                    if not buf and f is not None:
                        buf = f.read(step)
                    chunk = d.decompress(buf, step)
                    buf = d.unconsumed_tail
                    total += len(chunk)
                    if progress is not None and f is not None:
                        progress.update(f.tell() - len(buf) - len(d.unused_data))
                    if total > limit:
                        raise InputError(
                            f"{p.name}: decompresses to more than {limit >> 20} MB "
                            f"({size >> 10} KB compressed); if the trace is genuine, raise the limit with "
                            "--max-decompressed-mb or INFERSCOPE_MAX_DECOMPRESSED_MB")
                    if chunk:
                        yield chunk
                    if d.eof:
                        break
                    if not buf and (f is None or not (buf := f.read(step))):
                        break
                if not d.eof:
                    raise InputError(f"{p.name}: truncated gzip file (compressed stream ends early)")
                buf = d.unused_data
                while f is not None and not buf.lstrip(b"\x00"):  # trailing NUL padding: to EOF
                    more = f.read(step)
                    if not more:
                        break
                    buf += more
                if not buf or not buf.lstrip(b"\x00"):
                    break
                d = zlib.decompressobj(47)  # concatenated gzip members
        except zlib.error as e:
            raise InputError(f"{p.name}: corrupt gzip file ({e})") from None
    finally:
        if f is not None:
            f.close()


# --------------------------------------------------------------------------------------
# load
# --------------------------------------------------------------------------------------
def load(path, max_decompressed: int | None = None, batch_bytes: int | None = None, progress=None) -> Trace:
    """Import a PyTorch profiler (Kineto) Chrome trace; raises InputError on bad input.

    batch_bytes: size of the streamed traceEvents batches (default STREAM_BATCH_BYTES); 0 decodes
    the whole file at once (the path every anomaly falls back to).  progress: a
    ``util.progress.Progress`` (bytes of the file read: compressed bytes for gzip, and events
    decoded) or None."""
    enabled = gc.isenabled()
    gc.disable()  # millions of short-lived objects: the cyclic GC only costs time here
    try:
        return _load(path, max_decompressed, batch_bytes, progress)
    except InputError:
        raise
    except (ValueError, TypeError, OverflowError, AttributeError, IndexError, KeyError, RecursionError) as e:
        # Backstop: a value combination the checks above did not foresee is still bad input
        # (one line, exit 2); INFERSCOPE_DEBUG=1 shows where it came from.
        import os
        if os.environ.get("INFERSCOPE_DEBUG"):
            raise
        raise InputError(f"{Path(path).name}: unsupported or damaged trace content "
                         f"({type(e).__name__}: {_one_line(e)[:160]})") from None
    finally:
        if enabled:
            gc.enable()


# Below this much (inflated) input the heap freed by the batches is small and the next allocations
# reuse it: trimming would only cost time (~10 ms on a 35 MB trace, issue 26) and page faults.
_TRIM_MIN_BYTES = 4 * (16 << 20)
# ... and batches of 1 MB (the default) leave only a few MB of it: trimming costs more than it saves
# (~50 ms on a 2M-event trace, +6 MB peak without it; issue 26)
_TRIM_MIN_BATCH = 8 << 20


def _trim_heap() -> None:
    """Give the heap freed by the decoded batches (Structs, strings) back to the OS before the
    columns are built: glibc keeps ~70 MB of it on a 2M-event trace, which would add to the peak
    RSS of the build. glibc only; a no-op elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _load(path, max_decompressed=None, batch_bytes: int | None = None, progress=None) -> Trace:
    p = Path(path)
    name = p.name
    batch_bytes = STREAM_BATCH_BYTES if batch_bytes is None else batch_bytes
    if batch_bytes > 0:
        try:
            cols = _Cols()
            top = _stream_decode(p, max_decompressed, batch_bytes, cols, progress)
            if cols.nread >= _TRIM_MIN_BYTES and batch_bytes >= _TRIM_MIN_BATCH:
                _trim_heap()
            if progress is not None:
                progress.stage(f"building the trace of {name}", unit="events")
                progress.update(events=cols.n)
            return _build(cols, top, [], name, None)
        except (_Fallback, ValueError, TypeError, OverflowError, AttributeError, IndexError, KeyError,
                RecursionError):
            pass  # the whole-file decode below gives the exact result, repairs and messages
        finally:
            cols = None
    if progress is not None:
        progress.stage(f"reading {name} (whole-file decode)")
    data = _read_bytes(p, max_decompressed)
    top, events, warnings = decode_events(data, name)
    cols = _Cols()
    cols.add(events)
    del events
    return _build(cols, top, warnings, name, data)


def _stream_decode(p: Path, max_decompressed, batch_bytes: int, cols: _Cols, progress):
    """``stream_decode`` of the (inflated) content of ``p``; returns the top-level metadata.  An
    uncompressed file is read straight into the decode buffer (``readinto``), a gzipped one inflated
    in bounded steps (``_iter_bytes``)."""
    gz = read_input(p, 2, expected="a PyTorch profiler trace")[:2] == b"\x1f\x8b"
    cb = None
    if progress is not None:
        # the position in the file: bytes read (plain JSON), compressed bytes consumed (gzip)
        progress.stage(f"reading {p.name}", total=p.stat().st_size, note="compressed" if gz else "")
        cb = (lambda nread, nevents: progress.update(events=nevents)) if gz else \
            (lambda nread, nevents: progress.update(nread, events=nevents))
    if not gz:
        with open(p, "rb") as f:
            return stream_decode(f, batch_bytes, cols, cb)
    # inflated in steps of about a batch (at least 1 MB): each piece is still in the CPU caches when decoded
    return stream_decode(_iter_bytes(p, max_decompressed, step=max(batch_bytes, 1 << 20), progress=progress),
                         batch_bytes, cols, cb)
