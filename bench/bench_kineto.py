"""Kineto import benchmark: decode floor vs ``kineto.load`` vs full ``inferscope analyze``.

    .venv/bin/python bench/bench_kineto.py [--repeat 3] [--events 2000000] [--skip-synthetic] [--quick]

For the largest shared Kineto trace and for a synthetic trace of >= --events events (the
same real trace tiled in time, written uncompressed to a temp dir), every measured step
runs in a fresh subprocess (so peak RSS = ru_maxrss of that step alone, and no warm
caches leak between steps), --repeat times; the median is reported.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("INFERSCOPE_SHARED_TRACES", REPO.parent / "shared" / "traces")) / "kineto"

# ----------------------------------------------------------------------------- child side
_CHILD = r"""
import json, resource, sys, time, zlib
sys.path.insert(0, {src!r})
step, path = sys.argv[1], sys.argv[2]

def read_bytes(p):
    with open(p, 'rb') as f:
        data = f.read()
    if data[:2] == b'\x1f\x8b':
        data = zlib.decompress(data, 47)
    return data

out = {{}}
if step == 'baseline':
    import numpy, msgspec, orjson
    from inferscope.ingest import kineto
    t = 0.0
elif step == 'gunzip':
    with open(path, 'rb') as f:
        raw = f.read()
    t0 = time.perf_counter()
    data = zlib.decompress(raw, 47) if raw[:2] == b'\x1f\x8b' else raw
    t = time.perf_counter() - t0
    out['bytes'] = len(data)
elif step in ('orjson', 'msgspec'):
    import orjson, msgspec
    data = read_bytes(path)
    t0 = time.perf_counter()
    obj = orjson.loads(data) if step == 'orjson' else msgspec.json.decode(data)
    t = time.perf_counter() - t0
    ev = obj['traceEvents'] if isinstance(obj, dict) else obj
    out['events'] = len(ev)
elif step == 'structs':
    # the bare decode floor: read + inflate + msgspec-decode into the importer's own Structs, nothing else
    from inferscope.ingest import kineto
    t0 = time.perf_counter()
    data = read_bytes(path)
    obj = kineto._TOP_DEC.decode(data)
    t = time.perf_counter() - t0
    out['events'] = len(obj.traceEvents)
elif step == 'load':
    from inferscope.ingest import kineto
    t0 = time.perf_counter()
    tr = kineto.load(path)
    t = time.perf_counter() - t0
    out['spans'] = len(tr.spans); out['flows'] = len(tr.flows); out['counters'] = len(tr.counters)
elif step == 'analyze':
    import tempfile
    from inferscope import cli
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        rc = cli.main(['analyze', path, '-o', d, '-q'])
        t = time.perf_counter() - t0
    out['rc'] = rc
elif step == 'stages':
    # the analyze command's stages in one process: peak RSS (ru_maxrss) after each, and its time
    import pathlib, tempfile
    from inferscope.ingest import load_trace
    from inferscope.analyze.pipeline import analyze_report
    from inferscope.outputs import resolve_outputs, write_reports
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        tr = load_trace(path)
        t1 = time.perf_counter()
        out['load_s'], out['load_mb'] = t1 - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        res = analyze_report(tr)
        t2 = time.perf_counter()
        out['analyses_s'], out['analyses_mb'] = t2 - t1, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        write_reports(res, tr, resolve_outputs(d, None), pathlib.Path(d), [path])
        t = time.perf_counter() - t0
        out['render_s'], out['render_mb'] = t - (t2 - t0), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
elif step == 'export':
    import os, tempfile
    from inferscope import cli
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        rc = cli.main(['export', path, '-o', os.path.join(d, 'timeline.json.gz'), '-q'])
        t = time.perf_counter() - t0
        out['gz_bytes'] = os.path.getsize(os.path.join(d, 'timeline.json.gz'))
    out['rc'] = rc
