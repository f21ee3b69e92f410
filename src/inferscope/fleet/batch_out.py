"""Table outputs of a multi-input ``inferscope analyze`` (batch.py): ``summary.jsonl`` / ``findings.jsonl`` and,
when pyarrow is installed (extra ``[parquet]``), ``summary.parquet`` / ``findings.parquet`` (one column per share
and LLM headline number, result/headline.py) and ``ranks.parquet`` (one row per rank of each compared job of the
cross-rank section, cross_rank.py; written only when there is one)."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import InferScopeError
from ..result.headline import LLM_COLUMNS, num
from ..result.base import CATEGORIES  # the breakdown's, in its order
from ..util.atomic import atomic_open, atomic_write_text


def write_jsonl(path: Path, rows: list[dict]) -> None:
    try:
        atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in rows))
    except OSError as e:
        raise InferScopeError(f"cannot write {path}: {e.strerror or e}") from None


# a finding's predicted saving (analyze/whatif.py), one column each in findings.jsonl / findings.parquet
SAVING_FIELDS = ("expected_saving_ms", "expected_saving_pct", "saving_low_ms", "saving_high_ms", "saving_model",
                 "expected_saving_request_ms", "expected_tokens_per_s")


def flat_summary(rows: list[dict]) -> list[dict]:
    """summary rows with one column per share and LLM metric (the Parquet layout)."""
    out = []
    for r in rows:
        f = {k: r.get(k) for k in ("source", "report_dir", "error", "format", "window", "e2e_ms", "gpu_idle_pct",
                                   "verdict", "confidence", "rank", "world_size", "rank_source", "job", "straggler")}
        f["devices"] = list(r.get("devices") or [])
        f["top_findings"] = list(r.get("top_findings") or [])
        for c in CATEGORIES:
            f[f"{c}_pct"] = (r.get("shares_pct") or {}).get(c)
        llm = r.get("llm") or {}
        for k in LLM_COLUMNS:
            f[k] = num(llm.get(k))
        out.append(f)
    return out


def write_parquet(path: Path, rows: list[dict], schema) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(rows, schema=schema)
    try:
        with atomic_open(path, "wb") as f:
            pq.write_table(table, f)
    except OSError as e:
        raise InferScopeError(f"cannot write {path}: {e.strerror or e}") from None


def remove_stale(outdir: Path, names: tuple[str, ...]) -> None:
    for n in names:
        try:
            (outdir / n).unlink()
        except FileNotFoundError:
            pass
        except OSError as e:
            raise InferScopeError(f"cannot remove the stale {outdir / n}: {e.strerror or e}") from None


def rank_rows(cr: dict | None) -> list[dict]:
    """One flat row per rank of every compared job (the ranks.parquet layout)."""
    out = []
    for j in (cr or {}).get("jobs", []):
        s = j.get("straggler") or {}
        for r in j.get("ranks") or []:
            f = {"job": j["job"], "rank": r["rank"], "world_size": j.get("world_size"), "rank_source": r.get("rank_source"),
                 "straggler": (r["source"] == s.get("source")) if s else None, "source": r["source"],
                 "report_dir": r.get("report_dir"), "window": r.get("window"), "steps": r["steps"]["n"],
                 "step_median_ms": r["steps"]["median_ms"], "step_p90_ms": r["steps"]["p90_ms"], "e2e_ms": r.get("e2e_ms"),
                 "gpu_idle_pct": r.get("gpu_idle_pct"), "comm_kernel_ms": r.get("comm_kernel_ms"),
                 "comm_exposed_ms": r.get("comm_exposed_ms"), "comm_exposed_pct": r.get("comm_exposed_pct"),
                 "sync_wait_ms": r.get("sync_wait_ms"), "comm_wait_ms": r.get("comm_wait_ms"),
                 "comm_wait_pct": r.get("comm_wait_pct"), "comm_wait_per_step_ms": r.get("comm_wait_per_step_ms"),
                 "last_arrivals": r.get("last_arrivals")}
            for c in CATEGORIES:
                f[f"{c}_pct"] = num((r.get("shares_pct") or {}).get(c))
            out.append(f)
    return out


def parquet_outputs(outdir: Path, rows: list[dict], findings: list[dict], cr: dict | None = None) -> list[Path]:
    """summary.parquet / findings.parquet (and ranks.parquet with a cross-rank section) when pyarrow is
    installed (extra [parquet]); else nothing."""
    try:
        import pyarrow as pa
    except ImportError:
        return []
    s = pa.schema([("source", pa.string()), ("report_dir", pa.string()), ("error", pa.string()), ("format", pa.string()),
                   ("window", pa.string()), ("e2e_ms", pa.float64()), ("gpu_idle_pct", pa.float64()), ("verdict", pa.string()),
                   ("confidence", pa.float64()), ("rank", pa.int64()), ("world_size", pa.int64()), ("rank_source", pa.string()),
                   ("job", pa.string()),
                   ("straggler", pa.bool_()), ("devices", pa.list_(pa.string())), ("top_findings", pa.list_(pa.string()))] +
                  [(f"{c}_pct", pa.float64()) for c in CATEGORIES] +
                  [(k, pa.float64()) for k in LLM_COLUMNS])
    fs = pa.schema([("source", pa.string()), ("id", pa.string()), ("severity", pa.string()), ("title", pa.string()),
                    ("suggestion", pa.string()), ("evidence_json", pa.string())] +
                   [(k, pa.string() if k == "saving_model" else pa.float64()) for k in SAVING_FIELDS])
    frows = [{"source": f["source"], "id": f["id"], "severity": f["severity"], "title": f["title"],
              "suggestion": f["suggestion"], "evidence_json": json.dumps(f.get("evidence"), ensure_ascii=False),
              **{k: f.get(k) for k in SAVING_FIELDS}} for f in findings]
    write_parquet(outdir / "summary.parquet", flat_summary(rows), s)
    write_parquet(outdir / "findings.parquet", frows, fs)
    written = [outdir / "summary.parquet", outdir / "findings.parquet"]
    rr = rank_rows(cr)
    if rr:
        f64, st = pa.float64(), pa.string()
        rs = pa.schema([("job", st), ("rank", pa.int64()), ("world_size", pa.int64()), ("rank_source", st),
                        ("straggler", pa.bool_()), ("source", st), ("report_dir", st), ("window", st), ("steps", pa.int64()),
                        *[(k, f64) for k in ("step_median_ms", "step_p90_ms", "e2e_ms", "gpu_idle_pct", "comm_kernel_ms",
                                             "comm_exposed_ms", "comm_exposed_pct", "sync_wait_ms", "comm_wait_ms",
                                             "comm_wait_pct", "comm_wait_per_step_ms")],
                        ("last_arrivals", pa.int64()),
                        *[(f"{c}_pct", f64) for c in CATEGORIES]])
        write_parquet(outdir / "ranks.parquet", rr, rs)
        written.append(outdir / "ranks.parquet")
    else:
        remove_stale(outdir, ("ranks.parquet",))
    return written
