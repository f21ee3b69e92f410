#!/usr/bin/env bash
# One device call on an NVIDIA GPU machine (no network): the CUPTI collector end to end.
#   bash bench/gpu_cupti_check.sh [PAIRS]      (wheels in .whl/: cupti-python, pyelftools, msgspec)
# 1. versions; 2. real CUPTI records captured for tests/data/cupti (torch and CuPy workloads);
# 3. `inferscope run` on the CUDA zoo (verdict, kernel/copy counts, clock error, collector cost);
# 4. overhead pairs (bench_gpu.py) on the launch storm and the GEMM loop; 5. the clock/flow tests;
# 6. the PM sampling probe (bench/pm_probe.py).
# Everything lands in $OUT (or /tmp/gpu-out).
set -u
PAIRS=${1:-8}
. bench/gpu_env.sh
$PY -m pip show nvidia-cuda-cupti cupti-python cuda-bindings 2>/dev/null | grep -E '^(Name|Version)'
el capture torch
timeout 120 $PY bench/cupti_capture.py "$O/cupti_torch.json" 2>&1 | tail -25
el capture cupy
timeout 90 $PY bench/cupti_capture.py "$O/cupti_cupy.json" --cupy 2>&1 | tail -15
for s in gpu_launch_storm gpu_item_sync gpu_pageable_h2d gpu_gemm gpu_cupy_storm; do
  el "live $s"
  timeout 100 $PY -m inferscope run -q --format json --report /tmp/r_$s.json --trace /tmp/t_$s.iscope -- $PY examples/zoo/$s.py 2>&1 | tail -4
  timeout 40 $PY bench/gpu_run_summary.py "$s"
done
gzip -c /tmp/t_gpu_launch_storm.iscope > "$O/storm_cupti.iscope.gz" 2>/dev/null
el "overhead storm, $PAIRS pairs"
timeout 200 $PY bench/bench_gpu.py --skip-tests --workloads storm-cuda --pairs "$PAIRS" --variants inferscope,inferscope-noprof --out /tmp/bg > /tmp/bg.log 2>&1
grep -E "round|storm-cuda (inferscope|base)" /tmp/bg.log | tail -14
cp /tmp/bg/summary.json "$O/overhead_storm.json" 2>/dev/null; cp /tmp/bg.log "$O/bg_storm.log"
el "gpu tests: clock, flows, torch.profiler parity"
timeout 110 $PY -m pytest -q -p no:cacheprovider tests/test_gpu.py -m gpu -k "launch_flows or spin_kernels or kernel_times_match" 2>&1 | tail -15
el "overhead gemm, 5 pairs"
timeout 90 $PY bench/bench_gpu.py --skip-tests --workloads gemm-cuda --pairs 5 --variants inferscope --out /tmp/bg2 > /tmp/bg2.log 2>&1
grep -E "round|gemm-cuda (inferscope|base)" /tmp/bg2.log | tail -8
cp /tmp/bg2/summary.json "$O/overhead_gemm.json" 2>/dev/null
el "PM sampling probe (hardware counters, issue 29 item 2)"
timeout 120 $PY bench/pm_probe.py "$O/pm" 2>&1 | tail -12
el done
