"""Linear-time readers on hostile input (issue 44): the streamed Kineto decode's key and cut scanners
find exactly what a whole-buffer search finds, examine a bounded number of bytes per input byte
(counted, not timed), and a crafted input that used to take 17-21 s completes."""
import gzip
import json
import random
import re
import time
from pathlib import Path

import pytest

import linear_inputs as L
from inferscope.errors import ConfigError
from inferscope.ingest import kineto as K
from inferscope.ingest.kineto.scan import CutFinder, KeyScan

_KEY_RE = re.compile(rb'"traceEvents"\s*:\s*\[')   # the definition the scanner must agree with
_CUT_AFTER = re.compile(rb"\s*,\s*\{")


def _stream(p: Path, batch_bytes: int = 1 << 20):
    """(streamed without the whole-file fallback, bytes the scanners examined)."""
    cols = K._Cols()
    try:
        K._stream_decode(p, None, batch_bytes, cols, None)
        return True, cols.scan_bytes
    except K._Fallback:
        return False, cols.scan_bytes


def _flat(tr):
    return (list(tr.strings), json.dumps(tr.meta, sort_keys=True, default=str),
            [(k, v.tobytes()) for part in (tr.spans, tr.tracks, tr.flows, tr.counters) for k, v in part.columns().items()])


_TOKENS = [b'"traceEvents"', b'"traceEvents', b'traceEvents"', b" ", b"\n", b":", b"[", b"x", b'"', b"\\",
           b'"traceEvents"traceEvents"']


def test_key_scan_agrees_with_a_whole_buffer_search_at_every_length():
    rng = random.Random(7)
    for trial in range(300):
        buf = bytearray(b"".join(rng.choice(_TOKENS) for _ in range(rng.randint(1, 60))))
        ks = KeyScan()
        n = 0
        while n < len(buf):
            n = min(len(buf), n + rng.randint(1, 9))   # the buffer grows in uneven steps
            want = _KEY_RE.search(buf, 0, n)
            got = ks.feed(buf, n)
            assert got == (want.span() if want else None), (trial, bytes(buf[:n]))
            if want:
                break


def _last_cut_ref(buf, hi, n):
    """The definition: the largest k < hi with buf[k] == '}' followed by ',' '{' (whitespace allowed) ending before n."""
    for k in range(hi - 1, -1, -1):
        if buf[k] == 0x7D:
            m = _CUT_AFTER.match(buf, k + 1, n)
            if m and m.end() < n:
                return k, m.end()
    return -1, -1


@pytest.mark.parametrize("probes", [1, 32])
def test_cut_finder_agrees_with_the_definition(monkeypatch, probes):
    import inferscope.ingest.kineto.scan as S
    monkeypatch.setattr(S, "CUT_PROBES", probes)     # 1: the regex pass serves almost every answer
    rng = random.Random(probes)
    toks = [b"}", b"{", b",", b" ", b"]", b"x", b"}, {", b"},{"]
    for trial in range(400):
        buf = bytearray(b"".join(rng.choice(toks) for _ in range(rng.randint(1, 50))))
        n = len(buf)
        cf = CutFinder(buf, n, keep=8)
        hi = n
        for _ in range(8):                            # latest first, as the tries of one batch ask
            want = _last_cut_ref(buf, hi, n)
            assert cf.last_before(hi) == want, (trial, bytes(buf), hi)
            if want[0] < 0:
                break
            hi = want[0]


@pytest.mark.parametrize("gz", [False, True], ids=["json", "gz"])   # gzip: inflated in pieces of 1 MB
@pytest.mark.parametrize("kind", sorted(L.KINETO))
def test_crafted_kineto_inputs_stream_with_linear_scans(tmp_path, kind, gz):
    counts = {}
    for mb in (4, 16):
        p = tmp_path / f"{kind}-{mb}.json{'.gz' if gz else ''}"
        raw = L.KINETO[kind](mb << 20)
        p.write_bytes(gzip.compress(raw, 1) if gz else raw)
        streamed, scanned = _stream(p)
        assert streamed, (kind, mb)                   # no fallback to the whole-file decode
        assert scanned <= 3 * len(raw), (kind, mb, scanned, len(raw))
        counts[mb] = scanned / len(raw)
        if mb == 4:                                   # the same Trace as the whole-file decode
            assert _flat(K.load(p)) == _flat(K.load(p, batch_bytes=0))
    # bytes examined per input byte do not grow with the size (a rescan per read would: x4 here)
    assert counts[16] <= counts[4] * 1.25 + 0.05, counts


