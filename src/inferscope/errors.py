"""Errors that the CLI turns into one clear line and exit code 2."""


class InferScopeError(Exception):
    """Base class: message is shown to the user as one line (whitespace collapsed, capped)."""

    exit_code = 2
    MAX_CHARS = 400

    def __init__(self, message: object = "") -> None:
        msg = " ".join(str(message).split())
        if len(msg) > self.MAX_CHARS:
            msg = msg[: self.MAX_CHARS - 1] + "…"
        super().__init__(msg)


class InputError(InferScopeError):
    """The input file is missing, unreadable, truncated, corrupt or not a trace."""


class ConfigError(InferScopeError):
    """A configuration value (flag, env var, .inferscope.yaml) is invalid."""
