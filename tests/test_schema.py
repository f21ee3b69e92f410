"""The typed result: report.json of every real trace validates against the JSON Schema generated
from inferscope.result.Report; the notebook API returns that object."""
import json
import subprocess
import sys

import msgspec
import pytest

from conftest import REPO, kineto_params, nsys_params, shared_path
import inferscope
from inferscope.analyze.pipeline import analyze
from inferscope.ingest import load_trace
from inferscope.report import get_renderer
from inferscope.result import SCHEMA_VERSION, Report, json_schema

SCHEMA_FILE = REPO / "docs" / "report.schema.json"


def test_committed_schema_is_the_generated_one():
    """docs/report.schema.json is regenerated from the types (`inferscope schema > docs/report.schema.json`)."""
    assert json.loads(SCHEMA_FILE.read_text()) == json.loads(json.dumps(json_schema()))


def test_schema_command():
    r = subprocess.run([sys.executable, "-m", "inferscope", "schema"], capture_output=True, text=True,
                       env={"PYTHONPATH": str(REPO / "src")}, timeout=60)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["$ref"] == "#/$defs/Report" and "Report" in s["$defs"]
    assert s["$defs"]["Report"]["additionalProperties"] is False


@pytest.mark.parametrize("path", kineto_params() + nsys_params())
def test_report_json_validates(path, tmp_path):
    trace = load_trace(path)
    res = analyze(trace)
    assert res["schema_version"] == SCHEMA_VERSION
    out = tmp_path / "report.json"
    from helpers import as_report
    get_renderer("json")(as_report(res, trace, ["json"]), trace, out)
    raw = out.read_bytes()
    msgspec.json.decode(raw, type=Report)              # strict: no undeclared key, every type right
    jsonschema = pytest.importorskip("jsonschema")      # and an independent validator of the generated schema
    jsonschema.validate(json.loads(raw), json.loads(SCHEMA_FILE.read_text()))


def test_undeclared_key_is_an_error():
    path = shared_path("kineto", "hta_cuda_event_sync_a100.json.gz")
    res = analyze(load_trace(path))
    res["gpu"]["kernel_ms"] = 1.0                       # the old, ambiguous name
    with pytest.raises(msgspec.ValidationError, match="kernel_ms"):
        msgspec.convert(res, Report)


def test_notebook_api():
    path = shared_path("kineto", "hta_gpu_user_annotation_gp100.json.gz")
    r = inferscope.analyze(path)
    assert isinstance(r, Report)
    assert sum(c.ns for c in r.breakdown) == r.window.end_ns - r.window.start_ns
    assert r.verdict.id == r.to_dict()["verdict"]["id"]
    step = r.phases.steps[0].name if r.phases.steps else None
    if step:
        r2 = inferscope.analyze(path, window=step)
        assert r2.window.label == step and r2.e2e_ms < r.e2e_ms
    pd = pytest.importorskip("pandas")
    frames = r.to_pandas()
    bd = frames["breakdown"]
    assert isinstance(bd, pd.DataFrame) and list(bd["category"]) == [c.category for c in r.breakdown]
    assert bd["ms"].sum() == pytest.approx(r.e2e_ms, abs=1e-3)
