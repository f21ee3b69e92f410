"""Off-CPU probes (collect/blocking.py): syscall decoding, the live probe on our own blocked threads, and
the blocking_io / lock_wait findings rendered with escaping."""
import os
import sys
import threading
import time

import pytest

from inferscope.collect import blocking as B
from inferscope.collect import blocking_syscalls as SC
from inferscope.result import from_dict

linux = pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux /proc")


def test_decode_x86_64():
    t = SC.arch_table("x86_64")
    # pread64(fd 5, buf, 4096, off 0), then sp and pc
    assert SC.decode(b"17 0x5 0x7f00 0x1000 0x0 0x0 0x0 0x7ffd 0x7f01\n", t) == ("pread64", [5, 0x7f00, 4096, 0, 0, 0])
    assert SC.decode("74 0x3 0x0 0x0 0x0 0x0 0x0 0x1 0x2", t)[0] == "fsync"
    assert SC.decode("202 0x55 0x80 0x0 0x0 0x0 0x0 0x1 0x2", t)[0] == "futex"
    name, args = SC.decode("257 0xffffffffffffff9c 0x7f00 0x0 0x0 0x0 0x0 0x1 0x2", t)
    assert name == "openat" and args[0] == SC.AT_FDCWD            # signed: AT_FDCWD
    assert SC.decode("running\n", t) is None and SC.decode("-1 0x7ffd 0x7f01", t) is None and SC.decode("", t) is None
    assert SC.decode("9999 0x0 0x0 0x0 0x0 0x0 0x0 0x0 0x0", t)[0] == "syscall_9999"
    assert SC.decode("garbage", t) is None


def test_decode_aarch64_and_kinds():
    t = SC.arch_table("arm64")
    assert t is SC.SYSCALLS["aarch64"]
    assert [SC.decode(f"{n} 0x3 0x0 0x0 0x0 0x0 0x0 0x0 0x0", t)[0] for n in (63, 64, 67, 82, 83, 56, 98, 115)] == [
        "read", "write", "pread64", "fsync", "fdatasync", "openat", "futex", "clock_nanosleep"]
    assert SC.arch_table("sparc") == {}
    assert [SC.kind_of(n) for n in ("pread64", "fsync", "openat", "futex", "clock_nanosleep", "epoll_wait", "wait4")] == [
        "io", "io", "io", "lock", "sleep", "poll", "other"]
    # every name the tables produce has a kind and the fd/io sets use only known names
    names = set(SC.SYSCALLS["x86_64"].values()) | set(SC.SYSCALLS["aarch64"].values())
    assert SC.FD_CALLS <= names and SC.IO_CALLS <= names | {"sync"} and SC.LOCK_CALLS <= names


def test_flags_and_paths():
    if hasattr(os, "O_DIRECT"):
        assert SC.flag_names(os.O_WRONLY | os.O_DIRECT) == ["O_DIRECT"]
    assert SC.flag_names(os.O_DSYNC) == ["O_DSYNC"]
    assert SC.flag_names(os.O_SYNC) == ["O_SYNC"]                   # O_SYNC includes O_DSYNC's bit: named once
    assert SC.clean_path("/a\nb\x1b[31m") == "/a?b?[31m"
    assert len(SC.clean_path("x" * 1000)) == 300


