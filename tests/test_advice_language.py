"""Issue 47 item 1: advice fits the program (its language, and what the culprit is), and the breakdown names
sampled native host time by what it is, never 'framework Python'.

Truth is read here from the raw input: the nsys SQLite's call-chain modules and process names (sqlite3), or
planted report dicts whose culprit is known by construction.
"""
import re
import sqlite3

import pytest

from conftest import REPO, shared_path
from inferscope.analyze import advice
from inferscope.analyze.pipeline import analyze
from inferscope.ingest import load_trace
from inferscope.report.markdown import headline
from inferscope.result import from_dict

PYTHON_WORDS = re.compile(r"Python|numpy|torch|\.item\(\)|pin_memory|non_blocking=|DataLoader|tokeniz", re.I)


def _raw_language(path) -> str:
    """From the SQLite alone: any call-chain frame in a Python interpreter module, or the profiled process named
    python*, says python; call chains without either say native."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    mods = []
    if "SAMPLING_CALLCHAINS" in tables:
        mods = [r[0] for r in con.execute("SELECT DISTINCT s.value FROM SAMPLING_CALLCHAINS c JOIN StringIds s "
                                          "ON s.id = c.module")]
    # the profiled processes: those calling CUDA or CPU-sampled (ThreadNames lists every process on the machine)
    pids = set()
    for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "COMPOSITE_EVENTS"):
        if t in tables:
            pids |= {r[0] for r in con.execute(f"SELECT DISTINCT globalTid >> 24 FROM {t}")}
    procs = [n for p, n in con.execute("SELECT globalPid >> 24, name FROM PROCESSES") if p in pids]
    if any(re.search(r"libpython|/python3?(\.\d+)?$", m or "") for m in mods) or any(n.startswith("python") for n in procs):
        return "python"
    return "native" if mods else "unknown"


@pytest.mark.shared
def test_cuda_c_program_gets_native_advice():
    path = shared_path("nsys", "p4arth_report1.sqlite")
    assert _raw_language(path) == "native"
    res = analyze(load_trace(path))
    assert res["source"]["language"] == "native"
    # the breakdown names sampled library time by what it is
    labels = [p["label"] for r in res["breakdown"] for p in r["parts"]]
    assert labels and not any("Python" in x for x in labels), labels
    sampled_fw = [p for r in res["breakdown"] for p in r["parts"] if p["name"] == "framework_python"]
    assert sampled_fw and "native" in sampled_fw[0]["label"]
    # no Python advice anywhere in the findings of a C/CUDA program; user code gets native advice naming the culprit
    for f in res["findings"]:
        assert not PYTHON_WORDS.search(f["suggestion"]), (f["id"], f["suggestion"])
    uc = next(f for f in res["findings"] if f["id"] == "cpu_preprocessing")
    top = res["culprits"]["functions"]
    culprit = next(r for r in top if r["class"] == "user_code")
    assert culprit["function"] in uc["suggestion"] and "perf record" in uc["suggestion"]
    assert "framework Python" not in headline(from_dict(res)) and "framework (Python" not in headline(from_dict(res))


@pytest.mark.shared
def test_python_process_keeps_python_language():
    path = shared_path("nsys", "memfusion_report1.sqlite")
    assert _raw_language(path) == "python"
    assert analyze(load_trace(path))["source"]["language"] == "python"


def test_live_python_run_gets_python_advice():
    res = analyze(load_trace(REPO / "examples" / "reports" / "cpu_demo.iscope"))
    assert res["source"]["language"] == "python"
    assert any(p["label"] == "framework (Python and torch dispatch)" for r in res["breakdown"] for p in r["parts"])


def _planted(language: str, fmt: str, row: dict) -> dict:
    return {"source": {"language": language, "format": fmt}, "culprits": {"functions": [row]}}


@pytest.mark.parametrize("language,fmt,row,kind", [
    ("python", "inferscope", {"function": "loop", "file": "app.py:12", "class": "user_code", "source": "sampler"}, "python"),
    ("unknown", "kineto", {"function": "f", "file": "", "class": "user_code",
                           "source": "profiler Python frames (self = frame minus recorded children)"}, "python"),
    # nsys never sees Python frames: a sampled symbol is native even in a Python process (a C extension)
    ("python", "nsys", {"function": "crunch(int) (libext.so)", "file": "", "class": "user_code",
                        "source": "sampler (function of each tick)"}, "native"),
    ("native", "nsys", {"function": "main (a.out)", "file": "", "class": "user_code", "source": "sampler"}, "native"),
])
def test_user_code_advice_follows_the_culprit(language, fmt, row, kind):
    res = _planted(language, fmt, row)
    assert advice.culprit_kind(row, res) == kind
    _, sugg = advice.user_code(res, " (start with X)")
    assert ("Python" in sugg) == (kind == "python")
    assert ("perf record" in sugg) == (kind == "native")


def test_topic_texts_follow_the_language():
    for topic in ("sync_stall", "pageable_copy", "host_launch_bound", "framework_overhead", "gpu_idle.cpu_preprocessing",
                  "gpu_idle.framework_overhead"):
        nat = advice.text(topic, {"source": {"language": "native"}})
        py = advice.text(topic, {"source": {"language": "python"}})
        assert nat != py and not PYTHON_WORDS.search(nat), topic
        assert advice.text(topic, {"source": {}}) == py         # unknown: the Python/PyTorch text, as before

