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
import zlib
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
    data = read_input(p, expected="a PyTorch profiler trace")
    if data[:2] == b"\x1f\x8b":
        limit = decompress_limit(len(data), max_decompressed)
        out = []
        total = 0
        d = zlib.decompressobj(47)
        try:
            buf = data
            while True:
                while True:   # bounded steps: never more than `limit` bytes held
                    chunk = d.decompress(buf, 1 << 24)
                    buf = d.unconsumed_tail
                    total += len(chunk)
                    if total > limit:
                        raise InputError(
                            f"{p.name}: decompresses to more than {limit >> 20} MB "
                            f"({len(data) >> 10} KB compressed); if the trace is genuine, raise the limit with "
                            "--max-decompressed-mb or INFERSCOPE_MAX_DECOMPRESSED_MB")
                    out.append(chunk)
                    if d.eof or not buf:
                        break
                if not d.eof:
                    raise InputError(f"{p.name}: truncated gzip file (compressed stream ends early)")
                buf = d.unused_data
                if not buf or not buf.lstrip(b"\x00"):
                    break
                d = zlib.decompressobj(47)  # concatenated gzip members
        except zlib.error as e:
            raise InputError(f"{p.name}: corrupt gzip file ({e})") from None
        out = [c for c in out if c]
        data = out[0] if len(out) == 1 else b"".join(out)
    return data


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
def load(path, max_decompressed: int | None = None) -> Trace:
    """Import a PyTorch profiler (Kineto) Chrome trace; raises InputError on bad input."""
    enabled = gc.isenabled()
    gc.disable()  # millions of short-lived objects: the cyclic GC only costs time here
    try:
        return _load(path, max_decompressed)
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


