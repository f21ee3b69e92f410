"""Sampler choice (issue 23 item 2): InferScope's live sampler vs py-spy and austin on the planted zoo.

    python bench/bench_samplers.py [--repeats 3] [--programs numpy_mlp,gil_contention,...] [--rate 200]
                                   [--pyspy PATH] [--austin PATH] [--workdir DIR]
    python bench/bench_samplers.py --from-results DIR/results.json     # re-print a run's tables

Per program and repeat, in an interleaved order (every mode of every program once, then again):
  plain     the program alone (through the window wrapper below, no sampler);
  inferscope  ``inferscope run`` as today (examples/zoo/zoo_harness.py: report window, breakdown shares);
  py-spy    ``py-spy record --native --threads --full-filenames -r RATE -f raw -- python <wrapper> prog``
            (py-spy is the parent: no attach permission needed).  Its main-thread stacks are classified
            with InferScope's own rules (collect/pyspy.py: perfip.role_of for native frames,
            classify._file_domain + name_domain for Python frames); a stack is in the window when the
            program's module-level frame is on a line of its ``with scope(...)`` block; idle samples
            are dropped by py-spy (no ``--idle``), so waiting = the window's expected samples
            (RATE x |W|) not seen active.
  austin    ``austin -f -i 1/RATE`` as parent (when found: --austin, $INFERSCOPE_AUSTIN, PATH): per-sample
            wall time and idle flag, Python frames only; time-weighted shares, idle -> waiting.
The wrapper (``--wrap``) records the outermost ``inferscope.scope()`` window (perf_counter_ns) and runs
the program with runpy.  Truth: the program's self-timed phases (examples/zoo/_truth.py) over each
sampler's own window (InferScope: the report window; py-spy/plain: the scope window).
Errors are paired with each run's own truth; py-spy and austin (no run-queue notion) are also compared by
category with the truth whose run-queue delay stays in the phases' classes.
Overhead: |window| under the sampler / |window| of the plain runs (median), i.e. the slowdown of the
program's measured part, and the CPU seconds of all processes of a run beyond the plain run's.
Prints the load average before and after (shared 2-core machine).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "examples" / "zoo"

PROGRAMS = {
    "py_between_ops_1.7ms": ("zoo_python_between_ops.py", ["--gap-ms", "1.7"]),
    "numpy_mlp": ("zoo_numpy_mlp.py", []),
    "tokenizers_serial": ("zoo_tokenizers.py", []),
    "gil_contention": ("zoo_gil.py", []),
    "tokenize_bound": ("tokenize_bound.py", []),
    "compute_bound": ("compute_bound.py", []),
    "disk_io": ("zoo_disk_io.py", []),
}
# programs without a self-timed truth: the planted top category (examples/zoo/README.md)
PLANTED_TOP = {"tokenize_bound": "cpu_preprocessing", "compute_bound": "cpu_compute"}


# ---------------------------------------------------------------------------------------------
def _wrap(argv: list[str]) -> None:
    """Run a program as __main__, recording the outermost scope() window to $BENCH_WINDOW."""
    import contextlib

    import inferscope
    prog = argv[0]
    win: dict = {}
    depth = [0]

    @contextlib.contextmanager
    def scope(name=None, *a, **k):
        if depth[0] == 0:
            win.setdefault("start_ns", time.perf_counter_ns())
        depth[0] += 1
        try:
            yield
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                win["end_ns"] = time.perf_counter_ns()

    inferscope.scope = scope
    sys.argv = list(argv)
    sys.path.insert(0, str(Path(prog).resolve().parent))
    try:
        runpy.run_path(prog, run_name="__main__")
    finally:
        out = os.environ.get("BENCH_WINDOW")
        if out:
            Path(out).write_text(json.dumps(win))


def scope_lines(script: Path) -> tuple[int, int]:
    """Line range of the module-level ``with scope(...)`` block of a zoo program."""
    tree = ast.parse(script.read_text())
    for node in tree.body:
        if isinstance(node, ast.With):
            for it in node.items:
                c = it.context_expr
                if isinstance(c, ast.Call) and getattr(c.func, "id", getattr(c.func, "attr", "")) == "scope":
                    return node.lineno, node.end_lineno
    raise ValueError(f"{script}: no module-level with scope(...)")


def _child_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _env(truth: Path, window: Path | None = None) -> dict:
    e = dict(os.environ, ZOO_TRUTH=str(truth),
             PYTHONPATH=os.pathsep.join([str(ZOO), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    if window is not None:
        e["BENCH_WINDOW"] = str(window)
    return e


def run_plain(script, args, wd: Path, tag: str) -> dict:
    tru, win = wd / f"{tag}.truth.json", wd / f"{tag}.win.json"
    cmd = [sys.executable, __file__, "--wrap", str(ZOO / script), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(tru, win), cwd=str(wd), timeout=600)
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    w = json.loads(win.read_text())
    return {"window_ns": w["end_ns"] - w["start_ns"]}


def run_inferscope(script, args, wd: Path, tag: str) -> dict:
    sys.path.insert(0, str(ZOO))
    import zoo_harness as H
    if "_truth" in (ZOO / script).read_text():
        p = H.run_program(script, wd, args, tag=tag)
    else:   # no self-timed truth (tokenize_bound, compute_bound): the harness would require one
        stem = f"{Path(script).stem}_{tag}"
        p = {"report": wd / f"{stem}.json", "trace": wd / f"{stem}.iscope", "truth": wd / f"{stem}.truth.json"}
        cmd = [sys.executable, "-m", "inferscope", "run", "--format", "json", "--report", str(p["report"]),
               "--trace", str(p["trace"]), "--", sys.executable, str(ZOO / script), *args]
        r = subprocess.run(cmd, capture_output=True, text=True, env=_env(p["truth"]), cwd=str(wd), timeout=600)
        if r.returncode or not p["report"].exists():
            raise RuntimeError(r.stderr[-2000:])
    rep = json.loads(Path(p["report"]).read_text())
    w = rep["window"]
    from inferscope.analyze.window import Window
    from inferscope.ingest import load_trace
    window = Window(int(w["start_ns"]), int(w["end_ns"]), w["label"], w["kind"])
    m = H.measured_shares(load_trace(p["trace"]), window)
    truth = json.loads(Path(p["truth"]).read_text()) if Path(p["truth"]).exists() else None
    t = H.truth_shares(truth, window.start_ns, window.end_ns) if truth and truth["phases"] else None
    return {"window_ns": window.end_ns - window.start_ns, "shares": m, "truth": t,
            "rate_hz": (rep.get("cpu_sampling") or {}).get("rate_hz")}


def run_pyspy(pyspy: str, rate: int, script, args, wd: Path, tag: str) -> dict:
    from inferscope.collect import pyspy as P
    sys.path.insert(0, str(ZOO))
    import zoo_harness as H
    tru, win, raw = wd / f"{tag}.truth.json", wd / f"{tag}.win.json", wd / f"{tag}.raw"
    for f in (tru, win, raw):
        f.unlink(missing_ok=True)
    prog = ZOO / script
    cmd = [pyspy, "record", "--native", "--threads", "--full-filenames", "-r", str(rate), "-f", "raw",
           "-o", str(raw), "--", sys.executable, __file__, "--wrap", str(prog), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(tru, win), cwd=str(wd), timeout=600)
    if r.returncode or not raw.exists():
        raise RuntimeError(f"py-spy rc={r.returncode}: {r.stdout[-1000:]} {r.stderr[-1000:]}")
    w = json.loads(win.read_text())
    lo, hi = scope_lines(prog)
    progs = {str(prog), os.path.realpath(prog)}

    def keep(frames):
        for name, fn, line in reversed(frames):     # outermost first: the program's module frame
            if fn in progs and name == "<module>":
                return lo <= line <= hi
        return False

    # the main thread: the stacks whose outermost Python frame is the program's module frame
    counts: dict[str, int] = {}
    with open(raw, encoding="utf-8", errors="replace") as f:
        for line in f:
            rr = P.parse_raw_line(line)
            if rr is None or not keep(rr[1]):
                continue
            k = P.classify_stack(rr[1])
            counts[k] = counts.get(k, 0) + rr[2]
    dur = w["end_ns"] - w["start_ns"]
    expected = rate * dur / 1e9
    active = sum(counts.values())
    denom = max(expected, active, 1)
    shares: dict[str, float] = {}
    for cls, n in counts.items():
        lab = P.CLASS_LABEL[cls]
        shares[lab] = shares.get(lab, 0.0) + 100.0 * n / denom
    if expected > active:
        shares["waiting/off_cpu"] = shares.get("waiting/off_cpu", 0.0) + 100.0 * (expected - active) / denom
    _add_categories(shares)
    t, tn = _truths(tru, w["start_ns"], w["end_ns"], H)
    return {"window_ns": dur, "shares": shares, "truth": t, "truth_norq": tn, "rate_hz": active / (dur / 1e9) if dur else 0,
            "expected": expected, "active": active}


def _add_categories(shares: dict) -> dict:
    for k in list(shares):
        if "/" in k:
            c = k.split("/")[0]
            shares[c] = shares.get(c, 0.0) + shares[k]
    return shares


def run_austin(austin: str, rate: int, script, args, wd: Path, tag: str) -> dict:
    """``austin -f -i 1/RATE`` (full mode: per-sample wall time and idle flag; Python frames only);
    time-weighted shares of the window's main-thread samples, idle samples -> waiting/off_cpu."""
    from inferscope.collect import pyspy as P
    sys.path.insert(0, str(ZOO))
    import zoo_harness as H
    tru, win, out = wd / f"{tag}.truth.json", wd / f"{tag}.win.json", wd / f"{tag}.austin"
    for f in (tru, win, out):
        f.unlink(missing_ok=True)
    prog = ZOO / script
    cmd = [austin, "-f", "-i", f"{int(1e6 / rate)}us", "-o", str(out),
           sys.executable, __file__, "--wrap", str(prog), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(tru, win), cwd=str(wd), timeout=600)
    if r.returncode or not out.exists():
        raise RuntimeError(f"austin rc={r.returncode}: {r.stdout[-500:]} {r.stderr[-500:]}")
    w = json.loads(win.read_text())
    lo, hi = scope_lines(prog)
    progs = {str(prog), os.path.realpath(prog)}
    by: dict[str, int] = {}
    n = 0
    with open(out, encoding="utf-8", errors="replace") as f:
        for line in f:
            rr = P.parse_austin_line(line)
            if rr is None:
                continue
            _pid, _tid, frames, t_us, idle = rr
            mod = [ln for name, fn, ln in frames if fn in progs and name == "<module>"]
            if not mod or not lo <= mod[-1] <= hi:
                continue
            k = "waiting" if idle else P.classify_stack(frames)
            by[k] = by.get(k, 0) + t_us
            n += 1
    tot = max(1, sum(by.values()))
    shares: dict[str, float] = {}
    for cls, v in by.items():
        lab = P.CLASS_LABEL[cls]
        shares[lab] = shares.get(lab, 0.0) + 100.0 * v / tot
    dur = w["end_ns"] - w["start_ns"]
    t, tn = _truths(tru, w["start_ns"], w["end_ns"], H)
    return {"window_ns": dur, "shares": _add_categories(shares), "truth": t, "truth_norq": tn, "rate_hz": n / (dur / 1e9) if dur else 0}


