"""Serving-engine step names: one forward of the model as vLLM/SGLang annotate it.

Shared by the LLM view (``llm.py``: steps, batch and tokens from the name) and the run-phase rules
(``steady.py``: steps of a trace without ProfilerStep spans; ``startup_calls.py``: a long call inside a step
is steady work), so neither has to import the other.
"""
from __future__ import annotations

import re

# vLLM/TraceLens: execute_N_context_C(sq..sk..sqsq..sqsk..)_generation_G(sq..sk..sqsq..sqsk..)
EXEC_RE = re.compile(r"execute_(\d+)_context_(\d+)\(sq(\d+)sk(\d+)sqsq(\d+)sqsk(\d+)\)"
                     r"_generation_(\d+)\(sq(\d+)sk(\d+)sqsq(\d+)sqsk(\d+)\)")
# SGLang: step[DECODE bs=N] / step[PREFILL|EXTEND|MIXED|IDLE bs=N]
SGL_RE = re.compile(r"^step\[(DECODE|PREFILL|EXTEND|MIXED|IDLE)\s+bs=(\d+)\]$", re.I)
