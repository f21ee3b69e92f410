"""Finding rules ``blocking_io`` and ``lock_wait``: the inference thread blocked in I/O system calls, or waiting on a
lock held by another thread, read from the ``contention.blocking`` section (analyze/blocking.py); the suggestion is
chosen by the calls, open flags and sizes seen.  Thresholds: BLOCKING_IO_LOW_PCT / _MEDIUM_PCT, LOCK_WAIT_LOW_PCT /
_MEDIUM_PCT.
"""
from __future__ import annotations

from .. import thresholds as T
from ..vocab import NET_CALLS
from .evidence import Evidence


def _io_suggestion(rows: list) -> str:
    tips = []
    names = {r["syscall"] for r in rows}
    flags = {f for r in rows for f in r["flags"]}
    if names & {"fsync", "fdatasync", "sync_file_range", "syncfs", "sync"}:
        tips.append("fsync per write: batch writes and sync once per batch, or hand them to a background writer thread "
                    "(a queue) so the inference thread never waits for the disk")
    if flags & {"O_DSYNC", "O_SYNC"} and names & {"write", "pwrite64", "writev", "pwritev", "pwritev2"}:
        tips.append("O_DSYNC/O_SYNC writes wait for the device on every write: open without it and sync once per batch, "
                    "or write from a background thread")
    rd = [r for r in rows if r["syscall"] in ("read", "pread64", "readv", "preadv", "preadv2", "io_uring_enter")]
    if rd:
        small = [r for r in rd if r.get("size") is not None and r["size"] <= 64 * 1024]
        if "O_DIRECT" in flags:
            sz = f" ({small[0]['size'] // 1024} KiB each)" if small else ""
            tips.append(f"O_DIRECT reads{sz} bypass the page cache and wait for the device every time: read larger "
                        "blocks (MiB), drop O_DIRECT so the page cache serves repeated reads, or prefetch in a background thread")
        else:
            tips.append("reads on the inference path: load or memory-map the data before the timed loop, or prefetch it "
                        "in a background thread / DataLoader workers")
    net = [r for r in rows if r["syscall"] in NET_CALLS]
    if net:
        sz = f" ({net[0]['size'] // 1024} KiB each)" if net[0].get("size") and net[0]["size"] >= 1024 else ""
        tips.append(f"socket calls on the inference path{sz}: receive larger chunks into a preallocated buffer "
                    "(recv_into), or receive in a background thread and hand complete messages over a queue")
    if names & {"openat", "open", "newfstatat", "statx", "stat", "lstat", "unlinkat", "getdents64"}:
        tips.append("file opens/metadata calls per request: open once and reuse the file, cache metadata")
    if not tips:
        tips.append("move the file I/O off the inference thread (a background thread or process) or out of the timed path")
    return "; ".join(tips) + "."


def _io_words(per: list) -> str:
    """'file I/O', 'network I/O' or 'file and network I/O': which I/O calls the io rows hold."""
    net = [x["syscall"] in NET_CALLS for x in per]
    return "network I/O" if net and all(net) else "file and network I/O" if any(net) else "file I/O"


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _desc(r: dict) -> str:
    s = f"{r['syscall']}"
    if r.get("path"):
        s += f" on {r['path']}"
        if r["files"] > 1:
            s += f" (+{r['files'] - 1} other file(s) in that directory)"
    extra = []
    if r.get("flags"):
        extra.append("opened " + "|".join(r["flags"]))
    if r.get("size") is not None:
        extra.append(f"{r['size']:,} bytes per call")
    if extra:
        s += f" [{', '.join(extra)}]"
    if r.get("frame"):
        s += f" at {r['frame']}"
        if r.get("via"):
            s += f" (via {r['via']})"
    return s


