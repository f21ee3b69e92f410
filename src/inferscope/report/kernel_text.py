"""Nsight Compute kernel words for the renderers (raw text; callers escape): the headline of a capture analysed
alone, and typed twins of two ``wording.py`` helpers that analyze/ calls with dicts."""
from __future__ import annotations

from ..result import Report, StallReason


def capture_only(report: Report) -> bool:
    """The input is an Nsight Compute capture without a timeline (``wording.kernel_capture_only`` of the Report)."""
    return report.source.format == "ncu" and report.kernel_deep_dive is not None


def stall_words(reasons: list[StallReason]) -> str:
    """``long_scoreboard (memory dependency: ...) 48%, wait (...) 12%`` (``wording.stall_text`` of typed reasons)."""
    return ", ".join(f"{r.reason}" + (f" ({r.meaning})" if r.meaning else "") + f" {r.share_pct:.0f}%" for r in reasons)


def kernel_capture_lines(report: Report, limit: int = 5) -> list[str]:
    """Headline of an Nsight Compute capture analysed alone: no timeline, so kernels and their limiters
    instead of an end-to-end time and a breakdown (raw text; the caller escapes)."""
    dd = report.kernel_deep_dive
    ks = dd.kernels if dd is not None else []
    out = [f"Nsight Compute capture: {len(ks)} kernel(s) profiled in {dd.launches if dd is not None else 0} launch(es), "
           "each measured alone (no timeline: no end-to-end latency)"]
    if ks:
        k = ks[0]
        out.append(f"Top kernel: {k.short_name} ({k.share_pct:.1f}% of the profiled time, {k.duration_us:,.2f} us "
                   f"per launch), limited by {k.limiter_text}")
        out += ["", "Kernels (share of the profiled time, limiter):"]
        out += [f"- {r.short_name}: {r.share_pct:.1f}%, {r.limiter_text}" for r in ks[:limit]]
        if len(ks) > limit:
            out.append(f"- ... {len(ks) - limit} more in the kernel deep-dive")
    return out
