"""Analyses: small pure functions over a Trace.  ``pipeline.analyze`` runs them all.

This package is also the notebook API: ``inferscope.analyze(path, window=...)`` calls
``analyze_file`` below (the module is callable), returning the typed result.
"""
from __future__ import annotations

import sys
import types


def analyze_file(trace, window: str | None = None, phase_map: dict | None = None, top_n: int = 20):
    """Analyse a trace (a path to a PyTorch profiler JSON[.gz], an Nsight Systems .sqlite export or
    an InferScope .iscope, or a loaded ``Trace``) and return the typed result
    (``inferscope.result.Report``): ``r.breakdown``, ``r.findings``, ``r.verdict``, ``r.tables``...;
    ``r.to_dict()`` is report.json, ``r.to_pandas()`` gives the tables as pandas DataFrames.

    ``window``: as ``--window`` (None = the steady state, or the scope() ranges of a live run; "all" = whole trace, "gpu", "step:N", a range name, "START_MS:END_MS");
    ``phase_map``: as ``--phase-map`` ({phase: [whole-word name patterns]}).
    """
    from ..ingest import load_trace  # lazy: every analyze submodule import runs this package first
    from .options import AnalyzeOptions  # lazy: every analyze submodule import runs this package first
    from .pipeline import analyze_report  # lazy: every analyze submodule import runs this package first
    tr = trace if hasattr(trace, "spans") else load_trace(str(trace))
    return analyze_report(tr, AnalyzeOptions(window=window, phase_map=phase_map, top_n=top_n))


class _CallableModule(types.ModuleType):
    def __call__(self, trace, window: str | None = None, phase_map: dict | None = None, top_n: int = 20):
        return analyze_file(trace, window=window, phase_map=phase_map, top_n=top_n)


sys.modules[__name__].__class__ = _CallableModule
