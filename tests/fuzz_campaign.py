"""Harness of the issue-44 fuzz campaign: each mutant (tests/fuzz_campaign_mutators.py) is written into an
empty folder, which is the working directory of one ``python -m inferscope analyze ... -o out --format
md,json,csv,html,chrome -q`` subprocess (a fresh interpreter, as a user runs it), killed after ``timeout_s``;
its exit status, wall time and peak RSS come from ``os.wait4`` in a small launcher process (``LAUNCHER``).

A mutant passes (``fuzz_mutators._judge``) when it exits 0 with a complete report set (report.json parses,
the breakdown adds up to 100 %) or exits 2 with one stderr line ``inferscope: error: ...``; anything else
(another exit code, a traceback, a signal, a timeout, peak RSS >= ``rss_limit_mb`` for an input < 10 MB) is
a failure, kept with its (kind, seed) so ``make(kind, seed)`` rebuilds it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import fuzz_campaign_mutators as cm
from fuzz_mutators import FORMATS, _judge

SRC = Path(__file__).resolve().parents[1] / "src"
TIMEOUT_S = 30.0
RSS_LIMIT_MB = 1536.0
SMALL_INPUT_BYTES = 10 << 20

# Forks and execs the analyze command, waits with wait4, prints [exit code or None, wall s, peak RSS KB, CPU s].  A small
# process of its own: a child's ru_maxrss starts from its parent's resident size at fork (and vfork+exec from
# the parent's peak), so forked straight from the campaign (which builds large mutants) it would read high.
LAUNCHER = """
import json, os, sys, time
limit = float(sys.argv[1])
t0 = time.monotonic()
pid = os.fork()
if pid == 0:
    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.execv(sys.argv[2], sys.argv[2:])
rc = None
while True:
    w, st, ru = os.wait4(pid, os.WNOHANG)
    if w == pid:
        rc = os.waitstatus_to_exitcode(st)
        break
    if time.monotonic() - t0 > limit:
        os.kill(pid, 9)
        _, st, ru = os.wait4(pid, 0)
        break
    time.sleep(0.01)
print(json.dumps([rc, time.monotonic() - t0, ru.ru_maxrss, ru.ru_utime + ru.ru_stime]))
"""


@dataclass
class Run:
    kind: str
    seed: int
    rc: int | None           # None: killed at the timeout
    verdict: str             # ok0 | ok2 | FAIL:<why>
    wall_s: float
    peak_rss_mb: float
    input_bytes: int
    stderr: str = ""
    cpu_s: float = 0.0       # user + system CPU of the analyze process (wall time on a shared host includes waiting)


@dataclass
class Campaign:
    runs: list = field(default_factory=list)

    @property
    def failures(self) -> list:
        return [r for r in self.runs if not r.verdict.startswith("ok")]

    def per_kind(self) -> dict:
        out: dict = {}
        for r in self.runs:
            k = out.setdefault(r.kind, {"n": 0, "exit0": 0, "exit2": 0, "fail": 0, "max_wall_s": 0.0, "max_cpu_s": 0.0,
                                        "max_rss_mb": 0.0})
            k["n"] += 1
            k["exit0" if r.verdict == "ok0" else "exit2" if r.verdict == "ok2" else "fail"] += 1
            k["max_wall_s"] = max(k["max_wall_s"], r.wall_s)
            k["max_cpu_s"] = max(k["max_cpu_s"], r.cpu_s)
            k["max_rss_mb"] = max(k["max_rss_mb"], r.peak_rss_mb)
        return out


def run_one(kind: str, seed: int, workdir: Path, timeout_s: float = TIMEOUT_S,
            rss_limit_mb: float = RSS_LIMIT_MB, python: str = sys.executable) -> Run:
    d = Path(tempfile.mkdtemp(prefix=f"{kind}-{seed}-", dir=workdir))
    try:
        m = cm.make(kind, seed, d)
        for name, raw in m.files.items():
            (d / name).write_bytes(raw)
        env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        for k in [k for k in env if k.startswith("INFERSCOPE_")]:
            del env[k]                                 # the mutant's own .inferscope.yaml, not the caller's settings
        cmd = [python, "-m", "inferscope", "analyze", *m.args, "-o", "out", "--format", FORMATS, "-q"]
        with open(d / "stderr", "wb") as err:
            p = subprocess.run([python, "-S", "-c", LAUNCHER, str(timeout_s), *cmd], cwd=d, env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, timeout=timeout_s + 60)
        rc, wall, rss_kb, cpu = json.loads(p.stdout.decode().strip().splitlines()[-1])
        rss = rss_kb / 1024.0
        text = (d / "stderr").read_text(errors="replace")
        verdict = "FAIL:timeout" if rc is None else _judge(rc, text, d / "out")
        if verdict.startswith("ok") and "Traceback" in text:
            verdict = "FAIL:traceback"
        if verdict.startswith("ok") and rss >= rss_limit_mb and m.input_bytes < SMALL_INPUT_BYTES:
            verdict = f"FAIL:rss-{rss:.0f}MB"
        return Run(kind, seed, rc, verdict, wall, rss, m.input_bytes, text[-800:], cpu)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def plan(count: int, seed: int, kinds=cm.KINDS) -> list[tuple[str, int]]:
    """count mutants, the kinds interleaved; mutant i of kind k has seed seed + i // len(kinds)."""
    return [(kinds[i % len(kinds)], seed + i // len(kinds)) for i in range(count)]


def campaign(count: int, seed: int, jobs: int, workdir: Path, kinds=cm.KINDS, timeout_s: float = TIMEOUT_S,
             progress=None) -> Campaign:
    c = Campaign()
    todo = plan(count, seed, kinds)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:    # threads: each only waits on its subprocess
        for r in ex.map(lambda ks: run_one(ks[0], ks[1], workdir, timeout_s), todo):
            c.runs.append(r)
            if progress:
                progress(c, r)
    return c
