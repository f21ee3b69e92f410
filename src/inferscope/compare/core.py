"""``inferscope diff BEFORE AFTER``: what changed between two runs, and is it beyond noise?

Each side is a trace (Kineto, nsys, .iscope: analysed here with the same options) or a
report.json written by InferScope.  Everything in the diff is read from the two reports (and,
for traces, from the traces themselves); nothing is estimated.

The parts: ``sides.py`` (loading each side), ``noise.py`` (the noise rule, machine
load, the latency call), ``named.py`` (kernels, CPU ops, functions, ranges by name),
``llm.py`` (the ``llm`` section), ``work.py`` (the call by work done), ``whatif.py``
(each predicted saving of ``before`` against the measured change).  This module
compares the breakdowns (categories and their parts), assembles the diff and runs the command; the
package (``inferscope.compare``) re-exports the names callers use (``Side``, ``noise_for``, ``load_side``, ...).
"""
from __future__ import annotations

import math
import os
import sys

from .llm import llm_diff
from .named import TOP_CHANGED, _named_diff, named
from .noise import BUSY_MACHINE_PCT, ENV_COUNTERS, _change_verdict, environment, noise_for, repeats, t975
from .sides import REPORT_JSON_MAX_BYTES, Side, load_side
from .. import thresholds as T
from ..analyze.options import options_from_args
from ..errors import ConfigError
from ..outputs import DEFAULT_DIFF_DIR
from ..report import diff as R
from ..report.markdown import plain
from .whatif import predictions
from .work import combine, work_of

__all__ = ["BUSY_MACHINE_PCT", "ENV_COUNTERS", "REPORT_JSON_MAX_BYTES", "SCHEMA", "TOP_CHANGED", "Side", "cli_diff",
           "diff_paths", "diff_sides", "environment", "headline", "llm_diff", "load_side", "named", "noise_for",
           "regressed_beyond", "repeats", "t975"]

SCHEMA = "inferscope.diff/1"


# ---------------------------------------------------------------------------------------------
# the diff
# ---------------------------------------------------------------------------------------------
def _cats(rep: dict) -> dict[str, dict]:
    return {c["category"]: c for c in rep.get("breakdown") or [] if isinstance(c, dict) and "category" in c}


def _source_line(side: Side) -> dict:
    r = side.report
    src = r.get("source") or {}
    return {"path": os.path.basename(side.path), "input": side.kind, "format": src.get("format"),
            "file": src.get("file"), "window": (r.get("window") or {}).get("label"),
            "devices": [d.get("name") for d in src.get("devices") or [] if isinstance(d, dict)]}


def _parts(category: str, row: dict) -> dict:
    """A category's parts by name.  A report lists waiting's parts only when its run queue has time
    (analyze/breakdown.py): without them all of waiting is off-CPU, and a side compared with one that
    lists them must say so (else off_cpu reads as vanished: -299 ms in a tokenizer diff)."""
    parts = {p["name"]: p for p in row.get("parts") or []}
    if category == "waiting" and not parts and float(row.get("ms", 0.0)) > 0:
        parts = {"off_cpu": {"name": "off_cpu", "ms": float(row["ms"])}}
    return parts


