"""Live Prometheus metrics (collect/exporter.py): `inferscope run --metrics-port 0` on a program that
serves requests, scraped over HTTP during the run and parsed with prometheus_client's parser."""
import os
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from inferscope.collect.exporter import BUCKETS, Metrics, escape_label

PY = sys.executable

PROG = r'''
import os, sys, time
import inferscope
n = 0
t_end = time.time() + 2.5
while time.time() < t_end:
    try:
        with inferscope.scope("request"):
            time.sleep(0.01 if n % 2 else 0.2)     # even requests slow (200 ms), odd ones fast (10 ms)
            if n % 4 == 3:
                raise ValueError("private text")   # every 4th request fails: counted by class, never the message
    except ValueError:
        pass
    n += 1
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(n))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
t = time.time()
while not os.path.exists(sys.argv[2]) and time.time() - t < 60:
    time.sleep(0.02)
'''


def _scrape(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return r.read().decode()


@pytest.mark.live
def test_run_serves_metrics_that_match_the_programs_requests(tmp_path):
    parser = pytest.importorskip("prometheus_client.parser")
    (tmp_path / "prog.py").write_text(PROG)
    done, scraped = tmp_path / "done", tmp_path / "scraped"
    p = subprocess.Popen([PY, "-m", "inferscope", "run", "--metrics-port", "0", "--report", str(tmp_path / "r.json"),
                          "--", PY, str(tmp_path / "prog.py"), str(done), str(scraped)],
                         cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                         env=dict(os.environ, INFERSCOPE_TORCH_PROFILER="off"))
    lines, url = [], []

    def reader():
        for line in p.stderr:
            lines.append(line)
            if "metrics at " in line and not url:
                url.append(line.split("metrics at ", 1)[1].strip())
    th = threading.Thread(target=reader, daemon=True)
    th.start()
    try:
        t0 = time.time()
        while not url and time.time() - t0 < 60:
            time.sleep(0.05)
        assert url and url[0].startswith("http://127.0.0.1:"), lines
        mid = _scrape(url[0])                                   # during the run
        assert "inferscope_scope_duration_seconds" in mid
        while not done.exists() and time.time() - t0 < 60:
            time.sleep(0.05)
        n = int(done.read_text())
        text = _scrape(url[0])                                  # all requests served, program still running
        scraped.write_text("1")
        assert p.wait(timeout=120) == 0, "".join(lines)
    finally:
        if p.poll() is None:
            p.kill()
    fams = {f.name: f for f in parser.text_string_to_metric_families(text)}
    h = fams["inferscope_scope_duration_seconds"]
    assert h.type == "histogram"
    s = {(x.name, x.labels.get("le")): x.value for x in h.samples if x.labels.get("name") == "request"}
    assert n >= 10
    assert s[("inferscope_scope_duration_seconds_count", None)] == n
    assert s[("inferscope_scope_duration_seconds_bucket", "+Inf")] == n
    assert s[("inferscope_scope_duration_seconds_bucket", "0.1")] == n // 2          # the fast ones
    assert s[("inferscope_scope_duration_seconds_bucket", "0.005")] == 0
    assert s[("inferscope_scope_duration_seconds_bucket", "0.25")] == n              # slow ones under 250 ms
    assert 0.2 * (n - n // 2) + 0.01 * (n // 2) <= s[("inferscope_scope_duration_seconds_sum", None)] < 0.25 * n
    errs = [(x.labels, x.value) for x in fams["inferscope_scope_errors"].samples]     # prometheus_client drops _total
    assert errs == [({"scope": "request", "type": "ValueError"}, n // 4)] and "private text" not in text
    g = {x.labels["metric"]: x.value for x in fams["inferscope_counter"].samples}
    assert g["proc.rss_bytes"] > 1e6 and "cpu.util_pct" in g
    assert fams["inferscope_events"].samples[0].value > 0                         # prometheus_client drops _total
    cls = {x.labels["class"]: x.value for x in fams["inferscope_cpu_class_seconds"].samples}
    assert cls.get("waiting", 0) > 1.0          # the main thread sleeps through most of its ~2.5 s of requests
    assert (tmp_path / "r.json").exists()


def test_histogram_and_escaping_unit():
    m = Metrics()
    for v in (0.0005, 0.003, 0.003, 70.0):
        m.observe_scope('we"ird\\name\n', v)
    txt = m.render()
    lab = escape_label('we"ird\\name\n')
    assert lab == 'we\\"ird\\\\name\\n'
    assert f'inferscope_scope_duration_seconds_bucket{{name="{lab}",le="0.001"}} 1' in txt
    assert f'inferscope_scope_duration_seconds_bucket{{name="{lab}",le="0.005"}} 3' in txt
    assert f'inferscope_scope_duration_seconds_bucket{{name="{lab}",le="60"}} 3' in txt
    assert f'inferscope_scope_duration_seconds_bucket{{name="{lab}",le="+Inf"}} 4' in txt
    assert f'inferscope_scope_duration_seconds_count{{name="{lab}"}} 4' in txt
    assert len(BUCKETS) == len(set(BUCKETS))


def test_bad_port_is_one_line_exit_2(tmp_path):
    r = subprocess.run([PY, "-m", "inferscope", "run", "--metrics-port", "http", "--", PY, "-c", "pass"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "port" in r.stderr


def test_grafana_dashboard_queries_only_exported_metrics():
    import json
    import re
    from pathlib import Path
    docs = Path(__file__).parent.parent / "docs"
    d = json.loads((docs / "grafana-inferscope.json").read_text())
    exprs = [t["expr"] for p in d["panels"] for t in p["targets"]]
    exprs += re.findall(r"expr: (.+)", (docs / "prometheus.md").read_text())
    names = {n for e in exprs for n in re.findall(r"\b(inferscope_[a-z_]+)", e)}
    exported = {"inferscope_scope_duration_seconds_bucket", "inferscope_scope_duration_seconds_count", "inferscope_counter",
                "inferscope_events_total", "inferscope_dropped_events_total", "inferscope_cpu_class_seconds_total",
                "inferscope_scope_errors_total"}
    assert names and names <= exported, names - exported
    m = Metrics()
    m.observe_scope("request", 0.1)
    m.observe_error("request", "ValueError")
    txt = m.render()
    assert "inferscope_scope_duration_seconds_bucket{" in txt and "inferscope_scope_duration_seconds_count{" in txt
    assert 'inferscope_scope_errors_total{scope="request",type="ValueError"} 1' in txt
