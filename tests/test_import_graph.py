"""No import cycles in src/inferscope, function-level imports included (issue 41), and no unexplained lazy import.

The graph: one node per module of the package (a package is its ``__init__``), an edge for every ``import`` /
``from ... import`` anywhere in a module - inside functions too - with relative imports resolved (as
tests/test_layers.py does) and ``from pkg import name`` going to ``pkg.name`` when that is a module, else to
``pkg``.  A cycle is printed as the module path that closes it, with the line of each import.

A function-level import is kept only to spare the start-up time of a heavy or optional dependency (``HEAVY``;
numpy and msgspec count as heavy in collect/, the collector's child side) or when it must stay there for another
reason; every function-level import of an inferscope module or of a light dependency says why in a comment on
its line (or alone on the line above it).
"""
from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = "inferscope"
# heavy or optional third-party packages: a function-level import of one needs no comment
HEAVY = frozenset({"torch", "pyarrow", "ray", "msgpack", "yaml", "transformers", "pynvml", "cupti", "pandas",
                   "duckdb", "nvtx", "psutil"})
HEAVY_IN_COLLECTOR = frozenset({"numpy", "msgspec"})   # the collector's child side imports as little as it can
# modules another branch of issue 41 owns (the renderers; the perf sampler): their lazy-import comments come with
# that work.  The cycle check covers them all the same.
COMMENT_CHECK_PENDING = ()


def module_files(root: Path, pkg: str = PKG) -> dict[str, Path]:
    """{dotted module name: file} for every .py file under root/pkg."""
    out = {}
    for p in sorted((root / pkg).rglob("*.py")):
        parts = list(p.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _import_nodes(tree: ast.AST):
    """(node, inside a function) for every import statement of a module."""
    stack = [(tree, False)]
    while stack:
        node, in_fn = stack.pop()
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.Import, ast.ImportFrom)):
                yield ch, in_fn
            stack.append((ch, in_fn or isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))))


def _targets(node, mod: str, is_pkg: bool, mods: dict) -> list[str]:
    """The dotted names an import statement reaches (a module of ``mods`` where it is one)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            pkg = mod if is_pkg else mod.rsplit(".", 1)[0]
            parts = pkg.split(".")
            base = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
    out = []
    for n in names:
        x = n
        while x not in mods and "." in x:
            x = x.rsplit(".", 1)[0]
        out.append(x if x in mods else n)
    return list(dict.fromkeys(out))


def _comment_lines(text: str) -> tuple[set[int], set[int]]:
    """(lines with a comment, lines that are only a comment)."""
    lines, alone = set(), set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            lines.add(tok.start[0])
            if not tok.line[: tok.start[1]].strip():
                alone.add(tok.start[0])
    return lines, alone


def scan(root: Path, pkg: str = PKG):
    """(graph {module: {imported module: first line}}, lazy imports [(module, line, target, has comment)])."""
    mods = module_files(root, pkg)
    graph: dict[str, dict[str, int]] = {m: {} for m in mods}
    lazy = []
    for m, p in mods.items():
        text = p.read_text(encoding="utf-8")
        comments, alone = _comment_lines(text)
        for node, in_fn in _import_nodes(ast.parse(text)):
            for t in _targets(node, m, p.name == "__init__.py", mods):
                if t in mods and t != m:
                    graph[m].setdefault(t, node.lineno)
                if in_fn:
                    said = (node.lineno - 1 in alone
                            or any(ln in comments for ln in range(node.lineno, (node.end_lineno or node.lineno) + 1)))
                    lazy.append((m, node.lineno, t, said))
    return graph, lazy


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative), each sorted."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def cycle_path(graph: dict[str, dict[str, int]], comp: list[str]) -> str:
    """One cycle through the component's first module, as 'a:12 -> b:40 -> a' (the line of each import)."""
    inside = set(comp)
    start = comp[0]
    prev = {start: None}
    todo = [start]
    while todo:                     # breadth-first to the shortest way back to start
        v = todo.pop(0)
        for w in sorted(graph[v]):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                path = path[::-1] + [start]
                return " -> ".join(f"{a}:{graph[a][b]}" for a, b in zip(path, path[1:])) + f" -> {start}"
            if w in inside and w not in prev:
                prev[w] = v
                todo.append(w)
    return " <-> ".join(comp)


def needs_comment(module: str, target: str, pkg: str = PKG) -> bool:
    top = target.split(".")[0]
    if top == pkg:
        return True
    if top in HEAVY:
        return False
    if top in HEAVY_IN_COLLECTOR and module.startswith(f"{pkg}.collect"):
        return False
    return True


def uncommented(lazy, pkg: str = PKG, pending=()) -> list[str]:
    return [f"{m}:{line} imports {t} inside a function with no comment saying why"
            for m, line, t, said in lazy
            if not said and needs_comment(m, t, pkg) and not any(m == p or m.startswith(p + ".") for p in pending)]


def test_no_import_cycles():
    graph, _ = scan(SRC)
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(cycle_path(graph, c) for c in found)


def test_every_lazy_import_says_why():
    _, lazy = scan(SRC)
    bad = uncommented(lazy, pending=COMMENT_CHECK_PENDING)
    assert not bad, "\n".join(bad)


def test_the_graph_sees_what_the_package_imports():
    """Known edges of the real tree, each of another kind: relative, function-level, `from pkg import module`."""
    graph, lazy = scan(SRC)
    assert "inferscope.analyze.window" in graph["inferscope.analyze.select"]               # from .window import Window
    assert "inferscope.collect.session" in graph["inferscope.collect.api"]                 # from . import session as _S
    assert any(m == "inferscope.collect.nvml" and t == "pynvml" for m, _, t, _ in lazy)    # inside a method
    assert len(graph) == len(module_files(SRC)) > 100


def _plant(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / "pkg" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_the_checks_see_a_planted_cycle_and_an_uncommented_lazy_import(tmp_path):
    _plant(tmp_path, {
        "__init__.py": "",
        "a.py": "from .sub import b\n",
        "sub/__init__.py": "",
        "sub/b.py": "import json\n\n\ndef f():\n    from ..c import x\n    return x\n",
        "c.py": "def g():\n    from . import a\n    import torch\n    import re  # lazy: planted\n    import os\n",
        "d.py": "from pkg import c\n",
    })
    graph, lazy = scan(tmp_path, "pkg")
    assert graph["pkg.a"] == {"pkg.sub.b": 1} and graph["pkg.sub.b"] == {"pkg.c": 5} and graph["pkg.d"] == {"pkg.c": 1}
    found = cycles(graph)
    assert found == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    assert cycle_path(graph, found[0]) == "pkg.a:1 -> pkg.sub.b:5 -> pkg.c:2 -> pkg.a"
    assert sorted(uncommented(lazy, "pkg")) == [
        "pkg.c:2 imports pkg.a inside a function with no comment saying why",
        "pkg.c:5 imports os inside a function with no comment saying why",
        "pkg.sub.b:5 imports pkg.c inside a function with no comment saying why"]
    assert uncommented(lazy, "pkg", pending=("pkg.c", "pkg.sub")) == []
    # the cycle broken (the import moved out of the way): none left
    (tmp_path / "pkg" / "c.py").write_text("def g():\n    import torch\n")
    graph, _ = scan(tmp_path, "pkg")
    assert cycles(graph) == []
