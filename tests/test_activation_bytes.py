"""Activation bytes per module (issue 46, seed 003 "activation sizes"): the ``input_activation_bytes`` column of
``module_hotspots``.

A planted input: a small transformer-like stack built from a config with random weights, profiled on CPU with
torch.profiler(record_shapes=True, with_modules=True, with_stack=True: the ``nn.Module:`` spans).  Every layer's input is [batch, seq, hidden] float32 by
construction, the embedding's input the [batch, seq] int64 token ids and the LM head's input [batch, seq, hidden];
the MLP's inner Linear gets [batch, seq, intermediate].  The expectations are those products, not read from the trace.
"""
from __future__ import annotations

import json

import pytest

from inferscope.analyze.activations import first_tensor_bytes
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.pipeline import analyze
from inferscope.ingest import load_trace

torch = pytest.importorskip("torch")

CFG = {"vocab": 97, "hidden": 48, "intermediate": 80, "layers": 3, "batch": 2, "seq": 11}


def _model(cfg):
    nn = torch.nn

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.Linear(cfg["hidden"], cfg["intermediate"])
            self.down = nn.Linear(cfg["intermediate"], cfg["hidden"])

        def forward(self, x):
            return self.down(torch.relu(self.up(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(cfg["hidden"])
            self.mlp = Mlp()

        def forward(self, x):
            return x + self.mlp(self.norm(x))

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(cfg["vocab"], cfg["hidden"])
            self.layers = nn.ModuleList(Block() for _ in range(cfg["layers"]))
            self.head = nn.Linear(cfg["hidden"], cfg["vocab"], bias=False)

        def forward(self, ids):
            x = self.embed(ids)
            for b in self.layers:
                x = b(x)
            return self.head(x)

    torch.manual_seed(0)
    return Tiny().eval()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    m = _model(CFG)
    ids = torch.randint(0, CFG["vocab"], (CFG["batch"], CFG["seq"]))
    from torch.profiler import ProfilerActivity, profile
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_modules=True, with_stack=True) as p:
        m(ids)
    path = tmp_path_factory.mktemp("act") / "tiny.json"
    p.export_chrome_trace(str(path))
    res = analyze(load_trace(path), AnalyzeOptions(window="all", top_n=100))
    return res


def test_layer_activation_bytes_are_batch_seq_hidden_dtype(report):
    t = report["tables"]["module_hotspots"]
    col = t["columns"].index("input_activation_bytes")
    got = {r[0]: r[col] for r in t["rows"]}
    b, s, h, f = CFG["batch"], CFG["seq"], CFG["hidden"], CFG["intermediate"]
    blocks = [k for k in got if k.rsplit("/", 1)[-1].startswith("Block_")]
    assert len(blocks) == CFG["layers"], got
    for k in blocks:
        assert got[k] == b * s * h * 4, k                    # float32 [batch, seq, hidden]
    # instance numbers count per class over the model: in each Mlp the lower-numbered Linear is ``up``
    inner = sorted((k for k in got if "/Mlp_" in k and k.rsplit("/", 1)[-1].startswith("Linear_")),
                   key=lambda k: int(k.rsplit("_", 1)[1]))
    ups, downs = inner[0::2], inner[1::2]
    assert len(ups) == len(downs) == CFG["layers"]
    assert all(got[k] == b * s * h * 4 for k in ups)
    assert all(got[k] == b * s * f * 4 for k in downs)       # the MLP's inner activation
    emb = [k for k in got if k.endswith("/Embedding_0")]
    assert len(emb) == 1 and got[emb[0]] == b * s * 8         # int64 token ids
    head = [k for k in got if k.count("/") == 1 and k.rsplit("/", 1)[-1].startswith("Linear_")]
    assert len(head) == 1 and got[head[0]] == b * s * h * 4    # the LM head reads the last layer's output
    root = [k for k in got if "/" not in k]
    assert len(root) == 1 and got[root[0]] == b * s * 8       # the model's input: the ids


def test_first_tensor_bytes_rules():
    assert first_tensor_bytes(json.dumps({"dims": [[], [2, 3]], "types": ["Scalar", "c10::BFloat16"]})) == 12
    assert first_tensor_bytes(json.dumps({"dims": [[4, 5]], "types": ["c10::Half"]})) == 40
    assert first_tensor_bytes(json.dumps({"dims": [[4, 5]], "types": ["ScalarList"]})) is None
    assert first_tensor_bytes("not json") is None and first_tensor_bytes(json.dumps([1])) is None


def test_without_record_shapes_the_column_is_null(tmp_path):
    m = _model(CFG)
    ids = torch.randint(0, CFG["vocab"], (CFG["batch"], CFG["seq"]))
    from torch.profiler import ProfilerActivity, profile
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], with_modules=True, with_stack=True) as p:
        m(ids)
    p.export_chrome_trace(str(tmp_path / "t.json"))
    t = analyze(load_trace(tmp_path / "t.json"), AnalyzeOptions(window="all"))["tables"]["module_hotspots"]
    col = t["columns"].index("input_activation_bytes")
    assert t["rows"] and all(r[col] is None for r in t["rows"])
