"""IP samples in torch's own libraries split by the function they fell in (perfip.symbol_role decides the role).

A sample's library alone cannot tell torch's math from its plumbing: a loop of tiny ops spends most of its samples
in libtorch_cpu.so - in the dispatcher, TensorIterator set-up, the allocator, refcounting - and read 74 % cpu_compute
for ~1 % of real math (zoo_tinyops).  The mappings of the libraries perfip.SYMBOL_LIBS names are resolved to their
function here, at each perf drain (never at sample time: the kernel takes the samples), in one batch per drain:

- the library's function table (elfsyms.load: .symtab, else .dynsym) is read once per library and process, at the
  first drain that has a sample in it (libtorch_cpu.so: 380k functions, 25-60 ms of CPU, 7.6 MB of arrays,
  RSS +17 MB; bench/README.md), and kept in ``TABLES`` (None: no symbols - stripped -, then the library's role stays);
- a drain's candidate IPs are looked up in ``IP_ROLES`` (exact IPs seen before); the rest go through one numpy
  searchsorted per library, and each function's role is decided once (``Table.roles``, a cache by function
  index).  Extra CPU per sample (bench/README.md): ~0.1 us with the IP known, ~0.65 us through numpy, ~1 us
  the first time a function is seen (the library rule alone: ~0.4 us per sample).
Why a function and not a page cache: a 4 KiB page of libtorch_cpu holds ~4-5 functions on average (380k functions in
341 MB of code), of both kinds side by side, so a page's role would be its first sample's, not the IP's.
"""
from __future__ import annotations

import numpy as np

from . import elfsyms

TABLES: dict[str, "Table | None"] = {}     # library path -> its table (None: no function symbols)
# Run-time IP -> role of the IPs resolved so far (a hot loop's samples repeat a few thousand IPs: a hit skips numpy;
# cleared past IP_ROLES_MAX entries, ~6 MB).  Keyed by run-time address: valid while the library stays mapped at
# it - torch's libraries are never unloaded.
IP_ROLES: dict[int, int] = {}
IP_ROLES_MAX = 1 << 16


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
    memo = IP_ROLES
    miss = []
    for c in cand:
        r = memo.get(c[1])
        if r is None:
            miss.append(c)
        elif r != lib_role:
            out[c[0]] = (out[c[0]][0], r)
    if not miss:
        return
    if len(memo) > IP_ROLES_MAX:
        memo.clear()
    cand = miss
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
            j, ip = cand[s]
            if i < 0:
                memo[ip] = lib_role
                continue
            r = roles.get(i)
            if r is None:
                r = roles[i] = rule(syms.name(i), lib_role)
            memo[ip] = r
            if r != lib_role:
                out[j] = (out[j][0], r)
