"""Offline LLM inference demo on CPU: no downloads, random weights, a real BPE tokenizer.

  * tokenizer: a byte-level BPE trained with the `tokenizers` library on an in-memory corpus,
    wrapped in transformers' PreTrainedTokenizerFast
  * model: LlamaForCausalLM from a small LlamaConfig (hidden 256, 4 layers, vocab 4096), random weights
  * requests: prompts are tokenized (batch), generate() (greedy), decoded, post-processed

  python examples/llm_demo.py [--batch-size 4] [--max-new-tokens 32] [--requests 2] [--stress-mode]
                              [--device cuda]

--stress-mode: more, longer requests with heavy Python-side pre/post-processing (text
normalisation, a pure-Python pre-tokenization pass, JSON round trips) - the CPU-side work that
starves real inference servers.
"""
from __future__ import annotations

import argparse
import json
import random
import re
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

    tok = build_tokenizer(args.vocab)
    model = build_model(len(tok), args.hidden, args.layers).to(args.device)
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
