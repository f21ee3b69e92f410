"""Library mode (scope() without `inferscope run`) must leave the process exit clean."""
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="torch not installed (extra [torch])")

SCRIPT = r"""
import torch
from inferscope import scope
torch.set_num_threads(1)
m = torch.nn.Linear(64, 64)
for _ in range(50):
    with scope("step"):
        m(torch.randn(8, 64))
print("done")
"""


@pytest.mark.live
def test_scope_in_plain_python_exits_cleanly(tmp_path):
    for _ in range(2):   # the abort was intermittent in principle; it reproduced every time here
        r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "done" in r.stdout
        assert "terminate called" not in r.stderr