def _cats(shares: dict) -> dict:
    """Per category; ``shares`` may hold a category and its parts (counted once) or parts only."""
    cats: dict[str, float] = {k: v for k, v in shares.items() if "/" not in k and k != "unplanted"}
    parts: dict[str, float] = {}
    for k, v in shares.items():
        if "/" in k and k.split("/")[0] not in cats:
            c = k.split("/")[0]
            parts[c] = parts.get(c, 0.0) + v
    cats.update(parts)
    return cats


def _top(shares: dict) -> str:
    cats = _cats(shares)
    return max(cats, key=cats.get) if cats else ""


def _truths(tru: Path, lo: int, hi: int, H):
    """(truth shares, truth shares with each phase's run-queue delay left in the phase's class) or Nones."""
    truth = json.loads(tru.read_text()) if tru.exists() else None
    if not truth or not truth["phases"]:
        return None, None
    norq = dict(truth, phases=[dict(ph, runq_ns=None) for ph in truth["phases"]])
    return H.truth_shares(truth, lo, hi), H.truth_shares(norq, lo, hi)


def _truth_rows(t: dict) -> dict:
    out = dict(t)
    if "waiting/run_queue" in t and "waiting" in t:
        out["waiting"] = t["waiting"] + t["waiting/run_queue"]
        out.pop("waiting/run_queue")
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--wrap":
        _wrap(argv[1:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--rate", type=int, default=200, help="py-spy rate (InferScope's default is 200 Hz)")
    ap.add_argument("--pyspy", default=None)
    ap.add_argument("--austin", default=None, help="austin executable (3.6: glibc 2.17+); default PATH")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--from-results", default=None, help="re-print the tables of a previous run's results.json")
    a = ap.parse_args(argv)
    if a.from_results:
        res = json.loads(Path(a.from_results).read_text())
        names = list(res)
        samplers = [m for m in next(iter(res.values())) if m != "plain"]
        _fill_norq(res, Path(a.from_results).parent)
        report(res, names, samplers)
        return 0
    sys.path.insert(0, str(ROOT / "src"))
    from inferscope.collect.pyspy import find_austin, find_pyspy
    pyspy = a.pyspy or find_pyspy()
    austin = a.austin or find_austin()
    if not pyspy:
        print("bench_samplers: py-spy not found (pip install py-spy, or --pyspy PATH / $INFERSCOPE_PYSPY)",
              file=sys.stderr)
        return 2
    names = [n.strip() for n in a.programs.split(",") if n.strip()]
    wd = Path(a.workdir or tempfile.mkdtemp(prefix="bench_samplers_"))
    wd.mkdir(parents=True, exist_ok=True)
    ver = subprocess.run([pyspy, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs; "
          f"repeats {a.repeats}; {ver} at {a.rate} Hz; workdir {wd}", flush=True)
    SAMPLERS = ["inferscope", "py-spy"] + (["austin"] if austin else [])
    res: dict = {n: {m: [] for m in ["plain"] + SAMPLERS} for n in names}
    for r in range(a.repeats):
        for n in names:
            script, args = PROGRAMS[n]
            modes = [("plain", lambda: run_plain(script, args, wd, f"{n}_plain_{r}")),
                     ("inferscope", lambda: run_inferscope(script, args, wd, f"{n}_is_{r}")),
                     ("py-spy", lambda: run_pyspy(pyspy, a.rate, script, args, wd, f"{n}_pyspy_{r}"))]
            if austin:
                modes.append(("austin", lambda: run_austin(austin, a.rate, script, args, wd, f"{n}_austin_{r}")))
            modes = modes[r % len(modes):] + modes[:r % len(modes)]
            for mode, fn in modes:
                try:
                    c0 = _child_cpu_s()
                    out = fn()
                    # CPU of every process of the run (program + external sampler; inferscope: incl. its
                    # report generation)
                    out["cpu_s"] = _child_cpu_s() - c0
                    res[n][mode].append(out)
                except Exception as e:
                    print(f"{n} {mode} run {r + 1}: FAILED: {str(e).strip().splitlines()[-1] if str(e).strip() else e}",
                          flush=True)
            print(f"  done {n} repeat {r + 1}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    (wd / "results.json").write_text(json.dumps(res, default=str))
    report(res, names, SAMPLERS)
    return 0


def _fill_norq(res: dict, wd: Path) -> None:
    """results.json of a run before truth_norq was recorded: recompute it from the run's files."""
    sys.path.insert(0, str(ZOO))
    import zoo_harness as H
    for n, R in res.items():
        for mode, tag in (("py-spy", "pyspy"), ("austin", "austin")):
            for r, x in enumerate(R.get(mode, [])):
                if "truth_norq" not in x:
                    win = wd / f"{n}_{tag}_{r}.win.json"
                    if win.exists():
                        w = json.loads(win.read_text())
                        x["truth_norq"] = _truths(wd / f"{n}_{tag}_{r}.truth.json", w["start_ns"], w["end_ns"], H)[1]


def report(res: dict, names: list, SAMPLERS: list) -> None:
    hdr = " | ".join(f"{m} % (median, min-max)" for m in SAMPLERS)
    print(f"| program | class | truth % | {hdr} |")
    print("|---|---|---|" + "---|" * len(SAMPLERS))

    def fmt(vals):
        if not vals:
            return "-"
        return f"{statistics.median(vals):.1f} ({min(vals):.1f}-{max(vals):.1f})"

    summary = []
    for n in names:
        R = res[n]
        runs = [x for m in SAMPLERS for x in R[m]]
        tr = [x["truth"] for x in runs if x.get("truth")]
        truth = _truth_rows(tr[0]) if tr else {}
        labels = [k for k in truth if k != "unplanted"]
        # measured labels >= 3 % in any sampler that the truth did not plant
        for x in runs:
            for k, v in x["shares"].items():
                if v < 3.0 or k in labels:
                    continue
                if "/" in k and k.split("/")[0] in labels:
                    continue
                if "/" not in k and any(lb.startswith(k + "/") for lb in labels):
                    continue
                if "/" not in k and any(kk.startswith(k + "/") and vv >= 3.0 for kk, vv in x["shares"].items()):
                    continue
                labels.append(k)
        labels = list(dict.fromkeys(labels))
        err = {m: [] for m in SAMPLERS}
        for k in labels:
            tv = [_truth_rows(x["truth"]).get(k, 0.0) for x in runs if x.get("truth")]
            tcell = f"{statistics.median(tv):.1f}" if tv else (f"top: {PLANTED_TOP.get(n, '?')}" if k == labels[0] else "")
            cells = []
            for mode in SAMPLERS:
                vals = [x["shares"].get(k, 0.0) for x in R[mode]]
                cells.append(fmt(vals))
                # paired with each run's own truth (the run-queue share moves with the load)
                d = [x["shares"].get(k, 0.0) - _truth_rows(x["truth"]).get(k, 0.0) for x in R[mode] if x.get("truth")]
                if d:
                    err[mode].append(abs(statistics.median(d)))
            print(f"| {n} | {k} | {tcell} | {' | '.join(cells)} |")
        def med_top(key, rs):
            ts = [_cats(_truth_rows(x[key])) for x in rs if x.get(key)]
            if not ts:
                return PLANTED_TOP.get(n)
            ks = set().union(*ts)
            return max(ks, key=lambda k: statistics.median([t.get(k, 0.0) for t in ts]))
        # the truth's top category (median over the runs); py-spy and austin cannot see the run queue, so
        # theirs is ranked against the truth with the run-queue delay left in the phases' classes
        wants = {m: med_top("truth" if m == "inferscope" else "truth_norq", R[m] or runs) for m in SAMPLERS}
        want = "/".join(dict.fromkeys(wants.values()))
        tops = {m: f"{sum(_top(x['shares']) == wants[m] for x in R[m])}/{len(R[m])}" for m in SAMPLERS}
        pl = [x["window_ns"] for x in R["plain"]]
        ov = {m: (statistics.median([x["window_ns"] for x in R[m]]) / statistics.median(pl)) if R[m] and pl
              else float("nan") for m in SAMPLERS}
        hz = {m: statistics.median([x["rate_hz"] or 0 for x in R[m]]) if R[m] else 0 for m in SAMPLERS}
        cpu = {m: statistics.median([x["cpu_s"] for x in R[m]]) - statistics.median([x["cpu_s"] for x in R["plain"]])
               if R[m] and R["plain"] and all("cpu_s" in x for x in R[m] + R["plain"]) else float("nan")
               for m in SAMPLERS}
        # py-spy / austin have no run-queue notion (a runnable thread is active): their error against the
        # truth with each phase's run-queue delay left in the phase's class
        errq = {}
        for m in SAMPLERS:
            key = "truth" if m == "inferscope" else "truth_norq"
            pairs = [(_cats(x["shares"]), _cats(_truth_rows(x[key]))) for x in R[m] if x.get(key)]
            if not pairs:
                continue
            ks = set().union(*(a for a, _ in pairs), *(b for _, b in pairs))
            errq[m] = max(abs(statistics.median([a.get(k, 0.0) - b.get(k, 0.0) for a, b in pairs])) for k in ks)
        summary.append((n, {m: max(err[m]) if err[m] else float("nan") for m in SAMPLERS}, tops, ov, hz,
                        statistics.median(pl) / 1e6 if pl else float("nan"), want, errq, cpu))
    print()
    sl = " / ".join(SAMPLERS)
    print(f"| program | plain window ms | max abs err pts, by part: {sl} | max abs err pts, by category (py-spy, austin: "
          f"run queue in the phases' classes): {sl} | top category ({sl}) right | window ratio {sl} | Hz {sl} "
          f"| extra CPU s vs plain {sl} |")
    print("|---|---|---|---|---|---|---|---|")
    for n, e, tops, ov, hz, plms, want, errq, cpu in summary:
        print(f"| {n} | {plms:.0f} | {' / '.join(f'{e[m]:.1f}' for m in SAMPLERS)} | "
              f"{' / '.join(f'{errq[m]:.1f}' if m in errq else '-' for m in SAMPLERS)} | {want}: "
              f"{' / '.join(tops[m] for m in SAMPLERS)} | {' / '.join(f'{ov[m]:.2f}' for m in SAMPLERS)} "
              f"| {' / '.join(f'{hz[m]:.0f}' for m in SAMPLERS)} | {' / '.join(f'{cpu[m]:.2f}' for m in SAMPLERS)} |")


if __name__ == "__main__":
    sys.exit(main())
