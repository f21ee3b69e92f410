"""The Trace: columnar numpy tracks, spans, counters, flows and interned strings on one integer-ns clock, its builder
and the native ``.iscope`` format.  Every collector and importer produces one; every analysis reads one."""
from .builder import TraceBuilder
from .kinds import CopyKind, FlowKind, MemKind, SpanKind, TrackKind
from .model import Trace
from .strings import StringTable

__all__ = ["Trace", "TraceBuilder", "StringTable", "SpanKind", "TrackKind", "CopyKind", "MemKind", "FlowKind"]
