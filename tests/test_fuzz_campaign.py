"""The issue-44 fuzz campaign (bench/bench_fuzz_campaign.py): a bounded run over every input kind, and the
failures it found, each as a planted input whose answer is known by construction."""
import csv
import gzip
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import fuzz_campaign as fc
import fuzz_campaign_mutators as cm

DATA = Path(__file__).resolve().parent / "data"


def _analyze(path: Path, out: Path, timeout_s: float = 120.0):
    """(exit code, wall s, peak RSS MB) of `python -m inferscope analyze PATH -o OUT`, through the campaign's
    launcher (wait4) and under RLIMIT_AS 3 GiB, so a regression fails the test instead of the machine."""
    cmd = [sys.executable, "-m", "inferscope", "analyze", str(path), "-o", str(out), "--format", "json,md,html", "-q"]
    launcher = "import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n" + fc.LAUNCHER
    env = {"PYTHONPATH": str(fc.SRC), "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, "-S", "-c", launcher, str(timeout_s), *cmd], env=env, capture_output=True,
                       timeout=timeout_s + 60)
    rc, wall, rss_kb, _cpu_s = json.loads(p.stdout.decode().splitlines()[-1])
    return rc, wall, rss_kb / 1024.0


def test_bounded_campaign_every_kind_passes():
    """Two mutants of each kind (seeds 0-1): every one exits 0 with a full report set or 2 with one line."""
    with tempfile.TemporaryDirectory(prefix="campaign") as d:
        c = fc.campaign(2 * len(cm.KINDS), 0, 1, Path(d))
    assert len(c.runs) == 2 * len(cm.KINDS)
    assert {r.kind for r in c.runs} == set(cm.KINDS)
    assert not c.failures, [(r.kind, r.seed, r.verdict, r.stderr[-300:]) for r in c.failures]


def test_mutants_are_reproducible_and_cut_at_boundaries(tmp_path):
    for kind in cm.KINDS:
        a, b = cm.make(kind, 7, tmp_path), cm.make(kind, 7, tmp_path)
        assert a.files == b.files and a.args == b.args, kind
    import random
    raw = b'{"a": [1, 2], "b": {"c": 3}}'
    for s in range(50):
        cut = cm.cut_json(raw, random.Random(s))
        k, marks = len(cut), set(b'{}[],:')      # cut just before or just after a token mark
        assert raw.startswith(cut) and ((k < len(raw) and raw[k] in marks) or (k > 0 and raw[k - 1] in marks)), cut
    z = (DATA / "fuzz" / "live_facts.iscope").read_bytes()
    for s in range(20):
        cut = cm.cut_zip(z, random.Random(s))
        assert z.startswith(cut) and len(cut) < len(z)


def test_live_trace_numa_meta_of_wrong_types(tmp_path):
    """Campaign finding iscope_facts:0 / :37 (exit 3: the typed report rejected a string/object NUMA field)
    and, read off the same code, a cpulist "0-99999999999" that expanded to 10^11 CPU ids (out of memory).
    The repro's meta.numa (tests/data/fuzz/README.md) has every field of a wrong type."""
    path = DATA / "fuzz" / "numa_wrong_types.iscope"
    rc, _, rss = _analyze(path, tmp_path / "o")
    assert rc == 0
    numa = json.loads((tmp_path / "o" / "report.json").read_text())["counters"]["numa"]
    assert numa["numa_nodes"] is None and numa["process_numa_nodes"] is None and numa["process_cpus"] is None
    assert numa["gpu_local"] is None and numa["remote_numa_possible"] is None and numa["torch_threads"] is None
    assert [g["numa_node"] for g in numa["gpu_numa_nodes"]] == [-1, -1]      # "zero", inf; the 7 is not an object
    assert rss < 1536


