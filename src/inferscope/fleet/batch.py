"""``inferscope analyze`` over many inputs: several files, folders or globs.

One report folder per input (the usual md/json/csv/... files) plus, in the output folder,
``summary.jsonl`` (one row per trace and window) and ``findings.jsonl`` (one row per finding), and
the same as ``summary.parquet`` / ``findings.parquet`` (one column per share) when pyarrow is
installed (extra ``[parquet]``), with ``ranks.parquet`` when there is a cross-rank section (batch_out.py).
``--jobs N`` analyses N inputs at a time in worker processes (batch_pool.py); each worker holds one trace at a
time and is replaced after a few inputs, so memory is bounded by N traces.  A bad input is one
row with its one-line error (the others still run); the command then exits 2.  A worker that dies
mid-input (killed, out of memory) has its input retried once in a fresh worker, then that input is an
error row; the other inputs complete.
``--engine ray`` runs the same ``analyze_one`` per input as Ray tasks (extra ``[ray]``, imported only
then): ``--address`` goes to ``ray.init`` (default: start a local instance), at most ``RAY_IN_FLIGHT_PER_CPU``
tasks per cluster CPU are submitted at a time and results are collected with ``ray.wait`` as they finish,
so the driver never holds more than that window of pending tasks.  Inputs and ``-o`` must be paths every
node sees (a shared file system): the tasks read the inputs and write the report folders where they run.
"""
from __future__ import annotations

import glob
import os
import re
import socket
import sys
from pathlib import Path

from .batch_out import SAVING_FIELDS
from .batch_pool import KILL_ENV, fault_seam, run_local
from ..errors import ConfigError, InferScopeError, InputError
from ..result.headline import llm_headline
from ..analyze.options import options_from_args
from ..analyze.window import window_from_report
from ..app import report
from ..ingest import load_trace
from ..outputs import DEFAULT_DIR, resolve_outputs
from ..report.cross_rank import write as write_cross_rank
from ..report.markdown import plain
from .batch_out import parquet_outputs, remove_stale, write_jsonl
from .cross_rank import cross_rank, rank_of, rank_profile, row_fields, used_devices
from .cross_rank_comm import collective_steps

TRACE_SUFFIXES = (".json", ".json.gz", ".gz", ".sqlite", ".iscope")
SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2, "info": 3}
MAX_TASKS_PER_CHILD = 4
ENGINES = ("local", "ray")
RAY_IN_FLIGHT_PER_CPU = 2   # pending Ray tasks per cluster CPU: enough to keep every CPU busy between waits
RAY_CONNECT_TIMEOUT_S = 10  # TCP probe of --address HOST:PORT; ray.init itself retries an unreachable GCS for minutes


def is_many(inputs: list[str]) -> bool:
    """True when the analyze arguments name more than one trace (several paths, a folder, a glob)."""
    if len(inputs) != 1:
        return True
    p = inputs[0]
    return Path(p).is_dir() or (not Path(p).exists() and glob.has_magic(p))


def expand(inputs: list[str]) -> list[Path]:
    out: list[Path] = []
    for a in inputs:
        p = Path(a)
        if p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.is_file() and q.name.lower().endswith(TRACE_SUFFIXES)
                           and not q.name.startswith("."))
            if not found:
                raise InputError(f"{a}: no trace files in this folder ({', '.join(TRACE_SUFFIXES)})")
            out += found
        elif p.exists():
            out.append(p)
        elif glob.has_magic(a):
            found = sorted(Path(x) for x in glob.glob(a, recursive=True) if Path(x).is_file())
            if not found:
                raise InputError(f"{a}: no file matches")
            out += found
        else:
            raise InputError(f"{a}: no such file")
    seen, uniq = set(), []
    for p in out:
        k = os.path.realpath(p)
        if k not in seen:
            seen.add(k)
            uniq.append(p)
    return uniq


def _folder_names(paths: list[Path]) -> list[str]:
    names, used = [], set()
    for p in paths:
        stem = p.name
        for suf in (".gz", ".json", ".sqlite", ".iscope", ".pt.trace", ".trace"):
            if stem.lower().endswith(suf):
                stem = stem[: -len(suf)]
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", stem)[:100].strip(".") or "trace"
        name, k = base, 2
        while name in used:
            name, k = f"{base}_{k}", k + 1
        used.add(name)
        names.append(name)
    return names


def summary_row(src: Path, result: dict, report_dir: str) -> dict:
    """One row per input; ``job``/``straggler`` are filled in from the cross-rank section (cross_rank.py)."""
    g = result.get("gpu") or {}
    rank, world_size, rank_source = rank_of(result, os.path.abspath(src))   # abspath: the same on every engine
    findings = sorted(result.get("findings") or [], key=lambda f: SEVERITY_ORDER.get(f.get("severity"), 9))
    return {"source": str(src), "report_dir": report_dir, "error": None,
            "format": (result.get("source") or {}).get("format"),
            "devices": used_devices(result),     # the ones its GPU work ran on (else the trace's list)
            "window": (result.get("window") or {}).get("label"), "e2e_ms": result.get("e2e_ms"),
            "shares_pct": {c["category"]: c["pct"] for c in result.get("breakdown") or []},
            "gpu_idle_pct": g.get("idle_pct") if g else None,
            "verdict": (result.get("verdict") or {}).get("id"), "confidence": (result.get("verdict") or {}).get("confidence"),
            "top_findings": [f["id"] for f in findings[:5]], "llm": llm_headline(result),
            "rank": rank, "world_size": world_size, "rank_source": rank_source, "job": None, "straggler": None}


