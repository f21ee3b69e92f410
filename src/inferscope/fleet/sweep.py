"""``inferscope sweep --param NAME=V1,V2,... [--repeat N] -- CMD ... {NAME} ...``

Runs CMD once per value (Cartesian product over several ``--param``) and repeat, each under
``inferscope run`` (a subprocess, so every run is an ordinary live collection with its own
report.json), then writes ``scaling_summary.json``, ``scaling_summary.csv`` and
``scaling_summary.html`` with one row per run.  Every number in a row is read from that run's
report.json; a run whose command exits non-zero (or writes no report) is marked ``failed`` and left out of the
means and the scaling answer (its row stays, with its report); throughput is the report's generated tokens/s (``llm.tokens_per_s.generated``; result/headline.py) when it has one, else
``--items-param NAME`` items per e2e second when the user declares how many items a run serves,
else unknown (null).
"""
from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

from ..errors import ConfigError, InferScopeError
from ..result.headline import llm_headline, num
from .. import thresholds as T
from ..report.csv_tables import _cell
from ..report.markdown import plain
from ..report.sweep_html import build as build_html
from ..result.base import CATEGORIES  # the breakdown's, in its order
from ..util.atomic import atomic_write_text

SCHEMA = "inferscope.scaling_summary/1"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_params(specs: list[str]) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for spec in specs or []:
        name, eq, vals = spec.partition("=")
        name = name.strip()
        if not eq or not _NAME_RE.match(name):
            raise ConfigError(f"--param {spec!r}: expected NAME=V1,V2,... with NAME a word (letters, digits, _)")
        values = [v.strip() for v in vals.split(",")]
        if not values or any(v == "" for v in values):
            raise ConfigError(f"--param {spec!r}: empty value")
        if name in {n for n, _ in out}:
            raise ConfigError(f"--param {name} given twice")
        if len(set(values)) != len(values):
            raise ConfigError(f"--param {name}: a value is repeated (use --repeat for repeats)")
        out.append((name, values))
    if not out:
        raise ConfigError("sweep needs at least one --param NAME=V1,V2,...")
    return out


