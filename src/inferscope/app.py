"""One orchestration path: analyse a trace and write its report set.

Every command that produces a report goes through ``report()``: ``inferscope analyze`` (cli.py, and
batch.py for several inputs), ``inferscope run`` (collect/runner.py) and the library's
``save_report()`` (collect/api.py).  Loading differs per command (a file, the child's trace or crash
journal, the live session); choosing output paths is ``outputs.resolve_outputs`` and rendering goes
through the one format registry in ``report/__init__.py`` (by name and by file extension).
"""
from __future__ import annotations

from pathlib import Path


def report(trace, options=None, outputs=(), outdir: Path | None = None, inputs=(), defer_interrupt: bool = False,
           about: dict | None = None, progress=None) -> tuple[dict, list[Path]]:
    """Analyse ``trace`` with ``options`` and write ``outputs`` ([(format, path)]) as one set; the
    files named in ``inputs`` are never overwritten.  Returns (report.json's dict, written paths).
    ``progress``: a ``util.progress.Progress`` told the analysis and writing stages, or None."""
    from .analyze.pipeline import analyze
    from .outputs import write_reports
    if progress is not None:
        progress.stage("analysing")
    result = analyze(trace, options)
    if options is not None:
        from . import log
        from .analyze.options import unmatched_option_warnings
        for w in unmatched_option_warnings(options, result):   # also in the report's warnings
            log.warn(w)
    if progress is not None and outputs:
        progress.stage("writing the report")
    if about:
        result["about"].update(about)
    written = write_reports(result, trace, list(outputs), outdir, list(inputs), defer_interrupt) if outputs else []
    return result, written
