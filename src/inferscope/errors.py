"""Errors that the CLI turns into one clear line and exit code 2."""


class InferScopeError(Exception):
    """Base class: message is shown to the user as-is (one line)."""

    exit_code = 2


class InputError(InferScopeError):
    """The input file is missing, unreadable, truncated, corrupt or not a trace."""


class ConfigError(InferScopeError):
    """A configuration value (flag, env var, .inferscope.yaml) is invalid."""
