"""Planted: disk I/O the main thread blocks on -- O_DSYNC writes, fsync, O_DIRECT reads (where the
filesystem supports O_DIRECT; else a plain read after posix_fadvise(DONTNEED), printed). Truth:
waiting (the thread is off-CPU in the kernel; its CPU part is printed by the truth file as cpu_ns).
30 iterations (~200 ms on this VM's disk): with the 6 used before the whole window was 42 ms, 8 ticks, and
its first ~10 ms came before the sampler's first tick - a short-program edge (zoo_short60.py's case),
not the I/O rule this program plants (6 iterations: waiting 58.6 % vs 99.2 %, 'other' 24.6 %; 30: 97.4 %
vs 99.3 %, bench/README.md)."""
import mmap
import os
import sys
import tempfile

from _truth import gap, phase
from inferscope import scope

FIXED = "--fixed" in sys.argv or os.environ.get("ZOO_FIXED") == "1"   # bench/bench_whatif.py: the top suggestion applied
d = tempfile.mkdtemp(prefix="zoo_io_", dir=os.environ.get("ZOO_IO_DIR"))
path = os.path.join(d, "data.bin")
blk = os.urandom(64 * 1024)
with open(path, "wb") as f:
    f.write(blk * 64)
try:
    fd = os.open(path, os.O_RDONLY | (0 if FIXED else os.O_DIRECT))
    direct = not FIXED
except (OSError, AttributeError) as e:
    fd = os.open(path, os.O_RDONLY)
    direct = False
    print("O_DIRECT unsupported here:", e)
buf = mmap.mmap(-1, 64 * 1024)
gap("framework_overhead/framework_python")
with scope("inference"):
    for i in range(int(os.environ.get("ZOO_ITERS", "30"))):
        with phase("dsync_write", expect="waiting"):
            w = os.open(os.path.join(d, f"w{i}.bin"), os.O_WRONLY | os.O_CREAT | (0 if FIXED else os.O_DSYNC), 0o600)
            for _ in range(8):
                os.write(w, blk[:4096])
            os.close(w)
        with phase("fsync", expect="waiting"):
            with open(os.path.join(d, f"f{i}.bin"), "wb") as f:
                f.write(blk)
                f.flush()
                if not FIXED:      # --fixed: the blocking_io suggestion: no per-write sync
                    os.fsync(f.fileno())
        with phase("read", expect="waiting"):
            if not direct and not FIXED:   # --fixed: the page cache serves repeated reads
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            for off in range(0, 64 * 64 * 1024, 64 * 1024):
                os.preadv(fd, [buf], off)
os.close(fd)
print("o_direct", direct)
