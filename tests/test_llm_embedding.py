"""Decode MBU on the live generate() path: the hook records the input embedding as the model holds it (shape, dtype
size, tied to the LM head or not) and the stage's bytes per step leave out the rows a decode step does not read, by
the same rule as --model-config (analyze/model_config.embedding_unread)."""
from __future__ import annotations

import json

import pytest

from helpers import Synth
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.pipeline import analyze
from inferscope.trace import SpanKind

B, PROMPT, NEW = 2, 7, 6          # batch, prompt tokens, generated tokens: decode steps 1..NEW-1 (step 0 is the prefill)
CFG = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
           vocab_size=500, max_position_embeddings=128)


def _generate(tied: bool, dtype: str):
    """A random-weight Llama run through the real recorder: (model, recorded events, recorded model meta)."""
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("transformers")
    from transformers.generation import utils as gu
    from inferscope.collect.llmhook import LlmRecorder
    while getattr(gu.GenerationMixin.generate, "__inferscope__", False):    # an earlier session's wrapper: unwrap
        gu.GenerationMixin.generate = gu.GenerationMixin.generate.__wrapped__

    class Sess:
        finalized = False
        buffer: list = []
    torch.manual_seed(0)
    model = tf.LlamaForCausalLM(tf.LlamaConfig(tie_word_embeddings=tied, **CFG)).to(getattr(torch, dtype)).eval()
    ids = torch.randint(5, CFG["vocab_size"], (B, PROMPT))
    plain = gu.GenerationMixin.generate
    rec = LlmRecorder(Sess())
    rec.s.buffer = []
    rec.patch()
    try:
        with torch.no_grad():
            model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW, min_new_tokens=NEW,
                           do_sample=False, pad_token_id=0)
    finally:
        gu.GenerationMixin.generate = plain
    return model, rec.s.buffer, rec.meta()


def _trace(events, models):
    """The recorder's events as the trace's annotations (perf-counter ns from the first), its models as the meta."""
    t = Synth()
    t.b.meta["models"] = models
    t0 = min(e[3] for e in events)
    for e in events:
        t.b.add_spans(start_ns=[e[3] - t0], end_ns=[e[4] - t0], track=t.cpu, kind=SpanKind.ANNOTATION,
                      name=t.b.strings.intern(e[5]), detail=t.b.strings.intern(e[6]), cat=t.b.strings.intern(e[7]))
    return t.done()


def _decode(models, events):
    res = analyze(_trace(events, models), AnalyzeOptions(window="all", peak_gbps=1000.0))
    return next(s for s in res["llm"]["stages"] if s["stage"] == "decode")


