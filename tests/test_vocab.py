"""One vocabulary (issue 41 item 2, src/inferscope/vocab.py): the host class names and the native-library role table
are written once - src/ holds no other literal list of the classes nor a library pattern of the table -, the live
perf samples (collect/perfip.role_of) and the nsys host samples (ingest/nsys_host.module_class) read the same table,
and the host code of a GPU math library (cuBLAS) is framework overhead on both paths, never CPU compute."""
from __future__ import annotations

import ast
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from inferscope import vocab as V
from inferscope.analyze.pipeline import analyze
from inferscope.collect import perfip as P
from inferscope.ingest import load_trace, nsys_host
from inferscope.result.base import CATEGORIES

from resolve_helpers import durations, resolve_thread

SRC = Path(__file__).resolve().parents[1] / "src" / "inferscope"
P4 = Path("/work/shared/traces/nsys/p4arth_report1.sqlite")
need_p4 = pytest.mark.skipif(not P4.exists(), reason="shared nsys traces absent")
# the library names of the role table (any of them in a string of src/ outside vocab.py is a second table)
TABLE_LIBS = re.compile(r"lib(cublas|cudnn|nvrtc|cufft|torch|c10|gomp|iomp|mkl|openblas|dnnl|tbb|cuda|cupti|nccl|"
                        r"python|tokenizers|sentencepiece)", re.I)


def _docstrings(tree) -> set[int]:
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def duplicates(path: Path) -> list[str]:
    """Literal lists of host class names (a tuple/list/set of strings only, or a dict whose keys or values are
    strings only, with >= 3 class names and nothing else), a class name looked up as a literal
    (``trace.strings.get("waiting")``), strings naming a library of the role table, and the breakdown's category
    list written out anywhere but result/base.py."""
    tree = ast.parse(path.read_text())
    docs = _docstrings(tree)
    out = []

    def class_list(nodes, line):
        vals = [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None for e in nodes]
        if len(vals) >= 3 and None not in vals and all(v in V.SAMPLE_CLASSES for v in vals):
            out.append(f"{path.name}:{line} class names {vals}")

    for n in ast.walk(tree):
        if isinstance(n, (ast.Tuple, ast.List, ast.Set)):
            class_list(n.elts, n.lineno)
            vals = {e.value for e in n.elts if isinstance(e, ast.Constant)}
            if set(CATEGORIES) <= vals and path.resolve() != (SRC / "result" / "base.py").resolve():
                out.append(f"{path.name}:{n.lineno} the breakdown's category list")   # (a table keyed by them is not)
        elif isinstance(n, ast.Dict):
            class_list(n.keys, n.lineno)
            class_list(n.values, n.lineno)
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get"
              and isinstance(n.func.value, ast.Attribute) and n.func.value.attr == "strings" and n.args
              and isinstance(n.args[0], ast.Constant) and n.args[0].value in V.SAMPLE_CLASSES):
            out.append(f"{path.name}:{n.lineno} class name {n.args[0].value!r} looked up")
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs and TABLE_LIBS.search(n.value):
            out.append(f"{path.name}:{n.lineno} library pattern {n.value[:60]!r}")
    return out


def test_no_second_class_list_or_library_table_in_src():
    found = [d for p in sorted(SRC.rglob("*.py")) if p.name != "vocab.py" for d in duplicates(p)]
    assert not found, found


def test_the_scan_finds_what_it_looks_for(tmp_path):
    """Planted: the lists as the five modules wrote them before vocab.py, and the two tables' patterns."""
    p = tmp_path / "m.py"
    p.write_text('"""libtorch in a docstring is prose."""\n'
                 'A = ("tokenization", "preprocessing", "user_code", "framework")\n'
                 'B = {"tokenization": "cpu_preprocessing/tokenization", "preprocessing": "x", "waiting": "y"}\n'
                 'C = {1: "cpu_compute", 4: "tokenization", 5: "run_queue"}\n'
                 'D = ("libcublas", "libcudnn")\nE = re.compile(r"libtorch|libc10")\n'
                 'F = ("tokenization", "preprocessing", "framework_python")\n'   # a part list: not only classes
                 'G = trace.strings.get("waiting")\nH = trace.strings.get("kernel")\n'
                 f'I = {CATEGORIES!r}\nJ = {dict.fromkeys(CATEGORIES, "#fff")!r}\n')
    got = duplicates(p)
    assert sorted(g.split(" ")[0] for g in got) == ["m.py:10", "m.py:2", "m.py:3", "m.py:4", "m.py:5", "m.py:5", "m.py:6",
                                                    "m.py:8"], got


