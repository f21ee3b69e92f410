"""Command line: wires ingest -> analyze -> report.  No analysis logic here."""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

from . import log, thresholds
from .version import __version__
from .analyze.options import options_from_args as _options_from_args  # noqa: F401  (used by callers)
from .config import load_config
from .errors import ConfigError, InferScopeError, InputError  # noqa: F401
from .outputs import DEFAULT_FORMATS, output_folder, resolve_outputs, write_reports  # noqa: F401


class _HelpFormatter(argparse.HelpFormatter):
    """Appends "(default: X)" to an option's help when it has a default worth showing and its help does
    not already say one (argparse's ArgumentDefaultsHelpFormatter also prints "default: None")."""

    def _get_help_string(self, action):
        h = action.help or ""
        d = action.default
        if ("default" in h or d is None or d is False or d is argparse.SUPPRESS or not action.option_strings
                or isinstance(d, (list, tuple))):
            return h
        return f"{h} (default: %(default)s)"


def _sub(sub, name: str, what: str, usage_hint: str = ""):
    """A subcommand whose help page starts with the one line saying what it does."""
    return sub.add_parser(name, help=what + usage_hint, description=what[:1].upper() + what[1:] + usage_hint + ".",
                          formatter_class=_HelpFormatter)


def _add_analysis_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--window", default=None,
                   help="analysis window (default: the steady state - start-up and teardown left out - or the "
                        "scope() ranges when present): 'all' (whole trace), 'gpu' (first to last GPU activity), a step "
                        "or range name (e.g. 'ProfilerStep#6', 'decode', 'decode:2' for its 2nd occurrence), "
                        "'step:N' (N-th step), or 'START_MS:END_MS' relative to the trace start")
    p.add_argument("--phase-map", "--phases-json", dest="phase_map", default=None, metavar="FILE",
                   help="JSON mapping phase -> list of range-name patterns, matched as whole words, e.g. {\"prefill\": [\"prefill\"], \"decode\": [\"decode_step\"]} (default: ranges named exactly prefill, decode or sampling, "
                        "optionally with 'step' and a number); a phase that matches no range is a warning")
    p.add_argument("--nvtx-coverage-warn-threshold", type=float, default=None, metavar="F",
                   help="warn when range->kernel attribution covers less than F (0-1) of kernel time "
                        f"(default {thresholds.NVTX_COVERAGE_WARN_THRESHOLD:g})")
    p.add_argument("--no-nvtx-kernel-map", action="store_true",
                   help="skip attributing GPU kernel time to NVTX/annotation ranges")
    p.add_argument("--max-decompressed-mb", type=float, default=None, metavar="MB",
                   help="cap on decompressed input (.json.gz, .iscope); default 50x the compressed size, "
                        "at least 64 MB, at most 4096 MB (INFERSCOPE_MAX_DECOMPRESSED_MB)")

    p.add_argument("--peak-tflops", type=float, default=None, metavar="TF",
                   help="peak dense TFLOP/s of the device for the run's dtype (MFU denominator; default: the "
                        "datasheet table for the device the trace names)")
    p.add_argument("--peak-gbps", type=float, default=None, metavar="GBPS",
                   help="peak memory bandwidth in GB/s (MBU denominator; default: the datasheet table)")
    p.add_argument("--cublas-log", default=None, metavar="FILE",
                   help="a cuBLASLt log (CUBLASLT_LOG_LEVEL=2+, CUBLASLT_LOG_FILE): the algorithm/tile per GEMM shape, "
                        "joined to the gemm_shapes table; or a cuBLAS API log (CUBLAS_LOGINFO_DBG=1, "
                        "CUBLAS_LOGDEST_DBG): shapes and types, no algorithm")
    p.add_argument("--model-config", default=None, metavar="FILE",
                   help="the model (HF config.json, or JSON/YAML with params or layers/hidden/heads/vocab, dtype, "
                        "peak_tflops): per-stage MFU for prefill/decode ranges when no live hook saw the model")


