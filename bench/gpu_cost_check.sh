#!/usr/bin/env bash
# One device call on an NVIDIA GPU machine (no network): what CUPTI costs per launch, and the
# collector end to end.   bash bench/gpu_cost_check.sh [PAIRS] [CONFIGS]
#   (wheels in .whl/: cupti-python, pyelftools, msgspec; `.whl` carried; for the PM probe only,
#    .whl-pm/: nvidia-cuda-cupti 13.4.92 matching cupti-python 13.4 (the probe segfaulted over 13.0.85))
# 1. versions; 2. bench/cupti_cost.py: cost per launch of each CUPTI configuration (in-process
# before/after, interleaved rounds); 3. CUDA zoo programs under `inferscope run` (counts, verdict,
# clock error, collector cost); 4. the GPU tests (flows, clock, parity with torch.profiler);
# 5. storm overhead pairs (bench_gpu.py); 6. the PM sampling probe. Everything lands in $OUT.
set -u
PAIRS=${1:-5}
CONFIGS=${2:-ck,inferscope,inferscope_objects}
. bench/gpu_env.sh
el "CUPTI cost per launch: $CONFIGS"
timeout 150 $PY bench/cupti_cost.py --rounds 2 --configs "$CONFIGS" --json "$O/cupti_cost.json" > "$O/cupti_cost.log" 2>&1
grep -v '^round' "$O/cupti_cost.log"; grep '^round.*failed' "$O/cupti_cost.log" | cut -c1-300
for s in gpu_launch_storm gpu_item_sync gpu_gemm gpu_cupy_storm; do
  el "live $s"
  timeout 60 $PY -m inferscope run -q --format json --report /tmp/r_$s.json --trace /tmp/t_$s.iscope -- $PY examples/zoo/$s.py 2>&1 | tail -3
  timeout 30 $PY bench/gpu_run_summary.py "$s"
done
el "gpu tests: clock, flows, torch.profiler parity"
timeout 120 $PY -m pytest -q -p no:cacheprovider tests/test_gpu.py -m gpu -k "launch_flows or spin_kernels or kernel_times_match" 2>&1 | tail -6
el "overhead storm, $PAIRS pairs"
timeout 150 $PY bench/bench_gpu.py --skip-tests --workloads storm-cuda --pairs "$PAIRS" --variants inferscope,inferscope-nosampler --out /tmp/bg > /tmp/bg.log 2>&1
grep -E "round|storm-cuda (inferscope|base)" /tmp/bg.log | tail -9
cp /tmp/bg.log "$O/bg_storm.log"
el "PM sampling probe"
PMP=$PYTHONPATH
if ls .whl-pm/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site-pm .whl-pm/*.whl \
    && PMP=/tmp/site-pm:$PYTHONPATH && export LD_LIBRARY_PATH=/tmp/site-pm/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
fi
PYTHONPATH=$PMP timeout 60 $PY -X faulthandler bench/pm_probe.py "$O/pm" > "$O/pm.log" 2>&1; echo "pm rc $?"; tail -c 1500 "$O/pm.log"
el done
