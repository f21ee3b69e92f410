"""LLM requests (analyze/llm.py): one row per outermost request range, with its token times, the class name of
an exception that left it (``error``), its cache hit (``cache_hit``) and when its first work started."""
from __future__ import annotations

import json

import numpy as np

from ..trace.kinds import SpanKind
from ..trace.model import Trace
from .select import inside
from .window import Window


def detail(strs: list, d: int) -> dict:
    if d < 0:
        return {}
    try:
        v = json.loads(strs[d])
        return v if isinstance(v, dict) else {}
    except (ValueError, TypeError):
        return {}


def requests(trace: Trace, window: Window, steps: list[dict]) -> list[dict]:
    """One row per outermost request range.  A request nested in another (``parent`` in its detail: the
    enclosing ``scope(..., tokens=/batch=)`` request's ``rid``, as recorded live) is part of it, not a second
    request: the outer range times it, and counts it lacks (batch, prompt, generated tokens) come from the
    ``generate()`` calls inside it.  Token marks carrying a ``rid`` belong to that request (overlapping
    requests of asyncio tasks on one thread keep their own marks); marks without one go by thread and time."""
    s = trace.spans
    strs = trace.strings.as_list()
    ann = np.flatnonzero((s.kind == SpanKind.ANNOTATION) & inside(s.start_ns, s.end_ns, window)
                        & (s.detail >= 0))
    if not len(ann):
        return []
    cats = s.cat[ann]
    ok_cat = {i for i, x in enumerate(strs) if x in ("inferscope.llm", "inferscope.scope")}
    ann = ann[np.isin(cats, np.fromiter(ok_cat, dtype=np.int64, count=len(ok_cat)))] if ok_cat else ann[:0]
    marks = np.flatnonzero((s.kind == SpanKind.MARK) & (s.cat >= 0))
    tok_cat = {i for i, x in enumerate(strs) if x == "inferscope.token"}
    marks = marks[np.isin(s.cat[marks], np.fromiter(tok_cat, dtype=np.int64, count=len(tok_cat)))] if tok_cat else marks[:0]
    mark_rid = np.array([detail(strs, int(d)).get("rid", -1) if d >= 0 else -1 for d in s.detail[marks].tolist()],
                        dtype=np.int64)
    cand = []
    for i in ann.tolist():
        nm = strs[int(s.name[i])]
        d = detail(strs, int(s.detail[i]))
        if nm == "hf.forward" or not (nm == "hf.generate" or d.get("request")):
            continue
        cand.append((i, nm, d))
    rids = {d["rid"] for _, _, d in cand if isinstance(d.get("rid"), int)}
    parent_of = {d["rid"]: d.get("parent") for _, _, d in cand if isinstance(d.get("rid"), int)}

    def top(p):          # the outermost enclosing request present in the window
        seen = set()
        while isinstance(parent_of.get(p), int) and parent_of[p] in rids and p not in seen:
            seen.add(p)
            p = parent_of[p]
        return p
    inner: dict[int, list] = {}
    outer = []
    for i, nm, d in cand:
        p = d.get("parent")
        if isinstance(p, int) and p in rids:
            inner.setdefault(top(p), []).append((i, nm, d))
        else:
            outer.append((i, nm, d))
    out = []
    for i, nm, d in outer:
        t0, t1, tr = int(s.start_ns[i]), int(s.end_ns[i]), int(s.track[i])
        kids = inner.get(d.get("rid"), []) if isinstance(d.get("rid"), int) else []
        mine = {d["rid"]} | {k[2]["rid"] for k in kids if isinstance(k[2].get("rid"), int)} if isinstance(d.get("rid"), int) else set()
        by_rid = np.isin(mark_rid, np.fromiter(mine, dtype=np.int64, count=len(mine))) if mine else np.zeros(len(marks), bool)
        mk = marks[by_rid | ((mark_rid < 0) & (s.track[marks] == tr) & (s.start_ns[marks] >= t0) & (s.start_ns[marks] <= t1))]
        gens = [(int(s.start_ns[k]), int(s.end_ns[k]), int(s.track[k])) for k, knm, _ in kids if knm == "hf.generate"]
        if gens:       # the generate() calls inside the request: their steps, and the last one's end
            own = [r for r in steps if r["source"] == "hf" and any(g[2] == r["track"] and g[0] <= r["start_ns"] and r["end_ns"] <= g[1]
                                                                   for g in gens)]
            last = max(g[1] for g in gens)
        else:
            own = [r for r in steps if r["source"] == "hf" and r["track"] == tr and r["start_ns"] >= t0 and r["end_ns"] <= t1]
            last = t1
        if len(mk):
            times = np.sort(s.start_ns[mk]).astype(np.int64)
            basis = "mark_token() marks"
        elif own:
            times = np.array([r["start_ns"] for r in own[1:]] + [last], dtype=np.int64)
            basis = "forward starts (token sampled before each) and the request end"
        else:
            times = np.zeros(0, dtype=np.int64)
            basis = "no token times"
        kd = [k[2] for k in kids if k[1] == "hf.generate"]
        # first work: the first request range / generate() call or model step inside it (serving.py: queue wait)
        firsts = [int(s.start_ns[k]) for k, _, _ in kids] + [r["start_ns"] for r in own]
        row = {"name": nm, "start_ns": t0, "end_ns": t1, "batch": d.get("batch"),
               "prompt_tokens": d.get("prompt_tokens"), "generated_tokens": d.get("generated_tokens"),
               "model": d.get("model"), "token_times_ns": times, "basis": basis, "steps": own,
               "error": d["error"][:80] if isinstance(d.get("error"), str) else None,
               "cache_hit": d["cache_hit"] if isinstance(d.get("cache_hit"), bool) else None,
               "first_work_ns": min(firsts) if firsts else None}
        if kd:
            bs = {k.get("batch") for k in kd}
            if row["batch"] is None and len(bs) == 1:
                row["batch"] = bs.pop()
            gt = [k.get("generated_tokens") for k in kd]
            if row["generated_tokens"] is None and all(isinstance(g, int) for g in gt):
                row["generated_tokens"] = sum(gt)
            if row["prompt_tokens"] is None:
                row["prompt_tokens"] = kd[0].get("prompt_tokens")
            if row["model"] is None:
                row["model"] = kd[0].get("model")
        out.append(row)
    out.sort(key=lambda r: r["start_ns"])
    return out
