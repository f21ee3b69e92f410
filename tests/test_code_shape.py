"""The live collector's code stays readable (issue 40): no function in src/inferscope/collect/ over 80 lines, so a
rule reads as one small named function (collect/rules.py) rather than a branch of a long loop."""
import ast
from pathlib import Path

COLLECT = Path(__file__).resolve().parents[1] / "src" / "inferscope" / "collect"
MAX_LINES = 80


def test_no_collect_function_over_80_lines():
    long = []
    for p in sorted(COLLECT.glob("*.py")):
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > MAX_LINES:
                long.append(f"{p.name}:{n.name} ({n.end_lineno - n.lineno + 1} lines)")
    assert not long, long


def test_the_check_finds_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    tree = ast.parse(f"def f():\n{body}\n")
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    assert fn.end_lineno - fn.lineno + 1 > MAX_LINES