def blocking_io(res: dict, found: dict) -> dict | None:
    b = (res.get("contention") or {}).get("blocking") or {}
    pct = float(b.get("io_pct_of_window") or 0.0)
    if pct < T.BLOCKING_IO_LOW_PCT:
        return None
    rows = [r for r in b.get("calls") or [] if r.get("kind") == "io"]
    if not rows:
        return None
    e = Evidence(res)
    ms, _, waiting = e.cite_all("contention.blocking", io_ms="io_ms", io_pct=("io_pct_of_window", 2), waiting_ms="waiting_ms")
    i = b["calls"].index(rows[0])
    e.cite_all(f"contention.blocking.calls[{i}]", top_syscall="syscall", top_path="path", top_frame="frame", top_ms="ms")
    per = [x for x in b.get("by_syscall") or [] if x["kind"] == "io"]
    att = e.cite("attributed_ms", "contention.blocking.attributed_ms")
    what = _io_words(per)
    txt = [f"The inference thread was blocked in {what} system calls for {ms:,.1f} ms ({pct:.1f}% of the window): "
           + ", ".join(f"{x['syscall']} {x['ms']:,.1f} ms" for x in per[:6]) + f". A lower bound: of its {waiting:,.1f} ms "
           f"off-CPU, the sampler saw the call for {att:,.1f} ms ({100.0 * ms / att if att else 0:.0f}% of that in "
           f"{what})."]
    for r in rows[:3]:
        txt.append(f"{r['ms']:,.1f} ms in {_desc(r)}.")
    return e.finding("blocking_io", "medium" if pct >= T.BLOCKING_IO_MEDIUM_PCT else "low",
                     f"The inference thread waits for {what} (" + ", ".join(x["syscall"] for x in per[:3]) + ")", txt,
                     _cap(_io_suggestion(rows)))


def lock_wait(res: dict, found: dict) -> dict | None:
    b = (res.get("contention") or {}).get("blocking") or {}
    pct = float(b.get("lock_pct_of_window") or 0.0)
    if pct < T.LOCK_WAIT_LOW_PCT:
        return None
    rows = [r for r in b.get("calls") or [] if r.get("kind") == "lock"]
    if not rows:
        return None
    e = Evidence(res)
    ms, _, futex_ms, py_ms = e.cite_all("contention.blocking", lock_ms="lock_ms", lock_pct=("lock_pct_of_window", 2),
                                        futex_ms="futex_ms", python_overlap_ms="python_overlap_ms")
    i = b["calls"].index(rows[0])
    e.cite_all(f"contention.blocking.calls[{i}]", top_frame="frame", top_ms="ms")
    r = rows[0]
    how = {True: "a timed wait (lock/condition/queue with a timeout, or the GIL)",
           False: "an untimed wait (threading.Lock/RLock/Condition/Event/queue without a timeout, a join)"}.get(r.get("timed"),
                                                                                                               "a futex wait")
    txt = [f"The inference thread waited on a lock (futex) for {ms:,.1f} ms ({pct:.1f}% of the window) while no other "
           f"thread of the process ran Python ({futex_ms:,.1f} ms of futex waits in all, {py_ms:,.1f} ms of them beside "
           "other threads' Python: see gil_contention)."]
    txt.append(f"Waiting frame: {r.get('frame') or '?'}" + (f" (via {r['via']})" if r.get("via") else "")
               + f", {r['ms']:,.1f} ms: {how}.")
    oth = b.get("lock_others") or []
    if oth:
        e.cite_all("contention.blocking.lock_others[0]", other_thread="thread", other_state="state", other_ms="ms")
        o = oth[0]
        hint = (" - a thread blocked or sleeping while another waits on a lock is the likely holder"
                if o["state"].startswith("off-CPU in") else "")
        txt.append(f"Meanwhile {o['thread']} was {o['state']} for {o['ms']:,.1f} ms of the wait "
                   f"({o['pct_of_lock_wait']:.0f}%){hint}.")
    return e.finding("lock_wait", "medium" if pct >= T.LOCK_WAIT_MEDIUM_PCT else "low",
                     "The inference thread waits on a lock held by another thread", txt,
                     "Shorten the critical section: never sleep, do I/O or long computation while holding a lock the "
                     "inference thread needs; hand work over through a queue, use finer-grained locks, or copy the "
                     "shared state under the lock and work on the copy outside it.")
