"""Structured mutators for the three input formats and a harness that runs each mutant
through the whole CLI (`inferscope analyze -o DIR --format md,json,csv,html,chrome -q`).

Used by tests/test_fuzz_structured.py (bounded, ~60 s, fixed seed) and bench/bench_fuzz.py
(>= 10,000 mutants).  Every mutant is analysed in a forked child of a parent that has already
imported InferScope (~10 ms instead of a 0.4 s interpreter start), with RLIMIT_AS set in the
child, a wall-clock timeout, and its peak RSS taken from wait4().  A mutant passes when:
  * exit 0 and report.json parses, its breakdown adds up to 100 % and every format was written, or
  * exit 2 with exactly one stderr line "inferscope: error: ..." (and not "out of memory");
anything else (exit 3, a traceback, a signal, a timeout, RSS over the limit) is a failure.
"""
from __future__ import annotations

import copy
import gzip
import io
import json
import os
import random
import resource
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

FORMATS = "md,json,csv,html,chrome"

# values that break assumptions: types, int64 edges, huge/negative/odd numbers, hostile text
VALUES = [None, -1, 0, 1, 2 ** 31, 2 ** 32, 2 ** 63 - 1, -2 ** 63, 2 ** 64, 10 ** 21, 1e300, -1e300, 1e-300, 0.5,
          "x", "", "1e400", "-5", "NaN", "<script>alert(1)</script>", "![x](http://h/k.png)", "\x1b[31m\x07\x00",
          "\u202eevil", "=cmd|' /C calc'!A0", [], {}, [[[[[]]]]], True, False, "stream 7", 3.9e15, 9.9e11, -0.0]


def _deep(n: int) -> str:
    """A marker replaced by n nested lists after json.dumps (which cannot encode them itself)."""
    return f"@@DEEP{n}@@"


def _dumps(obj) -> bytes:
    import re
    text = json.dumps(obj, allow_nan=True)
    text = re.sub(r'"@@DEEP(\d+)@@"', lambda m: "[" * int(m.group(1)) + "]" * int(m.group(1)), text)
    return text.encode("utf-8", "surrogatepass")


# ------------------------------------------------------------------------------ Kineto
def kineto_seed() -> dict:
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 400},
        {"ph": "X", "cat": "user_annotation", "name": "tokenize", "pid": 1, "tid": 1, "ts": 1, "dur": 20},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 30.5, "dur": 100.25,
         "args": {"External id": 3}},
        {"ph": "X", "cat": "python_function", "name": "model.py(12): forward", "pid": 1, "tid": 1, "ts": 25, "dur": 200},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 40, "dur": 5,
         "args": {"correlation": 7, "External id": 3}},
        {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": 50, "dur": 50,
         "args": {"correlation": 7, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 140, "dur": 5,
         "args": {"correlation": 8}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 150,
         "dur": 5, "args": {"correlation": 8, "device": 0, "stream": 7, "bytes": 1024}},
        {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 160, "dur": 2,
         "args": {"device": 0, "stream": 7, "bytes": 64}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 170, "dur": 80},
        {"ph": "X", "cat": "cuda_sync", "name": "Device Synchronize", "pid": 0, "tid": 7, "ts": 171, "dur": 78,
         "args": {"correlation": 9, "device": 0, "stream": -1}},
        {"ph": "s", "id": 7, "pid": 1, "tid": 1, "ts": 40, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 7, "pid": 0, "tid": 7, "ts": 50, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        {"ph": "s", "id": 3, "pid": 1, "tid": 1, "ts": 31, "cat": "fwdbwd", "name": "fwdbwd"},
        {"ph": "f", "id": 3, "pid": 1, "tid": 1, "ts": 120, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"},
        {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 60, "s": "t",
         "args": {"Total Allocated": 4096, "Device Type": 1, "Device Id": 0}},
        {"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": 61, "s": "t"},
        {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "python"}},
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "MainThread"}},
        {"name": "process_labels", "ph": "M", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
    ]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU", "totalGlobalMem": 1 << 34,
                                                      "computeMajor": 8, "computeMinor": 0, "numSms": 108}],
            "traceEvents": ev, "displayTimeUnit": "ms"}


_KEYS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args", "bp"]
_ARG_KEYS = ["correlation", "External id", "device", "stream", "bytes", "kind", "name", "Total Allocated",
             "Device Type", "Device Id", "labels"]
_CATS = ["kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cpu_op", "python_function",
         "user_annotation", "gpu_user_annotation", "ac2g", "fwdbwd", "cuda_sync", "Trace", "overhead", None, 5]