def test_analyze_imports_nothing_from_collect():
    """The flow runs collect/ -> trace -> analyze/: the off-CPU marks' names and call kinds come from vocab.py."""
    bad = []
    for p in sorted((SRC / "analyze").glob("*.py")):
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.ImportFrom) and ((n.level == 2 and (n.module or "").startswith("collect"))
                                                  or (n.module or "").startswith("inferscope.collect")):
                bad.append(f"{p.name}:{n.lineno}")
    assert not bad, bad


SP = "/usr/local/lib/python3.11/site-packages"
# path: (perf role, nsys class in an export with GPU activity, without; None = transparent), written by hand from
# what each library does on the host
TRUTH = [
    (f"{SP}/nvidia/cublas/lib/libcublasLt.so.12", P.FRAMEWORK, "framework", "framework"),   # set-up, launches
    (f"{SP}/nvidia/cublas/lib/libcublas.so.12", P.FRAMEWORK, "framework", "framework"),
    (f"{SP}/nvidia/cudnn/lib/libcudnn_ops.so.9", P.FRAMEWORK, "framework", "framework"),
    (f"{SP}/nvidia/cuda_nvrtc/lib/libnvrtc.so.12", P.FRAMEWORK, "framework", "framework"),  # JIT compilation
    ("/usr/lib/x86_64-linux-gnu/libnvinfer.so.10", P.FRAMEWORK, "framework", "framework"),  # TensorRT
    ("/usr/lib/x86_64-linux-gnu/libcuda.so.1", P.OTHER, "framework", "framework"),          # perf: the caller's
    (f"{SP}/nvidia/cuda_runtime/lib/libcudart.so.12", P.OTHER, "framework", "framework"),
    (f"{SP}/nvidia/nccl/lib/libnccl.so.2", P.OTHER, "framework", "framework"),
    ("/opt/nvidia/nsight-systems/2025.5.2/target-linux-x64/libToolsInjection64.so", P.OTHER, "framework", "framework"),
    (f"{SP}/torch/lib/libtorch_cpu.so", P.COMPUTE, "framework", "cpu_compute"),
    (f"{SP}/numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so", P.COMPUTE, "framework", "cpu_compute"),
    ("/usr/lib/x86_64-linux-gnu/libtbb.so.12", P.COMPUTE, "framework", "cpu_compute"),
    (f"{SP}/tokenizers/tokenizers.abi3.so", P.TOKENIZER, "tokenization", "tokenization"),
    ("/usr/lib/libpython3.11.so.1.0", P.PYTHON, "framework", "framework"),
    ("/usr/lib/x86_64-linux-gnu/libc.so.6", P.OTHER, None, None),
    ("/usr/lib/x86_64-linux-gnu/libm.so.6", P.OTHER, None, None),
    ("[kernel.kallsyms]", P.OTHER, None, None),
    ("/home/u/cuda-perf-sandbox/vecAdd", P.OTHER, "user_code", "user_code"),
    (f"{SP}/PIL/_imaging.cpython-311-x86_64-linux-gnu.so", P.OTHER, "user_code", "user_code"),
]


@pytest.mark.parametrize("path,perf,gpu,cpu", TRUTH)
def test_one_table_both_paths(path, perf, gpu, cpu):
    assert P.role_of(path) == perf, (path, V.ROLE_NAMES[P.role_of(path)])
    for has_gpu, want in ((True, gpu), (False, cpu)):
        c = nsys_host.module_class(path, has_gpu)
        assert (nsys_host.CLASS_NAMES[c] if c >= 0 else None) == want, (path, has_gpu)


