"""The progress line (util/progress.py): only on a terminal, only after the threshold, rate-limited,
ended with a newline; nothing when piped or quiet; the CLI end to end (piped, and on a pty)."""
from __future__ import annotations

import io
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import kineto_traces, nsys_traces
from inferscope.errors import ConfigError
from inferscope.util import progress as P
from inferscope.util.progress import Progress

PY = sys.executable
SRC = str(Path(__file__).resolve().parents[1] / "src")


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _prog(stream=None, **kw):
    clk = Clock()
    stream = FakeTTY() if stream is None else stream
    kw.setdefault("after_s", 2.0)
    kw.setdefault("every_s", 0.2)
    return Progress(stream, "trace.json.gz", clock=clk, **kw), stream, clk


def test_nothing_before_the_threshold_then_a_line():
    p, out, clk = _prog()
    p.stage("reading trace.json.gz", total=535_000_000, note="compressed")
    for i in range(19):                     # 0 .. 1.8 s: fast inputs print nothing at all
        clk.t = 100.0 + 0.1 * i
        p.update(i * 10_000_000, events=i * 1000)
    assert out.getvalue() == "" and p.drawn == 0
    p.done()
    assert out.getvalue() == ""             # done without a draw: still nothing
    p, out, clk = _prog(width=120)
    p.stage("reading trace.json.gz", total=535_000_000, note="compressed")
    clk.t += 2.1
    p.update(312_000_000, events=1_204_331)
    assert out.getvalue() == ("\rinferscope: reading trace.json.gz  312 / 535 MB compressed (58 %), "
                              "1,204,331 events  2.1 s\x1b[K")


def test_rate_limited_to_one_draw_per_interval():
    p, out, clk = _prog()
    clk.t += 2.0
    p.stage("analysing")
    assert p.drawn == 1
    for _ in range(50):                     # 50 updates within 0.1 s: no redraw
        clk.t += 0.002
        p.update(events=5)
    assert p.drawn == 1
    clk.t += 0.11
    p.update(events=6)
    assert p.drawn == 2
    for _ in range(1000):                   # 10 s of calls every 10 ms: at most 5 draws a second
        clk.t += 0.01
        p.update(events=7)
    assert 45 <= p.drawn - 2 <= 50
    assert out.getvalue().count("\r") == p.drawn


def test_done_ends_with_a_newline_or_erases_after_a_failure():
    p, out, clk = _prog()
    clk.t += 3.0
    p.stage("writing the report")
    clk.t += 1.25
    p.done()
    text = out.getvalue()
    assert text.endswith("\rinferscope: trace.json.gz done in 4.2 s\x1b[K\n"), repr(text)
    p.done()
    p.update(1)                             # closed: idempotent, nothing more
    assert out.getvalue() == text
    p, out, clk = _prog()
    clk.t += 3.0
    p.stage("analysing")
    p.done(ok=False)
    assert out.getvalue().endswith("\r\x1b[K") and "\n" not in out.getvalue()


def test_nothing_when_not_a_tty_or_quiet():
    for stream, quiet in ((io.StringIO(), False), (FakeTTY(), True)):
        p, out, clk = _prog(stream, quiet=quiet, after_s=0.0, every_s=0.0)
        assert not p.active
        p.stage("reading x", total=10)
        clk.t += 5
        p.update(5, events=3)
        p.done()
        assert out.getvalue() == "" and p.drawn == 0
    assert P.for_stderr("x", quiet=True) is None


def test_line_fits_the_terminal_and_hides_control_characters():
    p, out, clk = _prog(after_s=0.0, every_s=0.0)
    p.stage("reading " + "\x1b[31m" + "a" * 200 + ".json", total=2_000_000)
    p.update(1_000_000)
    text = out.getvalue()
    assert "\x1b[31m" not in text and "?[31m" in text
    body = text.split("\r")[-1][:-3]        # the last line without \x1b[K
    assert len(body) <= 79 and body.endswith("1 / 2 MB (50 %)  0.0 s"), body


