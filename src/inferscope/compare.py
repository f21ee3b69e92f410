"""``inferscope diff BEFORE AFTER``: what changed between two runs, and is it beyond noise?

Each side is a trace (Kineto, nsys, .iscope: analysed here with the same options) or a
report.json written by InferScope.  Everything in the diff is read from the two reports (and,
for traces, from the traces themselves); nothing is estimated.

Noise rule (``noise_for``): the two runs are compared per *repeated unit* when both hold one:
profiler steps (``ProfilerStep#N``) when both have at least two, else the user range
(record_function / NVTX / ``scope()``) that repeats at least twice on both sides and covers the
most time.  The per-unit means are compared with Welch's t statistic; a change whose magnitude
is within the 95 % band (``t_0.975(df) x standard error of the difference``), or smaller than
``thresholds.DIFF_MIN_CHANGE_PCT`` (``--min-change``), is called ``within_noise``.  Without repeats the noise is unknown and the verdict says so (it then rests on
the e2e change alone).  When both reports say how much work they did (generated tokens/s, else requests/s),
the verdict rests on throughput, with the latency call beside it (``compare_work.py``).  Within-run step variance does not capture everything that differs between
runs (machine load, clocks), so the band is a lower bound on the real noise.
"""
from __future__ import annotations

import math
import os
import sys
from pathlib import Path

from .errors import InputError

SCHEMA = "inferscope.diff/1"
# two-sided 95 % Student t quantiles for df = 1..30 (larger df: 1.96)
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
TOP_CHANGED = 15
REPORT_JSON_MAX_BYTES = 256 << 20


def t975(df: float) -> float:
    if not math.isfinite(df) or df >= 30.5:
        return 1.96 if not (math.isfinite(df) and df < 120) else 2.0
    return _T975[max(1, int(round(df))) - 1]


# ---------------------------------------------------------------------------------------------
# one side: a report dict (+ the trace when the input was one)
# ---------------------------------------------------------------------------------------------
class Side:
    def __init__(self, path: str, report: dict, trace=None) -> None:
        self.path = path
        self.report = report
        self.trace = trace

    @property
    def kind(self) -> str:
        return "report.json" if self.trace is None else "trace"


def _as_report(path: Path) -> dict | None:
    """The parsed document when ``path`` is an InferScope report.json, else None."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    # report.json opens with "schema_version" (InferScope writes it first); a Kineto trace does not
    # (its key is "schemaVersion"), so a big trace is never decoded twice
    if head.lstrip()[:1] != b"{" or b'"schema_version"' not in head or path.stat().st_size > REPORT_JSON_MAX_BYTES:
        return None
    import msgspec
    try:
        doc = msgspec.json.decode(path.read_bytes())
    except msgspec.DecodeError:
        return None    # let the trace importer give its own error
    if isinstance(doc, dict) and "schema_version" in doc and "breakdown" in doc and "traceEvents" not in doc:
        if not isinstance(doc.get("breakdown"), list) or not isinstance(doc.get("e2e_ms"), (int, float)):
            raise InputError(f"{path}: report.json without a breakdown / e2e_ms")
        return doc
    return None


def load_side(path: str, options=None, quiet: bool = True) -> Side:
    """One side of a diff: a report.json (or a directory holding one), or a trace analysed here; ``quiet``
    False: a progress line on stderr while a slow trace loads and is analysed (util/progress.py)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{path}: no such file")
    if p.is_dir():
        if (p / "report.json").is_file():
            p = p / "report.json"
        else:
            raise InputError(f"{path}: a directory without report.json")
    rep = _as_report(p)
    if rep is not None:
        return Side(str(p), rep, None)
    from .analyze.pipeline import analyze
    from .ingest import load_trace
    from .util.progress import for_stderr
    prog = for_stderr(p.name, quiet=quiet)
    ok = False
    try:
        trace = load_trace(p, progress=prog)
        if prog is not None:
            prog.stage("analysing")
        side = Side(str(p), analyze(trace, options), trace)
        ok = True
    finally:
        if prog is not None:
            prog.done(ok)
    return side


