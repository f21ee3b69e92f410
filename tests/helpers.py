"""Small builders for synthetic traces with known ground truth."""
from __future__ import annotations

import gzip
import shutil


from inferscope.trace import CopyKind, FlowKind, MemKind, SpanKind, TraceBuilder, TrackKind


class Synth:
    """Build a trace span by span: one CPU thread, one GPU stream by default."""

    def __init__(self):
        self.b = TraceBuilder()
        self.cpu = self.b.track(TrackKind.CPU_THREAD, pid=100, tid=100, name="main")
        self.gpu = self.b.track(TrackKind.GPU_STREAM, pid=100, tid=7, device=0)
        self._corr = 0

    def span(self, kind, name, start_us, end_us, track=None, **kw):
        tr = self.cpu if track is None else track
        return int(self.b.add_spans(start_ns=[int(start_us * 1000)], end_ns=[int(end_us * 1000)], track=tr,
                                    kind=kind, name=self.b.strings.intern(name), **kw)[0])

    def launch(self, api_start, api_end, gpu_start, gpu_end, kind=SpanKind.KERNEL, name="kern", api="cudaLaunchKernel", **kw):
        self._corr += 1
        a = self.span(SpanKind.RUNTIME, api, api_start, api_end, correlation=self._corr)
        g = self.span(kind, name, gpu_start, gpu_end, track=self.gpu, correlation=self._corr, **kw)
        self.b.add_flows([a], [g], FlowKind.LAUNCH)
        return a, g

    def copy(self, api_start, api_end, gpu_start, gpu_end, ck=CopyKind.H2D, host=MemKind.PAGEABLE, nbytes=1 << 20,
             api="cudaMemcpyAsync"):
        src, dst = (host, MemKind.DEVICE) if ck == CopyKind.H2D else (MemKind.DEVICE, host)
        return self.launch(api_start, api_end, gpu_start, gpu_end, kind=SpanKind.MEMCPY, name=f"Memcpy {ck.name}",
                           api=api, copy_kind=ck, src_mem=src, dst_mem=dst, bytes=nbytes)

    def done(self):
        return self.b.finalize()


def add_counter(synth: "Synth", metric: str, ts_us, values, device: int = -1):
    """A COUNTER track named ``metric`` with samples at ``ts_us`` (microseconds)."""
    tr = synth.b.track(TrackKind.COUNTER, pid=100, tid=-1, device=device, name=metric)
    synth.b.add_counters(tr, [int(t * 1000) for t in ts_us], list(values))
    return tr


def load_gz_iscope(gz_path, folder):
    """A gzip-compressed .iscope (tests/data/live_gpu) loaded through a plain copy in ``folder``."""
    from inferscope.trace import native
    p = folder / "t.iscope"
    with gzip.open(gz_path, "rb") as f, open(p, "wb") as g:
        shutil.copyfileobj(f, g)
    return native.load(p)


# report.md's own raw HTML: the collapsible evidence table of each finding
_OWN_MD_HTML = {"<details><summary>evidence values</summary>", "</details>"}


def md_parse(md: str):
    """report.md read by a CommonMark parser with GFM tables (markdown-it-py; the test skips without it)."""
    import pytest
    mdit = pytest.importorskip("markdown_it")
    return mdit.MarkdownIt("commonmark").enable("table")


def md_markup(md: str) -> list[str]:
    """What a Markdown renderer would read as markup from the text: raw HTML (inline or block, except the
    report's own <details>), links and autolinks, images.  A safely escaped report has none."""
    out = []

    def walk(tokens):
        for t in tokens:
            if t.type in ("html_inline", "html_block") and t.content.strip() not in _OWN_MD_HTML:
                out.append(t.content.strip())
            elif t.type in ("link_open", "image"):
                out.append(f"{t.type}: {t.attrGet('href') or t.attrGet('src')}")
            if t.children:
                walk(t.children)
    walk(md_parse(md).parse(md))
    return out


def md_render(md: str) -> str:
    """report.md rendered to HTML by that parser (text escaped as a browser would show it)."""
    return md_parse(md).render(md)


def as_report(res: dict, trace, formats=("md", "json", "csv", "html", "chrome")):
    """report.json's dict (as ``analyze`` returns it) typed the way the commands hand it to the renderers: a
    ``result.Report`` with the views its ``formats`` draw from ``trace`` attached (analyze/views.py)."""
    from inferscope.analyze.views import attach
    from inferscope.result import from_dict
    rep = from_dict(res)
    attach(rep, trace, formats)
    return rep
