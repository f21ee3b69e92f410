"""Streaming Kineto decode (issue 13 item 5): the Trace built batch by batch is identical to the
whole-file decode (batch_bytes=0) on real traces and on hostile mutants, cuts inside strings are
rejected, pathological inputs fall back instead of going quadratic, and a Progress is told the
bytes read (compressed for gzip) and the events decoded."""
import gzip
import io
import json
import random
import time
from pathlib import Path

import numpy as np
import pytest

from fuzz_mutators import mutate_kineto
from inferscope.errors import InputError
from inferscope.ingest import kineto as K

REPO = Path(__file__).resolve().parents[1]
TRACES = sorted((REPO / "tests" / "data" / "traces" / "kineto").glob("*.json*")) + \
    sorted((REPO.parent / "shared" / "traces" / "kineto").glob("*.json*"))


def _flat(tr) -> dict:
    out = {"strings": list(tr.strings), "meta": json.dumps(tr.meta, sort_keys=True, default=str)}
    for part in ("spans", "tracks", "flows", "counters"):
        obj = getattr(tr, part)
        for f, v in vars(obj).items() if hasattr(obj, "__dict__") else \
                ((f, getattr(obj, f)) for f in obj.__slots__):
            out[f"{part}.{f}"] = v
    return out


def _result(path, batch_bytes):
    try:
        return "ok", _flat(K.load(path, batch_bytes=batch_bytes))
    except InputError as e:
        return "err", str(e)


def _assert_same(a, b, what):
    assert a[0] == b[0], (what, a[0], b[0], a[1] if a[0] == "err" else b[1])
    if a[0] == "err":
        assert a[1] == b[1], what
        return
    fa, fb = a[1], b[1]
    assert fa.keys() == fb.keys(), what
    for k, x in fa.items():
        y = fb[k]
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), (what, k)
        else:
            assert x == y, (what, k)


def _streamed(path, batch_bytes) -> bool:
    cols = K._Cols()
    try:
        top = K._stream_decode(Path(path), None, batch_bytes, cols, None)
        K._build(cols, top, [], "x", None)
        return True
    except (K._Fallback, InputError):
        return False


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_stream_equals_whole_file_on_real_traces(path):
    whole = _result(path, 0)
    assert whole[0] == "ok"
    for bb in (1, 4096, K.STREAM_BATCH_BYTES):
        _assert_same(_result(path, bb), whole, (path.name, bb))
    assert _streamed(path, 4096), "a real trace must not need the whole-file fallback"


def test_stream_equals_whole_file_on_hostile_mutants(tmp_path):
    n_streamed = 0
    for seed in range(250):
        raw, name = mutate_kineto(random.Random(seed))
        p = tmp_path / f"{seed}_{name}"
        p.write_bytes(raw)
        whole = _result(p, 0)
        for bb in (1, 256):
            _assert_same(_result(p, bb), whole, (seed, bb))
        n_streamed += _streamed(p, 1)
    assert n_streamed > 50  # the mutants exercise the streaming path, not only the fallback


def _ev(i, name="k"):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": i * 10, "dur": 5}


def test_cut_candidates_inside_strings_are_rejected(tmp_path):
    tricky = 'a"}, {"x": 1}, {"y'          # JSON-escaped it still contains `}, {` unescaped
    evs = [_ev(i, tricky if i % 3 == 0 else "k") for i in range(300)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": evs, "deviceProperties": [{"id": 0, "name": "G]P}U"}],
                             "schemaVersion": 1}))
    whole = _result(p, 0)
    for bb in (1, 50, 700):
        _assert_same(_result(p, bb), whole, bb)
        assert _streamed(p, bb)
    assert whole[1]["strings"].count(tricky) == 1