# ---------------------------------------------------------------------------------------------
# repeated units (noise)
# ---------------------------------------------------------------------------------------------
def repeats(side: Side) -> dict[str, list[float]]:
    """{unit name: [wall ms per occurrence]} for units occurring at least twice in the window.
    ``"<steps>"`` is the profiler steps; other keys are user range names."""
    out: dict[str, list[float]] = {}
    ph = side.report.get("phases") or {}
    steps = [s.get("wall_ms") for s in ph.get("steps") or [] if isinstance(s, dict)]
    steps = [float(x) for x in steps if isinstance(x, (int, float))]
    if len(steps) >= 2:
        out["<steps>"] = steps
    if side.trace is not None:
        import numpy as np
        from .trace.kinds import SpanKind
        t = side.trace
        s = t.spans
        w = side.report.get("window") or {}
        lo, hi = int(w.get("start_ns", -2**62)), int(w.get("end_ns", 2**62))
        m = (s.kind == SpanKind.ANNOTATION) & (s.end_ns > lo) & (s.start_ns < hi) & (s.end_ns > s.start_ns)
        idx = np.flatnonzero(m)
        if len(idx):
            wall = (np.minimum(s.end_ns[idx], hi) - np.maximum(s.start_ns[idx], lo)) / 1e6
            for nm, ms in zip(t.names(idx), wall.tolist()):
                if nm != "<steps>":
                    out.setdefault(nm, []).append(ms)
    return {k: v for k, v in out.items() if len(v) >= 2}


def _mean_var(x: list[float]) -> tuple[float, float]:
    n = len(x)
    m = sum(x) / n
    return m, (sum((v - m) ** 2 for v in x) / (n - 1) if n > 1 else 0.0)


def noise_for(before: Side, after: Side) -> dict | None:
    """Welch comparison of the per-unit wall times, or None when the sides share no repeated unit."""
    rb, ra = repeats(before), repeats(after)
    common = [k for k in rb if k in ra]
    if not common:
        return None
    if "<steps>" in common:
        unit = "<steps>"
    else:   # the repeated range covering the most time on both sides
        unit = max(common, key=lambda k: (min(sum(rb[k]), sum(ra[k])), k))
    xb, xa = rb[unit], ra[unit]
    mb, vb = _mean_var(xb)
    ma, va = _mean_var(xa)
    nb, na = len(xb), len(xa)
    se = math.sqrt(vb / nb + va / na)
    if se > 0:
        df = (vb / nb + va / na) ** 2 / (((vb / nb) ** 2 / (nb - 1)) + ((va / na) ** 2 / (na - 1)))
    else:
        df = float(nb + na - 2)
    band = t975(df) * se
    d = ma - mb
    return {
        "unit": "profiler steps" if unit == "<steps>" else unit,
        "unit_kind": "steps" if unit == "<steps>" else "range",
        "before": {"n": nb, "mean_ms": mb, "std_ms": math.sqrt(vb), "cv_pct": 100 * math.sqrt(vb) / mb if mb else None},
        "after": {"n": na, "mean_ms": ma, "std_ms": math.sqrt(va), "cv_pct": 100 * math.sqrt(va) / ma if ma else None},
        "delta_ms": d, "delta_pct": 100 * d / mb if mb else None,
        "se_ms": se, "df": df, "band_ms": band, "band_pct": 100 * band / mb if mb else None,
        "t": d / se if se > 0 else None,
        "beyond_noise": abs(d) > band,
        "rule": "Welch: |mean_after - mean_before| > t_0.975(df) x sqrt(var_b/n_b + var_a/n_a) over the per-unit wall "
                "times; within-run variance only (a lower bound on run-to-run noise)",
    }


# ---------------------------------------------------------------------------------------------
# tables of named things: kernels, CPU ops, sampled functions, ranges
# ---------------------------------------------------------------------------------------------
def _named_from_trace(side: Side) -> dict[str, dict[str, tuple[float, int]]]:
    import numpy as np
    from .analyze.sample_labels import function_of
    from .analyze.select import clipped_durations, group_sum, in_window
    from .trace.kinds import SpanKind
    t = side.trace
    s = t.spans
    w = side.report.get("window") or {}

    class _W:
        start_ns = int(w.get("start_ns", -2**62))
        end_ns = int(w.get("end_ns", 2**62))
    out: dict[str, dict[str, tuple[float, int]]] = {}
    for label, mask, key in (("kernel", (s.kind == SpanKind.KERNEL) | (s.kind == SpanKind.GRAPH_LAUNCH), s.name),
                             ("cpu_op", s.kind == SpanKind.CPU_OP, s.name),
                             ("function", (s.kind == SpanKind.CPU_SAMPLE) & (s.detail >= 0), s.detail),
                             ("range", (s.kind == SpanKind.ANNOTATION) | (s.kind == SpanKind.STEP), s.name)):
        idx = in_window(t, mask, _W)
        if not len(idx):
            continue
        d = clipped_durations(t, idx, _W)
        uk, sums, cnt = group_sum(key[idx], d)
        lst = t.strings.as_list()
        names = [lst[int(k)] if k >= 0 else "" for k in uk.tolist()]
        if label == "function":      # one row per function, whatever its hottest line ("file:func:line")
            names = [function_of(n) for n in names]
        tab = out.setdefault(label, {})
        for nm, sm, c in zip(names, sums.tolist(), np.asarray(cnt).tolist()):
            if label == "range" and str(nm).startswith("ProfilerStep#"):
                continue       # step numbers differ between runs by construction
            prev = tab.get(nm, (0.0, 0))
            tab[nm] = (prev[0] + sm / 1e6, prev[1] + int(c))
    return out


