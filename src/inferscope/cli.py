"""Command line: wires ingest -> analyze -> report.  No analysis logic here."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from . import __version__
from .analyze.options import options_from_args as _options_from_args  # noqa: F401  (used by callers)
from .errors import InferScopeError, InputError
from .outputs import DEFAULT_FORMATS, resolve_outputs, write_reports  # noqa: F401


def _add_analysis_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--window", default=None,
                   help="analysis window (default: the steady state - start-up and teardown left out - or the "
                        "scope() ranges when present): 'all' (whole trace), 'gpu' (first to last GPU activity), a step "
                        "or range name (e.g. 'ProfilerStep#6', 'decode', 'decode:2' for its 2nd occurrence), "
                        "'step:N' (N-th step), or 'START_MS:END_MS' relative to the trace start")
    p.add_argument("--phase-map", "--phases-json", dest="phase_map", default=None, metavar="FILE",
                   help="JSON mapping phase -> list of range-name substrings (seed 004 format)")
    p.add_argument("--nvtx-coverage-warn-threshold", type=float, default=None, metavar="F",
                   help="warn when range->kernel attribution covers less than F (0-1) of kernel time")
    p.add_argument("--no-nvtx-kernel-map", action="store_true",
                   help="skip attributing GPU kernel time to NVTX/annotation ranges")


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


def cmd_schema(args) -> int:
    from .result import json_schema
    print(json.dumps(json_schema(), indent=2, sort_keys=True))
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

    sc = sub.add_parser("schema", help="print the JSON Schema of report.json (generated from the typed result)")
    sc.set_defaults(func=cmd_schema)

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
