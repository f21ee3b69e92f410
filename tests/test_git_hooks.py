"""scripts/git-hooks/pre-commit in a throw-away git repository: what it blocks, and the bypasses."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HOOK = REPO / "scripts" / "git-hooks" / "pre-commit"

pytestmark = pytest.mark.skipif(shutil.which("git") is None or shutil.which("bash") is None,
                                reason="git and bash are needed to run the pre-commit hook")


@pytest.fixture
def repo(tmp_path):
    d = tmp_path / "repo"
    d.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "INFERSCOPE_ALLOW"))}
    env.update(HOME=str(tmp_path), GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")

    def git(*args, extra_env=None, check=True):
        r = subprocess.run(["git", *args], cwd=d, env=dict(env, **(extra_env or {})), capture_output=True,
                           text=True, timeout=60)
        if check:
            assert r.returncode == 0, (args, r.stdout, r.stderr)
        return r

    git("init", "-q")
    shutil.copytree(HOOK.parent, d / "scripts" / "git-hooks")
    git("config", "core.hooksPath", "scripts/git-hooks")     # as the README says
    (d / "README.md").write_text("hello\n")
    git("add", "-A")
    git("commit", "-qm", "init")
    git.dir = d
    return git


def _head(git):
    return git("rev-parse", "HEAD").stdout.strip()


def _write(git, rel, data: bytes):
    p = git.dir / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    git("add", "-f", rel)      # -f: as if outputs/ were not git-ignored


def test_hook_is_executable():
    assert os.access(HOOK, os.X_OK)


def test_ordinary_commit_passes(repo):
    before = _head(repo)
    _write(repo, "src/app.py", b"print('hi')\n")
    repo("commit", "-qm", "code")
    assert _head(repo) != before


def test_outputs_and_coverage_blocked_until_bypass(repo):
    before = _head(repo)
    _write(repo, "outputs/demo_llm_trace.iscope", b"PK\x03\x04 not really a trace")
    _write(repo, "coverage/html/index.html", b"<html></html>")
    r = repo("commit", "-qm", "oops", check=False)
    assert r.returncode != 0
    assert "outputs/demo_llm_trace.iscope" in r.stderr and "coverage/html/index.html" in r.stderr
    assert "INFERSCOPE_ALLOW_OUTPUTS=1" in r.stderr
    assert _head(repo) == before
    # the other bypass variable does not cover outputs
    assert repo("commit", "-qm", "oops", extra_env={"INFERSCOPE_ALLOW_LARGE": "1"}, check=False).returncode != 0
    repo("commit", "-qm", "on purpose", extra_env={"INFERSCOPE_ALLOW_OUTPUTS": "1"})
    assert _head(repo) != before
    # removing them again is never blocked
    repo("rm", "-rq", "outputs", "coverage")
    repo("commit", "-qm", "remove")


def test_large_file_blocked_until_bypass(repo):
    before = _head(repo)
    _write(repo, "data/blob.dat", bytes(30 * 1024 * 1024))
    r = repo("commit", "-qm", "big", check=False)
    assert r.returncode != 0
    assert "data/blob.dat (30 MB)" in r.stderr and "INFERSCOPE_ALLOW_LARGE=1" in r.stderr
    assert _head(repo) == before
    assert repo("commit", "-qm", "big", extra_env={"INFERSCOPE_ALLOW_OUTPUTS": "1"}, check=False).returncode != 0
    repo("commit", "-qm", "big", extra_env={"INFERSCOPE_ALLOW_LARGE": "1"})
    assert _head(repo) != before


def test_threshold_is_configurable_and_small_files_pass(repo):
    _write(repo, "data/small.dat", bytes(2 * 1024 * 1024))
    r = repo("commit", "-qm", "2 MB", extra_env={"INFERSCOPE_MAX_FILE_MB": "1"}, check=False)
    assert r.returncode != 0 and "data/small.dat (2 MB)" in r.stderr
    repo("commit", "-qm", "2 MB")        # under the default 25 MB


@pytest.mark.parametrize("name", ["model.safetensors", "weights/pytorch_model.BIN", "ckpt.pt", "m.onnx", "m.gguf"])
def test_model_artifacts_blocked_whatever_their_size(repo, name):
    before = _head(repo)
    _write(repo, name, b"\x00" * 16)
    r = repo("commit", "-qm", "model", check=False)
    assert r.returncode != 0 and f"{name} (model artifact)" in r.stderr
    assert _head(repo) == before
    repo("commit", "-qm", "model", extra_env={"INFERSCOPE_ALLOW_LARGE": "1"})
    assert _head(repo) != before


def test_no_verify_skips_the_hook(repo):
    before = _head(repo)
    _write(repo, "outputs/llm_report.md", b"# report\n")
    _write(repo, "model.safetensors", b"\x00")
    repo("commit", "-qm", "skip hooks", "--no-verify")
    assert _head(repo) != before
