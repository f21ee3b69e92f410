"""Findings, the verdict, tables, about, and ``Report`` itself (report.json); ``from_dict`` and
``json_schema``."""

import inspect
from typing import Any, Optional

import msgspec

from ..errors import ConfigError
from .base import Category, Num, SCHEMA_VERSION, Source, Tool, WindowInfo, _S
from .contention import Contention, GcPauses
from .counters import CountersSection
from .deep_dive import KernelDeepDive
from .gpu import Copies, Gpu, IdleGaps, Kernels, NsysExtras, Nvtx, PerPid, Syncs
from .host import Children, CollectionCost, CpuSampling, Culprits, OneOffCalls, Phases, RunPhases, Threads, TokenizerSplit
from .llm import Efficiency, Llm, Model


class Finding(_S):
    id: str
    severity: str                       # high | medium | low | info
    title: str
    evidence: dict[str, Any]
    evidence_source: dict[str, str]     # evidence key -> result path it was read from
    evidence_derived: dict[str, str]    # evidence key -> formula over cited values
    evidence_text: list[str]
    suggestion: str
    # predicted saving if the suggestion is followed (analyze/whatif.py); null when not actionable
    expected_saving_ms: Num = None
    expected_saving_pct: Num = None         # of the window's e2e
    saving_low_ms: Num = None
    saving_high_ms: Num = None
    saving_model: Optional[str] = None      # remove | overlap | scale | replace
    saving_basis: Optional[str] = None      # the formula with the values it used
    saving_categories: Optional[list[str]] = None   # breakdown categories the saved time comes from
    # with an llm section (requests or generated tokens in the window; analyze/whatif.py llm_terms)
    expected_saving_request_ms: Num = None  # per request: saving x mean request latency / e2e
    expected_tokens_per_s: Num = None       # generated tokens / (e2e - saving), beside llm.tokens_per_s.generated


class WhatIf(_S):
    """The top predicted savings together, double-counted time removed (analyze/whatif.py summary)."""
    findings: list[str]
    combined_saving_ms: float
    combined_saving_pct: float
    combined_low_ms: float
    combined_high_ms: float
    sum_saving_ms: float                    # the plain sum, for comparison (>= combined)
    rule: str


class Verdict(_S):
    id: str
    title: str
    confidence: float
    confidence_basis: str
    evidence: list[str]
    shares_pct: dict[str, float] = {}


class Table(_S):
    columns: list[str]
    rows: list[list[Any]]


class About(_S):
    analysis_ms: float
    events: int
    collection: Optional[dict[str, Any]] = None
    load_ms: Num = None


# dict=True: an instance may also carry ``views`` (result/views.py: what report.html and the CSVs draw beyond
# report.json, attached by analyze/views.py), an attribute that is never encoded (the docstring is the schema's
# description: it stays as it is).
class Report(_S, dict=True):
    """report.json"""
    schema_version: int
    tool: Tool
    source: Source
    window: WindowInfo
    e2e_ms: float
    breakdown: list[Category]
    breakdown_rule: str
    gpu: Optional[Gpu]
    idle_gaps: Optional[IdleGaps]
    kernels: Kernels
    copies: Copies
    syncs: Syncs
    phases: Phases
    one_off_calls: OneOffCalls
    cpu_sampling: Optional[CpuSampling]
    findings: list[Finding]
    verdict: Verdict
    warnings: list[str]
    limitations: list[str]
    tables: dict[str, Table]
    about: About
    nvtx: Optional[Nvtx] = None
    contention: Optional[Contention] = None
    per_pid: Optional[PerPid] = None
    nsys_extras: Optional[NsysExtras] = None
    collection_cost: Optional[CollectionCost] = None
    counters: Optional[CountersSection] = None
    efficiency: Optional[Efficiency] = None
    llm: Optional[Llm] = None
    model: Optional[Model] = None
    run_phases: Optional[RunPhases] = None
    culprits: Optional[Culprits] = None
    threads: Optional[Threads] = None
    children: Optional[Children] = None
    kernel_deep_dive: Optional[KernelDeepDive] = None
    gc_pauses: Optional[GcPauses] = None
    tokenizer: Optional[TokenizerSplit] = None
    what_if: Optional[WhatIf] = None

    def to_dict(self) -> dict:
        """The JSON form (what report.json holds)."""
        return msgspec.to_builtins(self)

    def table(self, name: str) -> Table:
        return self.tables[name]

    def to_pandas(self) -> dict:
        """Every table as a pandas DataFrame, by name (``breakdown``, ``kernels``, ``syncs`` ...).
        Needs pandas (``pip install pandas``)."""
        try:
            import pandas as pd
        except ImportError:
            raise ConfigError("Report.to_pandas() needs pandas: pip install pandas") from None
        return {name: pd.DataFrame(t.rows, columns=t.columns) for name, t in self.tables.items()}


def from_dict(d: dict) -> Report:
    """Validate a result dict against the model (unknown keys are an error) and type it."""
    return msgspec.convert(d, Report)


def _clean_descriptions(x):
    """Every ``description`` (a class docstring) with its indentation removed, as inspect.cleandoc does: msgspec 0.23
    dedents docstrings, 0.22 kept them as written, and the committed schema must not depend on which is installed."""
    if isinstance(x, dict):
        return {k: inspect.cleandoc(v) if k == "description" and isinstance(v, str) else _clean_descriptions(v)
                for k, v in x.items()}
    if isinstance(x, list):
        return [_clean_descriptions(v) for v in x]
    return x


def json_schema() -> dict:
    """JSON Schema (draft 2020-12) of report.json, generated from ``Report``."""
    s = _clean_descriptions(msgspec.json.schema(Report))
    s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    s["title"] = f"InferScope report.json, schema_version {SCHEMA_VERSION}"
    return s
