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


def _load_phase_map(path: str | None) -> dict | None:
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ConfigError(f"--phase-map {path}: no such file") from None
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


def _options_from_args(args):
    from .analyze.options import AnalyzeOptions
    from . import thresholds
    thr = args.nvtx_coverage_warn_threshold
    if thr is not None and not (0.0 <= thr <= 1.0):
        raise ConfigError("--nvtx-coverage-warn-threshold must be between 0 and 1")
    return AnalyzeOptions(window=args.window, phase_map=_load_phase_map(args.phase_map),
                          nvtx_kernel_map=not args.no_nvtx_kernel_map,
                          nvtx_coverage_warn_threshold=thresholds.NVTX_COVERAGE_WARN_THRESHOLD if thr is None else thr)


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


def cmd_analyze(args) -> int:
    from .analyze.pipeline import analyze
    from .ingest import load_trace
    from .report.markdown import headline
    if args.print_schema:
        from .ingest import detect_format
        if detect_format(args.trace) != "nsys":
            raise InputError(f"{args.trace}: --print-schema applies to Nsight Systems SQLite exports")
        from .ingest import nsys
        print(nsys.describe_schema(args.trace))
        return 0
    opts = _options_from_args(args)
    outputs = resolve_outputs(args.output, args.format)
    t0 = time.perf_counter()
    trace = load_trace(args.trace)
    t1 = time.perf_counter()
    result = analyze(trace, opts)
    result["about"]["load_ms"] = round((t1 - t0) * 1e3, 3)
    written = write_reports(result, trace, outputs)
    if not args.quiet:
        print(headline(result))
        print()
        for p in written:
            print(f"wrote {p}")
    return 0


def cmd_export(args) -> int:
    from .analyze.pipeline import analyze
    from .ingest import load_trace
    from .report import get_renderer
    trace = load_trace(args.trace)
    result = analyze(trace, _options_from_args(args))
    out = Path(args.output)
    get_renderer(args.format)(result, trace, out)
    if not args.quiet:
        print(f"wrote {out}")
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
    a.add_argument("-q", "--quiet", action="store_true", help="do not print the headline")
    a.add_argument("--print-schema", action="store_true", help="Nsight Systems: print the tables and columns found, then exit")
    _add_analysis_args(a)
    a.set_defaults(func=cmd_analyze)

    e = sub.add_parser("export", help="export the merged timeline (Chrome trace-event JSON for Perfetto UI / chrome://tracing)")
    e.add_argument("trace")
    e.add_argument("-o", "--output", required=True)
    e.add_argument("--format", default="chrome", help="chrome (default)")
    e.add_argument("-q", "--quiet", action="store_true")
    _add_analysis_args(e)
    e.set_defaults(func=cmd_export)

    r = sub.add_parser("run", help="run a program under InferScope and write a report: inferscope run [opts] -- python app.py ...",
                       add_help=True)
    r.add_argument("--report", default=None, help="report path (default ./report.md, or INFERSCOPE_REPORT_PATH)")
    r.add_argument("--format", default=None, help="comma-separated: md,html,json,csv,chrome")
    r.add_argument("--trace", default=None, help="also keep the collected trace here (.iscope)")
    r.add_argument("-q", "--quiet", action="store_true")
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
