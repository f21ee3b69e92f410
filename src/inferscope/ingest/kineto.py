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

Timestamps (``ts``/``dur``, float microseconds with up to ns resolution) become int64 ns
without rounding artefacts:
  * fast path, ``max|ts| < 2**41`` us: ``floor(ts)*1000 + rint(frac*1000)`` is exact;
  * epoch-microsecond clocks (``ts`` ~ 1.7e15) cannot hold the ns digit in a float64
    (ulp 0.25 us).  When every decoded ts is integral and the text has no fractional
    ``"ts"``, the floats are exact integers.  Otherwise the exact decimal text of every
    ``"ts"`` is recovered with one regex pass over the raw bytes, verified against the
    decoded floats (same count, same values within 1 us); if verification fails (e.g. a
    ``"ts"`` key inside ``args``), the bytes are decoded again with ``ts`` as raw JSON text
    and parsed exactly per event (slow but exact).
  * ``end = start + rint(dur*1000)`` (dur is small: float is exact to the ns); negative or
    missing durations become 0.

Launch flows (FlowKind.LAUNCH) join host RUNTIME/DRIVER spans to GPU work (kernel, memcpy,
memset) on (host pid, correlation).  GPU events carry the device as pid, so each GPU
activity is assigned to a host process: with a single host process (the normal
torch.profiler case) all GPU activity belongs to it.  With several host processes a GPU
activity binds to the only process that has a host API call with that correlation; if
correlations collide across processes it binds to the candidate call that started last
at or before the GPU start -- the same rule by which Chrome pairs an ``ac2g`` ``f`` event
with the latest preceding ``s`` event of the same id (Kineto's ac2g ids *are* the
correlation ids, so the flow events carry no extra information beyond that ordering).
GPU-side sync records (cat ``cuda_sync`` -> GPU_SYNC) are linked to their host call with
FlowKind.OTHER.  ``fwdbwd`` flow events become FlowKind.FWDBWD between the innermost
CPU ops enclosing each endpoint.
"""
from __future__ import annotations

import gc
import re
import sys
import time
import zlib
from operator import attrgetter
from pathlib import Path
from typing import Any, Optional, Union

import msgspec
import numpy as np

from ..errors import InputError
from ._files import read_input
from ..trace.builder import TraceBuilder
from ..trace.kinds import CopyKind, FlowKind, MemKind, SpanKind, TrackKind
from ..trace.model import Trace

__all__ = ["load", "decode_events"]

# --------------------------------------------------------------------------------------
# typed decode targets
# --------------------------------------------------------------------------------------
_Num = Union[int, float, str, None]


class _Args(msgspec.Struct, gc=False):
    ext_id: _Num = msgspec.field(default=-1, name="External id")
    correlation: _Num = -1
    device: _Num = -1
    stream: _Num = -1
    bytes: _Num = -1
    kind: _Num = None                  # AMD memcpy: "HtoD"
    name: Any = None                   # 'M' events: process/thread name
    labels: Any = None                 # 'M' process_labels
    total_allocated: _Num = msgspec.field(default=None, name="Total Allocated")
    device_type: _Num = msgspec.field(default=None, name="Device Type")
    device_id: _Num = msgspec.field(default=None, name="Device Id")
    # record_shapes (cpu_op): kept as raw JSON text, never materialised as Python objects here
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    concrete: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Concrete Inputs")


class _Event(msgspec.Struct, gc=False):
    ph: Optional[str] = None
    cat: Optional[str] = None
    name: Union[str, int, float, None] = None
    pid: Union[int, str, float, None] = -1
    tid: Union[int, str, float, None] = -1
    ts: Union[int, float, None] = None   # int when written as an integer: exact at any size
    dur: Optional[float] = None
    id: Union[int, str, float, None] = None
    bp: Optional[str] = None
    args: Optional[_Args] = None


class _EventRawTs(_Event, gc=False):
    ts: msgspec.Raw = msgspec.Raw()  # type: ignore[assignment]  # empty = missing


# Only whitelisted top-level keys are declared: the decoder skips everything else
# (env vars, user names, host names, job metadata ...) without materialising it.
class _Top(msgspec.Struct, gc=False):
    traceEvents: list[_Event]
    deviceProperties: Any = None
    schemaVersion: Any = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    cupti_version: Any = None
    hip_runtime_version: Any = None
    roctracer_version: Any = None
    torch_version: Any = None
    pytorch_version: Any = None
    with_stack: Any = None
    record_shapes: Any = None
    profile_memory: Any = None
    with_flops: Any = None
    with_modules: Any = None
    distributedInfo: Any = None     # torch.distributed rank/world_size/backend/process groups (cross-rank)


class _TopRaw(msgspec.Struct, gc=False):
    traceEvents: list[msgspec.Raw]


_TOP_FIELDS = [f for f in _Top.__struct_fields__ if f != "traceEvents"]
_TOP_DEC = msgspec.json.Decoder(_Top)
_LIST_DEC = msgspec.json.Decoder(list[_Event])
_TOPRAW_DEC = msgspec.json.Decoder(_TopRaw)
_LISTRAW_DEC = msgspec.json.Decoder(list[msgspec.Raw])
_EVENT_DEC = msgspec.json.Decoder(_Event)
_TOP_RAWTS_DEC = msgspec.json.Decoder(msgspec.defstruct("_TopRawTs", [("traceEvents", list[_EventRawTs])], gc=False))
_LIST_RAWTS_DEC = msgspec.json.Decoder(list[_EventRawTs])

_VERSION_KEYS = ("schemaVersion", "cuda_runtime_version", "cuda_driver_version", "cupti_version",
                 "hip_runtime_version", "roctracer_version", "torch_version", "pytorch_version")
_CONFIG_KEYS = ("with_stack", "record_shapes", "profile_memory", "with_flops", "with_modules")

# --------------------------------------------------------------------------------------
# category -> kind
# --------------------------------------------------------------------------------------
_GPU, _CPU = 1, 2
_CAT_KIND: dict[str, tuple[SpanKind, int]] = {
    "kernel": (SpanKind.KERNEL, _GPU),
    "gpu_memcpy": (SpanKind.MEMCPY, _GPU), "memcpy": (SpanKind.MEMCPY, _GPU),
    "gpu_memset": (SpanKind.MEMSET, _GPU), "memset": (SpanKind.MEMSET, _GPU),
    "cuda_runtime": (SpanKind.RUNTIME, _CPU), "runtime": (SpanKind.RUNTIME, _CPU),
    "hip_runtime": (SpanKind.RUNTIME, _CPU),
    "cuda_driver": (SpanKind.DRIVER, _CPU), "driver": (SpanKind.DRIVER, _CPU),
    "cpu_op": (SpanKind.CPU_OP, _CPU), "operator": (SpanKind.CPU_OP, _CPU),
    "python_function": (SpanKind.PYTHON, _CPU),
    "user_annotation": (SpanKind.ANNOTATION, _CPU),
    "gpu_user_annotation": (SpanKind.GPU_ANNOTATION, _GPU),
    "cuda_sync": (SpanKind.GPU_SYNC, _GPU),
    "overhead": (SpanKind.OVERHEAD, _CPU),
}
_IGNORED_CATS = {"trace"}  # the profiler's own 'Trace' span (pid "Spans")
_FLOW_LAUNCH_CATS = {"ac2g", "async_cpu_to_gpu"}
_FLOW_FWDBWD_CATS = {"fwdbwd"}

_STEP_RE = re.compile(r"^ProfilerStep#\d+")
_MEMCPY_RE = re.compile(r"^Memcpy\s+(\w+)(?:\s*\(\s*(\w+)\s*->\s*(\w+)\s*\))?")
_DIR = {"htod": CopyKind.H2D, "dtoh": CopyKind.D2H, "dtod": CopyKind.D2D, "htoh": CopyKind.H2H,
        "ptop": CopyKind.P2P, "htoa": CopyKind.H2D, "atoh": CopyKind.D2H, "atoa": CopyKind.D2D,
        "atod": CopyKind.D2D, "dtoa": CopyKind.D2D}
_MEM = {"pageable": MemKind.PAGEABLE, "pinned": MemKind.PINNED, "device": MemKind.DEVICE,
        "host": MemKind.UNKNOWN, "managed": MemKind.MANAGED, "array": MemKind.ARRAY}

_TS_RE = re.compile(rb'"ts"\s*:\s*(-?\d+)(?:\.(\d*))?(?:[eE]([-+]?\d+))?')
_FAST_TS_LIMIT = float(2 ** 41)


# --------------------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------------------
# Decompression caps (a 1 MB gzip bomb must not take gigabytes): by default the output may
# be at most DECOMPRESS_RATIO x the compressed size (real Kineto traces compress 7-22x),
# with a floor of DECOMPRESS_FLOOR and an absolute DEFAULT_MAX_DECOMPRESSED; an explicit
# --max-decompressed-mb replaces all three.
DECOMPRESS_RATIO = 50
DECOMPRESS_FLOOR = 64 << 20
DEFAULT_MAX_DECOMPRESSED = 4096 << 20


def decompress_limit(compressed: int, explicit: int | None) -> int:
    if explicit is not None:
        return int(explicit)
    return min(DEFAULT_MAX_DECOMPRESSED, max(DECOMPRESS_FLOOR, DECOMPRESS_RATIO * compressed))


def _read_bytes(p: Path, max_decompressed: int | None = None) -> bytes:
    out = [c for c in _iter_bytes(p, max_decompressed, whole=True) if c]
    return out[0] if len(out) == 1 else b"".join(out)


def _iter_bytes(p: Path, max_decompressed: int | None = None, whole: bool = False, step: int = 1 << 24):
    """The (inflated) content of ``p`` in chunks of at most ``step`` bytes; the decompression caps
    and gzip errors raise InputError as soon as they are seen.  whole=True reads the file at once
    (the compressed size is what the caps are relative to)."""
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


_LONE_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
                             rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _repair_text(data: bytes, msg: str, warnings: list) -> bytes | None:
    """Make one damaged string decodable instead of rejecting the whole trace: invalid UTF-8
    bytes and lone surrogate escapes become U+FFFD (counted in a warning).  None: not that."""
    low = msg.lower()
    if "utf-8" in low or "utf8" in low:
        text = data.decode("utf-8", "replace")
        warnings.append(f"replaced {text.count(chr(0xFFFD))} invalid UTF-8 sequence(s) with U+FFFD")
        return text.encode("utf-8")
    if "surrogate" in low or "escape" in low or "unicode" in low:
        fixed, n = _LONE_SURROGATE.subn(rb"\\ufffd", data)
        if n:
            warnings.append(f"replaced {n} invalid \\u escape(s) with U+FFFD")
            return fixed
    return None


def _one_line(msg: str) -> str:
    return " ".join(str(msg).split())


def decode_events(data: bytes, name: str = "trace", raw_ts: bool = False):
    """Decode bytes into (top-level struct or None, list of event Structs, warnings).

    Raises InputError for anything that is not a Kineto/Chrome trace.  Individual
    events with wrong field types are skipped (counted in the warnings).
    """
    head = data[:4096].lstrip()
    if head.startswith(b"\xef\xbb\xbf"):
        data = data[data.find(b"\xef\xbb\xbf") + 3:]
        head = data[:4096].lstrip()
    if not head:
        raise InputError(f"{name}: empty file, not a trace")
    first = head[:1]
    if first not in (b"{", b"["):
        raise InputError(f"{name}: not a PyTorch profiler trace (expected a JSON object with traceEvents)")
    is_list = first == b"["
    if raw_ts:
        dec = _LIST_RAWTS_DEC if is_list else _TOP_RAWTS_DEC
    else:
        dec = _LIST_DEC if is_list else _TOP_DEC
    warnings: list[str] = []
    for _attempt in range(3):
        try:
            obj = dec.decode(data)
            break
        except msgspec.ValidationError as e:
            obj = None
            verr = e
            break
        except msgspec.DecodeError as e:
            msg = str(e)
            # msgspec may report a lone surrogate escape as "truncated": try the repair first
            fixed = _repair_text(data, msg if "truncated" not in msg.lower() else "escape", warnings) \
                if _attempt < 2 else None
            if fixed is None and "truncated" in msg.lower():
                raise InputError(f"{name}: truncated JSON (file ends early)") from None
            if fixed is None:
                raise InputError(f"{name}: invalid JSON ({_one_line(msg)[:200]})") from None
            data = fixed
        except UnicodeDecodeError as e:
            if _attempt >= 2:
                raise InputError(f"{name}: not valid UTF-8 JSON (bad byte at offset {e.start})") from None
            data = _repair_text(data, "utf-8", warnings)
        except RecursionError:
            raise InputError(f"{name}: JSON nested too deeply") from None
    if obj is not None:
        if is_list:
            return None, obj, warnings
        return obj, obj.traceEvents, warnings
    # Lenient path: the structure is right but some events have wrong field types.
    try:
        raw = _LISTRAW_DEC.decode(data) if is_list else _TOPRAW_DEC.decode(data).traceEvents
    except msgspec.ValidationError as e:
        raise InputError(f"{name}: not a PyTorch profiler trace ({_one_line(e)})") from None
    except msgspec.DecodeError as e:  # pragma: no cover - first decode would have failed
        raise InputError(f"{name}: invalid JSON ({_one_line(e)})") from None
    ev_dec = msgspec.json.Decoder(_EventRawTs if raw_ts else _Event)
    events = []
    bad = 0
    first_err = None
    for i, r in enumerate(raw):
        try:
            events.append(ev_dec.decode(r))
        except (msgspec.ValidationError, msgspec.DecodeError) as e:
            bad += 1
            if first_err is None:
                first_err = f"traceEvents[{i}]: {_one_line(e)}"
    top = None
    if not is_list:
        try:  # whitelisted top-level fields only, events skipped
            top = msgspec.json.decode(data, type=msgspec.defstruct(
                "_TopMeta", [(f, Any, None) for f in _TOP_FIELDS]))
        except (msgspec.ValidationError, msgspec.DecodeError):
            top = None
    if bad:
        warnings.append(f"skipped {bad} malformed event(s) (first: {first_err})")
    if bad and not events:
        raise InputError(f"{name}: no valid events ({bad} malformed; first: {first_err})")
    del verr
    return top, events, warnings


# --------------------------------------------------------------------------------------
# column helpers
# --------------------------------------------------------------------------------------
_INT_TAIL = re.compile(r"(-?\d+)\s*$")


def _to_int_slow(v) -> int:
    if v is None or isinstance(v, bool):
        return -1
    if isinstance(v, int):
        return _in_int64(v)
    if isinstance(v, float):
        return int(v) if v == v and abs(v) < 9e18 else -1
    if isinstance(v, str):
        s = v.strip()[:64]
        try:
            return _in_int64(int(s, 0))
        except ValueError:
            pass
        try:
            f = float(s)
            return int(f) if f == f and abs(f) < 9e18 else -1
        except ValueError:
            m = _INT_TAIL.search(s)
            return _in_int64(int(m.group(1))) if m else -1
    return -1


def _in_int64(v: int) -> int:
    return v if -(2 ** 63) <= v < 2 ** 63 else -1


def _int_col(values: list) -> np.ndarray:
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.fromiter((_to_int_slow(v) for v in values), dtype=np.int64, count=len(values))


def _int_col_of(seq: list, get, n: int) -> np.ndarray:
    """``_int_col(list(map(get, seq)))`` without the list when every value converts as is
    (np.fromiter converts exactly as np.array does, and raises where it raises)."""
    try:
        return np.fromiter(map(get, seq), dtype=np.int64, count=n)
    except (TypeError, ValueError, OverflowError):
        return _int_col(list(map(get, seq)))


_GET = {f: attrgetter(f) for f in ("ts", "dur", "args", "correlation", "ext_id", "device", "stream", "bytes",
                                    "kind", "input_dims", "input_type", "concrete")}
_A0 = _Args()


def _first_seen_codes(d: dict, keys, n: int) -> np.ndarray:
    """Codes of ``n`` hashable ``keys`` (an iterable) in first-seen order; ``d`` (empty) receives the
    distinct keys in that order.  One C-level dict pass: each key is hashed once."""
    first = np.fromiter(map(d.setdefault, keys, range(n)), dtype=np.int64, count=n)  # index of its first event
    lut = np.empty(n, dtype=np.int32)
    lut[np.fromiter(d.values(), dtype=np.int64, count=len(d))] = np.arange(len(d), dtype=np.int32)
    return lut[first]


_KEY5 = attrgetter("ph", "cat", "name", "pid", "tid")


def _factorize(values: list) -> tuple[np.ndarray, list]:
    """codes (int32) and the distinct values in first-seen order (dict-based)."""
    uniq = list(dict.fromkeys(values))
    idx = {v: i for i, v in enumerate(uniq)}
    codes = np.fromiter(map(idx.__getitem__, values), dtype=np.int32, count=len(values))
    return codes, uniq


def _ts_exact_ns_from_text(ip: list, fp: list, ex: list) -> np.ndarray:
    """Exact ns from the decimal text parts (integer, fraction, exponent)."""
    n = len(ip)
    if not any(ex):
        ipa = np.array(ip, dtype=np.int64) if n else np.zeros(0, np.int64)
        neg = np.array(ip, dtype="S1") == b"-" if n else np.zeros(0, bool)
        d = np.array(fp, dtype="S4").view(np.uint8).reshape(n, 4).astype(np.int64) if n else np.zeros((0, 4), np.int64)
        d = np.where(d == 0, 0, d - 48)  # NUL padding -> 0
        frac3 = d[:, 0] * 100 + d[:, 1] * 10 + d[:, 2] + (d[:, 3] >= 5)  # half-up on the 4th digit
        frac3 = np.where(neg, -frac3, frac3)
        return ipa * 1000 + frac3
    from decimal import Decimal, ROUND_HALF_EVEN
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        s = ip[i] + (b"." + fp[i] if fp[i] else b"") + (b"e" + ex[i] if ex[i] else b"")
        out[i] = int((Decimal(s.decode()) * 1000).to_integral_value(ROUND_HALF_EVEN))
    return out


def _raw_ts_ns(raws: list) -> np.ndarray:
    """Slow exact path: ts decoded as raw JSON text per event."""
    from decimal import Decimal, InvalidOperation, ROUND_HALF_EVEN
    out = np.empty(len(raws), dtype=np.int64)
    ok = np.ones(len(raws), dtype=bool)
    for i, r in enumerate(raws):
        try:
            out[i] = int((Decimal(r.decode()) * 1000).to_integral_value(ROUND_HALF_EVEN))
        except (InvalidOperation, ValueError, TypeError, OverflowError):
            out[i] = 0
            ok[i] = False
    return out, ok


def _us_to_ns_fast(x: np.ndarray) -> np.ndarray:
    ip = np.floor(x)
    return ip.astype(np.int64) * 1000 + np.rint((x - ip) * 1000.0).astype(np.int64)


# --------------------------------------------------------------------------------------
# load
# --------------------------------------------------------------------------------------
# Progress line on stderr: only when stderr is a terminal and the file is at least this big on disk.
PROGRESS_MIN_BYTES = 32 << 20
PROGRESS_EVERY_S = 0.5


def _progress_line(p: Path):
    """(show(bytes_read, events), erase()) writing one self-overwriting line to a TTY stderr; None otherwise."""
    err = sys.stderr
    try:
        if not err.isatty() or p.stat().st_size < PROGRESS_MIN_BYTES:
            return None
    except (OSError, ValueError, AttributeError):
        return None
    state = {"t": float("-inf"), "shown": False}

    def show(nbytes: int, nevents: int) -> None:
        now = time.monotonic()
        if now - state["t"] < PROGRESS_EVERY_S:
            return
        state["t"] = now
        state["shown"] = True
        err.write(f"\r\x1b[K{p.name[:60]}: {nbytes / 1e6:,.0f} MB read, {nevents:,d} events decoded")
        err.flush()

    def erase() -> None:
        if state["shown"]:
            err.write("\r\x1b[K")
            err.flush()
    return show, erase


def load(path, max_decompressed: int | None = None, batch_bytes: int | None = None) -> Trace:
    """Import a PyTorch profiler (Kineto) Chrome trace; raises InputError on bad input.

    batch_bytes: size of the streamed traceEvents batches (default STREAM_BATCH_BYTES); 0 decodes
    the whole file at once (the path every anomaly falls back to)."""
    enabled = gc.isenabled()
    gc.disable()  # millions of short-lived objects: the cyclic GC only costs time here
    prog = _progress_line(Path(path))
    try:
        return _load(path, max_decompressed, batch_bytes, prog[0] if prog else None)
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
        if prog:
            prog[1]()
        if enabled:
            gc.enable()


# Below this much (inflated) input the heap freed by the batches is small and the next allocations
# reuse it: trimming would only cost time (~10 ms on a 35 MB trace, issue 26) and page faults.
_TRIM_MIN_BYTES = 4 * (16 << 20)


def _trim_heap() -> None:
    """Give the heap freed by the decoded batches (Structs, strings) back to the OS before the
    columns are built: glibc keeps ~70 MB of it on a 2M-event trace, which would add to the peak
    RSS of the build. glibc only; a no-op elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class _Fallback(Exception):
    """The streaming decode met something it does not handle itself: decode the whole file."""


