"""Soak of live collection: a serving-style program under `inferscope run` for minutes (issue 44 item 3).

    python bench/soak.py [--minutes 30 | --requests N] [--overhead-requests 1000] [--trace-size-mb MB]
                         [--rss-every-s 5] [--out DIR] [--json PATH]

Three runs of bench/soak_program.py (requests: the toy tokenizer on a 2-worker thread pool, a small torch
forward with torch threads 1, Python postprocessing, a few ms of sleep; ``scope("request")`` around each):
  1. base      the program alone (INFERSCOPE_ENABLED=0: ``scope`` is a no-op) for --overhead-requests;
  2. overhead  the same request count under `inferscope run`: requests/s against 1. is the overhead ratio;
  3. soak      the program under `inferscope run` for --minutes (or --requests N).
While 3. runs this script samples VmRSS of the profiled program (the child of `inferscope run`, found
through /proc/<pid>/task/<pid>/children; the collector lives in it) and of the `inferscope run` parent
every --rss-every-s, and the crash journal's size.  Recorded: RSS over time and its growth after the
first minute (after half the run when it is shorter than 2 minutes; samples up to the program's last
line: those after it, while the collector builds the trace at exit, give the exit peak apart), the kept trace's size, events,
buffer capacity and dropped events (meta.collection), "trace buffer overflow" lines on stderr and in
report.json's warnings, and the time from the program's last line (``soak_end``, its time.time()
just before it returns) to report.json's mtime and to the command's end.  The same RSS sampling is
done for run 1 (the program's own growth, without the collector).
Prints a table; --json writes every number (and the RSS samples) to a file.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROGRAM = REPO / "bench" / "soak_program.py"
OVERFLOW = "trace buffer overflow"


def vmrss_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for ln in f:
                if ln.startswith("VmRSS:"):
                    return int(ln.split()[1])
    except OSError:
        return None
    return None


def child_pid(pid: int) -> int | None:
    """The first child of ``pid`` (the profiled program under `inferscope run`), or None."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = f.read().split()
    except OSError:
        return None
    return int(kids[0]) if kids else None


def file_size(p: str) -> int:
    try:
        return os.path.getsize(p)
    except OSError:
        return 0


def parse_stdout(text: str) -> dict:
    out: dict = {"ticks": []}
    for ln in text.splitlines():
        f = ln.split()
        if not f:
            continue
        if f[0] == "soak_start":
            out["start_unix_s"] = float(f[1])
        elif f[0] == "soak_tick":
            out["ticks"].append((float(f[1]), int(f[2])))
        elif f[0] == "soak_end":
            out.update(end_unix_s=float(f[1]), requests=int(f[2]), requests_per_s=float(f[3]))
    return out


def env_for(enabled: bool, trace_size_mb: float | None) -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO / "src") + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e["INFERSCOPE_ENABLED"] = "1" if enabled else "0"
    if trace_size_mb is not None:
        e["INFERSCOPE_TRACE_SIZE_MB"] = f"{trace_size_mb:g}"
    return e


