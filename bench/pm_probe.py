"""On an NVIDIA GPU: what CUPTI PM sampling (hardware throughput counters, issue 29 item 2) gives here.

    python bench/pm_probe.py OUT_DIR            (needs cupti-python; written for the next GPU session)

1. the chip name and the PM-sampling base metrics it offers (OUT_DIR/pm_metrics.txt);
2. which candidate metrics configure (DRAM bytes, SM active, tensor pipe, elapsed cycles);
3. a memory-bound device-to-device copy loop (bytes moved known) sampled every 100 us: DRAM bytes
   per second from the counters vs bytes moved / time between CUDA events (OUT_DIR/pm_copy.json:
   every decoded sample, for a future collector's tests).
Each step prints one line and goes on when the one before failed (no profiling permission, a metric
unknown on this chip): the output says what works.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

CANDIDATES = ["gr__cycles_elapsed.max", "sm__cycles_active.avg", "sm__cycles_elapsed.sum",
              "dram__bytes_read.sum", "dram__bytes_write.sum", "dram__bytes.sum",
              "sm__pipe_tensor_op_hmma_cycles_active.avg", "sm__inst_executed_pipe_tensor.sum",
              "pcie__read_bytes.sum", "pcie__write_bytes.sum"]
INTERVAL_NS = 100_000


def main(argv=None) -> int:
    out = Path((argv or sys.argv[1:])[0])
    out.mkdir(parents=True, exist_ok=True)
    import torch
    from cupti import cupti as C
    from cupti import pm_sampling, profiler_host
    torch.cuda.init()
    torch.zeros(1, device="cuda")                   # a context on device 0
    p = C.DeviceGetChipNameParams()
    p.struct_size = C.DEVICE_GET_CHIP_NAME_PARAMS_STRUCT_SIZE
    p.device_index = 0
    C.device_get_chip_name(p.ptr)
    chip = p.p_chip_name
    print("chip", chip, torch.cuda.get_device_name(0))
    names = []
    try:
        host = profiler_host.ProfilerHost(chip, profiler_host.ProfilerType.PM_SAMPLING)
        host.initialize()
        try:
            for mt in profiler_host.MetricType:
                if mt.name.endswith("COUNT"):
                    continue
                try:
                    names += [f"{mt.name}\t{m}" for m in host.get_base_metrics(mt)]
                except ValueError:
                    continue
        finally:
            host.deinitialize()
    except Exception as e:      # noqa: BLE001 - report and go on
        print("base metrics: failed", type(e).__name__, e)
    (out / "pm_metrics.txt").write_text("\n".join(names) + "\n")
    print("base metrics:", len(names), "; dram:", [n.split("\t")[1] for n in names if "dram__" in n][:12])
    ok = []
    for m in CANDIDATES:
        col = pm_sampling.Collector(device_index=0)
        try:
            col.enable()
            col.configure(metrics=[m], sampling_interval=INTERVAL_NS,
                          trigger_mode=pm_sampling.TriggerMode.GPU_TIME_INTERVAL, hardware_buffer_size=64 << 20)
            ok.append(m)
        except Exception as e:      # noqa: BLE001
            print("metric", m, "refused:", type(e).__name__, str(e)[:160])
        finally:
            try:
                col.disable()
            except Exception:      # noqa: BLE001
                pass
    print("metrics that configure:", ok)
    if not ok:
        return 1
    # the copy loop: 2 GiB buffers, 40 device-to-device copies (read + write per byte)
    n = 1 << 29
    a = torch.empty(n, dtype=torch.float32, device="cuda").fill_(1.0)
    b = torch.empty_like(a)
    b.copy_(a)
    torch.cuda.synchronize()
    col = pm_sampling.Collector(device_index=0)
    col.enable()
    try:
        col.configure(metrics=ok, sampling_interval=INTERVAL_NS,
                      trigger_mode=pm_sampling.TriggerMode.GPU_TIME_INTERVAL, hardware_buffer_size=256 << 20)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        col.start()
        t0 = C.get_timestamp()
        e0.record()
        for _ in range(40):
            b.copy_(a)
        e1.record()
        torch.cuda.synchronize()
        t1 = C.get_timestamp()
        col.stop()
        data = col.decode(max_samples=200_000)
        loop_s = e0.elapsed_time(e1) / 1e3
        moved = 40 * 2 * n * 4
        samples = [{"start": s.start_timestamp, "end": s.end_timestamp, "values": [float(v) for v in s.metric_values]}
                   for s in data]
        print("samples", len(samples), "metrics", list(data.metrics), "loop_s", round(loop_s, 4),
              "bytes/s (events)", f"{moved / loop_s:.3e}")
        inw = [s for s in samples if s["start"] >= t0 and s["end"] <= t1]
        for i, m in enumerate(data.metrics):
            if m.startswith("dram__bytes"):
                tot = sum(s["values"][i] for s in inw)
                span = (max(s["end"] for s in inw) - min(s["start"] for s in inw)) / 1e9 if inw else 0
                print(f"{m}: {tot:.3e} bytes over {span:.4f} s of samples -> {tot / span:.3e} B/s" if span else f"{m}: no samples")
        (out / "pm_copy.json").write_text(json.dumps({
            "chip": chip, "metrics": list(data.metrics), "interval_ns": INTERVAL_NS, "bytes_moved": moved,
            "loop_s_cuda_events": loop_s, "cupti_t0": t0, "cupti_t1": t1, "samples": samples[:20000]}))
    finally:
        col.disable()
    return 0


if __name__ == "__main__":
    t = time.perf_counter()
    rc = main()
    print(f"pm_probe done in {time.perf_counter() - t:.1f} s, rc {rc}")
    raise SystemExit(rc)
