"""The analysis window: which [start_ns, end_ns) every analysis looks at."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from .. import thresholds as T
from ..errors import ConfigError
from ..trace.kinds import GPU_WORK_KINDS, SpanKind
from ..trace.model import Trace, codes_in


@dataclass(frozen=True)
class Window:
    start_ns: int
    end_ns: int
    label: str = "whole trace"
    kind: str = "trace"   # trace | gpu | step | range | time

    @property
    def dur_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    @property
    def dur_ms(self) -> float:
        return self.dur_ns / 1e6

    def as_dict(self) -> dict:
        return {"start_ns": int(self.start_ns), "end_ns": int(self.end_ns), "label": self.label,
                "kind": self.kind, "dur_ms": round(self.dur_ms, 6)}


def window_from_report(d) -> Window | None:
    """The Window of a report.json ``window`` dict; None when it has no int start_ns/end_ns."""
    if not isinstance(d, dict) or not isinstance(d.get("start_ns"), int) or not isinstance(d.get("end_ns"), int):
        return None
    return Window(d["start_ns"], d["end_ns"], str(d.get("label", "whole trace")), str(d.get("kind", "trace")))


SCOPE_CAT = "inferscope.scope"
LLM_CAT = "inferscope.llm"        # live Hugging Face generate() calls (collect/llmhook.py)


def scope_extent(trace: Trace) -> tuple[int, int] | None:
    """First start to last end of the inferscope.scope() ranges of a live run, if any.

    A live run covers the whole process (interpreter start, imports, model load); when the
    program marks its inference with scope(), those ranges are what the user asked about.
    """
    cid = trace.strings.get(SCOPE_CAT)
    if cid < 0:
        return None
    s = trace.spans
    m = (s.kind == SpanKind.ANNOTATION) & (s.cat == cid) & (s.end_ns > s.start_ns)
    if not m.any():
        return None
    return int(s.start_ns[m].min()), int(s.end_ns[m].max())


def scope_warmup(trace: Trace) -> dict | None:
    """The warm-up call of a repeated scope() name, when it opens the scope extent and is an outlier.

    Rule (thresholds.SCOPE_WARMUP_FACTOR): the earliest scope range has a name that repeats at least
    SCOPE_WARMUP_MIN_LATER more times and lasts more than the factor x the median of the later calls;
    never a request (``is_request``).
    Returns {name, start_ns, end_ns, ms, typical_ms, next_start_ns} or None.
    """
    cid = trace.strings.get(SCOPE_CAT)
    if cid < 0:
        return None
    s = trace.spans
    idx = np.flatnonzero((s.kind == SpanKind.ANNOTATION) & (s.cat == cid) & (s.end_ns > s.start_ns))
    if len(idx) < 1 + T.SCOPE_WARMUP_MIN_LATER:
        return None
    idx = idx[np.argsort(s.start_ns[idx], kind="stable")]
    first = int(idx[0])
    if is_request(trace, first):    # a request's latency belongs in its percentiles, warm-up or not
        return None
    same = idx[s.name[idx] == s.name[first]]
    later = same[1:]
    if len(later) < T.SCOPE_WARMUP_MIN_LATER:
        return None
    d0 = int(s.end_ns[first] - s.start_ns[first])
    typical = float(np.median((s.end_ns[later] - s.start_ns[later]).astype(np.float64)))
    if not (typical > 0 and d0 > T.SCOPE_WARMUP_FACTOR * typical):
        return None
    rest = idx[s.start_ns[idx] >= s.end_ns[first]]
    if len(rest) == 0:
        return None
    return {"name": trace.strings[int(s.name[first])], "start_ns": int(s.start_ns[first]), "end_ns": int(s.end_ns[first]),
            "ms": d0 / 1e6, "typical_ms": typical / 1e6, "next_start_ns": int(s.start_ns[rest].min())}


def is_request(trace: Trace, i: int) -> bool:
    """A scope range the user declared a request: scope("request") or scope(..., tokens=/batch=)."""
    s = trace.spans
    if trace.strings[int(s.name[i])] == "request":
        return True
    d = int(s.detail[i])
    if d < 0 or '"request"' not in trace.strings[d]:
        return False
    try:
        v = json.loads(trace.strings[d])
    except ValueError:
        return False
    return isinstance(v, dict) and v.get("request") is True


def root_pid(trace: Trace) -> int | None:
    """The profiled program's own process in a live run (followed children have other pids)."""
    pid = (trace.meta.get("collection") or {}).get("pid")
    return int(pid) if isinstance(pid, int) else None


def process_start_ns(trace: Trace) -> int | None:
    """A live run's process start on the trace clock (collect/session.py meta), if recorded."""
    c = trace.meta.get("collection")
    v = c.get("process_start_ns") if isinstance(c, dict) else None
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


