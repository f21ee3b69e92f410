"""Serving health (issue 46 item 2, seed 002): request errors, OOM, cache hit rate and queueing in the tail, on
synthetic traces whose answers are known by construction; the recording side (scope(), generate() hook,
Prometheus counter) on planted programs and a fake transformers module."""
import json
import os
import subprocess
import sys
import types

import pytest

from inferscope import thresholds as T
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.pipeline import analyze
from inferscope.trace import SpanKind, TrackKind

from helpers import Synth, add_counter


def finding(res, fid):
    return next((f for f in res["findings"] if f["id"] == fid), None)


class Reqs:
    """Request scopes as scope(name, batch=1) records them live: detail with rid / parent / error / cache_hit."""

    def __init__(self):
        self.t = Synth()
        self.cat = self.t.b.strings.intern("inferscope.scope")
        self.rid = 0
        self.tracks = {}

    def track(self, k):
        if k not in self.tracks:
            self.tracks[k] = self.t.b.track(TrackKind.CPU_THREAD, pid=100, tid=1000 + k, name=f"w{k}")
        return self.tracks[k]

    def req(self, a_us, b_us, thread=0, parent=None, error=None, cache_hit=None, name="request"):
        self.rid += 1
        d = f'"request":true,"generated_tokens":4,"batch":1,"rid":{self.rid},"parent":{"null" if parent is None else parent}'
        if cache_hit is not None:
            d += f',"cache_hit":{"true" if cache_hit else "false"}'
        if error:
            d += f',"error":"{error}"'
        self.t.span(SpanKind.ANNOTATION, name, a_us, b_us, track=self.track(thread), cat=self.cat,
                    detail=self.t.b.strings.intern("{" + d + "}"))
        return self.rid

    def scope(self, name, a_us, b_us, thread=0, detail=None):
        self.t.span(SpanKind.ANNOTATION, name, a_us, b_us, track=self.track(thread), cat=self.cat,
                    detail=-1 if detail is None else self.t.b.strings.intern(detail))

    def run(self):
        return analyze(self.t.done(), AnalyzeOptions())


def _errors(n, bad):
    r = Reqs()
    for i in range(n):
        r.req(i * 100, i * 100 + 50, error=bad.get(i))
    return r.run()


def case_request_errors():
    bad = {3: "ValueError", 10: "ValueError", 42: "KeyError"}      # 3 of 100 requests
    res = _errors(100, bad)
    llm = res["llm"]
    assert llm["errors"] == 3 and llm["error_rate_pct"] == pytest.approx(3.0)
    assert llm["error_types"] == [{"type": "ValueError", "count": 2}, {"type": "KeyError", "count": 1}]
    rows = res["tables"]["llm_requests"]
    col = rows["columns"].index("error")
    assert [i for i, row in enumerate(rows["rows"]) if row[col]] == sorted(bad)
    f = finding(res, "request_errors")
    assert f["severity"] == "high" and f["evidence"]["error_rate_pct"] == 3.0 and f["evidence"]["type_0"] == "ValueError"
    assert "ValueError x2, KeyError x1" in f["evidence_text"][0]
    # seed 002 alerts above 1 %: exactly 1 of 100 is not a finding, and no errors is 0 %, not null
    assert finding(_errors(100, {7: "ValueError"}), "request_errors") is None
    ok = _errors(10, {})
    assert ok["llm"]["errors"] == 0 and ok["llm"]["error_rate_pct"] == 0.0 and finding(ok, "request_errors") is None


