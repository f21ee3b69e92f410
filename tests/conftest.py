"""Shared fixtures.  Real GPU captures live in ../shared/traces; the small permissively licensed
ones are vendored in tests/data/traces (see its README) so the recount tests run on a fresh clone."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACES = Path(os.environ.get("INFERSCOPE_SHARED_TRACES", REPO.parent / "shared" / "traces"))
VENDORED_TRACES = REPO / "tests" / "data" / "traces"


def shared_path(*parts: str) -> Path:
    for root in (SHARED_TRACES, VENDORED_TRACES):
        p = root.joinpath(*parts)
        if p.exists():
            return p
    pytest.skip(f"trace {'/'.join(parts)} not available (set INFERSCOPE_SHARED_TRACES or provide ../shared/traces)")


def _traces(sub: str, pattern: str) -> list[Path]:
    """Every trace of one kind: the shared ones, plus vendored copies the shared folder lacks."""
    seen: dict[str, Path] = {}
    for root in (SHARED_TRACES, VENDORED_TRACES):
        d = root / sub
        if d.is_dir():
            for p in sorted(d.glob(pattern)):
                seen.setdefault(p.name, p)
    return sorted(seen.values(), key=lambda p: p.name)


def kineto_traces() -> list[Path]:
    return _traces("kineto", "*.json.gz")


def nsys_traces() -> list[Path]:
    return _traces("nsys", "*.sqlite")


def kineto_params():
    """pytest params over every shared Kineto trace, or one skipped param when absent."""
    ts = kineto_traces()
    if not ts:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no shared Kineto traces at {SHARED_TRACES / 'kineto'}"))]
    return [pytest.param(p, id=p.name.split(".")[0]) for p in ts]


def nsys_params():
    ts = nsys_traces()
    if not ts:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no shared nsys exports at {SHARED_TRACES / 'nsys'}"))]
    return [pytest.param(p, id=p.name.split(".")[0]) for p in ts]
