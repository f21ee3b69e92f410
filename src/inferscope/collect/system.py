"""System counters (/proc + getrusage, psutil off Linux) and NUMA placement.

Counters (COUNTER tracks): cpu.util_pct (all cores), cpu.core<N>.util_pct, proc.rss_bytes,
proc.cpu_pct (process CPU time / wall, 100 = one core), proc.sys_cpu_pct (its kernel-mode part:
page faults, system calls), proc.ctx_switches (voluntary + involuntary, cumulative),
proc.invol_ctx_switches (involuntary only: preempted while runnable, cumulative), proc.page_faults
(minor + major, cumulative), proc.main_runq_pct (the main thread's run-queue wait / wall, from
/proc/self/schedstat: runnable but not running = CPU contention); child processes (not
profiled): ``child.cpu_s[<pid>] <comm>`` per live descendant (user+sys seconds, cumulative, listed at
most every CHILD_SCAN_INTERVAL_S), ``children.reaped_cpu_s`` (getrusage RUSAGE_CHILDREN: the
children already waited for) and ``children.cpu_s`` (every descendant's CPU seconds, cumulative:
RUSAGE_CHILDREN + each live descendant's own and waited-for children's user+sys, one reading per
scan), so a child that started and was reaped between two scans still counts, near its exit:
RUSAGE_CHILDREN is read at every system sample and a rise re-lists the descendants (at most every
CHILD_RESCAN_MIN_S).

On Linux one sample = two reads of kept-open files (/proc/stat, /proc/self/statm) that keep the
GIL (rawio.py) + one getrusage: ~20 us, and no GIL hand-over to the workload's thread.  psutil
(which opens, reads and closes 3-4 files per sample, releasing the GIL each time: ~85 us and
several forced thread switches per sample) is the fallback elsewhere.  The sampler thread calls
``sample`` between its ticks, so system counters cost no extra thread wake-ups.
"""
from __future__ import annotations

import os
import resource
import time

from .rawio import ProcFile, read_small


CHILD_SCAN_INTERVAL_S = 0.5    # descendants are listed at most this often (a few small /proc reads)
# ... and again when RUSAGE_CHILDREN rose (a child was reaped: one getrusage per system sample, no /proc read),
# at most this often: measured (planted `subprocess.run` children burning 0.2 CPU-s each) the 0.5 s scan alone
# left 0.00 of a child's 0.24 CPU-s inside the window and 0.23 of five children's 1.17; a process exit costs far
# more than one re-listing, and this bounds a fork-per-item loop to 5x the periodic scans
CHILD_RESCAN_MIN_S = 0.1


def child_metric(pid: int, comm: str) -> str:
    """Counter name of one child process's CPU time (user+sys seconds, cumulative)."""
    clean = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in comm)[:32]
    return f"child.cpu_s[{pid}] {clean}"


TASK_LIST_REFRESH_SCANS = 10   # a process's thread list is re-listed at least every this many scans


def _tasks(p: int, stat: bytes | None, cache: dict | None) -> list[str]:
    """Thread ids of process ``p``.  Listing /proc/<p>/task releases the GIL (os.listdir); with a
    ``cache`` it is re-listed only when the thread count (/proc/<p>/stat, read with the GIL held)
    changed or every TASK_LIST_REFRESH_SCANS scans (a thread that exited while another started in
    between is seen then)."""
    n = -1
    if stat is not None:
        try:
            n = int(stat[stat.rindex(b")") + 2:].split()[17])            # num_threads (field 20)
        except (ValueError, IndexError):
            n = -1
    if cache is not None and n > 0:
        hit = cache.get(p)
        if hit is not None and hit[0] == n and hit[1] > 0:
            cache[p] = (n, hit[1] - 1, hit[2])
            return hit[2]
    tids = os.listdir(f"/proc/{p}/task")
    if cache is not None and n > 0:
        cache[p] = (n, TASK_LIST_REFRESH_SCANS, tids)
    return tids


def descendants(pid: int, limit: int = 256, cache: dict | None = None) -> dict[int, tuple[str, float, float]]:
    """Live descendant processes of ``pid`` (via /proc/<pid>/task/<tid>/children, recursively):
    {pid: (comm, cpu seconds user+sys, its waited-for children's cpu seconds cutime+cstime)}.
    Empty where /proc does not list children.
    Files are read with the GIL held (rawio.read_small): the sampler thread calls this between its
    ticks, and under GIL contention every released system call cost it a 5-30 ms hand-over
    (measured: zoo_gil.py with 3 spinning threads sampled at 2.5-4.5 Hz instead of ~40 Hz).
    ``cache``: per-process thread lists kept between calls (``_tasks``)."""
    out: dict[int, tuple[str, float]] = {}
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    todo: list[tuple[int, bytes | None]] = [(pid, None)]
    if cache is not None:
        try:
            todo = [(pid, read_small(f"/proc/{pid}/stat"))]
        except OSError:
            pass
    while todo and len(out) < limit:
        p, pstat = todo.pop()
        try:
            tids = _tasks(p, pstat, cache)
        except OSError:
            continue
        for t in tids:
            try:
                kids = read_small(f"/proc/{p}/task/{t}/children", 1 << 14).split()
            except OSError:
                continue
            for k in kids:
                c = int(k)
                if c in out:
                    continue
                try:
                    st = read_small(f"/proc/{c}/stat")
                except OSError:
                    continue
                r = st.rindex(b")")
                comm = st[st.index(b"(") + 1:r].decode("utf-8", "replace")
                f = st[r + 2:].split()
                out[c] = (comm, (int(f[11]) + int(f[12])) / hz,     # utime, stime (fields 14, 15)
                          (int(f[13]) + int(f[14])) / hz)              # cutime, cstime (fields 16, 17)
                todo.append((c, st))
    if cache is not None:
        for gone in [q for q in cache if q != pid and q not in out]:   # exited processes
            del cache[gone]
    return out


