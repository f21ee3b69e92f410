"""Tokenization split into the native tokenizer's encode and the Python around it (live runs with perf IP sampling):
section ``tokenizer``, read by the cpu_preprocessing finding (evidence) and its what-if (analyze/whatif.py: batching
the calls removes the per-call Python, not the encode).

Rules (over the window):
- ``native_ms``: the sampler's cumulative ``proc.native_tokenizer_cpu_s`` counter (collect/rules_perf.py: the share
  of each tick interval whose perf IP samples fell in a native tokenizer library - HF tokenizers' Rust extension,
  sentencepiece, tiktoken - vocab.py's library table) at the window's end minus at its start, each read by linear
  interpolation between the counter's samples (0 before the first: the counter starts at 0 and is written only when
  it grows).  Every sampled Python thread counts, so it is capped at the tokenization part.
- ``tokenization_ms``: the breakdown's ``cpu_preprocessing`` part ``tokenization`` (critical path).
- ``python_ms`` = tokenization_ms - native_ms: the interpreter's share (the tokenizer library's Python wrapper -
  argument checks, per-call result objects - and the caller's loop around it).
- ``python_pct``: python_ms in % of tokenization_ms.
None when the counter was not recorded (imported traces, no perf) or no tokenization was sampled.
"""
from __future__ import annotations

import numpy as np

from .. import thresholds as T
from ..trace.model import Trace
from ..vocab import NATIVE_TOKENIZER_METRIC
from .contention import _series
from .evidence import _ms


def _part(breakdown: list[dict], cat: str, part: str) -> float:
    row = next((r for r in breakdown if r["category"] == cat), None)
    return float(next((p["ms"] for p in (row or {}).get("parts") or [] if p["name"] == part), 0.0))


def tokenizer_split(trace: Trace, window, breakdown: list[dict]) -> dict | None:
    """The section (see the module docstring)."""
    ts, v = _series(trace, NATIVE_TOKENIZER_METRIC)
    tok_ms = _part(breakdown, "cpu_preprocessing", "tokenization")
    if not len(ts) or tok_ms <= 0.0:
        return None
    lo, hi = float(window.start_ns), float(window.end_ns)
    at = np.interp([lo, hi], ts.astype(np.float64), v, left=0.0)
    native = min(tok_ms, max(0.0, float(at[1] - at[0]) * 1e3))
    py = tok_ms - native
    return {"tokenization_ms": tok_ms, "native_ms": native, "python_ms": py, "python_pct": 100.0 * py / tok_ms,
            "basis": ("native: perf IP samples in a native tokenizer library (counter " + NATIVE_TOKENIZER_METRIC
                      + ", window end - start, interpolated); python: breakdown[cpu_preprocessing].parts[tokenization] "
                      "less native")}


def batching_applies(res: dict) -> bool:
    """Tokenization is the larger part of the preprocessing and called per item (its Python share of
    analyze/tokenizer_split.py at least thresholds.TOKENIZER_PER_CALL_PYTHON_PCT)."""
    tk = res.get("tokenizer")
    return bool(tk) and 2.0 * float(tk["tokenization_ms"]) >= _ms(res, "cpu_preprocessing") and \
        float(tk["python_pct"]) >= T.TOKENIZER_PER_CALL_PYTHON_PCT