def _bytes_damage(b: bytes, rng: random.Random) -> bytes:
    b = bytearray(b)
    op = rng.randrange(5)
    if op == 0 and b:
        return bytes(b[: rng.randrange(len(b))])
    if op == 1 and b:
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if op == 2 and b:
        i = rng.randrange(len(b))
        del b[i: i + rng.randint(1, 64)]
        return bytes(b)
    if op == 3 and b:
        i = rng.randrange(len(b))
        return bytes(b[:i] + b[i: i + 64] + b[i:])
    return bytes(b) + bytes(rng.randrange(256) for _ in range(rng.randint(1, 32)))


def mutate_kineto(rng: random.Random) -> tuple[bytes, str]:
    """(file bytes, file name) of one mutant."""
    doc = copy.deepcopy(kineto_seed())
    ev = doc["traceEvents"]
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(12)
        e = rng.choice(ev) if ev else {}
        if op == 0:                                   # type swap / extreme value
            e[rng.choice(_KEYS)] = rng.choice(VALUES)
        elif op == 1:                                 # args value
            a = e["args"] = e["args"] if isinstance(e.get("args"), dict) else {}
            a[rng.choice(_ARG_KEYS)] = rng.choice(VALUES)
        elif op == 2 and e:                           # missing key
            e.pop(rng.choice(list(e)), None)
        elif op == 3:
            e["cat"] = rng.choice(_CATS)
        elif op == 4:
            e["ph"] = rng.choice(["X", "B", "E", "i", "I", "s", "f", "t", "M", "C", None, 1, ""])
        elif op == 5:                                 # deep nesting somewhere
            (e if rng.random() < 0.5 else doc)[rng.choice(["args", "zz", "deviceProperties"])] = _deep(rng.choice([50, 200, 2000]))
        elif op == 6:                                 # many copies of one event
            ev.extend(copy.deepcopy(e) for _ in range(rng.choice([10, 300, 3000])))
        elif op == 7:
            rng.shuffle(ev)
        elif op == 8:                                 # long names
            e["name"] = rng.choice(["x" * 100_000, "é" * 5000, "\ud800", "a\x00b"])
        elif op == 9:                                 # the whole top level
            doc[rng.choice(["traceEvents", "deviceProperties", "schemaVersion"])] = rng.choice(VALUES)
        elif op == 10:                                # huge times
            e[rng.choice(["ts", "dur"])] = rng.choice([2 ** 62, -2 ** 62, 1.7e15, 4.1e15, 1e12, -1, 1e-9])
        elif ev:                                      # drop events
            del ev[rng.randrange(len(ev)):]
    raw = _dumps(doc if rng.random() > 0.1 else doc.get("traceEvents"))
    r = rng.random()
    if r < 0.15:
        raw = _bytes_damage(raw, rng)
    elif r < 0.2:                                     # invalid UTF-8 / lone surrogate escape / BOM
        i = rng.randrange(len(raw))
        raw = raw[:i] + rng.choice([b"\xff", b"\xc3", b"\\ud83d", b"\xef\xbb\xbf"]) + raw[i:]
    if rng.random() < 0.3:                            # gzip, sometimes damaged or a bomb
        g = rng.random()
        if g < 0.1:
            raw = gzip.compress(raw[:-2] + b" " * (80 << 20) + raw[-2:], 1, mtime=0)   # 80 MB of spaces: over the cap
        else:
            raw = gzip.compress(raw, mtime=0)
            if g < 0.4:
                raw = _bytes_damage(raw, rng)
            elif g < 0.5:
                raw = raw + gzip.compress(b"garbage", mtime=0)
        return raw, "t.json.gz"
    return raw, "t.json"


# ------------------------------------------------------------------------------ nsys
_NSYS_BASE: dict = {}


def _nsys_base(workdir: Path) -> Path:
    p = _NSYS_BASE.get(str(workdir))
    if p is None:
        from nsys_factory import reference_export
        p = workdir / "nsys_base.sqlite"
        reference_export().write(p)
        _NSYS_BASE[str(workdir)] = p
    return p


_SQL_VALUES = ["'abc'", "''", "1e300", "-1e300", "9223372036854775807", "-9223372036854775808", "-1", "-5",
               "4294967296", "500000000", "NULL", "x'00ff'", "0.5", "2305843009213693952", "'12'"]


