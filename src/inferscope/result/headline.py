"""The few headline numbers of one report as flat scalars: the one definition shared by the batch summary
(``summary.jsonl`` / ``summary.parquet``, batch.py) and ``inferscope sweep`` (sweep.py).

LLM columns, from the report's ``llm`` section (analyze/llm.py): ``ttft_ms`` / ``tpot_ms`` are the MEAN over
the requests (tokens) in the window (``llm.ttft_ms.mean``: percentiles are null with fewer than 2 samples,
the mean is not), ``*_p90_ms`` their 90th percentiles, ``tokens_per_s`` the GENERATED tokens (x batch) per
window second (``llm.tokens_per_s.generated``), ``prompt_tokens_per_s`` the prompt tokens per window second.
A serving trace (vLLM/SGLang step annotations, no request ranges) has tokens/s DERIVED from its steps' names
(``llm.token_count_basis``; analyze/llm_tokens.py) and null TTFT/TPOT/requests/s.  All null when the report has no
llm section, or neither requests nor serving steps in its window.
"""
from __future__ import annotations

import math

LLM_COLUMNS = ("ttft_ms", "ttft_p90_ms", "tpot_ms", "tpot_p90_ms", "tokens_per_s", "prompt_tokens_per_s",
               "requests_per_s")
_PATHS = {"ttft_ms": ("ttft_ms", "mean"), "ttft_p90_ms": ("ttft_ms", "p90"), "tpot_ms": ("tpot_ms", "mean"),
          "tpot_p90_ms": ("tpot_ms", "p90"), "tokens_per_s": ("tokens_per_s", "generated"),
          "prompt_tokens_per_s": ("tokens_per_s", "prompt"), "requests_per_s": ("requests_per_s",)}


def num(v) -> float | None:
    """A finite number as float, else None (bools are not numbers here)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def llm_headline(result: dict) -> dict[str, float | None] | None:
    """{column: value} for ``LLM_COLUMNS``; None when the report has no llm section."""
    llm = result.get("llm") if isinstance(result, dict) else None
    if not isinstance(llm, dict):
        return None
    out: dict[str, float | None] = {}
    for col, path in _PATHS.items():
        v = llm
        for k in path:
            v = v.get(k) if isinstance(v, dict) else None
        out[col] = num(v)
    return out


# ------------------------------------------------------------------------------------------------
# The report headline's thread figures (report.md / report.html headline, finding cpu_run_queue): one function
# per figure, read from the threads table (report.json ``threads.threads``) so the headline cannot disagree with it.
# ------------------------------------------------------------------------------------------------
def thread_busy_ms(row: dict) -> float:
    """A thread's busy time: sampled on-CPU time where sampled, else recorded minus waiting (off-CPU) time."""
    return _busy_ms(num(row.get("on_cpu_ms")), row["recorded_ms"], row["waiting_ms"])


def _busy_ms(on_cpu_ms, recorded_ms, waiting_ms) -> float:
    return on_cpu_ms if on_cpu_ms is not None else float(recorded_ms) - float(waiting_ms)


def busiest_other_thread(result: dict) -> tuple[int, dict] | None:
    """(index into ``threads.threads``, row) of the non-critical thread with the most busy time
    (``thread_busy_ms``; the first in table order on a tie); None without one."""
    rows = ((result.get("threads") or {}).get("threads")) or []
    i = _busiest([(r.get("critical"), thread_busy_ms(r)) for r in rows])
    return None if i is None else (i, rows[i])


def _busiest(rows) -> int | None:
    """Index of the first non-critical row with the most busy time among (critical, busy_ms) pairs."""
    best = None
    for i, (critical, busy) in enumerate(rows):
        if not critical and (best is None or busy > rows[best][1]):
            best = i
    return best


def thread_figures(row: dict) -> dict[str, float | None]:
    """The figures the headline states for one thread, straight from its table row: recorded, on-CPU (sampled),
    run queue (sampled: runnable, waiting for a CPU) and off-CPU (waiting) ms."""
    return {"recorded_ms": float(row["recorded_ms"]), "on_cpu_ms": num(row.get("on_cpu_ms")),
            "run_queue_ms": num(row.get("run_queue_ms")), "off_cpu_ms": float(row["waiting_ms"])}


def thread_figures_text(row: dict) -> str:
    """'X ms recorded: Y ms on CPU, Z ms in the run queue, W ms off-CPU' (unsampled: 'X ms recorded, W ms off-CPU')."""
    return _figures_text(thread_figures(row))


def _figures_text(f: dict) -> str:
    if f["on_cpu_ms"] is None:
        return f"{f['recorded_ms']:,.1f} ms recorded, {f['off_cpu_ms']:,.1f} ms off-CPU"
    return (f"{f['recorded_ms']:,.1f} ms recorded: {f['on_cpu_ms']:,.1f} ms on CPU, {f['run_queue_ms'] or 0.0:,.1f} ms in "
            f"the run queue, {f['off_cpu_ms']:,.1f} ms off-CPU")


# Typed twins (report.md / report.html read the typed Report): the same figures of ``result.ThreadRow`` rows.
def busiest_other_row(threads):
    """(index into ``threads.threads``, row) of ``busiest_other_thread`` for a typed ``result.Threads`` (or None)."""
    rows = threads.threads if threads is not None else []
    i = _busiest([(r.critical, _busy_ms(num(r.on_cpu_ms), r.recorded_ms, r.waiting_ms)) for r in rows])
    return None if i is None else (i, rows[i])


def row_figures_text(row) -> str:
    """``thread_figures_text`` of a typed ``result.ThreadRow``."""
    return _figures_text({"recorded_ms": float(row.recorded_ms), "on_cpu_ms": num(row.on_cpu_ms),
                          "run_queue_ms": num(row.run_queue_ms), "off_cpu_ms": float(row.waiting_ms)})
