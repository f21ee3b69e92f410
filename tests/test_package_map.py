"""ARCHITECTURE.md's package map is generated from the code (scripts/update_package_map.py): every package says
what it holds in its __init__ docstring, and the committed map is the current one."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import update_package_map as upm  # noqa: E402


def test_every_package_and_root_module_says_what_it_holds():
    pkgs = [p for p in upm.PKG.iterdir() if (p / "__init__.py").is_file()]
    assert len(pkgs) >= 8
    missing = [p.name for p in pkgs if not upm.first_sentence(p / "__init__.py")]
    missing += [m.name for m in upm.PKG.glob("*.py") if m.name not in ("__init__.py", "__main__.py")
                and not upm.first_sentence(m)]
    assert not missing, missing


def test_committed_map_is_current():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "update_package_map.py"), "--check"])
    assert r.returncode == 0, "ARCHITECTURE.md's package map is stale: run python scripts/update_package_map.py"


def test_check_sees_a_stale_map(tmp_path, monkeypatch):
    arch = tmp_path / "ARCHITECTURE.md"
    arch.write_text(f"# x\n{upm.BEGIN}\n| stale |\n{upm.END}\n")
    monkeypatch.setattr(upm, "ROOT", tmp_path)
    monkeypatch.setattr(sys, "argv", ["x", "--check"])
    assert upm.main() == 1
    monkeypatch.setattr(sys, "argv", ["x"])
    assert upm.main() == 0 and "| `analyze/` |" in arch.read_text()
    monkeypatch.setattr(sys, "argv", ["x", "--check"])
    assert upm.main() == 0
    arch.unlink()       # not a report: test_zz_reports_written reads every .md the suite left
