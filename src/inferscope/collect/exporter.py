"""Live metrics for Prometheus: a text-format endpoint (``GET /metrics``) served from the profiled
process by a daemon thread (stdlib ``http.server``; no extra dependency).

Opt-in: ``inferscope run --metrics-port PORT`` (0 = a free port; the URL is printed on stderr as
``inferscope: metrics at http://HOST:PORT/metrics``), ``INFERSCOPE_METRICS_PORT``, or
``inferscope.serve_metrics(port)`` in library mode.  Bound to 127.0.0.1 unless ``--metrics-host``
says otherwise.

Exposed (Prometheus text format 0.0.4):
- ``inferscope_scope_duration_seconds{name}`` histogram: every ``inferscope.scope()`` range as it
  closes (one per request when the program wraps each request in ``scope("request")``);
- ``inferscope_scope_errors_total{scope,type}`` counter: scopes left by an exception, by scope name and
  exception class name (never the message); over the histogram's ``_count`` it is the error rate;
- ``inferscope_counter{metric,device}`` gauge: the latest value of every system / NVML counter
  (``gpu.util_pct``, ``gpu.power_w``, ``gpu.temp_c``, ``cpu.util_pct``, ``proc.rss_bytes`` ...) and
  ``gpu.mem_total_bytes`` per GPU (for memory-share alerts; docs/prometheus.md);
- ``inferscope_cpu_class_seconds_total{class}``: host time by the sampler's class (tokenization,
  preprocessing, user_code, framework, cpu_compute, waiting), summed over threads: the host side of
  the breakdown as a counter (shares over a sliding window with PromQL ``rate()``);
- ``inferscope_events_total``, ``inferscope_dropped_events_total``: InferScope's own event count
  and the events its ring buffer dropped; ``inferscope_sampler_ticks_total``;
- ``inferscope_scrape_duration_seconds``: the cost of building the previous response.
Scrapes cost O(names x buckets + counters); nothing scans the event buffer.
"""
from __future__ import annotations

import bisect
import math
import sys
import threading
import time

# seconds: request-scale latencies, from 1 ms to 60 s
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
MAX_NAMES = 200     # distinct scope names tracked; more are counted under name="(other)"


def escape_label(v: str) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fmt(v: float) -> str:
    if v != v:
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v)) if not float(v).is_integer() else str(int(v)) if abs(v) < 1e15 else repr(float(v))


