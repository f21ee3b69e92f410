#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Regenerate examples/reports/: what InferScope says about real traces, readable without installing it.

    python scripts/make_examples.py                 # = make examples
    python scripts/make_examples.py --record-demo   # = make examples-demo-trace (re-records the CPU demo trace)

For each example it analyses the trace with default options (top-10 tables, to keep the files
small) and writes <name>.md and <name>.html, then summary.json (trace checksum, verdict and
breakdown of every example: what tests/test_examples_current.py compares with a fresh analysis)
and README.md (the index).  The output is deterministic: the three GPU traces are read from the
shared trace folder (../shared/traces, or INFERSCOPE_SHARED_TRACES; an example whose trace is
absent keeps its committed files), the CPU demo from its committed trace cpu_demo.iscope, and
the report-generation timings (the only values that change from run to run) are left out.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "examples" / "reports"
SHARED = Path(os.environ.get("INFERSCOPE_SHARED_TRACES", REPO.parent / "shared" / "traces"))
TOP_N = 10
DEMO_ARGS: list[str] = []          # examples/llm_demo.py at its defaults, as the README's first command runs it

EXAMPLES = [
    {"name": "h100_qwen_textgen", "where": "shared", "trace": "kineto/tracelens_h100_qwen1.5-0.5b-chat_textgen.json.gz",
     "title": "LLM text generation on an H100 (PyTorch profiler trace)",
     "about": "Hugging Face text-generation, Qwen1.5-0.5B-Chat, batch 16, bf16, one ProfilerStep, torch 2.6 on an H100 80GB HBM3",
     "upstream": "AMD-AGI/TraceLens tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz @171dd747 (MIT)"},
    {"name": "a100_training_syncs", "where": "shared", "trace": "kineto/hta_negative_queue_a100_80gb_rank0.json.gz",
     "title": "Training steps with host syncs on an A100 (PyTorch profiler trace)",
     "about": "5 ProfilerSteps of a training job, rank 0 of 16, A100-SXM4-80GB: pageable and pinned copies, CUDA graphs, 25.7k cudaEventQuery",
     "upstream": "facebookresearch/HolisticTraceAnalysis tests/data/negative_queue_length_values_check/rank0.json.gz @f4d0062c (MIT)"},
    {"name": "rtx3090_tensorrt_nsys", "where": "shared", "trace": "nsys/memfusion_report1.sqlite",
     "title": "TensorRT CNN inference on an RTX 3090 (Nsight Systems SQLite export)",
     "about": "TensorRT FP16 inference of an ONNX conv net with NVTX ranges, nsys 2023.1",
     "upstream": "LeiWang1999/memfusion_artifact report1.sqlite @39f5032f (no licence file upstream; trace not redistributed here)"},
    {"name": "cpu_demo", "where": "repo", "trace": "examples/reports/cpu_demo.iscope",
     "title": "The bundled demo on a CPU (live `inferscope run`)",
     "about": "`inferscope run -- python examples/llm_demo.py` (random-weight Llama generate(), in-memory BPE tokenizer, 2 batches of 4) on a 2-vCPU VM; the trace is committed next to the report",
     "upstream": "this repository (Apache-2.0)"},
]


def trace_path(ex: dict) -> Path:
    return (SHARED / ex["trace"]) if ex["where"] == "shared" else (REPO / ex["trace"])


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def analyse(path: Path):
    """(report, trace) with the example options; report-generation timings zeroed (not reproducible: ``render``
    leaves them out of the pages)."""
    import msgspec
    from inferscope.analyze.options import AnalyzeOptions
    from inferscope.analyze.pipeline import analyze_report
    from inferscope.ingest import load_trace
    trace = load_trace(str(path))
    report = analyze_report(trace, AnalyzeOptions(top_n=TOP_N))
    report = msgspec.structs.replace(report, about=msgspec.structs.replace(report.about, analysis_ms=0.0, load_ms=None))
    return report, trace


def summary(report) -> dict:
    """What the currency test compares: the verdict and the breakdown (of the typed Report)."""
    return {
        "verdict": report.verdict.id,
        "confidence": round(float(report.verdict.confidence), 2),
        "e2e_ms": round(float(report.e2e_ms), 3),
        "breakdown": [{"category": c.category, "ms": round(float(c.ms), 3), "pct": round(float(c.pct), 2)}
                      for c in report.breakdown],
    }