@linux
def test_probe_names_syscall_file_and_frame(tmp_path):
    """Our own threads: one blocked reading a pipe, one on a held Lock; marks only when the label changes."""
    events = []
    from inferscope.collect.sampler import _decides
    p = B.Probe(events.append, _decides)
    r, w = os.pipe()
    lock = threading.Lock()
    lock.acquire()

    def reader():
        os.read(r, 1)

    def locker():
        with lock:
            pass
    ts = [threading.Thread(target=reader), threading.Thread(target=locker)]
    for t in ts:
        t.start()
    try:
        labels = {}
        for _ in range(200):           # until both are blocked in their calls (a loaded host may be slow)
            frames = sys._current_frames()
            labels = {t.name: p.label(t.native_id, frames.get(t.ident)) for t in ts}
            if labels[ts[0].name][0] == "read" and labels[ts[1].name][0] == "futex":
                break
            time.sleep(0.01)
        import json
        name, det = labels[ts[0].name]
        info = json.loads(det)
        assert name == "read" and info["fd"] == r and info["path"].startswith("pipe:[") and info["size"] == 1
        assert info["frame"].startswith("test_blocking.py:") and info["frame"].endswith(" reader")
        name, det = labels[ts[1].name]
        info = json.loads(det)
        assert name == "futex" and info["timed"] is False and "short_timeout" not in info
        assert info["frame"].endswith(" locker")
        # the step function: one mark per change
        tid = ts[0].native_id
        frames = sys._current_frames()
        for i in range(3):
            p.probe(tid, 100 + i, frames.get(ts[0].ident), True)
        p.probe(tid, 200, None, False)
        p.probe(tid, 300, None, False)
        assert [(e[3], e[5], e[7]) for e in events] == [(100, "read", B.CAT), (200, B.RUNNING, B.CAT)]
        assert events[0][1] == B.MARK and events[0][2] == tid
        p.probe(999_999_999, 5, None, True)     # not our thread: nothing, no exception
        assert len(events) == 2
        # back-off: blocked in the same call for BACKOFF_AFTER probes, then probed every BACKOFF_SKIP + 1 ticks
        n0 = p.probes
        for i in range(B.BACKOFF_AFTER + 1 + 2 * (B.BACKOFF_SKIP + 1)):
            p.probe(tid, 400 + i, frames.get(ts[0].ident), True)
        assert p.probes - n0 == B.BACKOFF_AFTER + 1 + 2
        p.probe(tid, 500, None, False)              # it ran: probed again at its next blocked tick
        n0 = p.probes
        p.probe(tid, 501, frames.get(ts[0].ident), True)
        assert p.probes == n0 + 1
    finally:
        os.write(w, b"x")
        lock.release()
        for t in ts:
            t.join(5)
        os.close(r)
        os.close(w)
        p.close()


@linux
def test_probe_reads_paths_and_flags_of_files(tmp_path):
    """openat's path argument is read from our own memory; an fd's open flags from fdinfo; a bad pointer is no crash."""
    p = B.Probe(lambda e: None, lambda co: True)
    f = tmp_path / "o_dsync.bin"
    fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_DSYNC, 0o600)
    try:
        path, flags = p._fd_path(fd)
        assert path == str(f) and flags == ["O_DSYNC"]
        assert p._fd_path(fd) == (path, flags)                 # cached per (fd, mount, inode)
    finally:
        os.close(fd)
    import ctypes
    s = ctypes.create_string_buffer(b"/some/where.bin")
    assert p._user_str(ctypes.addressof(s)) == "/some/where.bin"
    assert p._user_str(8) is None and p._iov_bytes(8, 2) is None
    p.close()