# Streaming decode: traceEvents is cut into batches of about this many bytes.
STREAM_BATCH_BYTES = 16 << 20
_STREAM_TRIES = 8                  # candidate cuts tried per batch before giving up (-> whole-file decode)
_STREAM_PREFIX_MAX = 64 << 20      # top-level content before traceEvents kept at most
_CUT_RE = re.compile(rb"\s*,\s*\{")
_KEY_RE = re.compile(rb'"traceEvents"\s*:\s*\[')


def _load(path, max_decompressed=None, batch_bytes: int | None = None, progress=None) -> Trace:
    p = Path(path)
    name = p.name
    batch_bytes = STREAM_BATCH_BYTES if batch_bytes is None else batch_bytes
    if batch_bytes > 0:
        try:
            cols = _Cols()
            top = _stream_decode(p, max_decompressed, batch_bytes, cols, progress)
            if cols.nread >= _TRIM_MIN_BYTES:
                _trim_heap()
            return _build(cols, top, [], name, None)
        except (_Fallback, ValueError, TypeError, OverflowError, AttributeError, IndexError, KeyError,
                RecursionError):
            pass  # the whole-file decode below gives the exact result, repairs and messages
        finally:
            cols = None
    data = _read_bytes(p, max_decompressed)
    top, events, warnings = decode_events(data, name)
    cols = _Cols()
    cols.add(events)
    del events
    return _build(cols, top, warnings, name, data)


