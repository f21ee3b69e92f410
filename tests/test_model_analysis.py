"""Model analysis (issue 46 item 3): input shapes per op in ``top_ops``.

Each expectation is recounted straight from the raw Kineto JSON (``Input Dims`` of ``cpu_op`` events),
independently of InferScope's importer and span model."""
from __future__ import annotations

import collections
import gzip
import json
from pathlib import Path

from inferscope.analyze.op_shapes import shape_label
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.pipeline import analyze
from inferscope.ingest import load_trace

DATA = Path(__file__).parent / "data" / "traces" / "kineto"
MINITOY = DATA / "hta_amd_mi250_minitoy.json.gz"


def _events(path):
    return json.load(gzip.open(path))["traceEvents"]


def _raw_label(dims) -> str:
    """The label of one call, written out from the raw dims without the module's helper."""
    parts = ["[" + ",".join(map(str, d)) + "]" for d in dims]
    while parts and parts[-1] == "[]":
        parts.pop()
    return "x".join(parts)


def _recount_shapes(path) -> dict[str, str]:
    per = collections.defaultdict(collections.Counter)
    for e in _events(path):
        if e.get("cat") == "cpu_op" and e.get("ph") == "X" and "Input Dims" in (e.get("args") or {}):
            lab = _raw_label(e["args"]["Input Dims"])
            if lab:
                per[e["name"]][lab] += 1
    out = {}
    for name, c in per.items():
        top = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
        out[name] = "; ".join(f"{lab} (x{n})" for lab, n in top)
    return out


def test_top_ops_shapes_equal_a_recount_from_the_raw_json():
    expect = _recount_shapes(MINITOY)
    assert len(expect) > 10
    res = analyze(load_trace(MINITOY), AnalyzeOptions(window="all"))
    t = res["tables"]["top_ops"]
    assert t["columns"][-1] == "shapes"
    got = {r[0]: r[-1] for r in t["rows"]}
    for name, want in expect.items():
        assert got[name] == want, name
    # ops never recorded with shapes have an empty cell; the typed top-N rows carry the same label
    assert all(v == "" for k, v in got.items() if k not in expect)
    for op in res["culprits"]["ops"]:
        assert op["shapes"] == got[op["name"]]
    assert got["aten::copy_"] == "[5,128]x[5,128] (x2)"   # read off the file by hand


def test_shape_label_rules():
    assert shape_label(json.dumps({"dims": [[512], [141, 512], [512, 512], [], []]})) == "[512]x[141,512]x[512,512]"
    assert shape_label(json.dumps({"dims": [[1, 141, 512], [], [512]]})) == "[1,141,512]x[]x[512]"
    assert shape_label(json.dumps({"dims": [[], []]})) is None
    assert shape_label("not json") is None and shape_label(json.dumps([1, 2])) is None


def test_shapes_are_escaped_on_every_page(tmp_path):
    from inferscope.report import get_renderer
    tr = load_trace(MINITOY)
    res = analyze(tr, AnalyzeOptions(window="all"))
    get_renderer("md")(res, tr, tmp_path / "report.md")
    md = (tmp_path / "report.md").read_text()
    assert "\\[5,128\\]x\\[5,128\\] (x2)" in md        # Markdown: '[' escaped like any untrusted name