def finding_rows(src: Path, result: dict) -> list[dict]:
    """One row per finding, with its predicted saving (null where the finding has no prediction)."""
    return [{"source": str(src), "id": f.get("id"), "severity": f.get("severity"), "title": f.get("title"),
             "evidence": f.get("evidence"), "suggestion": f.get("suggestion"),
             **{k: f.get(k) for k in SAVING_FIELDS}} for f in result.get("findings") or []]


def _without_path(msg: str, src: str) -> str:
    """An importer's message starts with the path it read; the batch lines name the input already."""
    for p in dict.fromkeys((str(src), os.path.abspath(src))):
        if msg.startswith(p + ": "):
            return msg[len(p) + 2:]
    return msg


def analyze_one(src: str, outdir: str, folder: str, output_formats: str | None, options) -> tuple[dict, list[dict], dict | None]:
    """Worker: load, analyse, write one input's report folder; its summary row, finding rows and, when the
    trace names its rank, the few KB the cross-rank comparison reads (cross_rank.rank_profile)."""
    rdir = Path(outdir) / folder
    try:
        trace = load_trace(src)
        if KILL_ENV in os.environ:   # test seam only (batch_pool.py): a worker killed mid-trace
            fault_seam(src)
        result = report(trace, options, resolve_outputs(str(rdir), output_formats)).result
    except InferScopeError as e:
        return {"source": src, "report_dir": None, "error": _without_path(str(e).splitlines()[0] if str(e) else type(e).__name__, src)}, [], None
    except MemoryError:
        return {"source": src, "report_dir": None, "error": "out of memory while processing the trace"}, [], None
    except Exception as e:  # a bug on one input must not lose the others
        return {"source": src, "report_dir": None, "error": f"internal error: {type(e).__name__}: {' '.join(str(e).split())[:300]}"}, [], None
    prof = rank_profile(result, os.path.abspath(src))
    if prof is not None:   # the collectives' offsets per step need the trace, not only the report
        prof["collectives"] = collective_steps(trace, window_from_report(result.get("window")))
    return summary_row(Path(src), result, folder), finding_rows(Path(src), result), prof