def _stream_decode(p: Path, max_decompressed, batch_bytes: int, cols: "_Cols", progress):
    """Feed ``cols`` batch by batch from the (inflated) file; returns the top-level metadata.
    Raises _Fallback for anything unusual (a list at top level, a BOM, invalid or damaged JSON,
    malformed events, a cut that cannot be confirmed): the whole-file decode then handles it
    exactly as before, with its repairs and messages."""
    chunks = _iter_bytes(p, max_decompressed)
    buf = bytearray()
    eof = False
    nread = 0

    def more() -> bool:
        nonlocal eof, nread
        if eof:
            return False
        c = next(chunks, None)
        if c is None:
            eof = True
            return False
        buf.extend(c)
        nread += len(c)
        return True

    # ---- prefix up to and including '"traceEvents": [' -------------------------------
    while True:
        m = _KEY_RE.search(buf)
        if m:
            break
        if len(buf) > _STREAM_PREFIX_MAX or not more():
            raise _Fallback
    if bytes(buf[:m.start()]).lstrip(b" \t\r\n")[:1] != b"{":
        raise _Fallback
    prefix = bytes(buf[:m.start()])
    # buf[0] is kept as the '[' in front of the next event, so a batch is decoded in place
    # (buf[:k + 2] with the ',' after its last event turned into ']' for the moment): no copy
    del buf[:m.end() - 1]
    # ---- the array, batch by batch ------------------------------------------------------------
    tail = None
    while tail is None:
        while len(buf) - 1 < batch_bytes and more():
            pass
        if eof:
            tail = buf
            break
        # candidate cuts: '}' followed by ',' and '{' (whitespace allowed), latest first
        hi = len(buf)
        for _ in range(_STREAM_TRIES):
            k = buf.rfind(b"}", 0, hi)
            while k >= 0:
                mm = _CUT_RE.match(buf, k + 1)
                if mm and mm.end() < len(buf):
                    break
                k = buf.rfind(b"}", 0, k)
            if k < 0:
                break
            sep = buf[k + 1]
            buf[k + 1] = 0x5D   # ']'
            try:
                evs, raw = _decode_in_place(buf, k + 2)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError):
                buf[k + 1] = sep
                hi = k
                continue
            cols.add(evs, raw)
            del evs
            _release(raw)
            del buf[:mm.end() - 2]
            buf[0] = 0x5B       # '['
            if progress is not None:
                progress(nread, cols.n)
            break
        else:
            raise _Fallback
        if k < 0:
            if len(buf) - 1 > 4 * batch_bytes + (64 << 20):
                raise _Fallback  # one huge event (or no cut at all): let the whole decode judge it
            if not more():
                continue
    # ---- last events, the closing ']' and the rest of the top-level object --------------------
    hi = len(tail)
    for _ in range(_STREAM_TRIES * 4):
        r = tail.rfind(b"]", 0, hi)
        if r < 0:
            raise _Fallback
        hi = r
        try:
            evs, raw = _decode_in_place(tail, r + 1)     # tail[0] is '[', tail[r] is ']'
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError):
            continue
        rest = prefix + b'"traceEvents":[]' + bytes(memoryview(tail)[r + 1:])
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


