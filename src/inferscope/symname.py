"""The qualified name of a C++ function from its Itanium-mangled symbol, without a demangler (vocab.symbol_role's
input): 'ns::cls::func' with parameters, template arguments and a lambda's own name dropped - a parameter of type
TensorIteratorBase& must not make add_kernel plumbing, and a lambda is named by the function it is in.  Pure Python,
no imports: vocab.symbol_role (which the live sampler's perfip uses) imports it.
"""
from __future__ import annotations


def qualified_name(sym: str) -> tuple[str, str]:
    """('ns::cls::func', its template arguments as mangled) of an Itanium-mangled C++ function: parameters and a
    lambda's own name dropped (a local entity is named by its enclosing function), '(anon)' for an anonymous
    namespace, a '.cold'/'.isra.0' suffix kept; (the symbol, '') when it is not mangled C++."""
    if not sym.startswith("_Z"):
        return sym, ""
    i = 2
    while sym[i:i + 1] == "Z":              # local entities, nested
        i += 1
    if sym[i:i + 1] == "N":
        i += 1
    parts, targs, n = [], [], len(sym)
    while i < n:
        c = sym[i]
        if c.isdigit():
            j = i
            while j < n and sym[j].isdigit():
                j += 1
            k = int(sym[i:j])
            name = sym[j:j + k]
            parts.append("(anon)" if name.startswith("_GLOBAL__N") else name)
            i = j + k
        elif c in "KVrL":                   # cv-qualifiers of a member, internal linkage
            i += 1
        elif c == "S" and sym[i:i + 2] == "St":
            parts.append("std")
            i += 2
        elif c == "I":                      # template arguments: skipped to the balanced E, kept aside
            depth, i0, i = 1, i, i + 1
            while i < n and depth:
                if sym[i].isdigit():        # an identifier inside: skipped whole (its letters are not codes)
                    j = i
                    while j < n and sym[j].isdigit():
                        j += 1
                    i = j + int(sym[i:j])
                    continue
                depth += 1 if sym[i] in "INFL" else (-1 if sym[i] == "E" else 0)
                i += 1
            targs.append(sym[i0:i])
        elif c in "CD" and i + 1 < n and sym[i + 1] in "0123459":   # constructor / destructor
            parts.append(("~" if c == "D" else "") + (parts[-1] if parts else ""))
            i += 2
        else:
            break
    if not parts:
        return sym, ""
    dot = sym.find(".", i)
    return "::".join(parts) + (sym[dot:] if dot >= 0 else ""), "".join(targs)