def _load(path, max_decompressed=None) -> Trace:
    p = Path(path)
    name = p.name
    data = _read_bytes(p, max_decompressed)
    top, events, warnings = decode_events(data, name)
    n = len(events)
    if n == 0:
        raise InputError(f"{name}: empty trace (traceEvents has no events)")

    # ---- columns straight from the structs (one C-level transpose) --------------------
    ph_l = [e.ph for e in events]
    cat_l = [e.cat for e in events]
    name_l = [e.name for e in events]
    pid_l = [e.pid for e in events]
    tid_l = [e.tid for e in events]
    ts_l = [e.ts for e in events]
    dur_l = [e.dur for e in events]
    args_l = [e.args for e in events]
    ph_codes, ph_uniq = _factorize(ph_l)
    ph_arr = np.array([u if isinstance(u, str) else "" for u in ph_uniq], dtype=object)
    is_X = _code_mask(ph_codes, ph_uniq, {"X"})
    is_i = _code_mask(ph_codes, ph_uniq, {"i", "I"})
    is_M = _code_mask(ph_codes, ph_uniq, {"M"})
    is_flow = _code_mask(ph_codes, ph_uniq, {"s", "f", "t"})
    other_ph = ~(is_X | is_i | is_M | is_flow)
    if other_ph.any():
        kinds_seen = sorted({str(ph_arr[c]) for c in np.unique(ph_codes[other_ph])})
        warnings.append(f"ignored {int(other_ph.sum())} event(s) with unsupported phase(s) {kinds_seen}")

    ts_f = np.array(ts_l, dtype=np.float64)  # None -> nan
    dur_f = np.array(dur_l, dtype=np.float64)
    # Times beyond these cannot be real and would overflow int64 nanoseconds downstream:
    # |ts| < 4e15 us (year ~2096 on an epoch clock), 0 <= dur < 1e12 us (11.6 days).
    insane = (~np.isnan(ts_f) & ~(np.abs(ts_f) < _TS_MAX_US)) | (~np.isnan(dur_f) & ~(np.abs(dur_f) < _DUR_MAX_US))
    if insane.any():
        warnings.append(f"skipped {int(insane.sum())} event(s) with an out-of-range ts or dur")
        ts_f[insane] = np.nan
        for i in np.flatnonzero(insane).tolist():
            ts_l[i] = None

    # ---- timestamps -> exact int64 ns ---------------------------------------------------
    has_ts = ~np.isnan(ts_f)
    ts_types = set(map(type, ts_l))
    if float not in ts_types and ts_types <= {int, type(None)} and has_ts.any() \
            and float(np.abs(ts_f[has_ts]).max()) < 9.2e15:
        # every ts is written as an integer (epoch-us clocks of older Kineto): exact as is
        ts_ns = np.zeros(n, dtype=np.int64)
        ts_ns[has_ts] = np.array([t for t in ts_l if t is not None] if type(None) in ts_types else ts_l,
                                 dtype=np.int64) * 1000
    else:
        ts_ns = _timestamps_ns(data, events, ts_f, has_ts, warnings)
    del data

    # ---- categories and kinds --------------------------------------------------------
    cat_codes, cat_uniq = _factorize(cat_l)
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
    name_codes, name_uniq = _factorize(name_l)
    name_str = [u if isinstance(u, str) else ("" if u is None else str(u)) for u in name_uniq]

    b = TraceBuilder()
    strings = b.strings
    name_gid = np.fromiter((strings.intern(s) for s in name_str), dtype=np.int32, count=len(name_str))
    cat_gid = np.fromiter((strings.intern(c if isinstance(c, str) else "") for c in cat_uniq),
                          dtype=np.int32, count=ncat)

    # ---- pids / tids ------------------------------------------------------------------
    pid, pid_named = _id_col(pid_l)
    tid, tid_named = _id_col(tid_l)

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
    nodur = np.isnan(dur_sel)
    if nodur.any():
        warnings.append(f"{int(nodur.sum())} duration event(s) had no dur (treated as 0)")
    neg = dur_sel < 0
    if neg.any():
        warnings.append(f"{int(neg.sum())} event(s) had a negative dur (clamped to 0)")
    dur_sel = np.where(nodur | neg, 0.0, dur_sel)
    start = ts_ns[sidx]
    end = start + np.rint(dur_sel * 1000.0).astype(np.int64)

    # args columns (only for span events)
    A0 = _Args()
    sargs = [args_l[i] or A0 for i in sidx.tolist()]
    corr = _int_col([a.correlation for a in sargs])
    ext = _int_col([a.ext_id for a in sargs])

    gpu = sside == _GPU
    gidx = np.flatnonzero(gpu)
    dev = np.full(len(sidx), -1, dtype=np.int64)
    stream = np.full(len(sidx), -1, dtype=np.int64)
    if len(gidx):
        gargs = [sargs[i] for i in gidx.tolist()]
        adev = _int_col([a.device for a in gargs])
        astr = _int_col([a.stream for a in gargs])
        gpid = pid[sidx[gidx]]
        gpid_ok = (gpid >= 0) & (gpid < 4096) & ~pid_named[sidx[gidx]]
        dev[gidx] = np.where(adev >= 0, adev, np.where(gpid_ok, gpid, 0))
        gtid = tid[sidx[gidx]]
        stream[gidx] = np.where(astr >= 0, astr, np.where(gtid >= 0, gtid, 0))

    # bytes / copy kinds for memcpy + memset
    nbytes = np.full(len(sidx), -1, dtype=np.int64)
    copy_kind = np.zeros(len(sidx), dtype=np.uint8)
    src_mem = np.zeros(len(sidx), dtype=np.uint8)
    dst_mem = np.zeros(len(sidx), dtype=np.uint8)
    midx = np.flatnonzero((skind == SpanKind.MEMCPY) | (skind == SpanKind.MEMSET))
    if len(midx):
        nbytes[midx] = _int_col([sargs[i].bytes for i in midx.tolist()])
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
                    k = sargs[i].kind
                    copy_kind[i] = _DIR.get(str(k).strip().lower(), CopyKind.UNKNOWN) if k is not None else CopyKind.UNKNOWN

    # ---- tracks --------------------------------------------------------------------------
    spid = pid[sidx]
    stid = tid[sidx]
    named = pid_named[sidx]
    tkind = np.where(gpu, TrackKind.GPU_STREAM, np.where(named, TrackKind.OTHER, TrackKind.CPU_THREAD)).astype(np.int64)
    tpid = np.where(gpu, -1, spid)
    ttid = np.where(gpu, stream, stid)
    tdev = np.where(gpu, dev, -1)
    meta_names = _metadata_names(is_M, name_codes, name_str, pid, tid, pid_named, args_l)
    track_of = _assign_tracks(b, tkind, tpid, ttid, tdev, meta_names, pid_l, tid_l, sidx)

    # ---- instants: marks and memory counters ------------------------------------------------
    iidx = np.flatnonzero(is_i & has_ts)
    mark_rows = None
    if len(iidx):
        iargs = [args_l[i] for i in iidx.tolist()]
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
                src_mem=src_mem, dst_mem=dst_mem, detail=_shape_details(b, skind, sargs))
    if mark_rows is not None:
        keep, ktr = mark_rows
        kst = ts_ns[keep]
        b.add_spans(start_ns=kst, end_ns=kst, track=ktr, kind=np.uint8(SpanKind.MARK),
                    name=name_gid[name_codes[keep]], cat=cat_gid[cat_codes[keep]])

    # ---- launch flows ----------------------------------------------------------------------
    _launch_flows(b, skind, spid, corr, start, named, warnings)

    # ---- meta ---------------------------------------------------------------------------------
    b.meta.update(_meta(top, name, warnings))
    trace = b.finalize()
    # fwdbwd flows need final span order (after finalize)
    fidx = np.flatnonzero(is_flow & has_ts & (cat_flow[cat_codes] == FlowKind.FWDBWD))
    if len(fidx):
        _fwdbwd_flows(trace, fidx, ph_codes, ph_uniq, events, pid, tid, ts_ns, warnings)
    return trace


