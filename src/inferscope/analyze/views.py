"""What the renderers draw beyond report.json (``result/views.py``), computed from the trace here so that
report/ computes nothing: the timeline strip's binned summary (report.html) and every device-wide idle gap
in the window, longest first (tables/gpu_idle_gaps.csv).  Each only for the formats that draw it
(``outputs.write_reports`` calls ``attach`` with the formats of the set)."""
from __future__ import annotations

from ..result.views import IdleGapList, Views
from .idle_gaps import device_gaps, largest_first
from .timeline_summary import summarise

TIMELINE_BINS = 1000        # the strip's width in bins (report.html draws one column per bin)


def views_for(trace, start_ns: int | None, end_ns: int | None, formats=("html", "csv"), idle_gaps: bool = True,
              n_bins: int = TIMELINE_BINS) -> Views:
    """The views of ``trace`` over [start_ns, end_ns) (None: the trace's bounds) the ``formats`` draw;
    ``idle_gaps``: the result has an idle-gap table (the CSV lists every gap only then)."""
    v = Views()
    if trace is None:
        return v
    if "html" in formats:
        # the strip's bounds as report.html has always taken them: through a float (epoch-scale ns round to
        # ~2^-52 relative, a few hundred ns), so the page stays byte-identical; exact ints would be better
        v.timeline = summarise(trace, _as_drawn(start_ns), _as_drawn(end_ns), n_bins=n_bins)
    if "csv" in formats and idle_gaps and start_ns is not None and end_ns is not None:
        ds, de = device_gaps(trace, int(start_ns), int(end_ns))
        order = largest_first(ds, de)
        v.idle_gaps = IdleGapList(ds[order], de[order])
    return v


def _as_drawn(ns):
    return None if ns is None else int(float(ns))


def attach(report, trace, formats) -> None:
    """Set ``report.views`` for the ``formats`` (a Report; a dict - a hand-built result - is left as it is)."""
    if not hasattr(report, "window"):
        return
    w = report.window
    report.views = views_for(trace, w.start_ns, w.end_ns, tuple(formats), "gpu_idle_gaps" in report.tables)