def diff_sides(before: Side, after: Side, min_change_pct: float | None = None) -> dict:
    rb, ra = before.report, after.report
    eb, ea = float(rb["e2e_ms"]), float(ra["e2e_ms"])
    cb, ca = _cats(rb), _cats(ra)
    order = [c["category"] for c in rb.get("breakdown") or []] + [c for c in ca if c not in cb]
    cats = []
    for c in order:
        b, a = cb.get(c, {}), ca.get(c, {})
        bms, ams = float(b.get("ms", 0.0)), float(a.get("ms", 0.0))
        bp, ap = float(b.get("pct", 0.0)), float(a.get("pct", 0.0))
        pb, pa = _parts(c, b), _parts(c, a)
        parts = []
        for pn in list(pb) + [x for x in pa if x not in pb]:
            x, y = pb.get(pn, {}), pa.get(pn, {})
            pbm, pam = float(x.get("ms", 0.0)), float(y.get("ms", 0.0))
            if pbm == 0 and pam == 0:
                continue
            parts.append({"name": pn, "before_ms": pbm, "after_ms": pam, "delta_ms": pam - pbm,
                          "before_pct": 100 * pbm / eb if eb else 0.0, "after_pct": 100 * pam / ea if ea else 0.0,
                          "delta_pp": (100 * pam / ea if ea else 0.0) - (100 * pbm / eb if eb else 0.0)})
        cats.append({"category": c, "label": a.get("label") or b.get("label") or c, "before_ms": bms, "after_ms": ams,
                     "delta_ms": ams - bms, "before_pct": bp, "after_pct": ap, "delta_pp": ap - bp, "parts": parts})
    # which category grew / shrank most is judged without waiting's run-queue part: time runnable but
    # waiting for a CPU follows the host's other load, not the program (two runs of the same program beside
    # other jobs differed most in it: "waiting shrank most" for a tokenizer change, 2026-11-25)
    def program_delta(r):
        rq = next((p["delta_ms"] for p in r["parts"] if p["name"] == "run_queue"), 0.0) if r["category"] == "waiting" else 0.0
        return r["delta_ms"] - rq
    grew = max(cats, key=program_delta) if cats else None
    shrank = min(cats, key=program_delta) if cats else None
    vb, va = rb.get("verdict") or {}, ra.get("verdict") or {}
    nb, nb_basis = named(before)
    na, na_basis = named(after)
    noise = noise_for(before, after)
    d_e2e = ea - eb
    e2e = {"before_ms": eb, "after_ms": ea, "delta_ms": d_e2e, "delta_pct": 100 * d_e2e / eb if eb else None}
    result = {
        "schema": SCHEMA,
        "before": _source_line(before), "after": _source_line(after),
        "e2e": e2e,
        "categories": cats,
        "largest_increase": grew["category"] if grew and program_delta(grew) > 0 else None,
        "largest_decrease": shrank["category"] if shrank and program_delta(shrank) < 0 else None,
        "verdict_before": {"id": vb.get("id"), "title": vb.get("title"), "confidence": vb.get("confidence")},
        "verdict_after": {"id": va.get("id"), "title": va.get("title"), "confidence": va.get("confidence")},
        "verdict_changed": vb.get("id") != va.get("id"),
        "findings": {"appeared": sorted({f["id"] for f in ra.get("findings") or []} - {f["id"] for f in rb.get("findings") or []}),
                     "resolved": sorted({f["id"] for f in rb.get("findings") or []} - {f["id"] for f in ra.get("findings") or []})},
        "named": _named_diff(nb, na),
        "named_basis": {"before": nb_basis, "after": na_basis},
        "llm": llm_diff(rb, ra),
        "noise": noise,
        "warnings": [],
    }
    sb, sa = (rb.get("source") or {}).get("format"), (ra.get("source") or {}).get("format")
    if sb != sa:
        result["warnings"].append(f"the inputs come from different sources ({sb} vs {sa}): what each records differs, "
                                  "so category changes may reflect the recording rather than the program")
    wb, wa = (rb.get("window") or {}).get("kind"), (ra.get("window") or {}).get("kind")
    if wb != wa:
        result["warnings"].append(f"the windows are of different kinds ({wb} vs {wa})")
    eb_env, ea_env = environment(before), environment(after)
    if eb_env or ea_env:
        result["environment"] = {"before": eb_env, "after": ea_env,
                                 "rule": "mean of the counter samples in the window (live traces)"}
        busy = [v for v in (eb_env.get("cpu.util_pct"), ea_env.get("cpu.util_pct")) if v is not None]
        if busy and max(busy) >= BUSY_MACHINE_PCT:
            result["warnings"].append(
                "the machine was busy during a run (system CPU utilisation " +
                " vs ".join(f"{v:.0f}%" for v in (eb_env.get("cpu.util_pct"), ea_env.get("cpu.util_pct")) if v is not None) +
                "): wall times include CPU contention from other processes, which within-run noise does not capture")
    mc = T.DIFF_MIN_CHANGE_PCT if min_change_pct is None else min_change_pct
    result["work"] = work_of(rb, ra)
    result["change"] = combine(_change_verdict(e2e, noise, mc), result["work"], mc)
    result["predictions"] = predictions(rb, ra, result)
    if noise and noise["unit_kind"] == "steps" and noise["before"]["n"] != noise["after"]["n"]:
        result["warnings"].append(f"the windows hold different numbers of steps ({noise['before']['n']} vs "
                                  f"{noise['after']['n']}): compare the per-step means, not the e2e totals")
    return result