MAIN_START_CAT = "inferscope.run"     # collect/bootstrap.py: the MARK at the start of the user's main module
MAIN_START_NAME = "main_start"


def main_start_ns(trace: Trace) -> int | None:
    """When the program's main module (script, -m module, -c command) started running, on the trace clock: the
    MARK collect/bootstrap.py records at CPython's ``cpython.run_*`` audit event, if recorded (the earliest one:
    followed children record their own)."""
    cid, nid = trace.strings.get(MAIN_START_CAT), trace.strings.get(MAIN_START_NAME)
    if cid < 0 or nid < 0:
        return None
    s = trace.spans
    m = (s.kind == SpanKind.MARK) & (s.cat == cid) & (s.name == nid)
    root = root_pid(trace)
    if root is not None:
        m &= trace.tracks.pid[s.track] == root
    return int(s.start_ns[m].min()) if m.any() else None


def run_end_ns(trace: Trace) -> int | None:
    """When a live run's collection stopped, on the trace clock (collect/session.py meta), if recorded."""
    c = trace.meta.get("collection")
    v = c.get("run_end_ns") if isinstance(c, dict) else None
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def generate_extent(trace: Trace) -> tuple[int, int] | None:
    """First start to last end of the recorded generate() calls of a live run (no scope() ranges)."""
    cid = trace.strings.get(LLM_CAT)
    gid = trace.strings.get("hf.generate")
    if cid < 0 or gid < 0:
        return None
    s = trace.spans
    m = (s.kind == SpanKind.ANNOTATION) & (s.cat == cid) & (s.name == gid) & (s.end_ns > s.start_ns)
    if not m.any():
        return None
    return int(s.start_ns[m].min()), int(s.end_ns[m].max())


_TIME_RE = re.compile(r"^\s*(\d{1,15}(?:\.\d{0,9})?)\s*:\s*(\d{1,15}(?:\.\d{0,9})?)\s*$")


def available_windows(trace: Trace, limit: int = 200) -> list[str]:
    """The --window values this trace accepts: all, gpu (if any), step:1..N, step/range names."""
    s = trace.spans
    out = ["all"]
    if codes_in(s.kind, [int(k) for k in GPU_WORK_KINDS]).any():
        out.append("gpu")
    nsteps = int((s.kind == SpanKind.STEP).sum())
    if nsteps:
        out.append(f"step:1..{nsteps}" if nsteps > 1 else "step:1")
    cand = np.flatnonzero(codes_in(s.kind, [SpanKind.STEP, SpanKind.ANNOTATION]))
    ids, counts = np.unique(s.name[cand], return_counts=True)
    for i, c in zip(ids.tolist()[:limit], counts.tolist()[:limit]):
        nm = trace.strings[int(i)]
        if nm:
            out.append(nm if c == 1 else f"{nm} (x{c}: {nm}:1..{nm}:{c})")
    if len(ids) > limit:
        out.append(f"... {len(ids) - limit} more")
    out.append("START_MS:END_MS")
    return out


def _unknown(spec: str, why: str, trace: Trace) -> ConfigError:
    names = available_windows(trace, limit=12)
    return ConfigError(f"--window {spec}: {why}; valid: {', '.join(names)} (all of them: --list-windows)")