def _probe(address: str) -> None:
    """One-line error, fast, when --address HOST:PORT does not accept connections ('auto' is Ray's to resolve)."""
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if address == "auto" or not sep:
        return
    if not port.isdigit():
        raise ConfigError(f"--address {address}: expected 'auto', HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise ConfigError(f"cannot connect to Ray at {address}: {e.strerror or e}") from None


def _ray_init(address: str | None, jobs: int):
    """Import Ray and connect (``address``) or start a local instance: (the ray module, whether this call
    started it and so must shut it down)."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--engine ray needs Ray: pip install 'inferscope[ray]'") from None
    if ray.is_initialized():
        return ray, False
    kw: dict = {"log_to_driver": False, "logging_level": "error"}
    if address:
        _probe(address)
        kw["address"] = address
    else:
        kw["include_dashboard"] = False
        if jobs > 1:
            kw["num_cpus"] = jobs
    try:
        ray.init(**kw)
    except Exception as e:   # ConnectionError, RuntimeError, ValueError... depending on the Ray version
        where = f"at {address}" if address else "(local instance)"
        hint = " (a cluster with token authentication also needs RAY_AUTH_MODE=token here)" if address else ""
        raise ConfigError(f"cannot start or connect to Ray {where}: {type(e).__name__}: "
                          f"{' '.join(str(e).split())[:200]}{hint}") from None
    return ray, True


def _run_ray(tasks: list[tuple], results: list, address: str | None, jobs: int, progress) -> None:
    ray, started = _ray_init(address, jobs)
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1) or 1)
        window = max(jobs, RAY_IN_FLIGHT_PER_CPU * cpus, 1)
        remote = ray.remote(num_cpus=1, max_retries=1)(analyze_one)
        pending: dict = {}
        nxt = done = 0
        while nxt < len(tasks) or pending:
            while nxt < len(tasks) and len(pending) < window:
                src, outdir, *rest = tasks[nxt]   # absolute: a task's working directory is Ray's, not ours
                pending[remote.remote(os.path.abspath(src), os.path.abspath(outdir), *rest)] = nxt
                nxt += 1
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                i = pending.pop(ref)
                try:
                    results[i] = ray.get(ref)
                except Exception as e:   # the task's worker died (OOM kill, node lost): that input's row
                    results[i] = ({"source": tasks[i][0], "report_dir": None,
                                   "error": f"ray task failed: {type(e).__name__}: {' '.join(str(e).split())[:200]}"}, [], None)
                for r in (results[i][0], *results[i][1]):   # the rows name the input as given, as locally
                    r["source"] = tasks[i][0]
                done += 1
                if progress:
                    progress(done, len(tasks), tasks[i][0], results[i][0])
    finally:
        if started:
            ray.shutdown()


def analyze_many(inputs: list[str], outdir: str, output_formats: str | None, options, jobs: int = 1,
                 progress=None, engine: str = "local", address: str | None = None) -> tuple[list[dict], list[dict], list]:
    """Summary rows and finding rows (input order), and the rank profiles (None for a trace without a rank)."""
    if jobs < 1:
        raise ConfigError("--jobs must be >= 1")
    if engine not in ENGINES:
        raise ConfigError(f"--engine {engine}: expected one of {', '.join(ENGINES)}")
    if address and engine != "ray":
        raise ConfigError("--address applies to --engine ray")
    paths = expand(inputs)
    names = _folder_names(paths)
    tasks = [(str(p), outdir, n, output_formats, options) for p, n in zip(paths, names)]
    results: list = [None] * len(tasks)
    if engine == "ray":
        _run_ray(tasks, results, address, jobs, progress)
    elif jobs == 1 or len(tasks) == 1:
        for i, t in enumerate(tasks):
            results[i] = analyze_one(*t)
            if progress:
                progress(i + 1, len(tasks), t[0], results[i][0])
    else:   # a worker killed mid-input is seen at once; its input is retried once, then an error row (batch_pool.py)
        run_local(analyze_one, tasks, results, min(jobs, len(tasks)), MAX_TASKS_PER_CHILD, progress)
    rows = [r[0] for r in results]
    findings = [f for r in results for f in r[1]]
    return rows, findings, [r[2] for r in results]


def cli_analyze_many(args) -> int:
    outdir = args.output or DEFAULT_DIR
    if args.jobs is None or args.jobs < 1:
        raise ConfigError("--jobs must be >= 1")
    if Path(outdir).suffix.lower() in (".md", ".json", ".html", ".csv") and not Path(outdir).is_dir():
        raise ConfigError(f"-o {outdir}: with several inputs, -o is a folder (one report folder per input inside)")
    opts = options_from_args(args)
    say = None
    if not args.quiet:
        def say(k, n, src, row):
            # an error is printed once, with the others at the end (the progress line only says which input failed)
            status = "failed (error below)" if row.get("error") else f"{row.get('verdict')}"
            print(plain(f"[{k}/{n}] {src}: {status}", 400), file=sys.stderr, flush=True)
    rows, findings, profiles = analyze_many(list(args.trace), outdir, args.format, opts, args.jobs, say,
                                            engine=getattr(args, "engine", "local"), address=getattr(args, "address", None))
    cr = cross_rank([{"source": r["source"], "report_dir": r["report_dir"], "profile": p}
                     for r, p in zip(rows, profiles) if p], group_by=getattr(args, "group_by", "auto"))
    by_src = row_fields(cr)
    gb = getattr(args, "group_by", "auto")
    if gb != "auto" and not (cr or {}).get("jobs") and not args.quiet:
        ranked = sum(1 for p in profiles if p)
        print(f"inferscope: warning: --group-by {gb} grouped nothing: inputs with a rank: {ranked} of {len(rows)}"
              + (" and no two of them share a folder" if gb == "folder" and ranked >= 2 else "")
              + "; no cross-rank section written", file=sys.stderr)
    # the straggler finding is the job's (cross_rank.json); findings.jsonl/parquet also list it under the
    # straggler's input, so a fleet query over findings (or joined with ranks.parquet) sees it
    findings += [{k: f.get(k) for k in ("source", "id", "severity", "title", "evidence", "suggestion", *SAVING_FIELDS)}
                 for f in (cr or {}).get("findings", [])]
    for r in rows:
        if r["source"] in by_src:
            r.update(by_src[r["source"]])
    write_jsonl(Path(outdir) / "summary.jsonl", rows)
    write_jsonl(Path(outdir) / "findings.jsonl", findings)
    extra = parquet_outputs(Path(outdir), rows, findings, cr)
    if cr:
        extra += write_cross_rank(Path(outdir), cr)
    else:   # a previous run's section in this folder is not this run's
        remove_stale(Path(outdir), ("cross_rank.json", "cross_rank.md", "ranks.parquet"))
    bad = [r for r in rows if r.get("error")]
    if not args.quiet:
        print(f"analysed {len(rows) - len(bad)} of {len(rows)} inputs")
        for p in [Path(outdir) / "summary.jsonl", Path(outdir) / "findings.jsonl", *extra]:
            print(f"wrote {p}")
    if bad:
        for r in bad:
            print(plain(f"inferscope: error: {r['source']}: {r['error']}", 400), file=sys.stderr)
        return 2
    return 0
