"""examples/llm_demo.py --model (local folder / local HF cache, never a download) and --output (keeps the trace)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "examples" / "llm_demo.py"
PY = sys.executable
SMALL = ["--requests", "1", "--batch-size", "2", "--max-new-tokens", "3", "--prompt-words", "8"]


def _env(tmp_path, **kw):
    e = dict(os.environ)
    e["HF_HOME"] = str(tmp_path / "hf-home")          # an empty cache unless the test fills it
    e["HF_ENDPOINT"] = "http://127.0.0.1:9"           # any attempt to reach a hub fails at once
    e.pop("HF_HUB_OFFLINE", None)                     # the demo must set offline mode itself
    e.pop("TRANSFORMERS_OFFLINE", None)
    e.update(kw)
    return e


def _demo(args, env, cwd, prefix=(), timeout=180):
    return subprocess.run([*prefix, PY, str(DEMO), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A tiny random Llama + the demo's BPE tokenizer, written with save_pretrained()."""
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    sys.path.insert(0, str(DEMO.parent))
    try:
        import llm_demo
    finally:
        sys.path.remove(str(DEMO.parent))
    tok = llm_demo.build_tokenizer(512)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    d = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    assert (d / "config.json").exists() and any(d.glob("*.safetensors"))
    return d


@pytest.mark.live
def test_model_by_path_under_inferscope_run_keeps_trace(tmp_path, tiny_model):
    from inferscope.trace import native
    from inferscope.trace.kinds import SpanKind
    out = tmp_path / "outputs" / "demo_llm_trace.iscope"
    r = _demo(["--model", str(tiny_model), *SMALL, "--output", str(out)], _env(tmp_path), tmp_path,
              prefix=(PY, "-m", "inferscope", "run", "--report", str(tmp_path / "llm_report.md"), "--"))
    assert r.returncode == 0, r.stderr
    assert f"model: {tiny_model} (LlamaForCausalLM" in r.stdout, r.stdout
    assert "falling back" not in r.stderr
    assert out.exists() and (tmp_path / "llm_report.md").exists()
    t = native.load(out)
    assert t.meta["collection"]["complete"] is True
    names = {t.strings[int(i)] for i in t.spans.name[t.spans.kind == SpanKind.ANNOTATION]}
    assert {"tokenize", "generate", "detokenize"} <= names
    # the kept trace reproduces the run's verdict
    r2 = subprocess.run([PY, "-m", "inferscope", "analyze", str(out), "-o", str(tmp_path / "reanalysed.md")],
                        capture_output=True, text=True, timeout=60)
    assert r2.returncode == 0, r2.stderr
    verdict = [ln for ln in (tmp_path / "llm_report.md").read_text().splitlines() if "Verdict:" in ln]
    assert verdict and verdict[0] in (tmp_path / "reanalysed.md").read_text()


def test_model_id_from_local_hf_cache_standalone_output(tmp_path, tiny_model):
    """An id resolves in the local cache (no network); run directly, --output profiles in library mode."""
    snap = tmp_path / "hf-home" / "hub" / "models--tiny-org--tiny-llama"
    shutil.copytree(tiny_model, snap / "snapshots" / "0123abcd")
    (snap / "refs").mkdir()
    (snap / "refs" / "main").write_text("0123abcd")
    out = tmp_path / "t.iscope"
    r = _demo(["--model", "tiny-org/tiny-llama", *SMALL, "--output", str(out)], _env(tmp_path), tmp_path)
    assert r.returncode == 0, r.stderr
    assert "model: tiny-org/tiny-llama (LlamaForCausalLM" in r.stdout, (r.stdout, r.stderr)
    assert f"trace written: {out}" in r.stdout
    from inferscope.trace import native
    from inferscope.trace.kinds import SpanKind
    t = native.load(out)
    assert np.count_nonzero(t.spans.kind == SpanKind.ANNOTATION) >= 3
    assert np.count_nonzero(t.spans.kind == SpanKind.CPU_SAMPLE) > 0


def test_missing_model_falls_back_with_a_clear_message(tmp_path):
    pytest.importorskip("transformers")
    r = _demo(["--model", "no-such-org/no-such-model", *SMALL], _env(tmp_path, INFERSCOPE_ENABLED="0"), tmp_path)
    assert r.returncode == 0, r.stderr
    assert "no-such-org/no-such-model: cannot load it offline: not in the local Hugging Face cache" in r.stderr
    assert "falling back to the built-in random-weight model" in r.stderr and "never downloads" in r.stderr
    assert "model: built-in random-weight Llama" in r.stdout
    r = _demo(["--model", str(tmp_path / "missing-dir"), *SMALL], _env(tmp_path, INFERSCOPE_ENABLED="0"), tmp_path)
    assert r.returncode == 0 and "no such folder" in r.stderr and "built-in random-weight" in r.stdout


def test_output_must_be_iscope(tmp_path):
    r = _demo(["--output", str(tmp_path / "trace.json")], _env(tmp_path), tmp_path, timeout=60)
    assert r.returncode == 2 and "*.iscope" in r.stderr
    assert not (tmp_path / "trace.json").exists()


def test_output_needs_collection(tmp_path):
    r = _demo(["--output", str(tmp_path / "t.iscope")], _env(tmp_path, INFERSCOPE_ENABLED="0"), tmp_path, timeout=60)
    assert r.returncode == 2 and "INFERSCOPE_ENABLED=0" in r.stderr
    assert not (tmp_path / "t.iscope").exists()
