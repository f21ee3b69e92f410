"""The Makefile: every documented target exists, the demo keeps its trace in outputs/, cleanup removes only artifacts."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")

TARGETS = ["demo", "test", "coverage", "integration", "bench", "examples", "examples-demo-trace", "hooks",
           "cleanup-temp-docs", "clean"]


def _make(*args, cwd=REPO):
    return subprocess.run(["make", "--no-print-directory", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("target", TARGETS)
def test_target_exists(target):
    r = _make("-n", target)
    assert r.returncode == 0, r.stderr


def test_demo_writes_to_outputs_and_passes_model():
    r = _make("-n", "demo", "MODEL=./my-model", "DEMO_ARGS=--stress-mode --batch-size 8")
    assert r.returncode == 0, r.stderr
    run = next(ln for ln in r.stdout.splitlines() if " run " in ln)
    assert "--report outputs/llm_report.md" in run
    assert "examples/llm_demo.py --model ./my-model --stress-mode --batch-size 8 --output outputs/demo_llm_trace.iscope" in run
    assert "analyze outputs/demo_llm_trace.iscope -o outputs/llm_report.html" in r.stdout
    assert "--model" not in _make("-n", "demo").stdout


def test_coverage_uses_pytest_cov_and_prints_total():
    r = _make("-n", "coverage")
    assert "--cov" in r.stdout and "coverage report --format=total" in r.stdout
    text = (REPO / "pyproject.toml").read_text()
    assert "pytest-cov" in text and 'directory = "coverage/html"' in text


def test_cleanup_removes_root_artifacts_only(tmp_path):
    shutil.copy(REPO / "Makefile", tmp_path / "Makefile")
    keep = ["README.md", "src/inferscope/report.py", "outputs/llm_report.md"]
    gone = ["report.md", "report.html", "report.json", "run.iscope", "run.iscope.journal", "trace_1.json",
            "llm_report.md", "inferscope-out/report.md"]
    for rel in keep + gone:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    r = _make("cleanup-temp-docs", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [g for g in gone if (tmp_path / g).exists()] == []
    assert all((tmp_path / k).exists() for k in keep)
    r = _make("clean", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "outputs").exists() and (tmp_path / "README.md").exists()