def mutate_nsys(rng: random.Random, workdir: Path) -> tuple[bytes, str]:
    base = _nsys_base(workdir)
    tmp = workdir / f"nsys_mut_{os.getpid()}.sqlite"
    shutil.copy(base, tmp)
    con = sqlite3.connect(tmp)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for _ in range(rng.randint(1, 5)):
        t = rng.choice(tables)
        cols = [r[1] for r in con.execute(f"PRAGMA table_info([{t}])")]
        op = rng.randrange(10)
        try:
            if op <= 3 and cols:                      # value damage (type, range)
                c = rng.choice(cols)
                where = "" if rng.random() < 0.3 else f" WHERE rowid = (SELECT min(rowid) FROM [{t}])"
                con.execute(f"UPDATE [{t}] SET [{c}] = {rng.choice(_SQL_VALUES)}{where}")
            elif op == 4:                             # table gone
                con.execute(f"DROP TABLE [{t}]")
                tables.remove(t)
            elif op == 5:                             # table replaced by a view (plain / recursive CTE)
                con.execute(f"ALTER TABLE [{t}] RENAME TO [{t}_raw]")
                if rng.random() < 0.5:
                    con.execute(f"CREATE VIEW [{t}] AS SELECT * FROM [{t}_raw]")
                else:
                    con.execute(f"CREATE VIEW [{t}] AS WITH c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
                                f"SELECT [{t}_raw].* FROM [{t}_raw], c")
                tables.remove(t)
            elif op == 6:                             # rows multiplied
                con.execute(f"INSERT INTO [{t}] SELECT * FROM [{t}]")
            elif op == 7:                             # rows deleted
                con.execute(f"DELETE FROM [{t}] WHERE rowid % 2 = 0")
            elif op == 8:                             # enum with a huge id
                con.execute("CREATE TABLE IF NOT EXISTS ENUM_CUDA_MEM_KIND (id INTEGER, name TEXT, label TEXT)")
                con.execute(f"INSERT INTO ENUM_CUDA_MEM_KIND VALUES ({rng.choice(['500000000', '-7', '9223372036854775807', quote_s()])}, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'x')")
            else:                                     # a column of the wrong affinity
                con.execute(f"ALTER TABLE [{t}] ADD COLUMN [extra{rng.randrange(100)}] TEXT")
        except sqlite3.Error:
            pass
    con.commit()
    con.close()
    raw = tmp.read_bytes()
    tmp.unlink()
    if rng.random() < 0.15:
        raw = _bytes_damage(raw, rng) if rng.random() < 0.5 else raw[: rng.randrange(16, len(raw))]
    return raw, "t.sqlite"


def quote_s() -> str:
    return "'id'"


# ------------------------------------------------------------------------------ .iscope
_ISCOPE_BASE: dict = {}


def _iscope_members() -> dict:
    if not _ISCOPE_BASE:
        from helpers import Synth
        from inferscope.trace import SpanKind, native
        t = Synth()
        t.span(SpanKind.STEP, "ProfilerStep#1", 0, 300)
        t.span(SpanKind.ANNOTATION, "tokenize", 0, 40)
        t.span(SpanKind.CPU_OP, "aten::mm", 50, 150)
        t.span(SpanKind.PYTHON, "forward", 55, 140)
        t.launch(60, 65, 70, 120)
        t.copy(160, 170, 175, 190)
        t.span(SpanKind.RUNTIME, "cudaDeviceSynchronize", 200, 280)
        t.span(SpanKind.CPU_SAMPLE, "tokenization", 0, 40)
        tr = t.done()
        tmp = Path(tempfile.mkstemp(suffix=".iscope")[1])
        native.save(tr, tmp)
        with zipfile.ZipFile(tmp) as z:
            _ISCOPE_BASE.update({n: z.read(n) for n in z.namelist()})
        tmp.unlink()
    return dict(_ISCOPE_BASE)


