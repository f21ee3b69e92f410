"""IP samples in torch's own libraries split by the function they fell in (perfip.symbol_role decides the role).

A sample's library alone cannot tell torch's math from its plumbing: a loop of tiny ops spends most of its samples
in libtorch_cpu.so - in the dispatcher, TensorIterator set-up, the allocator, refcounting - and read 74 % cpu_compute
for ~20 % of real math (zoo_tinyops).  The mappings of the libraries perfip.SYMBOL_LIBS names are resolved to their
function here, at each perf drain (never at sample time: the kernel takes the samples), in one batch per drain:

- the library's function table (elfsyms.load: .symtab, else .dynsym) is read once per library and process, at the
  first drain that has a sample in it (libtorch_cpu.so: 380k functions, ~60 ms of CPU, 7.6 MB held; measured in
  bench/README.md), and kept in ``TABLES`` (None: no symbols - stripped -, then the library's role stays);
- a drain's candidate IPs go through one numpy searchsorted per library; each function's role is decided once
  (``Table.roles``, a cache by function index), so the per-sample cost is a few array operations amortised
  over the drain's samples (~100 per 100 ms drain at 1 sample/ms).
Why a function and not a page cache: a 4 KiB page of libtorch_cpu holds ~10-40 functions of both kinds (a kernel's
vectorised loop beside the op wrapper that set it up), so a page's role would be the first sample's, not the IP's.
"""
from __future__ import annotations

import numpy as np

from . import elfsyms

TABLES: dict[str, "Table | None"] = {}     # library path -> its table (None: no function symbols)


class Table:
    """One library's function table and the roles decided so far (by function index)."""

    def __init__(self, syms: elfsyms.SymbolTable) -> None:
        self.syms = syms
        self.roles: dict[int, int] = {}


def table_for(path: str) -> Table | None:
    if path in TABLES:
        return TABLES[path]
    st = elfsyms.load(path)
    t = TABLES[path] = Table(st) if st is not None else None
    return t


def refine(out: list, cand: list, ranges: list, rule, lib_role: int) -> None:
    """Give the samples ``out[j]`` (ts, role) listed in ``cand`` [(j, ip)] the role of the function their IP falls
    in: ``rule(name, lib_role)``; ``ranges`` [(start, end, path, file_offset)]: the symbolised mappings (Maps.syms).
    An IP in no listed mapping, in a library without symbols, or outside every function keeps its role."""
    ips = np.fromiter((c[1] for c in cand), dtype=np.uint64, count=len(cand))
    for start, end, path, off in ranges:
        sel = np.nonzero((ips >= np.uint64(start)) & (ips < np.uint64(end)))[0]
        if not len(sel):
            continue
        t = table_for(path)
        if t is None:
            continue
        bias = t.syms.bias(start, off)
        if bias is None:
            continue
        idx = t.syms.lookup((ips[sel].astype(np.int64) - bias).astype(np.uint64))
        roles, syms = t.roles, t.syms
        for s, i in zip(sel.tolist(), idx.tolist()):
            if i < 0:
                continue
            r = roles.get(i)
            if r is None:
                r = roles[i] = rule(syms.name(i), lib_role)
            if r != lib_role:
                j = cand[s][0]
                out[j] = (out[j][0], r)
