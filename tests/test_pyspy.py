"""collect/pyspy.py: py-spy stacks classified with InferScope's own rules (issue 23 item 2).

tests/data/pyspy/mixed_native.raw: ``py-spy record --native --idle --threads --full-filenames -r 100 -f raw``
of tests/data/pyspy/mixed.py (1 s of numpy matmuls in OpenBLAS, 1 s of a pure-Python loop ``py()``,
0.5 s of sleep) on the 2-core dev VM, py-spy 0.4.3, lines with count >= 2, paths rewritten
(/venv = a virtualenv, /app = the program).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from inferscope.collect import pyspy as P

DATA = Path(__file__).parent / "data" / "pyspy"


def test_parse_raw_line_native_and_python_frames():
    line = ("thread (123): MainThread;<module> (/app/x.py:5);"
            "exec_blas (/venv/lib/python3.11/site-packages/numpy.libs/libscipy_openblas64_-32a4b2a6.so) 7")
    thread, frames, n = P.parse_raw_line(line)
    assert n == 7 and P.thread_os_id(thread) == 123
    assert frames[0] == ("exec_blas", "/venv/lib/python3.11/site-packages/numpy.libs/libscipy_openblas64_-32a4b2a6.so", 0)
    assert frames[1] == ("<module>", "/app/x.py", 5)


@pytest.mark.parametrize("frames, cls", [
    # BLAS under user code: the native frame's role decides (perfip.role_of)
    ([("exec_blas", "/v/site-packages/numpy.libs/libscipy_openblas64_.so", 0), ("<module>", "/app/x.py", 3)],
     "cpu_compute"),
    # libc helper inside a Rust tokenizer: the tokenizer library decides
    ([("memcpy", "/usr/lib/x86_64-linux-gnu/libc.so.6", 0),
      ("encode", "/v/site-packages/tokenizers/tokenizers.abi3.so", 0),
      ("encode_batch", "/v/site-packages/tokenizers/__init__.py", 10), ("<module>", "/app/x.py", 3)],
     "tokenization"),
    # pure Python in user code, CPython frames transparent
    ([("_PyEval_EvalFrameDefault", "/usr/lib/libpython3.11.so.1.0", 0), ("py", "/app/x.py", 8)], "user_code"),
    # user function named like tokenization
    ([("tokenize_batch", "/app/x.py", 8), ("<module>", "/app/x.py", 3)], "tokenization"),
    # import machinery: library loading = framework
    ([("_find_and_load", "<frozen importlib._bootstrap>", 1176), ("<module>", "/app/x.py", 1)], "framework"),
    # framework Python (torch's Python code) without native compute under it
    ([("forward", "/v/site-packages/torch/nn/modules/linear.py", 116), ("<module>", "/app/x.py", 3)], "framework"),
])
def test_classify_stack_rules(frames, cls):
    assert P.classify_stack(frames) == cls


def test_vendored_raw_conversion():
    """The recorded output: matmul samples (mixed.py:9) are cpu_compute, the Python loop user code;
    the sleep (mixed.py:22, recorded with --idle) also reads user code: py-spy's raw output carries no
    idle flag (without --idle the idle samples are dropped instead)."""
    f = DATA / "mixed_native.raw"
    counts = P.raw_class_counts(f)
    assert counts["cpu_compute"] >= 50 and counts["user_code"] >= 100

    def at(line):
        return lambda fr: any(fn == "/app/mixed.py" and ln == line for _, fn, ln in fr)
    assert set(P.raw_class_counts(f, keep=at(9))) == {"cpu_compute"}
    loop = P.raw_class_counts(f, keep=lambda fr: any(n == "py" for n, _, _ in fr))
    assert set(loop) == {"user_code"} and loop["user_code"] >= 50
    assert set(P.raw_class_counts(f, keep=at(22))) == {"user_code"}
    assert P.raw_class_counts(f, tid=1) == {}


@pytest.mark.skipif(P.find_pyspy() is None, reason="py-spy not installed (optional: pip install py-spy)")
def test_pyspy_live_record(tmp_path):
    """py-spy as the parent (no attach permission needed) on a numpy + Python program."""
    out = tmp_path / "o.raw"
    r = subprocess.run([P.find_pyspy(), "record", "--native", "--threads", "--full-filenames", "-r", "100",
                        "-f", "raw", "-o", str(out), "--", sys.executable, str(DATA / "mixed.py")],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ))
    if r.returncode != 0 or not out.exists():
        pytest.skip(f"py-spy could not record here: {(r.stdout + r.stderr).strip()[-300:]}")
    counts = P.raw_class_counts(out)
    assert counts.get("cpu_compute", 0) > 0 and counts.get("user_code", 0) > 0


def test_vendored_austin_full_mode():
    """tests/data/pyspy/mixed_full.austin: ``austin -f -i 5ms`` (austin 3.6.0) of the same program (importlib
    samples left out, paths rewritten).  Per-sample wall time and idle flag: the sleep (line 22) is idle,
    the matmul (line 9) user code - austin sees Python frames only."""
    by: dict = {}
    for line in open(DATA / "mixed_full.austin", encoding="utf-8"):
        r = P.parse_austin_line(line)
        if r is None:
            continue
        _pid, _tid, frames, t_us, idle = r
        mod = [ln for name, fn, ln in frames if fn == "/app/mixed.py" and name == "<module>"]
        k = (mod[-1] if mod else None, "waiting" if idle else P.classify_stack(frames))
        by[k] = by.get(k, 0) + t_us
    assert 0.4e6 < by[(22, "waiting")] < 0.6e6
    assert 0.8e6 < by[(21, "user_code")] < 1.3e6
    assert 0.8e6 < by[(9, "user_code")] < 1.3e6 and (9, "cpu_compute") not in by
    assert P.parse_austin_line("# austin: 3.6.0") is None
    assert P.parse_austin_line("P1;T0:1;/a.py:f:3;native@7f00:memcpy:0 10,1,0") == (1, 1, [("f", "/a.py", 3)], 10, True)
