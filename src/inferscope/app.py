"""One orchestration path: analyse a trace and write its report set.

Every command that produces a report goes through ``report()``: ``inferscope analyze`` (cli.py, and
batch.py for several inputs), ``inferscope export`` (cli.py), ``inferscope run`` (run_command.py) and the library's
``save_report()`` (here; the collected trace from collect/api.py, which imports no report code).  Loading differs per command (a file, the child's trace or crash
journal, the live session); choosing output paths is ``outputs.resolve_outputs`` and rendering goes
through the one format registry in ``report/__init__.py`` (by name and by file extension).  ``inferscope
diff`` analyses each side that is a trace through ``analyse()`` and writes its own files.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple


class Reported(NamedTuple):
    """What ``report()`` produced: the typed Report, its report.json dict (one conversion, shared) and the files."""
    report: Any            # result.Report (not imported here: app is imported by the package's __init__)
    result: dict
    written: list

import msgspec

from . import log
from .analyze.options import AnalyzeOptions, unmatched_option_warnings
from .analyze.pipeline import analyze_report
from .collect.api import collected_trace
from .outputs import resolve_outputs, write_reports
from .report import format_for_path


def analyse(trace, options=None, about: dict | None = None, progress=None):
    """Analyse ``trace`` with ``options``: the typed ``Report`` (``about`` fields set on it) and its report.json
    dict; an option that
    matched nothing in the trace is logged (it is also in the report's warnings).  Every command's analysis goes
    through here: ``report()`` below (analyze, run, save_report, multi-input analyze, export) and diff's sides."""
    if progress is not None:
        progress.stage("analysing")
    rep = analyze_report(trace, options)
    if about:
        rep.about = msgspec.structs.replace(rep.about, **about)
    result = rep.to_dict()
    if options is not None:
        for w in unmatched_option_warnings(options, result):
            log.warn(w)
    return rep, result


def report(trace, options=None, outputs=(), outdir: Path | None = None, inputs=(), defer_interrupt: bool = False,
           about: dict | None = None, progress=None) -> Reported:
    """Analyse ``trace`` with ``options`` and write ``outputs`` ([(format, path)]) as one set; the
    files named in ``inputs`` are never overwritten.  Returns the Report, report.json's dict and the written paths.
    ``progress``: a ``util.progress.Progress`` told the analysis and writing stages, or None."""
    rep, result = analyse(trace, options, about, progress)
    if progress is not None and outputs:
        progress.stage("writing the report")
    written = write_reports(rep, trace, list(outputs), outdir, list(inputs), defer_interrupt) if outputs else []
    return Reported(rep, result, written)


def save_report(path: str | None = None, format: str | None = None, trace_path: str | None = None) -> list:
    """Analyse what was collected so far and write the report(s); returns the written paths
    (``inferscope.save_report``).

    Library mode: stops collection (torch profiler included) first; the next scope() starts a new
    session.  Under ``inferscope run``: writes a snapshot; collection continues and the run's own
    report is still written at exit.
    """
    got = collected_trace(trace_path)
    if got is None:
        return []
    trace, cfg = got
    # the program's explicit file name wins over the configured format (`inferscope run --format html`
    # sets that for the run's own report, not for save_report("x.md"))
    named = bool(path) and format_for_path(path[:-3] if path.lower().endswith(".gz") else path) is not None
    fmt = format if format is not None else (None if named else cfg.report_format)
    outputs = resolve_outputs(path or cfg.report_path, fmt)
    return report(trace, AnalyzeOptions(), outputs).written
