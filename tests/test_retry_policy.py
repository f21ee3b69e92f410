"""The suite's one retry policy (``live_retry`` in tests/conftest.py) stays the only one: no test file defines a
rerun helper, a retry loop, an "again" folder or a ``flaky`` marker of its own; and the policy does what its
docstring says, checked on planted tests run by pytest itself (a test that fails once passes on its rerun, one
that always fails fails both attempts, errors and unmarked tests are not rerun, the summary counts reruns)."""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
# the files allowed to name the policy: the declaration and this check
EXEMPT = {"conftest.py", Path(__file__).name}

_HELPER = re.compile(r"again|retr(y|ies)|rerun|attempt|twice|one_more|second_run", re.I)
_LOOP_VAR = re.compile(r"attempt|retr(y|ies)|rerun|tries", re.I)
_FOLDER = re.compile(r"(again|retry|rerun|attempt|second_run|one_more)\w*(\.\w+)?", re.I)
_PHRASE = re.compile(r"one more (run|pair)|run it again|second attempt", re.I)


def ad_hoc_retries(src: str) -> list[str]:
    """What in one test file's source looks like a retry of its own, one line each ("" when none)."""
    out = [f"line {src.count(chr(10), 0, m.start()) + 1}: '{m.group(0)}'" for m in _PHRASE.finditer(src)]
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("test") \
                and _HELPER.search(node.name):
            out.append(f"line {node.lineno}: helper {node.name}()")
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            names = [n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)]
            out += [f"line {getattr(node, 'lineno', node.target.lineno)}: loop over {n}" for n in names
                    if _LOOP_VAR.search(n)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _FOLDER.fullmatch(node.value):
            out.append(f"line {node.lineno}: folder/file {node.value!r}")
        elif isinstance(node, ast.Attribute) and node.attr == "flaky" or isinstance(node, ast.Name) and node.id == "flaky":
            out.append(f"line {node.lineno}: flaky marker")
        elif isinstance(node, ast.keyword) and node.arg in ("reruns", "only_rerun", "rerun_except"):
            out.append(f"line {node.value.lineno}: {node.arg}=")
    return out


@pytest.mark.parametrize("src", [
    "def _run_again(p):\n    return p\n",
    "def retry_run(p):\n    return p\n",
    "def test_x(tmp_path):\n    for attempt in range(2):\n        pass\n",
    "def test_x(tmp_path):\n    ok = any(f(t) for tries in range(3))\n",
    "def test_x(tmp_path):\n    d = tmp_path / 'again'\n",
    "def test_x(tmp_path):\n    d = tmp_path / \"again_finding\"\n",
    "import pytest\n@pytest.mark.flaky(reruns=2)\ndef test_x():\n    pass\n",
    "from pytest import mark\n@mark.flaky\ndef test_x():\n    pass\n",
    "def test_x():\n    if bad:\n        # one more run: noise\n        pass\n",
])
def test_detector_finds_planted_ad_hoc_retries(src):
    assert ad_hoc_retries(src), src


@pytest.mark.parametrize("src", [
    "def test_rerun_into_the_same_folder(tmp_path):\n    pass\n",          # a test about re-running the CLI
    "def test_x():\n    for i in range(2):\n        run()\n",              # repeated runs that must all pass
    "def test_x(tmp_path):\n    d = tmp_path / 'reanalysed'\n",
    "def test_x():\n    '''The probe reads the thread again at its next tick.'''\n",
])
def test_detector_passes_what_is_not_a_retry(src):
    assert ad_hoc_retries(src) == [], src


def test_no_test_file_has_a_retry_of_its_own():
    found = {p.relative_to(REPO).as_posix(): ad_hoc_retries(p.read_text())
             for p in sorted(TESTS.rglob("*.py")) if p.name not in EXEMPT}
    assert {k: v for k, v in found.items() if v} == {}, "retries are declared by live_retry (tests/conftest.py) only"
    assert len(found) > 50                                  # the walk saw the suite


_PLANTED = '''
import pytest

def _attempt(tmp_path, name):
    # attempts counted outside tmp_path (a rerun gets a fresh one)
    log = tmp_path.parent / f"{name}.count"
    n = int(log.read_text()) + 1 if log.exists() else 1
    log.write_text(str(n))
    return n

@pytest.mark.live
@pytest.mark.live_retry
def test_band_missed_once(tmp_path):
    assert not any(tmp_path.iterdir())                     # each attempt starts clean
    (tmp_path / "run").write_text("x")
    assert _attempt(tmp_path, "once") >= 2

@pytest.mark.live
@pytest.mark.live_retry
def test_real_bias(tmp_path):
    _attempt(tmp_path, "bias")
    assert False, "outside the band"

@pytest.mark.live
@pytest.mark.live_retry
def test_crash_not_retried(tmp_path):
    _attempt(tmp_path, "crash")
    raise RuntimeError("the program exited with rc=1 (AssertionError in its stderr)")

@pytest.mark.live
def test_live_without_policy(tmp_path):
    _attempt(tmp_path, "plain")
    assert False
'''


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """pytest on a planted folder with the suite's conftest.py and pyproject.toml (markers, addopts)."""
    return subprocess.run([sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"), "--rootdir", str(folder),
                           "-p", "no:cacheprovider", "--basetemp", str(folder / "tmp"), *args, str(folder)],
                          capture_output=True, text=True, timeout=120, cwd=folder)


def _planted(tmp_path: Path, body: str) -> Path:
    d = tmp_path / "suite"
    d.mkdir()
    shutil.copy(TESTS / "conftest.py", d / "conftest.py")
    (d / "test_planted.py").write_text(body)
    return d


def test_policy_reruns_a_failed_live_retry_test_once_and_counts_it(tmp_path):
    pytest.importorskip("pytest_rerunfailures", reason="pytest-rerunfailures not installed (extra [test])")
    d = _planted(tmp_path, _PLANTED)
    r = _pytest(d)
    counts = {p.stem: int(p.read_text()) for p in d.glob("tmp/*.count")}
    # one rerun for a band missed once (passes) and for a real bias (fails both); none for an error or an unmarked test
    assert counts == {"once": 2, "bias": 2, "crash": 1, "plain": 1}, (counts, r.stdout[-3000:])
    last = r.stdout.strip().splitlines()[-1]
    assert re.search(r"\b3 failed\b", last) and re.search(r"\b1 passed\b", last) and re.search(r"\b2 rerun\b", last), last
    assert r.returncode == 1, r.stdout[-3000:]
    # the conftest's section: each rerun test, its first attempt's failed assertion, the rerun's outcome
    section = r.stdout.split("live_retry reruns: 2 ", 1)[1].split("short test summary info", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("test_planted.py::")]
    assert lines == ["test_planted.py::test_band_missed_once: first attempt AssertionError: assert 1 >= 2; rerun passed",
                     "test_planted.py::test_real_bias: first attempt AssertionError: outside the band; rerun failed"], \
        r.stdout[-3000:]


@pytest.mark.parametrize("body, args, says", [
    ("import pytest\n@pytest.mark.live_retry\ndef test_importer():\n    pass\n", (), "not live"),
    ("import pytest\n@pytest.mark.flaky(reruns=3)\ndef test_x():\n    pass\n", (), "flaky marker of its own"),
    ("def test_x():\n    pass\n", ("--reruns", "2"), "--reruns"),
], ids=["retry_on_a_non_live_test", "own_flaky_marker", "global_reruns"])
def test_policy_refuses_any_other_retry(tmp_path, body, args, says):
    pytest.importorskip("pytest_rerunfailures", reason="pytest-rerunfailures not installed (extra [test])")
    r = _pytest(_planted(tmp_path, body), *args)
    assert r.returncode == pytest.ExitCode.USAGE_ERROR, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("ERROR:")]
    assert len(err) == 1 and says in err[0] and "Traceback" not in r.stderr, r.stderr[-2000:]