def run_sampled(cmd: list[str], env: dict, workdir: Path, every_s: float, under_run: bool,
                journal: str | None = None) -> dict:
    """Run ``cmd`` (stdout/stderr to files in workdir), sampling RSS every ``every_s``; returns the record."""
    workdir.mkdir(parents=True, exist_ok=True)
    so, se = open(workdir / "stdout.txt", "w"), open(workdir / "stderr.txt", "w")
    t0 = time.time()
    p = subprocess.Popen(cmd, env=env, stdout=so, stderr=se, cwd=workdir)
    samples, journal_max = [], 0
    prog_pid, prog_exit_unix_s, next_sample = (None if under_run else p.pid), None, 0.0
    while p.poll() is None:
        now = time.time()
        if under_run and prog_pid is None:
            prog_pid = child_pid(p.pid)
        if prog_pid is not None and prog_exit_unix_s is None and vmrss_kb(prog_pid) is None:
            prog_exit_unix_s = now   # /proc/<pid>/status of a zombie has no VmRSS line
        if now >= next_sample:
            next_sample = now + every_s
            if prog_pid is not None and prog_exit_unix_s is None:
                rss = vmrss_kb(prog_pid)
                if rss is not None:
                    samples.append({"t_s": round(now - t0, 3), "unix_s": round(now, 3), "program_rss_kb": rss,
                                    "run_parent_rss_kb": vmrss_kb(p.pid) if under_run else None})
            if journal:
                journal_max = max(journal_max, file_size(journal))
        time.sleep(0.05)
    end = time.time()
    so.close()
    se.close()
    rec = parse_stdout((workdir / "stdout.txt").read_text())
    stderr = (workdir / "stderr.txt").read_text()
    rec.update(rc=p.returncode, command_end_unix_s=end, rss_samples=samples, stderr_tail=stderr[-2000:],
               overflow_lines_stderr=sum(OVERFLOW in ln for ln in stderr.splitlines()),
               program_exit_seen_unix_s=prog_exit_unix_s, journal_max_bytes=journal_max)
    return rec


def split_at_end(samples: list[dict], end_unix_s: float) -> tuple[list[dict], list[dict]]:
    """Samples up to the program's last line (steady state) and after it (the collector building and writing
    the trace at exit: a transient, reported apart as the exit peak)."""
    return [s for s in samples if s["unix_s"] <= end_unix_s], [s for s in samples if s["unix_s"] > end_unix_s]


def rss_growth(samples: list[dict], duration_s: float) -> dict:
    """Program RSS at the first sample, at the end of the first minute (half the run if shorter than 2 min),
    the largest after that, and growth = that largest minus the RSS at that point (MB); and the least-squares
    slope of RSS over the second half of the run (MB/min: ~0 once the ring buffer is full and nothing leaks)."""
    if not samples:
        return {"samples": 0}
    mark_s = 60.0 if duration_s >= 120 else duration_s / 2
    t_first = samples[0]["t_s"]
    after = [s for s in samples if s["t_s"] - t_first >= mark_s] or samples[-1:]
    base_kb = after[0]["program_rss_kb"]
    top_kb = max(s["program_rss_kb"] for s in after)
    parents = [s["run_parent_rss_kb"] for s in samples if s.get("run_parent_rss_kb")]
    half = [s for s in samples if s["t_s"] - t_first >= (samples[-1]["t_s"] - t_first) / 2]
    slope = None
    if len(half) >= 2 and half[-1]["t_s"] > half[0]["t_s"]:
        import numpy as np
        t = np.array([s["t_s"] for s in half], dtype=float) / 60.0
        v = np.array([s["program_rss_kb"] for s in half], dtype=float) / 1024.0
        slope = float(np.polyfit(t, v, 1)[0])
    return {"samples": len(samples), "first_mb": samples[0]["program_rss_kb"] / 1024, "mark_s": mark_s,
            "at_mark_mb": base_kb / 1024, "max_after_mark_mb": top_kb / 1024,
            "last_mb": samples[-1]["program_rss_kb"] / 1024, "growth_after_mark_mb": (top_kb - base_kb) / 1024,
            "second_half_slope_mb_per_min": slope,
            "run_parent_max_mb": max(parents) / 1024 if parents else None}


def tick_rates(rec: dict) -> dict:
    """Requests/s in the first and in the last minute of the run, from the program's ticks."""
    pts = [(rec["start_unix_s"], 0)] + rec["ticks"] + [(rec["end_unix_s"], rec["requests"])]
    if pts[-1][0] - pts[0][0] < 120:
        return {}

    def rate(a, b):
        return (b[1] - a[1]) / (b[0] - a[0]) if b[0] > a[0] else None
    first = next(p for p in pts if p[0] - pts[0][0] >= 60)
    last = next(p for p in reversed(pts) if pts[-1][0] - p[0] >= 60)
    return {"first_minute_rps": rate(pts[0], first), "last_minute_rps": rate(last, pts[-1])}