def _npy(a) -> bytes:
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def mutate_iscope(rng: random.Random) -> tuple[bytes, str]:
    m = _iscope_members()
    deflate: set = set()
    encrypt = False
    for _ in range(rng.randint(1, 4)):
        npys = sorted(k for k in m if k.endswith(".npy"))
        k = rng.choice(npys) if npys else None
        op = rng.randrange(12)
        try:
            a = np.load(io.BytesIO(m[k])) if k else None
        except Exception:
            a = None
        if op <= 2 and a is not None and len(a):      # out-of-range / extreme values
            a = a.copy()
            i = rng.randrange(len(a))
            info = np.iinfo(a.dtype) if a.dtype.kind in "iu" else None
            v = rng.choice([-1, -2, 10 ** 6, 2 ** 30] + ([info.max, info.min] if info else [1e300, float("nan")]))
            try:
                a[i] = v
            except (OverflowError, ValueError):
                pass
            m[k] = _npy(a)
        elif op == 3 and a is not None:               # permutation: unsorted / cycles
            m[k] = _npy(a[np.random.default_rng(rng.randrange(1 << 30)).permutation(len(a))])
        elif op == 4 and a is not None:               # wrong dtype / 2-D / object
            m[k] = _npy(rng.choice([a.astype(np.float64), np.stack([a, a]), np.array(["x"] * len(a))]))
        elif op == 5 and k:                           # damaged npy bytes
            m[k] = _bytes_damage(m[k], rng)
        elif op == 6 and k:                           # member missing
            del m[k]
        elif op == 7:                                 # header damage
            try:
                h = json.loads(m["inferscope.json"])
            except Exception:
                h = {}
            if not isinstance(h, dict):
                h = {}
            key = rng.choice(["format", "version", "meta", "counts", "meta."])
            if key == "meta.":                        # wrong types inside meta
                meta = h["meta"] = h["meta"] if isinstance(h.get("meta"), dict) else {}
                sub = rng.choice(["collection", "devices", "warnings", "tool_versions", "source_file", "session"])
                meta[sub] = rng.choice(VALUES + [{"cpu_sampling_hz_steady": rng.choice(VALUES),
                                                  "duration_ms": rng.choice(VALUES)}, [rng.choice(VALUES)]])
            else:
                h[key] = rng.choice(VALUES + [_deep(3000)])
            m["inferscope.json"] = _dumps(h) if rng.random() < 0.8 else rng.choice([b"[]", b"1", b"\xff"])
        elif op == 8:                                 # strings damaged
            m["strings.bin"] = _bytes_damage(m.get("strings.bin", b""), rng)
        elif op == 9 and k:                           # deflate bomb
            m[k] = b"\0" * (rng.choice([1, 200]) << 20)
            deflate.add(k)
        elif op == 10:
            encrypt = True
        elif op == 11:                                # parents pointing forward / at themselves
            par = np.load(io.BytesIO(_ISCOPE_BASE["spans.parent.npy"]))
            m["spans.parent.npy"] = _npy(np.arange(len(par), dtype=np.int32)[::-1].copy())
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for k, v in m.items():
            zi = zipfile.ZipInfo(k)
            zi.compress_type = zipfile.ZIP_DEFLATED if k in deflate else zipfile.ZIP_STORED
            z.writestr(zi, v)
    raw = buf.getvalue()
    if encrypt:
        b = bytearray(raw)
        i = b.find(b"PK\x01\x02")
        if i >= 0:
            b[i + 8] |= 1
        raw = bytes(b)
    if rng.random() < 0.1:
        raw = _bytes_damage(raw, rng)
    return raw, "t.iscope"


# ------------------------------------------------------------------------------ harness
@dataclass
class Outcome:
    fmt: str
    seed: int
    rc: int | None
    verdict: str            # ok0 | ok2 | FAIL:<why>
    seconds: float
    maxrss_mb: float
    stderr: str = ""


@dataclass
class Tally:
    n: int = 0
    by_rc: dict = field(default_factory=dict)
    failures: list = field(default_factory=list)
    max_rss_mb: float = 0.0
    max_seconds: float = 0.0
    per_format: dict = field(default_factory=dict)

    def add(self, o: Outcome) -> None:
        self.n += 1
        self.by_rc[o.rc] = self.by_rc.get(o.rc, 0) + 1
        f = self.per_format.setdefault(o.fmt, {"n": 0, "exit0": 0, "exit2": 0, "fail": 0})
        f["n"] += 1
        if o.verdict == "ok0":
            f["exit0"] += 1
        elif o.verdict == "ok2":
            f["exit2"] += 1
        else:
            f["fail"] += 1
            self.failures.append(o)
        self.max_rss_mb = max(self.max_rss_mb, o.maxrss_mb)
        self.max_seconds = max(self.max_seconds, o.seconds)


