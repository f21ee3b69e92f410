"""A followed thread's state in the live sampler (collect/sampler.py) and the class names of its runs."""
from __future__ import annotations

CLS_WAITING = "waiting"
# Runnable but not running (schedstat run-queue delay): the thread waits for a CPU, not for I/O or a
# lock.  Its own class (a part of the breakdown's waiting), placed right before the interval's on-CPU
# part (a thread waits for a CPU after it wakes up); below sampler.SPLIT_MIN_FRACTION of the interval it stays
# in the on-CPU part.  Without it, CPU starvation read as the program's own work: a disk-I/O loop
# beside other jobs read 31-56 % cpu_compute (its post-I/O run-queue time) for 10 % true CPU.
CLS_RUNQ = "run_queue"
CLS_COMPUTE = "cpu_compute"
CLS_FRAMEWORK = "framework"
CLS_TOKENIZATION = "tokenization"
KEEP = "keep"   # pending-tick marker: the tick continues the thread's current class


class _ThreadState:
    __slots__ = ("clk", "cls", "cpu", "end", "label", "last_fb", "lines", "n", "native", "native_fresh", "native_tok", "pending",
                 "kblk", "kio", "kst", "perf", "pcpu", "pn", "prev_vol", "rq", "rq_at", "rq_t", "start", "t", "tid",
                 "on_cls", "on_label")

    def __init__(self, tid, clk, cpu, t):
        self.tid = tid
        self.clk = clk
        self.cpu = cpu
        self.t = t
        self.cls = None
        self.start = t
        self.label = None  # the current run's function ("file:func"; one function per run)
        self.n = 0         # ticks that named it
        self.lines = {}    # its line at those ticks -> count
        self.rq = -1      # run-queue wait (ns) from /proc schedstat
        self.rq_t = None  # ProcFile of /proc/self/task/<tid>/schedstat
        self.kblk = False  # its previous interval was (partly) off-CPU: kernel CPU after a wake-up is the call's
        self.kio = False  # its last blocking call (blocking.py probe) was an I/O call
        self.kst = None   # kernel_time.ThreadStat (faults, kernel time) of /proc/self/task/<tid>/stat
        self.pcpu = 0.0   # CPU time (ns) and user-space perf IP samples of its intervals with perf on, decaying
        self.pn = 0.0     # sums (KERNEL_PERF_SHARE_CPU_NS): its kernel share by perf (perf_kernel_share)
        self.rq_at = 0    # sample time of the rq reading
        self.perf = None  # PerfIP of this thread (perf_event task-clock IP samples)
        self.native = None  # last perf verdict: fraction of IP samples in numeric libraries (role COMPUTE)
        self.native_tok = 0.0  # ... and in native tokenizers (role TOKENIZER)
        self.native_fresh = False  # the last perf-decided interval had classified (non-libc) samples
        # ticks waiting for the next perf drain: (t, cls | None (perf decides) | KEEP, label, fallback, gil_free)
        self.pending = []
        self.end = t        # end of the current run = time of the last tick applied
        self.last_fb = None  # fallback class of the last tick if perf split it, else None
        self.prev_vol = False  # the previous tick got the GIL from a voluntary release
        self.on_cls = self.on_label = None  # the class and (function, line) of its last on-CPU run (_finish)
