"""SIGINT handling shared by code that must react to Ctrl-C itself (nsys SQL, the report writer)."""
from __future__ import annotations

import signal
import threading


class SigintHandler:
    """Context manager: while inside, SIGINT calls ``self.on_sigint()`` (main thread only; elsewhere
    signals cannot be handled and nothing changes); the previous handler is restored at exit."""

    def on_sigint(self) -> None:          # overridden
        raise KeyboardInterrupt

    def __enter__(self):
        self.old = None
        if threading.current_thread() is threading.main_thread():
            try:
                self.old = signal.signal(signal.SIGINT, lambda signum, frame: self.on_sigint())
            except ValueError:
                self.old = None
        return self

    def __exit__(self, *exc):
        if self.old is not None:
            signal.signal(signal.SIGINT, self.old)
        return False