def resolve_window(trace: Trace, spec: str | None, run_phases: dict | None = None) -> Window:
    """Default: the steady state (``analyze/run_phases.py``: start-up and teardown found by rules
    relative to the trace are left out); the whole trace when neither is found.

    Live runs whose program used inferscope.scope() default to the extent of those ranges; without
    them, to the extent of the Hugging Face generate() calls recorded (collect/llmhook.py).
    spec: 'all' | 'gpu' | 'step:N' | 'START_MS:END_MS' | '<range name>[:k]' (k-th occurrence, 1-based)
    run_phases: the result of ``run_phases.run_phases(trace)``, needed for the default (spec None; passed in:
    run_phases.py reads this module, so this module never imports it).
    """
    lo, hi = trace.bounds_ns()
    ps0 = process_start_ns(trace)
    run0 = ps0 if ps0 is not None and ps0 < lo else lo       # where --window all starts (below)
    whole = f"--window all: the whole {'run' if run0 < lo else 'trace'}, {(hi - run0) / 1e6:,.1f} ms"

    def _of(a: int, b: int) -> str:          # which part of the trace the window is (issue 47: not 'whole run')
        return f"{(b - a) / 1e6:,.1f} ms from +{(a - lo) / 1e6:,.1f} ms, first start to last end"
    if spec is None:
        sc = scope_extent(trace)
        if sc is not None:
            wu = scope_warmup(trace)
            if wu is not None:
                return Window(wu["next_start_ns"], sc[1],
                              f"inferscope.scope() ranges after the warm-up call of {wu['name']!r} "
                              f"({_of(wu['next_start_ns'], sc[1])}; the warm-up call, {wu['ms']:,.1f} ms vs a typical "
                              f"{wu['typical_ms']:,.1f} ms, left out; --window {wu['name']}:1: that call; {whole})", "scopes")
            return Window(sc[0], sc[1], f"inferscope.scope() ranges ({_of(sc[0], sc[1])}; {whole})", "scopes")
        ge = generate_extent(trace)
        if ge is not None:
            return Window(ge[0], ge[1], f"generate() calls ({_of(ge[0], ge[1])}; {whole})", "scopes")
        if run_phases is None:
            raise TypeError("resolve_window(trace, None) needs run_phases=run_phases.run_phases(trace)")
        if run_phases.get("cut"):
            cut = [f"{w} {run_phases[k]['ms']:,.1f} ms" for k, w in (("startup", "start-up"), ("teardown", "teardown"))
                   if run_phases.get(k)]
            n = run_phases.get("steady_steps")
            return Window(run_phases["steady_start_ns"], run_phases["steady_end_ns"],
                          "steady state (" + " and ".join(cut) + " left out" + (f"; {n} steady steps remain" if n else "")
                          + f"; {whole})", "steady")
        kept = run_phases.get("not_cut") or []
        if kept and spec is None:
            lo_, hi_ = trace.bounds_ns()
            why = "; ".join(f"{'start-up' if k['part'] == 'startup' else 'teardown'} {k['ms']:,.1f} ms ({k['rule']}) "
                            f"not cut: {k['reason']}" for k in kept)
            return Window(lo_, hi_, f"whole trace ({why})", "trace")
    if spec is None or spec.strip().lower() in ("", "all", "trace"):
        ps = process_start_ns(trace)
        if ps is not None and (ps < lo or lo == hi == 0):
            end = max(hi, run_end_ns(trace) or 0)
            if lo == hi == 0 and end > ps:   # a run too short for one sample: all of it is 'other'
                return Window(ps, end, f"whole run from the process start ({(end - ps) / 1e6:,.1f} ms, "
                              "no sample taken: 'other')", "trace")
            if lo < hi:
                return Window(ps, hi, f"whole run from the process start ({(lo - ps) / 1e6:,.1f} ms of "
                              "interpreter start-up before the first sample, not sampled: 'other')", "trace")
        return Window(lo, hi, "whole trace", "trace")
    spec = spec.strip()
    s = trace.spans
    if spec.lower() == "gpu":
        m = codes_in(s.kind, [int(k) for k in GPU_WORK_KINDS])
        if not m.any():
            raise ConfigError("--window gpu: the trace has no GPU activity")
        return Window(int(s.start_ns[m].min()), int(s.end_ns[m].max()), "GPU-active span", "gpu")
    m = _TIME_RE.match(spec)
    if m:
        a, b = float(m.group(1)), float(m.group(2))
        if b <= a:
            raise ConfigError(f"--window {spec}: end must be after start")
        start = min(hi, lo + int(round(a * 1e6)))
        return Window(start, max(start, min(hi, lo + int(round(b * 1e6)))), f"{a:g}-{b:g} ms", "time")
    step_idx = None
    name, occ = spec, 1
    if spec.lower().startswith("step:"):
        try:
            step_idx = int(spec.split(":", 1)[1])
        except ValueError:
            raise _unknown(spec, "expected step:N", trace) from None
    elif re.match(r"^.+:\d+$", spec) and trace.strings.get(spec) < 0:
        name, k = spec.rsplit(":", 1)
        occ = int(k)
    cand = codes_in(s.kind, [SpanKind.STEP, SpanKind.ANNOTATION])
    if step_idx is not None:
        idx = np.flatnonzero(s.kind == SpanKind.STEP)
        if not (1 <= step_idx <= len(idx)):
            raise _unknown(spec, f"the trace has {len(idx)} steps", trace)
        i = int(idx[step_idx - 1])
        return Window(int(s.start_ns[i]), int(s.end_ns[i]), trace.name_of(i), "step")
    sid = trace.strings.get(name)
    idx = np.flatnonzero(cand & (s.name == sid)) if sid >= 0 else np.zeros(0, dtype=np.int64)
    if len(idx) == 0:
        raise _unknown(spec, f"no step or range named {name!r} in the trace", trace)
    if occ > len(idx):
        raise _unknown(spec, f"{name!r} occurs {len(idx)} times", trace)
    i = int(idx[occ - 1])
    return Window(int(s.start_ns[i]), int(s.end_ns[i]), name if occ == 1 else f"{name} #{occ}",
                  "step" if s.kind[i] == SpanKind.STEP else "range")
