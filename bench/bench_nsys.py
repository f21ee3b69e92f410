"""Benchmark the Nsight Systems importer on synthetic exports of 1M and 10M kernels.

    python bench/bench_nsys.py                 # 1e6 and 1e7 kernels
    python bench/bench_nsys.py --sizes 1e6     # one size
    python bench/bench_nsys.py --no-analyze    # import + floor only
    python bench/bench_nsys.py --sizes 1e7 --keep --workdir /tmp/nb10 --repeat 3

Each export has N kernels, N matching runtime rows (4 processes with colliding correlation
ids, VM bits set in global ids), N/100 NVTX push/pop ranges, in the real 3.24 column set.
Files go to a temp dir (never the repo) and are deleted afterwards unless --keep. With
--workdir, an export already there (bench_N.sqlite) is reused, not rebuilt (build s = 0);
a build is written under a temporary name and renamed when complete, so an interrupted
build is never mistaken for a finished one.

With --repeat R every measurement runs R times; the median time and the largest peak are
printed (the machine may be shared: single runs are noisy).

Every measurement runs in a fresh subprocess and reports wall time and peak RSS (ru_maxrss):
  floor   - bare SELECT of the same columns into numpy (fetchmany + np.fromiter)
  import  - inferscope.ingest.nsys.load
  analyze - python -m inferscope analyze FILE -o TMP -q (import + every analysis + reports)
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "src"))

N_PROC = 4
CHUNK = 200_000


def build(path: Path, n: int) -> float:
    from nsys_factory import ENUMS, SCHEMAS, create_table, _RUNTIME, gpid
    t0 = time.perf_counter()
    sc = SCHEMAS["3.24"]
    final, path = path, path.with_name(path.name + ".partial")
    if path.exists():
        path.unlink()
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    for t, cols in (("CUPTI_ACTIVITY_KIND_KERNEL", sc["kernel"]), ("CUPTI_ACTIVITY_KIND_RUNTIME", _RUNTIME),
                    ("NVTX_EVENTS", sc["nvtx"])):
        create_table(con, t, cols)
    create_table(con, "StringIds", ["id", "value"])
    names = ["cudaLaunchKernel_v7000", "cuLaunchKernelEx", "nvtx"] + [f"void kernel_{i}<float, {i}>(float*, int)" for i in range(200)]
    con.executemany("INSERT INTO StringIds VALUES (?,?)", list(enumerate(names)))
    con.executemany("INSERT INTO StringIds VALUES (?,?)", [(1000 + i, f"step_{i % 50}") for i in range(50)])
    for t, rows in ENUMS.items():
        create_table(con, t, ["id", "name", "label"])
        con.executemany(f"INSERT INTO {t} VALUES (?,?,?)", rows)
    create_table(con, "PROCESSES", ["globalPid", "pid", "name"])
    con.executemany("INSERT INTO PROCESSES VALUES (?,?,?)", [(gpid(100 + p), 100 + p, f"worker{p}") for p in range(N_PROC)])
    create_table(con, sc["meta"], ["name", "value"])
    con.executemany(f"INSERT INTO {sc['meta']} VALUES (?,?)", [("EXPORT_SCHEMA_VERSION", sc["version"]),
                                                              ("EXPORT_PRODUCT_VERSION", sc["product"])])
    rng = np.random.default_rng(0)
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        i = np.arange(lo, hi, dtype=np.int64)
        proc = i % N_PROC
        pid = 100 + proc
        corr = i // N_PROC + 1                        # same correlation ids in every process
        t_api = (i // N_PROC) * 4000 + proc * 10      # per process: one launch every 4 us
        api_end = t_api + 300
        k_start = t_api + 500 + rng.integers(0, 200, len(i))
        k_end = k_start + 200 + rng.integers(0, 3000, len(i)) // 2
        gp = (1 << 48) | (pid << 24)
        gt = gp | pid
        kname = 3 + (i % 200)
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, "
                        "correlationId, globalPid, demangledName, shortName, gridX, blockX) VALUES (?,?,?,1,?,?,?,?,?,1,128)",
                        zip(k_start.tolist(), k_end.tolist(), (proc % 2).tolist(), (7 + proc).tolist(),
                            corr.tolist(), gp.tolist(), kname.tolist(), kname.tolist()))
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, "
                        "nameId, returnValue) VALUES (?,?,?,?,?,?,0)",
                        zip(t_api.tolist(), api_end.tolist(), (i % 7 == 0).astype(int).tolist(), gt.tolist(),
                            corr.tolist(), (i % 7 == 0).astype(int).tolist()))
        # NVTX: one push/pop range around every 100 launches of a process
        first = i[(i // N_PROC) % 100 == 0]
        if len(first):
            fp = first % N_PROC
            st = (first // N_PROC) * 4000 + fp * 10 - 5
            con.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, textId) VALUES (?,?,59,?,?)",
                            zip(st.tolist(), (st + 100 * 4000).tolist(), (((1 << 48) | ((100 + fp) << 24)) | (100 + fp)).tolist(),
                                (1000 + (first // N_PROC // 100) % 50).tolist()))
    con.commit()
    con.close()
    os.replace(path, final)
    return time.perf_counter() - t0


# ---------------------------------------------------------------------------
# child processes
# ---------------------------------------------------------------------------
def child_floor(path: str) -> None:
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    chain = itertools.chain.from_iterable
    out = []
    for sql, k in (("SELECT start, end, deviceId, streamId, correlationId, globalPid, demangledName, shortName "
                    "FROM CUPTI_ACTIVITY_KIND_KERNEL", 8),
                   ("SELECT start, end, eventClass, globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME", 6),
                   ("SELECT start, end, eventType, globalTid, textId FROM NVTX_EVENTS", 5)):
        cur = con.execute(sql)
        parts = []
        while True:
            rows = cur.fetchmany(1 << 18)
            if not rows:
                break
            parts.append(np.fromiter(chain(rows), dtype=np.int64, count=len(rows) * k).reshape(-1, k))
        out.append(np.concatenate(parts))
    assert len(out[0])


def child_import(path: str) -> None:
    from inferscope.ingest import nsys
    t = nsys.load(path)
    assert len(t.spans)


def child_analyze(path: str) -> None:
    from inferscope.cli import main
    out = tempfile.mkdtemp(prefix="inferscope-bench-out-")
    try:
        rc = main(["analyze", path, "-o", out, "-q"])
        assert rc == 0
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run_child(mode: str, path: Path, repeat: int = 1) -> dict:
    """Median time and largest peak over `repeat` fresh subprocesses."""
    runs = [_run_child_once(mode, path) for _ in range(max(1, repeat))]
    errors = [r for r in runs if "error" in r]
    if errors:
        return errors[0]
    out = {"s": round(float(np.median([r["s"] for r in runs])), 2), "peak_mb": max(r["peak_mb"] for r in runs)}
    if len(runs) > 1:
        out["all_s"] = [r["s"] for r in runs]
        out["all_mb"] = [r["peak_mb"] for r in runs]
    return out


def _run_child_once(mode: str, path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    r = subprocess.run([sys.executable, __file__, "--child", mode, str(path)], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1e6,1e7")
    ap.add_argument("--no-analyze", action="store_true")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--workdir", default=None, help="where exports are built; an existing bench_N.sqlite is reused")
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement (median time, max peak)")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "FILE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        mode, path = a.child
        t0 = time.perf_counter()
        {"floor": child_floor, "import": child_import, "analyze": child_analyze}[mode](path)
        dt = time.perf_counter() - t0
        print(json.dumps({"s": round(dt, 2), "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))
        return 0
    work = Path(a.workdir or tempfile.mkdtemp(prefix="inferscope-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"{'kernels':>10} {'build s':>8} {'file MB':>8} | {'floor s':>8} {'MB':>6} | {'import s':>8} {'MB':>6} "
          f"{'x floor':>7} | {'analyze s':>9} {'MB':>6}")
    try:
        for sz in a.sizes.split(","):
            n = int(float(sz))
            path = work / f"bench_{n}.sqlite"
            bt = build(path, n) if not path.exists() else 0.0
            mb = path.stat().st_size / 1e6
            fl = run_child("floor", path, a.repeat)
            im = run_child("import", path, a.repeat)
            an = {"s": "-", "peak_mb": "-"} if a.no_analyze else run_child("analyze", path, a.repeat)
            ratio = (im["s"] / fl["s"]) if ("s" in im and "s" in fl and fl["s"]) else float("nan")
            print(f"{n:>10} {bt:>8.1f} {mb:>8.0f} | {fl.get('s', fl.get('error'))!s:>8} {fl.get('peak_mb', '')!s:>6} | "
                  f"{im.get('s', im.get('error'))!s:>8} {im.get('peak_mb', '')!s:>6} {ratio:>7.2f} | "
                  f"{an.get('s', an.get('error'))!s:>9} {an.get('peak_mb', '')!s:>6}", flush=True)
            if a.repeat > 1:
                for label, r in (("floor", fl), ("import", im), ("analyze", an)):
                    if "all_s" in r:
                        print(f"{'':>10} {label} runs: s {r['all_s']}  MB {r['all_mb']}", flush=True)
            if not a.keep:
                path.unlink()
    finally:
        if not a.keep and not a.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
