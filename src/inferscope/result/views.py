"""What the renderers draw beyond report.json: the timeline strip's binned summary (report.html) and every
device-wide idle gap (tables/gpu_idle_gaps.csv).  Computed from the trace by ``analyze/views.py`` for the
formats asked for (``outputs.write_reports``) and carried on the ``Report`` as ``report.views`` (an attribute,
not a field: never in report.json or its schema).  Plain dataclasses holding numpy arrays; this module imports
no numpy (the annotations name the types only)."""

from dataclasses import dataclass, field
from typing import Any, Optional

Array = Any     # numpy.ndarray


@dataclass
class Lane:
    label: str
    kind: str                 # "gpu" | "cpu" | "partition" (the breakdown over the window)
    track: int
    busy_ms: float
    busy_pct: float
    heights: Array            # uint8 [n_classes, n_bins]: stacked heights in percent of lane height
    class_ms: dict = field(default_factory=dict)
    class_ns: dict = field(default_factory=dict)   # partition lane: exact ns per class


@dataclass
class CounterLane:
    label: str
    unit_max: float
    bins: Array               # int bin indices with samples
    values: Array             # mean value per such bin
    vmin: float
    vmax: float
    unit: str = ""
    mean: float = 0.0


@dataclass
class Mark:
    label: str
    kind: str                 # "step" | "annotation" | "phase" | "idle"
    start_ns: int
    end_ns: int


@dataclass
class TimelineSummary:
    """The activity over the window, binned (lanes x breakdown categories x bins; class index = position in
    ``result.base.CATEGORIES``)."""
    t0: int
    t1: int
    n_bins: int
    edges: Array              # int64 bin edges relative to t0
    lanes: list
    counters: list
    marks: list
    hidden_lanes: int = 0
    notes: list = field(default_factory=list)
    partition: Optional[Lane] = None

    @property
    def span_ns(self) -> int:
        return max(1, self.t1 - self.t0)


@dataclass
class IdleGapList:
    """Every device-wide idle gap in the window (``idle_gaps.device_gaps``): start/end ns, longest first."""
    start_ns: Array           # int64
    end_ns: Array             # int64


@dataclass
class Views:
    timeline: Optional[TimelineSummary] = None
    idle_gaps: Optional[IdleGapList] = None
