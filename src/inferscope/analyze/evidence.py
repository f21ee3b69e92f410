"""Evidence for findings: every number a finding states is read from a result path (cited) or derived
from cited values by a stated formula (``Evidence``), plus the accessors the finding rules share
(breakdown rows, culprits by category, severity, configured alert levels).  The rules are in
diagnosis_gpu.py, diagnosis_gpu_counters.py, diagnosis_gpu_efficiency.py, diagnosis_host.py,
diagnosis_serving.py, diagnosis_cpu.py and diagnosis_blocking.py; diagnosis.py runs them and decides
the verdict.
"""
from __future__ import annotations

import re
from typing import Any

from .. import thresholds as T
from .kernels import short_kernel_name

_OVERRIDES: dict = {}    # alert levels from the configuration while findings_for runs (mutated in place)


def _t(name: str) -> float:
    """A counter alert level: the configured value (.inferscope.yaml / INFERSCOPE_*) or thresholds.py's."""
    return float(_OVERRIDES.get(name, getattr(T, name)))


def _t_src(name: str) -> str:
    return f"configured {name.lower()}" if name in _OVERRIDES else f"thresholds.{name}"


SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2, "info": 3}

_STEP = re.compile(r"([^.\[]+)(?:\[([^\]]+)\])?")
_ROW_KEYS = ("category", "name", "class", "api", "kind", "stage", "op")


def get_path(res: dict, path: str) -> Any:
    """Value at a result path: dotted keys; ``key[i]`` indexes a list, ``key[name]`` picks the
    list row whose category/name/class/api/kind is ``name``.  None when absent."""
    cur: Any = res
    for part in path.split("."):
        m = _STEP.fullmatch(part)
        if m is None or not isinstance(cur, dict):
            return None
        cur = cur.get(m.group(1))
        sel = m.group(2)
        if sel is not None:
            if not isinstance(cur, list):
                return None
            if sel.lstrip("-").isdigit():
                i = int(sel)
                cur = cur[i] if -len(cur) <= i < len(cur) else None
            else:
                cur = next((r for r in cur if isinstance(r, dict) and any(r.get(k) == sel for k in _ROW_KEYS)), None)
    return cur


class Evidence:
    """Evidence of one finding: every value read from a result path (cited) or derived from cited
    values by a formula stated next to it."""

    def __init__(self, res: dict):
        self.res = res
        self.values: dict[str, Any] = {}
        self.sources: dict[str, str] = {}
        self.derived: dict[str, str] = {}

    def cite(self, key: str, path: str, nd: int = 3, default=0.0):
        v = get_path(self.res, path)
        if v is None:
            v = default
        self.values[key] = round(float(v), nd) if isinstance(v, float) else v
        self.sources[key] = path
        return v

    def cite_all(self, base: str, **fields) -> list:
        """Cite several fields of one section: ``key=field`` or ``key=(field, digits)``; values in order."""
        out = []
        for key, f in fields.items():
            field, nd = (f, 3) if isinstance(f, str) else f
            out.append(self.cite(key, f"{base}.{field}", nd))
        return out

    def derive(self, key: str, value, formula: str, nd: int = 3):
        self.values[key] = round(float(value), nd) if isinstance(value, float) else value
        self.derived[key] = formula
        return value

    def finding(self, id: str, severity: str, title: str, text: list[str], suggestion: str) -> dict:
        return {"id": id, "severity": severity, "title": title, "evidence": self.values,
                "evidence_source": self.sources, "evidence_derived": self.derived,
                "evidence_text": text, "suggestion": suggestion}


def _row(res: dict, cat: str) -> dict:
    return next((r for r in res["breakdown"] if r["category"] == cat), {"ms": 0.0, "pct": 0.0, "parts": []})


def _pct(res: dict, cat: str) -> float:
    return float(_row(res, cat)["pct"])


def _ms(res: dict, cat: str) -> float:
    return float(_row(res, cat)["ms"])


HOST_CATEGORIES = ("sync_wait", "cpu_preprocessing", "framework_overhead", "waiting", "other")