def _decode_in_place(buf: bytearray, end: int):
    """(events of ``buf[:end]``, the view they were decoded from) without copying the batch; the
    view must be given to ``_release`` once the events are dropped (msgspec.Raw fields point into it)."""
    view = memoryview(buf)[:end]
    try:
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


class _Lookup:
    """``x[i]`` = the i-th event's original value (factorised column)."""

    def __init__(self, uniq: list, codes: np.ndarray):
        self.uniq, self.codes = uniq, codes

    def __getitem__(self, i):
        return self.uniq[self.codes[i]]


class _Cols:
    """Compact columns of the decoded events, filled batch by batch (the Structs of a batch are
    dropped after ``add``).  Per-event numbers become numpy columns; strings are factorised with
    one dict per field in first-seen order (so the result does not depend on the batching);
    args are kept only where a later step reads them (metadata, instants, shapes, flow ids)."""

    _KEEP_ARGS = {"M", "i", "I"}
    _FLOW_PH = {"s", "f", "t"}

    def __init__(self):
        self.n = 0
        self.nread = 0            # (inflated) bytes the streamed decode read
        self.d = {k: {} for k in ("ph", "cat", "name", "pid", "tid")}
        self.parts: dict[str, list] = {k: [] for k in ("ph", "cat", "name", "pid", "tid", "ts_f", "ts_i", "dur_f",
                                                        "corr", "ext", "device", "stream", "bytes", "ts_x",
                                                        "shape")}
        self.ts_types: set = set()
        self.outer_ts = False     # a "ts" key outside traceEvents (streamed)
        self.insane = 0
        self.kind: dict = {}      # event index -> args.kind (not None)
        self.shapes: dict = {}    # distinct record_shapes details (bytes) -> code in the "shape" column
        self.margs: dict = {}     # event index -> args (M / i / I events)
        self.ids: dict = {}       # event index -> id (flow events)

    @staticmethod
    def _codes(d: dict, values: list) -> np.ndarray:
        for v in dict.fromkeys(values):
            if v not in d:
                d[v] = len(d)
        return np.fromiter(map(d.__getitem__, values), dtype=np.int32, count=len(values))

    _KEYS = ("ph", "cat", "name", "pid", "tid")

    def _key_codes(self, events: list) -> list:
        """Codes of ph, cat, name, pid, tid (``_codes`` of each field): one factorisation of the
        (ph, cat, name, pid, tid) tuples, then each field's codes from the few distinct tuples. A
        field value is first seen in the first distinct tuple holding it, so every field's dict
        fills in the same first-seen order (and merges the same Python-equal values) as per field."""
        cd: dict = {}
        codes = _first_seen_codes(cd, map(_KEY5, events), len(events))
        out = []
        for j, k in enumerate(self._KEYS):
            d = self.d[k]
            lut = np.empty(len(cd), dtype=np.int32)
            for ci, c in enumerate(cd):
                v = c[j]
                if v not in d:
                    d[v] = len(d)
                lut[ci] = d[v]
            out.append(lut[codes])
        return out

    def _shape_codes(self, al: list, ops: np.ndarray) -> np.ndarray:
        """Code of each event's record_shapes detail in ``self.shapes`` (-1: none); ``ops``: the CPU-op
        events (the only ones whose details are read). The (dims, types, concrete) triples are factorised
        in C-level passes; the detail text is built once per distinct triple, in first-seen order."""
        shape = np.full(len(al), -1, np.int32)
        oa = list(map(al.__getitem__, ops.tolist()))
        if not any(map(_GET["input_dims"], oa)):    # no record_shapes (empty Raw = missing key)
            return shape
        kc: dict = {}
        codes = _first_seen_codes(kc, zip(*(map(bytes, map(_GET[f], oa)) for f in ("input_dims", "input_type",
                                                                                   "concrete"))), len(oa))
        del oa
        sd = self.shapes
        lut = np.full(len(kc), -1, np.int32)
        for j, (d, t, c) in enumerate(kc):
            if d and d != b"null":
                lut[j] = sd.setdefault(b'{"dims":' + d + b',"types":' + (t or b"null")
                                       + b',"concrete":' + (c or b"null") + b"}", len(sd))
        shape[ops] = lut[codes]
        return shape

    def exact_ok(self) -> bool:
        return not self.outer_ts and all(x is not None for x in self.parts["ts_x"])

    def add(self, events: list, raw=None) -> None:
        n0, n = self.n, len(events)
        if not n:
            return
        P, D = self.parts, self.d
        for k, codes in zip(self._KEYS, self._key_codes(events)):
            P[k].append(codes)
        # pid / tid keep each event's original value (a track name may show it): float ids, which
        # would merge with equal ints in the factorisation, are left to the whole-file decode
        for k in ("pid", "tid"):
            if float in set(map(type, D[k])) and raw is not None:
                raise _Fallback
        # C-level passes (map + attrgetter + fromiter: the values np.array would make of the lists)
        ts_l = list(map(_GET["ts"], events))
        ts_f = np.fromiter(ts_l, dtype=np.float64, count=n)  # None -> nan
        dur_f = np.fromiter(map(_GET["dur"], events), dtype=np.float64, count=n)
        # Times beyond these cannot be real and would overflow int64 nanoseconds downstream:
        # |ts| < 4e15 us (year ~2096 on an epoch clock), 0 <= dur < 1e12 us (11.6 days).
        insane = (~np.isnan(ts_f) & ~(np.abs(ts_f) < _TS_MAX_US)) | (~np.isnan(dur_f) & ~(np.abs(dur_f) < _DUR_MAX_US))
        if insane.any():
            self.insane += int(insane.sum())
            ts_f[insane] = np.nan
            for i in np.flatnonzero(insane).tolist():
                ts_l[i] = None
        types = set(map(type, ts_l))
        self.ts_types |= types
        if types <= {int}:
            P["ts_i"].append(np.array(ts_l, dtype=np.int64))
        elif types <= {int, type(None)}:
            P["ts_i"].append(np.array([0 if t is None else t for t in ts_l], dtype=np.int64))
        else:
            P["ts_i"].append(None)
        P["ts_f"].append(ts_f)
        # exact ns of epoch-us float timestamps need the text: read it from this batch now
        has = ~np.isnan(ts_f)
        x = None
        if raw is not None and has.any():
            if float not in types:
                x = P["ts_i"][-1][has] * 1000
                P["ts_i"][-1] = None   # x holds the same times (one copy less of the biggest column)
            elif np.isfinite(ts_f[has]).all() and float(np.abs(ts_f[has]).max()) >= _FAST_TS_LIMIT:
                x = _ts_from_text(raw, ts_f[has])
        elif not has.any():
            x = np.zeros(0, np.int64)
        P["ts_x"].append(x)
        P["dur_f"].append(dur_f)
        args_l = list(map(_GET["args"], events))
        al = [a or _A0 for a in args_l] if None in args_l else args_l
        for k, f in (("corr", "correlation"), ("ext", "ext_id")):
            P[k].append(_int_col_of(al, _GET[f], n))
        cat_kind = [_CAT_KIND.get(c.strip().lower().replace(" ", "_") if isinstance(c, str) else "", (None, 0))
                    for c in D["cat"]]
        # device, stream, bytes and args.kind are read for GPU-side spans only (_build): -1 / absent elsewhere
        gpu = np.flatnonzero(np.array([side == _GPU for _k, side in cat_kind], dtype=bool)[P["cat"][-1]])
        ga = list(map(al.__getitem__, gpu.tolist())) if len(gpu) < n else al
        for k in ("device", "stream", "bytes"):
            col = _int_col_of(ga, _GET[k], len(ga))
            if len(gpu) < n:
                col, col_g = np.full(n, -1, dtype=np.int64), col
                col[gpu] = col_g
            P[k].append(col)
        kinds = list(map(_GET["kind"], ga))
        if kinds.count(None) != len(kinds):      # args.kind is rare (AMD memcpy): skip the scan without one
            for j in [j for j, k in enumerate(kinds) if k is not None]:
                self.kind[n0 + int(gpu[j])] = kinds[j]
        del kinds, ga
        # record_shapes details are read for CPU_OP spans only (_shape_details): look at ops only
        op_cat = np.array([k == SpanKind.CPU_OP for k, _side in cat_kind], dtype=bool)
        P["shape"].append(self._shape_codes(al, np.flatnonzero(op_cat[P["cat"][-1]])))
        ph_codes = P["ph"][-1]
        lut = np.array([v in self._KEEP_ARGS for v in D["ph"]], dtype=bool)
        for i in np.flatnonzero(lut[ph_codes]).tolist():
            self.margs[n0 + i] = args_l[i]
        # flow ids: only fwdbwd flows are paired by id (launch flows use the correlation)
        fl = np.array([v in self._FLOW_PH for v in D["ph"]], dtype=bool)[ph_codes]
        if fl.any():
            cl = np.array([isinstance(c, str) and c.strip().lower().replace(" ", "_") in _FLOW_FWDBWD_CATS
                           for c in D["cat"]], dtype=bool)[P["cat"][-1]]
            for i in np.flatnonzero(fl & cl).tolist():
                self.ids[n0 + i] = events[i].id
        self.n += n

    def col(self, k: str) -> np.ndarray:
        parts = self.parts[k]
        out = parts[0] if len(parts) == 1 else np.concatenate(parts)
        self.parts[k] = [out]
        return out

    def pop(self, k: str) -> np.ndarray:
        """The whole column, released from ``self`` (peak memory: _build drops each column once used)."""
        out = self.col(k)
        self.parts[k] = []
        return out

    def uniq(self, k: str) -> list:
        return list(self.d[k])

    def id_col(self, k: str):
        """(int64 ids, named flags, original values) of pid/tid, as _id_col on the whole column."""
        uniq = list(self.d[k])
        mcodes, muniq = _factorize(uniq)          # Python-equal values merged, as in one list
        vals, named = _id_col(muniq)
        codes = self.pop(k)
        return vals[mcodes][codes], named[mcodes][codes], _Lookup(uniq, codes)