def _config(args, report_path=None, report_format=None):
    """flags > INFERSCOPE_* > .inferscope.yaml > defaults; a bad value is ConfigError (exit 2)."""
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
    if isinstance(args.trace, list):
        # one existing file on the local engine (is_many is False for it): batch.py is not imported
        one_file = len(args.trace) == 1 and Path(args.trace[0]).is_file()
        if not one_file or args.engine != "local" or args.address:
            from .fleet.batch import cli_analyze_many, is_many  # lazy: only analyze needs it (the CLI starts light)
            if is_many(args.trace) or args.engine != "local" or args.address:
                if getattr(args, "replay", False):
                    raise InputError("--replay re-derives one live trace's classes; give a single .iscope")
                if getattr(args, "ncu", None):
                    raise InputError("--ncu joins one Nsight Compute capture to one trace; give a single trace")
                return cli_analyze_many(args)
        args.trace = args.trace[0]
    # one trace, one short-lived command: the cyclic GC off throughout, as the importers and the
    # analyses already run (its full collections while numpy and the analyses are imported cost
    # ~10 ms of start-up, issue 26); several inputs (batch.py) keep it
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _analyze_one(args)
    finally:
        if enabled:
            gc.enable()


def _analyze_one(args) -> int:
    from .ingest import load_trace  # lazy: only analyze needs it (the CLI starts light)
    from .report.markdown import headline, plain  # lazy: only analyze needs it (the CLI starts light)
    cfg = _config(args, report_format=args.format)
    if args.print_schema:
        from .ingest import detect_format  # lazy: only analyze needs it (the CLI starts light)
        if detect_format(args.trace) != "nsys":
            raise InputError(f"{args.trace}: --print-schema applies to Nsight Systems SQLite exports")
        from .ingest import nsys  # lazy: only analyze needs it (the CLI starts light)
        print(nsys.describe_schema(args.trace))
        return 0
    opts = _options_from_args(args)
    output = args.output
    if output is None and cfg.sources.get("report_path") in ("env", "file"):
        output = cfg.report_path
    fmt = args.format if args.format else (cfg.report_format if cfg.sources.get("report_format") != "default" else None)
    outputs = resolve_outputs(output, fmt)
    from .report.writer import refuse_overwriting_inputs  # lazy: only analyze needs it (the CLI starts light)
    refuse_overwriting_inputs(outputs, [Path(args.trace)] + ([Path(args.ncu)] if getattr(args, "ncu", None) else []))
    prog = _progress(args)
    ok = False
    try:
        t0 = time.perf_counter()
        trace = load_trace(args.trace, max_decompressed=_max_bytes(cfg), progress=prog)
        if getattr(args, "replay", False):
            from .collect.replay import replay_trace  # lazy: only analyze needs it (the CLI starts light)
            trace, n = replay_trace(trace, Path(args.trace).name)
            from .trace.validate import check   # the replayed runs come from the file's facts: input like any other
            trace = check(trace, Path(args.trace).name)
            log.info(f"Replayed the sampler's decisions of {n['threads']} thread(s) from the recorded facts: "
                     f"{n['runs_replayed']} runs (recorded: {n['runs_recorded']})")
            if getattr(args, "rules", False) and not getattr(args, "quiet", False):
                print(_rules_ms_table(n["rules_ms"]))
        elif getattr(args, "rules", False):
            raise InputError("--rules shows the rules of a replay: add --replay (a trace recorded with `run --facts`)")
        if getattr(args, "ncu", None):
            from .ingest import ncu  # lazy: only analyze needs it (the CLI starts light)
            if prog is not None:
                prog.stage(f"reading {Path(args.ncu).name}")
            cap = ncu.read(args.ncu, _max_bytes(cfg))
            trace.meta["ncu"] = dict(cap, joined=True)
            trace.meta["warnings"] = list(trace.meta.get("warnings", [])) + cap["warnings"]
        t1 = time.perf_counter()
        if not args.list_windows:
            from .app import report  # lazy: only analyze needs it (the CLI starts light)
            done = report(trace, opts, outputs, output_folder(output, outputs), [args.trace],
                          about={"load_ms": round((t1 - t0) * 1e3, 3)}, progress=prog)
        ok = True
    finally:
        if prog is not None:
            prog.done(ok)
    if args.list_windows:
        from .analyze.window import available_windows  # lazy: only analyze needs it (the CLI starts light)
        for w in available_windows(trace, limit=10_000):
            print(plain(w))
        return 0
    _say(args, headline(done.report), "", *(f"wrote {p}" for p in done.written))
    return 0


