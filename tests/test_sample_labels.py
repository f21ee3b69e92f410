"""Sampled functions grouped by function (line dropped), with their ticks and hottest line (issue 24 item 1).
Built through the live collector's own assembler, so the tick count travels as in a real run."""
import numpy as np
import pytest

from inferscope.analyze.culprits import culprits
from inferscope.analyze.sample_labels import function_keys, split_label, top_line
from inferscope.analyze.window import Window
from inferscope.collect.assemble import add_events
from inferscope.trace.builder import TraceBuilder

MS = 1_000_000


def _trace(events):
    b = TraceBuilder()
    add_events(b, events, pid=7, main_tid=1, thread_names={}, idle_tids=())
    return b.finalize()


def test_split_label():
    assert split_label("app/loop.py:Runner.step:42") == ("Runner.step", "app/loop.py", 42)
    assert split_label("app/loop.py:step") == ("step", "app/loop.py", None)
    assert split_label("import numpy") == ("import numpy", "", None)
    assert split_label("/x/y.py:<genexpr>:7") == ("<genexpr>", "/x/y.py", 7)


def test_functions_table_sums_runs_by_function_and_counts_ticks():
    # runs as the sampler emits them: (0, CPU_SAMPLE, tid, start, end, class, "file:func:line", "sample", ticks)
    runs = [("app.py:clean:10", 0, 30, 6), ("app.py:feat:20", 30, 40, 2), ("app.py:clean:11", 40, 50, 2),
            ("app.py:clean:10", 50, 70, 4), ("app.py:feat:21", 70, 100, 6)]
    ev = [(0, 11, 1, a * MS, b * MS, "user_code", d, "sample", n) for d, a, b, n in runs]
    ev.append((0, 11, 1, 100 * MS, 120 * MS, "waiting", None, "sample", 0))
    t = _trace(ev)
    res = culprits(t, Window(0, 120 * MS))
    rows = {r["function"]: r for r in res["functions"]}
    # recount from the runs above: clean 30+10+20 ms, 12 ticks, hottest line 10 (50 ms vs 10 ms on line 11)
    assert rows["clean"]["self_ms"] == pytest.approx(60.0) and rows["clean"]["samples"] == 12
    assert rows["clean"]["file"] == "app.py:10"
    assert rows["feat"]["self_ms"] == pytest.approx(40.0) and rows["feat"]["samples"] == 8
    assert rows["feat"]["file"] == "app.py:21"                 # 30 ms on line 21 vs 10 ms on line 20
    assert len(res["functions"]) == 2                           # one row per function, not per line
    tab = res["tables"]["top_python_functions"]
    assert [r[tab["columns"].index("samples")] for r in tab["rows"]] == [12, 8]


def test_spans_without_tick_counts_count_one_each():
    # older traces / the nsys importer: no tick count (correlation -1): one sample per span
    ev = [(0, 11, 1, 0, 10 * MS, "user_code", "a.py:f", "sample"), (0, 11, 1, 10 * MS, 20 * MS, "user_code", "a.py:f", "sample")]
    res = culprits(_trace(ev), Window(0, 20 * MS))
    assert res["functions"][0]["samples"] == 2 and res["functions"][0]["file"] == "a.py"


def test_top_line_per_key():
    keys = np.array([0, 0, 1, 1, 1, 2])
    lines = np.array([5, 6, 9, 9, 8, -1])
    w = np.array([1.0, 3.0, 1.0, 1.0, 1.5, 4.0])
    assert top_line(keys, lines, w, 3).tolist() == [6, 9, -1]


def test_function_keys_merge_lines():
    ev = [(0, 11, 1, 0, MS, "user_code", "m.py:f:1", "sample", 1), (0, 11, 1, MS, 2 * MS, "user_code", "m.py:f:2", "sample", 1),
          (0, 11, 1, 2 * MS, 3 * MS, "user_code", "m.py:g:1", "sample", 1)]
    t = _trace(ev)
    s = t.spans
    k, names, lines = function_keys(t, s.detail)
    assert [names[i] for i in k.tolist()] == ["m.py:f", "m.py:f", "m.py:g"] and lines.tolist() == [1, 2, 1]
