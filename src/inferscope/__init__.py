"""InferScope: where does end-to-end inference time go, and what should I change?

Light import: heavy modules (torch, numpy analyses, collectors) load lazily.
Public API: ``scope`` (context manager / decorator), ``mark``, ``save_report``.
"""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "scope", "mark", "save_report"]


def __getattr__(name):
    if name in ("scope", "mark", "save_report"):
        from .collect import api
        return getattr(api, name)
    raise AttributeError(f"module 'inferscope' has no attribute {name!r}")
