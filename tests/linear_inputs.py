"""Crafted worst-case inputs for the readers' scans (issue 44), shared by tests/test_linear_readers.py
and bench/bench_linear.py.  Each returns the file's bytes, about ``size`` long; every one is valid
input that the reader must accept, so a test can compare its result with an independent decode."""
from __future__ import annotations

import json


def events(n: int, name: str = "k") -> list[dict]:
    return [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": i * 10, "dur": 5} for i in range(n)]


_TAIL = json.dumps(events(20))


def kineto_prefix(size: int) -> bytes:
    """A Kineto trace of ~size bytes whose ``traceEvents`` comes last, after metadata full of near-miss
    keys: a string of escaped ones, then objects whose "traceEvents" key is followed by whitespace, ':'
    and a value that is no list (each one makes the key scanner look past the literal)."""
    unit = '"traceEvents": [ traceEvents " '          # 35 bytes once json.dumps escapes its quotes
    head = '{"meta": ' + json.dumps(unit * max(1, size // 70)) + ', "near": ['
    obj = '{"traceEvents"   :   0}, '
    tail = '{}], "traceEvents": ' + _TAIL + ', "schemaVersion": 1}'
    return (head + obj * max(0, (size - len(head) - len(tail)) // len(obj)) + tail).encode()


def kineto_no_cut(size: int) -> bytes:
    """One event with a ~size-byte name of ``}]`` (every '}' a would-be cut that is none), then more events."""
    big = dict(events(1)[0], name="}]" * (size // 2))
    return json.dumps({"traceEvents": [big] + events(20, "after")}).encode()


def kineto_ws_gap(size: int) -> bytes:
    """~size bytes of whitespace between two events: the cut after the first is seen only at the end."""
    ev = events(21)
    return ('{"traceEvents": [' + json.dumps(ev[0]) + " " * size + ", " +
            ", ".join(json.dumps(e) for e in ev[1:]) + "]}").encode()


def ncu_rows(size: int) -> bytes:
    """An ``ncu --csv --page raw`` capture of ~size bytes: one launch, then rows with a wrong field count
    (each skipped and counted), then a second launch."""
    head = '"ID","Process ID","Process Name","Kernel Name","gpu__time_duration.sum"\n"","","","","nsecond"\n'
    good = '"{}","1","p","k","1000"\n'
    bad = '"7","1","p"\n'
    return (head + good.format(0) + bad * max(0, (size - len(head)) // len(bad)) + good.format(1)).encode()


KINETO = {"kineto-prefix": kineto_prefix, "kineto-no-cut": kineto_no_cut, "kineto-ws-gap": kineto_ws_gap}