def case_oom():
    r = Reqs()
    for i in range(5):
        r.req(i * 1000, i * 1000 + 500)
    outer = r.req(6000, 7000, error="OutOfMemoryError")
    r.req(6100, 6900, parent=outer, error="OutOfMemoryError")      # the same exception through a nested range
    r.scope("load", 8000, 8100, thread=1, detail='{"error":"MemoryError"}')
    res = r.run()
    oom = res["llm"]["oom"]
    assert oom["count"] == 2 and oom["types"] == ["MemoryError", "OutOfMemoryError"]   # outermost per thread
    assert oom["first_ms"] == pytest.approx(6.0)
    assert {(e["scope"], e["type"]): e["count"] for e in res["llm"]["scope_errors"]} == {
        ("request", "OutOfMemoryError"): 2, ("load", "MemoryError"): 1}
    f = finding(res, "oom")
    assert f["severity"] == "high" and f["evidence"]["oom_ranges"] == 2
    assert "offload" in f["suggestion"] and "batch" in f["suggestion"] and "KV" in f["suggestion"]
    assert "oom" in " ".join(finding(res, "request_errors")["evidence_text"])
    # no request at all: a failed scope alone still gives the section and the finding
    r = Reqs()
    r.scope("step", 0, 100, detail='{"error":"OutOfMemoryError"}')
    r.scope("step", 200, 300)
    res = r.run()
    assert res["llm"]["requests"] == 0 and res["llm"]["oom"]["count"] == 1 and finding(res, "oom")
    # another exception class with GPU memory within 2 % of its total: suspected; at 90 % it is not
    for used_pct, expect in ((99.0, True), (90.0, False)):
        r = Reqs()
        r.scope("step", 0, 100, detail='{"error":"RuntimeError"}')
        r.t.b.meta["devices"] = [{"id": 0, "name": "NVIDIA H100", "total_memory_bytes": 80 * 2 ** 30}]
        add_counter(r.t, "gpu.mem_used_bytes", [0, 50, 100], [2 ** 30, used_pct / 100 * 80 * 2 ** 30, 2 ** 30], device=0)
        f = finding(r.run(), "oom")
        assert (f is not None) == expect
        if f:
            assert f["evidence"]["failed_ranges"] == 1 and f["evidence"]["gpu_mem_peak_pct"] == pytest.approx(used_pct)
    assert finding(_errors(10, {}), "oom") is None
    # an OOM exception with GPU memory above the warning level but below capacity: one finding, oom, which carries
    # the memory numbers gpu_memory_pressure would have given (peak, total, headroom); another exception class at
    # that level is no oom, and gpu_memory_pressure stays
    total = 80 * 2 ** 30
    for err, expect in (("OutOfMemoryError", "oom"), ("RuntimeError", "gpu_memory_pressure")):
        r = Reqs()
        r.scope("step", 0, 100, detail='{"error":"%s"}' % err)
        r.t.b.meta["devices"] = [{"id": 0, "name": "NVIDIA H100", "total_memory_bytes": total}]
        add_counter(r.t, "gpu.mem_used_bytes", [0, 50, 100], [2 ** 30, 68 * 2 ** 30, 2 ** 30], device=0)   # 85 %
        res = r.run()
        ids = {f["id"] for f in res["findings"]}
        assert expect in ids and not ({"oom", "gpu_memory_pressure"} - {expect}) & ids, ids
        if expect == "oom":
            ev = finding(res, "oom")["evidence"]
            assert ev["gpu_mem_peak_pct"] == pytest.approx(85.0) and ev["gpu_mem_headroom_bytes"] == total - 68 * 2 ** 30
            assert ev["gpu_mem_peak_bytes"] == 68 * 2 ** 30 and ev["gpu_mem_total_bytes"] == total


def _cache_res(**kw):
    r = Reqs()
    for i, hit in enumerate(kw.get("scopes", [])):
        r.req(i * 100, i * 100 + 50, cache_hit=hit)
    for i, nm in enumerate(kw.get("marks", [])):
        r.t.span(SpanKind.MARK, nm, 10 + i, 10 + i, cat=r.t.b.strings.intern("inferscope.mark"))
    for name, vals in kw.get("counters", {}).items():
        add_counter(r.t, name, [i * 100 for i in range(len(vals))], vals, device=0)
    if not kw.get("scopes"):
        r.req(0, 6000)
    return r.run()


def case_low_cache_hit_rate():
    res = _cache_res(marks=["cache_hit"] * 2 + ["cache_miss"] * 3, scopes=[True, False, False])   # 3 of 8
    c = res["llm"]["cache"]
    assert (c["hits"], c["queries"]) == (3, 8) and res["llm"]["cache_hit_rate_pct"] == pytest.approx(37.5)
    f = finding(res, "low_cache_hit_rate")
    assert f["severity"] == "medium" and f["evidence"]["cache_hit_rate_pct"] == 37.5
    assert "cache size" in f["suggestion"] and "prefix" in f["suggestion"]
    assert finding(_cache_res(scopes=[True] * 6 + [False] * 4), "low_cache_hit_rate") is None        # 60 %: not below


