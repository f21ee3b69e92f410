"""report.json: the analysis result as-is (schema in ARCHITECTURE.md)."""
from __future__ import annotations

import json

from ..util.atomic import atomic_write_text


def render(result: dict, trace, path) -> None:
    atomic_write_text(path, json.dumps(result, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