@linux
def test_gil_deadline_read_after_the_wait_decides_nothing():
    """A timed futex wait is the GIL's when its deadline (read from the waiter's stack) is within the switch
    interval.  The deadline can be read after the wait ended - the stack slot then holds another call's data
    (seen under load in zoo_gil.py: a 'deadline' 113,296 s away, or 0).  Such a read decides nothing and is
    not cached for the futex address (it was: every later GIL wait on the address then read as a lock wait,
    and lock_wait stood beside gil_contention).  A read is stale when the thread's syscall line changed
    meanwhile or the timespec is no valid deadline."""
    import ctypes
    p = B.Probe(lambda e: None, lambda co: True)
    if p._mem_fd() < 0:
        pytest.skip("/proc/self/mem not readable")
    nr = next(n for n, nm in p.table.items() if nm == "futex")
    ts = (ctypes.c_int64 * 2)()
    now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)

    def put(ns):
        ts[0], ts[1] = divmod(ns, 1_000_000_000)
    op = 0x89                                      # FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG: absolute, monotonic
    line = f"{nr} 0x7f00 {op:#x} 0x0 {ctypes.addressof(ts):#x} 0x0 0xffffffff 0x7ffd 0x7f01".encode()
    reads = []
    p._read = lambda tid: reads.pop(0) if reads else line
    try:
        # the waiter left the call while its deadline was read (a valid-looking long one): undecided, uncached
        put(now + 113_296 * 10**9)
        reads[:] = [line, line.replace(b"0x7f00", b"0x7f08")]
        assert p.label(1, None) == (None, None)
        assert 0x7f00 not in p._futex_gil
        # the same line read twice but no deadline (a stale slot of zeros, or tv_nsec out of range): undecided
        ts[0], ts[1] = 0, 0
        assert p._gil_futex(1, line, 0x7f00, op, ctypes.addressof(ts)) is None
        ts[0], ts[1] = 5, 2_000_000_000
        assert p._gil_futex(1, line, 0x7f00, op, ctypes.addressof(ts)) is None
        assert 0x7f00 not in p._futex_gil
        # the next, consistent read: 3 ms away, the GIL's; decided once for the address
        put(time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 3_000_000)
        name, det = p.label(1, None)
        assert name == "futex" and p._gil and p._futex_gil[0x7f00] is True
        # a lock wait with its own deadline (10 s) on another address: a lock, and so decided
        line2 = line.replace(b"0x7f00", b"0x7e00")
        p._read = lambda tid: line2
        put(time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 10 * 10**9)
        import json
        name, det = p.label(2, None)
        assert name == "futex" and not p._gil and "short_timeout" not in json.loads(det or "{}")
        assert p._futex_gil[0x7e00] is False
    finally:
        p.close()


def test_inference_thread_found_running_is_probed_every_tick():
    """A thread on the inference path in an I/O loop of short calls is often found back from its call ('running')
    at a blocked tick; backing off from it (probed every 4th tick after 4 such reads) left 150 ms of zoo_disk_io's
    waiting unnamed and blocking_io missing in 2-3 runs of 8.  Threads off the inference path (side) still back off
    (GIL contention: every Python thread is off-CPU part of each interval)."""
    n = {}
    for side, io_loop in ((False, True), (False, False), (True, True)):
        p = B.Probe(lambda e: None, lambda co: True)
        p._read = lambda tid: b"running"
        p._cur[7] = (B.RUNNING, None)          # its label in force: running
        if io_loop:
            p._io_loop.add(7)                  # the last call named was an I/O call
        for k in range(20):
            p.probe(7, k * 5_000_000, None, True, side=side)
        n[(side, io_loop)] = p.probes
        p.close()
    # an inference thread in an I/O loop: every tick; one whose last call was no I/O call (GIL contention: probed
    # at every tick its GIL waits were misread as lock waits more often, CI 2026-11-27) and side threads back off
    few = 20 // (B.IDLE_SKIP + 1) + B.IDLE_AFTER
    assert n[(False, True)] == 20 and n[(False, False)] <= few and n[(True, True)] <= few, n


def test_findings_render_escaped():
    """A hostile file path and frame reach the markdown and HTML reports escaped."""
    from inferscope.report.html import build_html
    from inferscope.report.markdown import render_markdown
    from test_rules import _offcpu_trace, finding
    t = _offcpu_trace([(200, "pread64", {"fd": 3, "path": "/d/<script>alert(1)</script>|`x`.bin",
                                         "frame": "evil<img src=x>.py:1 f"})])
    trace = t.done()
    from inferscope.analyze.options import AnalyzeOptions
    from inferscope.analyze.pipeline import analyze
    res = analyze(trace, AnalyzeOptions())
    assert finding(res, "blocking_io") is not None
    md = render_markdown(from_dict(res))
    from helpers import md_markup, md_render
    assert "blocking_io" in md and md_markup(md) == [] and "&lt;script&gt;alert(1)" in md_render(md)
    assert "&lt;" not in md    # Markdown escapes, not HTML entities
    from helpers import as_report
    rep = as_report(res, trace, ["html"])
    html = build_html(rep, rep.views)
    assert "blocking_io" in html and "<script>alert" not in html and "<img" not in html


def _site_a():
    return sys._getframe()


def _site_b():
    return sys._getframe()


