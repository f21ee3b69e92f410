"""Command line: wires ingest -> analyze -> report.  No analysis logic here."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from . import __version__
from .errors import ConfigError, InferScopeError, InputError

DEFAULT_FORMATS = "md,json,csv"


_PHASE_MAP_MAX = 1 << 20


def _load_phase_map(path: str | None) -> dict | None:
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            raw = f.read(_PHASE_MAP_MAX + 1)
        if len(raw) > _PHASE_MAP_MAX:
            raise ConfigError(f"--phase-map {path}: larger than {_PHASE_MAP_MAX >> 20} MB")
        data = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"--phase-map {path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"--phase-map {path}: is a directory") from None
    except RecursionError:
        raise ConfigError(f"--phase-map {path}: nested too deeply") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"--phase-map {path}: not UTF-8 (bad byte at offset {e.start})") from None
    except (OSError, ValueError) as e:
        raise ConfigError(f"--phase-map {path}: not valid JSON ({e})") from None
    if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v)
            for k, v in data.items()):
        raise ConfigError(f"--phase-map {path}: expected an object mapping phase -> list of name patterns")
    return data


def _add_analysis_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--window", default=None,
                   help="analysis window: 'all' (default), 'gpu' (first to last GPU activity), a step "
                        "or range name (e.g. 'ProfilerStep#6', 'decode', 'decode:2' for its 2nd occurrence), "
                        "'step:N' (N-th step), or 'START_MS:END_MS' relative to the trace start")
    p.add_argument("--phase-map", "--phases-json", dest="phase_map", default=None, metavar="FILE",
                   help="JSON mapping phase -> list of range-name substrings (seed 004 format)")
    p.add_argument("--nvtx-coverage-warn-threshold", type=float, default=None, metavar="F",
                   help="warn when range->kernel attribution covers less than F (0-1) of kernel time")
    p.add_argument("--no-nvtx-kernel-map", action="store_true",
                   help="skip attributing GPU kernel time to NVTX/annotation ranges")
    p.add_argument("--max-decompressed-mb", type=float, default=None, metavar="MB",
                   help="cap on decompressed input (.json.gz, .iscope); default 50x the compressed size, "
                        "at least 64 MB, at most 4096 MB (INFERSCOPE_MAX_DECOMPRESSED_MB)")


def _options_from_args(args):
    from .analyze.options import AnalyzeOptions
    from . import thresholds
    thr = args.nvtx_coverage_warn_threshold
    if thr is not None and not (0.0 <= thr <= 1.0):
        raise ConfigError("--nvtx-coverage-warn-threshold must be between 0 and 1")
    return AnalyzeOptions(window=args.window, phase_map=_load_phase_map(args.phase_map),
                          nvtx_kernel_map=not args.no_nvtx_kernel_map,
                          nvtx_coverage_warn_threshold=thresholds.NVTX_COVERAGE_WARN_THRESHOLD if thr is None else thr)


def _split_gz(path: str) -> tuple[str, bool]:
    return (path[:-3], True) if path.lower().endswith(".gz") and len(path) > 3 else (path, False)


def _stem_name(fmt: str, stem: Path, gz: bool) -> Path:
    """The file of ``fmt`` in a set named from one report path (``x.md`` -> ``x.json``, ``x.html``...)."""
    ext = {"md": ".md", "json": ".json", "html": ".html", "chrome": ".timeline.json", "csv": "-tables"}[fmt]
    p = stem.with_name(stem.name + ext)
    return p.with_name(p.name + ".gz") if gz and fmt != "csv" else p


def resolve_outputs(output: str | None, formats: str | None, default_dir: str = "inferscope-out") -> list[tuple[str, Path]]:
    """Map -o/--format to [(format, path)].

    -o with a known extension (report.md, x.html, t.json, t.json.gz) names the set: one file, or
    with several --format values one file per format named from its stem (x.md, x.json, x.html,
    x.timeline.json, x-tables/ for csv).  Otherwise -o is a folder receiving every format
    under its default name.  A ``.gz`` suffix writes gzip.
    """
    from .report import default_filename, format_for_path, normalise_format
    fmts = list(dict.fromkeys(normalise_format(f) for f in (formats or "").split(",") if f.strip()))
    plain, gz = _split_gz(output) if output else ("", False)
    if output and format_for_path(plain) and not Path(output).is_dir():
        ext_fmt = format_for_path(plain)
        if not fmts:
            return [(ext_fmt, Path(output))]
        if len(fmts) == 1:
            return [(fmts[0], Path(output))]
        stem = Path(plain).with_suffix("")
        return [(f, Path(output) if f == ext_fmt else _stem_name(f, stem, gz)) for f in fmts]
    outdir = Path(output or default_dir)
    if not fmts:
        fmts = [normalise_format(f) for f in DEFAULT_FORMATS.split(",")]
    return [(f, outdir / default_filename(f)) for f in fmts]


def output_folder(output: str | None, outputs: list[tuple[str, Path]], default_dir: str = "inferscope-out") -> Path | None:
    """The folder -o named (None when -o named a file set)."""
    from .report import format_for_path
    plain = _split_gz(output)[0] if output else ""
    if output and format_for_path(plain) and not Path(output).is_dir():
        return None
    return Path(output or default_dir)


def write_reports(result: dict, trace, outputs: list[tuple[str, Path]], outdir: Path | None = None,
                  inputs: list | None = None, defer_interrupt: bool = False) -> list[Path]:
    """Write the outputs as one set (report/writer.py): staged, renamed together, stale files removed."""
    from .report.writer import write_set
    return write_set(result, trace, outputs, outdir, [Path(p) for p in (inputs or [])], defer_interrupt)


def _config(args, report_path=None, report_format=None):
    """flags > INFERSCOPE_* > .inferscope.yaml > defaults; a bad value is ConfigError (exit 2)."""
    from . import log
    from .config import load_config
    cfg = load_config(flags={"report_path": report_path, "report_format": report_format,
                             "max_decompressed_mb": getattr(args, "max_decompressed_mb", None)})
    log.set_level("error" if getattr(args, "quiet", False) else cfg.log_level)
    return cfg


def _max_bytes(cfg) -> int | None:
    return None if cfg.max_decompressed_mb is None else int(cfg.max_decompressed_mb * (1 << 20))


def _say(args, *lines) -> None:
    if not getattr(args, "quiet", False):
        for ln in lines:
            print(ln)


def cmd_analyze(args) -> int:
    from .analyze.pipeline import analyze
    from .ingest import load_trace
    from .report.markdown import headline, plain
    cfg = _config(args, report_format=args.format)
    if args.print_schema:
        from .ingest import detect_format
        if detect_format(args.trace) != "nsys":
            raise InputError(f"{args.trace}: --print-schema applies to Nsight Systems SQLite exports")
        from .ingest import nsys
        print(nsys.describe_schema(args.trace))
        return 0
    opts = _options_from_args(args)
    output = args.output
    if output is None and cfg.sources.get("report_path") in ("env", "file"):
        output = cfg.report_path
    fmt = args.format if args.format else (cfg.report_format if cfg.sources.get("report_format") != "default" else None)
    outputs = resolve_outputs(output, fmt)
    from .report.writer import refuse_overwriting_inputs
    refuse_overwriting_inputs(outputs, [Path(args.trace)])
    t0 = time.perf_counter()
    trace = load_trace(args.trace, max_decompressed=_max_bytes(cfg))
    t1 = time.perf_counter()
    if args.list_windows:
        from .analyze.window import available_windows
        for w in available_windows(trace, limit=10_000):
            print(plain(w))
        return 0
    result = analyze(trace, opts)
    result["about"]["load_ms"] = round((t1 - t0) * 1e3, 3)
    written = write_reports(result, trace, outputs, output_folder(output, outputs), [args.trace])
    _say(args, headline(result), "", *(f"wrote {p}" for p in written))
    return 0


def cmd_export(args) -> int:
    from .analyze.pipeline import analyze
    from .ingest import load_trace
    cfg = _config(args)
    fmt = args.format or "chrome"
    outputs = resolve_outputs(args.output, fmt)
    if len(outputs) != 1 or Path(args.output).is_dir() or outputs[0][0] == "csv":
        raise ConfigError(f"export -o {args.output}: expected one file path (e.g. timeline.json or timeline.json.gz)")
    outputs = [(outputs[0][0], Path(args.output))]
    from .report.writer import refuse_overwriting_inputs
    refuse_overwriting_inputs(outputs, [Path(args.trace)])
    trace = load_trace(args.trace, max_decompressed=_max_bytes(cfg))
    result = analyze(trace, _options_from_args(args))
    written = write_reports(result, trace, outputs, None, [args.trace])
    _say(args, *(f"wrote {p}" for p in written))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="inferscope", description="Where does end-to-end inference time go?")
    p.add_argument("--version", action="version", version=f"inferscope {__version__}")
    sub = p.add_subparsers(dest="command")

    a = sub.add_parser("analyze", help="analyse a trace (PyTorch profiler JSON[.gz], Nsight Systems .sqlite, InferScope .iscope)")
    a.add_argument("trace")
    a.add_argument("-o", "--output", default=None,
                   help="output directory (default ./inferscope-out) or a single report file (report.md, report.html, report.json)")
    a.add_argument("--format", default=None, help=f"comma-separated: md,json,csv,html,chrome (default {DEFAULT_FORMATS})")
    a.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    a.add_argument("--print-schema", action="store_true", help="Nsight Systems: print the tables and columns found, then exit")
    a.add_argument("--list-windows", action="store_true", help="print the values --window accepts for this trace, then exit")
    _add_analysis_args(a)
    a.set_defaults(func=cmd_analyze)

    e = sub.add_parser("export", help="export the merged timeline (Chrome trace-event JSON for Perfetto UI / chrome://tracing)")
    e.add_argument("trace")
    e.add_argument("-o", "--output", required=True)
    e.add_argument("--format", default=None, help="chrome (default); md, json, html also work")
    e.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    _add_analysis_args(e)
    e.set_defaults(func=cmd_export)

    r = sub.add_parser("run", help="run a program under InferScope and write a report: inferscope run [opts] -- python app.py ...",
                       add_help=True)
    r.add_argument("--report", default=None, help="report path (default ./report.md, or INFERSCOPE_REPORT_PATH)")
    r.add_argument("--format", default=None, help="comma-separated: md,html,json,csv,chrome")
    r.add_argument("--trace", default=None, help="also keep the collected trace here (.iscope)")
    r.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors (the program's own output passes through)")
    r.add_argument("cmd", nargs=argparse.REMAINDER, help="the program and its arguments")
    _add_analysis_args(r)
    r.set_defaults(func=cmd_run)
    return p


def cmd_run(args) -> int:
    from .collect.runner import run_command
    return run_command(args)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except InferScopeError as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"inferscope: error: {msg}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("inferscope: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("inferscope: error: out of memory while processing the trace", file=sys.stderr)
        return 2
    except Exception as e:  # a bug, not bad input: still one line; INFERSCOPE_DEBUG=1 shows the traceback
        if os.environ.get("INFERSCOPE_DEBUG"):
            raise
        msg = " ".join(str(e).split())[:300]
        print(f"inferscope: internal error: {type(e).__name__}: {msg} (set INFERSCOPE_DEBUG=1 for the traceback; "
              "please report it)", file=sys.stderr)
        return 3