def _build(cols: _Cols, top, warnings: list, name: str, data: bytes | None) -> Trace:
    n = cols.n
    if n == 0:
        raise InputError(f"{name}: empty trace (traceEvents has no events)")
    ph_codes, ph_uniq = cols.pop("ph"), cols.uniq("ph")
    ph_arr = np.array([u if isinstance(u, str) else "" for u in ph_uniq], dtype=object)
    is_X = _code_mask(ph_codes, ph_uniq, {"X"})
    is_i = _code_mask(ph_codes, ph_uniq, {"i", "I"})
    is_M = _code_mask(ph_codes, ph_uniq, {"M"})
    is_flow = _code_mask(ph_codes, ph_uniq, {"s", "f", "t"})
    other_ph = ~(is_X | is_i | is_M | is_flow)
    if other_ph.any():
        kinds_seen = sorted({str(ph_arr[c]) for c in np.unique(ph_codes[other_ph])})
        warnings.append(f"ignored {int(other_ph.sum())} event(s) with unsupported phase(s) {kinds_seen}")

    ts_f = cols.pop("ts_f")
    dur_f = cols.pop("dur_f")
    if cols.insane:
        warnings.append(f"skipped {cols.insane} event(s) with an out-of-range ts or dur")

    # ---- timestamps -> exact int64 ns ---------------------------------------------------
    has_ts = ~np.isnan(ts_f)
    ts_types = cols.ts_types
    if float not in ts_types and ts_types <= {int, type(None)} and has_ts.any() \
            and float(np.abs(ts_f[has_ts]).max()) < 9.2e15:
        # every ts is written as an integer (epoch-us clocks of older Kineto): exact as is
        ts_ns = np.zeros(n, dtype=np.int64)
        if all(x is not None for x in cols.parts["ts_x"]):   # streamed: each batch's exact ns, kept by add()
            ts_ns[has_ts] = cols.pop("ts_x")
        else:
            ts_ns[has_ts] = cols.pop("ts_i")[has_ts] * 1000
    else:
        ts_ns = _timestamps_ns(data, ts_f, has_ts, warnings, cols)
    del data, ts_f
    cols.parts["ts_i"] = cols.parts["ts_x"] = []

    # ---- categories and kinds --------------------------------------------------------
    cat_codes, cat_uniq = cols.pop("cat"), cols.uniq("cat")
    ncat = len(cat_uniq)
    cat_kind = np.zeros(ncat, dtype=np.uint8)
    cat_side = np.full(ncat, _CPU, dtype=np.uint8)
    cat_ignored = np.zeros(ncat, dtype=bool)
    cat_flow = np.zeros(ncat, dtype=np.uint8)
    for i, c in enumerate(cat_uniq):
        key = c.strip().lower().replace(" ", "_") if isinstance(c, str) else ""
        if key in _CAT_KIND:
            k, side = _CAT_KIND[key]
            cat_kind[i] = k
            cat_side[i] = side
        if key in _IGNORED_CATS:
            cat_ignored[i] = True
        if key in _FLOW_LAUNCH_CATS:
            cat_flow[i] = FlowKind.LAUNCH
        elif key in _FLOW_FWDBWD_CATS:
            cat_flow[i] = FlowKind.FWDBWD
    name_codes, name_uniq = cols.pop("name"), cols.uniq("name")
    name_str = [u if isinstance(u, str) else ("" if u is None else str(u)) for u in name_uniq]

    b = TraceBuilder()
    strings = b.strings
    name_gid = np.fromiter((strings.intern(s) for s in name_str), dtype=np.int32, count=len(name_str))
    cat_gid = np.fromiter((strings.intern(c if isinstance(c, str) else "") for c in cat_uniq),
                          dtype=np.int32, count=ncat)

    # ---- pids / tids ------------------------------------------------------------------
    pid, pid_named, pid_l = cols.id_col("pid")
    tid, tid_named, tid_l = cols.id_col("tid")

    # ---- duration events ------------------------------------------------------------------
    bad_time = is_X & ~has_ts
    if bad_time.any():
        warnings.append(f"skipped {int(bad_time.sum())} duration event(s) without a numeric ts")
    span_sel = is_X & has_ts & ~cat_ignored[cat_codes]
    sidx = np.flatnonzero(span_sel)
    skind = cat_kind[cat_codes[sidx]]
    sside = cat_side[cat_codes[sidx]]
    # ProfilerStep#N on the host -> STEP
    step_name = np.fromiter((bool(_STEP_RE.match(s)) for s in name_str), dtype=bool, count=len(name_str))
    is_step = step_name[name_codes[sidx]] & np.isin(skind, [SpanKind.ANNOTATION, SpanKind.CPU_OP, SpanKind.OTHER]) & (sside == _CPU)
    skind = np.where(is_step, np.uint8(SpanKind.STEP), skind).astype(np.uint8)

    dur_sel = dur_f[sidx]
    del dur_f
    nodur = np.isnan(dur_sel)
    if nodur.any():
        warnings.append(f"{int(nodur.sum())} duration event(s) had no dur (treated as 0)")
    neg = dur_sel < 0
    if neg.any():
        warnings.append(f"{int(neg.sum())} event(s) had a negative dur (clamped to 0)")
    dur_sel = np.where(nodur | neg, 0.0, dur_sel)
    start = ts_ns[sidx]
    end = start + np.rint(dur_sel * 1000.0).astype(np.int64)
    del dur_sel, nodur, neg

    # args columns (only for span events)
    corr = cols.pop("corr")[sidx]
    ext = cols.pop("ext")[sidx]
    adev_all, astr_all = cols.pop("device"), cols.pop("stream")

    gpu = sside == _GPU
    gidx = np.flatnonzero(gpu)
    dev = np.full(len(sidx), -1, dtype=np.int64)
    stream = np.full(len(sidx), -1, dtype=np.int64)
    if len(gidx):
        adev = adev_all[sidx[gidx]]
        astr = astr_all[sidx[gidx]]
        gpid = pid[sidx[gidx]]
        gpid_ok = (gpid >= 0) & (gpid < 4096) & ~pid_named[sidx[gidx]]
        dev[gidx] = np.where(adev >= 0, adev, np.where(gpid_ok, gpid, 0))
        gtid = tid[sidx[gidx]]
        stream[gidx] = np.where(astr >= 0, astr, np.where(gtid >= 0, gtid, 0))
        del adev, astr, gpid, gpid_ok, gtid
    del adev_all, astr_all

    # bytes / copy kinds for memcpy + memset
    nbytes = np.full(len(sidx), -1, dtype=np.int64)
    copy_kind = np.zeros(len(sidx), dtype=np.uint8)
    src_mem = np.zeros(len(sidx), dtype=np.uint8)
    dst_mem = np.zeros(len(sidx), dtype=np.uint8)
    midx = np.flatnonzero((skind == SpanKind.MEMCPY) | (skind == SpanKind.MEMSET))
    bytes_all = cols.pop("bytes")
    if len(midx):
        nbytes[midx] = bytes_all[sidx[midx]]
        cidx = midx[skind[midx] == SpanKind.MEMCPY]
        if len(cidx):
            nc = name_codes[sidx[cidx]]
            u, inv = np.unique(nc, return_inverse=True)
            ck = np.zeros(len(u), np.uint8)
            sm = np.zeros(len(u), np.uint8)
            dm = np.zeros(len(u), np.uint8)
            for j, code in enumerate(u.tolist()):
                ck[j], sm[j], dm[j] = _parse_memcpy_name(name_str[code])
            copy_kind[cidx] = ck[inv]
            src_mem[cidx] = sm[inv]
            dst_mem[cidx] = dm[inv]
            unk = cidx[copy_kind[cidx] == 0]
            if len(unk):  # no direction in the name: args.kind ("HtoD")
                for i in unk.tolist():
                    k = cols.kind.get(int(sidx[i]))
                    copy_kind[i] = _DIR.get(str(k).strip().lower(), CopyKind.UNKNOWN) if k is not None else CopyKind.UNKNOWN

    # ---- tracks --------------------------------------------------------------------------
    spid = pid[sidx]
    stid = tid[sidx]
    named = pid_named[sidx]
    tkind = np.where(gpu, TrackKind.GPU_STREAM, np.where(named, TrackKind.OTHER, TrackKind.CPU_THREAD)).astype(np.uint8)
    tpid = np.where(gpu, -1, spid)
    ttid = np.where(gpu, stream, stid)
    tdev = np.where(gpu, dev, -1)
    meta_names = _metadata_names(is_M, name_codes, name_str, pid, tid, pid_named, cols.margs)
    track_of = _assign_tracks(b, tkind, tpid, ttid, tdev, meta_names, pid_l, tid_l, sidx)

    # ---- instants: marks and memory counters ------------------------------------------------
    iidx = np.flatnonzero(is_i & has_ts)
    mark_rows = None
    if len(iidx):
        iargs = [cols.margs[i] for i in iidx.tolist()]
        mem_name = strings.get("[memory]")
        is_mem = name_gid[name_codes[iidx]] == mem_name if mem_name >= 0 else np.zeros(len(iidx), bool)
        if is_mem.any():
            _memory_counters(b, iidx[is_mem], [a for a, m in zip(iargs, is_mem.tolist()) if m], pid, ts_ns)
        keep = iidx[~is_mem]
        if len(keep):
            kpid = pid[keep]
            knamed = pid_named[keep]
            kk = np.where(knamed, TrackKind.OTHER, TrackKind.CPU_THREAD).astype(np.int64)
            ktr = _assign_tracks(b, kk, kpid, tid[keep], np.full(len(keep), -1, np.int64), meta_names,
                                 pid_l, tid_l, keep)
            mark_rows = (keep, ktr)

    # ---- add spans ---------------------------------------------------------------------------
    if len(sidx) == 0:
        raise InputError(f"{name}: empty trace (no duration events among {n} trace events)")
    scat = cat_gid[cat_codes[sidx]]
    sname = name_gid[name_codes[sidx]]
    b.add_spans(start_ns=start, end_ns=end, track=track_of, kind=skind, name=sname, cat=scat,
                correlation=corr, ext_id=ext, bytes=nbytes, copy_kind=copy_kind,
                src_mem=src_mem, dst_mem=dst_mem, detail=_shape_details(b, skind, cols.pop("shape")[sidx], list(cols.shapes)))
    if mark_rows is not None:
        keep, ktr = mark_rows
        kst = ts_ns[keep]
        b.add_spans(start_ns=kst, end_ns=kst, track=ktr, kind=np.uint8(SpanKind.MARK),
                    name=name_gid[name_codes[keep]], cat=cat_gid[cat_codes[keep]])

    # ---- launch flows ----------------------------------------------------------------------
    _launch_flows(b, skind, spid, corr, start, named, warnings)

    # ---- meta ---------------------------------------------------------------------------------
    b.meta.update(_meta(top, name, warnings))
    fidx = np.flatnonzero(is_flow & has_ts & (cat_flow[cat_codes] == FlowKind.FWDBWD))
    # the builder holds the span columns now: drop the per-event and per-span temporaries
    # before finalize() sorts them (peak memory of big traces, issue 13)
    del bytes_all, start, end, corr, ext, dev, stream, nbytes, copy_kind, src_mem, dst_mem, skind, sside, \
        spid, stid, named, tkind, tpid, ttid, tdev, track_of, scat, sname, gpu, sidx, span_sel, \
        cat_codes, name_codes, mark_rows, is_X, is_i, is_M, is_flow, other_ph, has_ts, pid_l, tid_l, \
        pid_named, tid_named
    if not len(fidx):
        del pid, tid, ts_ns, ph_codes
    trace = b.finalize(release=True)
    # fwdbwd flows need final span order (after finalize)
    if len(fidx):
        _fwdbwd_flows(trace, fidx, ph_codes, ph_uniq, cols.ids, pid, tid, ts_ns, warnings)
    return trace