@pytest.mark.parametrize("tied,dtype", [(True, "float32"), (False, "float32"), (False, "bfloat16")])
def test_live_decode_mbu_leaves_out_the_unread_embedding_rows(tied, dtype):
    model, events, models = _generate(tied, dtype)
    w = model.get_input_embeddings().weight
    # the config did what the test assumes: one tensor when tied, two otherwise
    assert (model.get_output_embeddings().weight is w) == tied
    # recorded facts = the model's own tensors (and, independently, the config's sizes)
    emb = models[0]["embedding"]
    assert emb == {"rows": w.shape[0], "dim": w.shape[1], "elem_bytes": w.element_size(), "tied": tied}
    e_bytes = {"float32": 4, "bfloat16": 2}[dtype]
    assert (emb["rows"], emb["dim"], emb["elem_bytes"]) == (CFG["vocab_size"], CFG["hidden_size"], e_bytes)
    assert [json.loads(e[6])["tokens"] for e in events if e[5] == "hf.forward"] == [PROMPT] + [1] * (NEW - 1)

    # expected bytes per decode step, from the model and the construction: every weight byte (a tied table once) +
    # the KV cache: 2 x layers x kv_heads x head_dim x bytes per token x the mean context x batch
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    head_dim = CFG["hidden_size"] // CFG["num_attention_heads"]
    kv = 2 * CFG["num_hidden_layers"] * CFG["num_key_value_heads"] * head_dim * e_bytes
    ctx = sum(range(PROMPT, PROMPT + NEW - 1)) / (NEW - 1) * B          # kv_len before each decode step x batch
    unread = 0 if tied else (CFG["vocab_size"] - B) * CFG["hidden_size"] * e_bytes    # one row per sequence read
    st = _decode(models, events)
    assert st["steps"] == NEW - 1 and st["tokens"] == (NEW - 1) * B and st["kv_tokens_mean"] == ctx
    assert st["bytes_per_step"] == weights + kv * ctx - unread
    assert st["mbu_pct"] == pytest.approx(100 * st["bytes_per_step"] / (st["step_time_ms"] / 1e3) / 1e12, rel=1e-12)
    assert ("tied to the LM head: read whole" in st["mbu_basis"]) == tied
    assert (f"rows not read {unread:,} B" in st["mbu_basis"]) == (not tied)

    # the same run without the facts (a model without get_input_embeddings, an older trace): the table in full,
    # said so; the difference is exactly the unread rows' bytes
    bare = [{k: v for k, v in models[0].items() if k != "embedding"}]
    full = _decode(bare, events)
    assert full["bytes_per_step"] == weights + kv * ctx
    assert full["bytes_per_step"] - st["bytes_per_step"] == unread
    assert "counted in full (the live hook recorded no input embedding weight)" in full["mbu_basis"]
    for bad in ("x", {"rows": "500", "dim": 64, "elem_bytes": 4, "tied": False}, {"rows": 500, "dim": 64,
                                                                                    "elem_bytes": 4, "tied": 0}):
        assert _decode([dict(bare[0], embedding=bad)], events)["bytes_per_step"] == full["bytes_per_step"]


def test_models_without_embedding_methods_record_nothing():
    torch = pytest.importorskip("torch")
    from inferscope.collect.llmhook import input_embedding, model_info

    class NoMethods(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

    class Raises(NoMethods):
        def get_input_embeddings(self):
            raise NotImplementedError

    class Untied(NoMethods):          # an input table and a separate head of the same shape, equal values
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(10, 4)
            self.head = torch.nn.Linear(4, 10, bias=False)
            self.head.weight.data.copy_(self.emb.weight.data)

        def get_input_embeddings(self):
            return self.emb

        def get_output_embeddings(self):
            return self.head

    for m in (NoMethods(), Raises()):
        assert input_embedding(m) is None and "embedding" not in model_info(m)
    u = Untied()
    assert input_embedding(u) == {"rows": 10, "dim": 4, "elem_bytes": 4, "tied": False}
    u.head.weight = u.emb.weight                                   # tied by assignment, as transformers ties
    assert input_embedding(u) == {"rows": 10, "dim": 4, "elem_bytes": 4, "tied": True}


def test_every_demo_architecture_records_its_config_tie():
    """Across the demo's layouts (GPT-2/BLOOM/Falcon/OPT tie their LM head by default, Llama/NeoX/GPT-J/Phi do not)
    the recorded facts agree with each config: vocab x hidden rows, fp32 bytes, ``tie_word_embeddings``."""
    pytest.importorskip("torch")
    tf = pytest.importorskip("transformers")
    from inferscope.collect.llmhook import input_embedding
    from test_llm import ARCHS
    ties = set()
    for arch, (cls_name, kw) in sorted(ARCHS.items()):
        cfg = getattr(tf, cls_name)(**kw)
        got = input_embedding(tf.AutoModelForCausalLM.from_config(cfg))
        hidden = kw.get("hidden_size") or kw["n_embd"]
        assert got == {"rows": kw["vocab_size"], "dim": hidden, "elem_bytes": 4, "tied": cfg.tie_word_embeddings}, arch
        ties.add(got["tied"])
    assert ties == {True, False}
