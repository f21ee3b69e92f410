"""The most frequent recorded input shapes of each CPU op (the ``shapes`` column of ``top_ops``).

A CPU_OP span recorded with ``record_shapes`` carries ``{"dims", "types", "concrete"}`` as a string id in
``detail`` (ingest/kineto/build.py).  One shape label per distinct detail: the input dims joined by ``x``
(``[8,128,768]x[768,3072]``), trailing non-tensor / 0-d inputs (``[]``) dropped, the ones between kept as ``[]``.
Per op name: the ``k`` labels with the most calls in the window, each with its call count
(``[8,128,768]x[768,3072] (x24)``), joined by ``; ``; ops without recorded shapes get ``""``.
"""
from __future__ import annotations

import json

import numpy as np

from ..trace.model import Trace

SHAPES_PER_OP = 3          # labels shown per op name (the most frequent)


def shape_label(detail_json: str) -> str | None:
    """``[8,128,768]x[768,3072]`` from a recorded detail, or None when it holds no input dims."""
    try:
        dims = json.loads(detail_json).get("dims")
    except (ValueError, AttributeError, TypeError):
        return None
    if not isinstance(dims, list) or not dims:
        return None
    parts = ["[" + ",".join(str(x) for x in d) + "]" if isinstance(d, list) else "[]" for d in dims]
    while parts and parts[-1] == "[]":
        parts.pop()
    return "x".join(parts) if parts else None


def shapes_by_name(trace: Trace, idx: np.ndarray, k: int = SHAPES_PER_OP) -> dict[int, str]:
    """Name string id -> the ``k`` most frequent shape labels of the spans ``idx`` of that name, with counts."""
    s = trace.spans
    det = s.detail[idx].astype(np.int64)
    keep = det >= 0
    if not keep.any():
        return {}
    det = det[keep]
    nm = s.name[idx][keep].astype(np.int64)
    strs = trace.strings.as_list()
    # labels per distinct detail (several details can share one label: same dims, other types)
    udet, dinv = np.unique(det, return_inverse=True)
    labels = [shape_label(strs[int(d)]) for d in udet.tolist()]
    lab_names = sorted({x for x in labels if x is not None})
    if not lab_names:
        return {}
    lab_code = {x: i for i, x in enumerate(lab_names)}
    lut = np.array([lab_code[x] if x is not None else -1 for x in labels], dtype=np.int64)
    lab = lut[dinv]
    ok = lab >= 0
    key = nm[ok] * len(lab_names) + lab[ok]
    uk, cnt = np.unique(key, return_counts=True)
    kn, kl = np.divmod(uk, len(lab_names))
    order = np.lexsort((kl, -cnt, kn))         # per name: most calls first, then the label's order
    kn, kl, cnt = kn[order], kl[order], cnt[order]
    first = np.r_[True, kn[1:] != kn[:-1]]
    rank = np.arange(len(kn)) - np.maximum.accumulate(np.where(first, np.arange(len(kn)), 0))
    top = rank < k
    out: dict[int, list[str]] = {}
    for n, lb, c in zip(kn[top].tolist(), kl[top].tolist(), cnt[top].tolist()):
        out.setdefault(n, []).append(f"{lab_names[lb]} (x{c})")
    return {n: "; ".join(v) for n, v in out.items()}
