"""Renderers, chosen by name or by output-file extension.

Each renderer is ``render(report: Report, trace: Trace, path: Path) -> None`` and writes atomically.
``report`` is the typed analysis result (``inferscope.result.Report``; ``report.to_dict()`` is report.json) with
``report.views`` attached (``result/views.py``: the timeline strip and every idle gap, computed by
``analyze/views.py`` for the formats of the set - ``outputs.write_reports``).  Renderers compute nothing: every
number they show is in the Report or its views, and no module here imports analyze/, compare/, collect/,
ingest/, fleet/, app or cli (tests/test_layers.py).  The trace is passed for the chrome export (a format
conversion of the events themselves).
"""
from __future__ import annotations

import importlib
from pathlib import Path

from ..errors import ConfigError

# name -> (module, function, default file name)
RENDERERS: dict[str, tuple[str, str, str]] = {
    "md": ("inferscope.report.markdown", "render", "report.md"),
    "json": ("inferscope.report.json_report", "render", "report.json"),
    "csv": ("inferscope.report.csv_tables", "render", "tables"),
    "html": ("inferscope.report.html", "render", "report.html"),
    "chrome": ("inferscope.report.chrome", "render", "timeline.json"),
}
ALIASES = {"markdown": "md", "perfetto": "chrome", "timeline": "chrome", "htm": "html"}
EXTENSIONS = {".md": "md", ".markdown": "md", ".json": "json", ".html": "html", ".htm": "html", ".csv": "csv"}


def normalise_format(name: str) -> str:
    n = name.strip().lower()
    n = ALIASES.get(n, n)
    if n not in RENDERERS:
        raise ConfigError(f"unknown report format {name!r} (choose from {', '.join(RENDERERS)})")
    return n


def format_for_path(path: str | Path) -> str | None:
    return EXTENSIONS.get(Path(path).suffix.lower())


def get_renderer(name: str):
    mod, fn, _ = RENDERERS[normalise_format(name)]
    return getattr(importlib.import_module(mod), fn)


def default_filename(name: str) -> str:
    return RENDERERS[normalise_format(name)][2]
