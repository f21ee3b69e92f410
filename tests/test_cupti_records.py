"""collect/cupti_records.py: CUPTI records read by address (one numpy gather per kind and buffer)
give the same rows as reading each record's attributes, on planted C structs laid out as CUPTI
lays them out (one buffer, kinds interleaved) and as cupti-python's copies are (scattered)."""
import ctypes
import random

import numpy as np
import pytest

from inferscope.collect.cupti_records import RecordSink, dtype_name, gather
from inferscope.collect.gpu_activity import ROW_FIELDS

KINDS = {10: "kernel", 1: "memcpy", 5: "runtime"}


def _struct(which: str, itemsize: int) -> np.dtype:
    """A C-struct-like dtype: kind first, the row fields at scattered 8-byte slots, padding between."""
    names, formats, offsets = ["kind"], ["<i4"], [0]
    off = 8
    for f in ROW_FIELDS[which]:
        names.append(f)
        formats.append("<i8" if f == "name" else ("<u8" if f in ("start", "end", "bytes") else "<u4"))
        offsets.append(off)
        off += 16 if f in ("start", "grid_x") else 8       # gaps, like CUPTI's unused members
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": max(itemsize, off)})


DTYPES = {"kernel": _struct("kernel", 232), "memcpy": _struct("memcpy", 120), "runtime": _struct("runtime", 64)}


class Obj:
    """What cupti-python hands the callback: kind, ptr, and the fields as attributes."""
    def __init__(self, kind, ptr, values):
        self.kind, self.ptr = kind, ptr
        self.__dict__.update(values)


def _planted(n, seed, names):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = rng.choice(list(KINDS))
        which = KINDS[k]
        vals = {}
        for f in ROW_FIELDS[which]:
            vals[f] = names[rng.randrange(len(names))] if f == "name" else rng.randrange(0, 2**31)
        if "start" in vals:
            vals["start"] = 1_700_000_000_000_000_000 + i * 1000
            vals["end"] = vals["start"] + rng.randrange(1, 10_000)
        out.append((k, vals))
    return out


def _write(rec: np.ndarray, k: int, vals: dict, name_ptr: dict) -> None:
    rec["kind"] = k
    for f, v in vals.items():
        rec[f] = name_ptr[v] if f == "name" else v


def _scattered(planted, name_ptr, tamper=None):
    """One allocation per record (cupti-python's copies): (the arrays, kept alive; the objects).
    ``tamper(which, rec)`` may change the memory after it is written (the objects keep the truth)."""
    keep, acts = [], []
    for k, vals in planted:
        rec = np.zeros(1, DTYPES[KINDS[k]])
        _write(rec, k, vals, name_ptr)
        if tamper is not None:
            tamper(KINDS[k], rec)
        keep.append(rec)
        acts.append(Obj(k, rec.ctypes.data, vals))
    return keep, acts


@pytest.fixture(scope="module")
def names():
    bufs = {s: ctypes.create_string_buffer(s.encode()) for s in ("void gemm<128>(float*)", "elementwise_add", "k\u00e9rnel")}
    return bufs


def _sink():
    return RecordSink(KINDS, ROW_FIELDS, lambda o: DTYPES[KINDS[o.kind]])


def _truth(planted, which):
    return [[v[f] for f in ROW_FIELDS[which]] for k, v in planted if KINDS[k] == which]


