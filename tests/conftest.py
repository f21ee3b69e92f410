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


@pytest.fixture(autouse=True)
def _sigint_disposition_restored():
    """Every test leaves SIGINT as it found it.  A test that leaves it ignored makes every later
    subprocess inherit SIG_IGN (Python then keeps it: Ctrl-C tests of children fail) and later in-process
    Ctrl-C tests see nothing - seen once in a full run under load (2026-11-25).  Restored here, and the
    test that changed it is named in a warning so the leak can be found."""
    import signal
    import threading
    import warnings
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    if after is not before:
        signal.signal(signal.SIGINT, before)
        warnings.warn(f"the test left SIGINT's handler changed ({after!r}); restored")
