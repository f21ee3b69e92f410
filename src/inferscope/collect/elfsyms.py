"""Function symbols of a shared object, read from its ELF file without loading it: a small reader for perfip.py.

Only the ELF header, the section headers, the program headers and one symbol table with its string table are
touched, through a read-only memory map (libtorch_cpu.so is ~430 MB; its .symtab is 12 MB of 530k entries and its
.strtab 76 MB, of which only the names of the symbols the samples hit are ever read).  The symbol entries are
parsed at once with numpy (one structured view), so a table costs a few sorts, not one Python object per symbol
(why not pyelftools: its iter_symbols builds a Python container per entry, seconds for 530k of them, and it is not
a dependency).  ``.symtab`` is preferred (it also names the file-local functions - the vectorised kernels live in
anonymous namespaces); a stripped file has only ``.dynsym``; a file with neither gives no table (None).
ELF64 little-endian only (x86-64, aarch64: where perfip samples); anything else: None.
"""
from __future__ import annotations

import mmap
import os
import struct

import numpy as np

SHT_SYMTAB, SHT_DYNSYM = 2, 11
PT_LOAD = 1
STT_FUNC, STT_GNU_IFUNC = 2, 10
_SYM = np.dtype([("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"),
                 ("value", "<u8"), ("size", "<u8")])


class SymbolTable:
    """The function symbols of one ELF file, sorted by address: ``lookup(vaddrs)`` -> indices, ``name(i)``."""

    def __init__(self, path: str, mm: mmap.mmap, starts: np.ndarray, ends: np.ndarray, name_offs: np.ndarray,
                 str_off: int, str_size: int, loads: list[tuple[int, int, int]], section: str) -> None:
        self.path = path
        self._mm = mm                  # kept open: names are read from it on demand
        self.starts = starts           # uint64 link-time addresses, ascending
        self.ends = ends               # start + size (size 0: up to the next symbol)
        self._name_offs = name_offs
        self._str_off, self._str_size = str_off, str_size
        self.loads = loads             # [(p_offset, p_vaddr, p_filesz)] of the PT_LOAD segments
        self.section = section         # ".symtab" or ".dynsym"

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def nbytes(self) -> int:
        """Memory held by the parsed table (the mapped file itself is page cache, shared)."""
        return int(self.starts.nbytes + self.ends.nbytes + self._name_offs.nbytes)

    def bias(self, map_start: int, map_offset: int) -> int | None:
        """Run-time minus link-time address for a mapping of this file at ``map_start`` from file offset
        ``map_offset`` (/proc/self/maps); None if no loadable segment holds that offset."""
        for off, vaddr, filesz in self.loads:
            if off <= map_offset < off + max(filesz, 1):
                return map_start - (vaddr + map_offset - off)
        return None

    def lookup(self, vaddrs) -> np.ndarray:
        """Index of the function containing each link-time address, -1 where none does."""
        a = np.asarray(vaddrs, dtype=np.uint64)
        i = np.searchsorted(self.starts, a, side="right").astype(np.int64) - 1
        ok = i >= 0
        j = np.where(ok, i, 0)
        ok &= a < self.ends[j]
        return np.where(ok, i, -1)

    def name(self, i: int) -> str:
        off = int(self._name_offs[i])
        if off >= self._str_size:
            return ""
        base = self._str_off + off
        end = self._mm.find(b"\0", base, self._str_off + self._str_size)
        return self._mm[base:end if end >= 0 else self._str_off + self._str_size].decode("utf-8", "replace")

    def close(self) -> None:
        try:
            self._mm.close()
        except (BufferError, ValueError):
            pass


def load(path: str) -> SymbolTable | None:
    """The function symbol table of the ELF file at ``path`` (None: unreadable, not ELF64 LE, no symbols)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        mm = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    try:
        t = _parse(path, mm)
    except (struct.error, ValueError, IndexError, OverflowError):
        t = None
    if t is None:
        mm.close()
    return t


def _parse(path: str, mm: mmap.mmap) -> SymbolTable | None:
    if len(mm) < 64 or mm[:4] != b"\x7fELF" or mm[4] != 2 or mm[5] != 1:     # ELF64, little-endian
        return None
    phoff, shoff = struct.unpack_from("<QQ", mm, 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", mm, 54)
    if phoff + phnum * phentsize > len(mm) or shoff + shnum * shentsize > len(mm):
        return None                             # (truncated or corrupt: headers past the end)
    loads = []
    for k in range(phnum if phentsize >= 56 else 0):
        p_type, _fl, p_off, p_vaddr, _pa, p_filesz = struct.unpack_from("<IIQQQQ", mm, phoff + k * phentsize)
        if p_type == PT_LOAD:
            loads.append((p_off, p_vaddr, p_filesz))
    secs = []                                   # (type, offset, size, link, entsize)
    for k in range(shnum if shentsize >= 64 else 0):
        _n, s_type, _f, _a, s_off, s_size, s_link, _i, _al, s_ent = struct.unpack_from("<IIQQQQIIQQ", mm,
                                                                                       shoff + k * shentsize)
        secs.append((s_type, s_off, s_size, s_link, s_ent))
    for want, label in ((SHT_SYMTAB, ".symtab"), (SHT_DYNSYM, ".dynsym")):
        for s_type, s_off, s_size, s_link, s_ent in secs:
            if s_type != want or s_ent != _SYM.itemsize or s_link >= len(secs) or s_off + s_size > len(mm):
                continue
            syms = np.frombuffer(mm, dtype=_SYM, count=s_size // _SYM.itemsize, offset=s_off)
            typ = syms["info"] & 0xF
            keep = ((typ == STT_FUNC) | (typ == STT_GNU_IFUNC)) & (syms["shndx"] != 0) & (syms["value"] != 0)
            f = syms[keep]                      # (a copy: the map stays closable)
            del syms
            if not len(f):
                continue
            order = np.argsort(f["value"], kind="stable")
            starts = np.ascontiguousarray(f["value"][order])
            sizes = f["size"][order]
            nxt = np.append(starts[1:], np.uint64(np.iinfo(np.uint64).max))
            ends = np.where(sizes > 0, starts + sizes, nxt)
            _t, str_off, str_size, _l, _e = secs[s_link]
            _drop(mm, s_off, s_size)               # (the entries are copied: their pages leave this process's RSS)
            return SymbolTable(path, mm, starts, ends, np.ascontiguousarray(f["name"][order]),
                               str_off, min(str_size, len(mm) - str_off), loads, label)
    return None



def _drop(mm: mmap.mmap, off: int, size: int) -> None:
    """Release the resident pages of [off, off + size) of a read-only file map (MADV_DONTNEED: re-read from the
    file if touched again)."""
    a = off - off % mmap.PAGESIZE
    try:
        mm.madvise(mmap.MADV_DONTNEED, a, size + off - a)
    except (AttributeError, OSError, ValueError):
        pass
