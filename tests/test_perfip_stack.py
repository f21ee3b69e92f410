"""A libc sample takes the role of its caller (issue 23 item 1): a Python thread's perf samples carry the top of
its user stack, and a sample in libc / an unknown library is classed by the first return address on it that
falls in a library with a role (collect/perfip.caller_kind).  Live tests run real libraries of this machine
under two samplers of the same thread at once, with and without the stack: the one without is the truth of
where the IPs fell (libc), the one with must name the library that called it."""
import collections
import os
import struct
import threading
import time

import pytest

from inferscope.collect import perfip as P


class _Maps(P.Maps):
    def __init__(self, rows):              # (start, end, kind), sorted
        self.starts = [r[0] for r in rows]
        self.ends = [r[1] for r in rows]
        self.kinds = [r[2] for r in rows]


LIBC, TOK, TORCH, PY = 0x7f0000000000, 0x7f1000000000, 0x7f2000000000, 0x560000000000
MAPS = _Maps([(PY, PY + 0x100000, P.PYTHON), (LIBC, LIBC + 0x100000, P.OTHER),
              (TOK, TOK + 0x100000, P.TOKENIZER), (TORCH, TORCH + 0x100000, P.COMPUTE)])


def _stack(*words):
    return struct.pack("<%dQ" % len(words), *words)


def test_caller_kind_is_the_first_return_address_with_a_role():
    heap, sp = 0x55AA00001000, 0x7FFD00001000
    # locals, a heap pointer, a stack pointer, then malloc's caller in libc (skipped), then the Rust tokenizer
    data = _stack(3, heap, sp, LIBC + 0x420, TOK + 0x1234, TORCH + 8, PY + 16)
    assert P.caller_kind(MAPS, data, 0, len(data)) == P.TOKENIZER
    assert P.caller_kind(MAPS, data, 0, 4 * 8) == P.OTHER            # the dump ends before it: unknown
    assert P.caller_kind(MAPS, data, 5 * 8, 2 * 8) == P.COMPUTE       # from an offset, within nbytes
    assert P.caller_kind(MAPS, _stack(PY + 1, TOK), 0, 16) == P.PYTHON   # the interpreter counts
    assert P.caller_kind(MAPS, b"", 0, 0) == P.OTHER
    assert P.caller_kind(MAPS, data + b"\x01\x02\x03", 0, len(data) + 3) == P.TOKENIZER   # a partial word


def _record(ip, ts, stack, dyn=None):
    """One PERF_RECORD_SAMPLE of IP | TIME | STACK_USER as the kernel writes it."""
    body = struct.pack("<QQQ", ip, ts, len(stack)) + stack + (struct.pack("<Q", len(stack) if dyn is None else dyn)
                                                               if stack else b"")
    return struct.pack("<IHH", P.PERF_RECORD_SAMPLE, 0, 8 + len(body)) + body


class _Ring(P.PerfIP):
    def __init__(self, records, stack_bytes):
        import mmap
        page = mmap.PAGESIZE
        buf = bytearray(page * (1 + 4))
        data = b"".join(records)
        buf[page:page + len(data)] = data
        struct.pack_into("<Q", buf, 1024, len(data))
        self.fd, self.buf, self.size, self.tail, self.period_ns = -1, buf, 4 * page, 0, 0
        self.stack_bytes = stack_bytes


def test_read_parses_stack_records_and_names_libc_callers():
    st = _stack(7, LIBC + 1, TOK + 2) + bytes(40)
    recs = [_record(TORCH + 5, 100, st),                 # in torch: its own role, the stack is not read
            _record(LIBC + 9, 200, st),                  # malloc from the tokenizer
            _record(LIBC + 9, 300, st, dyn=16),          # the kernel copied 16 bytes only: no caller in them
            _record(LIBC + 9, 400, b""),                 # no stack copied (size 0, no dyn_size)
            _record(PY + 3, 500, st)]
    assert _Ring(recs, 64).read(MAPS) == [(100, P.COMPUTE), (200, P.TOKENIZER), (300, P.OTHER), (400, P.OTHER),
                                         (500, P.PYTHON)]


def _two_samplers(fn, cpu_s=0.25):
    """(roles with the stack, roles without) of this thread's samples while fn runs for cpu_s of CPU."""
    tid = threading.get_native_id()
    a = P.PerfIP.open(tid, 200_000, P.STACK_BYTES)
    b = P.PerfIP.open(tid, 200_000, 0)
    if a is None or b is None:
        pytest.skip("perf_event unavailable (perf_event_paranoid > 2, seccomp)")
    if not a.stack_bytes:
        pytest.skip("the kernel or the locked-memory limit refused a stack-sampling ring")
    maps = P.Maps()
    try:
        a.read(maps), b.read(maps)
        t0 = time.thread_time()
        while time.thread_time() - t0 < cpu_s:
            fn()
        ra, rb = (collections.Counter(k for _, k in p.read(maps)) for p in (a, b))
    finally:
        a.close()
        b.close()
    assert sum(ra.values()) >= 200 and sum(rb.values()) >= 200, (ra, rb)   # ~1250 each at 0.2 ms
    return ({k: v / sum(ra.values()) for k, v in ra.items()}, {k: v / sum(rb.values()) for k, v in rb.items()})


