"""Which report files a command writes (-o / --format / --report) and writing them.

Shared by the CLI and the live collector (run_command.py, collect/api.py), so ``collect/``
never imports ``cli.py``.
"""
from __future__ import annotations

from pathlib import Path

from . import log
from .report import default_filename, format_for_path, normalise_format
from .report.writer import write_set

DEFAULT_FORMATS = "md,json,csv"
DEFAULT_DIR = "inferscope-out"          # analyze / run without -o (relative to the current directory)
DEFAULT_DIFF_DIR = "outputs/diff"       # diff without -o (outputs/ is git-ignored, like sweep's ./outputs)


def _split_gz(path: str) -> tuple[str, bool]:
    return (path[:-3], True) if path.lower().endswith(".gz") and len(path) > 3 else (path, False)


def _stem_name(fmt: str, stem: Path, gz: bool) -> Path:
    """The file of ``fmt`` in a set named from one report path (``x.md`` -> ``x.json``, ``x.html``...)."""
    ext = {"md": ".md", "json": ".json", "html": ".html", "chrome": ".timeline.json", "csv": "-tables"}[fmt]
    p = stem.with_name(stem.name + ext)
    return p.with_name(p.name + ".gz") if gz and fmt != "csv" else p


def resolve_outputs(output: str | None, formats: str | None, default_dir: str = DEFAULT_DIR) -> list[tuple[str, Path]]:
    """Map -o/--format to [(format, path)].

    -o with a known extension (report.md, x.html, t.json, t.json.gz) names the set: one file, or
    with --format values one file per format named from its stem (x.md, x.json, x.html,
    x.timeline.json, x-tables/ for csv): the format decides the extension (-o x.md --format html
    writes x.html, with a warning).  Otherwise -o is a folder receiving every format
    under its default name.  A ``.gz`` suffix writes gzip.
    """
    fmts = list(dict.fromkeys(normalise_format(f) for f in (formats or "").split(",") if f.strip()))
    plain, gz = _split_gz(output) if output else ("", False)
    if output and format_for_path(plain) and not Path(output).is_dir():
        ext_fmt = format_for_path(plain)
        if not fmts:
            return [(ext_fmt, Path(output))]
        stem = Path(plain).with_suffix("")
        if len(fmts) == 1:
            if fmts[0] == ext_fmt or (fmts[0] == "chrome" and ext_fmt == "json"):   # a Chrome trace is JSON
                return [(fmts[0], Path(output))]
            # the format decides the extension: never HTML or JSON in a file named .md (issue 24)
            p = _stem_name(fmts[0], stem, gz)
            log.warn(f"--format {fmts[0]}: writing {p} ({Path(output).name} names the report; its extension "
                     f"follows the format)")
            return [(fmts[0], p)]
        return [(f, Path(output) if f == ext_fmt else _stem_name(f, stem, gz)) for f in fmts]
    outdir = Path(output or default_dir)
    if not fmts:
        fmts = [normalise_format(f) for f in DEFAULT_FORMATS.split(",")]
    return [(f, outdir / default_filename(f)) for f in fmts]


def output_folder(output: str | None, outputs: list[tuple[str, Path]], default_dir: str = DEFAULT_DIR) -> Path | None:
    """The folder -o named (None when -o named a file set)."""
    plain = _split_gz(output)[0] if output else ""
    if output and format_for_path(plain) and not Path(output).is_dir():
        return None
    return Path(output or default_dir)


def write_reports(report, trace, outputs: list[tuple[str, Path]], outdir: Path | None = None,
                  inputs: list | None = None, defer_interrupt: bool = False) -> list[Path]:
    """Write the outputs of ``report`` (``result.Report``) as one set (report/writer.py): staged, renamed together,
    stale files removed.  What the formats draw from ``trace`` beyond report.json (the HTML strip, every idle gap)
    is computed first and attached as ``report.views`` (analyze/views.py): the renderers compute nothing."""
    from .analyze.views import attach  # lazy: numpy and the analysis; the CLI imports this module for every command
    # a single .csv file is the breakdown alone: no idle-gap list for it
    attach(report, trace, [f for f, p in outputs if not (f == "csv" and Path(p).suffix.lower() == ".csv")])
    return write_set(report, trace, outputs, outdir, [Path(p) for p in (inputs or [])], defer_interrupt)
