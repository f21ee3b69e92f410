"""Summary of one `inferscope run` of a CUDA zoo program (used by the gpu_*.sh device scripts).

    python bench/gpu_run_summary.py NAME     (reads /tmp/r_NAME.json and /tmp/t_NAME.iscope)
"""
import json
import sys

from inferscope.trace import native
from inferscope.trace.kinds import SpanKind
s = sys.argv[1]
rep = json.load(open(f"/tmp/r_{s}.json"))
t = native.load(f"/tmp/t_{s}.iscope")
c = t.meta["collection"]
sp = t.spans
lo, hi = rep["window"]["start_ns"], rep["window"]["end_ns"]
inw = (sp.start_ns >= lo) & (sp.end_ns <= hi)
cnt = {k.name: int(((sp.kind == int(k)) & inw).sum()) for k in (SpanKind.KERNEL, SpanKind.MEMCPY, SpanKind.MEMSET, SpanKind.RUNTIME, SpanKind.DRIVER, SpanKind.GPU_SYNC, SpanKind.CPU_OP)}
print(s, "verdict", rep.get("verdict", {}).get("id") if isinstance(rep.get("verdict"), dict) else rep.get("verdict"),
      "findings", sorted(f["id"] for f in rep["findings"])[:12])
print(" window counts", cnt, "flows", len(t.flows))
print(" cupti", {k: v for k, v in c.items() if k.startswith(("cupti_", "gpu_source"))}, "torch_profiler", c.get("torch_profiler"), "clock_sync_error_us", c.get("clock_sync_error_us"),
      "overhead_pct", c.get("estimated_overhead_pct"), "finalize_ms", c.get("finalize_ms"))
print(" breakdown", [(b["category"], round(b["pct"], 1)) for b in rep["breakdown"]][:8])
k = (sp.kind == int(SpanKind.KERNEL)) & inw
print(" window kernel busy ms", round(float((sp.end_ns[k] - sp.start_ns[k]).sum()) / 1e6, 3), "warnings", t.meta.get("warnings"))
