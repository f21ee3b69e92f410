"""Token counts of a window without request ranges, from serving step annotations (analyze/llm.py ``_steps``).

A vLLM / SGLang trace records steps, not requests: ``execute_N_context_C(sq..)_generation_G(sq..)`` and
SGLang ``step[DECODE bs=N]``.  The names say how many sequences each step advanced, so the tokens are DERIVED
from the annotation names, not measured:
  * generated tokens: one per decode sequence per step - G of ``_generation_G(...)``, N of ``step[DECODE bs=N]``
    (the token each decode sequence samples at the end of the step).  The first token a context (prefill)
    request samples when its prompt is complete is not counted: the name does not say whether the prompt was
    completed or only one chunk of it computed (chunked prefill); with speculative decoding (generation
    ``sq`` > G) accepted draft tokens are not counted either - both make the count a lower bound;
  * prompt tokens: the context part's ``sq`` (prompt tokens computed in the step); ``step[PREFILL|EXTEND|MIXED]``
    names no token count, so prompt tokens are unknown when such a step is counted.
Only steps wholly inside the window count (a step cut by a window edge is left out, with a warning); tokens/s =
count / window seconds, as for requests.  Unknown (null) when a counted step is not a serving annotation
(``hf.forward`` ranges have their requests; a phase-named range says no batch).
"""
from __future__ import annotations

import numpy as np

from . import select
from .window import Window

BASIS = ("serving step annotations (derived from their names, not measured): generated = one token per decode "
         "sequence per step (execute_..._generation_G: G; step[DECODE bs=N]: N; a prefill's first token and accepted "
         "draft tokens not counted: a lower bound), prompt = the context part's sq (query tokens computed)")


def _counts(r: dict) -> tuple[int | None, int | None]:
    """(prompt, generated) tokens of one step; None where its name does not say."""
    if r["source"] == "exec":
        return r["context_sq"], r["generation"]
    if r["source"] == "sgl":
        mode = r["sgl_mode"]
        if mode == "DECODE":
            return 0, r["batch"]
        if mode == "IDLE":
            return 0, 0
        return None, 0 if mode in ("PREFILL", "EXTEND") else None
    return None, None


def step_tokens(steps: list[dict], window: Window) -> tuple[dict | None, list[str]]:
    """{"prompt", "generated", "steps", "basis"} over the serving steps wholly inside the window (None when there
    is none), and warnings."""
    warnings: list[str] = []
    held = select.inside(np.asarray([r["start_ns"] for r in steps]), np.asarray([r["end_ns"] for r in steps]), window)
    inside = [r for r, k in zip(steps, held.tolist()) if k]
    cut = len(steps) - len(inside)
    if not any(r["source"] in ("exec", "sgl") for r in inside):
        return None, warnings
    if cut:
        warnings.append(f"tokens from serving steps: {cut} step(s) cut by a window edge are not counted")
    counts = [_counts(r) for r in inside]
    unknown = [r["name"][:80] for r, (_, g) in zip(inside, counts) if g is None]
    if unknown:
        warnings.append(f"tokens/s unknown: {len(unknown)} step(s) in the window name no generated-token count "
                        f"(first: {unknown[0]!r})")
    gen = None if unknown else int(sum(g for _, g in counts))
    prompt = None if unknown or any(p is None for p, _ in counts) else int(sum(p for p, _ in counts))
    if any(r["source"] == "exec" and r["kind"] != "decode" for r in inside):
        warnings.append("generated tokens from serving steps leave out the first token of the context (prefill) "
                        "requests: the step names do not say which prompts were completed (chunked prefill)")
    return {"prompt": prompt, "generated": gen, "steps": len(inside), "basis": BASIS}, warnings
