# Sourced by the device scripts (gpu_cupti_check.sh, gpu_cost_check.sh): wheels from .whl/ (the GPU
# machine has no network) into /tmp/site, PYTHONPATH, $O (= $OUT), $PY, the `el` step printer, versions.
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/gpu-out}; mkdir -p "$O"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD/src
else
  export PYTHONPATH=$PWD/src
fi
PY=python3
T0=$(date +%s)
el() { echo "== [$(( $(date +%s) - T0 )) s] $*"; }
el versions
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$PY -c "import torch, sys; print('torch', torch.__version__, torch.version.cuda, sys.version.split()[0])"
