"""Renderer of the cross-rank section (``cross_rank.md``; ``cross_rank.json`` is the dict itself)."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import InferScopeError
from ..thresholds import CROSS_RANK_STRAGGLER_MIN_LEAD_PCT
from ..util.atomic import atomic_write_text
from .markdown import md_escape


def _f(v, nd=3, sign=False) -> str:
    if v is None:
        return "n/a"
    return f"{v:+,.{nd}f}" if sign else f"{v:,.{nd}f}"


def _n(n: int, word: str) -> str:
    """``3 inputs``, ``1 input``."""
    return f"{n} {word}" + ("" if n == 1 else "s")


def _row(cells) -> str:
    return "| " + " | ".join(cells) + " |"


def to_markdown(cr: dict) -> str:
    out = ["# Cross-rank comparison", "", f"Rule: {md_escape(cr['rule'], 800)}", ""]
    for f in cr.get("findings") or []:
        out += [f"**Finding ({f['severity']}): {md_escape(f['title'], 800)}**", "", f"Suggestion: {md_escape(f['suggestion'], 800)}", ""]
    if cr.get("ungrouped"):
        out += [f"Traces with a rank but no other rank of their job among the inputs: {len(cr['ungrouped'])}", ""]
    for j in cr["jobs"]:
        ranks = ", ".join(map(str, j["ranks_present"]))
        out += [f"## {j['job']}: world size {j['world_size'] if j['world_size'] is not None else 'n/a'}, "
                f"backend {md_escape(j['backend'] or 'n/a')}, devices {md_escape(', '.join(j['devices']) or 'n/a')}", "",
                f"{_n(len(j['ranks_present']), 'rank')} present: {ranks}, from {_n(len(j['inputs']), 'input')} (rank from "
                f"{' and '.join(j.get('rank_source') or ['distributedInfo'])})", ""]
        if j.get("error"):
            out += [f"Not compared: {md_escape(j['error'], 400)}", ""]
            continue
        if j.get("window_note"):
            out += [f"Note: {md_escape(j['window_note'], 600)}", ""]
        out += [_row(["rank", "steps", "median step ms", "p90 step ms", "e2e ms", "GPU idle %", "comm kernel ms",
                      "comm not overlapped ms (%)", "comm wait ms (% of compared)", "wait ms/step", "last arrivals",
                      "sync wait ms", "source"]),
                _row(["---:"] * 12 + ["---"])]
        for r in j["ranks"]:
            st = r["steps"]
            exp = "n/a" if r["comm_exposed_ms"] is None else f"{_f(r['comm_exposed_ms'])} ({_f(r['comm_exposed_pct'], 1)})"
            wait = "n/a" if r.get("comm_wait_ms") is None else f"{_f(r['comm_wait_ms'])} ({_f(r['comm_wait_pct'], 1)})"
            out.append(_row([str(r["rank"]), str(st["n"]), _f(st["median_ms"]), _f(st["p90_ms"]), _f(r["e2e_ms"]),
                             _f(r.get("gpu_idle_pct"), 1), _f(r["comm_kernel_ms"]), exp, wait,
                             _f(r.get("comm_wait_per_step_ms")), "n/a" if r.get("last_arrivals") is None else str(r["last_arrivals"]),
                             _f(r["sync_wait_ms"]), md_escape(r["source"], 160)]))
        cw = j.get("comm_wait")
        out += ["", (f"Communication wait: {cw['instances_compared']} collective instances in {cw['steps_compared']} steps "
                     f"(matched by {cw['matched_by']}; {cw['instances_not_on_every_rank']} not on every rank). "
                     f"Rule: {md_escape(cw['rule'], 600)}") if cw else
                "Communication wait: not measured (no collective kernels launched inside steps on two or more ranks)."]
        cats = sorted({c for r in j["ranks"] for c in r["shares_pct"]})
        out += ["", "Breakdown shares (% of each rank's window):", "",
                _row(["rank", *map(md_escape, cats)]), _row(["---:"] * (len(cats) + 1))]
        for r in j["ranks"]:
            out.append(_row([str(r["rank"]), *(_f(r["shares_pct"].get(c), 1) for c in cats)]))
        s = j.get("straggler")
        if not s:
            out += ["", "No straggler: some rank has neither steps nor an e2e time.", ""]
            continue
        lead = f"{_f(s['lead_ms'], sign=True)} ms" + (f" ({_f(s['lead_pct'], 1, sign=True)} %)" if s["lead_pct"] is not None else "")
        weak = s["lead_pct"] is not None and s["lead_pct"] < CROSS_RANK_STRAGGLER_MIN_LEAD_PCT
        head = (f"Slowest by step time: rank {s['rank']}, under the {CROSS_RANK_STRAGGLER_MIN_LEAD_PCT:g} % lead that "
                "names a straggler (see the finding and the communication wait above)" if weak else
                f"**Straggler: rank {s['rank']}**")
        out += ["", f"{head} ({md_escape(s['basis'])} {_f(s['value_ms'])} ms; median of the "
                f"other ranks {_f(s['others_median_ms'])} ms; {lead}).", "",
                "What it did differently (its time minus the median of the other ranks):", ""]
        for title, key in (("Categories", "categories"), ("Kernels", "kernels"), ("Ops (self time)", "ops"),
                           ("Functions (self time)", "functions")):
            rows = j["different"][key]
            if not rows:
                continue
            out += [f"{title}:", "", _row(["name", "straggler ms", "others' median ms", "difference ms", "bound"]),
                    _row(["---"] + ["---:"] * 4)]
            out += [_row([md_escape(x["name"], 120), _f(x["straggler_ms"]), _f(x["others_median_ms"]),
                          _f(x["diff_ms"], sign=True), x["bound"] or "exact"]) for x in rows]
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def write(outdir: Path, cr: dict) -> list[Path]:
    paths = [outdir / "cross_rank.json", outdir / "cross_rank.md"]
    try:
        atomic_write_text(paths[0], json.dumps(cr, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
        atomic_write_text(paths[1], to_markdown(cr))
    except OSError as e:
        raise InferScopeError(f"cannot write {outdir}: {e.strerror or e}") from None
    return paths
