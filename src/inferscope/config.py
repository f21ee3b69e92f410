"""Configuration: CLI flags > environment (INFERSCOPE_*) > .inferscope.yaml > defaults.

Keys (seed 001): enabled, log_level, trace_size_mb, sync_error_margin_us, report_format,
report_path, cuda_version, cpu_sampling_frequency_hz.  InferScope additions:
system_sampling_hz, torch_profiler (auto|on|off), torch_record_shapes, cupti, flush_interval_s, perf_ip_sampling, offcpu_probe, gc_pauses.
A bad value raises ConfigError (one line; the CLI exits 2).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from .errors import ConfigError

CONFIG_FILE = ".inferscope.yaml"

ENV = {
    "enabled": "INFERSCOPE_ENABLED",
    "trace_size_mb": "INFERSCOPE_TRACE_SIZE_MB",
    "log_level": "INFERSCOPE_LOG_LEVEL",
    "sync_error_margin_us": "INFERSCOPE_SYNC_ERROR_MARGIN_US",
    "report_format": "INFERSCOPE_REPORT_FORMAT",
    "report_path": "INFERSCOPE_REPORT_PATH",
    "cuda_version": "INFERSCOPE_CUDA_VERSION",
    "cpu_sampling_frequency_hz": "INFERSCOPE_CPU_SAMPLING_FREQUENCY_HZ",
    "system_sampling_hz": "INFERSCOPE_SYSTEM_SAMPLING_HZ",
    "torch_profiler": "INFERSCOPE_TORCH_PROFILER",
    "torch_record_shapes": "INFERSCOPE_TORCH_RECORD_SHAPES",
    "cupti": "INFERSCOPE_CUPTI",
    "flush_interval_s": "INFERSCOPE_FLUSH_INTERVAL_S",
    "perf_ip_sampling": "INFERSCOPE_PERF_IP_SAMPLING",
    "offcpu_probe": "INFERSCOPE_OFFCPU_PROBE",
    "gc_pauses": "INFERSCOPE_GC_PAUSES",
    "follow_children": "INFERSCOPE_FOLLOW_CHILDREN",
    "max_decompressed_mb": "INFERSCOPE_MAX_DECOMPRESSED_MB",
    "metrics_port": "INFERSCOPE_METRICS_PORT",
    "gpu_util_low_pct": "INFERSCOPE_GPU_UTIL_LOW_PCT",
    "gpu_util_high_pct": "INFERSCOPE_GPU_UTIL_HIGH_PCT",
    "gpu_memory_warn_pct": "INFERSCOPE_GPU_MEMORY_WARN_PCT",
    "gpu_memory_critical_pct": "INFERSCOPE_GPU_MEMORY_CRITICAL_PCT",
    "gpu_temp_warn_c": "INFERSCOPE_GPU_TEMP_WARN_C",
    "gpu_temp_critical_c": "INFERSCOPE_GPU_TEMP_CRITICAL_C",
    "metrics_host": "INFERSCOPE_METRICS_HOST",
}
# config key -> thresholds.py constant it overrides (counter findings)
ALERT_KEYS = {"gpu_util_low_pct": "GPU_UTIL_LOW_PCT", "gpu_util_high_pct": "GPU_UTIL_HIGH_PCT",
              "gpu_memory_warn_pct": "GPU_MEMORY_WARN_PCT", "gpu_memory_critical_pct": "GPU_MEMORY_CRITICAL_PCT",
              "gpu_temp_warn_c": "GPU_TEMP_WARN_C", "gpu_temp_critical_c": "GPU_TEMP_CRITICAL_C"}


def alert_thresholds(cfg: "Config") -> dict:
    """{thresholds constant: value} for the alert levels the configuration sets."""
    return {const: float(getattr(cfg, key)) for key, const in ALERT_KEYS.items() if getattr(cfg, key) is not None}


LOG_LEVELS = ("debug", "info", "warn", "warning", "error")
REPORT_FORMATS = {"markdown": "md", "md": "md", "html": "html", "htm": "html", "json": "json",
                  "csv": "csv", "chrome": "chrome"}


@dataclass
class Config:
    enabled: bool = True
    log_level: str = "info"
    trace_size_mb: float = 100.0
    sync_error_margin_us: float = 1000.0
    report_format: str | None = None       # None: from the report path's extension, else markdown
    report_path: str = "report.md"
    cuda_version: str | None = None        # expected CUDA release: warns when torch's build differs
    # measured (bench/README.md, bench_sampler.py): each tick makes the sampler wait for the GIL,
    # which op-heavy code pays for on every GIL release; 500 Hz cost +6-9 % on generate()/tiny ops
    cpu_sampling_frequency_hz: float = 200.0
    system_sampling_hz: float = 20.0
    # auto: on when the workload imports torch, CUDA is available and CUPTI (below) is not used;
    # on: always (torch op tables; records every op on the host: 2.6x on a launch-bound loop)
    torch_profiler: str = "auto"
    # with the torch profiler on: record each op's input shapes and dtypes (op table shapes, activation bytes,
    # GEMM M/N/K of live runs); more host time per op (bench/README.md, bench_overhead.py mode ops+shapes)
    torch_record_shapes: bool = False
    cupti: bool = True                     # GPU activity from CUPTI (cupti-python) when CUDA is used (collect/gpu_activity.py)
    flush_interval_s: float = 2.0
    perf_ip_sampling: bool = True          # perf_event IP samples decide cpu_compute vs framework (Linux)
    offcpu_probe: bool = True              # name the syscall/file/frame off-CPU threads block in (collect/blocking.py)
    gc_pauses: bool = True                 # record Python garbage-collection pauses (collect/gcpauses.py)
    follow_children: bool = True           # `inferscope run` samples Python child processes too (collect/bootstrap.py)
    # cap on decompressed input (.json.gz, .iscope members); None: 50x the compressed size,
    # at least 64 MB, at most 4096 MB (util/decompress.py decompress_limit)
    max_decompressed_mb: float | None = None
    metrics_port: int = -1                 # Prometheus /metrics endpoint in the profiled process; -1 off, 0 a free port
    metrics_host: str = "127.0.0.1"
    # counter alert levels for the findings; None = thresholds.py (seed 002's table)
    gpu_util_low_pct: float | None = None
    gpu_util_high_pct: float | None = None
    gpu_memory_warn_pct: float | None = None
    gpu_memory_critical_pct: float | None = None
    gpu_temp_warn_c: float | None = None
    gpu_temp_critical_c: float | None = None
    sources: dict | None = None            # key -> "flag" | "env" | "file" | "default"

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "Config":
        d = json.loads(text)
        return cls(**{k: v for k, v in d.items() if k in {f.name for f in fields(cls)}})


def _bool(v, where):
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{where}: expected a boolean (1/0, true/false), got {v!r}")


def _num(v, where, lo=None, hi=None, positive=False):
    if isinstance(v, bool):
        raise ConfigError(f"{where}: expected a number, got {v!r}")
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected a number, got {v!r}") from None
    if x != x or (lo is not None and x < lo) or (hi is not None and x > hi) or (positive and x <= 0):
        rng = f" between {lo:g} and {hi:g}" if lo is not None and hi is not None else (f" >= {lo:g}" if lo is not None else "")
        if positive and (lo is None or lo <= 0):
            rng = f" > 0 and <= {hi:g}" if hi is not None else " > 0"
        raise ConfigError(f"{where}: expected a number{rng}, got {v!r}")
    return x


def _validate(key: str, v, where: str):
    if key == "enabled":
        return _bool(v, where)
    if key == "log_level":
        s = str(v).strip().lower()
        if s not in LOG_LEVELS:
            raise ConfigError(f"{where}: log level must be one of debug, info, warn, error; got {v!r}")
        return s
    if key == "trace_size_mb":
        return _num(v, where, 0.001, 1_000_000)
    if key == "sync_error_margin_us":
        return _num(v, where, 0, 1e9)
    if key == "cpu_sampling_frequency_hz":   # 0 would stop the sampler's clock: refused
        return _num(v, where, 0, 10_000, positive=True)
    if key == "max_decompressed_mb":
        return _num(v, where, 0, 1 << 20, positive=True)
    if key == "system_sampling_hz":
        return _num(v, where, 0, 1000)
    if key in ("perf_ip_sampling", "follow_children", "offcpu_probe", "cupti", "gc_pauses", "torch_record_shapes"):
        return _bool(v, where)
    if key == "flush_interval_s":
        return _num(v, where, 0.1, 3600)
    if key == "metrics_port":
        if str(v).strip().lower() in ("off", "none", ""):
            return -1
        x = _num(v, where, -1, 65535)
        if x != int(x):
            raise ConfigError(f"{where}: a port must be an integer, got {v!r}")
        return int(x)
    if key in ALERT_KEYS:
        return None if v is None else _num(v, where, 0, 1000)
    if key == "metrics_host":
        s = str(v).strip()
        if not s or any(c.isspace() for c in s):
            raise ConfigError(f"{where}: bad metrics host {v!r}")
        return s
    if key == "report_format":
        out = []
        for part in str(v).split(","):
            p = part.strip().lower()
            if not p:
                continue
            if p not in REPORT_FORMATS:
                raise ConfigError(f"{where}: report format must be markdown, html, json (or csv, chrome); got {part.strip()!r}")
            out.append(REPORT_FORMATS[p])
        if not out:
            raise ConfigError(f"{where}: empty report format")
        return ",".join(out)
    if key == "report_path":
        s = str(v).strip()
        if not s:
            raise ConfigError(f"{where}: empty report path")
        return s
    if key == "cuda_version":
        return None if v is None else str(v)
    if key == "torch_profiler":
        s = str(v).strip().lower()
        s = {"1": "on", "true": "on", "yes": "on", "0": "off", "false": "off", "no": "off"}.get(s, s)
        if s not in ("auto", "on", "off"):
            raise ConfigError(f"{where}: torch_profiler must be auto, on or off; got {v!r}")
        return s
    raise ConfigError(f"{where}: unknown configuration key {key!r}")


def read_file(path: Path) -> dict:
    try:
        import yaml
    except ImportError:  # PyYAML is a core dependency; be explicit if it is missing
        raise ConfigError(f"{path}: PyYAML is needed to read it (pip install PyYAML)") from None
    try:
        if path.stat().st_size > (1 << 20):
            raise ConfigError(f"{path}: larger than 1 MB, not an InferScope configuration")
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (bad byte at offset {e.start})") from None
    try:
        data = yaml.safe_load(text)
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigError(f"{path}: not valid YAML{where}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys to values")
    known = {f.name for f in fields(Config)} - {"sources"}
    unknown = sorted(str(k)[:60] for k in data if not isinstance(k, str) or k not in known)
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
    # every key takes one value: a list or mapping is refused before anything turns it into text,
    # since YAML aliases make a 300-byte file a 9**9-element list (str() of it would never end, issue 44)
    for k, v in data.items():
        if not isinstance(v, (str, int, float, bool, type(None))):
            raise ConfigError(f"{path}: {k}: expected a single value, got a {type(v).__name__}")
    return data


def find_config_file(cwd: str | os.PathLike | None = None) -> Path | None:
    explicit = os.environ.get("INFERSCOPE_CONFIG")
    if explicit:
        p = Path(explicit)
        if not p.is_file():
            raise ConfigError(f"INFERSCOPE_CONFIG={explicit}: no such file")
        return p
    p = Path(cwd or os.getcwd()) / CONFIG_FILE
    return p if p.is_file() else None


def load_config(flags: dict | None = None, env: dict | None = None, cwd=None, use_file: bool = True) -> Config:
    """Resolve the configuration.  ``flags``: {key: value} from the CLI (None values ignored)."""
    env = os.environ if env is None else env
    cfg = Config()
    sources = {f.name: "default" for f in fields(Config) if f.name != "sources"}
    if use_file:
        path = find_config_file(cwd)
        if path is not None:
            for k, v in read_file(path).items():
                setattr(cfg, k, _validate(k, v, f"{path}: {k}"))
                sources[k] = "file"
    for k, var in ENV.items():
        v = env.get(var)
        if v is not None and v != "":
            setattr(cfg, k, _validate(k, v, var))
            sources[k] = "env"
    for k, v in (flags or {}).items():
        if v is None:
            continue
        setattr(cfg, k, _validate(k, v, f"--{k.replace('_', '-')}"))
        sources[k] = "flag"
    cfg.sources = sources
    return cfg
