"""Per-module hotspots (table ``module_hotspots``) from ``nn.Module: Name`` spans.

torch.profiler with ``with_stack=True`` / ``with_modules=True`` records each module's ``forward`` as a
``python_function`` event named ``nn.Module: <Class>_<instance>`` (PYTHON spans).  A module's path is the chain of
module spans around it (``BertModel_0/BertEncoder_0/BertLayer_1``), so repeated calls of one instance share a row.
Per path, over the module spans in the window:
  * calls and ``cpu_ms``: the spans' wall time clipped to the window (inclusive of everything inside);
  * ``gpu_ms``: the GPU time of the kernels (starting in the window) whose launching call lies inside the module,
    at any depth; ``self_gpu_ms``: those whose innermost module it is;
  * ``gflops``: the FLOPs of the counted ops inside it (efficiency.count_ops: recorded shapes, each op once);
  * ``pct_of_gpu``: gpu_ms over all kernel time starting in the window;
  * ``input_activation_bytes``: the largest input activation of a call (activations.py: the first tensor input of
    the first op with recorded shapes inside it; null without ``record_shapes``).
Rows by gpu_ms, then cpu_ms; the ``top_n`` first.
"""
from __future__ import annotations

import numpy as np

from ..trace.kinds import SpanKind
from ..trace.model import Trace
from .activations import input_activation_bytes
from .classify import gpu_work_mask
from .efficiency import _nearest_marked_ancestor, count_ops
from .launched import by_owner, launched_gpu
from .select import clipped_durations, in_window
from .window import Window

PREFIX = "nn.Module: "
COLUMNS = ["module", "depth", "calls", "cpu_ms", "gpu_ms", "self_gpu_ms", "pct_of_gpu", "gflops",
           "input_activation_bytes"]