def _shape_details(b: TraceBuilder, skind: np.ndarray, scode: np.ndarray, shapes: list) -> np.ndarray:
    """CPU_OP spans recorded with ``record_shapes``: ``{"dims":..,"types":..,"concrete":..}`` (the raw JSON of
    Input Dims / Input type / Concrete Inputs) as a string id in ``detail``; -1 elsewhere."""
    out = np.full(len(scode), -1, dtype=np.int32)
    if not shapes:
        return out
    intern = b.strings.intern
    sel = np.flatnonzero((skind == SpanKind.CPU_OP) & (scode >= 0))
    if not len(sel):
        return out
    # each distinct detail interned once, in the order of its first span (the string ids of a
    # per-span loop)
    u, first, inv = np.unique(scode[sel], return_index=True, return_inverse=True)
    lut = np.full(len(u), -1, dtype=np.int32)
    for j in np.argsort(first, kind="stable").tolist():
        try:
            lut[j] = intern(shapes[int(u[j])].decode("utf-8"))
        except UnicodeDecodeError:
            pass
    out[sel] = lut[inv.reshape(-1)]
    return out


def _code_mask(codes: np.ndarray, uniq: list, wanted: set) -> np.ndarray:
    lut = np.fromiter((u in wanted for u in uniq), dtype=bool, count=len(uniq))
    return lut[codes] if len(uniq) else np.zeros(len(codes), bool)


_TS_MAX_US = 4.0e15
_DUR_MAX_US = 1.0e12


