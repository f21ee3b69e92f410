"""Injected by ``inferscope run`` (its directory is prepended to the child's PYTHONPATH).

Chains to any other sitecustomize on the path, then starts InferScope's collection when
INFERSCOPE_ENABLED=1.  Never raises: a failure prints one line and the program runs unprofiled.
"""
import importlib as _importlib
import os as _os
import sys as _sys

_here = _os.path.dirname(_os.path.abspath(__file__))


def _chain():
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
    me = _sys.modules.pop("sitecustomize", None)
    try:
        _importlib.import_module("sitecustomize")
    except ImportError as e:
        if getattr(e, "name", None) != "sitecustomize":
            _sys.stderr.write(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(e).__name__}: {e}\n")
        _sys.modules["sitecustomize"] = me
    except Exception as e:
        _sys.stderr.write(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(e).__name__}: {e}\n")
        _sys.modules.setdefault("sitecustomize", me)


def _boot():
    if _os.environ.get("INFERSCOPE_ENABLED", "").strip().lower() not in ("1", "true", "yes", "on"):
        return
    if not _os.environ.get("INFERSCOPE_TRACE_OUT"):
        return
    try:
        try:
            from inferscope.collect import bootstrap  # lazy: this file runs in every Python process on the path
        except ImportError:
            pkg = _os.environ.get("INFERSCOPE_PKG_PATH")
            if not pkg:
                raise
            _sys.path.append(pkg)
            from inferscope.collect import bootstrap  # lazy: this file runs in every Python process on the path
        bootstrap.main()
    except Exception as e:
        _sys.stderr.write(f"inferscope: collection disabled in this process ({type(e).__name__}: {e})\n")


_chain()
_boot()