def plan(params: list[tuple[str, list[str]]], cmd: list[str], repeat: int) -> list[dict]:
    """Every run: its parameter values, repeat index (1-based) and the command with {NAME} substituted."""
    if repeat < 1:
        raise ConfigError("--repeat must be >= 1")
    cmd = list(cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise ConfigError("sweep needs a command after --")
    joined = "\x00".join(cmd)
    for name, _ in params:
        if "{" + name + "}" not in joined:
            raise ConfigError(f"--param {name}: {{{name}}} does not appear in the command")
    runs = []
    for combo in itertools.product(*[vals for _, vals in params]):
        values = dict(zip([n for n, _ in params], combo))
        argv = []
        for a in cmd:
            for n, v in values.items():
                a = a.replace("{" + n + "}", v)
            argv.append(a)
        for r in range(1, repeat + 1):
            label = "_".join(f"{n}={re.sub(r'[^A-Za-z0-9_.-]', '_', v)[:40]}" for n, v in values.items()) + f"_r{r}"
            runs.append({"params": values, "repeat": r, "argv": argv, "label": label})
    return runs


def _value_num(v: str):
    try:
        x = float(v)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def row_from_report(run: dict, rep: dict | None, exit_code: int, report_rel: str, items_param: str | None) -> dict:
    row = {"params": run["params"], "repeat": run["repeat"], "exit_code": exit_code, "failed": True, "report": report_rel,
           "e2e_ms": None, "throughput": None, "throughput_unit": None, "throughput_basis": None,
           "shares_pct": {}, "breakdown_ms": {}, "verdict": None, "ttft_ms": None, "tpot_ms": None, "window": None}
    if rep is None:
        return row
    e2e = num(rep.get("e2e_ms"))
    row["e2e_ms"] = e2e
    row["failed"] = exit_code != 0 or e2e is None      # its report describes a failed run: not a scaling point
    row["window"] = (rep.get("window") or {}).get("label")
    for c in rep.get("breakdown") or []:
        row["shares_pct"][c["category"]] = c["pct"]
        row["breakdown_ms"][c["category"]] = c["ms"]
    row["verdict"] = (rep.get("verdict") or {}).get("id")
    llm = llm_headline(rep) or {}
    row["ttft_ms"] = llm.get("ttft_ms")
    row["tpot_ms"] = llm.get("tpot_ms")
    tps = llm.get("tokens_per_s")
    if tps is not None:
        row.update(throughput=tps, throughput_unit="tokens/s",
                   throughput_basis="report.json llm.tokens_per_s.generated (generated tokens x batch / window s)")
    elif items_param and e2e:
        items = _value_num(run["params"].get(items_param, ""))
        if items is not None:
            row.update(throughput=items / (e2e / 1e3), throughput_unit="items/s",
                       throughput_basis=f"{items_param} items per run / e2e (--items-param {items_param})")
    return row


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def aggregate(rows: list[dict], params: list[tuple[str, list[str]]]) -> list[dict]:
    """One point per parameter combination: means over its repeats (and the spread when repeated)."""
    pts = []
    for combo in itertools.product(*[vals for _, vals in params]):
        values = dict(zip([n for n, _ in params], combo))
        mine = [r for r in rows if r["params"] == values]
        rs = [r for r in mine if not r.get("failed", r["e2e_ms"] is None) and r["e2e_ms"] is not None]
        e2es = [r["e2e_ms"] for r in rs]
        pt = {"params": values, "runs": len(rs), "failed_runs": len(mine) - len(rs), "e2e_ms": _mean(e2es),
              "e2e_ms_min": min(e2es) if e2es else None, "e2e_ms_max": max(e2es) if e2es else None,
              "throughput": _mean([r["throughput"] for r in rs]),
              "throughput_min": min((r["throughput"] for r in rs if r["throughput"] is not None), default=None),
              "throughput_max": max((r["throughput"] for r in rs if r["throughput"] is not None), default=None),
              "throughput_unit": next((r["throughput_unit"] for r in rs if r["throughput_unit"]), None),
              "shares_pct": {c: _mean([r["shares_pct"].get(c, 0.0) for r in rs]) for c in CATEGORIES} if rs else {},
              "verdicts": sorted({r["verdict"] for r in rs if r["verdict"]}),
              "ttft_ms": _mean([r["ttft_ms"] for r in rs]), "tpot_ms": _mean([r["tpot_ms"] for r in rs])}
        pts.append(pt)
    return pts


def scaling(points: list[dict], params: list[tuple[str, list[str]]], min_gain_pct: float) -> list[dict]:
    """Along each parameter (the others fixed): where throughput stops scaling, which category grows."""
    out = []
    names = [n for n, _ in params]
    for i, (name, values) in enumerate(params):
        others = [n for n in names if n != name]
        for fixed in itertools.product(*[dict(params)[n] for n in others]):
            fx = dict(zip(others, fixed))
            series = [p for v in values for p in points if p["params"][name] == v and all(p["params"][k] == fx[k] for k in others)]
            left_out = [p["params"][name] for p in series if p["e2e_ms"] is None and p.get("failed_runs")]
            series = [p for p in series if p["e2e_ms"] is not None]
            if len(series) < 2:
                continue
            s = {"param": name, "fixed": fx, "values": [p["params"][name] for p in series],
                 "e2e_ms": [p["e2e_ms"] for p in series], "throughput": [p["throughput"] for p in series],
                 "throughput_unit": series[0]["throughput_unit"], "stops_scaling_at": None, "statements": []}
            if left_out:
                s["statements"].append("left out, every run failed (exit code != 0 or no report): "
                                       + ", ".join(f"{name}={v}" for v in left_out))
            thr = s["throughput"]
            if all(t is not None for t in thr):
                s["statements"].append(f"{s['throughput_unit']} per value: " + ", ".join(
                    f"{t:.4g} ({name}={p['params'][name]})" for t, p in zip(thr, series)))
                for j in range(1, len(series)):
                    gain = 100 * (thr[j] / thr[j - 1] - 1) if thr[j - 1] else None   # from 0: no ratio
                    if gain is not None and gain < min_gain_pct:
                        s["stops_scaling_at"] = series[j]["params"][name]
                        p0, p1 = series[j - 1], series[j]
                        spread = ""
                        if p0["runs"] > 1 and p1["runs"] > 1 and p1["throughput_max"] >= p0["throughput_min"]:
                            spread = (f"; the repeats overlap ({p0['throughput_min']:.3g}-{p0['throughput_max']:.3g} vs "
                                      f"{p1['throughput_min']:.3g}-{p1['throughput_max']:.3g})")
                        s["statements"].append(
                            f"throughput stops scaling at {name}={p1['params'][name]}: "
                            f"{thr[j - 1]:.3g} -> {thr[j]:.3g} {s['throughput_unit']} ({gain:+.1f}%, below the {min_gain_pct:g}% "
                            f"minimum gain) from {name}={p0['params'][name]}{spread}")
                        break
                if s["stops_scaling_at"] is None:
                    s["statements"].append(f"throughput keeps scaling up to {name}={series[-1]['params'][name]} "
                                           f"({thr[0]:.3g} -> {thr[-1]:.3g} {s['throughput_unit']})")
                s["best_throughput_at"] = series[max(range(len(thr)), key=lambda j: thr[j])]["params"][name]
            else:
                s["statements"].append("throughput unknown (no llm.tokens_per_s in the reports and no --items-param)")
            # which category grows: share change from the first to the last value
            a, b = series[0]["shares_pct"], series[-1]["shares_pct"]
            deltas = {c: (b.get(c) or 0.0) - (a.get(c) or 0.0) for c in CATEGORIES}
            grow = max(deltas, key=lambda c: deltas[c])
            if deltas[grow] > 0:
                s["grows_most"] = {"category": grow, "delta_pp": deltas[grow], "from_pct": a.get(grow), "to_pct": b.get(grow)}
                s["statements"].append(f"{grow} grows most: {a.get(grow) or 0:.1f}% -> {b.get(grow) or 0:.1f}% of e2e "
                                       f"({name}={series[0]['params'][name]} -> {series[-1]['params'][name]})")
            e0, e1 = series[0]["e2e_ms"], series[-1]["e2e_ms"]
            ratio = f" ({e1 / e0:.2f}x)" if e0 else ""
            s["statements"].append(f"e2e {e0:.3f} -> {e1:.3f} ms{ratio} from {name}={series[0]['params'][name]} "
                                   f"to {series[-1]['params'][name]}")
            out.append(s)
    return out


def _run_one(run: dict, outdir: Path, extra: list[str], quiet: bool) -> tuple[int, dict | None, str]:
    rdir = outdir / "runs" / run["label"]
    rdir.mkdir(parents=True, exist_ok=True)
    report = rdir / "report.json"
    if report.exists():
        report.unlink()          # never read a previous sweep's report for this run
    argv = [sys.executable, "-m", "inferscope", "run", "-q", "--format", "json", "--report", str(report), *extra,
            "--", *run["argv"]]
    with open(rdir / "stdout.txt", "wb") as out, open(rdir / "stderr.txt", "wb") as err:
        try:
            rc = subprocess.call(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        except OSError as e:
            raise InferScopeError(f"cannot start inferscope run: {e.strerror or e}") from None
    rep = None
    if report.is_file():
        try:
            rep = json.loads(report.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            rep = None
    return rc, rep, os.path.relpath(report, outdir)


def sweep(params, cmd, repeat=1, outdir="outputs", items_param=None, window=None, quiet=False,
          min_gain_pct: float | None = None, progress=None) -> dict:
    runs = plan(params, cmd, repeat)
    if items_param is not None and items_param not in dict(params):
        raise ConfigError(f"--items-param {items_param}: not one of the --param names")
    out = Path(outdir)
    extra = ["--window", window] if window else []
    rows = []
    for k, run in enumerate(runs, 1):
        if progress:
            progress(f"[{k}/{len(runs)}] {' '.join(run['argv'])}")
        rc, rep, rel = _run_one(run, out, extra, quiet)
        rows.append(row_from_report(run, rep, rc, rel, items_param))
    points = aggregate(rows, params)
    gain = T.SWEEP_MIN_THROUGHPUT_GAIN_PCT if min_gain_pct is None else min_gain_pct
    return {"schema": SCHEMA, "command": list(cmd[1:] if cmd and cmd[0] == "--" else cmd),
            "params": [{"name": n, "values": v} for n, v in params], "repeat": repeat,
            "items_param": items_param, "rows": rows, "points": points,
            "scaling": scaling(points, params, gain), "min_throughput_gain_pct": gain,
            "failed_runs": sum(1 for r in rows if r["failed"])}


# ---------------------------------------------------------------------------------------------
# outputs
# ---------------------------------------------------------------------------------------------
def csv_text(summary: dict) -> str:

    names = [p["name"] for p in summary["params"]]
    cols = names + ["repeat", "exit_code", "failed", "e2e_ms", "throughput", "throughput_unit", "verdict", "ttft_ms", "tpot_ms"] + \
        [f"{c}_pct" for c in CATEGORIES] + ["report"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in summary["rows"]:
        w.writerow([_cell(v) for v in [r["params"][n] for n in names] + [
            r["repeat"], r["exit_code"], r.get("failed"), r["e2e_ms"], r["throughput"], r["throughput_unit"], r["verdict"], r["ttft_ms"], r["tpot_ms"]] +
            [r["shares_pct"].get(c) for c in CATEGORIES] + [r["report"]]])
    return buf.getvalue()


def write(summary: dict, outdir) -> list[Path]:
    out = Path(outdir)
    files = [(out / "scaling_summary.json", json.dumps(summary, indent=2, ensure_ascii=False, allow_nan=False) + "\n"),
             (out / "scaling_summary.csv", csv_text(summary)),
             (out / "scaling_summary.html", build_html(summary))]
    for p, body in files:
        try:
            atomic_write_text(p, body)
        except OSError as e:
            raise InferScopeError(f"cannot write {p}: {e.strerror or e}") from None
    return [p for p, _ in files]


def cli_sweep(args) -> int:
    params = parse_params(args.param)
    if args.min_gain is not None and not (math.isfinite(args.min_gain) and args.min_gain >= 0):
        raise ConfigError("--min-gain takes a percentage >= 0")
    say = None if args.quiet else (lambda m: print(plain(m, 300), file=sys.stderr, flush=True))
    summary = sweep(params, args.cmd, args.repeat, args.output or "outputs", args.items_param, args.window,
                    args.quiet, args.min_gain, say)
    written = write(summary, args.output or "outputs")
    if not args.quiet:
        for s in summary["scaling"]:
            fixed = ", ".join(f"{k}={v}" for k, v in s["fixed"].items())
            for st in s["statements"]:
                print(plain(f"{s['param']}{' (' + fixed + ')' if fixed else ''}: {st}", 400))
        for p in written:
            print(f"wrote {p}")
    if summary["failed_runs"]:
        print(f"inferscope: {summary['failed_runs']} of {len(summary['rows'])} runs failed or wrote no report "
              f"(see runs/*/stderr.txt under {args.output or 'outputs'})", file=sys.stderr)
        return 1
    return 0