def test_ncu_raw_page_with_many_launches_is_read_row_by_row(tmp_path):
    """Campaign finding ncu_raw:10: a raw page of ~30,000 launches (145 MB of CSV, 5.5 MB gzip'd) took 1.67 GB
    (every field of every row parsed at once).  Planted: the demo capture's first launch 30,000 times."""
    rows = list(csv.reader(io.StringIO(gzip.decompress((DATA / "ncu" / "demo_hot10_raw.csv.gz").read_bytes()).decode())))
    n = 30_000
    b = io.StringIO()
    w = csv.writer(b, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerows(rows[:2])
    for i in range(n):
        rows[2][0] = str(i)
        w.writerow(rows[2])
    p = tmp_path / "many.csv.gz"
    p.write_bytes(gzip.compress(b.getvalue().encode(), 6))
    assert p.stat().st_size < 10 << 20
    rc, _, rss = _analyze(p, tmp_path / "o")
    assert rc == 0
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    assert rep["source"]["format"] == "ncu" and rep["source"]["spans"] == n
    assert rss < 1536, rss


def _cli(args, cwd):
    return subprocess.run([sys.executable, "-m", "inferscope", "analyze", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(fc.SRC), "PATH": "/usr/bin:/bin"})


def test_phase_map_with_a_lone_surrogate_is_one_line_exit_2(tmp_path):
    """Campaign finding phase_map:125 (exit 3, UnicodeEncodeError writing the report): a phase named "\\ud800"."""
    from fuzz_mutators import kineto_seed
    (tmp_path / "t.json").write_text(json.dumps(kineto_seed()))
    repro = DATA / "fuzz" / "phase_map_lone_surrogate.json"
    assert "\ud800" in json.loads(repro.read_text())                       # the planted key
    (tmp_path / "pat.json").write_text('{"decode": ["dec\\udfffode"]}')    # and in a pattern
    for pm in (str(repro), "pat.json"):
        p = _cli(["t.json", "--phase-map", pm, "-o", "o", "-q"], tmp_path)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and "lone surrogate" in lines[0], p.stderr
    (tmp_path / "ok.json").write_text('{"decode": ["decode_step"], "prefill": ["pr\\u00e9fill"]}')
    p = _cli(["t.json", "--phase-map", "ok.json", "-o", "o", "-q"], tmp_path)
    assert p.returncode == 0, p.stderr                                    # an escaped non-ASCII pattern is fine


def test_replayed_facts_with_a_tick_at_int64_min(tmp_path):
    """Campaign finding iscope_facts:1048 (exit 3, "breakdown does not partition the window"): one recorded tick
    time of -2^63 in facts.msgpack became a replayed span no boundary check saw.  The replayed trace now passes
    trace/validate.py:check like every other trace: the span is dropped with a warning, and the report is
    the clean recording's (the repro differs from live_facts.iscope in that one number)."""
    import zipfile

    import msgspec
    bad, clean = DATA / "fuzz" / "facts_tick_int64_min.iscope", DATA / "fuzz" / "live_facts.iscope"
    fb = msgspec.msgpack.decode(zipfile.ZipFile(bad).read("facts.msgpack"))
    fc_ = msgspec.msgpack.decode(zipfile.ZipFile(clean).read("facts.msgpack"))
    assert fb["threads"][0][1][28][1] == -2 ** 63 and fc_["threads"][0][1][28][1] > 0
    fb["threads"][0][1][28][1] = fc_["threads"][0][1][28][1]
    assert fb == fc_                                                       # the one planted difference
    e2e = {}
    for name, path in (("bad", bad), ("clean", clean)):
        p = _cli([str(path), "--replay", "-o", name, "--format", "json", "-q"], tmp_path)
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
        rep = json.loads((tmp_path / name / "report.json").read_text())
        e2e[name] = rep["e2e_ms"]
        if name == "bad":
            assert any("skipped 1 span(s)" in w for w in rep["warnings"]), rep["warnings"]
    assert e2e["bad"] == e2e["clean"]