def test_prefix_case_that_took_17_s_completes(tmp_path):
    # ~60 MB before "traceEvents": the old scan searched the whole buffer again at each 64 KiB read
    # (~945 searches, ~30 GB examined); now ~1.4 bytes per input byte
    p = tmp_path / "prefix.json"
    raw = L.kineto_prefix(60 << 20)
    p.write_bytes(raw)
    t0 = time.process_time()
    streamed, scanned = _stream(p)
    assert streamed and scanned <= 2 * len(raw), (scanned, len(raw))
    assert time.process_time() - t0 < 10      # generous: the old scan took 17-21 s on a 64 MB prefix
    assert len(K.load(p).spans) == 20


def _laughs(levels: int = 9) -> str:
    """A YAML list of 9**levels strings written in ~40 bytes per level (each level 9 aliases of the last)."""
    tags = "abcdefghijklmnop"
    items = ["&a [lol,lol,lol,lol,lol,lol,lol,lol,lol]"] + \
        [f"&{tags[i + 1]} [" + ",".join([f"*{tags[i]}"] * 9) + "]" for i in range(levels - 1)]
    return "[" + ", ".join(items) + "]"


@pytest.mark.parametrize("key", ["report_format", "enabled", "log_level", "metrics_port"])
def test_config_alias_bomb_is_refused_before_it_is_expanded(tmp_path, key):
    # before: the value went through str() (report_format, log_level, _bool) or repr() (the error message):
    # 9**9 strings, a hang and gigabytes from a 330-byte file
    from inferscope.config import load_config
    (tmp_path / ".inferscope.yaml").write_text(f"{key}: {_laughs()}\n")
    t0 = time.process_time()
    with pytest.raises(ConfigError, match=f"{key}: expected a single value, got a list"):
        load_config(cwd=tmp_path, env={})
    assert time.process_time() - t0 < 5
    (tmp_path / ".inferscope.yaml").write_text(f"{key}: {{a: 1}}\n")
    with pytest.raises(ConfigError, match="got a dict"):
        load_config(cwd=tmp_path, env={})


def test_phase_map_pattern_count_and_length_are_bounded(tmp_path):
    from inferscope import thresholds as T
    from inferscope.analyze.options import _load_phase_map
    from inferscope.analyze.phases import phase_matcher
    pm = tmp_path / "pm.json"
    at_cap = {"prefill": [f"p{i}" for i in range(T.PHASE_MAP_MAX_PATTERNS - 1)], "decode": ["d" * T.PHASE_MAP_MAX_PATTERN_CHARS]}
    pm.write_text(json.dumps(at_cap))
    got = _load_phase_map(str(pm))
    assert got == at_cap and phase_matcher(got)("x p7 y")[0] == "prefill"
    # one pattern more (it multiplies the work per name of the trace), or one character more: refused
    pm.write_text(json.dumps(dict(at_cap, sampling=["s"])))
    with pytest.raises(ConfigError, match=f"{T.PHASE_MAP_MAX_PATTERNS + 1} patterns, more than"):
        _load_phase_map(str(pm))
    pm.write_text(json.dumps(dict(at_cap, decode=["d" * (T.PHASE_MAP_MAX_PATTERN_CHARS + 1)])))
    with pytest.raises(ConfigError, match=f"a pattern of {T.PHASE_MAP_MAX_PATTERN_CHARS + 1} characters"):
        _load_phase_map(str(pm))


def test_distinct_event_tuples_are_not_copied_once_per_batch(tmp_path, monkeypatch):
    # every event a new (ph, cat, name, pid, tid) row: the rows table grew by one concatenation per batch
    # (the whole table copied ~ batches x rows / 2 times); now its room doubles
    import numpy as np
    n = 20_000
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": [dict(e, name=f"op{i}") for i, e in enumerate(L.events(n))]}))
    copied = [0]
    real = np.concatenate

    def counting(arrays, *a, **k):
        out = real(arrays, *a, **k)
        copied[0] += out.size
        return out
    monkeypatch.setattr(np, "concatenate", counting)
    tr = K.load(p, batch_bytes=4096)                  # ~500 batches
    monkeypatch.undo()
    assert len(tr.spans) == n and len(set(tr.strings)) > n
    assert copied[0] <= 40 * n, copied[0]             # was ~25M elements (5 columns x ~500 batches x n / 2)
    assert _flat(tr) == _flat(K.load(p, batch_bytes=0))
