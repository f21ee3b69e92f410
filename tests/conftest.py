"""Shared fixtures.  Real GPU captures live in ../shared/traces (never copied here)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACES = Path(os.environ.get("INFERSCOPE_SHARED_TRACES", REPO.parent / "shared" / "traces"))


def shared_path(*parts: str) -> Path:
    p = SHARED_TRACES.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"shared trace {p} not available (set INFERSCOPE_SHARED_TRACES or provide ../shared/traces)")
    return p


def kineto_traces() -> list[Path]:
    d = SHARED_TRACES / "kineto"
    return sorted(d.glob("*.json.gz")) if d.is_dir() else []


def nsys_traces() -> list[Path]:
    d = SHARED_TRACES / "nsys"
    return sorted(d.glob("*.sqlite")) if d.is_dir() else []


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
