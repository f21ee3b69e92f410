"""The local ``--jobs N`` worker pool of multi-input ``analyze`` (batch.py), which survives a dead worker.

``multiprocessing.Pool.imap`` waits forever for the result of a task whose worker was killed (the OOM killer,
a segfault in a native library, SIGKILL): the pool replaces the worker but never says the task was lost.  Here
each worker is a spawn ``Process`` with its own pipe; the parent hands it one input at a time and waits on the
pipes and the processes' sentinels together (``multiprocessing.connection.wait``), so a worker that ends
without answering is seen at once: its input is retried once in a fresh worker (``WORKER_RETRIES``), then
becomes that input's error row; the other inputs' results are kept.  A worker retires after
``max_tasks`` inputs (memory bounded by N traces, as before) and is replaced while inputs remain.
(``ProcessPoolExecutor`` would raise ``BrokenProcessPool``, but for every pending input at once, and its
``max_tasks_per_child`` hung here on Python 3.11 once the first workers retired.)

Test seam (tests/test_fleet_faults.py): ``INFERSCOPE_TEST_KILL_WORKER=SUBSTRING[@MARKER]`` makes the process
analysing an input whose path contains SUBSTRING kill itself with SIGKILL after loading it (mid-trace), on
every attempt, or with ``@MARKER`` (a file path) only while MARKER does not exist (it is created first: the
first attempt dies, the retry runs).  ``batch.analyze_one`` calls ``fault_seam`` only when the variable is set,
on every engine (Ray tasks too).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
from collections import deque
from multiprocessing.connection import wait

WORKER_RETRIES = 1           # a dead worker's input is run once more, then reported as an error row
KILL_ENV = "INFERSCOPE_TEST_KILL_WORKER"


def fault_seam(src: str) -> None:
    """The test seam above; called by analyze_one only when KILL_ENV is set."""
    spec = os.environ.get(KILL_ENV, "")
    sub, _, marker = spec.partition("@")
    if not sub or sub not in str(src):
        return
    if marker:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)   # the first attempt only
        except FileExistsError:
            return
        os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)


def _worker(conn, fn, max_tasks: int) -> None:
    """Spawn target: run fn (batch.analyze_one) on the inputs the parent sends, one at a time, at most max_tasks."""
    for _ in range(max_tasks):
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        i, task = msg
        conn.send((i, fn(*task)))
    conn.close()


def _died(task: tuple, exitcode) -> tuple:
    how = (f"killed by signal {-exitcode}" if isinstance(exitcode, int) and exitcode < 0
           else f"exit code {exitcode}")
    return ({"source": task[0], "report_dir": None,
             "error": f"worker process died while analysing it ({how}), {WORKER_RETRIES + 1} attempts"}, [], None)


class _Slot:
    __slots__ = ("proc", "conn", "current", "sent")

    def __init__(self, ctx, fn, max_tasks: int):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, fn, max_tasks), daemon=True)
        self.proc.start()
        child.close()
        self.current = None    # (input index, attempt) being analysed
        self.sent = 0


def _give(s: _Slot, item: tuple, tasks: list) -> None:
    s.current = item
    s.conn.send((item[0], tasks[item[0]]))
    s.sent += 1


def run_local(fn, tasks: list[tuple], results: list, jobs: int, max_tasks: int, progress=None) -> None:
    """Fill results[i] with fn(*tasks[i]) (fn: batch.analyze_one, a module-level function) for every i, in jobs
    worker processes."""
    ctx = mp.get_context("spawn")
    todo = deque((i, 0) for i in range(len(tasks)))
    slots: list[_Slot] = []
    done = 0

    def finish(i: int, res) -> None:
        nonlocal done
        results[i] = res
        done += 1
        if progress:
            progress(done, len(tasks), tasks[i][0], res[0])

    try:
        while done < len(tasks):
            for s in slots:                            # idle workers first, then new ones while inputs wait
                if s.current is None and todo and s.sent < max_tasks:
                    _give(s, todo.popleft(), tasks)
            while todo and len(slots) < jobs:
                slots.append(_Slot(ctx, fn, max_tasks))
                _give(slots[-1], todo.popleft(), tasks)
            ready = set(wait([s.conn for s in slots] + [s.proc.sentinel for s in slots]))
            for s in list(slots):
                answered = False
                if s.conn in ready or (s.proc.sentinel in ready and s.conn.poll()):
                    try:
                        i, res = s.conn.recv()
                        answered = True
                    except (EOFError, OSError):
                        pass
                    if answered:
                        s.current = None
                        finish(i, res)
                if s.proc.sentinel in ready or (not answered and s.conn in ready):
                    s.proc.join()
                    if s.current is not None:          # it died with an input: retry once, then an error row
                        i, attempt = s.current
                        if attempt < WORKER_RETRIES:
                            todo.appendleft((i, attempt + 1))
                        else:
                            finish(i, _died(tasks[i], s.proc.exitcode))
                    s.conn.close()
                    slots.remove(s)
                elif s.current is None and s.sent >= max_tasks:
                    s.proc.join()                     # retired after max_tasks inputs
                    s.conn.close()
                    slots.remove(s)
    finally:
        for s in slots:
            try:
                s.conn.send(None)
            except OSError:
                pass
            s.proc.join(5)
            if s.proc.is_alive():
                s.proc.kill()
                s.proc.join()
            s.conn.close()
