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


def _sigint_os_state() -> tuple[bool, bool]:
    """(ignored, blocked) for SIGINT at the OS level (/proc/self/status SigIgn, SigBlk of this thread): a
    library's native code (Ray's core worker, gRPC) can change it behind Python's back, and children inherit it."""
    import signal
    bit = 1 << (signal.SIGINT - 1)
    ign = blk = False
    try:
        with open("/proc/thread-self/status") as f:
            for ln in f:
                if ln.startswith("SigIgn:"):
                    ign = bool(int(ln.split()[1], 16) & bit)
                elif ln.startswith("SigBlk:"):
                    blk = bool(int(ln.split()[1], 16) & bit)
    except OSError:
        pass
    return ign, blk


@pytest.fixture(autouse=True)
def _sigint_disposition_restored():
    """Every test leaves SIGINT as it found it, for Python and for the OS.  A test that leaves it ignored or
    blocked makes every later subprocess inherit that (Python then keeps ignoring it: Ctrl-C tests of
    children fail) and later in-process Ctrl-C tests see nothing - seen in full runs under load
    (2026-11-25).  Restored here, and the test that changed it is named in a warning so the leak can be found."""
    import signal
    import threading
    import warnings
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGINT)
    os_before = _sigint_os_state()
    yield
    after = signal.getsignal(signal.SIGINT)
    os_after = _sigint_os_state()
    if after is not before or os_after != os_before:
        signal.signal(signal.SIGINT, before)          # also re-installs the OS-level handler
        if os_after[1] and not os_before[1]:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        warnings.warn(f"the test left SIGINT changed (handler {after!r}, OS ignored/blocked {os_after} vs "
                      f"{os_before}); restored")


@pytest.fixture(autouse=True, scope="session")
def _sigint_not_ignored():
    """A suite started in the background by a non-interactive shell (`bash .ci/run &`, nohup) inherits SIGINT
    ignored, and Python keeps it ignored: every Ctrl-C test (in-process, and in the children it spawns, which
    inherit the disposition) then sees nothing - the cause of this session's 'SIGINT had no effect' CI
    failures.  The suite runs as from a terminal: Python's default handler."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
