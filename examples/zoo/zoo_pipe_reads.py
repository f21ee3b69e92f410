"""Planted: a loop of short blocking reads (issue 45 item 1).  The main thread reads a pipe that a child process
feeds slowly, 4 KiB per os.read(), ~0.5 ms between chunks (each read blocks until the next chunk arrives, ~0.1 ms
of it on-CPU at most), for about half of each iteration; the other half is pure Python.  Truth: the reads are
'waiting' for their whole wall time (blocked in read(2); their CPU part is the truth file's cpu_ns), the Python
loop user code.  The finding expected: blocking_io naming read(2) on the pipe at the os.read line.

The feeder is a plain ``python -I -S`` child (not followed by InferScope: no site, no sitecustomize), so its own
CPU never competes with the profiled process's GIL; it answers one request byte with CHUNKS chunks.
``ZOO_CHUNK_GAP_US`` (default 500) sets the child's pause between chunks, ``ZOO_CHUNKS`` (default 40) the chunks per
iteration, ``ZOO_SPIN`` the Python loop's length (default 110,000 iterations, ~20-30 ms on the 2-vCPU VM)."""
import os
import socket
import subprocess
import sys

from _truth import gap, phase
from inferscope import scope

CHUNK = 4096
CHUNKS = int(os.environ.get("ZOO_CHUNKS", "100"))
GAP_S = int(os.environ.get("ZOO_CHUNK_GAP_US", "200")) / 1e6
FEEDER = f"""
import os, sys, time
blk = b"x" * {CHUNK}
while True:
    r = os.read(0, 1)
    if not r:
        break
    for _ in range({CHUNKS}):
        if {GAP_S!r} >= 2e-4:
            time.sleep({GAP_S!r})
        else:                       # shorter than a sleep's own latency: wait on the clock
            t = time.perf_counter() + {GAP_S!r}
            while time.perf_counter() < t:
                pass
        os.write(1, blk)
"""
SOCKET = "--socket" in sys.argv      # a socketpair instead of a pipe: recv(2) of 4 KiB chunks
if SOCKET:
    sock, theirs = socket.socketpair()
    child = subprocess.Popen([sys.executable, "-I", "-S", "-c", FEEDER], stdin=subprocess.PIPE, stdout=theirs.fileno(),
                             bufsize=0)
    theirs.close()
    recv = sock.recv
else:
    child = subprocess.Popen([sys.executable, "-I", "-S", "-c", FEEDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             bufsize=0)
    src = child.stdout.fileno()
req = child.stdin.fileno()


def read_chunks(n: int) -> int:
    got = 0
    while got < n * CHUNK:
        b = recv(CHUNK) if SOCKET else os.read(src, CHUNK)
        if not b:
            raise SystemExit("feeder closed the pipe")
        got += len(b)
    return got


def spin(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


gap("framework_overhead/framework_python")
with scope("inference"):
    for _ in range(int(os.environ.get("ZOO_ITERS", "20"))):
        os.write(req, b"g")
        with phase("pipe_reads", expect="waiting"):
            read_chunks(CHUNKS)
        with phase("python", expect="cpu_preprocessing/user_code"):
            spin(int(os.environ.get("ZOO_SPIN", "500000")))
child.stdin.close()
child.wait()
