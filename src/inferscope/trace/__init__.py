from .builder import TraceBuilder
from .kinds import CopyKind, FlowKind, MemKind, SpanKind, TrackKind
from .model import Trace
from .strings import StringTable

__all__ = ["Trace", "TraceBuilder", "StringTable", "SpanKind", "TrackKind", "CopyKind", "MemKind", "FlowKind"]
