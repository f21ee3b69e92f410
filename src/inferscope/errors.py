"""Errors that the CLI turns into one clear line and exit code 2."""
import re

# control characters (ESC sequences, BEL, NUL) and bidi overrides from file names or file
# contents must not reach the terminal through an error message
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


class InferScopeError(Exception):
    """Base class: message is shown to the user as one line (whitespace collapsed, capped)."""

    exit_code = 2
    MAX_CHARS = 400

    def __init__(self, message: object = "") -> None:
        msg = " ".join(_CONTROL.sub("?", str(message)).split())
        if len(msg) > self.MAX_CHARS:
            msg = msg[: self.MAX_CHARS - 1] + "…"
        super().__init__(msg)


class InputError(InferScopeError):
    """The input file is missing, unreadable, truncated, corrupt or not a trace."""


class ConfigError(InferScopeError):
    """A configuration value (flag, env var, .inferscope.yaml) is invalid."""
