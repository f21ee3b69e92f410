"""Activation bytes per module call (seed 003: "activation sizes"), from recorded shapes.

Kineto ``record_shapes`` records each op's *inputs* (``Input Dims`` / ``Input type``), not its outputs.  A module's
input activation is the first tensor its forward computes on: the first tensor input (a list of >= 1 dims with a
known element type; for ops whose first input is a weight, ``_ACT_ARG``'s) of the earliest op with recorded shapes anywhere inside the module span (ties: the outer op).
Bytes = product of its dims x the element size of its recorded type (op_flops.dtype_of).  In a stack of layers the
output of layer i is the input of layer i + 1, so the column gives the activation each layer passes on too.
Ops without recorded shapes (a trace without ``record_shapes``) leave the module without a value.
"""
from __future__ import annotations

import json

import numpy as np

from ..trace.kinds import SpanKind
from ..trace.model import Trace
from .efficiency import _nearest_marked_ancestor
from .op_flops import dtype_of


# ops whose first input is a weight: the index of the input that is the activation (aten::embedding(weight, indices))
_ACT_ARG = {"aten::embedding": 1, "aten::embedding_bag": 1, "aten::_embedding_bag": 1}


def first_tensor_bytes(detail_json: str, first: int = 0) -> int | None:
    """Bytes of the first tensor input (>= 1 dim, known element type) at or after input ``first`` of one recorded
    op call, or None."""
    try:
        sh = json.loads(detail_json)
        dims, types = sh.get("dims") or [], sh.get("types") or []
    except (ValueError, AttributeError, TypeError, RecursionError):
        return None
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    for j, d in enumerate(dims):
        if j < first:
            continue
        if not isinstance(d, list) or not d or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2 ** 40
                                                       for x in d):
            continue
        _, size = dtype_of(types[j] if j < len(types) else None)
        if size <= 0:
            continue
        n = 1
        for x in d:
            n *= x
        return n * size if n * size < 2 ** 62 else None
    return None


def input_activation_bytes(trace: Trace, mods: np.ndarray, is_mod: np.ndarray) -> np.ndarray:
    """Per module span in ``mods``: its input activation bytes (float, NaN when no op inside recorded shapes)."""
    s = trace.spans
    out = np.full(len(mods), np.nan)
    ops = np.flatnonzero((s.kind == SpanKind.CPU_OP) & (s.detail >= 0) & ~is_mod)
    if not len(ops) or not len(mods):
        return out
    strs = trace.strings.as_list()
    key = s.name[ops].astype(np.int64) * (len(strs) + 1) + s.detail[ops].astype(np.int64)
    ud, inv = np.unique(key, return_inverse=True)
    bytes_u = np.full(len(ud), np.nan)
    for j, k in enumerate(ud.tolist()):
        nid, did = divmod(k, len(strs) + 1)
        v = first_tensor_bytes(strs[did], _ACT_ARG.get(strs[nid], 0) if nid >= 0 else 0)
        bytes_u[j] = np.nan if v is None else float(v)
    ob = bytes_u[inv.reshape(-1)]
    keep = ~np.isnan(ob)
    ops, ob = ops[keep], ob[keep]
    # (module span, op) pairs for every module around each op, level by level up the module chain
    pm, po = [], []
    cur = _nearest_marked_ancestor(s.parent, ops, is_mod, include_self=False)
    live = np.arange(len(ops))
    while len(live):
        ok = cur >= 0
        live, cur = live[ok], cur[ok]
        if not len(live):
            break
        pm.append(cur)
        po.append(live)
        cur = _nearest_marked_ancestor(s.parent, cur, is_mod, include_self=False)
    if not pm:
        return out
    pm_a, po_a = np.concatenate(pm), np.concatenate(po)
    o = ops[po_a]
    # per module span: the earliest op (start, then the longest = the outer one, then index)
    order = np.lexsort((o, -(s.end_ns[o] - s.start_ns[o]), s.start_ns[o], pm_a))
    pm_s = pm_a[order]
    first = np.r_[True, pm_s[1:] != pm_s[:-1]]
    mod_span, op_pos = pm_s[first], po_a[order][first]
    pos_of = np.full(len(s), -1, dtype=np.int64)
    pos_of[mods] = np.arange(len(mods))
    p = pos_of[mod_span]
    ok = p >= 0
    out[p[ok]] = ob[op_pos[ok]]
    return out
