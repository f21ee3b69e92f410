"""Mutation fuzzing of every importer: any byte-level damage gives a Trace or an InputError,
never another exception.  Fixed seeds keep it reproducible; the budget keeps it fast."""
import gzip
import json
import random

import pytest

from conftest import shared_path
from inferscope.errors import InputError
from inferscope.ingest import load_trace
from inferscope.trace import native

from helpers import Synth
from inferscope.trace import SpanKind


def mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    op = rng.randrange(5)
    if op == 0 and b:                        # truncate
        return bytes(b[: rng.randrange(len(b))])
    if op == 1 and b:                        # flip bytes
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if op == 2 and b:                        # delete a chunk
        i = rng.randrange(len(b))
        del b[i: i + rng.randint(1, 64)]
        return bytes(b)
    if op == 3 and b:                        # duplicate a chunk
        i = rng.randrange(len(b))
        return bytes(b[:i] + b[i: i + 64] + b[i:])
    return bytes(b) + bytes(rng.randrange(256) for _ in range(rng.randint(1, 32)))


def check(path):
    try:
        tr = load_trace(path)
    except InputError as e:
        assert "\n" not in str(e)
        return "error"
    assert (tr.spans.end_ns >= tr.spans.start_ns).all()
    return "ok"


def small_kineto_json() -> bytes:
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0.5, "dur": 100.25},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
           "args": {"correlation": 7, "External id": 3}},
          {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 50,
           "args": {"correlation": 7, "device": 0, "stream": 7}},
          {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 80,
           "dur": 5, "args": {"correlation": 8, "device": 0, "stream": 7, "bytes": 1024}},
          {"ph": "s", "id": 7, "pid": 1, "tid": 1, "ts": 10, "cat": "ac2g", "name": "ac2g"},
          {"ph": "f", "id": 7, "pid": 0, "tid": 7, "ts": 20, "cat": "ac2g", "name": "ac2g", "bp": "e"},
          {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "python"}}]
    return json.dumps({"traceEvents": ev, "deviceProperties": [{"id": 0, "name": "GPU"}]}).encode()


@pytest.mark.parametrize("seed", range(4))
def test_fuzz_kineto(tmp_path, seed):
    rng = random.Random(seed)
    base = small_kineto_json()
    outcomes = set()
    for i in range(60):
        data = mutate(base, rng)
        if i % 3 == 0:
            data = gzip.compress(data) if rng.random() < 0.5 else mutate(gzip.compress(base), rng)
        p = tmp_path / f"f{i}.json"
        p.write_bytes(data)
        outcomes.add(check(p))
    assert "error" in outcomes   # the fuzzer did reach the error paths


def test_fuzz_native(tmp_path):
    t = Synth()
    t.span(SpanKind.CPU_OP, "op", 0, 10)
    t.launch(1, 2, 3, 9)
    p = tmp_path / "t.iscope"
    native.save(t.done(), p)
    base = p.read_bytes()
    rng = random.Random(1)
    for i in range(80):
        q = tmp_path / f"n{i}.iscope"
        q.write_bytes(mutate(base, rng))
        check(q)


def test_fuzz_nsys_real_export(tmp_path):
    base = shared_path("nsys", "p4arth_report1.sqlite").read_bytes()
    rng = random.Random(2)
    for i in range(25):
        q = tmp_path / f"s{i}.sqlite"
        b = bytearray(base)
        if i % 2:
            b = b[: rng.randrange(16, len(b))]       # truncated export
        else:
            for _ in range(200):                     # scattered page damage
                b[rng.randrange(100, len(b))] = rng.randrange(256)
        q.write_bytes(bytes(b))
        check(q)


def test_analyze_never_imports_torch(tmp_path):
    import subprocess
    import sys
    p = tmp_path / "t.json"
    p.write_bytes(small_kineto_json())
    code = ("import sys; from inferscope.cli import main; rc = main(['analyze', %r, '-o', %r, '-q', '--format', 'md,json,csv,html,chrome']); "
            "assert rc == 0; print('torch' in sys.modules)") % (str(p), str(tmp_path / "o"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


@pytest.mark.parametrize("name", ["hta_cuda_event_sync_a100", "hta_triton_example_a100"])
def test_structural_fuzz_kineto_through_every_renderer(tmp_path, name):
    """Wrong types, huge and negative times, odd categories in a real trace: the whole pipeline
    either reports or refuses with InputError (found: int64 overflow on 1e300 ts, huge pids)."""
    import copy
    from inferscope.analyze.pipeline import analyze
    from inferscope.report import get_renderer
    doc = json.loads(gzip.decompress(shared_path("kineto", f"{name}.json.gz").read_bytes()))
    vals = [None, -1, 0, 2**63, -2**63, 2**70, 1e300, -1e300, 1e-4, "x", "", "<script>", [], {}, True, 3.9e15, 9.9e11]
    cats = ["kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cpu_op", "python_function",
            "user_annotation", "ac2g", "cuda_sync", "Trace", None, 5]
    for seed in range(40):
        rng = random.Random(seed)
        dd = copy.deepcopy(doc)
        ev = dd["traceEvents"]
        for _ in range(rng.randint(1, 8)):
            e = rng.choice(ev)
            k = rng.choice(["ts", "dur", "pid", "tid", "name", "cat", "ph", "args"])
            if k == "cat":
                e[k] = rng.choice(cats)
            elif k == "args":
                a = e["args"] = e["args"] if isinstance(e.get("args"), dict) else {}
                a[rng.choice(["correlation", "External id", "device", "stream", "bytes"])] = rng.choice(vals)
            elif k == "ph":
                e[k] = rng.choice(["X", "B", "i", "s", "f", "M", None, 1])
            else:
                e[k] = rng.choice(vals)
        p = tmp_path / f"x{seed}.json"
        p.write_text(json.dumps(dd))
        try:
            tr = load_trace(p)
        except InputError:
            continue
        res = analyze(tr)
        json.dumps(res, allow_nan=False)
        for fmt in ("md", "json", "html", "chrome"):
            from helpers import as_report
            get_renderer(fmt)(as_report(res, tr, [fmt]), tr, tmp_path / f"o{seed}.{fmt}")
