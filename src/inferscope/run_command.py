"""Parent side of ``inferscope run [--report PATH] [--format F] [--trace PATH] -- CMD ...``.

Spawns CMD with INFERSCOPE_ENABLED=1, INFERSCOPE_TRACE_OUT=<trace file>, the resolved
configuration (INFERSCOPE_CONFIG_JSON) and a PYTHONPATH whose first entry holds InferScope's
sitecustomize.py (chaining to any existing one), so a Python child collects without code
changes.  stdin/stdout/stderr pass through; the child's exit code is returned (128+N for a
signal N).  When the child ends the parent loads the trace, analyses it and writes the report,
also after an exception, sys.exit(n), Ctrl-C or SIGKILL (then rebuilt from the child's crash
journal, journal.py).  This module checks the command and its outputs and drives the run; the child's
environment, spawn and wait are in run_child.py, the report after it exits in run_report.py.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from .analyze.options import options_from_args
from .collect.nvml import count_visible_gpus
from .collect.session import multi_gpu_message
from .outputs import output_folder, resolve_outputs
from .report.writer import refuse_overwriting_inputs
from . import log
from .config import load_config
from .errors import ConfigError, InferScopeError
from .collect import journal
from .run_child import child_env, exit_code, spawn_and_wait
from .run_report import report_run


def run_command(args) -> int:
    cmd = list(args.cmd or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise ConfigError("run: no command given (usage: inferscope run [--report PATH] -- python app.py ARGS...)")
    cfg = load_config(flags={"report_path": getattr(args, "report", None),
                             "report_format": getattr(args, "format", None),
                             "metrics_port": getattr(args, "metrics_port", None),
                             "metrics_host": getattr(args, "metrics_host", None),
                             "torch_profiler": "on" if getattr(args, "ops", False) or getattr(args, "ops_shapes", False) else None,
                             "torch_record_shapes": True if getattr(args, "ops_shapes", False) else None})
    if getattr(args, "quiet", False):
        cfg.log_level = "error"   # the child's InferScope logs too (it reads the config from the parent)
    log.set_level(cfg.log_level)
    if not cfg.enabled:
        log.info("collection disabled (INFERSCOPE_ENABLED=0 / enabled: false): running the program unprofiled")
        env = dict(os.environ)
        return exit_code(spawn_and_wait(cmd, env))
    n = count_visible_gpus()
    if n is not None and n > 1:
        raise InferScopeError(multi_gpu_message(n))
    opts = options_from_args(args)
    outputs = resolve_outputs(cfg.report_path, cfg.report_format)
    outdir = output_folder(cfg.report_path, outputs)
    keep = getattr(args, "trace", None)
    if keep:
        refuse_overwriting_inputs(outputs, [Path(keep)])   # the report must not replace the kept trace
        if os.path.isdir(keep):
            raise ConfigError(f"--trace {keep}: is a directory (give a file path, e.g. run.iscope)")
        try:
            Path(os.path.abspath(keep)).parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"--trace {keep}: cannot create its folder ({e.strerror or e})") from None
    check_writable(outputs + ([("iscope", Path(os.path.abspath(keep)))] if keep else []))
    tmpdir = tempfile.mkdtemp(prefix="inferscope-run-")
    trace_path = os.path.abspath(keep) if keep else os.path.join(tmpdir, "trace.iscope")
    try:
        if keep:
            for p in (trace_path, trace_path + ".claim", journal.path_for(trace_path)):
                try:
                    if os.path.lexists(p):
                        os.unlink(p)
                except OSError as e:
                    raise ConfigError(f"--trace {keep}: cannot replace {p} ({e.strerror or e})") from None
        env = child_env(trace_path, cfg)
        if getattr(args, "facts", False):
            env["INFERSCOPE_FACTS"] = "1"      # the sampler records its decisions' inputs (collect/facts.py)
        t0 = time.perf_counter()
        rc = spawn_and_wait(cmd, env, prewarm=PREWARM + [
            m for m in (_renderer_module(f) for f, _ in outputs) if m])
        wall_ms = (time.perf_counter() - t0) * 1e3
        return report_run(rc, cmd, trace_path, outputs, opts, args, wall_ms, keep, outdir)
    finally:
        try:
            os.unlink(trace_path + ".claim")
        except OSError:
            pass
        shutil.rmtree(tmpdir, ignore_errors=True)


def check_writable(paths: list[tuple[str, Path]]) -> None:
    """ConfigError (one line, exit 2) when a report or trace path cannot be written, before the program runs: its
    run would otherwise end with no report.  Each folder is created (as writing it would) and a probe file made
    and removed in it."""
    for folder in dict.fromkeys(p.parent for _f, p in paths):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(prefix=".inferscope-probe-", dir=folder)
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            raise ConfigError(f"run: cannot write the report or trace in {folder} ({e.strerror or e})") from None
    for fmt, p in paths:
        if fmt != "csv" and p.is_dir():          # (csv writes a folder of tables)
            raise ConfigError(f"run: cannot write {p}: it is a folder")


# what the parent needs once the child exits: trace loading, the analyses, the renderers
PREWARM = ["numpy", "inferscope.trace.native", "inferscope.analyze.pipeline"]


def _renderer_module(fmt: str) -> str | None:
    from .report import RENDERERS  # lazy: `inferscope run`'s parent loads it after the child exits
    r = RENDERERS.get(fmt)
    return r[0] if r else None
