"""The shared base (``_S``, ``Num``, ``SCHEMA_VERSION``) and the report's identity sections: the tool,
the source trace (devices, distributed job), the window and the breakdown categories."""

from typing import Any, Optional

import msgspec

SCHEMA_VERSION = 2


class _S(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=False):
    pass


Num = Optional[float]


# The breakdown's categories (exact names, in priority order) and their labels: analyze/breakdown.py partitions
# the window into them, the renderers name and colour them.
CATEGORIES = ("gpu_compute", "gpu_communication", "h2d_copy", "d2h_copy", "other_copy", "sync_wait", "cpu_preprocessing",
              "framework_overhead", "cpu_compute", "waiting", "other")

CATEGORY_LABELS = {
    "gpu_compute": "GPU compute",
    "gpu_communication": "GPU communication",
    "h2d_copy": "H2D copy",
    "d2h_copy": "D2H copy",
    "other_copy": "Other copies / memset",
    "sync_wait": "Sync wait",
    "cpu_preprocessing": "CPU preprocessing",
    "framework_overhead": "Framework overhead",
    "cpu_compute": "CPU compute",
    "waiting": "Waiting (off-CPU or for a CPU)",
    "other": "Other / unattributed",
}

class Tool(_S):
    name: str
    version: str


class Device(_S):
    id: Optional[int] = None
    name: Optional[str] = None
    total_memory_bytes: Optional[int] = None
    sm_count: Optional[int] = None
    compute_capability: Optional[str] = None


class ProcessGroup(_S):
    pg_name: str
    pg_desc: str
    backend_config: str
    pg_size: Optional[int]
    ranks: list[int]


class Distributed(_S):
    """Kineto ``distributedInfo``: which rank of which torch.distributed job the trace is."""
    rank: int
    world_size: Optional[int] = None
    pg_count: Optional[int] = None
    backend: Optional[str] = None
    nccl_version: Optional[str] = None
    pg_config: list[ProcessGroup] = []


class Source(_S):
    format: str
    file: Optional[str]
    devices: list[Device]
    tool_versions: dict[str, Any]
    events: int
    spans: int
    tracks: int
    counters: int
    distributed: Optional[Distributed] = None
    language: Optional[str] = None            # the program's host language: python | native | unknown (analyze/language.py)
    language_evidence: Optional[str] = None   # what in the trace says so


class WindowInfo(_S):
    start_ns: int
    end_ns: int
    label: str
    kind: str
    dur_ms: float


class Part(_S):
    name: str
    label: str
    ns: int
    ms: float
    pct: float


class Category(_S):
    """One breakdown category: an exclusive share of the window (the rows sum to e2e_ms)."""
    category: str
    label: str
    ns: int
    ms: float
    pct: float
    parts: list[Part]