class Metrics:
    """Thread-safe aggregates; ``observe_scope`` is called on every scope exit (O(log buckets))."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.hist: dict[str, list] = {}        # name -> [bucket counts..., sum, count]
        self.latest: dict[tuple[str, int], float] = {}
        self.errors: dict[tuple[str, str], int] = {}   # (scope name, exception class name) -> count
        self.last_scrape_s = 0.0

    def observe_scope(self, name: str, seconds: float) -> None:
        with self.lock:
            h = self.hist.get(name)
            if h is None:
                if len(self.hist) >= MAX_NAMES:
                    name = "(other)"
                    h = self.hist.get(name)
                if h is None:
                    h = self.hist[name] = [0] * len(BUCKETS) + [0.0, 0]
            i = bisect.bisect_left(BUCKETS, seconds)
            if i < len(BUCKETS):
                h[i] += 1
            h[-2] += seconds
            h[-1] += 1

    def observe_error(self, name: str, type_name: str) -> None:
        """A scope left by an exception of class ``type_name`` (at most MAX_NAMES pairs; more under "(other)")."""
        with self.lock:
            k = (name, type_name)
            if k not in self.errors and len(self.errors) >= MAX_NAMES:
                k = ("(other)", "(other)")
            self.errors[k] = self.errors.get(k, 0) + 1

    def tee(self, append):
        """An appender that records counter events' latest values, then appends as before."""
        latest = self.latest

        def ap(ev):
            if ev[0] == 1:
                latest[(ev[1], ev[2])] = ev[4]
            append(ev)
        return ap

    def render(self, session=None) -> str:
        t0 = time.perf_counter()
        L = ["# HELP inferscope_scope_duration_seconds Duration of inferscope.scope() ranges by name.",
             "# TYPE inferscope_scope_duration_seconds histogram"]
        with self.lock:
            hist = {k: list(v) for k, v in self.hist.items()}
            latest = dict(self.latest)
            errors = dict(self.errors)
        for name in sorted(hist):
            h = hist[name]
            lab = escape_label(name)
            cum = 0
            for le, c in zip(BUCKETS, h):
                cum += c
                L.append(f'inferscope_scope_duration_seconds_bucket{{name="{lab}",le="{_fmt(le)}"}} {cum}')
            L.append(f'inferscope_scope_duration_seconds_bucket{{name="{lab}",le="+Inf"}} {h[-1]}')
            L.append(f'inferscope_scope_duration_seconds_sum{{name="{lab}"}} {_fmt(h[-2])}')
            L.append(f'inferscope_scope_duration_seconds_count{{name="{lab}"}} {h[-1]}')
        L += ["# HELP inferscope_scope_errors_total inferscope.scope() ranges left by an exception, by scope name and "
              "exception class.", "# TYPE inferscope_scope_errors_total counter"]
        for (name, typ), n in sorted(errors.items()):
            L.append(f'inferscope_scope_errors_total{{scope="{escape_label(name)}",type="{escape_label(typ)}"}} {n}')
        L += ["# HELP inferscope_counter Latest value of a system or NVML counter (unit in the metric label's suffix).",
              "# TYPE inferscope_counter gauge"]
        for (metric, dev), v in sorted(latest.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            if isinstance(v, (int, float)) and v == v:
                L.append(f'inferscope_counter{{metric="{escape_label(metric)}",device="{int(dev)}"}} {_fmt(float(v))}')
        if session is not None:
            buf = session.buffer
            L += ["# HELP inferscope_events_total Events InferScope recorded.", "# TYPE inferscope_events_total counter",
                  f"inferscope_events_total {buf.total}",
                  "# HELP inferscope_dropped_events_total Events dropped by the full ring buffer (oldest first).",
                  "# TYPE inferscope_dropped_events_total counter", f"inferscope_dropped_events_total {buf.dropped}"]
            smp = getattr(session, "sampler", None)
            ct = getattr(smp, "class_totals", None)
            if isinstance(ct, dict):
                tot = dict(ct)
                try:      # runs still open count up to their last tick (stays monotonic: a run only grows)
                    for r in smp.open_runs():
                        tot[r[5]] = tot.get(r[5], 0) + (r[4] - r[3])
                except Exception:
                    pass
                L += ["# HELP inferscope_cpu_class_seconds_total Host time by the CPU sampler's class, summed over threads "
                      "(up to each thread's last sample).",
                      "# TYPE inferscope_cpu_class_seconds_total counter"]
                for cls, ns in sorted(tot.items()):
                    L.append(f'inferscope_cpu_class_seconds_total{{class="{escape_label(cls)}"}} {_fmt(ns / 1e9)}')
            ticks = getattr(getattr(session, "sampler", None), "ticks", None)
            if isinstance(ticks, int):
                L += ["# HELP inferscope_sampler_ticks_total CPU sampler ticks.", "# TYPE inferscope_sampler_ticks_total counter",
                      f"inferscope_sampler_ticks_total {ticks}"]
        L += ["# HELP inferscope_scrape_duration_seconds Time to build the previous /metrics response.",
              "# TYPE inferscope_scrape_duration_seconds gauge", f"inferscope_scrape_duration_seconds {_fmt(self.last_scrape_s)}"]
        self.last_scrape_s = time.perf_counter() - t0
        return "\n".join(L) + "\n"


class MetricsServer:
    def __init__(self, metrics: Metrics, session, host: str = "127.0.0.1", port: int = 0) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # lazy: only with the metrics endpoint on
        m, sess = metrics, session

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server API)
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404)
                    return
                body = m.render(sess).encode("utf-8")
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):   # no per-request lines on the program's stderr
                pass

        self.httpd = ThreadingHTTPServer((host, int(port)), Handler)
        self.httpd.daemon_threads = True
        self.host, self.port = host, int(self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                       name="inferscope-metrics", daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        h = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{h}:{self.port}/metrics"

    def close(self) -> None:
        try:
            self.httpd.shutdown()
            self.httpd.server_close()
        except Exception:
            pass


def start_for_session(session, host: str, port: int) -> MetricsServer | None:
    """Attach live metrics to a running session: scope histogram, counter tee, HTTP server.
    A port that cannot be bound is one warning, not a failure of the program."""
    m = Metrics()
    try:
        srv = MetricsServer(m, session, host, port)
    except OSError as e:
        session._warn(f"metrics endpoint not started on {host}:{port} ({e})")
        return None
    session.metrics = m
    nv = getattr(session, "nvml", None)
    for i, d in enumerate(getattr(nv, "devices", None) or []):      # for memory-share alerts
        if isinstance(d.get("total_memory_bytes"), int):
            m.latest[("gpu.mem_total_bytes", i)] = float(d["total_memory_bytes"])
    smp = getattr(session, "sampler", None)
    if smp is not None and hasattr(smp, "class_totals"):
        smp.class_totals = {}
    for name in ("system", "nvml"):
        obj = getattr(session, name, None)
        if obj is not None and hasattr(obj, "append"):
            obj.append = m.tee(obj.append)
    sys.stderr.write(f"inferscope: metrics at {srv.url}\n")
    sys.stderr.flush()
    return srv