def _id_col(values) -> tuple[np.ndarray, np.ndarray]:
    """pid/tid column: ints stay; numeric strings parse; 'stream 7' -> 7;
    other strings ('Spans', '') get distinct negative ids <= -2 and are flagged named."""
    try:
        arr = np.array(values, dtype=np.int64)
        return arr, np.zeros(len(arr), bool)
    except (TypeError, ValueError, OverflowError):
        pass
    codes, uniq = _factorize(list(values))
    vals = np.empty(len(uniq), np.int64)
    named = np.zeros(len(uniq), bool)
    nxt = -2
    for i, u in enumerate(uniq):
        if isinstance(u, bool) or u is None:
            vals[i] = -1
        elif isinstance(u, int):
            vals[i] = u if -(2 ** 63) <= u < 2 ** 63 else -1
        elif isinstance(u, float):
            vals[i] = int(u) if u == u and abs(u) < 9e18 else -1
        else:
            s = str(u).strip()
            m = re.fullmatch(r"(?:[A-Za-z_ ]*?\s)?(-?\d{1,18})", s[:80])
            if m:
                vals[i] = int(m.group(1))
            else:
                vals[i] = nxt
                nxt -= 1
                named[i] = True
    return vals[codes], named[codes]


def _parse_memcpy_name(s: str) -> tuple[int, int, int]:
    m = _MEMCPY_RE.match(s)
    if not m:
        return 0, 0, 0
    ck = _DIR.get(m.group(1).lower(), CopyKind.UNKNOWN)
    sm = _MEM.get((m.group(2) or "").lower(), MemKind.UNKNOWN)
    dm = _MEM.get((m.group(3) or "").lower(), MemKind.UNKNOWN)
    if ck == CopyKind.UNKNOWN and not m.group(2):
        return 0, 0, 0  # let args.kind decide
    return int(ck), int(sm), int(dm)


def _ts_from_text(data, tv: np.ndarray):
    """Exact ns of every ``"ts"`` in the text, when their count and values match the decoded
    floats ``tv`` (same count, within 1 us); None otherwise."""
    m = _TS_RE.findall(data)
    if len(m) != len(tv):
        return None
    ip = [x[0] for x in m]
    fp = [x[1] for x in m]
    ex = [x[2] for x in m]
    del m
    try:
        if not any(fp) and not any(ex):  # integer text: no per-event work
            exact = np.array(ip, dtype=np.int64) * 1000
        else:
            exact = _ts_exact_ns_from_text(ip, fp, ex)
        if np.all(np.abs(exact / 1000.0 - tv) <= np.maximum(1.0, np.abs(tv) * 1e-12)):
            return exact
    except (ValueError, OverflowError):
        pass
    return None


def _timestamps_ns(data: bytes | None, ts_f: np.ndarray, has_ts: np.ndarray,
                   warnings: list, cols=None) -> np.ndarray:
    ts_ns = np.zeros(len(ts_f), dtype=np.int64)
    if not has_ts.any():
        return ts_ns
    tv = ts_f[has_ts]
    if not np.isfinite(tv).all():
        bad = ~np.isfinite(ts_f) & has_ts
        warnings.append(f"{int(bad.sum())} event(s) with non-finite ts set to 0")
        tv = np.where(np.isfinite(tv), tv, 0.0)
        ts_f = np.where(np.isfinite(ts_f), ts_f, 0.0)
    amax = float(np.abs(tv).max())
    if amax < _FAST_TS_LIMIT:
        ts_ns[has_ts] = _us_to_ns_fast(tv)
        return ts_ns
    if data is None:  # streamed: the text of each batch was read there (or the whole decode redoes it)
        if cols is None or not cols.exact_ok():
            raise _Fallback
        ts_ns[has_ts] = cols.pop("ts_x")
        return ts_ns
    # exact decimal recovery from the raw text (one regex pass), verified below
    exact = _ts_from_text(data, tv)
    if exact is not None:
        ts_ns[has_ts] = exact
        return ts_ns
    # slow exact fallback: re-decode with ts as raw JSON text
    _top, ev2, _w = decode_events(data, "trace", raw_ts=True)
    raws = [bytes(e.ts) for e in ev2]
    if len(raws) == len(ts_f):
        sel = [r for r in raws if r and r != b"null"]
        exact, ok = _raw_ts_ns(sel)
        if len(exact) == int(has_ts.sum()) and ok.all():
            ts_ns[has_ts] = exact
            return ts_ns
    warnings.append("timestamps rounded to float64 precision (exact decimal recovery failed)")
    ts_ns[has_ts] = np.rint(tv * 1000.0).astype(np.int64)
    return ts_ns


def _metadata_names(is_M, name_codes, name_str, pid, tid, pid_named, args_l) -> dict:
    """{('p', pid): process_name, ('l', pid): labels, ('t', pid, tid): thread_name}."""
    out: dict = {}
    midx = np.flatnonzero(is_M)
    for i in midx.tolist():
        nm = name_str[name_codes[i]]
        a = args_l[i]
        if a is None:
            continue
        if nm == "process_name" and isinstance(a.name, str):
            out[("p", int(pid[i]))] = a.name.strip()
        elif nm == "process_labels" and isinstance(a.labels, str):
            out[("l", int(pid[i]))] = a.labels.strip()
        elif nm == "thread_name" and isinstance(a.name, str):
            out[("t", int(pid[i]), int(tid[i]))] = a.name.strip()
    return out


def _assign_tracks(b: TraceBuilder, tkind, tpid, ttid, tdev, meta_names, pid_l, tid_l, src_idx) -> np.ndarray:
    if len(tkind) == 0:
        return np.zeros(0, np.int32)
    cols4 = (tkind, tpid, ttid, tdev)
    # one mixed int64 key per row -> 1-D unique (much faster than unique(axis=0)); verified
    # column by column (no n x 4 copies: peak memory of big traces)
    mix = ((tpid * np.int64(1000003) + ttid) * np.int64(8191) + tdev) * np.int64(8) + tkind
    _u, first, inv = np.unique(mix, return_index=True, return_inverse=True)
    del mix, _u
    inv = inv.reshape(-1)
    if all(np.array_equal(c[first][inv], c) for c in cols4):
        uk = np.stack([c[first] for c in cols4], axis=1)
    else:  # hash collision (never seen): exact path
        uk, first, inv = np.unique(np.stack(cols4, axis=1), axis=0, return_index=True, return_inverse=True)
        inv = inv.reshape(-1)
    lut = np.empty(len(uk), dtype=np.int32)
    for j, (k, p, t, d) in enumerate(uk.tolist()):
        nm = ""
        if k == TrackKind.CPU_THREAD:
            nm = meta_names.get(("t", p, t), "")
            if not nm and ("p", p) in meta_names:
                nm = f"{meta_names[('p', p)]} tid {t}"
        elif k == TrackKind.GPU_STREAM:
            th = meta_names.get(("t", d, t), "")
            if th:
                lab = meta_names.get(("l", d), "") or f"GPU {d}"
                nm = f"{lab} {th}"
        else:
            i = int(src_idx[first[j]])
            nm = f"{pid_l[i]}/{tid_l[i]}".strip("/")
        lut[j] = b.track(TrackKind(k), pid=p, tid=t, device=d, name=nm)
    return lut[inv]


def _memory_counters(b: TraceBuilder, idx: np.ndarray, margs: list, pid, ts_ns) -> None:
    margs = [a if a is not None else _Args() for a in margs]   # a [memory] instant without args
    val = np.array([a.total_allocated if isinstance(a.total_allocated, (int, float)) else np.nan
                    for a in margs], dtype=np.float64)
    dtype_ = _int_col([a.device_type for a in margs])
    did = _int_col([a.device_id for a in margs])
    ok = ~np.isnan(val) & (dtype_ == 1)  # c10 DeviceType 1 = CUDA (ROCm also reports CUDA)
    if not ok.any():
        return
    for d in np.unique(did[ok]).tolist():
        sel = ok & (did == d)
        tr = b.track(TrackKind.COUNTER, pid=int(pid[idx[sel][0]]), device=int(d), name="gpu.mem_allocated_bytes")
        b.add_counters(tr, ts_ns[idx[sel]], val[sel])


