"""Kineto JSON decode: the typed msgspec Structs that name only the fields the importer uses, and
the whole-file decode (``decode_events``) with its repairs and messages.

Everything else, including big ``args`` payloads and all top-level metadata we do not whitelist,
is skipped by the decoder without building Python objects.  ``bench/bench_kineto.py`` cuts the
Struct definitions (from ``_Args`` through the line that defines ``_TOP_DEC``) out of this file
for its decode-floor process: keep them together, needing only msgspec and typing.
"""
from __future__ import annotations

import re
from typing import Any, Literal, Optional, Union

import msgspec

from ...errors import InputError

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
    total_reserved: _Num = msgspec.field(default=None, name="Total Reserved")
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


# The streamed decode's events (stream.py): ``ph`` and ``cat`` as Literals of every one-character phase
# and the usual Kineto categories, so the decoder hands out one shared str per value instead of a new one
# per event (no allocation, free or hash per event).  A batch with any other ph or cat fails validation
# and is decoded again with plain str fields (_LIST_DEC), as every later batch is (_STREAM_DECS).
_KNOWN_CATS = ("kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset", "cuda_runtime", "runtime", "hip_runtime",
               "cuda_driver", "driver", "cpu_op", "operator", "python_function", "user_annotation",
               "gpu_user_annotation", "cuda_sync", "overhead", "trace", "ac2g", "async_cpu_to_gpu", "fwdbwd",
               "cpu_instant_event", "cuda_profiler_range", "python")
_KNOWN_CATS = _KNOWN_CATS + tuple(c.capitalize() for c in _KNOWN_CATS)


class _EventS(_Event, gc=False):
    ph: Optional[Literal[tuple(chr(c) for c in range(32, 127))]] = None  # type: ignore[valid-type]
    cat: Optional[Literal[_KNOWN_CATS]] = None  # type: ignore[valid-type]


class _EventSI(_EventS, gc=False):
    """... and ts an int (or missing): the int64 ts column in one pass (columns.py); a batch with a float
    ts is decoded again as _EventS."""
    ts: Optional[int] = None


_LIST_DEC_S = msgspec.json.Decoder(list[_EventS])
_LIST_DEC_SI = msgspec.json.Decoder(list[_EventSI])
_STREAM_DECS = (_LIST_DEC_SI, _LIST_DEC_S, _LIST_DEC)   # tried in this order, each failure for good


class _Fallback(Exception):
    """The streaming decode met something it does not handle itself: decode the whole file."""


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