def parse_proc_stat(data: bytes) -> list[tuple[int, int]]:
    """(total, busy) jiffies per core from /proc/stat (busy = total - idle - iowait)."""
    out = []
    for line in data.split(b"\n")[1:]:
        if not line.startswith(b"cpu"):
            break
        f = line.split()
        v = [int(x) for x in f[1:9]]          # user nice system idle iowait irq softirq steal
        tot = sum(v)
        out.append((tot, tot - v[3] - (v[4] if len(v) > 4 else 0)))
    return out


class SystemSampler:
    def __init__(self, append) -> None:
        self.append = append
        self.ok = True
        self.warning = None
        self.psutil = None
        self.stat = self.statm = self.sched = None
        self.prev_runq = None
        self.page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        try:
            self.stat = ProcFile("/proc/stat", 1 << 16)
            self.statm = ProcFile("/proc/self/statm", 256)
            self.prev_cores = parse_proc_stat(self._read_stat())
        except (OSError, ValueError):
            self.close()
            try:
                import psutil
                self.psutil = psutil
                self.proc = psutil.Process()
                psutil.cpu_percent(percpu=True)  # prime the deltas
            except Exception as e:  # no /proc, no psutil: getrusage counters only
                self.psutil = None
                self.warning = (f"system counters: /proc and psutil unavailable ({type(e).__name__}: {e}); "
                                "CPU utilisation not recorded")
        try:   # the main thread's (the thread group leader's) schedstat: run / run-queue wait ns
            self.sched = ProcFile("/proc/self/schedstat", 128)
            self.prev_runq = (int(self.sched.read().split()[1]), time.perf_counter_ns())
        except (OSError, ValueError, IndexError):
            if self.sched is not None:
                self.sched.close()
            self.sched = None
        self.names = [f"cpu.core{i}.util_pct" for i in range(256)]
        ru = resource.getrusage(resource.RUSAGE_SELF)
        self.prev_cpu = (ru.ru_utime + ru.ru_stime, time.perf_counter(), ru.ru_stime)
        self.pid = os.getpid()
        self.next_child_scan = 0.0
        self.child_rescan_at = 0.0       # no reap-triggered re-listing before this (CHILD_RESCAN_MIN_S)
        self.reaped_listed = 0.0         # RUSAGE_CHILDREN user+sys at the last listing
        self.children_seen: dict[int, str] = {}
        self.task_cache: dict = {}       # pid -> thread list between scans (descendants)
        self.faults = (*self._faults(), 0, 0)   # (fault count, kernel s, tick ts, ts of the last emitted sample)

    @staticmethod
    def _faults() -> tuple[int, float]:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return ru.ru_minflt + ru.ru_majflt, ru.ru_stime

    def faults_tick(self, ts: int) -> None:
        """Page faults and kernel-mode CPU at the sampler's tick resolution (one getrusage, ~1 us):
        ``proc.page_faults`` and ``proc.sys_cpu_s`` (cumulative) at every tick where the fault count
        moved, preceded by the previous tick's values when those were not emitted, so each faulting
        tick interval is exact and quiet stretches cost nothing.  ``sample`` (every
        1/system_sampling_hz) still emits the fault count regardless, so rates over the window keep
        their edges.  The page-fault culprit (analyze/contention.py) charges each tick interval's
        kernel time to the function sampled in it: at 20 Hz intervals a 5 ms page-touching call
        shared each interval with a model forward and lost to it 2 runs in 3 (zoo_pagefault.py).
        ru_stime is the kernel's tick-sampled split of the process's exact CPU time: unbiased, but
        noisy per 5 ms interval."""
        n, k, t0, emitted = self.faults
        m, k1 = self._faults()
        if m != n:
            ap = self.append
            if t0 and emitted != t0:
                ap((1, "proc.page_faults", -1, t0, float(n)))
                ap((1, "proc.sys_cpu_s", -1, t0, k))
            ap((1, "proc.page_faults", -1, ts, float(m)))
            ap((1, "proc.sys_cpu_s", -1, ts, k1))
            emitted = ts
        self.faults = (m, k1, ts, emitted)

    def sample_children(self, ts: int, force: bool = False) -> None:
        """CPU time of the live child processes (not profiled: their work is otherwise invisible),
        of the children already reaped (getrusage RUSAGE_CHILDREN) and of all of them together.  Lists
        the descendants every CHILD_SCAN_INTERVAL_S, and soon (CHILD_RESCAN_MIN_S) after a reap."""
        now = time.monotonic()
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        reaped = ru.ru_utime + ru.ru_stime
        if not force and now < self.next_child_scan and (reaped == self.reaped_listed or now < self.child_rescan_at):
            return
        self.next_child_scan = now + CHILD_SCAN_INTERVAL_S
        self.child_rescan_at = now + CHILD_RESCAN_MIN_S
        try:
            kids = descendants(self.pid, cache=self.task_cache)
        except (OSError, ValueError):
            kids = {}
        # RUSAGE_CHILDREN read before the listing: a child reaped during it is in neither (its CPU counts at the next
        # reading, which the rise triggers), never in both (listed, then reaped: counted twice)
        self.reaped_listed = reaped
        alive = 0.0
        for c, (comm, cpu, waited) in kids.items():
            self.children_seen.setdefault(c, comm)
            self.append((1, child_metric(c, comm), -1, ts, cpu))
            alive += cpu + waited
        if kids or self.children_seen or reaped > 0:
            self.append((1, "children.reaped_cpu_s", -1, ts, reaped))
            self.append((1, "children.cpu_s", -1, ts, reaped + alive))

    def _read_stat(self) -> bytes:
        data = self.stat.read()
        while len(data) >= self.stat.size:        # more cores than the buffer holds: grow it
            size = self.stat.size * 4
            self.stat.close()
            self.stat = ProcFile("/proc/stat", size)
            data = self.stat.read()
        return data

    def close(self) -> None:
        for f in (self.stat, self.statm, self.sched):
            if f is not None:
                f.close()
        self.stat = self.statm = self.sched = None

    def _core_util(self) -> list[float]:
        if self.stat is not None:
            cur = parse_proc_stat(self._read_stat())
            prev = self.prev_cores
            self.prev_cores = cur
            out = []
            for (t1, b1), (t0, b0) in zip(cur, prev):
                dt = t1 - t0
                out.append(100.0 * (b1 - b0) / dt if dt > 0 else 0.0)
            return out
        if self.psutil is not None:
            return [float(v) for v in self.psutil.cpu_percent(percpu=True)]
        return []

    def _rss(self) -> float | None:
        if self.statm is not None:
            return float(int(self.statm.read().split()[1]) * self.page)
        if self.psutil is not None:
            return float(self.proc.memory_info().rss)
        return None

    def sample(self, ts: int) -> None:
        ap = self.append
        try:
            per = self._core_util()
            if per:
                ap((1, "cpu.util_pct", -1, ts, sum(per) / len(per)))
                names = self.names
                for i, v in enumerate(per):
                    ap((1, names[i] if i < len(names) else f"cpu.core{i}.util_pct", -1, ts, v))
            rss = self._rss()
            if rss is not None:
                ap((1, "proc.rss_bytes", -1, ts, rss))
        except (OSError, ValueError, IndexError):
            pass
        ru = resource.getrusage(resource.RUSAGE_SELF)
        cpu, now = ru.ru_utime + ru.ru_stime, time.perf_counter()
        c0, w0, s0 = self.prev_cpu
        if now > w0:
            ap((1, "proc.cpu_pct", -1, ts, 100.0 * (cpu - c0) / (now - w0)))
            ap((1, "proc.sys_cpu_pct", -1, ts, 100.0 * (ru.ru_stime - s0) / (now - w0)))
        self.prev_cpu = (cpu, now, ru.ru_stime)
        ap((1, "proc.ctx_switches", -1, ts, float(ru.ru_nvcsw + ru.ru_nivcsw)))
        ap((1, "proc.invol_ctx_switches", -1, ts, float(ru.ru_nivcsw)))
        ap((1, "proc.page_faults", -1, ts, float(ru.ru_minflt + ru.ru_majflt)))
        if self.sched is not None:
            try:
                rq, t_ns = int(self.sched.read().split()[1]), time.perf_counter_ns()
                rq0, t0 = self.prev_runq
                if t_ns > t0:
                    ap((1, "proc.main_runq_pct", -1, ts, 100.0 * (rq - rq0) / (t_ns - t0)))
                self.prev_runq = (rq, t_ns)
            except (OSError, ValueError, IndexError):
                self.sched.close()
                self.sched = None
        self.sample_children(ts)


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


def format_cpulist(cpus) -> str:
    """{0,1,2,5} -> "0-2,5" (the kernel's cpulist format)."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


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
        info["process_cpus"] = format_cpulist(allowed)
        info["node_cpus"] = {str(n): format_cpulist(cpus) for n, cpus in nodes.items()}
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
