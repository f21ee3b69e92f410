"""Options every analysis may read (one object, passed down from the CLI or API)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from .. import thresholds
from ..errors import ConfigError
from ..config import alert_thresholds, load_config
from . import cublas_log, model_config
from .option_file import read_bounded


@dataclass
class AnalyzeOptions:
    window: str | None = None                 # None: steady state (or scope() ranges); "all": whole trace
    phase_map: dict[str, list[str]] | None = None   # {"prefill": ["prefill", "prompt"], ...}
    nvtx_kernel_map: bool = True              # NVTX/annotation -> kernel attribution
    nvtx_coverage_warn_threshold: float = thresholds.NVTX_COVERAGE_WARN_THRESHOLD
    top_n: int = 20                           # rows in top-N tables
    alert_thresholds: dict = field(default_factory=dict)   # {thresholds constant: value} from .inferscope.yaml / env
    peak_tflops: float | None = None          # --peak-tflops: MFU denominator (dense TFLOP/s)
    peak_gbps: float | None = None            # --peak-gbps: MBU denominator (GB/s)
    phase_map_file: str | None = None         # the --phase-map file phase_map was read from (named in warnings)
    cublas_log: dict | None = None            # --cublas-log: cublas_log.load's calls, joined to gemm_shapes
    model_config: dict | None = None          # --model-config: model_config.load's model (per-stage MFU without a hook)
    extra: dict = field(default_factory=dict)


_PHASE_MAP_MAX = 1 << 20


def _load_phase_map(path: str | None) -> dict | None:
    if not path:
        return None
    raw = read_bounded("--phase-map", path, _PHASE_MAP_MAX)
    try:
        data = json.loads(raw.decode("utf-8"))
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
    try:   # a "\ud800" escape decodes to a lone surrogate, which no report format can write
        for k, v in data.items():
            k.encode("utf-8")
            for x in v:
                x.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"--phase-map {path}: a phase or pattern with a lone surrogate escape (\\ud800-\\udfff)") from None
    n = sum(len(v) for v in data.values())
    if n > thresholds.PHASE_MAP_MAX_PATTERNS:
        raise ConfigError(f"--phase-map {path}: {n} patterns, more than {thresholds.PHASE_MAP_MAX_PATTERNS} "
                          "(each is searched for in every name of the trace)")
    long = next((p for v in data.values() for p in v if len(p) > thresholds.PHASE_MAP_MAX_PATTERN_CHARS), None)
    if long is not None:
        raise ConfigError(f"--phase-map {path}: a pattern of {len(long)} characters, more than "
                          f"{thresholds.PHASE_MAP_MAX_PATTERN_CHARS} ({long[:40]!r}...)")
    return data


def options_from_args(args) -> "AnalyzeOptions":
    """AnalyzeOptions from the CLI's analysis flags (analyze, export, run)."""
    thr = args.nvtx_coverage_warn_threshold
    if thr is not None and not (0.0 <= thr <= 1.0):
        raise ConfigError("--nvtx-coverage-warn-threshold must be between 0 and 1")
    for flag in ("peak_tflops", "peak_gbps"):
        v = getattr(args, flag, None)
        if v is not None and not (v > 0 and v < 1e7):
            raise ConfigError(f"--{flag.replace('_', '-')} must be a positive number")
    cl = getattr(args, "cublas_log", None)
    mc = getattr(args, "model_config", None)
    return AnalyzeOptions(window=args.window, peak_tflops=getattr(args, "peak_tflops", None),
                          peak_gbps=getattr(args, "peak_gbps", None), phase_map=_load_phase_map(args.phase_map),
                          phase_map_file=args.phase_map,
                          nvtx_kernel_map=not args.no_nvtx_kernel_map,
                          nvtx_coverage_warn_threshold=thresholds.NVTX_COVERAGE_WARN_THRESHOLD if thr is None else thr,
                          alert_thresholds=alert_thresholds(load_config()),
                          cublas_log=cublas_log.load(cl) if cl else None,
                          model_config=model_config.load(mc) if mc else None)


def unmatched_option_warnings(options: "AnalyzeOptions", res: dict) -> list[str]:
    """One line per option that matched nothing in this trace (the analysis still ran without it):
    a --phase-map phase whose patterns match no step/range name in the window (neither in ``phases``
    nor in the NVTX attribution), a START_MS:END_MS window outside the trace.  Each names the option
    and its value; the CLI also prints them on stderr."""
    out = []
    pm = options.phase_map or {}
    if pm:
        matched = {r["phase"] for r in (res.get("phases") or {}).get("phases") or []}
        matched |= {ph for ph, v in ((res.get("nvtx") or {}).get("phases") or {}).items() if v.get("ranges")}
        missed = [ph for ph in pm if ph not in matched]
        if missed:
            src = f"--phase-map {options.phase_map_file}" if options.phase_map_file else "phase_map"
            pats = "; ".join(f"{ph}: {', '.join(repr(p) for p in pm[ph][:5]) or 'no pattern'}" for ph in missed[:10])
            what = "matched nothing" if len(missed) == len(pm) else f"phase(s) {', '.join(missed[:10])} matched nothing"
            out.append(f"{src}: {what}: no step or range name in the window contains a pattern as whole words ({pats})")
    w = res.get("window") or {}
    if w.get("kind") == "time" and not w.get("dur_ms"):
        out.append(f"--window {options.window}: matched nothing: the range lies outside the trace (empty window)")
    return out
