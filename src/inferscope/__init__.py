"""InferScope: where does end-to-end inference time go, and what should I change?

Light import: heavy modules (torch, numpy analyses, collectors) load lazily.
Public API: ``scope`` (context manager / decorator; ``scope(name, tokens=, batch=)`` marks a request,
``cache_hit=`` records a cache hit or miss, an exception leaving it is recorded by class name), ``mark``,
``mark_token``, ``save_report`` (live collection);
``analyze(path, window=...)`` (a trace file -> the typed result, ``inferscope.result.Report``).
"""
from __future__ import annotations

import importlib as _importlib

from .version import __version__

__all__ = ["__version__", "scope", "mark", "mark_token", "save_report", "serve_metrics", "analyze"]

# ``inferscope.analyze(path, window=...)`` is the subpackage ``inferscope.analyze`` itself, made
# callable (see analyze/__init__.py): a function of that name here would be replaced by the
# subpackage the first time any analysis module is imported.


def __getattr__(name):
    if name == "analyze":
        return _importlib.import_module(".analyze", __name__)
    if name == "save_report":       # (app.py: analysing and writing reports is not collect/'s)
        from .app import save_report  # lazy: `import inferscope` stays light (PEP 562)
        return save_report
    if name in ("scope", "mark", "mark_token", "serve_metrics"):
        from .collect import api  # lazy: `import inferscope` stays light (PEP 562)
        return getattr(api, name)
    raise AttributeError(f"module 'inferscope' has no attribute {name!r}")