def test_threshold_from_the_environment(monkeypatch):
    monkeypatch.setenv(P.ENV_AFTER, "0")
    assert P.after_s_from_env() == 0.0
    monkeypatch.delenv(P.ENV_AFTER)
    assert P.after_s_from_env() == P.AFTER_S
    for bad in ("soon", "-1", "nan", "inf"):
        monkeypatch.setenv(P.ENV_AFTER, bad)
        with pytest.raises(ConfigError, match=P.ENV_AFTER):
            P.after_s_from_env()


def test_ticker_redraws_while_the_caller_is_busy():
    # the thread moves the elapsed time on during a step that reports nothing (real clock)
    out = FakeTTY()
    p = Progress(out, "t", after_s=0.0, every_s=0.01, ticker=True)
    p.stage("analysing")
    deadline = time.monotonic() + 30
    while p.drawn < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    p.done()
    assert p.drawn >= 3 and out.getvalue().endswith("\n")
    assert not p._thread.is_alive()


def test_nsys_loader_reports_its_tables():
    paths = nsys_traces()
    if not paths:
        pytest.skip("no nsys export available")
    from inferscope.ingest import load_trace
    p, out, clk = _prog(after_s=0.0, every_s=0.0, width=200)
    load_trace(paths[0], progress=p)
    text = out.getvalue()
    assert f"reading table CUPTI_ACTIVITY_KIND_KERNEL of {paths[0].name}  " in text, text[:500]
    assert re.search(r"reading table CUPTI_ACTIVITY_KIND_KERNEL of \S+  [1-9][\d,]* rows  ", text), text[:500]
    assert f"checking {paths[0].name}" in text


def _small_kineto() -> Path:
    paths = kineto_traces()
    if not paths:
        pytest.skip("no Kineto trace available")
    return min(paths, key=lambda q: q.stat().st_size)


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
                **{P.ENV_AFTER: "0"})


def test_cli_piped_stderr_has_no_progress(tmp_path):
    trace = _small_kineto()
    for cmd in (["analyze", str(trace), "-o", str(tmp_path / "out")],
                ["export", str(trace), "-o", str(tmp_path / "t.json")]):
        r = subprocess.run([PY, "-m", "inferscope", *cmd], capture_output=True, text=True, env=_env(), timeout=300)
        assert r.returncode == 0, r.stderr
        assert "\r" not in r.stderr and "inferscope: reading" not in r.stderr and "done in" not in r.stderr, r.stderr
        assert "wrote" in r.stdout


def _run_on_pty(args: list[str]) -> tuple[int, str]:
    import pty
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([PY, "-m", "inferscope", *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=slave, env=_env())
    finally:
        os.close(slave)
    data = b""
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            r, _, _ = select.select([master], [], [], 1.0)
            if not r:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:                  # EIO: the child closed its side
                break
            if not chunk:
                break
            data += chunk
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return rc, data.decode("utf-8", errors="replace")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pty end-to-end on Linux")
def test_cli_on_a_terminal_draws_and_ends_the_line(tmp_path):
    trace = _small_kineto()
    rc, text = _run_on_pty(["analyze", str(trace), "-o", str(tmp_path / "out")])
    assert rc == 0, text
    assert f"\rinferscope: reading {trace.name}" in text, repr(text)
    assert re.search(rf"\rinferscope: {re.escape(trace.name)} done in \d+\.\d s\x1b\[K\r\n$", text), repr(text)
    rc, text = _run_on_pty(["analyze", "-q", str(trace), "-o", str(tmp_path / "out2")])
    assert rc == 0 and text == "", repr(text)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pty end-to-end on Linux")
def test_diff_on_a_terminal_draws_a_line_per_side():
    """`inferscope diff` of two traces: each side's load and analysis gets its line (before: none), -q none."""
    trace = _small_kineto()
    rc, text = _run_on_pty(["diff", str(trace), str(trace)])
    assert rc in (0, 1), text
    assert text.count(f"\rinferscope: reading {trace.name}") >= 2 and text.count(f"{trace.name} done in") == 2, repr(text)
    rc, text = _run_on_pty(["diff", "-q", str(trace), str(trace)])
    assert "inferscope: reading" not in text and "done in" not in text, repr(text)
