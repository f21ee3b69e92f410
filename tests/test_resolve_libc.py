"""The perf resolver's libc samples (collect/resolve.py): a libc / unknown-library sample right after native code's
in a tick interval is that code's helper; after an interpreter sample, or before any classified sample, it
follows the interval's mix."""
from inferscope.collect import perfip as P

from resolve_helpers import durations, resolve_thread

MS = 1_000_000
LBL = ("app.py:step", 3)


def _tick(t, fallback):
    # (t, cls: perf decides, label, fallback: the tick frame's class, gil_free, off, rq, faults, kernel ns, blocked)
    return (t, None, LBL, fallback, True, 0, 0, 0, 0, False)


def test_libc_after_a_tokenizer_sample_is_tokenization():
    """10 ms, 9 samples: Rust tokenizer at 1 and 4 ms with libc after each (2, 3, 5 ms: its allocations and the
    free() of what it dropped), an interpreter sample at 6 ms and libc after it (7 ms), interpreter at 8 ms, a
    torch kernel at 9 ms.  The three libc samples after Rust ones are tokenization; the one after the
    interpreter follows the mix of the other eight: tokenization 5/8, compute 1/8, user code (the tick's
    stack) 2/8 of the interval."""
    samples = [(1 * MS, P.TOKENIZER), (2 * MS, P.OTHER), (3 * MS, P.OTHER), (4 * MS, P.TOKENIZER),
               (5 * MS, P.OTHER), (6 * MS, P.PYTHON), (7 * MS, P.OTHER), (8 * MS, P.PYTHON), (9 * MS, P.COMPUTE)]
    buf, _, _ = resolve_thread(samples, [_tick(10 * MS, "user_code")], "user_code")
    dur = durations(buf)
    assert dur == {"tokenization": 10 * MS * 5 // 8, "cpu_compute": 10 * MS // 8,
                   "user_code": 10 * MS - 10 * MS * 5 // 8 - 10 * MS // 8}, dur


def test_leading_libc_and_libc_after_python_follow_the_mix():
    """libc before any classified sample of the interval, and after interpreter samples: the mix of the
    classified ones (half compute, half the stack's class here), not the kind before or after them."""
    samples = [(int(0.5 * MS), P.OTHER), (1 * MS, P.OTHER), (2 * MS, P.COMPUTE), (3 * MS, P.PYTHON),
               (4 * MS, P.OTHER), (5 * MS, P.OTHER)]
    buf, _, _ = resolve_thread(samples, [_tick(8 * MS, "user_code")], "user_code")
    assert durations(buf) == {"cpu_compute": 4 * MS, "user_code": 4 * MS}
    # the same libc samples after the kernel sample instead: compute's
    samples = [(1 * MS, P.PYTHON), (2 * MS, P.COMPUTE), (3 * MS, P.OTHER), (4 * MS, P.OTHER), (5 * MS, P.OTHER)]
    buf, _, _ = resolve_thread(samples, [_tick(10 * MS, "user_code")], "user_code")
    assert durations(buf) == {"cpu_compute": 8 * MS, "user_code": 2 * MS}