def test_cache_hit_rate_from_counters_and_not_instrumented():
    # vLLM's cumulative counters: the window's increase (hits 10 -> 40 = 30 of queries 100 -> 200 = 100)
    res = _cache_res(counters={"vllm:gpu_prefix_cache_hits": [10, 25, 40], "vllm:gpu_prefix_cache_queries": [100, 150, 200]})
    c = res["llm"]["cache"]
    assert (c["hits"], c["queries"], c["hit_rate_pct"]) == (30, 100, pytest.approx(30.0))
    assert "vllm:gpu_prefix_cache_hits" in c["basis"] and finding(res, "low_cache_hit_rate")
    # a hit-rate gauge as a fraction: mean of the samples x 100
    res = _cache_res(counters={"vllm:gpu_prefix_cache_hit_rate": [0.7, 0.8, 0.9]})
    assert res["llm"]["cache_hit_rate_pct"] == pytest.approx(80.0) and finding(res, "low_cache_hit_rate") is None
    # nothing exposes the cache: null and a note, never a figure
    res = _cache_res()
    c = res["llm"]["cache"]
    assert c["hit_rate_pct"] is None and res["llm"]["cache_hit_rate_pct"] is None and c["basis"] is None
    assert c["note"].startswith("not instrumented")


def _burst(nested: bool):
    """25 requests 10 ms apart served at once in 1 ms, then 5 arriving together at 300 ms served one after
    another (1 ms each): request j of the burst waits j ms before its work."""
    r = Reqs()
    for i in range(25):
        rid = r.req(i * 10_000, i * 10_000 + 1000, thread=i % 3)
        if nested:
            r.req(i * 10_000, i * 10_000 + 1000, thread=i % 3, parent=rid, name="generate")
    for j in range(5):
        rid = r.req(300_000, 300_000 + (j + 1) * 1000, thread=10 + j)
        if nested:
            r.req(300_000 + j * 1000, 300_000 + (j + 1) * 1000, thread=10 + j, parent=rid, name="generate")
    return r.run()


def test_latency_tail_names_queueing_with_the_measured_wait():
    for nested in (True, False):
        res = _burst(nested)
        q = res["llm"]["queue"]
        assert res["llm"]["requests"] == 30 and q["max_concurrent"] == 5
        assert (q["from_first_work"], q["from_overlap"]) == ((30, 0) if nested else (0, 30))
        # tail = requests at or above the p90 latency: 3, 4 and 5 ms, which waited 2, 3 and 4 ms
        lat = sorted([1.0] * 26 + [2.0, 3.0, 4.0, 5.0])
        cut = lat[26] + 0.1 * (lat[27] - lat[26])        # numpy's linear p90 of 30 samples
        assert cut == pytest.approx(2.1) and q["tail_requests"] == 3
        assert q["tail_wait_ms_mean"] == pytest.approx(3.0) and q["tail_wait_share_pct"] == pytest.approx(75.0)
        assert q["wait_ms"]["max"] == pytest.approx(4.0) and q["wait_ms"]["count"] == 30
        f = finding(res, "latency_tail")
        assert f["severity"] == "medium" and f["evidence"]["tail_wait_ms_mean"] == pytest.approx(3.0)
        txt = " ".join(f["evidence_text"])
        assert "head-of-line" in txt and "3.000 ms" in txt
        assert "continuous batching" in f["suggestion"]
        waits = res["tables"]["llm_requests"]
        col = waits["columns"].index("queue_wait_ms")
        assert sorted(row[col] for row in waits["rows"])[-4:] == pytest.approx([1.0, 2.0, 3.0, 4.0])


def test_slow_tail_without_waiting_keeps_the_host_advice():
    r = Reqs()
    for i in range(30):                                  # one slow request, nobody waits
        rid = r.req(i * 10_000, i * 10_000 + (6000 if i == 12 else 1000))
        r.req(i * 10_000, i * 10_000 + 900, parent=rid, name="generate")
    res = r.run()
    assert res["llm"]["queue"]["tail_wait_ms_mean"] == 0.0
    f = finding(res, "latency_tail")
    assert f["severity"] == "low" and "head-of-line" not in " ".join(f["evidence_text"])


