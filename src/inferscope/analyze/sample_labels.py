"""The function a sampled CPU run names (CPU_SAMPLE ``detail``), as one key per function.

The live sampler labels each run with one function and that function's most frequent line at the
run's ticks: ``"path/file.py:Qual.name:123"`` (``"import mod"`` while a module import runs; older
traces and the nsys importer have no line).  Tables that group by function (culprits, contention,
diff, start-up parts) group by the label without its line, so a function whose hot line moves is
still one row; the line each row shows is the one with the most sampled time.
A run's sampler tick count is kept in the span's ``correlation`` column (-1: unknown, e.g. nsys).
"""
from __future__ import annotations

import numpy as np

from ..trace.model import Trace
from .stats import fast_unique


def split_label(label: str) -> tuple[str, str, int | None]:
    """'pkg/file.py:Class.func:12' -> ('Class.func', 'pkg/file.py', 12); without a line: line None;
    a label that is not "file.py:func": (label, '', None)."""
    if ".py:" not in label:
        return label, "", None
    f, rest = label.rsplit(".py:", 1)
    fn, sep, ln = rest.rpartition(":")
    if sep and ln.isdigit():
        return fn, f + ".py", int(ln)
    return rest, f + ".py", None


def function_of(label: str) -> str:
    """The label without its line: 'pkg/file.py:func:12' -> 'pkg/file.py:func'."""
    fn, f, ln = split_label(label)
    return f"{f}:{fn}" if f else fn


def function_keys(trace: Trace, detail: np.ndarray) -> tuple[np.ndarray, list[str], np.ndarray]:
    """For detail string ids (>= 0): (key per span into ``names``, names = 'file:func' per key, line per
    span or -1).  Parsed once per distinct string."""
    detail = np.asarray(detail, dtype=np.int64)
    if not len(detail):
        return np.zeros(0, np.int64), [], np.zeros(0, np.int64)
    uk, inv = fast_unique(detail, return_inverse=True)
    names: list[str] = []
    index: dict[str, int] = {}
    ukey = np.empty(len(uk), dtype=np.int64)
    uline = np.empty(len(uk), dtype=np.int64)
    for j, sid in enumerate(uk.tolist()):
        fn, f, ln = split_label(trace.strings[int(sid)])
        name = f"{f}:{fn}" if f else fn
        k = index.get(name)
        if k is None:
            k = index[name] = len(names)
            names.append(name)
        ukey[j] = k
        uline[j] = -1 if ln is None else ln
    inv = np.asarray(inv).reshape(-1)
    return ukey[inv], names, uline[inv]


def sample_counts(trace: Trace, idx: np.ndarray) -> np.ndarray:
    """Sampler ticks per CPU_SAMPLE span idx (one per span where the trace did not record them)."""
    c = trace.spans.correlation[idx]
    return np.where(c >= 0, c, 1).astype(np.int64)


def top_line(keys: np.ndarray, lines: np.ndarray, weights: np.ndarray, n_keys: int) -> np.ndarray:
    """Per key 0..n_keys-1: the line with the largest summed weight (-1 when none has a line)."""
    out = np.full(n_keys, -1, dtype=np.int64)
    has = lines >= 0
    if not has.any():
        return out
    pair = np.stack((keys[has], lines[has]), axis=1)
    up, pinv = np.unique(pair, axis=0, return_inverse=True)
    w = np.bincount(np.asarray(pinv).reshape(-1), weights=weights[has].astype(np.float64), minlength=len(up))
    order = np.lexsort((-w, up[:, 0]))        # per key, heaviest line first
    first = np.ones(len(order), dtype=bool)
    first[1:] = up[order[1:], 0] != up[order[:-1], 0]
    sel = order[first]
    out[up[sel, 0]] = up[sel, 1]
    return out
