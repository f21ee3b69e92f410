"""FLOPs, bytes moved and dtype of one recorded op call from its input shapes (used by efficiency.py).

Families: GEMM (``aten::mm``, ``addmm``, ``bmm``, ``baddbmm``, ``matmul``, ``linear``), 2*M*N*K per product,
batched products per batch; attention (``scaled_dot_product_attention`` and its flash/efficient/cudnn
variants), 4*B*H*Sq*Sk*D, halved when the op says ``is_causal`` and Sq == Sk; convolution
(``aten::convolution``), 2 * N * Cout * prod(out spatial) * Cin/groups * prod(kernel).  Bytes: every operand
read once and the output written once.  Which nested calls are counted is efficiency.count_ops' rule.
"""
from __future__ import annotations

import json

GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear")
ATTN_OPS = ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
            "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
            "aten::_scaled_dot_product_flash_attention_for_cpu")
CONV_OPS = ("aten::convolution",)
# index of is_causal among each attention op's inputs
_CAUSAL_ARG = {"aten::scaled_dot_product_attention": 5, "aten::_scaled_dot_product_flash_attention": 4,
               "aten::_scaled_dot_product_efficient_attention": 6, "aten::_scaled_dot_product_cudnn_attention": 6,
               "aten::_scaled_dot_product_flash_attention_for_cpu": 4}

_DTYPES = (("bfloat16", "bf16", 2), ("half", "fp16", 2), ("float8", "fp8", 1), ("double", "fp64", 8),
           ("float", "fp32", 4), ("long", "int64", 8), ("int", "int32", 4))


def dtype_of(t) -> tuple[str | None, int]:
    """(short dtype, bytes per element) from a recorded type ("c10::BFloat16", "float", "c10::Half")."""
    s = str(t or "").lower()
    for key, short, size in _DTYPES:
        if key in s:
            return short, size
    return None, 0


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= int(x)
    return p


def gemm_mnk(name: str, dims: list) -> tuple[int, int, int, int] | None:
    """(batch, M, N, K) of one GEMM-family call from its input dims, or None when the shapes do not fit
    (``linear``: input [..., K] flattened to M rows, weight [N, K]; matmul/bmm: broadcast batch dims)."""
    if name in ("aten::addmm", "aten::baddbmm"):
        a, b = dims[1], dims[2]
    else:
        a, b = dims[0], dims[1]
    if name == "aten::linear":   # input [..., K], weight [N, K]
        if len(a) < 1 or len(b) != 2 or a[-1] != b[1]:
            return None
        return 1, _prod(a[:-1]), int(b[0]), int(a[-1])
    if len(a) == 1:
        a = [1] + list(a)
    if len(b) == 1:
        b = list(b) + [1]
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        return None
    ba, bb = list(a[:-2]), list(b[:-2])
    nd = max(len(ba), len(bb))
    ba, bb = [1] * (nd - len(ba)) + ba, [1] * (nd - len(bb)) + bb
    return _prod(max(x, y) for x, y in zip(ba, bb)), int(a[-2]), int(b[-1]), int(a[-1])


def _gemm(name: str, dims: list) -> tuple[int, int] | None:
    """(flops, elements moved) of one GEMM-family call, or None when the shapes do not fit."""
    r = gemm_mnk(name, dims)
    if r is None:
        return None
    batch, m, n, k = r
    if name == "aten::linear":
        return 2 * m * n * k, m * k + n * k + m * n + (_prod(dims[2]) if len(dims) > 2 and dims[2] else 0)
    a, b = (dims[1], dims[2]) if name in ("aten::addmm", "aten::baddbmm") else (dims[0], dims[1])
    c = dims[0] if name in ("aten::addmm", "aten::baddbmm") else []
    return 2 * batch * m * n * k, _prod(a) + _prod(b) + batch * m * n + (_prod(c) if c else 0)


def _attention(name: str, dims: list, concrete: list | None) -> tuple[int, int] | None:
    q, k = dims[0], dims[1]
    if len(q) != 4 or len(k) != 4:
        return None
    b, h, sq, d = (int(x) for x in q)
    sk = int(k[2])
    flops = 4 * b * h * sq * sk * d
    ci = _CAUSAL_ARG.get(name)
    causal = bool(concrete) and ci is not None and ci < len(concrete) and str(concrete[ci]).strip().lower() == "true"
    if causal and sq == sk:
        flops //= 2
    moved = _prod(q) + 2 * _prod(k) + _prod(q)
    return flops, moved


def _conv(dims: list, concrete: list | None) -> tuple[int, int] | None:
    x, w = dims[0], dims[1]
    if len(x) < 3 or len(w) != len(x):
        return None
    sp = len(x) - 2

    def lst(i, default):
        try:
            v = json.loads(concrete[i]) if concrete and concrete[i] not in ("", None) else default
        except (ValueError, TypeError, IndexError):
            return default
        v = v if isinstance(v, list) else [v]
        return (v * sp)[:sp] if len(v) == 1 else v

    stride, pad, dil = lst(3, [1] * sp), lst(4, [0] * sp), lst(5, [1] * sp)
    try:
        transposed = str(concrete[6]).strip().lower() == "true" if concrete and len(concrete) > 6 else False
        groups = int(concrete[8]) if concrete and len(concrete) > 8 and str(concrete[8]).strip() else 1
    except (ValueError, TypeError):
        return None
    if transposed or len(stride) != sp:
        return None
    n, cin = int(x[0]), int(x[1])
    cout, kern = int(w[0]), [int(v) for v in w[2:]]
    out = [(int(x[2 + i]) + 2 * int(pad[i]) - int(dil[i]) * (kern[i] - 1) - 1) // int(stride[i]) + 1 for i in range(sp)]
    if min(out) <= 0 or groups <= 0:
        return None
    flops = 2 * n * cout * _prod(out) * (cin // groups) * _prod(kern)
    return flops, _prod(x) + _prod(w) + n * cout * _prod(out)


def op_cost(name: str, shape_json: str) -> tuple[str, int, int, str | None] | None:
    """(family, flops, bytes, dtype) of one recorded op call, or None when it is not countable."""
    try:
        sh = json.loads(shape_json)
        dims = sh.get("dims") or []
        types = sh.get("types") or []
        concrete = sh.get("concrete")
    except (ValueError, AttributeError):
        return None
    if not isinstance(dims, list) or len(dims) < 2 or not all(isinstance(d, list) for d in dims[:2]):
        return None
    try:
        if name in GEMM_OPS:
            fam, r = "gemm", _gemm(name, dims)
            ti = 1 if name in ("aten::addmm", "aten::baddbmm") else 0
        elif name in ATTN_OPS:
            fam, r, ti = "attention", _attention(name, dims, concrete), 0
        elif name in CONV_OPS:
            fam, r, ti = "conv", _conv(dims, concrete), 0
        else:
            return None
    except (TypeError, ValueError, IndexError):
        return None
    if r is None:
        return None
    dt, size = dtype_of(types[ti] if ti < len(types) else None)
    return fam, int(r[0]), int(r[1]) * (size or 2), dt
