"""NVML sampler logic that does not need a GPU: CUDA_VISIBLE_DEVICES mapping and optional metrics.
(The real NVML path is checked against nvidia-smi on a GPU by tests/test_gpu.py.)"""
import sys
import types

from inferscope.collect.nvml import NvmlSampler, visible_indices


def test_visible_indices_follow_cuda_rules():
    assert visible_indices(2, {}) == [0, 1]
    assert visible_indices(2, {"CUDA_VISIBLE_DEVICES": "1"}) == [1]
    assert visible_indices(2, {"CUDA_VISIBLE_DEVICES": "1,0"}) == [1, 0]
    assert visible_indices(2, {"CUDA_VISIBLE_DEVICES": ""}) == []
    # CUDA stops at the first invalid entry: out of range, non-numeric, or repeated
    assert visible_indices(2, {"CUDA_VISIBLE_DEVICES": "0,5,1"}) == [0]
    assert visible_indices(1, {"CUDA_VISIBLE_DEVICES": "0,0"}) == [0]
    assert visible_indices(4, {"CUDA_VISIBLE_DEVICES": "2,2,3"}) == [2]


def _fake_nvml(reasons_supported: bool):
    nv = types.ModuleType("pynvml")
    nv.NVML_CLOCK_SM, nv.NVML_CLOCK_MEM, nv.NVML_TEMPERATURE_GPU = 1, 2, 0
    nv.NVML_PCIE_UTIL_TX_BYTES, nv.NVML_PCIE_UTIL_RX_BYTES = 0, 1
    nv.nvmlInit = nv.nvmlShutdown = lambda: None
    nv.nvmlDeviceGetCount = lambda: 1
    nv.nvmlDeviceGetHandleByIndex = lambda i: i
    nv.nvmlDeviceGetName = lambda h: b"Fake"
    nv.nvmlMemory_v2 = 0x2000028

    def meminfo(h, version=None):   # v2 excludes the driver's reserved memory from "used"
        return types.SimpleNamespace(total=8 << 30, used=(1 << 30) - (version is not None) * (480 << 20))
    nv.nvmlDeviceGetMemoryInfo = meminfo
    nv.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=b"0000:00:00.0")
    nv.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=50, memory=10)
    nv.nvmlDeviceGetClockInfo = lambda h, k: 1980 if k == 1 else 2619
    nv.nvmlDeviceGetPowerUsage = lambda h: 300_000
    nv.nvmlDeviceGetTemperature = lambda h, k: 40
    nv.nvmlDeviceGetPcieThroughput = lambda h, k: 5

    def reasons(h):
        if not reasons_supported:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return 0x4
    nv.nvmlDeviceGetCurrentClocksEventReasons = reasons
    return nv


def _sample(monkeypatch, reasons_supported):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(reasons_supported))
    got = []
    s = NvmlSampler(got.append, env={})
    s.sample(123)
    return {name: v for _, name, _, _, v in got}, s


def test_optional_metrics_recorded(monkeypatch):
    m, s = _sample(monkeypatch, True)
    assert m["gpu.mem_clock_mhz"] == 2619 and m["gpu.sm_clock_mhz"] == 1980
    assert m["gpu.clock_event_reasons"] == 4.0 and m["gpu.power_w"] == 300.0
    assert m["gpu.mem_used_bytes"] == (1 << 30) - (480 << 20)      # the v2 query, as nvidia-smi
    assert s.errors == 0


def test_unsupported_metric_skipped_alone(monkeypatch):
    m, s = _sample(monkeypatch, False)
    assert "gpu.clock_event_reasons" not in m
    assert m["gpu.mem_clock_mhz"] == 2619 and m["gpu.temp_c"] == 40
    assert s.errors == 0 and s.warning is None
