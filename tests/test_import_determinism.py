"""Product rule: the same input gives a byte-identical Trace whatever the interpreter's hash seed.

Each real capture (../shared/traces, or the vendored copies) is loaded in two subprocesses with
different PYTHONHASHSEED values; every column of spans/tracks/flows/counters, the string table
and meta must match.  A name interned in set (hash) order shows up here as a different string
table and different name/detail ids.  Small captures only, all loaded by one subprocess per seed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, kineto_traces, nsys_traces

SMALL = 1 << 20            # bytes on disk: keeps the two loads well under a few seconds
SEEDS = ("1", "2")

CAPTURES = [("nsys", p) for p in nsys_traces() if p.stat().st_size <= SMALL] + \
           [("kineto", p) for p in kineto_traces() if p.stat().st_size <= SMALL]

_DUMP = r"""
import hashlib, json, sys
from inferscope.ingest import kineto, nsys
out = {}
for arg in sys.argv[1:]:
    kind, path = arg.split(":", 1)
    t = (nsys if kind == "nsys" else kineto).load(path)
    d = {}
    for tab in ("spans", "tracks", "flows", "counters"):
        for k, a in getattr(t, tab).columns().items():
            d[f"{tab}.{k}"] = f"{a.dtype} {len(a)} " + hashlib.sha256(a.tobytes()).hexdigest()
    d["strings"] = t.strings.as_list()
    d["meta"] = json.dumps(t.meta, default=repr)
    out[arg] = d
json.dump(out, sys.stdout)
"""


@pytest.fixture(scope="module")
def dumps():
    if not CAPTURES:
        pytest.skip("no real captures available (set INFERSCOPE_SHARED_TRACES or provide ../shared/traces)")
    args = [f"{kind}:{p}" for kind, p in CAPTURES]
    res = {}
    for seed in SEEDS:
        pp = os.pathsep.join(x for x in (str(REPO / "src"), os.environ.get("PYTHONPATH")) if x)
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": pp}
        r = subprocess.run([sys.executable, "-c", _DUMP, *args], capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode == 0, r.stderr[-4000:]
        res[seed] = json.loads(r.stdout)
    return res


@pytest.mark.parametrize("kind,path", CAPTURES, ids=[p.name for _, p in CAPTURES])
def test_import_is_hash_seed_independent(dumps, kind, path):
    key = f"{kind}:{path}"
    a, b = (dumps[s][key] for s in SEEDS)
    assert a.keys() == b.keys()
    diff = [k for k in a if a[k] != b[k]]
    assert not diff, f"{path.name}: differs between PYTHONHASHSEED={SEEDS[0]} and {SEEDS[1]} in {diff}"