def _named_from_report(rep: dict) -> dict[str, dict[str, tuple[float, int]]]:
    out: dict[str, dict[str, tuple[float, int]]] = {}
    k = {}
    for r in (rep.get("kernels") or {}).get("top") or []:
        prev = k.get(r["name"], (0.0, 0))
        k[r["name"]] = (prev[0] + float(r["sum_ms"]), prev[1] + int(r["calls"]))
    if k:
        out["kernel"] = k
    rg = {r["name"]: (float(r["wall_ms"]), int(r["count"])) for r in (rep.get("phases") or {}).get("ranges") or []}
    if rg:
        out["range"] = rg
    return out


def named(side: Side) -> tuple[dict, str]:
    if side.trace is not None:
        return _named_from_trace(side), "all in the window (from the trace)"
    return _named_from_report(side.report), "report.json lists only its top kernels and ranges"


def _named_diff(nb: dict, na: dict) -> dict:
    out = {}
    for kind in sorted(set(nb) | set(na)):
        b, a = nb.get(kind, {}), na.get(kind, {})
        if not b or not a:
            # one side did not record this kind at all: not 'appeared' or 'disappeared'
            out[kind] = {"recorded": {"before": bool(b), "after": bool(a)}, "appeared": [], "disappeared": [], "changed": []}
            continue
        appeared = sorted(({"name": n, "ms": v[0], "count": v[1]} for n, v in a.items() if n not in b), key=lambda r: -r["ms"])
        disappeared = sorted(({"name": n, "ms": v[0], "count": v[1]} for n, v in b.items() if n not in a), key=lambda r: -r["ms"])
        changed = []
        for n in set(a) & set(b):
            d = a[n][0] - b[n][0]
            changed.append({"name": n, "before_ms": b[n][0], "after_ms": a[n][0], "delta_ms": d,
                            "delta_pct": 100 * d / b[n][0] if b[n][0] else None,
                            "before_count": b[n][1], "after_count": a[n][1]})
        changed.sort(key=lambda r: (-abs(r["delta_ms"]), r["name"]))
        out[kind] = {"recorded": {"before": True, "after": True}, "appeared_count": len(appeared),
                     "disappeared_count": len(disappeared), "appeared": appeared[:TOP_CHANGED],
                     "disappeared": disappeared[:TOP_CHANGED], "changed": changed[:TOP_CHANGED]}
    return out


ENV_COUNTERS = ("cpu.util_pct", "proc.cpu_pct")
BUSY_MACHINE_PCT = 80.0


def environment(side: Side) -> dict:
    """Mean of the machine-load counters in the window (live traces only): {metric: mean}."""
    if side.trace is None or not len(side.trace.counters):
        return {}
    import numpy as np
    t = side.trace
    c = t.counters
    w = side.report.get("window") or {}
    lo, hi = int(w.get("start_ns", -2**62)), int(w.get("end_ns", 2**62))
    lst = t.strings.as_list()
    out = {}
    for i in range(len(t.tracks)):
        nid = int(t.tracks.name[i])
        name = lst[nid] if nid >= 0 else ""
        if name in ENV_COUNTERS:
            m = (c.track == i) & (c.ts_ns >= lo) & (c.ts_ns <= hi)
            if m.any():
                out[name] = float(np.mean(c.value[m]))
    return out


# ---------------------------------------------------------------------------------------------
# LLM metrics (the optional ``llm`` section): every numeric leaf present on both sides
# ---------------------------------------------------------------------------------------------
def _numeric_leaves(d, prefix="", depth=0) -> dict[str, float]:
    out = {}
    if not isinstance(d, dict) or depth > 2:
        return out
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)) and math.isfinite(v):
            out[key] = float(v)
        elif isinstance(v, dict):
            out.update(_numeric_leaves(v, key + ".", depth + 1))
    return out


# lower is better unless the name says a rate
def _higher_is_better(key: str) -> bool:
    k = key.lower()
    return any(w in k for w in ("per_s", "_per_sec", "throughput", "tokens_s", "qps", "rps"))


