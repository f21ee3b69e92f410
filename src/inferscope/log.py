"""InferScope's log lines on stderr, in seed 001's format:

    [2025-12-27 10:30:45.123] INFO     Trace collection started (buffer_size_mb=100)

Level from INFERSCOPE_LOG_LEVEL / .inferscope.yaml ``log_level`` (debug, info, warn, error).
Uses the stdlib ``logging`` module under the logger name ``inferscope`` (no root handlers touched).
"""
from __future__ import annotations

import logging
import sys
import time

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
          "warning": logging.WARNING, "error": logging.ERROR}
_NAMES = {logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARN", logging.ERROR: "ERROR",
          logging.CRITICAL: "ERROR"}


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


_logger = logging.getLogger("inferscope")
_configured = False


def get_logger() -> logging.Logger:
    global _configured
    if not _configured:
        _configured = True
        h = _StderrHandler()
        h.setFormatter(SeedFormatter())
        _logger.addHandler(h)
        _logger.propagate = False
        if _logger.level == logging.NOTSET:
            _logger.setLevel(logging.INFO)
    return _logger


def set_level(name: str) -> None:
    get_logger().setLevel(LEVELS.get(str(name).lower(), logging.INFO))


def debug(msg, *a):
    get_logger().debug(msg, *a)


def info(msg, *a):
    get_logger().info(msg, *a)


def warn(msg, *a):
    get_logger().warning(msg, *a)


def error(msg, *a):
    get_logger().error(msg, *a)
