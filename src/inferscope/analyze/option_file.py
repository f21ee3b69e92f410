"""Reading a file named by an analyze option (--phase-map, --model-config, --cublas-log): bounded, and every way it
can fail is one ConfigError line (exit 2) that names the option and the path."""
from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError


def read_bounded(option: str, path: str, max_bytes: int, too_large: str | None = None) -> bytes:
    """The file's bytes, at most ``max_bytes``; ConfigError for a missing file, a directory, an unreadable file or
    one larger than ``max_bytes`` (``too_large``: the message's words for that, default "larger than N MB")."""
    try:
        if Path(path).is_dir():
            raise ConfigError(f"{option} {path}: is a directory")
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise ConfigError(f"{option} {path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{option} {path}: is a directory") from None
    except OSError as e:
        raise ConfigError(f"{option} {path}: cannot be read ({e.strerror or e})") from None
    if len(raw) > max_bytes:
        raise ConfigError(f"{option} {path}: {too_large or f'larger than {max_bytes >> 20} MB'}")
    return raw