def render(report, trace, name: str, outdir: Path) -> None:
    """<name>.md and <name>.html of the typed ``report`` (its timings zeroed by ``analyse``) as ``markdown.render``
    and ``html.render`` write them, the strip computed from the trace by analyze/views.py as the commands do; the
    zeroed analysis time is left out of both pages."""
    from inferscope.analyze.views import views_for
    from inferscope.report.html import build_html
    from inferscope.report.markdown import render_markdown
    from inferscope.util.atomic import atomic_write_text
    outdir.mkdir(parents=True, exist_ok=True)
    w = report.window
    md = re.sub(r"; report generation: analysis 0\.0 ms", "", render_markdown(report))
    page = build_html(report, views_for(trace, w.start_ns, w.end_ns, ("html",))).replace(
        "<tr><td>analysis_ms</td><td>0</td></tr>", "")
    atomic_write_text(outdir / f"{name}.md", md)
    atomic_write_text(outdir / f"{name}.html", page)


def index(entries: dict) -> str:
    lines = ["# Example reports", "",
             "What InferScope says about real traces, generated by `make examples` (`scripts/make_examples.py`)",
             "with default analysis options (top-10 tables). Open the `.html` files in a browser (self-contained, no",
             "network access) or read the `.md` files here.", "",
             "| example | trace | verdict | end-to-end | reports |", "|---|---|---|---|---|"]
    for ex in EXAMPLES:
        e = entries.get(ex["name"])
        if not e:
            continue
        lines.append(f"| {ex['title']} | {ex['about']} | `{e['verdict']}` ({e['confidence']:.2f}) | "
                     f"{e['e2e_ms']:,.1f} ms | [md]({ex['name']}.md), [html]({ex['name']}.html) |")
    lines += ["", "Sources (the traces are not copied into this repository, except the CPU demo's own):", ""]
    lines += [f"- `{ex['name']}`: {ex['upstream']}" for ex in EXAMPLES]
    lines += ["", "`make examples` re-analyses these traces (the GPU ones from `../shared/traces`); "
              "`make examples-demo-trace` re-records the CPU demo trace (a live run, so its numbers change).",
              "`tests/test_examples_current.py` checks that the verdicts and breakdowns in `summary.json` are what",
              "the current code computes.", ""]
    return "\n".join(lines)


def record_demo(dest: Path) -> None:
    """Run the demo under `inferscope run` and keep its trace at DEST (replacing it)."""
    with tempfile.TemporaryDirectory(prefix="inferscope-examples-") as tmp:
        cmd = [sys.executable, "-m", "inferscope", "run", "--report", str(Path(tmp) / "report.md"), "--",
               sys.executable, str(REPO / "examples" / "llm_demo.py"), *DEMO_ARGS, "--output", str(dest)]
        print("recording:", " ".join(cmd[2:4]), "...", " ".join(cmd[-2 - len(DEMO_ARGS):]))
        subprocess.run(cmd, check=True, cwd=tmp)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--record-demo", action="store_true", help="re-record examples/reports/cpu_demo.iscope first")
    ap.add_argument("--out", default=str(OUT), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.record_demo:
        record_demo(REPO / "examples" / "reports" / "cpu_demo.iscope")
    old = {}
    if (out / "summary.json").exists():
        old = json.loads((out / "summary.json").read_text(encoding="utf-8")).get("examples", {})
    entries = {}
    for ex in EXAMPLES:
        path = trace_path(ex)
        if not path.exists():
            print(f"{ex['name']}: {path} not available; keeping the committed report", file=sys.stderr)
            if ex["name"] in old:
                entries[ex["name"]] = old[ex["name"]]
            continue
        report, trace = analyse(path)
        render(report, trace, ex["name"], out)
        entries[ex["name"]] = {"trace": ex["trace"], "where": ex["where"], "sha256": sha256(path),
                               **summary(report)}
        print(f"{ex['name']}: {entries[ex['name']]['verdict']} -> {out / ex['name']}.md, .html")
    (out / "summary.json").write_text(json.dumps({"top_n": TOP_N, "examples": entries}, indent=1) + "\n",
                                      encoding="utf-8")
    (out / "README.md").write_text(index(entries), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
