"""Wording and two predicates shared by analyze/ (finding texts) and report/ (renderers): pure functions of
values already in the result, no numpy, importing nothing of InferScope (so both layers may use them without
report/ importing analyze/)."""
from __future__ import annotations

import re


def short_kernel_name(name: str, limit: int = 120) -> str:
    """Readable kernel name for prose: drop 'void ', namespaces and argument lists, keep the
    template parts that tell kernels apart (functor names), cap the length."""
    n = re.sub(r"^void ", "", name)
    n = re.sub(r"\(anonymous namespace\)::", "", n)
    n = re.sub(r"\b[A-Za-z_]\w*::", "", n)          # namespace qualifiers
    if "(" in n:                                     # argument list (and lambdas inside templates)
        n = n[: n.index("(")]
    n = re.sub(r"\s+", " ", n).strip()
    return n if len(n) <= limit else n[: limit - 1] + "…"


def stall_text(reasons: list[dict]) -> str:
    """``long_scoreboard (memory dependency: ...) 48%, wait (...) 12%``; "" without reasons."""
    return ", ".join(f"{r['reason']}" + (f" ({r['meaning']})" if r["meaning"] else "") + f" {r['share_pct']:.0f}%"
                     for r in reasons)


def kernel_capture_only(res: dict) -> bool:
    """The input is an Nsight Compute capture without a timeline (``analyze capture.csv``, not ``--ncu``)."""
    return (res.get("source") or {}).get("format") == "ncu" and bool(res.get("kernel_deep_dive"))


def partial_trace(coll) -> dict | None:
    """A live run that ended before InferScope could finalise (os._exit, a signal): the trace holds only
    the data flushed before the end.  {covered_ms, run_ms, fraction, text} or None for complete traces."""
    if not isinstance(coll, dict) or coll.get("mode") != "live" or coll.get("complete", True) is not False:
        return None
    covered, run = coll.get("duration_ms"), coll.get("run_wall_ms")
    if not isinstance(covered, (int, float)):
        return None
    frac = min(1.0, max(0.0, covered / run)) if isinstance(run, (int, float)) and run > 0 else None
    how = (f"exit code {coll['exit_code']}" if coll.get("exit_code") is not None
           else f"killed by {coll['exit_signal']}" if coll.get("exit_signal") else "ended")
    span = f"{covered:,.0f} ms of the {run:,.0f} ms run" if frac is not None else f"the first {covered:,.0f} ms of the run"
    return {"covered_ms": covered, "run_ms": run, "fraction": frac,
            "text": f"Partial trace: the program ended ({how}) before InferScope could finalise; the report covers "
                    f"{span}" + (f" ({100 * frac:.0f}%), confidence scaled by it" if frac is not None else "")}
