"""GPU check: InferScope's live path on one NVIDIA GPU, in one command.

    python bench/bench_gpu.py [--out DIR] [--pairs 10] [--workloads demo-cuda,storm-cuda]
                              [--skip-tests] [--skip-overhead] [--ncu]

1. Versions: GPU, driver, CUDA, torch, Python, ncu.
2. The GPU test suite (tests/test_gpu.py, marker gpu): planted-bottleneck zoo on CUDA, merged
   timeline vs a plain torch.profiler run, launch flows, clock-sync error and spin-kernel
   placement, NVML vs nvidia-smi, single-GPU rule.  Reports and traces kept under DIR/artifacts.
3. Overhead with CUDA: `inferscope run` vs the same program without InferScope, interleaved
   pairs in shuffled order (bench_overhead.py's runner): process ratio (the child's spawn-to-exit
   time) and, where the workload prints it, the GPU-side ratio (time between CUDA events around
   the workload's loop: what collection does to the kernels themselves).
4. --ncu: Nsight Compute CSV (details and raw pages) of the demo's hottest kernels on CUDA, for
   a later Nsight Compute importer (kept in DIR/ncu with the exact command and versions).
Workloads: demo-cuda (examples/llm_demo.py --device cuda), storm-cuda (examples/zoo/
gpu_launch_storm.py), gemm-cuda (examples/zoo/gpu_gemm.py).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
PY = sys.executable

WRAP = '''import runpy, sys
sys.argv = {argv!r}
sys.path.insert(0, {path!r})
runpy.run_path(sys.argv[0], run_name="__main__")
'''
WORKLOADS = {
    "demo-cuda": [str(REPO / "examples" / "llm_demo.py"), "--device", "cuda"],
    "storm-cuda": [str(REPO / "examples" / "zoo" / "gpu_launch_storm.py")],
    "gemm-cuda": [str(REPO / "examples" / "zoo" / "gpu_gemm.py")],
    "cupy-storm": [str(REPO / "examples" / "zoo" / "gpu_cupy_storm.py")],   # CUDA without torch (CUPTI only)
}


def sh(cmd: list[str], timeout: float = 60) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return (r.stdout + r.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"({type(e).__name__}: {e})"


def versions() -> dict:
    v = {"python": sys.version.split()[0]}
    try:
        import torch
        v.update(torch=torch.__version__, torch_cuda=torch.version.cuda,
                 gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                 cuda_devices=torch.cuda.device_count())
    except Exception as e:    # noqa: BLE001 - report whatever is there
        v["torch"] = f"unavailable ({e})"
    v["nvidia_smi"] = sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,pstate",
                          "--format=csv"])
    head = sh(["nvidia-smi"]).splitlines()
    v["nvidia_smi_header"] = next((ln.strip(" |") for ln in head if "CUDA Version" in ln), None)
    v["ncu"] = sh(["ncu", "--version"]).splitlines()[-1:] if shutil.which("ncu") else None
    for mod in ("pynvml", "transformers", "tokenizers", "numpy", "msgspec"):
        try:
            m = __import__(mod)
            v[mod] = getattr(m, "__version__", "?")
        except Exception:
            v[mod] = None
    return v


def run_tests(art: Path) -> int:
    env = dict(os.environ, INFERSCOPE_GPU_ARTIFACTS=str(art))
    t = time.perf_counter()
    r = subprocess.run([PY, "-m", "pytest", str(REPO / "tests" / "test_gpu.py"), "-m", "gpu", "-v", "-rs", "-p", "no:cacheprovider"],
                       env=env, cwd=REPO)
    print(f"gpu test suite: exit {r.returncode} in {time.perf_counter() - t:.0f} s", flush=True)
    return r.returncode


VARIANTS = {   # name -> (bench_overhead mode, extra environment for the inferscope mode)
    "inferscope": ("inferscope", {}),                                            # default: CUPTI when cupti-python is there
    "inferscope-ops": ("inferscope", {"INFERSCOPE_TORCH_PROFILER": "on"}),      # torch.profiler op tables (CPU ops + CUDA)
    "inferscope-apiall": ("inferscope", {"INFERSCOPE_CUPTI_API": "all"}),      # CUPTI with every CUDA API call recorded
    "inferscope-kernelonly": ("inferscope", {"INFERSCOPE_CUPTI_API": "none"}),  # CUPTI GPU records, no API records
    "inferscope-noprof": ("inferscope", {"INFERSCOPE_TORCH_PROFILER": "off", "INFERSCOPE_CUPTI": "0"}),  # no GPU source
    "inferscope-nosampler": ("inferscope", {"INFERSCOPE_CPU_SAMPLING_FREQUENCY_HZ": "0"}),  # CUPTI without the CPU sampler
    "torchprof-cuda": ("torchprof-cuda", {}),          # plain torch.profiler, CPU + CUDA activities
    "torchprof-cudaonly": ("torchprof-cudaonly", {}),  # plain torch.profiler, CUDA activities only
}


def overhead(workloads: list[str], pairs: int, seed: int, variants: list[str]) -> dict:
    import bench_overhead as bo
    import compileall
    import inferscope
    compileall.compile_dir(str(Path(inferscope.__file__).parent), quiet=1)
    rng = random.Random(seed)
    out = {}
    with tempfile.TemporaryDirectory(prefix="inferscope-gpubench-") as td:
        tmp = Path(td)
        for wl in workloads:
            argv = WORKLOADS[wl]
            script = tmp / f"{wl}.py"
            script.write_text(WRAP.format(argv=argv, path=str(Path(argv[0]).parent)))
            bo.run_once("base", script, tmp, {})          # warm caches (page cache, CUDA JIT cache)
            names = ["base"] + variants
            res = {m: [] for m in names}
            est = {m: [] for m in names}    # InferScope's own overhead estimate (trace meta), per run
            for i in range(pairs):
                order = names[:]
                rng.shuffle(order)
                for m in order:
                    mode, env = VARIANTS.get(m, (m, {}))
                    res[m].append(bo.run_once(mode, script, tmp, env))
                    if mode == "inferscope":
                        from inferscope.trace import native
                        est[m].append(native.load(tmp / "t.iscope").meta["collection"].get("estimated_overhead_pct"))
                print(f"  {wl} round {i + 1} process/gpu s: " + ", ".join(
                    f"{m} {res[m][-1][1]:.3f}/{res[m][-1][4] or 0:.4f}" for m in names), flush=True)
            out[wl] = {"base_process_s_median": round(statistics.median(b[1] for b in res["base"]), 3)}
            for m in variants:
                row = {}
                for k, label in ((1, "process"), (0, "workload"), (2, "command"), (3, "process_cpu"), (4, "gpu")):
                    rat = [s[k] / b[k] for s, b in zip(res[m], res["base"]) if s[k] and b[k]]
                    if rat:
                        lo, hi = bo.median_ci(rat)
                        row[label] = {"median": round(statistics.median(rat), 4), "ci95": [round(lo, 4), round(hi, 4)],
                                      "min_ratio": round(min(s[k] for s in res[m] if s[k]) /
                                                         min(b[k] for b in res["base"] if b[k]), 4)}
                if est[m] and all(e is not None for e in est[m]):
                    # the estimate is a share of the process's CPU time; the measured share is 1 - 1/ratio
                    row["estimated_overhead_pct_median"] = round(statistics.median(est[m]), 2)
                    if "process_cpu" in row:
                        row["measured_cpu_share_pct"] = round(100 * (1 - 1 / row["process_cpu"]["median"]), 2)
                out[wl][m] = row
                print(f"{wl} {m}: " + ", ".join(f"{lab} {v['median']:.3f} [{v['ci95'][0]:.2f}-{v['ci95'][1]:.2f}]"
                                                 for lab, v in row.items() if isinstance(v, dict))
                      + (f"; estimated overhead {row['estimated_overhead_pct_median']}% of process CPU vs measured "
                         f"{row.get('measured_cpu_share_pct')}%" if "estimated_overhead_pct_median" in row else ""), flush=True)
    return out


def ncu_capture(art: Path, ncu_dir: Path) -> None:
    """Nsight Compute of the CUDA demo: the 10 hottest kernels by InferScope's own report."""
    if not shutil.which("ncu"):
        print("ncu: not on PATH; skipped")
        return
    ncu_dir.mkdir(parents=True, exist_ok=True)
    rep = art / "llm_demo_cuda" / "report.json"
    hot = []
    if rep.exists():
        hot = [k["name"] for k in json.loads(rep.read_text())["kernels"]["top"][:10]]
    (ncu_dir / "hottest_kernels_by_inferscope.json").write_text(json.dumps(hot, indent=1))
    demo = [PY, str(REPO / "examples" / "llm_demo.py"), "--device", "cuda", "--requests", "1", "--max-new-tokens", "8"]
    rep_file = ncu_dir / "demo.ncu-rep"
    # skip the prefill and first decode steps, profile a window of decode kernels
    cmd = ["ncu", "--launch-skip", "400", "--launch-count", "40", "--clock-control", "none",
           "--export", str(rep_file), "--force-overwrite"] + demo
    env = dict(os.environ, INFERSCOPE_ENABLED="0")
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=400)
    print(f"ncu profile: exit {r.returncode} in {time.perf_counter() - t:.0f} s", flush=True)
    (ncu_dir / "ncu_profile_log.txt").write_text(" ".join(cmd) + "\n\n" + r.stdout[-20000:] + "\n" + r.stderr[-20000:])
    if r.returncode != 0 or not rep_file.exists():
        return
    for page in ("details", "raw"):
        c = ["ncu", "--import", str(rep_file), "--csv", "--page", page]
        rr = subprocess.run(c, capture_output=True, text=True, timeout=300)
        (ncu_dir / f"demo_{page}.csv").write_text(rr.stdout)
        print(f"ncu {page} page: {len(rr.stdout.splitlines())} lines", flush=True)
    (ncu_dir / "COMMANDS.txt").write_text(
        "profile: " + " ".join(cmd) + "\n(INFERSCOPE_ENABLED=0)\n"
        + "pages:   ncu --import demo.ncu-rep --csv --page details|raw\n"
        + "ncu: " + json.dumps(versions().get("ncu")) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "gpu"))
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--workloads", default="demo-cuda,storm-cuda")
    ap.add_argument("--variants", default="inferscope",
                    help="compared with base: " + ", ".join(VARIANTS) + " (comma-separated)")
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--ncu", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    out = Path(args.out)
    art = out / "artifacts"
    art.mkdir(parents=True, exist_ok=True)
    summary = {"versions": versions(), "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    print(json.dumps(summary["versions"], indent=1), flush=True)
    if not args.skip_tests:
        summary["tests_exit"] = run_tests(art)
    if args.ncu:
        ncu_capture(art, out / "ncu")
    if not args.skip_overhead:
        summary["overhead"] = overhead([w for w in args.workloads.split(",") if w], args.pairs, args.seed,
                                       [v for v in args.variants.split(",") if v])
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