def llm_diff(rb: dict, ra: dict) -> dict | None:
    lb, la = rb.get("llm"), ra.get("llm")
    if not isinstance(lb, dict) and not isinstance(la, dict):
        return None
    fb, fa = _numeric_leaves(lb or {}), _numeric_leaves(la or {})
    rows = []
    for k in sorted(set(fb) | set(fa)):
        b, a = fb.get(k), fa.get(k)
        d = None if (a is None or b is None) else a - b
        rows.append({"metric": k, "before": b, "after": a, "delta": d,
                     "delta_pct": (100 * d / b) if (d is not None and b) else None,
                     "better": None if d is None or d == 0 else ((d > 0) == _higher_is_better(k))})
    return {"present": {"before": isinstance(lb, dict), "after": isinstance(la, dict)}, "metrics": rows}


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
    from . import thresholds as T
    from .compare_work import combine, work_of
    mc = T.DIFF_MIN_CHANGE_PCT if min_change_pct is None else min_change_pct
    result["work"] = work_of(rb, ra)
    result["change"] = combine(_change_verdict(e2e, noise, mc), result["work"], mc)
    if noise and noise["unit_kind"] == "steps" and noise["before"]["n"] != noise["after"]["n"]:
        result["warnings"].append(f"the windows hold different numbers of steps ({noise['before']['n']} vs "
                                  f"{noise['after']['n']}): compare the per-step means, not the e2e totals")
    return result


def _change_verdict(e2e: dict, noise: dict | None, min_change_pct: float) -> dict:
    """regression | improvement | within_noise | no_change, with the rule that decided it."""
    if noise is not None and noise["delta_pct"] is not None:
        pct, basis = noise["delta_pct"], ("mean wall time per profiler step" if noise["unit_kind"] == "steps"
                                      else f"mean wall time per {noise['unit']!r} range")
        if not noise["beyond_noise"]:
            vid, why = "within_noise", f"inside the 95% band ±{noise['band_pct']:.1f}%"
        elif abs(pct) < min_change_pct:
            vid, why = "within_noise", (f"beyond the 95% band ±{noise['band_pct']:.1f}% but below the {min_change_pct:g}% "
                                        "minimum change (run-to-run noise)")
        else:
            vid = "regression" if noise["delta_ms"] > 0 else "improvement"
            why = f"beyond the 95% band ±{noise['band_pct']:.1f}% and the {min_change_pct:g}% minimum change"
        text = (f"{vid.replace('_', ' ')}: {basis} {noise['before']['mean_ms']:.3f} -> {noise['after']['mean_ms']:.3f} ms "
                f"({pct:+.1f}%; {why}; n={noise['before']['n']}/{noise['after']['n']})")
        return {"id": vid, "change_pct": pct, "basis": basis, "noise_known": True, "min_change_pct": min_change_pct,
                "text": text}
    pct = e2e["delta_pct"]
    if pct is None or e2e["delta_ms"] == 0:
        vid = "no_change"
    elif abs(pct) < min_change_pct:
        vid = "within_noise"
    else:
        vid = "regression" if e2e["delta_ms"] > 0 else "improvement"
    text = (f"{vid.replace('_', ' ')}: e2e {e2e['before_ms']:.3f} -> {e2e['after_ms']:.3f} ms"
            + (f" ({pct:+.1f}%" if pct is not None else " (") + f"; minimum change {min_change_pct:g}%)"
            "; per-run noise unknown (no repeated steps or ranges on both sides)")
    return {"id": vid, "change_pct": pct, "basis": "e2e", "noise_known": False, "min_change_pct": min_change_pct,
            "text": text}


def diff_paths(before: str, after: str, options=None, min_change_pct: float | None = None, quiet: bool = True) -> dict:
    return diff_sides(load_side(before, options, quiet), load_side(after, options, quiet), min_change_pct)


def regressed_beyond(d: dict, pct: float) -> bool:
    """--fail-on-regression: the change the verdict rests on is a regression (beyond noise when the
    noise is known) of more than ``pct`` percent."""
    ch = d["change"]
    return ch["id"] == "regression" and ch["change_pct"] is not None and ch["change_pct"] > pct


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
    from .analyze.options import options_from_args
    from .errors import ConfigError
    from .report import diff as R
    from .report.markdown import plain
    if args.fail_on_regression is not None and not (args.fail_on_regression >= 0 and math.isfinite(args.fail_on_regression)):
        raise ConfigError("--fail-on-regression takes a percentage >= 0")
    if args.min_change is not None and not (args.min_change >= 0 and math.isfinite(args.min_change)):
        raise ConfigError("--min-change takes a percentage >= 0")
    opts = options_from_args(args)
    d = diff_paths(args.before, args.after, opts, args.min_change, quiet=bool(args.quiet))
    written = R.write(d, args.output or "inferscope-diff", args.format)
    if not args.quiet:
        for line in headline(d).splitlines():
            print(plain(line, 400))
        for w in d["warnings"]:
            print(f"warning: {plain(w, 400)}")
        print()
        for p in written:
            print(f"wrote {p}")
    if args.fail_on_regression is not None and regressed_beyond(d, args.fail_on_regression):
        print(f"inferscope: regression beyond {args.fail_on_regression:g}%: {plain(d['change']['text'], 400)}", file=sys.stderr)
        return 1
    return 0
