"""External samplers (py-spy, austin): locate them, parse their samples, classify their stacks with InferScope's own rules.

Optional (issue 23 item 2, measured in bench/bench_samplers.py; figures in bench/README.md "Sampler
choice"): py-spy is never required and never imported (it is a binary); :func:`find_pyspy` locates
it lazily ($INFERSCOPE_PYSPY, then PATH).

Classification reuses the live sampler's rules, not a copy of them:
  native frames   (py-spy ``--native``: the frame's file is a shared object or executable) are
                  classified by :func:`perfip.role_of` - the table the perf IP samples use.  Walking
                  from the innermost frame outwards up to the first Python frame, the first native
                  frame in a numeric library decides ``cpu_compute``, in a native tokenizer
                  ``tokenization``, in a GPU math library's host code (cuBLAS, cuDNN) ``framework``;
                  libc/loader/CUDA-runtime/CPython frames are helpers and do not decide (a
                  tokenizer's malloc is tokenization, as in the sampler's perf split).
  Python frames   ``classify._file_domain`` (site-packages / stdlib / InferScope / user files) plus
                  ``classes.name_domain`` on the function name, walked as the sampler walks a
                  frame chain: the innermost non-transparent frame decides, user code defers to
                  an enclosing tokenization/preprocessing frame; import machinery -> framework.
  idle            py-spy's own idle flag (``--idle`` omitted: idle samples are dropped; the
                  caller counts the missing ones as ``waiting``).

py-spy's outputs and what they carry (py-spy 0.4.x, checked on this machine): ``raw`` (collapsed
stacks + counts, no time), ``speedscope`` (sample order, no time), ``chrometrace`` (B/E events, but a
timestamp is written only when a thread's stack *changes*, taken when the sample reaches the writer,
relative to an unexported Instant; idle samples are either dropped - the previous stack then stays
open across the idle time - or kept without a flag).  None carries both a time and the idle flag,
so py-spy cannot produce the on/off-CPU spans on the trace clock the live sampler emits; here it is
used for per-class shares of a window (``raw`` stacks, windowed by the module-level line of the
scope's ``with`` block).
"""
from __future__ import annotations

import os
import re
import shutil

from .. import vocab as V
from ..classes import DOMAIN_NAMES, FW, NEUTRAL, PRE, TOK, USER, name_domain
from . import classify as C
from .perfip import COMPUTE, FRAMEWORK, TOKENIZER, role_of

CLS_COMPUTE = V.CLS_CPU_COMPUTE
CLS_WAITING = V.CLS_WAITING
# sampler class -> breakdown label (analyze/breakdown.py SOURCE_CATEGORY, CPU-only run)
CLASS_LABEL = {
    V.CLS_TOKENIZATION: "cpu_preprocessing/tokenization",
    V.CLS_PREPROCESSING: "cpu_preprocessing/preprocessing",
    V.CLS_USER_CODE: "cpu_preprocessing/user_code",
    V.CLS_FRAMEWORK: "framework_overhead/framework_python",
    V.CLS_CPU_COMPUTE: "cpu_compute",
    V.CLS_WAITING: "waiting/off_cpu",
    V.CLS_RUN_QUEUE: "waiting/run_queue",
}

