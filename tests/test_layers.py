"""Who may import whom (issue 41): no module imports against the data flow collect/ingest -> trace -> analyze -> result
-> report -> app/cli - function-level imports included - and app.py is the one module outside analyze/ that runs the
pipeline.  So the live collector reaches nothing downstream (`inferscope run`'s parent side, run_command.py with
run_child.py and run_report.py, and `inferscope.save_report` in app.py live outside collect/ for that reason; ingest/
is allowed: the torch-profiler export is re-imported with the Kineto reader), and report/ renders the typed Report
and computes nothing (issue 41 item 4: no import of the analyses, the diff, the collector, the importers, the fleet
code or the commands)."""
import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "inferscope"


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


# The data flow, as who may import whom (issue 41: no arrow against collect/ingest -> trace -> analyze -> result ->
# report -> app/cli).  FOUNDATION: names, numbers and helpers every layer shares, which import only each other.
# Packages not listed (compare/, fleet/, app, outputs, run_command, run_child, run_report, cli) orchestrate and may
# import anything below.
FOUNDATION = {"util", "errors", "log", "thresholds", "classes", "wording", "vocab", "symname", "config", "version"}
MAY_IMPORT = {
    "foundation": FOUNDATION,
    "trace": FOUNDATION | {"trace"},
    "ingest": FOUNDATION | {"trace", "ingest"},
    "collect": FOUNDATION | {"trace", "ingest", "collect"},      # ingest: the torch-profiler export re-read
    "result": FOUNDATION | {"result"},
    "analyze": FOUNDATION | {"trace", "result", "analyze", "ingest"},   # ingest: analyze(path) loads a file
    "report": FOUNDATION | {"trace", "result", "report"},
}


def _layer_violations(src: Path) -> dict[str, list[str]]:
    bad: dict[str, list[str]] = {}
    for p in sorted(src.rglob("*.py")):
        rel = p.relative_to(src)
        top = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        key = "foundation" if top in FOUNDATION else top
        if key not in MAY_IMPORT:
            continue
        pkg = ".".join(("inferscope",) + rel.parts[:-1])
        for m in _imports(p, pkg):
            parts = m.split(".")
            if parts[0] != "inferscope":
                continue
            if len(parts) == 1 or parts[1] not in MAY_IMPORT[key]:
                bad.setdefault(str(rel), []).append(m)
    return bad


def test_no_import_against_the_data_flow():
    bad = _layer_violations(SRC)
    assert not bad, bad


def test_the_layer_check_sees_an_arrow_against_the_flow(tmp_path):
    src = tmp_path / "inferscope"
    (src / "report").mkdir(parents=True)
    (src / "trace").mkdir()
    (src / "collect" / "_site").mkdir(parents=True)
    (src / "report" / "x.py").write_text("from ..result import Report\nfrom ..analyze.breakdown import CATEGORIES\n"
                                         "def f():\n    from ..analyze.idle_gaps import device_gaps\n"
                                         "    from ..compare import diff\n")
    (src / "trace" / "y.py").write_text("def f():\n    from ..ingest.kineto import load\n    from ..util import atomic\n")
    (src / "vocab.py").write_text("from . import __version__\n")
    (src / "collect" / "m.py").write_text("from ..ingest import kineto\ndef f():\n    from ..app import report\n"
                                          "    from ..report import x\n    from . import journal\n"
                                          "    import inferscope.run_command\n")
    (src / "collect" / "_site" / "s.py").write_text("def f():\n    from ...analyze import pipeline\n")
    assert _layer_violations(src) == {
        "report/x.py": ["inferscope.analyze.breakdown", "inferscope.analyze.idle_gaps", "inferscope.compare"],
        "trace/y.py": ["inferscope.ingest.kineto"], "vocab.py": ["inferscope.__version__"],
        "collect/m.py": ["inferscope.app", "inferscope.report", "inferscope.run_command"],
        "collect/_site/s.py": ["inferscope.analyze"]}
