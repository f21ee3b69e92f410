"""Shared fixtures.  Real GPU captures live in ../shared/traces; the small permissively licensed
ones are vendored in tests/data/traces (see its README) so the recount tests run on a fresh clone.
The suite's one retry policy (`live_retry`, below) is declared here and nowhere else."""
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


# ------------------------------------------------------------------------------------------------
# The retry policy: the one place that says which tests may be retried, how often, and why
# ------------------------------------------------------------------------------------------------
LIVE_RERUNS = 1


def pytest_configure(config):
    config.addinivalue_line("markers", "live_retry: a live timing test rerun once when a band misses "
                                       "(the suite's one retry policy: tests/conftest.py)")


@pytest.hookimpl(trylast=True)          # after -m/-k deselection: only the selected tests are checked
def pytest_collection_modifyitems(config, items):
    """``@pytest.mark.live_retry`` is the suite's only retry: a test so marked is run again, whole (fresh
    fixtures and tmp_path), ``LIVE_RERUNS`` = 1 time when an attempt fails an assertion.

    Which tests: only live timing tests (marked ``live``) that compare one sampled run of a real program
    with bands - zoo shares against their self-timed truth (test_zoo_truth.py, test_zoo.py), live diffs
    (test_diff.py).  Why: one run on a loaded shared machine (2 cores beside other jobs) holds 30-160
    sampler ticks, so a share near 50 % is uncertain by +-9-17 points, and other processes' load moves
    shares further (run queue, GIL hand-overs): a run outside a band now and then is sampling noise,
    while a real bias of the tool fails both attempts.  The bodies assert on one run; never a loop or a
    second run of their own (tests/test_retry_policy.py fails on such helpers).

    Never retried: importer, analysis and renderer tests (deterministic: a failure is a bug), and any
    attempt that ends in an error other than a failed assertion (crash, timeout, missing file).
    Counted and reported: the summary line says "N rerun", and a section "live_retry reruns: N" names each
    rerun test, what its first attempt missed (the assertion's first line) and how the rerun ended.  The policy is
    pytest-rerunfailures' ``flaky(reruns=1)`` limited to AssertionError (``only_rerun``), set here only: a ``flaky``
    marker in a test file, ``live_retry`` on a test that is not ``live``, or a global ``--reruns`` /
    ``--force-reruns`` is a usage error."""
    retried = [it for it in items if it.get_closest_marker("live_retry") is not None]
    own = [it.nodeid for it in items if it.get_closest_marker("flaky") is not None]
    if own:
        raise pytest.UsageError(f"{own[0]}: a flaky marker of its own; retries are declared by live_retry "
                                f"(tests/conftest.py) only")
    not_live = [it.nodeid for it in retried if it.get_closest_marker("live") is None]
    if not_live:
        raise pytest.UsageError(f"{not_live[0]}: live_retry on a test that is not live (only live timing "
                                f"tests may be retried: tests/conftest.py)")
    if not config.pluginmanager.hasplugin("rerunfailures"):
        if retried:
            raise pytest.UsageError("pytest-rerunfailures is not installed: the live tests' retry policy needs "
                                    "it (pip install -e '.[test]')")
        return
    if config.getoption("force_reruns") or config.getoption("reruns") or (config.getini("reruns") or "0") != "0":
        raise pytest.UsageError("--reruns/--force-reruns retry every test; only live_retry tests may be "
                                "retried (tests/conftest.py)")
    for it in retried:
        it.add_marker(pytest.mark.flaky(reruns=LIVE_RERUNS, only_rerun=[r"^AssertionError\b"]))


def pytest_terminal_summary(terminalreporter):
    """The live_retry reruns of this session, one line each: the test, its first attempt's failed assertion
    (first line, 300 characters at most) and the rerun's outcome - a rerun that passed is still seen."""
    reruns = terminalreporter.stats.get("rerun", [])
    if not reruns:
        return
    final = {}
    for outcome in ("passed", "failed", "skipped", "error"):
        for r in terminalreporter.stats.get(outcome, []):
            if r.when == "call" or outcome in ("failed", "error", "skipped"):
                final[r.nodeid] = outcome
    terminalreporter.write_sep("=", f"live_retry reruns: {len(reruns)}")
    for r in reruns:
        crash = getattr(r.longrepr, "reprcrash", None)
        msg = (crash.message if crash is not None else str(r.longrepr)).strip().splitlines() or [""]
        phase = "" if r.when == "call" else f" (in {r.when})"
        terminalreporter.write_line(f"{r.nodeid}: first attempt{phase} {msg[0][:300]}; rerun {final.get(r.nodeid, '?')}")
