"""Seed 001's failure-mode log lines (issue 46 item 5), on stderr in the seed's format
``[YYYY-mm-dd HH:MM:SS.mmm] LEVEL    message``: a CUPTI load failure and the GPU collector's start, at
info level with the device id, and a ring-buffer overflow, said once when the trace is built."""
import os
import re
import subprocess
import sys

import pytest

from inferscope import log
from inferscope.collect import gpu_activity as GA
from inferscope.collect import session as S
from inferscope.collect.buffer import BYTES_PER_EVENT
from inferscope.config import Config

LINE = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] (\w+) +(.*)")


def _lines(err: str) -> list[tuple[str, str]]:
    out = []
    for x in err.splitlines():
        m = LINE.fullmatch(x)
        assert m, f"not in seed 001's log format: {x!r}"
        out.append((m.group(1), m.group(2)))
    return out


def _session(**kw):
    return S.Session(Config(cpu_sampling_frequency_hz=0, system_sampling_hz=0, **kw), mode="library")


def test_cupti_import_failure_is_one_info_line_with_device_and_reason(monkeypatch, capsys, tmp_path):
    # a cupti package whose import fails the way a missing libcupti does (planted reason)
    (tmp_path / "cupti").mkdir()
    (tmp_path / "cupti" / "__init__.py").write_text(
        "raise ImportError('libcupti.so.12: cannot open shared object file: No such file or directory')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "cupti", raising=False)
    log.set_level("info")
    capsys.readouterr()
    s = _session()
    assert s._start_cupti() is False and s._start_cupti() is False     # asked twice, said once
    got = [x for x in _lines(capsys.readouterr().err) if "CUPTI" in x[1]]
    assert len(got) == 1, got
    level, msg = got[0]
    assert level == "INFO" and msg.startswith("CUPTI load failed (device=0): CUPTI unavailable (")
    assert msg == ("CUPTI load failed (device=0): CUPTI unavailable (ImportError: libcupti.so.12: cannot open "
                   "shared object file: No such file or directory); no CUPTI GPU events")
    log.set_level("warn")          # an info line: hidden at INFERSCOPE_LOG_LEVEL=warn
    assert _session()._start_cupti() is False and capsys.readouterr().err == ""
    log.set_level("info")


def test_cupti_not_installed_said_once_at_info(monkeypatch, capsys):
    monkeypatch.setattr(GA, "available", lambda: False)
    log.set_level("info")
    capsys.readouterr()
    s = _session()
    assert s._start_cupti() is False and s._start_cupti() is False and s.gpu_act is None
    got = _lines(capsys.readouterr().err)
    assert got == [("INFO", "CUPTI load failed (device=0): cupti-python not installed; no CUPTI GPU events")]


def test_gpu_collector_initialized_names_device_at_info(monkeypatch, capsys):
    monkeypatch.setattr(GA, "available", lambda: True)

    def fake_start(self):       # what a successful start leaves (no GPU on this machine)
        self.enabled = ["CONCURRENT_KERNEL", "MEMCPY"]
        return True
    monkeypatch.setattr(GA.CuptiCollector, "start", fake_start)
    monkeypatch.setattr(GA, "device_id", lambda: 3)
    log.set_level("info")
    capsys.readouterr()
    assert _session()._start_cupti() is True
    assert _lines(capsys.readouterr().err) == [
        ("INFO", "GPU collector initialized (device=3, source=CUPTI: CONCURRENT_KERNEL, MEMCPY)")]


def test_device_id_is_cudas_default_without_an_initialised_torch(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert GA.device_id() == 0


def test_overflow_is_said_once_on_stderr(capsys):
    """Planted: capacity + 37 events into the ring buffer; two trace builds, one WARN line."""
    log.set_level("info")
    s = _session(trace_size_mb=16 * BYTES_PER_EVENT / 2**20)     # the minimum capacity, 16 events
    import time
    s.start_ns, s.wall_start_ns, s.cpu_start_ns = time.perf_counter_ns(), time.time_ns(), time.process_time_ns()
    cap = s.buffer.capacity
    t0 = time.perf_counter_ns()
    for i in range(cap + 37):
        s.buffer.append((0, 0, s.pid, t0 + 1000 * i, t0 + 1000 * i + 500, f"e{i}", "", ""))
    capsys.readouterr()
    t = s.build_trace(final=False)
    s.build_trace(final=True)
    got = [x for x in _lines(capsys.readouterr().err) if "overflow" in x[1]]
    assert got == [("WARN", f"trace buffer overflow: the oldest 37 events were dropped (buffer "
                            f"{s.cfg.trace_size_mb:g} MB ~ {cap} events); increase INFERSCOPE_TRACE_SIZE_MB")]
    assert t.meta["collection"]["dropped_events"] == 37 and got[0][1] in t.meta["warnings"]


@pytest.mark.live
def test_live_run_with_a_tiny_buffer_says_overflow_once(tmp_path):
    w = tmp_path / "work.py"
    w.write_text("import time\nt = time.perf_counter()\nwhile time.perf_counter() - t < 0.5: sum(range(1000))\n")
    env = dict(os.environ, INFERSCOPE_TRACE_SIZE_MB="0.005", INFERSCOPE_LOG_LEVEL="info")
    r = subprocess.run([sys.executable, "-m", "inferscope", "run", "--report", str(tmp_path / "r.md"),
                        "--trace", str(tmp_path / "t.iscope"), "--", sys.executable, str(w)],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    from inferscope.trace import native
    t = native.load(tmp_path / "t.iscope")
    dropped = t.meta["collection"]["dropped_events"]
    assert dropped > 0
    said = [(lv, m) for lv, m in (LINE.fullmatch(x).groups() for x in r.stderr.splitlines() if LINE.fullmatch(x))
            if "overflow" in m]
    assert said == [("WARN", f"trace buffer overflow: the oldest {dropped} events were dropped (buffer 0.005 MB ~ "
                             f"{t.meta['collection']['buffer_capacity_events']} events); increase INFERSCOPE_TRACE_SIZE_MB")]
