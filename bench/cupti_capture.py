"""On an NVIDIA GPU: capture a small set of real CUPTI activity records with InferScope's collector
(collect/gpu_activity.py) for tests/data/cupti, and check them against what the workload did.

    python bench/cupti_capture.py OUT.json [--cupy]

The workload (torch; CuPy with --cupy) runs a fixed set of operations whose counts are known:
N_ADD tiny kernels, one GEMM, one pageable and one pinned H2D copy, one D2H read (.item()), one
cudaMemsetAsync (CuPy zeros / torch's caching allocator memset), one stream and one event sync.
It prints the counts per record kind, the launch flows, the clock calibration and the collector's
own cost, and fails (exit 1) when the kernel count differs from what was launched.
"""
from __future__ import annotations

import json
import sys
import time

N_ADD = 40


class _Log:
    def debug(self, m):
        print("debug:", m)


def torch_workload():
    import torch
    dev = "cuda"
    x = torch.zeros(256, device=dev)
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    for _ in range(N_ADD):
        x.add_(1.0)
    a = torch.randn(512, 512, device=dev)
    b = a @ a
    h = torch.randn(1 << 16)
    d = h.to(dev)                                   # pageable H2D
    p = torch.randn(1 << 16).pin_memory()
    d2 = p.to(dev, non_blocking=True)               # pinned H2D
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        c = b @ a
    s.synchronize()                                 # stream sync
    e = torch.cuda.Event()
    e.record()
    e.synchronize()                                 # event sync
    v = float(x[0])                                 # D2H + sync
    torch.cuda.synchronize()
    t1 = time.perf_counter_ns()
    return {"value": v, "t0_ns": t0, "t1_ns": t1, "check": float(d.sum() + d2.sum() + c.sum())}


def cupy_workload():
    import cupy as cp
    x = cp.zeros(256, dtype=cp.float32)             # cudaMemsetAsync
    cp.cuda.runtime.deviceSynchronize()
    t0 = time.perf_counter_ns()
    for _ in range(N_ADD):
        x += 1.0
    a = cp.random.rand(512, 512, dtype=cp.float32)
    b = a @ a
    h = cp.asnumpy(b[:4, :4])                       # D2H
    cp.cuda.runtime.deviceSynchronize()
    t1 = time.perf_counter_ns()
    return {"value": float(x[0]), "t0_ns": t0, "t1_ns": t1, "check": float(h.sum())}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    use_cupy = "--cupy" in argv
    out = [a for a in argv if not a.startswith("--")][0]
    if use_cupy:
        import cupy  # noqa: F401  (CUDA library loaded before CUPTI starts, as in a live run)
    else:
        import torch  # noqa: F401
    from inferscope.collect.gpu_activity import CuptiCollector
    col = CuptiCollector(_Log())
    t = time.perf_counter()
    ok = col.start()
    print(f"start: {ok} in {(time.perf_counter() - t) * 1e3:.1f} ms; enabled {col.enabled}; error {col.error}")
    if not ok:
        return 1
    work = cupy_workload if use_cupy else torch_workload
    work()                                          # warm-up: context, handles, module loading
    truth = work()
    col.stop()
    snap = col.snapshot()
    snap["workload"] = dict(truth, kind="cupy" if use_cupy else "torch", n_add=N_ADD)
    with open(out, "w") as f:
        json.dump(snap, f)
    rows = snap["rows"]
    print("records:", {k: len(v) for k, v in rows.items()}, "stats:", snap["stats"])
    print("clock offset ns:", snap["clock_offset_ns"], "error us:", snap["clock_error_us"])
    off = snap["clock_offset_ns"]
    lo, hi = truth["t0_ns"] + off, truth["t1_ns"] + off
    kin = [r for r in rows["kernel"] if lo <= r[0] and r[1] <= hi]
    names = {}
    for r in kin:
        names[r[6][:60]] = names.get(r[6][:60], 0) + 1
    print("kernels in the measured pass:", len(kin), names)
    print("memcpy in the measured pass:", [(r[6], r[7], r[8], r[9]) for r in rows["memcpy"] if lo <= r[0] <= hi])
    print("memset in the measured pass:", [(r[7], r[8]) for r in rows["memset"] if lo <= r[0] <= hi])
    print("sync in the measured pass:", [(r[5], r[3]) for r in rows["sync"] if lo <= r[0] <= hi])
    api = {}
    for which in ("runtime", "driver"):
        for r in rows[which]:
            if lo <= r[0] <= hi:
                nm = snap["api_names"][which].get(str(r[2]), r[2])
                api[nm] = api.get(nm, 0) + 1
    print("API calls in the measured pass:", api)
    adds = sum(v for k, v in names.items() if "elementwise" in k or "add" in k.lower())
    print(f"add-like kernels {adds} (launched {N_ADD})")
    return 0 if adds >= N_ADD else 1


if __name__ == "__main__":
    raise SystemExit(main())
