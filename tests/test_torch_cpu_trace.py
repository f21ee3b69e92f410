"""A real torch.profiler capture made here (CPU build of torch) goes through the whole engine."""
import json

import pytest

torch = pytest.importorskip("torch", reason="torch not installed (extra [torch])")

from inferscope.analyze.pipeline import analyze  # noqa: E402
from inferscope.ingest import load_trace  # noqa: E402


@pytest.fixture(scope="module")
def cpu_trace(tmp_path_factory):
    torch.set_num_threads(1)
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(4)])
    x = torch.randn(32, 256)
    from torch.profiler import ProfilerActivity, profile, record_function
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            with record_function("tokenize"):
                sum(len(w) for w in ("some text to split " * 2000).split())
            with record_function("forward"), torch.inference_mode():
                model(x)
    p = tmp_path_factory.mktemp("t") / "trace.json"
    prof.export_chrome_trace(str(p))
    return p


def test_cpu_only_torch_trace(cpu_trace):
    doc = json.loads(cpu_trace.read_text())
    n_ops = sum(1 for e in doc["traceEvents"] if e.get("cat") == "cpu_op")
    tr = load_trace(cpu_trace)
    res = analyze(tr)
    assert res["gpu"] is None
    assert int((tr.spans.kind == 6).sum()) == n_ops
    bd = {r["category"]: r for r in res["breakdown"]}
    assert bd["cpu_compute"]["ms"] > 0                      # aten ops on the CPU
    assert bd["cpu_preprocessing"]["parts"][0]["name"] == "tokenization"
    assert bd["gpu_compute"]["ms"] == 0
    assert sum(r["ms"] for r in res["breakdown"]) == pytest.approx(res["e2e_ms"], rel=1e-9)
    assert {r["name"] for r in res["phases"]["ranges"]} >= {"tokenize", "forward"}
