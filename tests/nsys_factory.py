"""Build Nsight Systems SQLite exports in the real schema (column sets of schema 3.1.2 and 3.24.0).

Column lists are the ones seen in the real exports (memfusion = nsys 2023.1.2 / schema 3.1.2,
p4arth = nsys 2025.5.2 / schema 3.24.0) and in /work/shared/docs/nsys-sqlite-schema.md.
``globalPid``/``globalTid`` carry VM id 1 (bit 48) as every real export does.

Used by tests (small exports with known ground truth) and bench/bench_nsys.py (bulk).
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

VM_BITS = 1 << 48

_KERNEL_31 = ("start end deviceId contextId streamId correlationId globalPid demangledName shortName mangledName "
              "launchType cacheConfig registersPerThread gridX gridY gridZ blockX blockY blockZ staticSharedMemory "
              "dynamicSharedMemory localMemoryPerThread localMemoryTotal gridId sharedMemoryExecuted graphNodeId "
              "sharedMemoryLimitConfig").split()
_KERNEL_324 = ("start end deviceId contextId greenContextId streamId correlationId globalPid demangledName shortName "
               "mangledName launchType cacheConfig registersPerThread gridX gridY gridZ blockX blockY blockZ "
               "staticSharedMemory dynamicSharedMemory localMemoryPerThread localMemoryTotal gridId "
               "sharedMemoryExecuted graphNodeId sharedMemoryLimitConfig qmdBulkReleaseDone qmdPreexitDone "
               "qmdLastCtaDone graphId clusterX clusterY clusterZ clusterSchedulingPolicy maxPotentialClusterSize "
               "maxActiveClusters").split()
_MEMCPY_31 = ("start end deviceId contextId streamId correlationId globalPid bytes copyKind deprecatedSrcId srcKind "
              "dstKind srcDeviceId srcContextId dstDeviceId dstContextId migrationCause graphNodeId virtualAddress").split()
_MEMCPY_324 = ("start end deviceId contextId greenContextId streamId correlationId globalPid bytes copyKind "
               "deprecatedSrcId srcKind dstKind srcDeviceId srcContextId dstDeviceId dstContextId migrationCause "
               "graphNodeId virtualAddress copyCount").split()
_MEMSET_31 = "start end deviceId contextId streamId correlationId globalPid value bytes graphNodeId memKind".split()
_MEMSET_324 = ("start end deviceId contextId greenContextId streamId correlationId globalPid value bytes graphNodeId "
               "memKind").split()
_SYNC_31 = "start end deviceId contextId streamId correlationId globalPid syncType eventId".split()
_SYNC_324 = ("start end deviceId contextId greenContextId streamId correlationId globalPid deprecatedSyncType syncType "
             "eventId eventSyncId").split()
_RUNTIME = "start end eventClass globalTid correlationId nameId returnValue callchainId".split()
_NVTX_31 = ("start end eventType rangeId category color text globalTid endGlobalTid textId domainId uint64Value "
            "int64Value doubleValue uint32Value int32Value floatValue jsonTextId jsonText").split()
_NVTX_324 = _NVTX_31 + ["binaryData"]
_OSRT_31 = "start end eventClass globalTid nameId returnValue nestingLevel callchainId".split()
_OSRT_324 = _OSRT_31 + ["argumentsId"]
_GPU = ("vmId id name busLocation isDiscrete l2CacheSize totalMemory memoryBandwidth clockRate smCount pwGpuId uuid "
        "luid chipName cuDevice ctxswDevPath ctrlDevPath revision nodeMask constantMemory maxIPC maxRegistersPerBlock "
        "maxShmemPerBlock maxShmemPerBlockOptin maxShmemPerSm maxRegistersPerSm threadsPerWarp asyncEngines "
        "maxWarpsPerSm maxBlocksPerSm maxThreadsPerBlock maxBlockDimX maxBlockDimY maxBlockDimZ maxGridDimX "
        "maxGridDimY maxGridDimZ computeMajor computeMinor smMajor smMinor").split()
_OLD_GPU = "deviceId name totalMemory numMultiprocessors computeCapabilityMajor computeCapabilityMinor".split()
_TEXT_COLS = {"text", "jsonText", "binaryData", "name", "busLocation", "uuid", "chipName", "ctxswDevPath",
              "ctrlDevPath", "value", "label"}
_REAL_COLS = {"doubleValue", "floatValue"}

SCHEMAS = {
    "3.1": dict(kernel=_KERNEL_31, memcpy=_MEMCPY_31, memset=_MEMSET_31, sync=_SYNC_31, nvtx=_NVTX_31,
                osrt=_OSRT_31, meta="EXPORT_META_DATA", version="3.1.2", product="2023.1.2.43"),
    "3.24": dict(kernel=_KERNEL_324, memcpy=_MEMCPY_324, memset=_MEMSET_324, sync=_SYNC_324, nvtx=_NVTX_324,
                 osrt=_OSRT_324, meta="META_DATA_EXPORT", version="3.24.0", product="2025.5.2.266"),
}

ENUMS = {
    "ENUM_CUDA_MEMCPY_OPER": [(0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"), (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
                              (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"), (3, "CUDA_MEMCPY_KIND_HTOA", "Host-to-Array"),
                              (4, "CUDA_MEMCPY_KIND_ATOH", "Array-to-Host"), (5, "CUDA_MEMCPY_KIND_ATOA", "Array-to-Array"),
                              (6, "CUDA_MEMCPY_KIND_ATOD", "Array-to-Device"), (7, "CUDA_MEMCPY_KIND_DTOA", "Device-to-Array"),
                              (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"), (9, "CUDA_MEMCPY_KIND_HTOH", "Host-to-Host"),
                              (10, "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer"),
                              (11, "CUDA_MEMCPY_KIND_UVM_HTOD", "Unified Host-to-Device"),
                              (12, "CUDA_MEMCPY_KIND_UVM_DTOH", "Unified Device-to-Host"),
                              (13, "CUDA_MEMCPY_KIND_UVM_DTOD", "Unified Device-to-Device")],
    "ENUM_CUDA_MEM_KIND": [(0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"), (1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
                           (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"), (3, "CUDA_MEMOPR_MEMORY_KIND_ARRAY", "Array"),
                           (4, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed"),
                           (5, "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC", "Device Static"),
                           (6, "CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC", "Managed Static"),
                           (7, "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN", "Unknown")],
    "ENUM_CUPTI_SYNC_TYPE": [(0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown"),
                             (1, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "Event sync"),
                             (2, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT", "Stream wait sync"),
                             (3, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream sync"),
                             (4, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Context sync")],
    "ENUM_NSYS_EVENT_TYPE": [(33, "NvtxCategory", "NVTX category"), (34, "NvtxMark", "NVTX mark"),
                             (59, "NvtxPushPopRange", "NVTX push/pop"), (60, "NvtxStartEndRange", "NVTX start/end"),
                             (75, "NvtxDomainCreate", "NVTX domain create")],
    "ENUM_NSYS_EVENT_CLASS": [(0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"),
                              (1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver"), (27, "TRACE_PROCESS_EVENT_OS_RUNTIME", "OS runtime")],
}


def gpid(pid: int, vm: int = 1) -> int:
    return (vm << 48) | (pid << 24)


def gtid(pid: int, tid: int, vm: int = 1) -> int:
    return gpid(pid, vm) | tid


def create_table(con, name: str, cols: list[str]) -> None:
    decl = ", ".join(f"[{c}] {'TEXT' if c in _TEXT_COLS else 'REAL' if c in _REAL_COLS else 'INTEGER'}" for c in cols)
    con.execute(f"CREATE TABLE [{name}] ({decl})")


class NsysExport:
    """Accumulate events, then ``write(path)`` a SQLite file in the chosen schema."""

    def __init__(self, schema: str = "3.24", old_gpu_table: bool = False, enums: bool = True) -> None:
        self.schema = SCHEMAS[schema]
        self.old_gpu_table = old_gpu_table
        self.enums = enums
        self.strings: dict[str, int] = {}
        self.tables: dict[str, list[dict]] = {}
        self.processes: list[tuple] = []
        self.threads: list[tuple] = []
        self.gpus: list[dict] = []
        self.duration = None
        self.drop: set[str] = set()     # table names to leave out

    def sid(self, s: str) -> int:
        if s not in self.strings:
            self.strings[s] = len(self.strings)
        return self.strings[s]

    def _row(self, table, **kv):
        self.tables.setdefault(table, []).append(kv)

    # ---- events -----------------------------------------------------------
    def runtime(self, pid, tid, start, end, name, corr, driver=False):
        self._row("CUPTI_ACTIVITY_KIND_RUNTIME", start=start, end=end, eventClass=1 if driver else 0,
                  globalTid=gtid(pid, tid), correlationId=corr, nameId=self.sid(name), returnValue=0, callchainId=None)

    def kernel(self, pid, start, end, name, corr, device=0, stream=7, short=None, graph_id=None):
        self._row("CUPTI_ACTIVITY_KIND_KERNEL", start=start, end=end, deviceId=device, contextId=1, greenContextId=None,
                  streamId=stream, correlationId=corr, globalPid=gpid(pid), demangledName=self.sid(name),
                  shortName=self.sid(short or name.split("(")[0].split("<")[0]), mangledName=None, launchType=0,
                  gridX=1, gridY=1, gridZ=1, blockX=128, blockY=1, blockZ=1, graphId=graph_id)

    def memcpy(self, pid, start, end, copy_kind, src_kind, dst_kind, nbytes, corr, device=0, stream=7):
        self._row("CUPTI_ACTIVITY_KIND_MEMCPY", start=start, end=end, deviceId=device, contextId=1, streamId=stream,
                  correlationId=corr, globalPid=gpid(pid), bytes=nbytes, copyKind=copy_kind, srcKind=src_kind,
                  dstKind=dst_kind, srcDeviceId=device, dstDeviceId=device, copyCount=1)

    def memset(self, pid, start, end, nbytes, corr, mem_kind=2, device=0, stream=7):
        self._row("CUPTI_ACTIVITY_KIND_MEMSET", start=start, end=end, deviceId=device, contextId=1, streamId=stream,
                  correlationId=corr, globalPid=gpid(pid), value=0, bytes=nbytes, memKind=mem_kind)

    def sync(self, pid, start, end, sync_type, corr, device=0, stream=0xFFFFFFFF):
        self._row("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", start=start, end=end, deviceId=device, contextId=1,
                  streamId=stream, correlationId=corr, globalPid=gpid(pid), syncType=sync_type, eventId=0xFFFFFFFF,
                  deprecatedSyncType=None, eventSyncId=0xFFFFFFFF)

    def nvtx(self, pid, tid, start, end, name, registered=False, event_type=59):
        """event_type 59 push/pop, 60 start/end, 34 mark (end None).  registered -> textId."""
        self._row("NVTX_EVENTS", start=start, end=end, eventType=event_type, text=None if registered else name,
                  textId=self.sid(name) if registered else None, globalTid=gtid(pid, tid),
                  endGlobalTid=gtid(pid, tid) if event_type == 60 else None, domainId=0, category=0)

    def osrt(self, pid, tid, start, end, name):
        self._row("OSRT_API", start=start, end=end, eventClass=27, globalTid=gtid(pid, tid), nameId=self.sid(name),
                  returnValue=0, nestingLevel=0, callchainId=None)

    def process(self, pid, name):
        self.processes.append((gpid(pid), pid, name))

    def thread(self, pid, tid, name):
        self.threads.append((self.sid(name), 0, gtid(pid, tid)))

    def gpu(self, gid, name="NVIDIA A100-SXM4-80GB", total_memory=85899345920, sm_count=108, cc=(8, 0)):
        self.gpus.append(dict(id=gid, name=name, totalMemory=total_memory, smCount=sm_count,
                              computeMajor=cc[0], computeMinor=cc[1]))

    # ---- output --------------------------------------------------------------
    def write(self, path) -> Path:
        path = Path(path)
        if path.exists():
            path.unlink()
        con = sqlite3.connect(path)
        sc = self.schema
        cols_of = {"CUPTI_ACTIVITY_KIND_KERNEL": sc["kernel"], "CUPTI_ACTIVITY_KIND_MEMCPY": sc["memcpy"],
                   "CUPTI_ACTIVITY_KIND_MEMSET": sc["memset"], "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": sc["sync"],
                   "CUPTI_ACTIVITY_KIND_RUNTIME": _RUNTIME, "NVTX_EVENTS": sc["nvtx"], "OSRT_API": sc["osrt"]}
        for t, rows in self.tables.items():
            if t in self.drop:
                continue
            cols = cols_of[t]
            create_table(con, t, cols)
            con.executemany(f"INSERT INTO [{t}] VALUES ({','.join('?' * len(cols))})",
                            [tuple(r.get(c) if r.get(c) is not None or c in ("end", "text", "textId") else
                                   (0 if c not in ("callchainId", "mangledName", "graphId", "greenContextId") else None)
                                   for c in cols) for r in rows])
        if "StringIds" not in self.drop:
            create_table(con, "StringIds", ["id", "value"])
            con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in self.strings.items()])
        if self.enums:
            for t, rows in ENUMS.items():
                create_table(con, t, ["id", "name", "label"])
                con.executemany(f"INSERT INTO {t} VALUES (?,?,?)", rows)
        if self.processes:
            create_table(con, "PROCESSES", ["globalPid", "pid", "name"])
            con.executemany("INSERT INTO PROCESSES VALUES (?,?,?)", self.processes)
        if self.threads:
            create_table(con, "ThreadNames", ["nameId", "priority", "globalTid"])
            con.executemany("INSERT INTO ThreadNames VALUES (?,?,?)", self.threads)
        if self.gpus:
            if self.old_gpu_table:
                create_table(con, "TARGET_INFO_CUDA_GPU", _OLD_GPU)
                con.executemany("INSERT INTO TARGET_INFO_CUDA_GPU VALUES (?,?,?,?,?,?)",
                                [(g["id"], g["name"], g["totalMemory"], g["smCount"], g["computeMajor"],
                                  g["computeMinor"]) for g in self.gpus])
            else:
                create_table(con, "TARGET_INFO_GPU", _GPU)
                con.executemany(f"INSERT INTO TARGET_INFO_GPU VALUES ({','.join('?' * len(_GPU))})",
                                [tuple(VM_BITS if c == "vmId" else g.get(c, 0 if c not in _TEXT_COLS else "")
                                       for c in _GPU) for g in self.gpus])
        create_table(con, sc["meta"], ["name", "value"])
        con.executemany(f"INSERT INTO {sc['meta']} VALUES (?,?)", [
            ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"), ("EXPORT_PRODUCT_VERSION", sc["product"]),
            ("EXPORT_SCHEMA_VERSION", sc["version"]), ("EXPORT_HOST", "secret-host"),
            ("EXPORT_USER", "secret-user"), ("EXPORT_PARAM_INPUT_PATH", "/home/secret/report1.nsys-rep"),
            ("EXPORT_PARAM_LAZY", "true")])
        if self.duration is not None:
            create_table(con, "ANALYSIS_DETAILS", ["globalVid", "duration", "startTime", "stopTime"])
            con.execute("INSERT INTO ANALYSIS_DETAILS VALUES (?,?,?,?)",
                        (VM_BITS, self.duration, 41_000_000_000, 41_000_000_000 + self.duration))
        con.commit()
        con.close()
        return path


# ---------------------------------------------------------------------------
# The reference export used by tests, with its ground truth.
# ---------------------------------------------------------------------------
PID_A, PID_B = 1000, 2000


def reference_export(schema: str = "3.24", **kw) -> NsysExport:
    """Two processes with colliding correlation ids; every metric known (see tests/test_nsys_analyses.py)."""
    e = NsysExport(schema, **kw)
    A, B = PID_A, PID_B
    e.process(A, "python")
    e.process(B, "vllm-worker")
    e.process(3000, "idle-daemon")          # system-wide PROCESSES rows exist without events
    e.thread(A, A, "MainThread")
    e.thread(A, 1001, "scheduler")
    e.thread(B, B, "worker0")
    e.gpu(0)
    e.gpu(1)
    e.gpu(2)                                 # present on the box, unused
    e.duration = 10_000
    # process A, main thread
    e.nvtx(A, A, 50, None, "checkpoint", event_type=34)
    e.nvtx(A, A, 100, 1000, "prefill")
    e.nvtx(A, A, 150, 400, "attention")
    e.nvtx(A, A, 1100, 2000, "decode", registered=True)
    e.runtime(A, A, 200, 210, "cudaLaunchKernel_v7000", 1)
    e.kernel(A, 300, 500, "gemm_kernel(float*, int)", 1, device=0, stream=7)
    e.runtime(A, A, 450, 460, "cudaLaunchKernel_v7000", 2)
    e.kernel(A, 600, 650, "softmax_kernel<float>(float*)", 2, device=0, stream=7)
    e.runtime(A, A, 1200, 1210, "cuLaunchKernelEx", 3, driver=True)
    e.kernel(A, 1300, 1400, "gemm_kernel(float*, int)", 3, device=0, stream=7)
    e.runtime(A, A, 1500, 1510, "cudaMemcpyAsync_v3020", 4)
    e.memcpy(A, 1600, 1700, 1, 0, 2, 1 << 20, 4)                 # H2D, pageable -> device, async API
    e.runtime(A, A, 2100, 2400, "cudaMemcpy_v3020", 5)
    e.memcpy(A, 2150, 2350, 2, 2, 0, 4096, 5)                    # D2H, device -> pageable, sync API
    e.runtime(A, A, 2500, 2600, "cudaMemset_v3020", 6)
    e.memset(A, 2510, 2590, 8192, 6)
    e.runtime(A, A, 2700, 3000, "cudaDeviceSynchronize_v3020", 7)
    e.sync(A, 2710, 2990, 4, 7)                                  # context sync, device-wide
    e.runtime(A, A, 3100, 3200, "cudaStreamSynchronize_v3020", 8)
    e.sync(A, 3110, 3190, 3, 8, stream=7)
    e.runtime(A, A, 3300, 3310, "cudaLaunchKernel_v7000", 9)
    e.kernel(A, 3400, 3500, "late_kernel", 9, device=0, stream=7)
    e.kernel(A, 4000, 4460, "orphan_kernel", 99, device=0, stream=8)   # no runtime row
    # process A, second thread
    e.nvtx(A, 1001, 50, 3000, "request", event_type=60)
    e.osrt(A, 1001, 100, 2000, "pthread_cond_wait")
    # process B: same correlation ids 1..4
    e.nvtx(B, B, 0, 5000, "decode")
    e.runtime(B, B, 100, 110, "cudaLaunchKernel_v7000", 1)
    e.kernel(B, 120, 1120, "gemm_kernel(float*, int)", 1, device=1, stream=13)
    e.runtime(B, B, 200, 210, "cudaLaunchKernel_v7000", 2)
    e.kernel(B, 1200, 1300, "other_kernel", 2, device=1, stream=13)
    e.runtime(B, B, 300, 320, "cudaGraphLaunch_v10000", 3)
    e.kernel(B, 1400, 1450, "graph_k", 3, device=1, stream=13, graph_id=5)
    e.kernel(B, 1460, 1500, "graph_k", 3, device=1, stream=13, graph_id=5)
    e.runtime(B, B, 2000, 2500, "cudaStreamSynchronize_v3020", 4)
    e.nvtx(B, B, 4000, None, "tail")                             # never popped
    return e


# Ground truth of reference_export (ns).
TRUTH = {
    "kernels": 9, "kernel_ns": 2100, "kernel_ns_by_pid": {PID_A: 910, PID_B: 1190},
    "memcpy": 2, "memset": 1, "runtime": 12, "driver": 1, "gpu_sync": 2, "nvtx_ranges": 6, "marks": 1, "osrt": 1,
    "launch_flows": 11,   # 9 kernels - orphan + graph kernel pair share one API: 8 kernels + 2 memcpy + 1 memset
    "trace_end": 5000,
    # innermost-range attribution via the launching call
    "attributed": {"attention": 200, "prefill": 50, "decode": 100 + 1000 + 100 + 50 + 40},
    "coverage": 1540 / 2100,
    "coverage_by_pid": {PID_A: 350 / 910, PID_B: 1.0},
    "ranges": {"prefill": (1, 900), "attention": (1, 250), "decode": (2, 900 + 5000), "request": (1, 2950),
               "tail": (1, 1000)},
}