# Culprits: where a finding's time is, by name (result['culprits'], kernels.top, syncs.top).
# (path, name field, ms field, pct field, what the pct is of, file field)
_FN = lambda cls: (f"culprits.functions[{cls}]", "function", "self_ms", "self_pct", "of the window (self time)", "file")
_OP = ("culprits.ops[0]", "name", "self_ms", "self_pct", "of the window (op self time)", None)
_API = ("culprits.apis[cuda]", "name", "total_ms", "pct_of_window", "of the window (calls summed)", None)
_OS = ("culprits.apis[os]", "name", "total_ms", "pct_of_window", "of the window (calls summed over threads)", None)
_KERNEL = ("kernels.top[0]", "name", "sum_ms", "share_pct", "of kernel time", None)
_SYNC = ("syncs.top[0]", "api", "ms", None, "", None)
CULPRIT_SOURCES = {
    "tokenization": [_FN("tokenization")],
    "preprocessing": [_FN("preprocessing")],
    "user_code": [_FN("user_code")],
    "cpu_preprocessing": [_FN("tokenization"), _FN("preprocessing"), _FN("user_code")],
    "framework_overhead": [_OP, _API, _FN("framework")],
    "cpu_compute": [_FN("cpu_compute"), _OP],
    "waiting": [_FN("waiting"), _OS],
    "sync_wait": [_SYNC, _API],
    "gpu_compute": [_KERNEL],
    "other": [_API, _OP, _KERNEL, ("culprits.functions[0]",) + _FN("x")[1:]],
}


def _culprit(e: "Evidence", res: dict, sources: list, key: str = "culprit") -> str | None:
    """Cite the first culprit found among ``sources``; returns its sentence (name, file, ms, share)."""
    for path, name_f, ms_f, pct_f, pct_of, file_f in sources:
        row = get_path(res, path)
        if not isinstance(row, dict) or not row.get(name_f):
            continue
        name = e.cite(key, f"{path}.{name_f}")
        ms = e.cite(f"{key}_ms", f"{path}.{ms_f}")
        where = f" ({row[file_f]})" if file_f and row.get(file_f) else ""
        pct = e.cite(f"{key}_pct", f"{path}.{pct_f}", 2) if pct_f else None
        shown = short_kernel_name(name) if path.startswith("kernels.") else name
        return (f"Culprit: {str(shown)[:120]}{where}: {ms:,.1f} ms" + (f", {pct:.1f}% {pct_of}" if pct is not None else "") + ".")
    return None


def _with_culprit(e: "Evidence", res: dict, cat: str, txt: list[str], key: str = "culprit") -> str | None:
    c = _culprit(e, res, CULPRIT_SOURCES.get(cat, []), key)
    if c:
        txt.append(c)
    return c


def _sev(value: float, medium: float, high: float, below: str | None = None) -> str | None:
    return "high" if value >= high else "medium" if value >= medium else below


def _user_code_pct(res: dict) -> float:
    return float(next((p["pct"] for p in _row(res, "cpu_preprocessing")["parts"] if p["name"] == "user_code"), 0.0))


def _off_cpu_ms(res: dict) -> float:
    """The waiting category without its run-queue part (ms): what blocking calls, children or the GIL can explain."""
    rq = next((p["ms"] for p in _row(res, "waiting")["parts"] if p["name"] == "run_queue"), 0.0)
    return _ms(res, "waiting") - float(rq)


def _run_queue_pct(res: dict) -> float:
    """The waiting category's run-queue part (live runs: runnable, waiting for a CPU), % of the window."""
    return float(next((p["pct"] for p in _row(res, "waiting")["parts"] if p["name"] == "run_queue"), 0.0))


def _gil_explains_waiting(res: dict) -> bool:
    g = (res.get("contention") or {}).get("gil") or {}
    wait_ms = _off_cpu_ms(res)
    return wait_ms > 0 and g.get("pct_of_window", 0) >= T.GIL_WAIT_LOW_PCT and \
        g.get("waiting_while_python_ms", 0) >= T.GIL_WAIT_EXPLAINED_FRACTION * wait_ms


def _children_explain_waiting(res: dict) -> bool:
    ch = res.get("children") or {}
    wait_ms = _off_cpu_ms(res)
    if wait_ms <= 0:
        return False
    if ch.get("waiting_on_children_ms") is not None:      # followed children: measured overlap
        return ch["waiting_on_children_ms"] >= T.CHILD_WAIT_EXPLAINED_FRACTION * wait_ms
    return ch.get("cpu_s_in_window", 0) * 1e3 >= T.CHILD_WAIT_EXPLAINED_FRACTION * wait_ms
