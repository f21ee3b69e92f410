"""C++ symbol names made readable (``_ZN2at6native...`` -> ``void at::native::...``), the way Kineto
and Nsight Systems show kernel names: the C++ runtime's own ``__cxa_demangle`` (libstdc++, through
ctypes), once per distinct name.  A name that is not mangled, or a machine without libstdc++, keeps
its raw spelling."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools

_fn = None
_tried = False


def _demangler():
    global _fn, _tried
    if not _tried:
        _tried = True
        for name in ("libstdc++.so.6", ctypes.util.find_library("stdc++")):
            if not name:
                continue
            try:
                lib = ctypes.CDLL(name)
                f = lib.__cxa_demangle
                f.restype = ctypes.c_void_p
                f.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int))
                _fn = (f, ctypes.CDLL(None).free)
                break
            except (OSError, AttributeError):
                continue
    return _fn


@functools.lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    if not name.startswith("_Z"):
        return name
    d = _demangler()
    if d is None:
        return name
    f, free = d
    status = ctypes.c_int(0)
    try:
        p = f(name.encode("utf-8", "replace"), None, None, ctypes.byref(status))
    except (ctypes.ArgumentError, OSError):
        return name
    if not p or status.value != 0:
        return name
    try:
        return ctypes.string_at(p).decode("utf-8", "replace")
    finally:
        free.argtypes = (ctypes.c_void_p,)
        free(p)
