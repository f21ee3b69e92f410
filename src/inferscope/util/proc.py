"""Process helpers shared by the runner (waiting for followed children) and the report writer
(cleaning stale temporaries of killed writers)."""
from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (it may belong to another user: EPERM counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
