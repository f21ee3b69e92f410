"""The terminal / report.md headline of an Nsight Compute capture analysed alone (raw text; callers escape)."""
from __future__ import annotations


def kernel_capture_lines(result: dict, limit: int = 5) -> list[str]:
    """Headline of an Nsight Compute capture analysed alone: no timeline, so kernels and their limiters
    instead of an end-to-end time and a breakdown (raw text; the caller escapes)."""
    dd = result.get("kernel_deep_dive") or {}
    ks = dd.get("kernels") or []
    out = [f"Nsight Compute capture: {len(ks)} kernel(s) profiled in {dd.get('launches', 0)} launch(es), each measured "
           "alone (no timeline: no end-to-end latency)"]
    if ks:
        k = ks[0]
        out.append(f"Top kernel: {k['short_name']} ({k['share_pct']:.1f}% of the profiled time, {k['duration_us']:,.2f} us "
                   f"per launch), limited by {k['limiter_text']}")
        out += ["", "Kernels (share of the profiled time, limiter):"]
        out += [f"- {r['short_name']}: {r['share_pct']:.1f}%, {r['limiter_text']}" for r in ks[:limit]]
        if len(ks) > limit:
            out.append(f"- ... {len(ks) - limit} more in the kernel deep-dive")
    return out