def test_top_level_keys_before_and_after_the_array_are_read(tmp_path):
    body = ",".join(json.dumps(_ev(i)) for i in range(50))
    dev = '[{"id": 0, "name": "NVIDIA H100", "numSms": 132}]'
    dist = ('{"backend": "nccl", "rank": 3, "world_size": 8, "pg_count": 1, '
            '"pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": 8, "ranks": [0, 1, 2, 3, 4, 5, 6, 7]}]}')
    for text in (f'{{"deviceProperties": {dev}, "distributedInfo": {dist}, "traceEvents": [{body}], "schemaVersion": 1}}',
                 f'{{"schemaVersion": 1, "traceEvents": [{body}], "deviceProperties": {dev}, "distributedInfo": {dist}}}'):
        p = tmp_path / "t.json"
        p.write_text(text)
        assert _streamed(p, 100)
        tr = K.load(p, batch_bytes=100)
        assert tr.meta["devices"][0]["name"] == "NVIDIA H100" and tr.meta["devices"][0]["sm_count"] == 132
        d = tr.meta["distributed"]
        assert (d["rank"], d["world_size"], d["backend"]) == (3, 8, "nccl")
        assert d["pg_config"][0]["ranks"] == list(range(8))
        _assert_same(_result(p, 100), _result(p, 0), text[:20])


def test_gzip_stream_and_caps(tmp_path):
    evs = [_ev(i) for i in range(2000)]
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(json.dumps({"traceEvents": evs}).encode()))
    assert _streamed(p, 1000)
    _assert_same(_result(p, 1000), _result(p, 0), "gz")
    with pytest.raises(InputError, match="decompresses to more than"):
        K.load(p, max_decompressed=10_000, batch_bytes=1000)
    p.write_bytes(p.read_bytes()[:-40])
    with pytest.raises(InputError, match="truncated gzip"):
        K.load(p, batch_bytes=1000)


def test_pathological_inputs_fall_back_in_bounded_time(tmp_path):
    # one 3 MB string full of cut candidates, and a long run without any candidate
    evs = [_ev(0, '}, {' * 800_000), _ev(1)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": evs}))
    t0 = time.process_time()
    tr = K.load(p, batch_bytes=1000)
    assert time.process_time() - t0 < 20   # bounded tries per batch: never one decode per candidate
    assert len(tr.spans) == 2
    _assert_same(_result(p, 1000), _result(p, 0), "pathological")


def test_progress_reports_bytes_and_events(tmp_path):
    # the loader tells a Progress the file position and the events decoded (plain: bytes read;
    # gzip: compressed bytes consumed, said on the line); without one it writes nothing anywhere
    from inferscope.util.progress import Progress
    evs = [_ev(i) for i in range(3000)]
    raw = json.dumps({"traceEvents": evs}).encode()
    for name, data, note in (("t.json", raw, ""), ("t.json.gz", gzip.compress(raw), " compressed")):
        p = tmp_path / name
        p.write_bytes(data)
        buf = io.StringIO()
        buf.isatty = lambda: True
        prog = Progress(buf, name, after_s=0.0, every_s=0.0)
        K.load(p, batch_bytes=4096, progress=prog)
        prog.done()
        out = buf.getvalue()
        size_mb = f"{len(data) / 1e6:,.0f} MB"
        assert f"reading {name}" in out and f"/ {size_mb}{note} (100 %), 3,000 events" in out, out[-400:]
        assert out.endswith("\n") and prog.drawn > 3


def test_unlisted_phase_or_category_decodes_with_plain_strings(tmp_path):
    """The streamed decode reads ph / cat as Literals of the usual values (shared strings) and ts as an
    int; a batch with any other value is decoded again with fewer constraints (plain str fields, float
    ts), as every later batch is: same Trace."""
    for odd in ({"cat": "my_custom_cat"}, {"ph": "XX"}, {"cat": "Kernel"}, {"cat": None}, {"cat": ""},
                {"ts": 2005.5}, {"ts": None}, {"ts": 2 ** 64}, {"ts": 1.0}, {"ts": 1.0, "cat": "odd"}):
        evs = [_ev(i) for i in range(200)] + [dict(_ev(200 + i), **odd) for i in range(3)] + \
            [dict(_ev(300 + i), cat="kernel") for i in range(100)]
        p = tmp_path / "t.json"
        p.write_text(json.dumps({"traceEvents": evs, "schemaVersion": 1}))
        whole = _result(p, 0)
        for bb in (1, 300, 4096, 1 << 20):
            _assert_same(_result(p, bb), whole, (odd, bb))
            assert _streamed(p, bb), (odd, bb)