_FRAME_RE = re.compile(r"^(?P<name>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def find_pyspy() -> str | None:
    """Path of the py-spy executable ($INFERSCOPE_PYSPY, then PATH), or None."""
    p = os.environ.get("INFERSCOPE_PYSPY")
    if p and os.access(p, os.X_OK):
        return p
    return shutil.which("py-spy")


def _is_native(filename: str, line: int) -> bool:
    if not filename:
        return True
    base = os.path.basename(filename)
    return line == 0 and (base.endswith(".so") or ".so." in base or filename.startswith("/") and not
                          filename.endswith(".py"))


def classify_stack(frames) -> str:
    """Sampler class of one stack: ``frames`` innermost first, each (name, filename, line);
    native frames have line 0 and a shared object / executable as file name."""
    native_role = 0
    dom = NEUTRAL
    seen_python = False
    for name, filename, line in frames:
        if _is_native(filename, line):
            if not seen_python and not native_role and filename:   # (no file: nothing to go by)
                r = role_of(filename)
                if r in (COMPUTE, TOKENIZER, FRAMEWORK):
                    native_role = r
            continue
        seen_python = True
        if filename.startswith("<frozen importlib"):
            return DOMAIN_NAMES[FW]            # an import in progress: library loading
        d, _pkg, _label = C._file_domain(filename)
        if d == USER:
            qual = name
            d = name_domain(qual) or USER
        if d:
            if dom == NEUTRAL:
                dom = d
                if d != USER:
                    break
            elif d in (TOK, PRE):               # user code called by a tokenizer
                dom = d
                break
    if native_role == TOKENIZER:
        return V.CLS_TOKENIZATION
    if native_role == COMPUTE:
        return CLS_COMPUTE
    if native_role == FRAMEWORK:                # a GPU math library's host code (cuBLAS, cuDNN): set-up, launches
        return V.CLS_FRAMEWORK
    return DOMAIN_NAMES[dom or USER]


def parse_raw_line(line: str):
    """One line of ``py-spy record -f raw --threads --full-filenames``: (thread label, frames innermost
    first as (name, file, line), count); None for a malformed line."""
    line = line.rstrip("\n")
    if not line:
        return None
    stack, _, n = line.rpartition(" ")
    try:
        count = int(n)
    except ValueError:
        return None
    parts = stack.split(";")
    thread = parts[0] if parts and parts[0].startswith("thread (") else ""
    frames = []
    for p in parts[1 if thread else 0:]:
        m = _FRAME_RE.match(p)
        if m is None:
            frames.append((p, "", 0))
            continue
        frames.append((m["name"], m["file"], int(m["line"] or 0)))
    frames.reverse()
    return thread, frames, count


def thread_os_id(label: str) -> int | None:
    """OS thread id of a ``thread (TID)`` / ``thread (TID): name`` label."""
    m = re.match(r"thread \((0x[0-9a-fA-F]+|\d+)\)", label)
    if not m:
        return None
    return int(m[1], 0)


def raw_class_counts(path, tid: int | None = None, keep=None) -> dict[str, int]:
    """Samples per sampler class in a raw py-spy file, of thread ``tid`` (all threads when None), of
    the stacks ``keep(frames)`` accepts (all when None)."""
    out: dict[str, int] = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            r = parse_raw_line(line)
            if r is None:
                continue
            thread, frames, count = r
            if tid is not None and thread_os_id(thread) != tid:
                continue
            if keep is not None and not keep(frames):
                continue
            k = classify_stack(frames)
            out[k] = out.get(k, 0) + count
    return out


# ---------------------------------------------------------------------------------------------
# austin (https://github.com/P403n1x87/austin, ``austin -f``: full mode): one line per sample, in
# order, ``P<pid>;T<iid>:<tid>;file:function:line;... <time_us>,<idle 0|1>,<mem>`` (root frame
# first; the time is the wall time the sample stands for).  Python frames only (``austinp`` adds
# native frames as ``native@ADDR:symbol:line`` with no shared-object name, so perfip.role_of cannot
# classify them).  Measured beside py-spy in bench/bench_samplers.py.
def find_austin() -> str | None:
    """Path of the austin executable ($INFERSCOPE_AUSTIN, then PATH), or None."""
    p = os.environ.get("INFERSCOPE_AUSTIN")
    if p and os.access(p, os.X_OK):
        return p
    return shutil.which("austin")


def parse_austin_line(line: str):
    """One sample of ``austin -f``: (pid, tid, frames innermost first as (name, file, line),
    time_us, idle); None for a header, a blank or a malformed line."""
    line = line.rstrip("\n")
    if not line or line.startswith("#") or not line.startswith("P"):
        return None
    stack, _, metrics = line.rpartition(" ")
    m = metrics.split(",")
    try:
        t_us = int(m[0])
        idle = len(m) > 1 and m[1] == "1"
    except ValueError:
        return None
    parts = stack.split(";")
    if len(parts) < 2 or not parts[1].startswith("T"):
        return None
    try:
        pid = int(parts[0][1:])
        tid = int(parts[1].rsplit(":", 1)[-1], 0)
    except ValueError:
        return None
    frames = []
    for p in parts[2:]:
        f = p.rsplit(":", 2)
        if len(f) != 3:
            continue
        fn, name, ln = f
        if fn.startswith("native@"):
            continue                         # austinp's native frame: no shared object, transparent
        try:
            frames.append((name, fn, int(ln)))
        except ValueError:
            frames.append((name, fn, 0))
    frames.reverse()
    return pid, tid, frames, t_us, idle
