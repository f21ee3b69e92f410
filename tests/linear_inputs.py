"""Crafted worst-case inputs for the readers' scans (issue 44), shared by tests/test_linear_readers.py
and bench/bench_linear.py.  Each returns the file's bytes, about ``size`` long; every one is valid
input that the reader must accept, so a test can compare its result with an independent decode."""
from __future__ import annotations

import json


def events(n: int, name: str = "k") -> list[dict]:
    return [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": i * 10, "dur": 5} for i in range(n)]


_TAIL = json.dumps(events(20))


def kineto_prefix(size: int) -> bytes:
    """A Kineto trace whose ``traceEvents`` comes after ~size bytes of metadata full of near-miss keys:
    a string of escaped ones, then objects whose "traceEvents" key is followed by whitespace, ':' and
    a value that is no list (each one makes the key scanner look past the literal)."""
    text_part = size // 2
    s = '"traceEvents": [ traceEvents " ' * (text_part // 32 + 1)          # escaped by json.dumps
    obj = '{"traceEvents"   :   0}, '
    k = max(1, (size - text_part) // len(obj))
    body = '{"meta": ' + json.dumps(s[:text_part]) + ', "near": [' + obj * k + '{}], "traceEvents": ' + _TAIL + \
        ', "schemaVersion": 1}'
    return body.encode()


def kineto_no_cut(size: int) -> bytes:
    """One event with a ~size-byte name of ``}]`` (every '}' a would-be cut that is none), then more events."""
    big = dict(events(1)[0], name="}]" * (size // 2))
    return json.dumps({"traceEvents": [big] + events(20, "after")}).encode()


def kineto_ws_gap(size: int) -> bytes:
    """~size bytes of whitespace between two events: the cut after the first is seen only at the end."""
    ev = events(21)
    return ('{"traceEvents": [' + json.dumps(ev[0]) + " " * size + ", " +
            ", ".join(json.dumps(e) for e in ev[1:]) + "]}").encode()


KINETO = {"kineto-prefix": kineto_prefix, "kineto-no-cut": kineto_no_cut, "kineto-ws-gap": kineto_ws_gap}