def _child(path: Path, out: Path, err_path: Path, as_limit: int) -> None:
    try:
        resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))
        fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 2)
        nul = os.open(os.devnull, os.O_WRONLY)
        os.dup2(nul, 1)
        # under pytest sys.stderr/stdout are capture objects, not fds 1/2: rebind them
        sys.stderr = open(2, "w", closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from inferscope.cli import main
        rc = main(["analyze", str(path), "-o", str(out), "--format", FORMATS, "-q"])
        sys.stderr.flush()
        os._exit(rc)
    except SystemExit as e:
        os._exit(e.code if isinstance(e.code, int) else 1)
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(99)


def _judge(rc, err: str, out: Path) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if rc == 2:
        if len(lines) != 1 or not lines[0].startswith("inferscope: error:"):
            return "FAIL:exit2-not-one-line"
        if "out of memory" in lines[0]:
            return "FAIL:out-of-memory"
        return "ok2"
    if rc == 0:
        if "Traceback" in err:
            return "FAIL:traceback"
        try:
            rep = json.loads((out / "report.json").read_text())
        except (OSError, ValueError):
            return "FAIL:no-report-json"
        if rep.get("e2e_ms"):
            tot = sum(b["pct"] for b in rep["breakdown"])
            if abs(tot - 100.0) > 0.05:
                return f"FAIL:breakdown-sums-{tot:.3f}"
        for name in ("report.md", "report.html", "timeline.json", "tables/breakdown.csv"):
            if not (out / name).is_file():
                return f"FAIL:missing-{name}"
        return "ok0"
    return f"FAIL:exit-{rc}"


def run_mutant(raw: bytes, name: str, fmt: str, seed: int, workdir: Path, timeout_s: float = 20.0,
               as_limit: int = 6 << 30) -> Outcome:
    d = Path(tempfile.mkdtemp(prefix="m", dir=workdir))
    try:
        path = d / name
        path.write_bytes(raw)
        err_path = d / "stderr"
        out = d / "out"
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(path, out, err_path, as_limit)
        rc = None
        ru = None
        while True:
            wpid, status, ru = os.wait4(pid, os.WNOHANG)
            if wpid == pid:
                rc = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() - t0 > timeout_s:
                os.kill(pid, signal.SIGKILL)
                _, status, ru = os.wait4(pid, 0)
                rc = None
                break
            time.sleep(0.005)
        secs = time.monotonic() - t0
        try:
            err = err_path.read_text(errors="replace")
        except OSError:
            err = ""
        rss = ru.ru_maxrss / 1024.0 if ru is not None else 0.0
        verdict = "FAIL:timeout" if rc is None else _judge(rc, err, out)
        if rc == 0 and path.read_bytes() != raw:
            verdict = "FAIL:input-modified"
        return Outcome(fmt, seed, rc, verdict, secs, rss, err[-600:])
    finally:
        shutil.rmtree(d, ignore_errors=True)


def make_mutant(fmt: str, seed: int, workdir: Path) -> tuple[bytes, str]:
    rng = random.Random(f"{fmt}:{seed}")
    if fmt == "kineto":
        return mutate_kineto(rng)
    if fmt == "nsys":
        return mutate_nsys(rng, workdir)
    return mutate_iscope(rng)


def campaign(n_per_format: int, workdir: Path, first_seed: int = 0, formats=("kineto", "nsys", "iscope"),
             timeout_s: float = 20.0, rss_limit_mb: float = 1536.0, time_budget_s: float | None = None,
             progress=None) -> Tally:
    """Run n mutants per format (interleaved); stop early when time_budget_s is spent."""
    import inferscope.cli  # noqa: F401  (import once in the parent: children fork with it)
    import inferscope.analyze.pipeline  # noqa: F401
    import inferscope.report.html, inferscope.report.chrome, inferscope.report.markdown  # noqa: F401,E401
    import inferscope.report.csv_tables, inferscope.report.json_report, inferscope.ingest.nsys  # noqa: F401,E401
    import inferscope.ingest.kineto, inferscope.analyze.nvtx_attribution  # noqa: F401,E401
    import inferscope.analyze.per_pid  # noqa: F401
    import inferscope.analyze.views  # noqa: F401
    import inferscope.analyze.nsys_extras  # noqa: F401,F811
    tally = Tally()
    t0 = time.monotonic()
    for i in range(n_per_format):
        for fmt in formats:
            seed = first_seed + i
            raw, name = make_mutant(fmt, seed, workdir)
            o = run_mutant(raw, name, fmt, seed, workdir, timeout_s)
            if o.verdict.startswith("ok") and o.maxrss_mb > rss_limit_mb and len(raw) < 10 << 20:
                o.verdict = f"FAIL:rss-{o.maxrss_mb:.0f}MB"
            tally.add(o)
            if progress:
                progress(tally, o)
        if time_budget_s is not None and time.monotonic() - t0 > time_budget_s:
            break
    return tally
