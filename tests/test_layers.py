"""The live collector does not reach forward in the data flow (issue 41): no module of src/inferscope/collect/ imports
the analysis, the renderers, the report orchestration or the commands - function-level imports included.  `inferscope
run`'s parent side (run_command.py) and `inferscope.save_report` (app.py) live outside collect/ for that reason.
(ingest/ is allowed: the torch-profiler export is re-imported with the Kineto reader.)"""
import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "inferscope"
FORWARD = ("analyze", "report", "app", "outputs", "cli", "fleet", "compare", "run_command", "result")


def _imports(path: Path, pkg: str) -> list[str]:
    """Absolute module names ``path`` imports anywhere in it (relative imports resolved against ``pkg``)."""
    out = []
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.Import):
            out += [a.name for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            if n.level:
                base = pkg.split(".")[: len(pkg.split(".")) - (n.level - 1)]
                mod = ".".join(base + ([n.module] if n.module else []))
                out += [mod] if n.module else [f"{mod}.{a.name}" for a in n.names]
            else:
                out.append(n.module or "")
    return out


def _forward(mods: list[str]) -> list[str]:
    return [m for m in mods if m.startswith("inferscope.") and m.split(".")[1] in FORWARD]


def test_collect_imports_nothing_downstream():
    bad = {}
    for p in sorted((SRC / "collect").glob("*.py")):
        f = _forward(_imports(p, "inferscope.collect"))
        if f:
            bad[p.name] = f
    assert not bad, bad


def test_the_check_sees_function_level_and_relative_imports(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("def f():\n    from ..app import report\n    from ..report import x\n    from . import journal\n")
    assert _forward(_imports(p, "inferscope.collect")) == ["inferscope.app", "inferscope.report"]


REPORT_MUST_NOT = ("analyze", "compare", "collect", "ingest", "fleet", "app", "cli")


def test_report_imports_no_analysis():
    """report/ renders the typed Report (and its views) and computes nothing (issue 41 item 4): none of its modules
    imports the analyses, the diff, the collector, the importers, the fleet code or the commands - function-level
    imports included."""
    bad = {}
    for p in sorted((SRC / "report").glob("*.py")):
        f = [m for m in _imports(p, "inferscope.report")
             if m.startswith("inferscope.") and m.split(".")[1] in REPORT_MUST_NOT]
        if f:
            bad[p.name] = f
    assert not bad, bad


def test_the_report_check_sees_a_function_level_analysis_import(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("def f():\n    from ..analyze.idle_gaps import device_gaps\n    from ..result import Report\n")
    assert [m for m in _imports(p, "inferscope.report") if m.split(".")[1] in REPORT_MUST_NOT] == \
        ["inferscope.analyze.idle_gaps"]


def test_every_command_analyses_through_app():
    """issue 41 item 4: the commands (cli, run_command, fleet/, compare/) analyse a trace through app.analyse /
    app.report, never by calling the pipeline themselves: app.py is the one module outside analyze/ that imports it."""
    users = set()
    for p in sorted(SRC.rglob("*.py")):
        rel = p.relative_to(SRC)
        if rel.parts[0] == "analyze":
            continue
        pkg = "inferscope." + ".".join(rel.parts[:-1]) if len(rel.parts) > 1 else "inferscope"
        if any(m.startswith("inferscope.analyze.pipeline") for m in _imports(p, pkg)):
            users.add(str(rel))
    assert users == {"app.py"}, users
