"""The class name recorded for an exception leaving a scope() range or a generate() call (api.py, llmhook.py): a
module of its own, light, so the LLM hook imports it up front without importing the API (which imports the session)."""
from __future__ import annotations


def error_name(et) -> str | None:
    """The class name of an ``Exception`` leaving a scope (JSON- and label-safe: word characters only), else
    None; BaseException-only exits (KeyboardInterrupt, SystemExit, GeneratorExit, task cancellation) are not
    errors of the range.  Never the message: it may hold user data."""
    if et is None or not isinstance(et, type) or not issubclass(et, Exception):
        return None
    n = "".join(c if (c.isalnum() or c == "_") else "_" for c in str(getattr(et, "__name__", "") or "")[:80])
    return n or "Exception"
