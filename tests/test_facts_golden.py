"""Golden recorded runs (tests/data/facts/, scripts/facts_goldens.py): the live sampler's facts from five zoo programs,
with each program's self-timed truth beside them, replayed by the current rules in milliseconds - no live run, no
timing, no band.

- the replay reproduces the runs the live sampler decided, span for span (the rules are deterministic in their facts):
  the ticks' own rules (sampler_tick._tick_class, _queue) on each tick's observations, then the resolver's (rules.py);
- the shares it gives are the recorded ones exactly: a rule change fails here first, and `python
  scripts/facts_goldens.py` tells whether each share moved toward the program's truth or away from it before
  `--write` takes the new ones.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from inferscope.collect.replay import replay_trace
from inferscope.trace import native
from inferscope.trace.kinds import SpanKind

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import facts_goldens as G  # noqa: E402

EXPECTED = json.loads(G.EXPECTED.read_text())


def _runs(trace) -> dict:
    """tid -> sorted (start, end, class, function, ticks) of the trace's CPU_SAMPLE runs."""
    s = trace.spans
    out: dict = {}
    for i in np.flatnonzero(s.kind == int(SpanKind.CPU_SAMPLE)).tolist():
        det = int(s.detail[i])
        out.setdefault(int(trace.tracks.tid[s.track[i]]), []).append(
            (int(s.start_ns[i]), int(s.end_ns[i]), trace.name_of(i), trace.strings[det] if det >= 0 else None,
             int(s.correlation[i])))
    return {k: sorted(v) for k, v in out.items()}


@pytest.mark.parametrize("name", sorted(G.GOLDENS))
def test_replay_reproduces_the_recorded_runs(name):
    t = native.load(G.paths(name)["trace"])
    assert t.facts, f"{name}: the golden trace has no recorded facts"
    r, n = replay_trace(t)
    assert n["runs_replayed"] == n["runs_recorded"] > 0
    assert _runs(r) == _runs(t)
    # version 2: the ticks' own rules replayed on their observations queue the very ticks each drain decided
    assert n["drains"] > 0 and n["divergent_drains"] == 0, n


@pytest.mark.parametrize("name", sorted(G.GOLDENS))
def test_replayed_shares_are_the_recorded_ones(name):
    got = G.score(name)
    want = EXPECTED[name]
    lines = [f"{lab}: truth {t:.2f}, expected {want.get(lab, [t, float('nan')])[1]:.2f}, now {m:.2f}"
             for lab, (t, m) in got.items() if abs(m - want.get(lab, [t, float("inf")])[1]) > 1e-9]
    assert set(got) == set(want) and not lines, (
        f"{name}: the rules give other shares on the recorded facts (run `python scripts/facts_goldens.py` to see "
        "whether they moved toward the truth, `--write` to accept):\n" + "\n".join(lines))


def test_the_goldens_exercise_every_rule_that_lays_time():
    """Every rule that lays a part (rules.put, and the ticks' own rules, tick_rules.py) lays some in the goldens: a
    change to any of them shows up here; the rules that lay nothing themselves (python_context, keep_current,
    perf_cpu_share, count_samples, native_fractions) feed split_interval / decided_class, also exercised."""
    laid = set()
    for name in G.GOLDENS:
        laid |= set(replay_trace(native.load(G.paths(name)["trace"]))[1]["rules_ms"])
    from inferscope.collect.tick_rules import TICK_RULES
    assert {"off_cpu_part", "run_queue_part", "io_kernel_time", "fault_kernel_part", "split_interval",
            "decided_class"} <= laid, laid
    assert laid & {f.__name__ for f in TICK_RULES}, laid     # (a tick's own rule laying a run at once)
