"""Classify Python code objects into domains, cached per code object.

Domains: TOK (tokenization), PRE (other preprocessing), FW (framework), USER, NEUTRAL
(stdlib, unknown third-party libraries, InferScope itself: transparent, the sampler keeps
walking outwards).  The package lists and name rules are ``inferscope/classes.py`` (the one
classification module, shared with the offline analyses); here only the live part: which file
a code object comes from (site-packages, the standard library of *this* interpreter, InferScope).
  USER files outside site-packages and the standard library (your scripts), <stdin>, <string>;
       a function in them named like tokenize / preprocess counts as TOK / PRE
"""
from __future__ import annotations

import os
import sysconfig

from ..classes import (DOMAIN_NAMES, FW, NEUTRAL, PRE, TOK, USER, name_domain,  # noqa: F401
                       package_domain)

_stdlib = {os.path.normcase(os.path.realpath(p)) for p in
           {sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib")} if p}
_site_markers = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)
_inferscope_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_file_cache: dict[str, tuple[int, str, str]] = {}
# code object id -> (code, domain, label).  Keyed by id, not by the code object: hashing a code
# object (code_hash) re-hashes its name, bytecode and constants on every lookup - measured as
# ~14 % of the sampler thread's CPU.  The entry keeps the code object alive, so its id cannot be
# reused by another code object while cached (bounded by the distinct code objects sampled).
CODE_CACHE: dict[int, tuple] = {}


def _file_domain(filename: str) -> tuple[int, str, str]:
    """(domain, package, label) for a file name."""
    r = _file_cache.get(filename)
    if r is not None:
        return r
    dom, pkg, label = USER, "", os.path.basename(filename)
    if filename.startswith("<"):
        dom = NEUTRAL   # <frozen ...>, <string> (exec, dataclasses, python -c): transparent; all-neutral -> user
    elif filename.startswith(_inferscope_dir):
        dom, pkg = NEUTRAL, "inferscope"
    else:
        rel = None
        for m in _site_markers:
            i = filename.rfind(m)
            if i >= 0:
                rel = filename[i + len(m):]
                break
        if rel is not None:
            pkg = rel.split(os.sep, 1)[0].split(".", 1)[0]
            label = rel.replace(os.sep, "/")
            # unknown third-party library (and inferscope itself): NEUTRAL, transparent
            dom = package_domain(pkg, os.path.basename(rel))
        else:
            real = os.path.normcase(filename)
            if any(real.startswith(s) for s in _stdlib) or "/lib/python3" in filename:
                dom, pkg = NEUTRAL, "stdlib"
    r = (dom, pkg, label)
    _file_cache[filename] = r
    return r


IMPORT = 8   # flag bit: import machinery frame (import in progress)


def code_info(code) -> tuple[int, str]:
    """(domain, 'file:func' label) for a code object; cached."""
    e = CODE_CACHE.get(id(code))
    if e is None or e[0] is not code:
        e = code_entry(code)
    return e[1], e[2]


def code_entry(code) -> tuple:
    """Classify a code object and cache it: (code, domain, label)."""
    dom, pkg, flabel = _file_domain(code.co_filename)
    qual = getattr(code, "co_qualname", code.co_name)
    if dom == USER:
        dom = name_domain(qual) or USER
    if code.co_filename.startswith("<frozen importlib"):
        dom = IMPORT
    e = (code, dom, f"{flabel}:{qual}")
    CODE_CACHE[id(code)] = e
    return e


def mark_transparent(code) -> None:
    """Classify a code object as NEUTRAL from now on (a forked child's inherited frames of the
    parent, which the child never runs: collect/bootstrap.py)."""
    e = code_entry(code)
    CODE_CACHE[id(code)] = (code, NEUTRAL, e[2])


def scope_domain(names) -> int:
    """Domain implied by the innermost scope() name that says tokenization / preprocessing
    (the same name rule as functions and recorded ranges: ``decode`` alone is an LLM phase, not
    tokenization)."""
    for n in reversed(names):
        d = name_domain(n)
        if d != NEUTRAL:
            return d
    return NEUTRAL


def walk(frame, scope_names=None, max_depth: int = 96) -> tuple[int, tuple | None]:
    """(domain, (label, line) or None) of a thread's stack, the sampler's rule: walk outwards until a
    framework / tokenization / preprocessing frame decides; user frames keep walking (an enclosing
    tokenizer wins: user code called by a tokenizer is tokenization); transparent frames (stdlib,
    unknown libraries, InferScope, imports) are skipped.  The label is the innermost deciding frame's.
    All-transparent stacks are USER; USER inside a scope() named like tokenization / preprocessing
    takes the scope's domain."""
    get = CODE_CACHE.get
    dom, label, lf, depth = 0, None, None, 0
    f = frame
    while f is not None and depth < max_depth:
        co = f.f_code
        e = get(id(co))
        if e is None or e[0] is not co:
            e = code_entry(co)
        d = e[1]
        if d and d != IMPORT:
            if dom == 0:
                dom, label, lf = d, e[2], f
                if d != USER:
                    break
            elif d == TOK or d == PRE:
                dom = d
                break
        f = f.f_back
        depth += 1
    if dom == 0:
        dom = USER
    if dom == USER and scope_names:
        sd = scope_domain(scope_names)
        if sd:
            dom = sd
    return dom, ((label, lf.f_lineno or 0) if label is not None else None)