def diff_paths(before: str, after: str, options=None, min_change_pct: float | None = None, quiet: bool = True) -> dict:
    return diff_sides(load_side(before, options, quiet), load_side(after, options, quiet), min_change_pct)


def regressed_beyond(d: dict, pct: float) -> bool:
    """--fail-on-regression: the change the verdict rests on is a regression (beyond noise when the
    noise is known) of more than ``pct`` percent on its own basis: a time (e2e, per step, per range) that
    grew by more than ``pct`` %, or a throughput (generated tokens/s, requests/s) that fell by more than
    ``pct`` % (``worse_pct``: the change in the worse direction; an improvement is never worse)."""
    ch = d["change"]
    return ch["id"] == "regression" and ch.get("worse_pct") is not None and ch["worse_pct"] > pct


def headline(d: dict) -> str:
    e = d["e2e"]
    lines = [f"diff: {d['before']['path']} -> {d['after']['path']}",
             f"e2e: {e['before_ms']:.3f} -> {e['after_ms']:.3f} ms ({e['delta_ms']:+.3f} ms"
             + (f", {e['delta_pct']:+.1f}%)" if e["delta_pct"] is not None else ")"),
             f"verdict: {d['verdict_before']['id']} -> {d['verdict_after']['id']}",
             d["change"]["text"]]
    for key, word in (("largest_increase", "grew most"), ("largest_decrease", "shrank most")):
        c = d.get(key)
        if c:
            r = next(x for x in d["categories"] if x["category"] == c)
            lines.append(f"{word}: {c} {r['delta_ms']:+.3f} ms ({r['delta_pp']:+.1f} pp)")
    return "\n".join(lines)


def cli_diff(args) -> int:
    """``inferscope diff``: write the diff files, print the headline; 1 with --fail-on-regression when it holds."""
    if args.fail_on_regression is not None and not (args.fail_on_regression >= 0 and math.isfinite(args.fail_on_regression)):
        raise ConfigError("--fail-on-regression takes a percentage >= 0")
    if args.min_change is not None and not (args.min_change >= 0 and math.isfinite(args.min_change)):
        raise ConfigError("--min-change takes a percentage >= 0")
    opts = options_from_args(args)
    d = diff_paths(args.before, args.after, opts, args.min_change, quiet=bool(args.quiet))
    written = R.write(d, args.output or DEFAULT_DIFF_DIR, args.format)
    if not args.quiet:
        for line in headline(d).splitlines():
            print(plain(line, 400))
        for w in d["warnings"]:
            print(f"warning: {plain(w, 400)}")
        print()
        for p in written:
            print(f"wrote {p}")
    if args.fail_on_regression is not None and regressed_beyond(d, args.fail_on_regression):
        ch = d["change"]
        print(f"inferscope: regression beyond {args.fail_on_regression:g}% ({ch['worse_pct']:.1f}% worse on "
              f"{plain(str(ch['basis']), 100)}): {plain(ch['text'], 400)}", file=sys.stderr)
        return 1
    return 0