@pytest.mark.parametrize("layout", ["one_buffer", "scattered"])
def test_gathered_rows_equal_the_records_written(names, layout):
    name_ptr = {s: ctypes.addressof(b) for s, b in names.items()}
    planted = _planted(3000, seed=7, names=list(names))
    keep = []
    acts = []
    if layout == "one_buffer":      # back to back, 8-byte aligned, as CUPTI fills a buffer
        size = sum(DTYPES[KINDS[k]].itemsize for k, _ in planted)
        raw = np.zeros(size // 8 + 1, np.uint64)
        keep.append(raw)
        off = 0
        for k, vals in planted:
            dt = DTYPES[KINDS[k]]
            rec = np.ndarray(1, dt, buffer=raw, offset=off)
            _write(rec, k, vals, name_ptr)
            acts.append(Obj(k, raw.ctypes.data + off, vals))
            off += dt.itemsize
    else:                           # one allocation per record (cupti-python's copies)
        keep, acts = _scattered(planted, name_ptr)
    acts.insert(5, Obj(99, 0, {}))  # a kind not asked for
    sink = _sink()
    half = len(acts) // 2           # two buffers
    assert sink.add(acts[:half], room=10**6) + sink.add(acts[half:], room=10**6) == 3000
    assert sink.fast_records == 3000
    for which in KINDS.values():
        assert sink.rows(which) == _truth(planted, which), which
    assert sink.count("kernel") == len(_truth(planted, "kernel"))


def test_records_that_do_not_decode_to_their_attributes_are_read_by_attribute(names):
    """A dtype that disagrees with the objects (a CUPTI version cupti-python does not describe):
    the first record of the kind shows it, and the whole kind is read attribute by attribute."""
    name_ptr = {s: ctypes.addressof(b) for s, b in names.items()}
    planted = _planted(200, seed=3, names=list(names))

    def tamper(which, rec):
        if which == "memcpy":
            rec["bytes"] += 1                        # memory says otherwise
    keep, acts = _scattered(planted, name_ptr, tamper)
    sink = _sink()
    sink.add(acts, room=10**6)
    n_memcpy = len(_truth(planted, "memcpy"))
    assert sink.fast_records == 200 - n_memcpy
    for which in KINDS.values():
        assert sink.rows(which) == _truth(planted, which), which
    # no dtype at all (objects without ptr, as in a test double): every kind by attribute
    plain = RecordSink(KINDS, ROW_FIELDS, None)
    plain.add(acts, room=10**6)
    assert plain.fast_records == 0 and plain.rows("kernel") == _truth(planted, "kernel")


def test_room_keeps_the_first_records_of_the_buffer(names):
    name_ptr = {s: ctypes.addressof(b) for s, b in names.items()}
    planted = _planted(100, seed=11, names=list(names))
    keep, acts = _scattered(planted, name_ptr)
    sink = _sink()
    assert sink.add(acts, room=30) == 100
    kept = planted[:30]
    assert sum(sink.count(w) for w in KINDS.values()) == 30
    for which in KINDS.values():
        assert sink.rows(which) == _truth(kept, which)


def test_gather_reads_records_in_the_order_given_near_or_far():
    dt = np.dtype([("x", "<u8"), ("y", "<u8"), ("z", "<u8"), ("w", "<u8")])
    block = np.arange(40, dtype=np.uint64)                    # 10 records back to back
    near = gather(np.array([block.ctypes.data + 32 * i for i in (3, 0, 9)], np.uint64), dt)
    assert near["x"].tolist() == [12, 0, 36] and near["w"].tolist() == [15, 3, 39]
    a, b = np.arange(4, dtype=np.uint64), np.arange(4, 8, dtype=np.uint64) + 100
    far = gather(np.array([b.ctypes.data, a.ctypes.data, b.ctypes.data + 8], np.uint64)[:2], dt)
    assert far["x"].tolist() == [100 + 4, 0] and far["w"].tolist() == [107, 3]
    odd = gather(np.array([block.ctypes.data + 4], np.uint64), dt)          # not 8-byte aligned: memmove
    assert odd.view(np.uint8).tolist() == block.view(np.uint8)[4:36].tolist()


def test_dtype_names_follow_cupti_python():
    assert dtype_name("ActivityKernel11") == "activity_kernel11_dtype"
    assert dtype_name("ActivityMemcpy6") == "activity_memcpy6_dtype"
    assert dtype_name("ActivitySynchronization2") == "activity_synchronization2_dtype"
    assert dtype_name("ActivityAPI") == "activity_api_dtype"
