"""The HTML report in a real (headless Chromium) browser: renders, script and CSS run under
the CSP, charts and headline are in the DOM, nothing is fetched from the network."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlparse

import pytest

from conftest import shared_path
from inferscope.report import html as H

pytestmark = pytest.mark.browser

# Hosts Chromium itself contacts in the background (component updater, accounts) even with
# --disable-background-networking; never something the report asked for.
BROWSER_OWN_HOSTS = ("google.com", "googleapis.com", "gstatic.com", "gvt1.com", "googleusercontent.com", "chromium.org")


def find_browser() -> str | None:
    for name in ("chromium", "chromium-browser", "chromium-headless-shell", "google-chrome", "google-chrome-stable"):
        p = shutil.which(name)
        if p:
            return p
    for p in ("/usr/bin/chromium", "/usr/lib/chromium/chromium", "/snap/bin/chromium"):
        if Path(p).exists():
            return p
    return None


@pytest.fixture(scope="module")
def browser():
    b = find_browser()
    if not b:
        pytest.skip("no headless Chromium found (apt-get install chromium; .ci/run installs it)")
    return b


def run_browser(browser: str, tmp: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
           "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={tmp / 'profile'}", *extra, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90)


def requested_urls(netlog: Path) -> set[str]:
    if not netlog.exists():
        return set()
    txt = netlog.read_text(errors="replace")
    if not txt.rstrip().endswith("}"):      # Chromium may leave the log unterminated
        txt = txt.rstrip().rstrip(",") + "]}"
    try:
        data = json.loads(txt)
        blob = json.dumps(data.get("events", []))
    except ValueError:
        blob = txt
    return set(re.findall(r'"(?:url|original_url)": ?"([^"]+)"', blob))


def foreign(urls: set[str]) -> list[str]:
    bad = []
    for u in urls:
        p = urlparse(u)
        if p.scheme in ("http", "https", "ws", "wss", "ftp"):
            host = (p.hostname or "").lower()
            if not any(host == h or host.endswith("." + h) for h in BROWSER_OWN_HOSTS):
                bad.append(u)
    return bad


def real_report(tmp: Path) -> tuple[Path, dict]:
    trace_path = shared_path("kineto", "hta_trace_diff_control_a100_rank3.json.gz")
    try:
        from inferscope.ingest import kineto
        if not hasattr(kineto, "load"):
            raise ImportError
    except ImportError:
        pytest.skip("Kineto importer (inferscope.ingest.kineto.load) not available yet")
    from inferscope.analyze.options import AnalyzeOptions
    from inferscope.analyze.pipeline import analyze_report
    from inferscope.analyze.views import attach
    trace = kineto.load(trace_path)
    rep = analyze_report(trace, AnalyzeOptions())
    attach(rep, trace, ["html"])
    result = rep.to_dict()
    out = tmp / "report.html"
    H.render(rep, trace, out)
    return out, result


def test_report_in_browser(browser, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    report, result = real_report(tmp)
    netlog = tmp / "netlog.json"
    r = run_browser(browser, tmp, report.as_uri(), "--dump-dom", f"--log-net-log={netlog}")
    dom = r.stdout
    assert r.returncode == 0 and "<html" in dom, r.stderr[-2000:]
    # our inline script and stylesheet ran (their CSP hashes match)
    assert re.search(r'<html[^>]*data-js="ok"', dom) and re.search(r'<html[^>]*data-css="ok"', dom)
    # headline numbers and charts are in the rendered DOM
    e2e = H.fmt_ms(result["e2e_ms"])
    assert re.search(r'id="e2e"[^>]*>' + re.escape(e2e) + "<", dom), e2e
    assert H.fmt_pct(result["gpu"]["idle_pct"]) in dom
    assert re.search(r'<svg id="breakdown-chart"', dom) and re.search(r'<svg id="timeline-chart"', dom)
    assert dom.count("<path ") >= 3 and "ProfilerStep#" in dom
    for f in result["findings"]:
        assert H.text(f["title"], 500) in dom
    # nothing requested from outside the file
    assert not foreign(requested_urls(netlog)), foreign(requested_urls(netlog))

    shot = tmp / "report.png"
    r = run_browser(browser, tmp, report.as_uri(), f"--screenshot={shot}", "--window-size=1400,2000")
    assert shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000, r.stderr[-2000:]
    print(f"\nscreenshot of the HTML report: {shot}")


def test_hostile_report_in_browser(browser, tmp_path_factory):
    from test_html_helpers import HOSTILE, make_result, render_html
    from test_html_report import hostile_trace
    tmp = tmp_path_factory.mktemp("browser_hostile")
    trace = hostile_trace()
    out = tmp / "hostile.html"
    render_html(make_result(trace, text=HOSTILE[1] + HOSTILE[0]), trace, out)
    netlog = tmp / "netlog.json"
    r = run_browser(browser, tmp, out.as_uri(), "--dump-dom", f"--log-net-log={netlog}")
    dom = r.stdout
    assert r.returncode == 0 and re.search(r'<html[^>]*data-js="ok"', dom), r.stderr[-2000:]
    from test_html_report import parse
    c = parse(dom)
    assert [t for t, _ in c.tags].count("script") == 1 and "img" not in {t for t, _ in c.tags} and "<img" not in dom
    assert not [(t, k) for t, a in c.tags for k in a if k.startswith("on")]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom          # shown as text
    assert not foreign(requested_urls(netlog))