def test_error_names_only_the_class():
    from inferscope.collect.api import error_name

    class OutOfMemoryError(RuntimeError):
        pass
    assert error_name(OutOfMemoryError) == "OutOfMemoryError" and error_name(None) is None
    assert error_name(KeyboardInterrupt) is None and error_name(GeneratorExit) is None
    assert error_name(type("we\"ird name", (Exception,), {})) == "we_ird_name"


def test_generate_hook_records_the_failed_call():
    """collect/llmhook.py on a stand-in GenerationMixin: a generate() that raises still leaves its hf.generate range,
    marked with the class name and not the message; the exception reaches the caller."""
    from inferscope.collect import llmhook
    mod = types.ModuleType(llmhook.TARGET)

    class OutOfMemoryError(RuntimeError):
        pass

    class GenerationMixin:
        def generate(self, input_ids=None):
            self.forward(input_ids)
            raise OutOfMemoryError("secret prompt text")
    mod.GenerationMixin = GenerationMixin

    class Model(GenerationMixin):
        config = types.SimpleNamespace(is_encoder_decoder=False)

        def forward(self, x):
            return x
    sess = types.SimpleNamespace(buffer=[], finalized=False)
    old = sys.modules.get(llmhook.TARGET)
    sys.modules[llmhook.TARGET] = mod
    rec = llmhook.LlmRecorder(sess)
    try:
        rec.patch()
        with pytest.raises(OutOfMemoryError):
            Model().generate(input_ids=[[1, 2, 3]])
    finally:
        rec.stop()
        if old is None:
            del sys.modules[llmhook.TARGET]
        else:
            sys.modules[llmhook.TARGET] = old
    gen = [e for e in sess.buffer if e[5] == llmhook.GEN]
    assert len(gen) == 1 and json.loads(gen[0][6])["error"] == "OutOfMemoryError"
    assert "secret" not in repr(sess.buffer) and sum(e[5] == llmhook.FWD for e in sess.buffer) == 1


PROG = r'''
import json, sys, time
import inferscope


class OutOfMemoryError(RuntimeError):      # the name torch gives it; no GPU needed
    pass


n_err = 0
for i in range(40):
    try:
        with inferscope.scope("request", batch=1, cache_hit=(i % 4 == 0)):
            time.sleep(0.001)
            if i == 5:
                inferscope.mark("cache_hit")   # an engine's own hit, marked
            if i % 10 == 3:
                raise ValueError("user data " + str(i))
            if i == 17:
                raise OutOfMemoryError("CUDA out of memory")
    except Exception:
        n_err += 1
print(json.dumps({"errors": n_err}))
'''


@pytest.mark.live
def test_live_scope_records_errors_cache_and_oom(tmp_path):
    (tmp_path / "prog.py").write_text(PROG)
    out = tmp_path / "report.json"
    r = subprocess.run([sys.executable, "-m", "inferscope", "run", "--format", "json", "--report", str(out), "-q", "--",
                        sys.executable, str(tmp_path / "prog.py")], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path, env=dict(os.environ, INFERSCOPE_TORCH_PROFILER="off"))
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads(out.read_text())
    llm = rep["llm"]
    assert llm["requests"] == 40 and llm["errors"] == 5 == json.loads(r.stdout.strip().splitlines()[-1])["errors"]
    assert llm["error_rate_pct"] == pytest.approx(12.5)
    assert {e["type"]: e["count"] for e in llm["error_types"]} == {"ValueError": 4, "OutOfMemoryError": 1}
    assert llm["oom"]["count"] == 1 and "user data" not in out.read_text() and "CUDA out of" not in out.read_text()
    assert llm["cache"]["hits"] == 10 + 1 and llm["cache"]["queries"] == 40 + 1          # 10 scopes + 1 mark
    ids = {f["id"] for f in rep["findings"]}
    assert {"request_errors", "oom", "low_cache_hit_rate"} <= ids
    assert T.ERROR_RATE_ALERT_PCT < 12.5
