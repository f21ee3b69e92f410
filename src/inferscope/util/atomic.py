"""Atomic file output: write to a temp file in the same directory, then rename."""
from __future__ import annotations

import contextlib
import gzip
import io
import os
import tempfile
from pathlib import Path


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8", compress: bool | None = None):
    """Yield a file object; on success it replaces ``path`` atomically.

    ``compress`` (default: the path ends in ``.gz``): gzip the content as it is written (mtime 0:
    the same bytes for the same content), so a big output is never staged uncompressed.
    On any exception the temp file is removed and ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    binary = "b" in mode
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    try:
        # mkstemp creates 0600; give the result the permissions a plain open() would
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        if path.name.endswith(".gz") if compress is None else compress:
            with os.fdopen(fd, "wb") as raw:
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
                    if binary:
                        yield gz
                    else:
                        with io.TextIOWrapper(gz, encoding=encoding, newline=None) as f:
                            yield f
                raw.flush()
                os.fsync(raw.fileno())
        else:
            with os.fdopen(fd, mode, encoding=None if binary else encoding) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_text(path, text: str) -> None:
    with atomic_open(path, "w") as f:
        f.write(text)
