"""Which report files a command writes (-o / --format / --report) and writing them.

Shared by the CLI and the live collector (collect/runner.py, collect/api.py), so ``collect/``
never imports ``cli.py``.
"""
from __future__ import annotations

from pathlib import Path

from .errors import InferScopeError

DEFAULT_FORMATS = "md,json,csv"


def resolve_outputs(output: str | None, formats: str | None, default_dir: str = "inferscope-out") -> list[tuple[str, Path]]:
    """Map -o/--format to [(format, path)].

    -o with a known extension (report.md, x.html, t.json) writes that one file unless
    --format is also given; otherwise -o is a directory receiving every format.
    """
    from .report import default_filename, format_for_path, normalise_format
    fmts = [normalise_format(f) for f in (formats or "").split(",") if f.strip()]
    if output and format_for_path(output) and not Path(output).is_dir():
        ext_fmt = format_for_path(output)
        if not fmts:
            return [(ext_fmt, Path(output))]
        if len(fmts) == 1:
            return [(fmts[0], Path(output))]
        base = Path(output).parent
        return [(f, Path(output) if f == ext_fmt else base / default_filename(f)) for f in fmts]
    outdir = Path(output or default_dir)
    if not fmts:
        fmts = [normalise_format(f) for f in DEFAULT_FORMATS.split(",")]
    return [(f, outdir / default_filename(f)) for f in fmts]


def write_reports(result: dict, trace, outputs: list[tuple[str, Path]]) -> list[Path]:
    from .report import get_renderer
    written = []
    for fmt, path in outputs:
        try:
            get_renderer(fmt)(result, trace, path)
        except InferScopeError:
            raise
        except OSError as e:
            raise InferScopeError(f"cannot write {path}: {e.strerror or e}") from None
        written.append(path)
    return written
