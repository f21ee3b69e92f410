"""Nsight Systems SQLite importer (placeholder until issue 4 lands)."""
from ..errors import InputError

LOAD_OPTIONS: tuple[str, ...] = ()


def load(path, **options):
    raise InputError(f"{path}: Nsight Systems SQLite import is not implemented yet")
