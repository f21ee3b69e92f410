"""GPU counters through NVML (``pip install nvidia-ml-py``, extra ``nvml``).

Counters per device d: gpu.util_pct, gpu.mem_util_pct, gpu.mem_used_bytes, gpu.sm_clock_mhz,
gpu.mem_clock_mhz, gpu.power_w, gpu.temp_c, gpu.clock_event_reasons (the NVML "clocks event"
(formerly throttle) reason bitmask: 0x4 SW power cap, 0x20 SW thermal, 0x40 HW thermal, 0x80 HW
power brake, ...; 0x1 alone = GPU idle), gpu.pcie_tx_bytes_per_s, gpu.pcie_rx_bytes_per_s.
Absent or failing NVML: one warning, no counters; a metric the driver does not support is skipped
alone.  The unit tests use a fake pynvml; the real path is checked on an NVIDIA GPU by
tests/test_gpu.py (against nvidia-smi sampled alongside; figures in bench/README.md).
"""
from __future__ import annotations

import os


def visible_indices(count: int, env=None) -> list[int]:
    """NVML indices visible to CUDA given CUDA_VISIBLE_DEVICES (NVML ignores that variable).
    Like CUDA, the list stops at the first invalid entry: out of range, not a number, or a
    repeated index ("0,0" is one device)."""
    env = os.environ if env is None else env
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return list(range(count))
    out = []
    for part in cvd.split(","):
        p = part.strip()
        if not p:
            continue
        if p.isdigit():
            if int(p) < count and int(p) not in out:
                out.append(int(p))
            else:
                break
        else:
            break  # UUIDs / MIG names: resolved below by the caller if needed; stop like CUDA does on invalid
    return out


class NvmlSampler:
    def __init__(self, append, env=None, enabled: bool = True) -> None:
        """``enabled`` False: as without pynvml (a followed child: the parent records the GPU counters, and
        pynvml's import + nvmlInit in every short-lived worker was a cost for nothing)."""
        self.append = append
        self.handles: list = []
        self.devices: list[dict] = []
        self.warning: str | None = None
        self.errors = 0
        self._extra: list = []
        if not enabled:
            self.nv = None
            return
        try:
            import pynvml
        except Exception:
            self.nv = None
            return
        self.nv = pynvml
        try:
            pynvml.nvmlInit()
            n = pynvml.nvmlDeviceGetCount()
            for i in visible_indices(n, env):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                self.handles.append(h)
                name = pynvml.nvmlDeviceGetName(h)
                if isinstance(name, bytes):
                    name = name.decode()
                mem = pynvml.nvmlDeviceGetMemoryInfo(h)
                try:
                    bus = pynvml.nvmlDeviceGetPciInfo(h).busId
                    bus = bus.decode() if isinstance(bus, bytes) else str(bus)
                except Exception:
                    bus = None
                self.devices.append({"id": len(self.devices), "nvml_index": i, "name": str(name),
                                     "total_memory_bytes": int(mem.total), "pci_bus_id": bus})
        except Exception as e:
            self.warning = f"NVML unavailable ({type(e).__name__}: {e}); GPU counters not recorded"
            self.handles = []
        self._extra = self._optional_metrics() if self.handles else []
        self._mem = self._memory_getter() if self.handles else None

    def _memory_getter(self):
        """Used memory as nvidia-smi reports it: the v2 query excludes the driver's reserved
        memory (~480 MiB on an H100, measured); the v1 query counts it as used."""
        nv = self.nv
        v2 = getattr(nv, "nvmlMemory_v2", None)
        if v2 is not None:
            try:
                nv.nvmlDeviceGetMemoryInfo(self.handles[0], version=v2)
                return lambda h: float(nv.nvmlDeviceGetMemoryInfo(h, version=v2).used)
            except Exception:
                pass
        return lambda h: float(nv.nvmlDeviceGetMemoryInfo(h).used)

    def _optional_metrics(self) -> list:
        """(name, getter) for metrics older drivers / bindings may lack; each probed once."""
        nv, out = self.nv, []
        if hasattr(nv, "NVML_CLOCK_MEM"):
            out.append(("gpu.mem_clock_mhz", lambda h: float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM))))
        fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        if fn is not None:
            out.append(("gpu.clock_event_reasons", lambda h: float(fn(h))))
        ok = []
        for name, get in out:
            try:
                get(self.handles[0])
                ok.append((name, get))
            except Exception:
                pass            # not supported on this device/driver: skip this metric only
        return ok

    @property
    def ok(self) -> bool:
        return bool(self.handles)

    def sample(self, ts: int) -> None:
        nv = self.nv
        ap = self.append
        for d, h in enumerate(self.handles):
            try:
                u = nv.nvmlDeviceGetUtilizationRates(h)
                ap((1, "gpu.util_pct", d, ts, float(u.gpu)))
                ap((1, "gpu.mem_util_pct", d, ts, float(u.memory)))
                ap((1, "gpu.mem_used_bytes", d, ts, self._mem(h)))
                ap((1, "gpu.sm_clock_mhz", d, ts, float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))))
                ap((1, "gpu.power_w", d, ts, nv.nvmlDeviceGetPowerUsage(h) / 1000.0))
                ap((1, "gpu.temp_c", d, ts, float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))))
                ap((1, "gpu.pcie_tx_bytes_per_s", d, ts, nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES) * 1024.0))
                ap((1, "gpu.pcie_rx_bytes_per_s", d, ts, nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES) * 1024.0))
                for name, get in self._extra:
                    ap((1, name, d, ts, get(h)))
            except Exception as e:
                self.errors += 1
                if self.errors == 1:
                    self.warning = f"NVML sampling failed ({type(e).__name__}: {e}); some GPU counters missing"

    def shutdown(self) -> None:
        if self.nv is not None and self.handles:
            try:
                self.nv.nvmlShutdown()
            except Exception:
                pass


def count_visible_gpus(env=None) -> int | None:
    """Visible GPU count through NVML (None when NVML is unavailable)."""
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            return len(visible_indices(pynvml.nvmlDeviceGetCount(), env))
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None
