"""report.json: the analysis result as-is (schema in ARCHITECTURE.md)."""
from __future__ import annotations

import json

from ..result import Report
from ..util.atomic import atomic_write_text


def render(report: Report, trace, path) -> None:
    atomic_write_text(path, json.dumps(report.to_dict(), indent=2, ensure_ascii=False, allow_nan=False) + "\n")