def test_io_label_restored_at_its_call_site():
    """A loop of short reads (4 KiB from a slow pipe: zoo_pipe_reads.py) is found in read(2) itself at few ticks: the
    tick takes the GIL the read released, and by the probe the thread is back from it, waiting for the GIL (or running
    without it).  At a frame where this thread was seen in an I/O call, that call's label is restored (it was
    'running': 38-58 % of the loop's off-CPU time unnamed); at another frame, or for a thread never seen in I/O, a GIL
    wait stays unattributed."""
    import json
    tbl = SC.arch_table()
    if not tbl:
        pytest.skip("no syscall table for this machine")
    nr_read = next(n for n, nm in tbl.items() if nm == "read")
    nr_futex = next(n for n, nm in tbl.items() if nm == "futex")
    read = f"{nr_read} 0x7fffff 0x7f00 0x1000 0x0 0x0 0x0 0x7ffd 0x7f01".encode()       # read(bad fd, buf, 4096)
    gil = f"{nr_futex} 0x7e00 0x80 0x2 0x0 0x0 0x0 0x7ffd 0x7f02".encode()        # untimed FUTEX_WAIT: the GIL's mutex
    fa, fb = _site_a(), _site_b()
    for seen_io in (True, False):
        marks = []
        p = B.Probe(marks.append, lambda co: True)
        lines = []
        p._read = lambda tid: lines.pop(0)
        t = 0
        if seen_io:
            lines.append(read)
            p.probe(7, t, fa, True)                 # caught in the read at site a
        p.probe(7, t + 1, fa, False)               # then on CPU (Python between the loops): running
        lines.extend([gil, b"running", gil])
        p.probe(7, t + 2, fa, True)                 # back at site a, waiting for the GIL
        at_a, io_a = p._cur[7], p.io_wait(7)
        p.probe(7, t + 3, fa, True)                 # back at site a, on CPU without the GIL
        p.probe(7, t + 4, fb, True)                 # a GIL wait elsewhere
        names = [(m[3], m[5]) for m in marks]
        if seen_io:
            info = json.loads(at_a[1])
            assert at_a[0] == "read" and info["frame"].endswith(" _site_a") and info["size"] == 4096, at_a
            assert names == [(0, "read"), (1, B.RUNNING), (2, "read"), (4, B.RUNNING)], names
            assert io_a and not p.io_wait(7)        # the kernel-time rule's I/O flag follows the label
        else:
            assert names == [(2, B.RUNNING)] and not io_a, names
        p.close()


def test_socket_data_calls_are_io():
    """recv/send of a socket loop are I/O (blocking_io; a 4 KiB recv() loop read as 'other' and was never named);
    accept/connect wait for a peer, not for data."""
    assert [SC.kind_of(n) for n in ("recvfrom", "recvmsg", "recvmmsg", "sendto", "sendmsg", "sendmmsg")] == ["io"] * 6
    assert SC.kind_of("accept4") == SC.kind_of("connect") == "other"
    assert SC.NET_CALLS <= SC.IO_CALLS and SC.NET_CALLS <= SC.FD_CALLS


def test_blocking_io_names_network_io():
    """A recvfrom loop: the finding says network I/O and suggests larger receives; a file read beside it: both."""
    from inferscope.analyze.options import AnalyzeOptions
    from inferscope.analyze.pipeline import analyze
    from test_rules import _offcpu_trace, finding
    rv = {"fd": 5, "path": "socket:[123]", "size": 4096, "frame": "srv.py:40 read_msg"}
    res = analyze(_offcpu_trace([(200, "recvfrom", rv), (900, "running", None)]).done(), AnalyzeOptions())
    f = finding(res, "blocking_io")
    assert f is not None and f["title"] == "The inference thread waits for network I/O (recvfrom)", f
    assert f["evidence"]["io_pct"] == pytest.approx(70.0), f
    assert "recv_into" in f["suggestion"] and "4 KiB" in f["suggestion"], f
    res = analyze(_offcpu_trace([(200, "recvfrom", rv), (600, "read", {"fd": 3, "path": "/d/x", "frame": "a.py:1 f"}),
                                 (900, "running", None)]).done(), AnalyzeOptions())
    assert "file and network I/O" in finding(res, "blocking_io")["title"]