def test_numpy_copy_in_libc_memcpy_is_compute():
    """np.copyto of 32 MB: nearly every IP is libc's memmove (other, the truth without the stack); its caller is
    numpy's core loop, so with the stack the samples are compute - numpy work, not the calling Python's class."""
    np = pytest.importorskip("numpy")
    src = np.ones(4 << 20)
    dst = np.empty_like(src)
    with_stack, without = _two_samplers(lambda: np.copyto(dst, src))
    assert without.get(P.OTHER, 0) > 0.7, without
    assert with_stack.get(P.COMPUTE, 0) > 0.7 and with_stack.get(P.OTHER, 0) < 0.15, with_stack


def test_rust_tokenizer_malloc_is_tokenization():
    """HF tokenizers' encode (serial, this thread): 30-40 % of the IPs are libc (its allocations, other); with the
    stack they are the Rust library's - tokenizer."""
    pytest.importorskip("tokenizers")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "zoo"))
    try:
        from _wordpiece import WORDS, train
    finally:
        sys.path.pop(0)
    tok = train()
    texts = [" ".join(WORDS[i:i + 24]) for i in range(0, 4000, 50)]
    with_stack, without = _two_samplers(lambda: [tok.encode(t) for t in texts])
    assert without.get(P.OTHER, 0) > 0.15 and without.get(P.TOKENIZER, 0) > 0.3, without
    assert with_stack.get(P.TOKENIZER, 0) > without.get(P.TOKENIZER, 0) + 0.1, (with_stack, without)
    assert with_stack.get(P.OTHER, 0) < 0.1, with_stack


def test_hash_in_libcrypto_called_from_python_is_the_interpreters():
    """hashlib.sha256 of 8 MB: libcrypto (other) called by _hashlib (other) called by the interpreter: the samples
    are the interpreter's (the calling Python's class), not left to the tick interval's mix."""
    import hashlib
    buf = b"x" * (8 << 20)
    with_stack, without = _two_samplers(lambda: hashlib.sha256(buf).digest())
    assert without.get(P.OTHER, 0) > 0.8, without
    assert with_stack.get(P.PYTHON, 0) > 0.8, with_stack


def test_open_falls_back_without_the_stack_when_refused(monkeypatch):
    """Where a stack-sampling ring is refused (RLIMIT_MEMLOCK in a container), the thread is still sampled, by
    IP and time alone."""
    calls = []

    def fake_open(cls, tid, period_ns, stack_bytes):
        calls.append(stack_bytes)
        return None if stack_bytes else "plain"
    monkeypatch.setattr(P.PerfIP, "_open", classmethod(fake_open))
    assert P.PerfIP.open(1, 1_000_000, 512) == "plain" and calls == [512, 0]


def test_stack_rings_are_capped():
    """At most STACK_MAX_RINGS rings with the user stack at once (locked memory: a 64-thread pool would leave its
    last threads no ring at all); the threads past it are sampled by IP and time; a closed ring frees its slot."""
    import mmap
    import resource
    need = (P.STACK_MAX_RINGS + 2) * (1 + P.STACK_PAGES) * mmap.PAGESIZE
    soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    if soft != resource.RLIM_INFINITY and soft < need:
        pytest.skip(f"RLIMIT_MEMLOCK {soft} B < {need} B: the limit, not the cap, would refuse rings")
    tid = threading.get_native_id()
    rings = []
    base = P.PerfIP.stack_rings           # (rings another test's sampler still holds)
    try:
        for _ in range(P.STACK_MAX_RINGS + 2):
            p = P.PerfIP.open(tid, 1_000_000, P.STACK_BYTES)
            if p is None:
                pytest.skip("perf_event unavailable (perf_event_paranoid > 2, seccomp)")
            rings.append(p)
        with_stack = [p.stack_bytes > 0 for p in rings]
        if not with_stack[0]:
            pytest.skip("the kernel or the locked-memory limit refused a stack-sampling ring")
        n = sum(with_stack)
        assert 0 < n <= P.STACK_MAX_RINGS - base and not any(with_stack[n:]), (with_stack, base)
        assert P.PerfIP.stack_rings == base + n == P.STACK_MAX_RINGS
        rings.pop(0).close()
        assert P.PerfIP.stack_rings == base + n - 1
        rings.append(P.PerfIP.open(tid, 1_000_000, P.STACK_BYTES))
        assert rings[-1].stack_bytes == P.STACK_BYTES and P.PerfIP.stack_rings == base + n
    finally:
        for p in rings:
            p.close()
    assert P.PerfIP.stack_rings == base
