"""Offline LLM inference demo (CPU is enough): never downloads anything.

  * model: by default LlamaForCausalLM from a small LlamaConfig (hidden 256, 4 layers, vocab 4096)
    with random weights, and a byte-level BPE tokenizer trained with the `tokenizers` library on
    an in-memory corpus (wrapped in transformers' PreTrainedTokenizerFast).
    --model ID_OR_PATH loads a real causal LM and its tokenizer instead, from a local folder
    (anything save_pretrained wrote) or from the local Hugging Face cache (local_files_only: no
    network); when it is not there the demo says so and falls back to the random-weight model.
  * requests: prompts are tokenized (batch), generate() (greedy), decoded, post-processed

  python examples/llm_demo.py [--model ID_OR_PATH] [--batch-size 4] [--max-new-tokens 32] [--requests 2]
                              [--stress-mode] [--device cuda] [--output outputs/demo_llm_trace.iscope]

--output PATH keeps this run's InferScope trace (.iscope; `inferscope analyze PATH` reproduces
the report).  Under `inferscope run` it is the trace that run collects (the run's own report
is still written); run directly, the demo profiles itself in library mode.

--stress-mode: more, longer requests with heavy Python-side pre/post-processing (text
normalisation, a pure-Python pre-tokenization pass, JSON round trips) - the CPU-side work that
starves real inference servers.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time

WORDS = ("the model answers questions about inference latency throughput batch token kernel memory "
         "bandwidth cache attention layer weight gradient tensor device host copy queue request server "
         "response stream prompt decode prefill schedule thread worker pipeline profile trace report "
         "system node gpu cpu numa page fault context switch lock wait sleep compute framework python").split()


def make_corpus(n_lines: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 24))) + "." for _ in range(n_lines)]


def build_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(make_corpus(2000), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>")
    fast.padding_side = "left"
    return fast


def build_model(vocab_size: int, hidden: int, layers: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM  # top-level lazy import is the fastest path
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=hidden * 4,
                      num_hidden_layers=layers, num_attention_heads=max(1, hidden // 64),
                      num_key_value_heads=max(1, hidden // 128), max_position_embeddings=1024,
                      pad_token_id=0, bos_token_id=1, eos_token_id=2)
    model = LlamaForCausalLM(cfg)
    model.eval()
    return model


def _looks_like_path(model_id: str) -> bool:
    return (os.path.exists(model_id) or os.path.isabs(model_id) or model_id.startswith((".", "~"))
            or model_id.count("/") > 1 or model_id.endswith("/"))


def load_pretrained(model_id: str):
    """(tokenizer, model, description) from a local folder or the local HF cache, or (None, None, reason).

    Never downloads: local_files_only=True (and HF_HUB_OFFLINE=1, set in main()).
    """
    path = os.path.expanduser(model_id)
    if _looks_like_path(model_id) and not os.path.isdir(path):
        return None, None, f"no such folder: {path}"
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    except Exception as e:   # not in the cache / not a model folder / unsupported architecture
        if isinstance(e, OSError) and not os.path.isdir(path):
            try:
                from huggingface_hub import constants
                where = constants.HF_HUB_CACHE
            except Exception:
                where = "HF_HOME"
            return None, None, f"not in the local Hugging Face cache ({where})"
        reason = " ".join(str(e).split())[:240] or type(e).__name__
        return None, None, f"{type(e).__name__}: {reason}"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token if tok.eos_token is not None else tok.unk_token
    tok.padding_side = "left"
    model.eval()
    n = sum(p.numel() for p in model.parameters())
    return tok, model, f"{model_id} ({type(model).__name__}, {n / 1e6:.1f} M parameters)"


def fallback_message(model_id: str, reason: str) -> str:
    how = ("pass a folder that save_pretrained() wrote (config.json, weights, tokenizer files)"
           if _looks_like_path(model_id) else
           f"fetch it once yourself (e.g. `hf download {model_id}`) or pass a local folder")
    return (f"llm_demo: --model {model_id}: cannot load it offline: {reason}.\n"
            f"llm_demo: falling back to the built-in random-weight model (this demo never downloads; "
            f"to profile that model, {how}).")


def _session():
    """InferScope's collection session: the one `inferscope run` started, else a library-mode one."""
    try:
        from inferscope.collect import session as S
    except ImportError:
        return None, None
    return S, (S._session or S.get_or_start())


def keep_trace(path: str) -> str | None:
    """Stop collection and write this run's trace to PATH (.iscope). Returns an error message or None.

    Under `inferscope run` this finalises the run's session early (what `inferscope run` would do at
    exit, so the run's report covers the same data and `--trace` gets the same trace).
    """
    S, s = _session()
    if S is None:
        return "InferScope is not installed in this interpreter"
    if s is None:
        return "InferScope collection is disabled (INFERSCOPE_ENABLED=0)"
    from inferscope.trace import native
    trace = s.finalize()
    if s.mode == "library":
        S.set_current(None)
    if trace is None:
        return "no trace was collected"
    out = os.path.abspath(path)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if not (s.trace_out and os.path.abspath(s.trace_out) == out):   # else finalize() just wrote it
        native.save(trace, out)
    return None


