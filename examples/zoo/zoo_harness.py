"""Truth harness for the planted zoo: run a program under ``inferscope run``, compare its self-timed
phases (examples/zoo/_truth.py) with the breakdown's per-segment classes in the report's window.

Definitions (documented in examples/zoo/README.md):
- window W: ``report.json`` ``window.start_ns``/``end_ns`` (what the report analysed).
- truth share of a class K: |union of the main thread's phases planted as K, clipped to W| / |W|,
  less the phases' own run-queue delay (schedstat, prorated), which is ``waiting/run_queue``: on a
  busy host a thread waits for a CPU, and InferScope reports that as a part of waiting.
  Time of W covered by no phase goes to the program's declared ``gap`` class, else to ``unplanted``.
- measured share of K: the breakdown's time in W labelled K (``analyze.breakdown.labelled_segments``);
  K = "category" sums all its parts, K = "category/part" that part only.
- ranking check: the top category of the truth equals the top category of the measurement.

Used by bench/bench_zoo.py and tests/test_zoo_truth.py; needs inferscope importable.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ZOO = Path(__file__).resolve().parent
UNPLANTED = "unplanted"
RUNQ = "waiting/run_queue"    # truth: run-queue delay measured inside the phases (schedstat)


def run_program(script: str, workdir: Path, args: list[str] = (), env: dict | None = None, timeout_s: float = 300,
                tag: str = "") -> dict:
    """Run one zoo program under ``inferscope run``; return paths of its report, trace and truth."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    stem = Path(script).stem + (f"_{tag}" if tag else "")
    rep, trc, tru = workdir / f"{stem}.json", workdir / f"{stem}.iscope", workdir / f"{stem}.truth.json"
    for p in (rep, trc, tru):
        p.unlink(missing_ok=True)
    e = dict(os.environ, ZOO_TRUTH=str(tru), PYTHONPATH=str(ZOO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    e.update(env or {})
    # --facts: the sampler's decision inputs are kept in the trace, so each run can be replayed offline (compare()
    # checks the replay gives the same report; bench_zoo.py --replay re-scores recorded runs with changed rules)
    cmd = [sys.executable, "-m", "inferscope", "run", "--facts", "--format", "json", "--report", str(rep),
           "--trace", str(trc), "--", sys.executable, str(ZOO / script), *args]
    busy0, kids0, t0 = _busy_cpu_s(), _children_cpu_s(), time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=e, cwd=str(workdir))
    wall = time.monotonic() - t0
    other = None
    if busy0 is not None and wall > 0:
        busy1 = _busy_cpu_s()
        if busy1 is not None:
            other = max(0.0, (busy1 - busy0) - (_children_cpu_s() - kids0)) / wall
    if r.returncode != 0 or not rep.exists() or not tru.exists():
        raise RuntimeError(f"{script}: rc={r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    return {"report": rep, "trace": trc, "truth": tru, "stdout": r.stdout, "other_load_cpus": other}


def _busy_cpu_s() -> float | None:
    """The machine's busy CPU time so far (/proc/stat: all but idle and iowait), in s; None where unreadable."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _union(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def truth_shares(truth: dict, lo: int, hi: int) -> dict[str, float]:
    """Percent of [lo, hi) per planted class (main thread's phases), plus the gap/unplanted rest."""
    dur = max(1, hi - lo)
    by: dict[str, list[tuple[int, int]]] = {}
    for p in truth["phases"]:
        if not p.get("main", True):
            continue
        a, b = max(lo, p["start_ns"]), min(hi, p["end_ns"])
        if b > a:
            by.setdefault(p["expect"], []).append((a, b))
    # the run-queue delay measured inside each phase (a busy host) is waiting/run_queue, not the phase's
    # class; a phase declared with off_cpu=CLASS moves its off-CPU time (wall - CPU - run queue) there
    moved_frac: dict[str, dict[str, int]] = {}
    tot_ns: dict[str, int] = {}
    for p in truth["phases"]:
        if not p.get("main", True) or p["end_ns"] <= p["start_ns"]:
            continue
        wall = p["end_ns"] - p["start_ns"]
        tot_ns[p["expect"]] = tot_ns.get(p["expect"], 0) + wall
        f = moved_frac.setdefault(p["expect"], {})
        q = min(p["runq_ns"], wall) if p.get("runq_ns") is not None else 0
        f[RUNQ] = f.get(RUNQ, 0) + q
        if p.get("off_cpu"):
            off = max(0, wall - q - min(p.get("cpu_ns") or 0, wall))
            f[p["off_cpu"]] = f.get(p["off_cpu"], 0) + off
    out = {}
    covered = []
    extra: dict[str, float] = {}
    for k, iv in by.items():
        u = _union(iv)
        covered += u
        pct = 100.0 * sum(b - a for a, b in u) / dur
        tot = tot_ns.get(k, 0)
        out[k] = out.get(k, 0.0) + pct
        for dst, ns in moved_frac.get(k, {}).items():
            moved = pct * ns / tot if tot else 0.0
            out[k] -= moved
            extra[dst] = extra.get(dst, 0.0) + moved
    rest = 100.0 - 100.0 * sum(b - a for a, b in _union(covered)) / dur
    if rest > 0.05:
        key = truth.get("gap") or UNPLANTED
        out[key] = out.get(key, 0.0) + rest
    for dst, pct in extra.items():
        if pct > 0.05:
            out[dst] = out.get(dst, 0.0) + pct
    return out


def all_threads_cpu_pct(truth: dict, lo: int, hi: int) -> float | None:
    """The truth's 'all threads' view: every thread's CPU time inside [lo, hi) from its cpu_mark() readings
    (linear between two readings, none before its first or after its last), summed, in % of the window."""
    marks = truth.get("cpu_marks")
    if not marks:
        return None
    tot = 0.0
    for rows in marks.values():
        m = np.asarray(rows, dtype=np.float64).reshape(-1, 2)
        if len(m) < 2:
            continue
        c = np.interp([lo, hi], m[:, 0], m[:, 1])      # constant outside the readings
        tot += float(c[1] - c[0])
    return 100.0 * tot / max(1, hi - lo)


def measured_shares(trace, window) -> dict[str, float]:
    """Percent of the window per breakdown label, at both levels ("category" and "category/part")."""
    from inferscope.analyze.breakdown import labelled_segments
    s, e, lab = labelled_segments(trace, window)
    dur = max(1, window.end_ns - window.start_ns)
    d = (e - s).astype(np.int64)
    out: dict[str, float] = {}
    for k in np.unique(lab) if len(lab) else []:
        pct = 100.0 * float(d[lab == k].sum()) / dur
        out[str(k)] = out.get(str(k), 0.0) + pct
        if "/" in k:
            c = str(k).split("/")[0]
            out[c] = out.get(c, 0.0) + pct
    return out


def _categories(shares: dict[str, float]) -> dict[str, float]:
    """Per category; ``shares`` keys are "category" or "category/part", none counted twice."""
    cats: dict[str, float] = {}
    for k, v in shares.items():
        c = k.split("/")[0]
        cats[c] = cats.get(c, 0.0) + v
    return cats


def _top_category(shares: dict[str, float]) -> str:
    """Largest category; ``shares`` keys are "category" or "category/part", none counted twice."""
    cats = _categories(shares)
    return max(cats, key=cats.get) if cats else ""


# report.json keys that are about the analysing process, not the trace (a replay's report may differ in them)
_NOT_DERIVED = ("about", "generated_at")


def _derived(d):
    if isinstance(d, dict):
        return {k: _derived(v) for k, v in d.items() if k not in _NOT_DERIVED}
    if isinstance(d, list):
        return [_derived(x) for x in d]
    return d


def replay_report(trace) -> tuple[dict, dict]:
    """report.json's dict of ``trace`` with its sampler classes re-derived from its recorded facts (collect/replay.py)
    by the current rules, analysed with the default options as `inferscope run` did; and the replay's counts."""
    from inferscope.analyze.pipeline import analyze
    from inferscope.collect.replay import replay_trace
    t, info = replay_trace(trace)
    return analyze(t), info


def replay_differences(rep: dict, trace) -> list[str]:
    """The report.json keys whose values differ between the live report and the replay of its recorded facts (and
    "pending ticks" when the ticks' own rules, replayed on their observations, queued other ticks than live)."""
    r, info = replay_report(trace)
    a, b = _derived(rep), _derived(r)
    diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return diff + (["pending ticks"] if info.get("divergent_drains") else [])


def compare(paths: dict, check_replay: bool = True, rules: str = "recorded") -> dict:
    """Truth vs InferScope for one run: {window, rows: [{label, truth_pct, measured_pct, diff_pts}], ...}.
    ``check_replay``: the run's recorded facts replayed offline must give the same report (raises otherwise).
    ``rules="replay"``: score the replay of the recorded facts by the current rules instead of the recorded report
    (bench_zoo.py --replay)."""
    from inferscope.analyze.window import Window
    from inferscope.ingest import load_trace
    rep = json.loads(Path(paths["report"]).read_text()) if rules != "replay" else None
    truth = json.loads(Path(paths["truth"]).read_text())
    trace = load_trace(paths["trace"])
    if rules == "replay":
        from inferscope.collect.replay import replay_trace
        trace = replay_trace(trace)[0]
        from inferscope.analyze.pipeline import analyze
        rep = json.loads(json.dumps(analyze(trace), default=str))
    elif check_replay and trace.facts:
        diff = replay_differences(rep, trace)
        if diff:
            raise AssertionError(f"the replay of {Path(paths['trace']).name}'s recorded facts differs from its live "
                                 f"report in {diff}")
    w = rep["window"]
    window = Window(int(w["start_ns"]), int(w["end_ns"]), w["label"], w["kind"])
    t = truth_shares(truth, window.start_ns, window.end_ns)
    m = measured_shares(trace, window)
    # the accessor must reproduce the report's breakdown (same function, same window)
    for row in rep["breakdown"]:
        if abs(row["pct"] - m.get(row["category"], 0.0)) > 0.01:
            raise AssertionError(f"segments disagree with report.json on {row['category']}: "
                                 f"{m.get(row['category'], 0.0):.2f} vs {row['pct']:.2f} %")
    labels = list(t)
    # measured top-level time the truth did not plant (>= 2 % of the window) is shown too
    planted_cats = {k.split("/")[0] for k in t}
    part_planted = {k.split("/")[0] for k in t if "/" in k}
    for k, v in sorted(m.items(), key=lambda kv: -kv[1]):
        if v < 2.0 or k in t:
            continue
        c = k.split("/")[0]
        # (a category planted as a whole - "waiting" - is not broken into measured parts beside it)
        if ("/" not in k and c not in planted_cats) or ("/" in k and c in part_planted and c not in t):
            labels.append(k)
    # a planted category row is the category: it includes the parts planted beside it, as the measured row does
    # ("waiting" + the run queue; "cpu_compute" + its page faults)
    t_row = dict(t)
    for c in [k for k in t if "/" not in k]:
        t_row[c] = t[c] + sum(v for k, v in t.items() if k.startswith(c + "/"))
    rows = []
    for k in labels:
        tp, mp = t_row.get(k, 0.0), (m.get(k, 0.0) if k != UNPLANTED else float("nan"))
        rows.append({"label": k, "truth_pct": tp, "measured_pct": mp, "diff_pts": mp - tp})
    truth_top = _top_category({k: v for k, v in t.items() if k != UNPLANTED})
    meas_top = _top_category({k: v for k, v in m.items() if "/" not in k})
    u = all_threads_cpu_pct(truth, window.start_ns, window.end_ns)
    if u is not None:              # the all-threads (union) view: every thread's on-CPU time summed
        mu = (rep.get("threads") or {}).get("all_threads_on_cpu_pct")
        mu = float("nan") if mu is None else mu
        rows.append({"label": "all threads: on CPU (sum)", "truth_pct": u, "measured_pct": mu, "diff_pts": mu - u})
    if truth.get("functions"):     # culprit check (phases named after their functions)
        rows += function_shares(rep, truth, truth["functions"])
    return {"window": w, "rows": rows, "truth_top": truth_top, "measured_top": meas_top,
            "ranking_ok": truth_top == meas_top, "verdict": rep["verdict"]["id"],
            # the truth's share per category (the ranking check's inputs: a near tie there is not a misreading)
            "truth_categories": _categories({k: v for k, v in t.items() if k != UNPLANTED}),
            "rate_hz": (rep.get("cpu_sampling") or {}).get("rate_hz"),
            # CPUs kept busy by other processes meanwhile (the machine's busy time less this run's): on a loaded
            # host native worker threads wait in the run queue, which the truth (the main thread's schedstat) cannot see
            "other_load_cpus": paths.get("other_load_cpus")}


def function_shares(rep: dict, truth: dict, names: list[str]) -> list[dict]:
    """Culprit check for programs whose phases are named after the function they run: each function's
    share of the main thread's own time (window minus run queue) in the truth vs the report's sampled
    functions table (its rows of that function and of code nested in it, e.g. ``f.<locals>.<genexpr>``) -
    both of the main thread only (zoo_asyncio_server's run_model runs in an executor thread, where its wall
    time is mostly a wait for the GIL: compared over all threads it read 91 % true for 25 % measured)."""
    w = rep["window"]
    lo, hi = int(w["start_ns"]), int(w["end_ns"])
    rq_t = sum(min(p.get("runq_ns") or 0, p["end_ns"] - p["start_ns"]) for p in truth["phases"] if p.get("main", True))
    own_t = max(1, hi - lo - rq_t)
    waiting = next((b for b in rep["breakdown"] if b["category"] == "waiting"), {"parts": []})
    rq_m = next((p["pct"] for p in waiting.get("parts", []) if p["name"] == "run_queue"), 0.0)
    own_m = max(1e-9, 100.0 - rq_m)
    main = set((rep.get("threads") or {}).get("critical") or []) or None     # the main thread's label(s)
    rows = []
    for n in names:
        t_ns = sum(min(hi, p["end_ns"]) - max(lo, p["start_ns"]) - min(p.get("runq_ns") or 0, p["end_ns"] - p["start_ns"])
                   for p in truth["phases"]
                   if p["name"] == n and p.get("main", True) and p["end_ns"] > lo and p["start_ns"] < hi)
        m = sum(f["self_pct"] for f in rep["culprits"]["functions"]
                if (f["function"] == n or f["function"].startswith(n + ".<locals>."))
                and (main is None or f.get("thread") in main))
        rows.append({"label": f"function {n}", "truth_pct": 100.0 * t_ns / own_t, "measured_pct": 100.0 * m / own_m,
                     "diff_pts": 100.0 * m / own_m - 100.0 * t_ns / own_t})
    return rows


def format_rows(res: dict) -> str:
    lines = [f"window {res['window']['kind']} {res['window']['dur_ms']:.0f} ms; verdict {res['verdict']}; "
             f"top truth {res['truth_top']} / measured {res['measured_top']} ({'ok' if res['ranking_ok'] else 'MISMATCH'})"]
    for r in res["rows"]:
        lines.append(f"  {r['label']:<44} truth {r['truth_pct']:6.1f}  inferscope {r['measured_pct']:6.1f}  "
                     f"diff {r['diff_pts']:+6.1f}")
    return "\n".join(lines)