def _launch_flows(b: TraceBuilder, skind, spid, corr, start, named, warnings) -> None:
    host = np.flatnonzero(((skind == SpanKind.RUNTIME) | (skind == SpanKind.DRIVER)) & (corr >= 0) & ~named)
    work = np.isin(skind, [SpanKind.KERNEL, SpanKind.MEMCPY, SpanKind.MEMSET])
    gdst = np.flatnonzero((work | (skind == SpanKind.GPU_SYNC)) & (corr >= 0))
    if not len(host) or not len(gdst):
        return
    hp = spid[host]
    hc = corr[host]
    # sort host calls by (pid, corr, start); duplicates within a pid keep the first
    o = np.lexsort((start[host], hc, hp))
    host, hp, hc = host[o], hp[o], hc[o]
    dup = np.zeros(len(host), bool)
    dup[1:] = (hp[1:] == hp[:-1]) & (hc[1:] == hc[:-1])
    if dup.any():
        warnings.append(f"{int(dup.sum())} host API call(s) repeat a (pid, correlation) pair; the first is used for launch flows")
        host, hp, hc = host[~dup], hp[~dup], hc[~dup]
    gc = corr[gdst]
    pids = np.unique(hp)
    if len(pids) == 1:
        pos = np.searchsorted(hc, gc)
        pos_c = np.minimum(pos, len(hc) - 1)
        ok = hc[pos_c] == gc
        src = host[pos_c[ok]]
        dst = gdst[ok]
    else:
        # candidates: host calls with equal correlation in any process
        oc = np.lexsort((start[host], hc))
        hc2, host2 = hc[oc], host[oc]
        lo = np.searchsorted(hc2, gc, "left")
        hi = np.searchsorted(hc2, gc, "right")
        cnt = hi - lo
        uniq = cnt == 1
        src_l = [host2[lo[uniq]]]
        dst_l = [gdst[uniq]]
        amb = np.flatnonzero(cnt > 1)
        if len(amb):
            # several processes used this correlation: latest call starting at or before
            # the GPU start (Chrome's s->f pairing rule for ac2g flows with equal ids).
            gs = start[gdst]
            s_l, d_l = [], []
            for j in amb.tolist():
                cand = host2[lo[j]:hi[j]]
                cs = start[cand]
                k = np.searchsorted(cs, gs[j], "right") - 1
                if k >= 0:
                    s_l.append(cand[k])
                    d_l.append(gdst[j])
            src_l.append(np.asarray(s_l, np.int64))
            dst_l.append(np.asarray(d_l, np.int64))
        src = np.concatenate(src_l)
        dst = np.concatenate(dst_l)
    if not len(src):
        return
    fk = np.where(skind[dst] == SpanKind.GPU_SYNC, FlowKind.OTHER, FlowKind.LAUNCH).astype(np.uint8)
    b.add_flows(src, dst, fk)


def _fwdbwd_flows(trace: Trace, fidx, ph_codes, ph_uniq, ids_of: dict, pid, tid, ts_ns, warnings) -> None:
    """Bind fwdbwd s/f endpoints to the innermost CPU op enclosing them, pair by id."""
    s = trace.spans
    tr = trace.tracks
    ops = np.flatnonzero(s.kind == SpanKind.CPU_OP)
    if not len(ops):
        return
    # (pid, tid) -> track index for CPU threads
    cpu = np.flatnonzero(tr.kind == TrackKind.CPU_THREAD)
    tkey = {(int(tr.pid[i]), int(tr.tid[i])): int(i) for i in cpu.tolist()}
    ep_track = np.array([tkey.get((int(pid[i]), int(tid[i])), -1) for i in fidx.tolist()], np.int64)
    ep_ts = ts_ns[fidx]
    ep_span = np.full(len(fidx), -1, np.int64)
    op_tr = s.track[ops]
    for t in np.unique(ep_track[ep_track >= 0]).tolist():
        cand = ops[op_tr == t]  # sorted by start (spans are sorted)
        if not len(cand):
            continue
        st = s.start_ns[cand]
        en = s.end_ns[cand]
        sel = np.flatnonzero(ep_track == t)
        pos = np.searchsorted(st, ep_ts[sel], "right") - 1
        res = np.full(len(sel), -1, np.int64)
        todo = pos >= 0
        for _ in range(64):  # walk back to the enclosing op (rarely more than a few steps)
            if not todo.any():
                break
            w = np.flatnonzero(todo)
            enc = en[pos[w]] >= ep_ts[sel[w]]
            res[w[enc]] = cand[pos[w[enc]]]
            todo[w[enc]] = False
            pos[w[~enc]] -= 1
            todo &= pos >= 0
        ep_span[sel] = res
    phs = [ph_uniq[c] for c in ph_codes[fidx].tolist()]
    ids = [ids_of[i] for i in fidx.tolist()]
    starts: dict = {}
    src, dst = [], []
    for j in np.argsort(ep_ts, kind="stable").tolist():
        if ep_span[j] < 0:
            continue
        key = ids[j]
        if phs[j] == "s":
            starts[key] = ep_span[j]
        elif phs[j] == "f" and key in starts:
            src.append(starts.pop(key))
            dst.append(ep_span[j])
    if not src:
        return
    from ..trace.model import Flows
    fl = trace.flows
    trace.flows = Flows(src=np.concatenate([fl.src, np.asarray(src, np.int32)]),
                        dst=np.concatenate([fl.dst, np.asarray(dst, np.int32)]),
                        kind=np.concatenate([fl.kind, np.full(len(src), FlowKind.FWDBWD, np.uint8)]))


def _scalar(v):
    if isinstance(v, bool) or isinstance(v, (int, float)):
        return v
    if isinstance(v, str) and len(v) <= 64:
        return v
    return None


_PG_MAX = 64            # process groups kept from distributedInfo.pg_config
_PG_RANKS_MAX = 1024    # ranks kept per process group


def _distributed(di) -> dict | None:
    """distributedInfo (torch.distributed: rank, world_size, backend, nccl_version, pg_count, pg_config),
    type-checked and bounded; None when absent or without a rank."""
    if not isinstance(di, dict) or not isinstance(di.get("rank"), int) or isinstance(di.get("rank"), bool):
        return None
    out: dict = {"rank": di["rank"]}
    for k in ("world_size", "pg_count"):
        if isinstance(di.get(k), int) and not isinstance(di.get(k), bool):
            out[k] = di[k]
    for k in ("backend", "nccl_version"):
        if isinstance(di.get(k), str):
            out[k] = di[k][:64]
    pgs = []
    for pg in di.get("pg_config") if isinstance(di.get("pg_config"), list) else []:
        if not isinstance(pg, dict) or len(pgs) >= _PG_MAX:
            continue
        ranks = pg.get("ranks") if isinstance(pg.get("ranks"), list) else []
        pgs.append({"pg_name": str(pg.get("pg_name", ""))[:64], "pg_desc": str(pg.get("pg_desc", ""))[:64],
                    "backend_config": str(pg.get("backend_config", ""))[:64],
                    "pg_size": pg["pg_size"] if isinstance(pg.get("pg_size"), int) and not isinstance(pg.get("pg_size"), bool) else None,
                    "ranks": [r for r in ranks[:_PG_RANKS_MAX] if isinstance(r, int) and not isinstance(r, bool)]})
    if pgs:
        out["pg_config"] = pgs
    return out


def _meta(top, fname: str, warnings: list) -> dict:
    meta: dict = {"source_format": "kineto", "source_file": fname}
    devices = []
    versions: dict = {}
    config: dict = {}
    if top is not None:
        dp = getattr(top, "deviceProperties", None)
        if isinstance(dp, list):
            for d in dp:
                if not isinstance(d, dict):
                    continue
                cc = None
                if isinstance(d.get("computeMajor"), int) and isinstance(d.get("computeMinor"), int):
                    cc = f"{d['computeMajor']}.{d['computeMinor']}"
                devices.append({
                    "id": d["id"] if isinstance(d.get("id"), int) else len(devices),
                    "name": d["name"][:128] if isinstance(d.get("name"), str) else None,
                    "total_memory_bytes": d.get("totalGlobalMem") if isinstance(d.get("totalGlobalMem"), int) else None,
                    "sm_count": d.get("numSms") if isinstance(d.get("numSms"), int) else None,
                    "compute_capability": cc,
                })
        for k in _VERSION_KEYS:
            v = _scalar(getattr(top, k, None))
            if v is not None:
                versions[k] = v
        for k in _CONFIG_KEYS:
            v = getattr(top, k, None)
            if isinstance(v, (bool, int)) and not isinstance(v, float):
                config[k] = bool(v)
    meta["devices"] = devices
    meta["tool_versions"] = versions
    dist = _distributed(getattr(top, "distributedInfo", None)) if top is not None else None
    if dist:
        meta["distributed"] = dist
    if config:
        meta["profiler_config"] = config
    meta["warnings"] = list(warnings)
    return meta
