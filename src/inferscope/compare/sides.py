"""One side of ``inferscope diff``: a report.json written by InferScope (or a directory holding one),
or a trace (Kineto, nsys, .iscope) loaded and analysed here with the diff's options.
"""
from __future__ import annotations

from pathlib import Path

import msgspec

from ..app import analyse
from ..errors import InputError
from ..ingest import load_trace
from ..util.progress import for_stderr

REPORT_JSON_MAX_BYTES = 256 << 20


# ---------------------------------------------------------------------------------------------
# one side: a report dict (+ the trace when the input was one)
# ---------------------------------------------------------------------------------------------
class Side:
    def __init__(self, path: str, report: dict, trace=None) -> None:
        self.path = path
        self.report = report
        self.trace = trace

    @property
    def kind(self) -> str:
        return "report.json" if self.trace is None else "trace"


def _as_report(path: Path) -> dict | None:
    """The parsed document when ``path`` is an InferScope report.json, else None."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    # report.json opens with "schema_version" (InferScope writes it first); a Kineto trace does not
    # (its key is "schemaVersion"), so a big trace is never decoded twice
    if head.lstrip()[:1] != b"{" or b'"schema_version"' not in head or path.stat().st_size > REPORT_JSON_MAX_BYTES:
        return None
    try:
        doc = msgspec.json.decode(path.read_bytes())
    except msgspec.DecodeError:
        return None    # let the trace importer give its own error
    if isinstance(doc, dict) and "schema_version" in doc and "breakdown" in doc and "traceEvents" not in doc:
        if not isinstance(doc.get("breakdown"), list) or not isinstance(doc.get("e2e_ms"), (int, float)):
            raise InputError(f"{path}: report.json without a breakdown / e2e_ms")
        return doc
    return None


def load_side(path: str, options=None, quiet: bool = True) -> Side:
    """One side of a diff: a report.json (or a directory holding one), or a trace analysed here; ``quiet``
    False: a progress line on stderr while a slow trace loads and is analysed (util/progress.py)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{path}: no such file")
    if p.is_dir():
        if (p / "report.json").is_file():
            p = p / "report.json"
        else:
            raise InputError(f"{path}: a directory without report.json")
    rep = _as_report(p)
    if rep is not None:
        return Side(str(p), rep, None)
    prog = for_stderr(p.name, quiet=quiet)
    ok = False
    try:
        trace = load_trace(p, progress=prog)
        side = Side(str(p), analyse(trace, options, progress=prog)[1], trace)
        ok = True
    finally:
        if prog is not None:
            prog.done(ok)
    return side