def inferscope_cmd(out: Path, prog_args: list[str], keep_trace: bool) -> list[str]:
    cmd = [sys.executable, "-m", "inferscope", "run", "--report", str(out / "report.md"), "--format", "md,json"]
    if keep_trace:
        cmd += ["--trace", str(out / "trace.iscope")]
    return cmd + ["--", sys.executable, str(PROGRAM), *prog_args]


def check(rec: dict, what: str) -> None:
    if rec["rc"] != 0 or "end_unix_s" not in rec:
        sys.exit(f"soak: the {what} run failed (exit {rec['rc']}): {rec['stderr_tail'][-600:]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Soak of live collection (see the module docstring).")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--minutes", type=float, default=30.0, help="soak duration (default 30; CI 1)")
    g.add_argument("--requests", type=int, help="soak for this many requests instead of --minutes")
    ap.add_argument("--overhead-requests", type=int, default=1000, help="requests of the base / overhead runs")
    ap.add_argument("--trace-size-mb", type=float, default=None, help="INFERSCOPE_TRACE_SIZE_MB (default: the collector's)")
    ap.add_argument("--rss-every-s", type=float, default=5.0)
    ap.add_argument("--tick-s", type=float, default=10.0, help="the program's progress line period")
    ap.add_argument("--out", help="folder for the runs' outputs (default: a new temporary folder)")
    ap.add_argument("--json", help="write every number to this file")
    a = ap.parse_args(argv)
    out = Path(a.out or tempfile.mkdtemp(prefix="inferscope-soak-")).resolve()
    tick = ["--tick-s", f"{a.tick_s:g}"]
    over = ["--requests", str(a.overhead_requests), *tick]

    base = run_sampled([sys.executable, str(PROGRAM), *over], env_for(False, a.trace_size_mb),
                       out / "base", a.rss_every_s, under_run=False)
    check(base, "base")
    ovh = run_sampled(inferscope_cmd(out / "overhead", over, False), env_for(True, a.trace_size_mb),
                      out / "overhead", a.rss_every_s, under_run=True)
    check(ovh, "overhead")
    soak_args = (["--requests", str(a.requests)] if a.requests is not None else ["--seconds", f"{a.minutes * 60:g}"])
    sd = out / "soak"
    soak = run_sampled(inferscope_cmd(sd, soak_args + tick, True), env_for(True, a.trace_size_mb), sd,
                       a.rss_every_s, under_run=True, journal=str(sd / "trace.iscope.journal"))
    check(soak, "soak")

    sys.path.insert(0, str(REPO / "src"))
    from inferscope.trace import native
    tr = native.load(sd / "trace.iscope")
    coll = tr.meta.get("collection", {})
    rep = json.loads((sd / "report.json").read_text())
    duration_s = soak["end_unix_s"] - soak["start_unix_s"]
    steady, at_exit = split_at_end(soak["rss_samples"], soak["end_unix_s"])
    res = {
        "out": str(out), "duration_s": duration_s, "requests": soak["requests"], "requests_per_s": soak["requests_per_s"],
        "rates": tick_rates(soak),
        "rss": rss_growth(steady, duration_s),
        "exit_peak_rss_mb": max((x["program_rss_kb"] for x in at_exit), default=0) / 1024 or None,
        "base_rss": rss_growth(split_at_end(base["rss_samples"], base["end_unix_s"])[0],
                               base["end_unix_s"] - base["start_unix_s"]),
        "trace_bytes": file_size(str(sd / "trace.iscope")), "trace_events": int(tr.n_events),
        "buffer_capacity_events": coll.get("buffer_capacity_events"), "trace_size_mb": coll.get("trace_size_mb"),
        "dropped_events": coll.get("dropped_events"), "journal_max_bytes": soak["journal_max_bytes"],
        "overflow_lines_stderr": soak["overflow_lines_stderr"],
        "overflow_warnings_report": sum(OVERFLOW in w for w in rep.get("warnings", [])),
        "exit_to_report_json_s": (sd / "report.json").stat().st_mtime - soak["end_unix_s"],
        "exit_to_command_end_s": soak["command_end_unix_s"] - soak["end_unix_s"],
        "process_exit_to_command_end_s": (soak["command_end_unix_s"] - soak["program_exit_seen_unix_s"]
                                          if soak["program_exit_seen_unix_s"] else None),
        "overhead": {"requests": a.overhead_requests, "base_rps": base["requests_per_s"],
                     "inferscope_rps": ovh["requests_per_s"],
                     "throughput_ratio": ovh["requests_per_s"] / base["requests_per_s"],
                     "soak_vs_base_ratio": soak["requests_per_s"] / base["requests_per_s"]},
        "rss_samples": soak["rss_samples"], "base_rss_samples": base["rss_samples"], "ticks": soak["ticks"],
    }
    print_table(res)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 0