def _progress(args):
    """The progress line on stderr (util/progress.py) for one input, or None (stderr not a terminal, -q)."""
    from .util.progress import for_stderr  # lazy: only analyze/export draw progress
    return for_stderr(Path(args.trace).name, quiet=getattr(args, "quiet", False))


def cmd_export(args) -> int:
    from .app import report  # lazy: only export needs it (the CLI starts light)
    from .ingest import load_trace  # lazy: only export needs it (the CLI starts light)
    cfg = _config(args)
    fmt = args.format or "chrome"
    outputs = resolve_outputs(args.output, fmt)
    if len(outputs) != 1 or Path(args.output).is_dir() or outputs[0][0] == "csv":
        raise ConfigError(f"export -o {args.output}: expected one file path (e.g. timeline.json or timeline.json.gz)")
    outputs = [(outputs[0][0], Path(args.output))]
    from .report.writer import refuse_overwriting_inputs  # lazy: only export needs it (the CLI starts light)
    refuse_overwriting_inputs(outputs, [Path(args.trace)])
    prog = _progress(args)
    ok = False
    try:
        trace = load_trace(args.trace, max_decompressed=_max_bytes(cfg), progress=prog)
        written = report(trace, _options_from_args(args), outputs, None, [args.trace], progress=prog).written
        ok = True
    finally:
        if prog is not None:
            prog.done(ok)
    _say(args, *(f"wrote {p}" for p in written))
    return 0


def _rules_ms_table(rules_ms: dict) -> str:
    """ms laid by each sampler rule per class (a replay's tally, all recorded threads), in RULES order."""
    from .collect.rules import RULES  # lazy: only --replay needs the sampler's rules
    from .collect.tick_rules import TICK_RULES  # lazy: only --replay needs the sampler's rules
    order = [f.__name__ for f in TICK_RULES] + ["tick_class", "tick_keep"] + [f.__name__ for f in RULES]
    classes = sorted({c for v in rules_ms.values() for c in v})
    lines = ["| rule (collect/tick_rules.py, rules.py) | " + " | ".join(classes) + " | total ms |",
             "|---" * (len(classes) + 2) + "|"]
    for r in sorted(rules_ms, key=lambda r: order.index(r) if r in order else len(order)):
        v = rules_ms[r]
        lines.append(f"| {r} | " + " | ".join(f"{v[c]:.1f}" if c in v else "" for c in classes)
                     + f" | {sum(v.values()):.1f} |")
    return "\n".join(lines)


def cmd_rules(args) -> int:
    from .collect.rules import rules_table  # lazy: only rules needs it (the CLI starts light)
    print(rules_table())
    return 0


