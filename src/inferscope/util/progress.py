"""A progress line on stderr for long inputs (``inferscope analyze`` / ``export``).

One self-overwriting line (carriage return, erase to the end of the line), e.g.::

    inferscope: reading trace.json.gz  312 / 535 MB compressed (58 %), 1,204,331 events  2.1 s
    inferscope: analysing  4.0 s

It appears only when the stream is a terminal, the command is not ``-q``, and ``AFTER_S``
(2 s; ``INFERSCOPE_PROGRESS_AFTER_S``) have passed since the command started: fast inputs print
nothing at all.  It is redrawn at most once per ``EVERY_S`` (0.2 s) from the calls below and from
a small ticker thread (so the elapsed time moves during a long step that reports nothing); at the
end a successful command leaves one summary line ending with a newline, a failed one erases it
(its error message takes the line).

Producers (the importers, cli.py) receive a ``Progress`` or ``None`` (the default: no cost beyond
an ``is not None`` test) and call ``stage(text, total=..., unit=...)`` when a stage starts and
``update(done, events=...)`` as it advances; both are cheap (a clock read and two comparisons).
No inferscope imports except ``errors``: ingest/ and trace/ may use it without an import cycle.
"""
from __future__ import annotations

import os
import re
import sys
import threading
import time

from ..errors import ConfigError

AFTER_S = 2.0        # nothing is drawn before this much time has passed
EVERY_S = 0.2        # at most one redraw per this interval (5 per second)
ENV_AFTER = "INFERSCOPE_PROGRESS_AFTER_S"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _clean(s: str) -> str:
    """File names reach the terminal: no control characters (escape sequences, bidi overrides)."""
    return _CONTROL.sub("?", str(s))


def after_s_from_env() -> float:
    """The threshold from INFERSCOPE_PROGRESS_AFTER_S (seconds, >= 0), else AFTER_S; a bad value is ConfigError."""
    raw = os.environ.get(ENV_AFTER)
    if raw is None or not raw.strip():
        return AFTER_S
    try:
        v = float(raw)
    except ValueError:
        v = float("nan")
    if not v >= 0 or v == float("inf"):
        raise ConfigError(f"{ENV_AFTER}={raw!r}: expected a number of seconds >= 0")
    return v


def _is_tty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def _width(stream) -> int:
    """The terminal's width (a longer line would wrap and break the carriage return); 80 when unknown."""
    try:
        cols = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError, TypeError):
        return 80
    return max(20, cols) if cols > 0 else 80


class Progress:
    """The progress line of one command (see the module doc).  ``active`` is False when the stream
    is not a terminal or ``quiet``: every method then returns at once and nothing is ever written.

    ``clock``: seconds, monotonic (tests pass their own); ``ticker``: start the redraw thread;
    ``width``: columns (default: the terminal's)."""

    def __init__(self, stream, label: str = "", *, quiet: bool = False, after_s: float = AFTER_S,
                 every_s: float = EVERY_S, clock=time.monotonic, ticker: bool = False,
                 width: int | None = None) -> None:
        self.stream = stream
        self.active = not quiet and _is_tty(stream)
        self.label = _clean(label)
        self.after_s = float(after_s)
        self.every_s = float(every_s)
        self.clock = clock
        self.t0 = clock()
        self.drawn = 0                  # lines drawn so far
        self._last = float("-inf")      # clock at the last draw
        self._stage = ("", None, "MB", "")   # (text, total, unit, note)
        self._done = None
        self._events = None
        self._closed = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        self._width = int(width) if width else (_width(stream) if self.active else 80)
        if self.active and ticker:
            self._thread = threading.Thread(target=self._tick_loop, name="inferscope-progress", daemon=True)
            self._thread.start()

    # ---- producers ----------------------------------------------------------------------
    def stage(self, text: str, total: int | None = None, unit: str = "MB", note: str = "") -> None:
        """A new stage: ``text`` (e.g. "reading trace.json"), an optional ``total`` in ``unit``
        ("MB": bytes shown in MB, "rows", ...) and a ``note`` on what the count is."""
        if not self.active:
            return
        self._stage = (_clean(text), total, unit, note)
        self._done = None
        self._events = None
        self.tick()

    def update(self, done: int | None = None, events: int | None = None) -> None:
        """Progress inside the stage: ``done`` of its total (bytes for "MB"), ``events`` decoded so far."""
        if not self.active:
            return
        if done is not None:
            self._done = done
        if events is not None:
            self._events = events
        self.tick()

    # ---- drawing ------------------------------------------------------------------------
    def line(self) -> str:
        """The current line's text (no control characters)."""
        text, total, unit, note = self._stage
        parts = []
        done = self._done
        if done is not None:
            if unit == "MB":
                amount = f"{done / 1e6:,.0f}" + (f" / {total / 1e6:,.0f}" if total else "") + " MB"
            else:
                amount = f"{done:,d}" + (f" / {total:,d}" if total else "") + f" {unit}"
            if note:
                amount += f" {note}"
            if total:
                amount += f" ({min(100.0, 100.0 * done / total):.0f} %)"
            if self._events is not None:
                amount += f", {self._events:,d} events"
            parts.append(amount)
        elif self._events is not None:
            parts.append(f"{self._events:,d} events")
        parts.append(f"{max(0.0, self.clock() - self.t0):.1f} s")
        tail = "  ".join(parts)
        return self._fit(f"inferscope: {text}" if text else "inferscope:", tail)

    def _fit(self, head: str, tail: str, sep: str = "  ") -> str:
        """head + sep + tail within the terminal's width (one column free: no wrap at the last one);
        the head (stage text, file name) gives way, so the numbers and the time stay readable."""
        room = self._width - 1 - len(tail) - len(sep)
        if len(head) > room:
            head = head[:max(11, room - 1)] + "…"
        return (head + sep + tail)[:self._width - 1]

    def tick(self) -> bool:
        """Draw the line when it is due (past the threshold, one interval after the last draw);
        True when drawn.  Never waits: a draw in progress elsewhere makes this one a no-op."""
        if not self.active or self._closed:
            return False
        now = self.clock()
        if now - self.t0 < self.after_s or now - self._last < self.every_s:
            return False
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._closed:
                return False
            self._last = now
            self._write("\r" + self.line() + "\x1b[K")
            self.drawn += 1
            return True
        finally:
            self._lock.release()

    def _write(self, s: str) -> None:
        try:
            self.stream.write(s)
            self.stream.flush()
        except (OSError, ValueError):   # the terminal went away: stop drawing
            self._closed = True

    def _tick_loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.tick()

    def done(self, ok: bool = True) -> None:
        """End the line: after a success the summary stays, ending with a newline; after a failure
        the line is erased.  Nothing is written when nothing was drawn.  Idempotent."""
        if not self.active:
            return
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if not self.drawn:
                return
            if ok:
                t = max(0.0, self.clock() - self.t0)
                head = f"inferscope: {self.label}" if self.label else "inferscope:"
                self._write("\r" + self._fit(head, f"done in {t:.1f} s", " ") + "\x1b[K\n")
            else:
                self._write("\r\x1b[K")


def for_stderr(label: str = "", quiet: bool = False) -> Progress | None:
    """The command's progress line on the current ``sys.stderr`` (ticker running), or None when
    there is nothing to show (not a terminal, or quiet)."""
    stream = sys.stderr
    if quiet or not _is_tty(stream):
        return None
    return Progress(stream, label, after_s=after_s_from_env(), ticker=True)