def preprocess_heavy(texts: list[str]) -> list[str]:
    """Python-side request handling of the kind real servers do (stress mode)."""
    out = []
    for t in texts:
        t = re.sub(r"\s+", " ", t.lower()).strip()
        words = []
        for w in t.split(" "):           # a pure-Python pre-tokenization pass
            chars = [c for c in w if c.isalnum() or c in ".,?"]
            words.append("".join(chars))
        rec = json.loads(json.dumps({"prompt": " ".join(words), "meta": {"len": len(words)}}))
        out.append(rec["prompt"])
    return out


def postprocess_heavy(texts: list[str]) -> list[dict]:
    res = []
    for t in texts:
        sentences = [s.strip().capitalize() for s in t.split(".") if s.strip()]
        res.append(json.loads(json.dumps({"text": ". ".join(sentences), "n_words": len(t.split())})))
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, metavar="ID_OR_PATH",
                    help="a causal LM from a local folder or the local Hugging Face cache (never downloaded; "
                         "falls back to the built-in random-weight model when absent)")
    ap.add_argument("--output", default=None, metavar="PATH",
                    help="keep this run's InferScope trace here (.iscope), e.g. outputs/demo_llm_trace.iscope")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--prompt-words", type=int, default=48)
    ap.add_argument("--requests", type=int, default=2, help="number of batches to serve")
    ap.add_argument("--stress-mode", action="store_true", help="more requests, heavy Python pre/post-processing")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    ap.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    ap.add_argument("--scopes", dest="scopes", action="store_true", default=True,
                    help="annotate phases with inferscope.scope() (default)")
    ap.add_argument("--no-scopes", dest="scopes", action="store_false",
                    help="do not annotate phases with inferscope.scope() (the report then covers the whole process)")
    args = ap.parse_args(argv)
    if args.output and not args.output.endswith(".iscope"):
        ap.error(f"--output {args.output}: the trace is InferScope's native format; name it *.iscope "
                 f"(`inferscope export TRACE.iscope -o timeline.json` gives a Perfetto/Chrome JSON timeline)")
    # offline by construction: huggingface_hub reads these when transformers is first imported
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    if args.output:   # run directly: start collecting now (under `inferscope run` it already is)
        S, s = _session()
        if s is None:
            ap.error(f"--output {args.output}: no trace can be collected: " + (
                "InferScope is not installed in this interpreter" if S is None
                else "InferScope collection is disabled (INFERSCOPE_ENABLED=0)"))

    import torch
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device visible to torch")
    torch.set_num_threads(args.threads)
    try:
        from inferscope import scope
    except ImportError:  # running the demo without InferScope installed
        args.scopes = False
    if not args.scopes:
        import contextlib

        def scope(name):
            return contextlib.nullcontext()

    tok = model = None
    if args.model:
        tok, model, desc = load_pretrained(args.model)
        if model is None:
            print(fallback_message(args.model, desc), file=sys.stderr, flush=True)
    if model is None:
        tok = build_tokenizer(args.vocab)
        model = build_model(len(tok), args.hidden, args.layers)
        desc = f"built-in random-weight Llama (hidden {args.hidden}, {args.layers} layers, vocab {len(tok)})"
    model = model.to(args.device)
    print(f"model: {desc} on {args.device}", flush=True)
    t_start = time.perf_counter()  # serving only: tokenizer training and model build excluded
    n_req = args.requests * (4 if args.stress_mode else 1)
    rng = random.Random(1)
    produced = 0
    for r in range(n_req):
        prompts = [" ".join(rng.choice(WORDS) for _ in range(args.prompt_words)) for _ in range(args.batch_size)]
        if args.stress_mode:
            with scope("preprocess"):
                prompts = preprocess_heavy(prompts * 20)[: args.batch_size]
        with scope("tokenize"):
            enc = tok(prompts, return_tensors="pt", padding=True).to(args.device)
            enc = {k: enc[k] for k in ("input_ids", "attention_mask") if k in enc}   # no token_type_ids
        with scope("generate"), torch.inference_mode():
            out = model.generate(**enc, max_new_tokens=args.max_new_tokens, do_sample=False,
                                 min_new_tokens=args.max_new_tokens, pad_token_id=tok.pad_token_id)
        with scope("detokenize"):
            texts = tok.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        if args.stress_mode:
            with scope("postprocess"):
                postprocess_heavy(texts * 20)
        produced += int(out.shape[0]) * args.max_new_tokens
    dt = time.perf_counter() - t_start
    print(f"served {n_req} requests x batch {args.batch_size}: {produced} new tokens in {dt:.2f} s "
          f"({produced / dt:.1f} tok/s)")
    if args.output:
        err = keep_trace(args.output)
        if err:
            print(f"llm_demo: --output {args.output}: no trace written: {err}", file=sys.stderr)
            return 1
        print(f"trace written: {args.output} (report: inferscope analyze {args.output})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
