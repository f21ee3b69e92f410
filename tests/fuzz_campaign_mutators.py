"""Structure-aware mutators for every input `inferscope analyze` reads (issue 44), used by
bench/bench_fuzz_campaign.py and tests/test_fuzz_campaign.py.

Kineto JSON / .json.gz, nsys SQLite and .iscope reuse tests/fuzz_mutators.py (type swaps, extreme values,
deep nesting, copies, byte damage) and add truncation at every section boundary (a JSON token boundary,
an SQLite page, a zip member).  New here: Nsight Compute CSV (raw and details pages, alone or joined with
``--ncu``), a live .iscope with its ``facts.msgpack`` member (analysed with ``--replay``) and its meta
sections, ``--phase-map`` JSON and ``.inferscope.yaml`` (read from the working directory); ``--model-config`` and
``--cublas-log`` files in fuzz_campaign_options.py.

``make(kind, seed, workdir)`` -> ``Mutant``: the files to write into an empty folder, the arguments after
``analyze`` (paths relative to that folder, which is the command's working directory) and the main input's
size.  Deterministic: the same (kind, seed) gives the same bytes.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import random
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import fuzz_mutators as fm

HERE = Path(__file__).resolve().parent
NCU_DIR = HERE / "data" / "ncu"
LIVE_ISCOPE = HERE / "data" / "fuzz" / "live_facts.iscope"

KINDS = ("kineto", "kineto_gz", "nsys", "ncu_raw", "ncu_details", "iscope", "iscope_facts", "phase_map", "yaml",
         "model_config", "cublas_log")

# numbers and texts ncu/yaml/json readers trip on
NUM_TEXT = ["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400", "1e308", "-0", "", "n/a", "x", "1,000,000,000,000,000,000",
            "18446744073709551616", "-9223372036854775809", "0x10", "1_000", "(1, 2, 3)", "\"", "\x00", "é" * 50, "1e-400"]


@dataclass
class Mutant:
    files: dict          # relative name -> bytes
    args: list           # after "analyze"; the -o/--format/-q the harness adds
    input_bytes: int     # size of the largest file (the < 10 MB memory rule)


def _one(name: str, raw: bytes, args=None) -> Mutant:
    return Mutant({name: raw}, [name] + list(args or []), len(raw))


# ------------------------------------------------------------------------------ cuts at section boundaries
def cut_json(raw: bytes, rng: random.Random) -> bytes:
    """Cut at a token boundary (after a bracket, brace, comma or colon), where a streaming reader switches state."""
    marks = [i for i in range(len(raw)) if raw[i] in b"{}[],:"]
    if not marks:
        return raw[: rng.randrange(len(raw) + 1)]
    i = rng.choice(marks)
    return raw[: i + rng.choice((0, 1))]


def cut_sqlite(raw: bytes, rng: random.Random) -> bytes:
    """Cut at a page boundary (the header's page size), or inside the 100-byte header."""
    page = int.from_bytes(raw[16:18], "big") if len(raw) > 18 else 4096
    page = 65536 if page == 1 else (page or 4096)
    n = len(raw) // page
    if n <= 1 or rng.random() < 0.15:
        return raw[: rng.randrange(0, min(len(raw), 100))]
    return raw[: page * rng.randrange(1, n)]


def cut_zip(raw: bytes, rng: random.Random) -> bytes:
    """Cut at a member boundary (a local header or the central directory) or inside the end record."""
    marks = [i for i in range(len(raw) - 3) if raw[i:i + 4] in (b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06")]
    if not marks:
        return raw[: rng.randrange(len(raw) + 1)]
    return raw[: rng.choice(marks) + rng.choice((0, 4, 30))]


# ------------------------------------------------------------------------------ Kineto / nsys / iscope
def kineto(rng: random.Random, gz: bool) -> Mutant:
    raw, _ = fm.mutate_kineto(rng)
    if raw[:2] == b"\x1f\x8b":                 # fuzz_mutators chose gzip itself: unwrap (it is ours to choose)
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            pass
    if rng.random() < 0.3:
        raw = cut_json(fm._dumps(fm.kineto_seed()) if rng.random() < 0.5 else raw, rng)
    if gz:
        raw = gzip.compress(raw, 1, mtime=0)
        if rng.random() < 0.15:
            raw = raw[: rng.randrange(10, max(11, len(raw)))]
        return _one("t.json.gz", raw)
    return _one("t.json", raw)


def nsys(rng: random.Random, workdir: Path) -> Mutant:
    raw, _ = fm.mutate_nsys(rng, workdir)
    if rng.random() < 0.2:
        raw = cut_sqlite(raw, rng)
    return _one("t.sqlite", raw)


def iscope(rng: random.Random) -> Mutant:
    raw, _ = fm.mutate_iscope(rng)
    if rng.random() < 0.2:
        raw = cut_zip(raw, rng)
    return _one("t.iscope", raw)


# ------------------------------------------------------------------------------ Nsight Compute CSV
def _ncu_rows(page: str) -> list[list[str]]:
    text = gzip.decompress((NCU_DIR / f"demo_hot10_{page}.csv.gz").read_bytes()).decode()
    return [r for r in csv.reader(io.StringIO(text))]


def _csv(rows: list[list[str]]) -> bytes:
    b = io.StringIO()
    csv.writer(b, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return b.getvalue().encode("utf-8", "surrogatepass")


def mutate_ncu_rows(rows: list[list[str]], rng: random.Random, page: str) -> list[list[str]]:
    rows = [list(r) for r in rows]
    first_data = 2 if page == "raw" else 1        # the raw page's second row holds the units
    hdr = rows[0]
    for _ in range(rng.randint(1, 5)):
        op = rng.randrange(11)
        r = rng.choice(rows[first_data:]) if len(rows) > first_data else rows[0]
        if op <= 2 and r:                                     # a value: NaN/inf/huge/text
            r[rng.randrange(len(r))] = rng.choice(NUM_TEXT)
        elif op == 3 and r:                                   # two fields swapped
            i, j = rng.randrange(len(r)), rng.randrange(len(r))
            r[i], r[j] = r[j], r[i]
        elif op == 4:                                         # header names swapped / duplicated / renamed
            i, j = rng.randrange(len(hdr)), rng.randrange(len(hdr))
            if rng.random() < 0.5:
                hdr[i], hdr[j] = hdr[j], hdr[i]
            else:
                hdr[i] = hdr[j] if rng.random() < 0.5 else rng.choice(["", "ID", "Metric Value", "x" * 5000])
        elif op == 5:                                         # a column gone from every row (ragged rows)
            c = rng.randrange(len(hdr))
            for row in rows if rng.random() < 0.5 else rows[: rng.randrange(1, len(rows) + 1)]:
                if c < len(row):
                    del row[c]
        elif op == 6 and len(rows) > first_data:              # huge count: a row many times
            rows[first_data:first_data] = [list(r) for _ in range(rng.choice([50, 2000, 30000]))]
        elif op == 7 and page == "raw" and len(rows) > 1:     # units row damaged
            u = rows[1]
            if u:
                u[rng.randrange(len(u))] = rng.choice(["Gbyte", "nsecond", "%", "cycle/usecond", "", "furlong", "1e9"])
        elif op == 8 and page == "details" and r and len(r) > 14:   # metric unit / name swapped
            r[13] = rng.choice(["Ghz", "byte", "%", "", "Tbyte/second", "x"])
            if rng.random() < 0.5:
                r[12], r[14] = r[14], r[12]
        elif op == 9 and len(rows) > first_data:              # rows deleted
            del rows[rng.randrange(first_data, len(rows)):]
        elif op == 10 and r:                                  # a long / hostile kernel name
            if len(r) > 4:
                r[4] = rng.choice(["k" * 200_000, "\u202e<script>", "a\x00b", "(" * 5000])
    return rows


def ncu(rng: random.Random, page: str) -> Mutant:
    rows = mutate_ncu_rows(_ncu_rows(page), rng, page)
    raw = _csv(rows)
    r = rng.random()
    if r < 0.2:                                               # cut at a row boundary (a launch, a metric row)
        nl = [i for i in range(len(raw)) if raw[i] == 10]
        raw = raw[: rng.choice(nl) + 1] if nl else raw
    elif r < 0.3:
        raw = fm._bytes_damage(raw, rng)
    elif r < 0.35:                                            # an ncu log line in front (a failed export)
        raw = b"==PROF== Connected to process 1\n==ERROR== something failed\n" + raw
    name = f"k_{page}.csv"
    if rng.random() < 0.3:
        raw, name = gzip.compress(raw, 1, mtime=0), name + ".gz"
    if rng.random() < 0.4:                                    # joined to a trace: analyze TRACE --ncu CSV
        trace = fm._dumps(fm.kineto_seed())
        return Mutant({"t.json": trace, name: raw}, ["t.json", "--ncu", name], len(raw))
    return _one(name, raw)


# ------------------------------------------------------------------------------ live .iscope: facts and meta
def _members(raw: bytes) -> dict:
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        return {n: z.read(n) for n in z.namelist()}


def _zip(m: dict) -> bytes:
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        for k, v in m.items():
            z.writestr(zipfile.ZipInfo(k), v)
    return b.getvalue()


def _paths(obj, prefix=(), out=None, limit=4000):
    """Every (path) into a decoded JSON/msgpack value, up to limit entries."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    out.append(prefix)
    if isinstance(obj, dict):
        for k, v in obj.items():
            _paths(v, prefix + (k,), out, limit)
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:40]):
            _paths(v, prefix + (i,), out, limit)
    return out


def _set(obj, path, value):
    if not path:
        return value
    cur = obj
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = value
    return obj


def _nested(depth: int):
    v: list = []
    for _ in range(depth):
        v = [v]
    return v


def _hostile_value(rng: random.Random, cur):
    op = rng.randrange(8)
    if op == 0:
        return rng.choice(fm.VALUES)
    if op == 1:
        return rng.choice([float("nan"), float("inf"), -float("inf")])
    if op == 2:                                               # wrong type for what it was
        return {"x": cur} if not isinstance(cur, dict) else [cur]
    if op == 3:                                               # huge count
        return [cur] * rng.choice([1000, 100_000]) if not isinstance(cur, (dict, list)) else [0] * 200_000
    if op == 4:
        return _nested(rng.choice([100, 1000, 5000]))
    if op == 5:
        return rng.choice([2 ** 63 - 1, -2 ** 63, 2 ** 64 - 1, 10 ** 30 if rng.random() < 0.5 else -1])
    if op == 6:
        return "s" * rng.choice([10, 100_000])
    return None


def mutate_facts(blob: bytes, rng: random.Random) -> bytes:
    import msgspec
    if rng.random() < 0.2:
        return fm._bytes_damage(blob, rng) if rng.random() < 0.6 else blob[: rng.randrange(len(blob) + 1)]
    d = msgspec.msgpack.decode(blob)
    paths = _paths(d)
    for _ in range(rng.randint(1, 3)):
        p = rng.choice(paths)
        try:
            cur = d
            for k in p:
                cur = cur[k]
            d = _set(d, p, _hostile_value(rng, cur))
        except (KeyError, IndexError, TypeError):
            pass
    try:
        return msgspec.msgpack.encode(d)
    except (OverflowError, TypeError, ValueError, RecursionError):
        return blob[: len(blob) // 2]


def mutate_meta(header: bytes, rng: random.Random) -> bytes:
    h = json.loads(header)
    paths = [p for p in _paths(h) if p[:1] == ("meta",)] or [()]
    for _ in range(rng.randint(1, 3)):
        p = rng.choice(paths)
        try:
            cur = h
            for k in p:
                cur = cur[k]
            h = _set(h, p, _hostile_value(rng, cur))
        except (KeyError, IndexError, TypeError):
            pass
    try:
        return json.dumps(h, allow_nan=True).encode()
    except (ValueError, RecursionError):
        return header[: len(header) // 2]


def iscope_facts(rng: random.Random) -> Mutant:
    m = _members(LIVE_ISCOPE.read_bytes())
    r = rng.random()
    if r < 0.45:
        m["facts.msgpack"] = mutate_facts(m["facts.msgpack"], rng)
    elif r < 0.8:
        m["inferscope.json"] = mutate_meta(m["inferscope.json"], rng)
    else:
        m["facts.msgpack"] = mutate_facts(m["facts.msgpack"], rng)
        m["inferscope.json"] = mutate_meta(m["inferscope.json"], rng)
    if rng.random() < 0.1:
        del m["facts.msgpack"]
    raw = _zip(m)
    if rng.random() < 0.15:
        raw = cut_zip(raw, rng)
    return _one("live.iscope", raw, ["--replay"] if rng.random() < 0.7 else [])


# ------------------------------------------------------------------------------ --phase-map JSON
def _phase_trace() -> bytes:
    doc = fm.kineto_seed()
    ev = doc["traceEvents"]
    for name, ts in (("prefill", 5), ("decode_step", 150), ("decode_step", 260)):
        ev.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 90})
    return fm._dumps(doc)


def phase_map(rng: random.Random) -> Mutant:
    pm: object = {"prefill": ["prefill"], "decode": ["decode_step", "decode"], "sampling": ["sample"]}
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(9)
        if op == 0:
            pm = rng.choice(fm.VALUES)
        elif op == 1 and isinstance(pm, dict):                # wrong type for a phase's list / a pattern
            pm[rng.choice(["prefill", "decode", "x"])] = rng.choice(fm.VALUES + [[1, 2], [None], ["ok", 3]])
        elif op == 2 and isinstance(pm, dict):                # huge count of phases / patterns
            n = rng.choice([127, 128, 129, 5000])
            pm = {f"p{i}": ["decode"] for i in range(n)} if rng.random() < 0.5 else {"decode": ["d"] * n}
        elif op == 3 and isinstance(pm, dict):                # long / regex-hostile / empty patterns
            pm["decode"] = [rng.choice(["x" * 256, "x" * 257, "(a+)+$", ".*" * 100, "", " ", "\\", "[", "\u202e",
                                        "decode|prefill", "a" * 255 + "!", "\x00"])]
        elif op == 4:
            pm = fm._deep(rng.choice([100, 5000, 200_000]))
        elif op == 5 and isinstance(pm, dict):                # odd keys
            pm[rng.choice(["", "x" * 10_000, "prefill ", "\ud800"])] = ["decode"]
        elif op == 6 and isinstance(pm, dict):                # nan / inf as values
            pm["decode"] = [float("nan")]
        elif op == 7 and isinstance(pm, dict):                # the same pattern in two phases
            pm["sampling"] = ["decode_step"]
        elif op == 8:
            pm = {"decode": ["decode_step"] * rng.choice([1, 64])}
    raw = fm._dumps(pm)
    r = rng.random()
    if r < 0.2:
        raw = cut_json(raw, rng)
    elif r < 0.28:
        raw = rng.choice([b"", b"\xff\xfe", b"\xef\xbb\xbf{}", raw + b"garbage", b"{" * 100_000])
    elif r < 0.32:
        raw = b" " * (2 << 20)                                # over the loader's size cap (the < 10 MB rule counts the trace)
    files = {"t.json": _phase_trace(), "pm.json": raw}
    return Mutant(files, ["t.json", "--phase-map", "pm.json"], len(files["t.json"]))


# ------------------------------------------------------------------------------ .inferscope.yaml
def _yaml_keys() -> list[str]:
    from inferscope.config import ENV
    return list(ENV)


YAML_VALUES = ["1", "0", "-1", "true", "no", "on", "~", "null", ".nan", ".inf", "-.inf", "1e400", "99999999999999999999999",
               "[1, 2]", "{a: 1}", "''", "\"\\x00\"", "!!binary aGVsbG8=", "2026-11-29", "0x1F", "0o17", "1_000",
               "!!python/object/apply:os.system ['true']", "&a [*a]", "|\n  multi\n  line", "debug", "html,md",
               "/nonexistent/dir/report.md", "x" * 10_000]


YAML_VALID = ["log_level: error", "sync_error_margin_us: 1000", "max_decompressed_mb: 64", "gpu_util_low_pct: 10",
              "report_format: md", "cpu_sampling_frequency_hz: 200"]


def inferscope_yaml(rng: random.Random) -> Mutant:
    keys = _yaml_keys()
    lines = [f"{rng.choice(keys + ['unknown_key', 'log_level', 'max_decompressed_mb'])}: {rng.choice(YAML_VALUES)}"
             for _ in range(rng.randint(1, 4))]
    valid = rng.random() < 0.4                                # a valid file, one key damaged or not (the accept path)
    if valid:
        lines = YAML_VALID[:]
        if rng.random() < 0.5:
            lines[rng.randrange(len(lines))] = f"{rng.choice(keys)}: {rng.choice(YAML_VALUES)}"
    text = "\n".join(lines) + "\n"
    op = 9 if valid else rng.randrange(10)
    if op == 0:                                               # billion laughs
        t = ["a: &a [x, x, x, x, x, x, x, x, x]"]
        for i in range(1, 10):
            t.append(f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 9) + "]")
        text = "\n".join(t) + "\nlog_level: *j\n"
    elif op == 1:
        text = "log_level: " + "[" * rng.choice([100, 5000, 100_000]) + "\n"
    elif op == 2:
        text = rng.choice(["", "---\n...\n", "- 1\n- 2\n", "just a string\n", "\t log_level: info\n", "a: 1\na: 2\n",
                           "--- {log_level: info}\n--- {log_level: debug}\n", "\xff\xfe", "log_level: info\x00\n"])
    elif op == 3:
        text = text[: rng.randrange(len(text) + 1)]
    elif op == 4:
        text = "".join(f"k{i}: {i}\n" for i in range(rng.choice([1000, 100_000])))
    raw = text.encode("utf-8", "surrogatepass")
    if op == 5:
        raw = fm._bytes_damage(raw, rng)
    trace = fm._dumps(fm.kineto_seed())
    return Mutant({"t.json": trace, ".inferscope.yaml": raw}, ["t.json"], len(trace))


def make(kind: str, seed: int, workdir: Path) -> Mutant:
    rng = random.Random(f"campaign:{kind}:{seed}")
    if kind in ("kineto", "kineto_gz"):
        return kineto(rng, kind == "kineto_gz")
    if kind == "nsys":
        return nsys(rng, workdir)
    if kind in ("ncu_raw", "ncu_details"):
        return ncu(rng, kind[4:])
    if kind == "iscope":
        return iscope(rng)
    if kind == "iscope_facts":
        return iscope_facts(rng)
    if kind == "phase_map":
        return phase_map(rng)
    if kind == "yaml":
        return inferscope_yaml(rng)
    if kind in ("model_config", "cublas_log"):           # issue 46's option files: fuzz_campaign_options.py
        import fuzz_campaign_options as co
        return co.model_config(rng, cut_json, Mutant) if kind == "model_config" else co.cublas_log(rng, Mutant)
    raise ValueError(kind)