def print_table(r: dict) -> None:
    rss, b, o = r["rss"], r["base_rss"], r["overhead"]

    def f(x, fmt=".1f"):
        return "-" if x is None else format(x, fmt)
    rows = [
        ("soak", f"{r['duration_s']:.0f} s, {r['requests']} requests, {r['requests_per_s']:.1f} requests/s"),
        ("requests/s first / last minute", f"{f(r['rates'].get('first_minute_rps'))} / {f(r['rates'].get('last_minute_rps'))}"),
        ("program RSS first / at mark / max after / last (MB)",
         f"{f(rss.get('first_mb'))} / {f(rss.get('at_mark_mb'))} / {f(rss.get('max_after_mark_mb'))} / {f(rss.get('last_mb'))}"
         f" ({rss['samples']} samples, mark {f(rss.get('mark_s'), '.0f')} s)"),
        ("program RSS growth after the mark (MB)", f"{f(rss.get('growth_after_mark_mb'))} "
         f"(uninstrumented, {o['requests']} requests: {f(b.get('growth_after_mark_mb'))})"),
        ("program RSS while writing the trace at exit, max (MB)", f(r["exit_peak_rss_mb"])),
        ("program RSS slope over the second half (MB/min)", f(rss.get("second_half_slope_mb_per_min"), ".2f")),
        ("`inferscope run` parent RSS max (MB)", f(rss.get("run_parent_max_mb"))),
        ("trace", f"{r['trace_bytes'] / 1e6:.2f} MB, {r['trace_events']} events; buffer {f(r['trace_size_mb'], 'g')} MB"
                  f" ~ {r['buffer_capacity_events']} events; crash journal max {r['journal_max_bytes'] / 1e6:.2f} MB"),
        ("dropped events", str(r["dropped_events"])),
        ("overflow lines: stderr / report.json warnings", f"{r['overflow_lines_stderr']} / {r['overflow_warnings_report']}"),
        ("program's last line -> report.json written (s)", f"{r['exit_to_report_json_s']:.2f}"),
        ("program's last line -> command end (s)", f"{r['exit_to_command_end_s']:.2f}"),
        (f"overhead ({o['requests']} requests): base / inferscope requests/s",
         f"{o['base_rps']:.1f} / {o['inferscope_rps']:.1f} = x{o['throughput_ratio']:.3f}"),
        ("soak requests/s vs base", f"x{o['soak_vs_base_ratio']:.3f}"),
    ]
    w = max(len(k) for k, _ in rows)
    print(f"soak folder: {r['out']}")
    for k, v in rows:
        print(f"{k:<{w}}  {v}")


if __name__ == "__main__":
    sys.exit(main())