def _shape_details(b: TraceBuilder, skind: np.ndarray, sargs: list) -> np.ndarray:
    """CPU_OP spans recorded with ``record_shapes``: ``{"dims":..,"types":..,"concrete":..}`` (the raw JSON of
    Input Dims / Input type / Concrete Inputs) as a string id in ``detail``; -1 elsewhere."""
    out = np.full(len(sargs), -1, dtype=np.int32)
    intern = b.strings.intern
    for i in np.flatnonzero(skind == SpanKind.CPU_OP).tolist():
        a = sargs[i]
        d = bytes(a.input_dims)
        if not d or d == b"null":
            continue
        t = bytes(a.input_type) or b"null"
        c = bytes(a.concrete) or b"null"
        try:
            out[i] = intern((b'{"dims":' + d + b',"types":' + t + b',"concrete":' + c + b"}").decode("utf-8"))
        except UnicodeDecodeError:
            continue
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


def _timestamps_ns(data: bytes, events: list, ts_f: np.ndarray, has_ts: np.ndarray,
                   warnings: list) -> np.ndarray:
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
    # exact decimal recovery from the raw text (one regex pass), verified below
    m = _TS_RE.findall(data)
    if len(m) == len(tv):
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
                ts_ns[has_ts] = exact
                return ts_ns
        except (ValueError, OverflowError):
            pass
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
    keys = np.stack([tkind, tpid, ttid, tdev], axis=1)
    # one mixed int64 key per row -> 1-D unique (much faster than unique(axis=0)); verified
    mix = ((tpid * np.int64(1000003) + ttid) * np.int64(8191) + tdev) * np.int64(8) + tkind
    _u, first, inv = np.unique(mix, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    uk = keys[first]
    if not np.array_equal(uk[inv], keys):  # hash collision (never seen): exact path
        uk, first, inv = np.unique(keys, axis=0, return_index=True, return_inverse=True)
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


def _fwdbwd_flows(trace: Trace, fidx, ph_codes, ph_uniq, events, pid, tid, ts_ns, warnings) -> None:
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
    ids = [events[i].id for i in fidx.tolist()]
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
    if config:
        meta["profiler_config"] = config
    meta["warnings"] = list(warnings)
    return meta
