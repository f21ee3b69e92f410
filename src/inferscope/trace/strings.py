"""Interned string table: every name column in the Trace holds an int32 id."""
from __future__ import annotations

from typing import Iterable

import numpy as np


class StringTable:
    """Append-only list of unique strings with O(1) id lookup."""

    __slots__ = ("_list", "_index")

    def __init__(self, strings: Iterable[str] = ()) -> None:
        self._list: list[str] = []
        self._index: dict[str, int] = {}
        for s in strings:
            self.intern(s)

    def intern(self, s: str) -> int:
        i = self._index.get(s)
        if i is None:
            i = len(self._list)
            self._list.append(s)
            self._index[s] = i
        return i

    def intern_many(self, values: Iterable[str]) -> np.ndarray:
        idx = self._index
        lst = self._list
        out = []
        for s in values:
            i = idx.get(s)
            if i is None:
                i = len(lst)
                lst.append(s)
                idx[s] = i
            out.append(i)
        return np.asarray(out, dtype=np.int32)

    def get(self, s: str) -> int:
        """Id of ``s`` or -1 when absent (never interns)."""
        return self._index.get(s, -1)

    def __getitem__(self, i: int) -> str:
        return self._list[i] if i >= 0 else ""

    def __len__(self) -> int:
        return len(self._list)

    def as_list(self) -> list[str]:
        return self._list

    def as_array(self) -> np.ndarray:
        """Object array of all strings, for vectorised lookups ``arr[ids]``."""
        a = np.empty(len(self._list), dtype=object)
        a[:] = self._list
        return a

    def ids_matching(self, predicate, ids: np.ndarray | None = None) -> np.ndarray:
        """Boolean mask over string ids: predicate(str) for each interned string.

        Per *distinct* string, not per event: the way analyses classify names
        without touching every span in Python.  ``ids``: only the strings these ids name
        (negative ids ignored) are tested, every other entry is False -- for callers that read
        the mask at those ids only (a name rule for kernels need not run on every op name).
        """
        if ids is None:
            return np.fromiter((bool(predicate(s)) for s in self._list), dtype=bool, count=len(self._list))
        out = np.zeros(len(self._list), dtype=bool)
        ids = np.asarray(ids)
        if len(ids):
            u = np.flatnonzero(np.bincount(ids[ids >= 0], minlength=len(self._list)))
            lst = self._list
            out[u] = np.fromiter((bool(predicate(lst[i])) for i in u.tolist()), dtype=bool, count=len(u))
        return out