def _paths(parent_mod: np.ndarray, name: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per module span its path id; per path id its parent path (-1 root) and its last name id, level by level."""
    n = len(parent_mod)
    level = np.zeros(n, dtype=np.int64)
    cur = parent_mod.copy()
    todo = cur >= 0
    while todo.any():                      # level = number of module ancestors
        level[todo] += 1
        cur[todo] = parent_mod[cur[todo]]
        todo = cur >= 0
    path_of = np.full(n, -1, dtype=np.int64)
    p_parent: list[np.ndarray] = []
    p_name: list[np.ndarray] = []
    nxt = 0
    for lv in range(int(level.max()) + 1 if n else 0):
        ix = np.flatnonzero(level == lv)
        pp = np.where(parent_mod[ix] >= 0, path_of[np.maximum(parent_mod[ix], 0)], -1)
        key = np.column_stack((pp, name[ix].astype(np.int64)))
        uk, inv = np.unique(key, axis=0, return_inverse=True)
        path_of[ix] = nxt + inv.reshape(-1)
        p_parent.append(uk[:, 0])
        p_name.append(uk[:, 1])
        nxt += len(uk)
    cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.int64))
    return path_of, cat(p_parent), cat(p_name)


def _inclusive(self_v: np.ndarray, p_parent: np.ndarray) -> np.ndarray:
    """Each path's value plus its descendants' (values pushed up the parent chain)."""
    incl = self_v.astype(np.float64).copy()
    src = np.flatnonzero(self_v != 0)
    vals = self_v[src].astype(np.float64)
    cur = p_parent[src]
    while len(cur):
        ok = cur >= 0
        cur, vals = cur[ok], vals[ok]
        np.add.at(incl, cur, vals)
        cur = p_parent[cur]
    return incl


def module_hotspots(trace: Trace, window: Window, top_n: int = 20) -> dict | None:
    """The ``module_hotspots`` table, or None without module spans in the window."""
    s = trace.spans
    strs = trace.strings.as_list()
    mod_names = [i for i, nm in enumerate(strs) if nm.startswith(PREFIX)]
    if not mod_names:
        return None
    lut = np.zeros(len(strs) + 1, dtype=bool)
    lut[mod_names] = True
    is_mod = (s.kind == SpanKind.PYTHON) & lut[np.clip(s.name, 0, len(strs))] & (s.name >= 0)
    mods = np.flatnonzero(is_mod)
    win = in_window(trace, is_mod, window)
    if not len(win):
        return None
    # module tree over every module span (ancestors may start before the window)
    anc = _nearest_marked_ancestor(s.parent, mods, is_mod, include_self=False)
    pos_of = np.full(len(s), -1, dtype=np.int64)
    pos_of[mods] = np.arange(len(mods))
    parent_mod = np.where(anc >= 0, pos_of[np.maximum(anc, 0)], -1)
    path_of_pos, p_parent, p_name = _paths(parent_mod, s.name[mods])
    npaths = len(p_parent)
    path_of_span = np.full(len(s), -1, dtype=np.int64)
    path_of_span[mods] = path_of_pos
    # CPU: the window's module spans
    wp = path_of_span[win]
    calls = np.bincount(wp, minlength=npaths)
    cpu_ns = np.bincount(wp, weights=clipped_durations(trace, win, window).astype(np.float64), minlength=npaths)
    # GPU: kernels starting in the window, by the innermost module around their launching call
    lg = launched_gpu(trace, window, mask=gpu_work_mask(trace) & (s.kind == SpanKind.KERNEL))
    gw, lau = lg.gpu, lg.launcher
    kmod = np.full(len(gw), -1, dtype=np.int64)
    ok = lau >= 0
    if ok.any():
        kmod[ok] = _nearest_marked_ancestor(s.parent, lau[ok], is_mod, include_self=True)
    kp = np.where(kmod >= 0, path_of_span[np.maximum(kmod, 0)], -1)
    self_gpu = by_owner(kp, lg.whole_ns, npaths)          # whole kernel ns whose innermost module it is
    gpu = _inclusive(self_gpu, p_parent)
    # FLOPs of the counted ops inside each module
    ops = count_ops(trace, window)
    fl = np.zeros(npaths)
    if len(ops["idx"]):
        om = _nearest_marked_ancestor(s.parent, ops["idx"], is_mod, include_self=False)
        op_p = np.where(om >= 0, path_of_span[np.maximum(om, 0)], -1)
        fl = np.bincount(op_p[op_p >= 0], weights=ops["flops"][op_p >= 0], minlength=npaths)
    flops = _inclusive(fl, p_parent)
    total_k = float(lg.whole_ns.sum())
    # input activation bytes: the largest per call in the window
    act = input_activation_bytes(trace, win, is_mod)
    act_max = np.full(npaths, -1.0)
    ok_a = ~np.isnan(act)
    np.maximum.at(act_max, wp[ok_a], act[ok_a])
    # rows for the paths seen in the window
    shown = np.flatnonzero(calls > 0)
    order = shown[np.lexsort((-cpu_ns[shown], -gpu[shown]))][:top_n]
    names: dict[int, str] = {}

    def path_text(p: int) -> str:
        if p not in names:
            parts, q = [], p
            while q >= 0:
                parts.append(strs[int(p_name[q])][len(PREFIX):])
                q = int(p_parent[q])
            names[p] = "/".join(reversed(parts))
        return names[p]

    gpu_trace = trace.has_gpu
    rows = [[path_text(p), path_text(p).count("/"), int(calls[p]), round(float(cpu_ns[p]) / 1e6, 6),
             round(float(gpu[p]) / 1e6, 6) if gpu_trace else None, round(float(self_gpu[p]) / 1e6, 6) if gpu_trace else None,
             round(100.0 * float(gpu[p]) / total_k, 4) if total_k > 0 else None,
             round(float(flops[p]) / 1e9, 9) if len(ops["idx"]) else None,
             int(act_max[p]) if act_max[p] >= 0 else None] for p in order.tolist()]
    return {"columns": list(COLUMNS), "rows": rows}
