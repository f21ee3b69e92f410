"""Writing the outputs of one command as a set.

1. Every output is rendered into a private staging folder beside its destination
   (``.inferscope-tmp-<pid>``; ``.gz`` outputs are gzip-compressed as they are written).
2. The staged files are renamed into place, one ``os.replace`` each, with SIGINT deferred
   until the whole set is in place (a second Ctrl-C cannot leave half a set).
3. A manifest (``.inferscope-outputs.json`` in an output folder, ``.<stem>.inferscope-outputs.json``
   beside single files) lists what the set holds; files the previous set of the same name
   wrote inside a folder this set rewrote (stale CSVs of another trace) are removed; its files of
   other formats are kept (x.html never deletes the x.md written before it).
Staging folders and renderer temporaries left by an earlier run that was killed are removed
when their process no longer exists.  An output that resolves to an input file is refused.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path

from ..util.proc import pid_alive
from ..util.signals import SigintHandler
from ..errors import ConfigError, InferScopeError
from . import get_renderer

STAGE_PREFIX = ".inferscope-tmp-"


def clean_stale_temporaries(folder: Path) -> int:
    """Remove staging folders of dead InferScope processes in ``folder``; returns how many."""
    n = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for e in entries:
        if e.name.startswith(STAGE_PREFIX):
            try:
                pid = int(e.name[len(STAGE_PREFIX):].split(".")[0])
            except ValueError:
                continue
            if pid != os.getpid() and not pid_alive(pid):
                shutil.rmtree(e.path, ignore_errors=True)
                n += 1
    return n


_OLD_TMP_AGE_S = 600


def clean_old_atomic_temporaries(final: Path) -> int:
    """Remove ``.<name>.*.tmp`` files beside ``final`` (util/atomic.py temporaries of a killed
    writer) older than 10 minutes; a writer still running would have touched its file recently."""
    n = 0
    try:
        entries = list(os.scandir(final.parent))
    except OSError:
        return 0
    prefix = f".{final.name}."
    for e in entries:
        if e.name.startswith(prefix) and e.name.endswith(".tmp"):
            try:
                if e.is_file(follow_symlinks=False) and time.time() - e.stat().st_mtime > _OLD_TMP_AGE_S:
                    os.unlink(e.path)
                    n += 1
            except OSError:
                pass
    return n


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def refuse_overwriting_inputs(outputs: list[tuple[str, Path]], inputs: list[Path]) -> None:
    """ConfigError when an output path (or a CSV folder) resolves to an input file."""
    for fmt, path in outputs:
        for inp in inputs:
            if _same_file(path, inp) or os.path.realpath(path) == os.path.realpath(inp):
                raise ConfigError(f"output {path} is the input trace {inp}: refusing to overwrite it "
                                  "(choose another -o/--report path)")


class _DeferSigint(SigintHandler):
    """Hold SIGINT while the set is written; re-raise KeyboardInterrupt once it is complete."""

    def on_sigint(self) -> None:
        self.pending = True

    def __enter__(self):
        self.pending = False
        return super().__enter__()

    def __exit__(self, *exc):
        super().__exit__(*exc)
        if self.pending and exc[0] is None:
            raise KeyboardInterrupt
        return False


def _manifest_path(fmt_paths: list[tuple[str, Path]], outdir: Path | None) -> Path:
    if outdir is not None:
        return outdir / ".inferscope-outputs.json"
    first = fmt_paths[0][1]
    stem = first.name
    for suf in (".gz",):
        if stem.endswith(suf):
            stem = stem[: -len(suf)]
    stem = stem.rsplit(".", 1)[0] if "." in stem else stem
    return first.parent / f".{stem}.inferscope-outputs.json"


def _read_manifest(p: Path) -> list[str]:
    try:
        with open(p, encoding="utf-8") as f:
            d = json.load(f)
        files = d.get("files") if isinstance(d, dict) else None
        return [x for x in files if isinstance(x, str)] if isinstance(files, list) else []
    except (OSError, ValueError, RecursionError):
        return []


def write_set(report, trace, outputs: list[tuple[str, Path]], outdir: Path | None = None,
              inputs: list[Path] | None = None, defer_interrupt: bool = False) -> list[Path]:
    """Render every (format, path) of ``report`` (a ``result.Report``, its ``views`` attached) and put them in
    place as one set; returns the written paths.

    ``outdir``: the output folder when -o named a folder (manifest and CSV tables live there).
    Ctrl-C while rendering abandons the new set (the previous one stays whole) unless
    ``defer_interrupt`` (``inferscope run``: the report is what the user waits for), which holds
    it until the set is in place; while renaming it is always held.
    """
    with (_DeferSigint() if defer_interrupt else contextlib.nullcontext()):
        return _write_set(report, trace, outputs, outdir, inputs)


def _write_set(report, trace, outputs, outdir, inputs) -> list[Path]:
    refuse_overwriting_inputs(outputs, inputs or [])
    # staging: one folder per destination folder
    stages: dict[Path, Path] = {}
    plan: list[tuple[str, Path, Path]] = []   # (format, staged path, final path)
    try:
        for fmt, path in outputs:
            parent = path.parent
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise InferScopeError(f"cannot create the output folder {parent}: {e.strerror or e}") from None
            if parent not in stages:
                clean_stale_temporaries(parent)
                st = parent / f"{STAGE_PREFIX}{os.getpid()}"
                shutil.rmtree(st, ignore_errors=True)
                try:
                    st.mkdir()
                except OSError as e:
                    raise InferScopeError(f"cannot write to {parent}: {e.strerror or e}") from None
                stages[parent] = st
            plan.append((fmt, stages[parent] / path.name, path))
            clean_old_atomic_temporaries(path)
        for fmt, staged, final in plan:
            # a '.gz' destination is compressed while it is written (util/atomic.py), never staged
            # uncompressed
            try:
                get_renderer(fmt)(report, trace, staged)
            except InferScopeError:
                raise
            except OSError as e:
                raise InferScopeError(f"cannot write {final}: {e.strerror or e}") from None
        # every file staged: the inputs must not be among the destinations (CSV folders too)
        moves: list[tuple[Path, Path]] = []
        for fmt, staged, final in plan:
            if staged.is_dir():
                for f in sorted(staged.rglob("*")):
                    if f.is_file():
                        moves.append((f, final / f.relative_to(staged)))
            else:
                moves.append((staged, final))
        refuse_overwriting_inputs([("", dst) for _s, dst in moves], inputs or [])
        written: list[Path] = []
        with _DeferSigint():
            for src, dst in moves:
                try:
                    if dst.is_dir() and not src.is_dir():
                        raise InferScopeError(f"cannot write {dst}: it is a folder")
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(src, dst)
                except OSError as e:
                    raise InferScopeError(f"cannot write {dst}: {e.strerror or e}") from None
            written = [final for _f, _s, final in plan]
            _update_manifest(outputs, outdir, [dst for _s, dst in moves],
                             [final for _f, staged, final in plan if staged.is_dir()])
        return written
    finally:
        for st in stages.values():
            shutil.rmtree(st, ignore_errors=True)


def _update_manifest(outputs, outdir: Path | None, files: list[Path], folders: list[Path]) -> None:
    """Record the set; remove what the previous set wrote inside a folder this set rewrote (a CSV table of
    another trace).  Files of other formats the previous set wrote are kept (and stay listed): writing
    x.html never deletes the x.md written before it (issue 24)."""
    mp = _manifest_path(outputs, outdir)
    base = mp.parent.resolve()
    new_rel = []
    for f in files:
        try:
            new_rel.append(str(f.resolve().relative_to(base)))
        except ValueError:
            continue   # outside the manifest's folder: not tracked
    rewritten = []
    for d in folders:
        with contextlib.suppress(ValueError, OSError):
            rewritten.append(Path(d).resolve().relative_to(base).parts)
    kept = []
    for rel in _read_manifest(mp):
        if rel in new_rel or rel.startswith(("/", "..")) or ".." in Path(rel).parts:
            continue
        old = base / rel
        parts = Path(rel).parts
        if not any(parts[:len(r)] == r and len(parts) > len(r) for r in rewritten):
            if old.is_file() and not old.is_symlink():
                kept.append(rel)          # another format of the same name: not this set's to remove
            continue
        with contextlib.suppress(OSError):
            if old.is_file() and not old.is_symlink():
                old.unlink()
                if old.parent != base and not any(old.parent.iterdir()):
                    old.parent.rmdir()
    new_rel = new_rel + kept
    tmp = mp.with_name(mp.name + f".{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"tool": "inferscope", "files": sorted(new_rel)}, f, indent=1)
        os.replace(tmp, mp)
    with contextlib.suppress(OSError):
        tmp.unlink()