out['seconds'] = t
out['maxrss_mb'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
print('@@' + json.dumps(out))
"""


def run_step(step: str, path: Path, repeat: int, src: Path = REPO / "src") -> dict:
    code = _CHILD.format(src=str(src))
    runs = []
    for _ in range(repeat):
        p = subprocess.run([sys.executable, "-c", code, step, str(path)], capture_output=True, text=True)
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("@@")]
        if p.returncode != 0 or not line:
            err = (p.stderr.strip().splitlines() or ["?"])[-1]
            return {"error": err}
        runs.append(json.loads(line[-1][2:]))
    res = dict(runs[-1])
    res["seconds"] = statistics.median(r["seconds"] for r in runs)
    res["maxrss_mb"] = max(r["maxrss_mb"] for r in runs)
    res["all_seconds"] = [round(r["seconds"], 4) for r in runs]
    return res


def has_pipeline() -> bool:
    code = ("import sys; sys.path.insert(0, %r); from inferscope.analyze import pipeline; "
            "print(hasattr(pipeline, 'analyze'))" % str(REPO / "src"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return p.returncode == 0 and p.stdout.strip().endswith("True")


# ----------------------------------------------------------------------------- synthetic trace
def make_synthetic(src: Path, target_events: int, out: Path) -> int:
    """Tile a real trace in time: repeat its traceEvents shifted by its duration, with
    correlation / External id / flow ids offset so they stay unique.  Streams the output,
    one copy in memory at a time.  Returns the number of events written."""
    import gzip
    import orjson
    with gzip.open(src, "rb") if src.suffix == ".gz" else open(src, "rb") as f:
        d = orjson.loads(f.read())
    evs = d["traceEvents"]
    meta = [e for e in evs if e.get("ph") == "M"]
    body = [e for e in evs if e.get("ph") != "M" and e.get("cat") != "Trace"]
    t0 = min(e["ts"] for e in body if "ts" in e)
    t1 = max(e["ts"] + e.get("dur", 0) for e in body if "ts" in e)
    shift = (t1 - t0) + 1000  # us; integers stay integers
    max_id = 0
    for e in body:
        a = e.get("args") or {}
        for k in ("correlation", "External id"):
            if isinstance(a.get(k), int):
                max_id = max(max_id, a[k])
        if isinstance(e.get("id"), int):
            max_id = max(max_id, e["id"])
    id_step = max_id + 1
    copies = max(1, -(-(target_events - len(meta)) // len(body)))
    head = {k: v for k, v in d.items() if k in ("schemaVersion", "deviceProperties")}
    n = 0
    with open(out, "wb") as f:
        f.write(orjson.dumps(head)[:-1] + b', "traceEvents": [')
        f.write(b",".join(orjson.dumps(e) for e in meta))
        n += len(meta)
        for c in range(copies):
            chunk = []
            for e in body:
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = e["ts"] + c * shift
                if isinstance(e.get("id"), int):
                    e2["id"] = e["id"] + c * id_step
                a = e.get("args")
                if a and ("correlation" in a or "External id" in a):
                    a2 = dict(a)
                    for k in ("correlation", "External id"):
                        if isinstance(a.get(k), int):
                            a2[k] = a[k] + c * id_step
                    e2["args"] = a2
                chunk.append(orjson.dumps(e2))
            f.write(b"," + b",".join(chunk))
            n += len(chunk)
        f.write(b"]}")
    return n


# ----------------------------------------------------------------------------- report
def fmt_s(x):
    return f"{x * 1000:9.1f} ms" if x is not None else "        n/a"


RSS_TARGET_MB = 630      # issue 13: one fifth of HTA 0.5.0's 3.1 GB on 2.18M events
WALL_TARGET_X = 2.0      # issue 13: full analyze within 2x of the bare decode floor


def bench_one(label: str, path: Path, repeat: int, analyze: bool, compare_src: Path | None = None,
              targets: bool = False, quick: bool = False) -> dict:
    print(f"\n== {label}: {path.name} ({path.stat().st_size / 1e6:.1f} MB on disk)", flush=True)
    steps = ["baseline", "gunzip"] + ([] if quick else ["orjson", "msgspec"]) + ["structs", "load"] + \
        (["stages", "analyze"] + ([] if quick else ["export"]) if analyze else [])
    r: dict = {s: [] for s in steps}
    r.update({"old_" + s: [] for s in ("load", "analyze") if compare_src and s in steps})
    for _ in range(repeat):   # interleaved: every step once per round, so load drifts hit all alike
        for s in list(r):
            src = compare_src if s.startswith("old_") else REPO / "src"
            r[s].append(run_step(s[4:] if s.startswith("old_") else s, path, 1, src))
    for s, runs in list(r.items()):
        bad = [x for x in runs if "error" in x]
        if bad:
            r[s] = bad[0]
            continue
        res = dict(runs[-1])
        res["seconds"] = statistics.median(x["seconds"] for x in runs)
        res["maxrss_mb"] = max(x["maxrss_mb"] for x in runs)
        res["all_seconds"] = [round(x["seconds"], 3) for x in runs]
        r[s] = res
    nbytes = r["gunzip"].get("bytes", 0)
    events = (r.get("orjson", {}).get("events") or r.get("msgspec", {}).get("events")
              or r["structs"].get("events") or 0)
    # generic decode: the faster of orjson / msgspec (with --quick, neither runs: the FLOOR stands in)
    floor_name = "structs" if quick else min(("orjson", "msgspec"), key=lambda k: r[k].get("seconds", 1e9))
    floor = r[floor_name]["seconds"]
    base = r["baseline"]["maxrss_mb"]
    print(f"   bytes (uncompressed)   {nbytes:>12,d}")
    print(f"   events (traceEvents)   {events:>12,d}")
    print(f"   python+libs baseline   {'':>9s}    peak {base:7.0f} MB")
    struct_floor = r["structs"].get("seconds")
    for step, what in [("gunzip", "gunzip"), ("orjson", "orjson.loads"), ("msgspec", "msgspec.json.decode"),
                       ("structs", "FLOOR read+inflate+decode to Structs"),
                       ("load", "kineto.load (read+gunzip+decode+build)"), ("stages", "load+analyses+md/json/csv in-process"),
                       ("analyze", "full analyze (cli, md/json/csv)"),
                       ("export", "export -o timeline.json.gz (cli)"),
                       ("old_load", "kineto.load, --compare-src"), ("old_analyze", "full analyze, --compare-src")]:
        if step not in r:
            continue
        x = r[step]
        if "error" in x:
            print(f"   {what:<40s} ERROR {x['error']}")
            continue
        extra = ""
        if step == "export" and "gz_bytes" in x:
            extra = f"  ({x['gz_bytes'] / 1e6:.0f} MB gzip)"
        if step in ("load", "stages", "analyze", "old_load", "old_analyze"):
            extra = (f"  {x['seconds'] / struct_floor:5.2f}x FLOOR, {x['seconds'] / floor:5.2f}x generic decode,"
                     f" {events / x['seconds'] / 1e6:5.2f} M events/s")
        print(f"   {what:<40s} {fmt_s(x['seconds'])}   peak {x['maxrss_mb']:7.0f} MB{extra}   runs {x['all_seconds']}")
    st = r.get("stages", {})
    if "load_mb" in st:   # one process, stage by stage (last round): peak RSS after each stage
        print(f"   stages (one process, last round): load {st['load_s']:.2f} s -> peak {st['load_mb']:.0f} MB;"
              f" analyses {st['analyses_s']:.2f} s -> peak {st['analyses_mb']:.0f} MB;"
              f" md/json/csv {st['render_s']:.2f} s -> peak {st['render_mb']:.0f} MB")
    print(f"   generic decode = {floor_name} ({fmt_s(floor).strip()}); FLOOR = Structs decode ({fmt_s(struct_floor).strip()})")
    a = r.get("analyze", {})
    if (targets or events >= 2_000_000) and "seconds" in a:   # the targets are for >= 2M-event traces
        ratio = a["seconds"] / struct_floor
        print(f"   targets (issue 13): peak RSS {a['maxrss_mb']:.0f} MB <= {RSS_TARGET_MB}: "
              f"{'met' if a['maxrss_mb'] <= RSS_TARGET_MB else 'NOT met'};  wall {ratio:.2f}x FLOOR <= "
              f"{WALL_TARGET_X}: {'met' if ratio <= WALL_TARGET_X else 'NOT met'}   ({events:,d} events, "
              f"{nbytes / 1e6:.0f} MB JSON, load average {os.getloadavg()[0]:.2f})")
    return r


# ----------------------------------------------------------------------------- whole processes (issue 26)
PROCESS_TARGET_X = 3.0   # issue 26: the whole `inferscope analyze` command <= 3x the decode-floor process


def _floor_process_code(src: Path) -> str:
    """A child that reads, inflates and decodes the file into the importer's own typed Structs and
    exits: the decode-floor *process* (interpreter + msgspec only; the Struct definitions are taken
    from ingest/kineto/decode.py's source, so they are the importer's, without importing numpy)."""
    k = src / "inferscope" / "ingest" / "kineto"
    text = (k / "decode.py" if k.is_dir() else k.with_suffix(".py")).read_text()
    a = text.index("class _Args(")
    b = text.index("_TOP_DEC = ")
    b = text.index("\n", b) + 1
    return ("import sys, zlib\nfrom typing import Any, Optional, Union\nimport msgspec\n"
            "_Num = Union[int, float, str, None]\n" + text[a:b] +
            "data = open(sys.argv[1], 'rb').read()\n"
            "data = zlib.decompress(data, 47) if data[:2] == b'\\x1f\\x8b' else data\n"
            "print(len(_TOP_DEC.decode(data).traceEvents))\n")


def bench_process(path: Path, repeat: int, compare_src: Path | None = None) -> dict:
    """Wall time, CPU time and peak RSS of whole processes, rounds interleaved: the decode-floor
    process and `inferscope analyze PATH -o TMP -q` (the console script when present, else -m)."""
    import resource  # noqa: F401  (wait4 below)
    exe = Path(sys.executable).with_name("inferscope")
    floor_py = Path(tempfile.mkdtemp(prefix="inferscope-floor-")) / "floor.py"
    floor_py.write_text(_floor_process_code(REPO / "src"))
    runs: dict[str, list] = {"floor": [], "analyze": []}
    srcs = {"analyze": REPO / "src"}
    if compare_src:
        runs["analyze (compare-src)"] = []
        srcs["analyze (compare-src)"] = compare_src
    out = Path(tempfile.mkdtemp(prefix="inferscope-out-"))
    try:
        for _ in range(repeat):
            for k in runs:
                env = dict(os.environ)
                if k == "floor":
                    cmd = [sys.executable, str(floor_py), str(path)]
                else:
                    env["PYTHONPATH"] = str(srcs[k]) + os.pathsep + env.get("PYTHONPATH", "")
                    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "inferscope"]
                    cmd = base + ["analyze", str(path), "-o", str(out / k.split()[0]), "-q"]
                t0 = time.perf_counter()
                p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
                _, status, ru = os.wait4(p.pid, 0)
                wall = time.perf_counter() - t0
                if status != 0:
                    raise SystemExit(f"{k}: exit status {status}")
                runs[k].append((wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0))
    finally:
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(floor_py.parent, ignore_errors=True)
    fl = statistics.median(w for w, _c, _m in runs["floor"])
    flc = statistics.median(c for _w, c, _m in runs["floor"])
    print(f"\n== whole processes ({repeat} interleaved rounds, medians): {path.name}")
    for k, rr in runs.items():
        w = statistics.median(x[0] for x in rr)
        c = statistics.median(x[1] for x in rr)
        print(f"   {k:<22} wall {w * 1e3:7.0f} ms ({w / fl:4.2f}x floor)  cpu {c * 1e3:7.0f} ms ({c / flc:4.2f}x)"
              f"  peak {max(x[2] for x in rr):5.0f} MB   walls {[round(x[0] * 1e3) for x in rr]}")
    a = statistics.median(x[0] for x in runs["analyze"]) / fl
    print(f"   target (issue 26): analyze process {a:.2f}x the decode-floor process <= {PROCESS_TARGET_X}: "
          f"{'met' if a <= PROCESS_TARGET_X else 'NOT met'}   (load average {os.getloadavg()[0]:.2f})")
    return runs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--trace", type=Path, default=None, help="trace to bench (default: largest shared)")
    ap.add_argument("--skip-synthetic", action="store_true")
    ap.add_argument("--no-analyze", action="store_true")
    ap.add_argument("--quick", action="store_true",
                    help="skip the generic orjson/msgspec decodes and export (the slowest steps; the targets need neither)")
    ap.add_argument("--skip-shared", action="store_true", help="only the synthetic trace")
    ap.add_argument("--compare-src", type=Path, default=None,
                    help="another checkout's src/ (e.g. `git archive <rev> src | tar -x -C /tmp/old`): its load and "
                         "analyze run interleaved with this one's")
    ap.add_argument("--process", action="store_true",
                    help="only whole processes: the decode-floor process vs `inferscope analyze` (issue 26's 3x target)")
    args = ap.parse_args(argv)
    src = args.trace
    if src is None:
        cands = sorted(SHARED.glob("*.json.gz"), key=lambda p: p.stat().st_size) if SHARED.is_dir() else []
        if not cands:
            print(f"no shared Kineto traces at {SHARED}; pass --trace", file=sys.stderr)
            return 2
        src = cands[-1]
    if args.process:
        bench_process(src, args.repeat, args.compare_src)
        return 0
    analyze = has_pipeline() and not args.no_analyze
    if not analyze:
        print("note: full analyze not measured (inferscope.analyze.pipeline.analyze missing or --no-analyze)")
    if not args.skip_shared:
        bench_one("largest shared trace", src, args.repeat, analyze, args.compare_src, quick=args.quick)
    if not args.skip_synthetic:
        tmp = Path(tempfile.mkdtemp(prefix="inferscope-bench-"))
        try:
            out = tmp / "synthetic_kineto.json"
            # generated in a child so this (parent) process stays small: Linux carries
            # ru_maxrss across fork+exec, which would inflate the children's peak RSS
            code = ("import sys; sys.path.insert(0, %r); import bench_kineto as b; "
                    "print(b.make_synthetic(__import__('pathlib').Path(%r), %d, __import__('pathlib').Path(%r)))"
                    % (str(Path(__file__).parent), str(src), args.events, str(out)))
            n = int(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                   text=True).stdout.split()[-1])
            print(f"\n(synthetic: {n:,d} events tiled from {src.name}, written to {out})")
            bench_one(f"synthetic >= {args.events:,d} events (uncompressed)", out, args.repeat, analyze,
                      args.compare_src, targets=True, quick=args.quick)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