def test_live_cublas_samples_are_framework_not_compute():
    """One 10 ms user-code interval whose IP samples all fall in libcublasLt (perf role by the table): the resolver
    gives it to framework; with the samples in libtorch's compute code it is cpu_compute (the contrast)."""
    ms = 1_000_000
    pend = [(10 * ms, None, "app.py:forward", V.CLS_USER_CODE, False, 0)]
    for path, want in ((TRUTH[0][0], V.CLS_FRAMEWORK), (f"{SP}/torch/lib/libtorch_cpu.so", V.CLS_CPU_COMPUTE)):
        samples = [(int((i + 0.5) * ms), P.role_of(path)) for i in range(10)]
        buf, _, _ = resolve_thread(samples, pend)
        assert durations(buf) == {want: 10 * ms}, path


CUBLAS = f"{SP}/nvidia/cublas/lib/libcublasLt.so.12"


def _renamed(tmp_path, module: str) -> tuple[Path, str, int]:
    """A copy of the p4arth export whose libcuda frames are in ``module`` instead; (copy, old name, samples the
    old name decides: the first frame outside the system modules, recounted in SQL)."""
    p = tmp_path / "p4.sqlite"
    shutil.copyfile(P4, p)
    con = sqlite3.connect(p)
    old = con.execute("SELECT DISTINCT m.value FROM SAMPLING_CALLCHAINS c JOIN StringIds m ON m.id = c.module "
                      "WHERE m.value LIKE '%/libcuda.so%'").fetchone()[0]
    n = con.execute("""
        SELECT COUNT(*) FROM COMPOSITE_EVENTS ce WHERE (
            SELECT m.value FROM SAMPLING_CALLCHAINS c JOIN StringIds m ON m.id = c.module
            WHERE c.id = ce.id AND m.value NOT IN ('[kernel.kallsyms]', '[vdso]', '[Unknown]', '[Broken backtraces]')
              AND m.value NOT LIKE '%/libc.so%' AND m.value NOT LIKE '%/ld-linux%'
            ORDER BY c.stackDepth LIMIT 1) = ?""", (old,)).fetchone()[0]
    con.execute("UPDATE StringIds SET value = ? WHERE value = ?", (module, old))
    con.commit()
    con.close()
    return p, old, n


def _classes(path: Path, has_gpu: bool, module: str) -> list[str]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    schema = {t: [r[1] for r in con.execute(f"PRAGMA table_info([{t}])")]
              for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    _ts, _gt, cls, det = nsys_host.sample_classes(con, schema, has_gpu)
    con.close()
    base = Path(module).name
    return [nsys_host.CLASS_NAMES[c] for c, d in zip(cls.tolist(), det) if d.endswith(f"({base})")]


@need_p4
def test_cublas_host_samples_on_a_real_export_are_framework(tmp_path):
    """The real p4arth export (RTX 3060, CPU sampling), its libcuda frames renamed to libcublasLt: every sample the
    renamed library decides (SQL recount) is framework with or without GPU activity tables, and the analysed
    breakdown is the original's to the nanosecond (driver launch work and cuBLAS's host work are one category).
    The same frames renamed to libtorch_cpu read cpu_compute without GPU tables: the table tells them apart."""
    p, old, n = _renamed(tmp_path, CUBLAS)
    assert n >= 40
    for has_gpu in (True, False):
        got = _classes(p, has_gpu, CUBLAS)
        assert len(got) >= n and set(got) == {"framework"}, has_gpu    # (+ chainless samples filled forward)
    before = {r["category"]: r["ns"] for r in analyze(load_trace(str(P4)))["breakdown"]}
    after = {r["category"]: r["ns"] for r in analyze(load_trace(str(p)))["breakdown"]}
    assert after == before and before["framework_overhead"] > 0
    torch_lib = f"{SP}/torch/lib/libtorch_cpu.so"
    (tmp_path / "t").mkdir()
    p2, _, _ = _renamed(tmp_path / "t", torch_lib)
    assert set(_classes(p2, False, torch_lib)) == {"cpu_compute"}
    assert set(_classes(p2, True, torch_lib)) == {"framework"}
