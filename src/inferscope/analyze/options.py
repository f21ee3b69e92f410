"""Options every analysis may read (one object, passed down from the CLI or API)."""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import thresholds


@dataclass
class AnalyzeOptions:
    window: str | None = None                 # None/"all": whole trace; see analyze.window
    phase_map: dict[str, list[str]] | None = None   # {"prefill": ["prefill", "prompt"], ...}
    nvtx_kernel_map: bool = True              # NVTX/annotation -> kernel attribution
    nvtx_coverage_warn_threshold: float = thresholds.NVTX_COVERAGE_WARN_THRESHOLD
    top_n: int = 20                           # rows in top-N tables
    extra: dict = field(default_factory=dict)
