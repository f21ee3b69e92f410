"""InferScope's log lines on stderr, in seed 001's format:

    [2025-12-27 10:30:45.123] INFO     Trace collection started (buffer_size_mb=100)

Level from INFERSCOPE_LOG_LEVEL / .inferscope.yaml ``log_level`` (debug, info, warn, error).
Uses the stdlib ``logging`` module under the logger name ``inferscope`` (no root handlers touched).
``logging`` is imported at the first log line (or when it is already loaded): ``inferscope analyze``
only sets the level and never needs it (start-up cost, issue 26).
"""
from __future__ import annotations

import sys
import time

# logging's level numbers (DEBUG 10, INFO 20, WARNING 30, ERROR 40, CRITICAL 50)
LEVELS = {"debug": 10, "info": 20, "warn": 30, "warning": 30, "error": 40}
_NAMES = {10: "DEBUG", 20: "INFO", 30: "WARN", 40: "ERROR", 50: "ERROR"}

_logger = None
_pending_level: int | None = None   # set_level before logging was needed


def _configure():
    import logging  # lazy: logging is set up at the first message only

    class SeedFormatter(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            t = time.localtime(record.created)
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", t) + f".{int(record.msecs):03d}"
            return f"[{stamp}] {_NAMES.get(record.levelno, record.levelname):<8} {record.getMessage()}"

    class _StderrHandler(logging.StreamHandler):
        """Writes to the *current* sys.stderr (it may be replaced after the handler is created)."""

        def __init__(self) -> None:
            super().__init__(sys.stderr)

        @property
        def stream(self):
            return sys.stderr

        @stream.setter
        def stream(self, value):
            pass

    lg = logging.getLogger("inferscope")
    h = _StderrHandler()
    h.setFormatter(SeedFormatter())
    lg.addHandler(h)
    lg.propagate = False
    if lg.level == logging.NOTSET:
        lg.setLevel(logging.INFO)
    return lg


def get_logger():
    """The ``inferscope`` logging.Logger, configured on first use."""
    global _logger, _pending_level
    if _logger is None:
        _logger = _configure()
        if _pending_level is not None:
            _logger.setLevel(_pending_level)
            _pending_level = None
    return _logger


def set_level(name: str) -> None:
    global _pending_level
    level = LEVELS.get(str(name).lower(), 20)
    if _logger is None and "logging" not in sys.modules:
        _pending_level = level
        return
    get_logger().setLevel(level)


def debug(msg, *a):
    get_logger().debug(msg, *a)


def info(msg, *a):
    get_logger().info(msg, *a)


def warn(msg, *a):
    get_logger().warning(msg, *a)


def error(msg, *a):
    get_logger().error(msg, *a)