def cmd_schema(args) -> int:
    from .result import json_schema  # lazy: only schema needs it (the CLI starts light)
    print(json.dumps(json_schema(), indent=2, sort_keys=True))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="inferscope", description="Where does end-to-end inference time go?")
    p.add_argument("--version", action="version", version=f"inferscope {__version__}", help="print the version and exit")
    sub = p.add_subparsers(dest="command", title="commands", metavar="COMMAND")

    a = _sub(sub, "analyze", "analyse a trace (PyTorch profiler JSON[.gz], Nsight Systems .sqlite, Nsight Compute --csv, "
                             "InferScope .iscope) and write its report")
    a.add_argument("trace", nargs="+", help="a trace; several, a folder or a glob: one report folder each plus summary.jsonl")
    a.add_argument("--jobs", type=int, default=1, metavar="N", help="with several inputs: analyse N at a time (processes)")
    a.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="with several inputs: 'local' (this machine, --jobs processes) or 'ray' (Ray tasks; extra [ray])")
    a.add_argument("--address", default=None, metavar="ADDR",
                   help="--engine ray: the cluster to use ('auto', HOST:PORT, ray://...); default: start a local Ray")
    a.add_argument("--group-by", dest="group_by", choices=("auto", "folder", "all"), default="auto",
                   help="with several inputs: which traces are ranks of one job - 'auto' (same world size >= 2, backend, "
                        "process groups, devices, tool versions; a rank alone is its own job), 'folder' (same folder), "
                        "'all' (every input with a rank)")
    a.add_argument("-o", "--output", default=None,
                   help="output directory (default ./inferscope-out) or a single report file (report.md, report.html, report.json)")
    a.add_argument("--format", default=None, help=f"comma-separated: md,json,csv,html,chrome (default {DEFAULT_FORMATS})")
    a.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    a.add_argument("--ncu", default=None, metavar="CSV",
                   help="an `ncu --csv` capture (--page raw or details, .gz ok): adds the kernel deep-dive for the "
                        "trace's kernels of the same names, weighted by their share of GPU time")
    a.add_argument("--print-schema", action="store_true", help="Nsight Systems: print the tables and columns found, then exit")
    a.add_argument("--list-windows", action="store_true", help="print the values --window accepts for this trace, then exit")
    a.add_argument("--replay", action="store_true",
                   help="an .iscope recorded with `run --facts`: re-derive the live sampler's classes from its recorded "
                        "facts with this version's rules, then analyse")
    a.add_argument("--rules", action="store_true",
                   help="with --replay: print how many ms each sampler rule laid as each class")
    _add_analysis_args(a)
    a.set_defaults(func=cmd_analyze)

    e = _sub(sub, "export", "export the merged timeline (Chrome trace-event JSON for Perfetto UI / chrome://tracing)")
    e.add_argument("trace", help="the trace to export (any format analyze reads)")
    e.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the file to write (e.g. timeline.json, or timeline.json.gz for gzip)")
    e.add_argument("--format", default=None, help="chrome (default); md, json, html also work")
    e.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    _add_analysis_args(e)
    e.set_defaults(func=cmd_export)

    sc = _sub(sub, "schema", "print the JSON Schema of report.json (generated from the typed result)")
    sc.set_defaults(func=cmd_schema)
    ru = _sub(sub, "rules", "print the live sampler's classification rules in the order they run (collect/rules.py)")
    ru.set_defaults(func=cmd_rules)

    r = _sub(sub, "run", "run a program under InferScope and write a report", ": inferscope run [opts] -- python app.py ...")
    r.add_argument("--report", default=None, help="report path (default ./report.md, or INFERSCOPE_REPORT_PATH)")
    r.add_argument("--format", default=None,
                   help="comma-separated: md,html,json,csv,chrome (default: the --report file's extension, md for report.md)")
    r.add_argument("--trace", default=None, help="also keep the collected trace here (.iscope)")
    r.add_argument("--facts", action="store_true",
                   help="record what the sampler decided from in the trace (for `analyze --replay`; ~25 MB per busy "
                        "thread-minute, bounded)")
    r.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors (the program's own output passes through)")
    r.add_argument("--metrics-port", default=None, metavar="PORT",
                   help="serve live Prometheus metrics from the program on this port (0: a free port, printed on stderr)")
    r.add_argument("--metrics-host", default=None, metavar="HOST", help="address of the metrics endpoint (default 127.0.0.1)")
    r.add_argument("--ops", action="store_true",
                   help="record torch ops with torch.profiler (op tables; costs host time per op: a launch-bound "
                        "loop runs ~2x slower) instead of CUPTI's GPU records alone (INFERSCOPE_TORCH_PROFILER=on)")
    r.add_argument("--ops-shapes", action="store_true",
                   help="--ops, and each op's input shapes and dtypes (op table shapes, activation bytes, GEMM M/N/K; "
                        "more host time per op: bench/README.md) (INFERSCOPE_TORCH_RECORD_SHAPES=1)")
    r.add_argument("cmd", nargs=argparse.REMAINDER, help="the program and its arguments")
    _add_analysis_args(r)
    r.set_defaults(func=cmd_run, run_options=frozenset(o for a in r._actions for o in a.option_strings if o not in ("-h", "--help")))

    d = _sub(sub, "diff", "compare two runs", ": inferscope diff BEFORE AFTER (traces or report.json files)")
    d.add_argument("before", help="the baseline: a trace or a report.json")
    d.add_argument("after", help="the run compared with it: a trace or a report.json")
    d.add_argument("-o", "--output", default=None, help="output directory (default ./outputs/diff)")
    d.add_argument("--format", default=None, help="comma-separated: md,json,html (default md,json)")
    d.add_argument("--fail-on-regression", type=float, default=None, metavar="PCT",
                   help="exit 1 when the call regressed (beyond noise when known) by more than PCT percent on its basis: "
                        "a time that grew or a throughput (tokens/s, requests/s) that fell")
    d.add_argument("--min-change", type=float, default=None, metavar="PCT",
                   help="smallest change called a regression/improvement (default 10; see thresholds.DIFF_MIN_CHANGE_PCT)")
    d.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    _add_analysis_args(d)
    d.set_defaults(func=cmd_diff)

    sw = _sub(sub, "sweep", "run a program once per parameter value under collection and compare the runs",
              ": inferscope sweep --param batch=1,2,4 -- python app.py --batch-size {batch}")
    sw.add_argument("--param", action="append", required=True, metavar="NAME=V1,V2,...",
                    help="a parameter and its values; {NAME} in the command is replaced (several: Cartesian product)")
    sw.add_argument("--repeat", type=int, default=1, metavar="N", help="runs per value (default 1)")
    sw.add_argument("-o", "--output", default=None, help="output directory (default ./outputs)")
    sw.add_argument("--items-param", default=None, metavar="NAME",
                    help="throughput when the reports have no llm.tokens_per_s: NAME items per run / e2e")
    sw.add_argument("--min-gain", type=float, default=None, metavar="PCT",
                    help="throughput 'stops scaling' below this gain per step (default 10)")
    sw.add_argument("--window", default=None,
                    help="analysis window for every run (see analyze --window; default: the steady state)")
    sw.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    sw.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the program and its arguments")
    sw.set_defaults(func=cmd_sweep)
    return p


def cmd_sweep(args) -> int:
    from .fleet.sweep import cli_sweep  # lazy: only sweep needs it (the CLI starts light)
    return cli_sweep(args)


def cmd_diff(args) -> int:
    from .compare import cli_diff  # lazy: only diff needs it (the CLI starts light)
    return cli_diff(args)


def cmd_run(args) -> int:
    from .run_command import run_command  # lazy: only run needs it (the CLI starts light)
    cmd = list(args.cmd or [])
    if cmd and cmd[0] != "--" and not args.quiet:
        # argparse hands everything after the program's name to the program: say so when it looks like ours
        ours = [a for a in cmd[1:] if a.split("=", 1)[0] in args.run_options]
        if ours:
            print(f"inferscope: hint: {' '.join(ours[:3])} after the program's name goes to the program, not to InferScope; "
                  f"put InferScope's options before the program (inferscope run {ours[0]} ... -- {cmd[0]} ...)",
                  file=sys.stderr)
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
    except BrokenPipeError:
        # the reader went away (`inferscope schema | head`): stop quietly, as command-line tools do;
        # stdout goes to /dev/null so the interpreter's final flush does not raise again
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1
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
