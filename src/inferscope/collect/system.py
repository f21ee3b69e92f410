"""System counters (psutil + getrusage) and NUMA placement.

Counters (COUNTER tracks): cpu.util_pct (all cores), cpu.core<N>.util_pct, proc.rss_bytes,
proc.cpu_pct (process CPU time / wall, 100 = one core), proc.ctx_switches (voluntary +
involuntary, cumulative), proc.page_faults (minor + major, cumulative).
"""
from __future__ import annotations

import os
import resource


class SystemSampler:
    def __init__(self, append) -> None:
        self.append = append
        self.ok = True
        self.warning = None
        try:
            import psutil
            self.psutil = psutil
            self.proc = psutil.Process()
            psutil.cpu_percent(percpu=True)  # prime the deltas
            self.proc.cpu_percent()
        except Exception as e:  # psutil missing or failing: keep getrusage counters only
            self.psutil = None
            self.warning = f"system counters: psutil unavailable ({type(e).__name__}: {e}); CPU utilisation not recorded"

    def sample(self, ts: int) -> None:
        ap = self.append
        ps = self.psutil
        if ps is not None:
            try:
                per = ps.cpu_percent(percpu=True)
                if per:
                    ap((1, "cpu.util_pct", -1, ts, sum(per) / len(per)))
                    for i, v in enumerate(per):
                        ap((1, f"cpu.core{i}.util_pct", -1, ts, float(v)))
                ap((1, "proc.rss_bytes", -1, ts, float(self.proc.memory_info().rss)))
                ap((1, "proc.cpu_pct", -1, ts, float(self.proc.cpu_percent())))
            except Exception:
                pass
        ru = resource.getrusage(resource.RUSAGE_SELF)
        ap((1, "proc.ctx_switches", -1, ts, float(ru.ru_nvcsw + ru.ru_nivcsw)))
        ap((1, "proc.page_faults", -1, ts, float(ru.ru_minflt + ru.ru_majflt)))


def _parse_cpulist(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-")
            out.update(range(int(a), int(b) + 1))
        else:
            out.add(int(part))
    return out


def numa_placement(gpu_pci_bus_ids: list[str] | None = None, sysfs: str = "/sys") -> dict:
    """Which NUMA nodes the process may run on vs the GPU's node (from sysfs)."""
    info: dict = {}
    try:
        nodes = {}
        base = os.path.join(sysfs, "devices/system/node")
        for d in sorted(os.listdir(base)):
            if d.startswith("node") and d[4:].isdigit():
                with open(os.path.join(base, d, "cpulist")) as f:
                    nodes[int(d[4:])] = _parse_cpulist(f.read())
        allowed = os.sched_getaffinity(0)
        info["numa_nodes"] = len(nodes)
        info["process_numa_nodes"] = sorted(n for n, cpus in nodes.items() if cpus & allowed)
    except (OSError, ValueError):
        return info
    gpus = []
    for bus in gpu_pci_bus_ids or []:
        b = bus.lower()
        if b.count(":") == 2 and len(b.split(":")[0]) == 8:   # NVML: 00000000:3B:00.0 -> 0000:3b:00.0
            b = b[4:]
        try:
            with open(os.path.join(sysfs, "bus/pci/devices", b, "numa_node")) as f:
                node = int(f.read().strip())
        except (OSError, ValueError):
            node = -1
        gpus.append({"pci_bus_id": bus, "numa_node": node})
    if gpus:
        info["gpu_numa_nodes"] = gpus
        pn = set(info.get("process_numa_nodes", []))
        info["gpu_local"] = all(g["numa_node"] < 0 or g["numa_node"] in pn for g in gpus) if pn else None
        info["remote_numa_possible"] = bool(len(pn) > 1 or any(g["numa_node"] >= 0 and g["numa_node"] not in pn for g in gpus))
    return info
