"""Cost of InferScope's Hugging Face generate() recording (collect/llmhook.py), in process.

    python bench/bench_llm_hook.py [--pairs 30] [--new-tokens 32] [--batch 4]

The demo's model (random-weight Llama: hidden 256, 4 layers, vocab 4096; torch threads 1) runs
generate() in interleaved pairs, once plain and once with GenerationMixin.generate wrapped exactly as
under `inferscope run` (events appended to a list instead of the ring buffer).  Printed: the median
per-pair ratio (wrapped / plain) with a 95 % bootstrap CI, and the added time per recorded step.
In-process pairs a few ms apart cancel most of the interference a shared machine adds to whole-process runs.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


class _Buf(list):
    pass


class _Session:
    finalized = False

    def __init__(self):
        self.buffer = _Buf()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=30)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--batch", type=int, default=4)
    args = ap.parse_args()
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.generation import utils as gu
    from inferscope.collect.llmhook import LlmRecorder
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=4096, hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
                      num_attention_heads=4, max_position_embeddings=512)
    model = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(5, 4096, (args.batch, 24))
    plain = gu.GenerationMixin.generate
    rec = LlmRecorder(_Session())
    rec.patch()
    wrapped = gu.GenerationMixin.generate
    kw = dict(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.new_tokens,
              min_new_tokens=args.new_tokens, do_sample=False, pad_token_id=0)

    def once(fn) -> float:
        gu.GenerationMixin.generate = fn
        t0 = time.perf_counter()
        with torch.no_grad():
            model.generate(**kw)
        return time.perf_counter() - t0
    once(plain), once(wrapped)          # warm-up
    ratios, diffs = [], []
    rnd = random.Random(0)
    for _ in range(args.pairs):
        order = [plain, wrapped]
        rnd.shuffle(order)
        t = {id(f): once(f) for f in order}
        ratios.append(t[id(wrapped)] / t[id(plain)])
        diffs.append(t[id(wrapped)] - t[id(plain)])
    gu.GenerationMixin.generate = plain
    med = statistics.median(ratios)
    boot = sorted(statistics.median(rnd.choices(ratios, k=len(ratios))) for _ in range(2000))
    steps = args.new_tokens
    print(f"generate(): batch {args.batch}, {steps} new tokens, {args.pairs} interleaved pairs")
    print(f"  wrapped/plain median ratio {med:.4f} [95% CI {boot[50]:.4f}-{boot[1949]:.4f}]")
    print(f"  added time per generate() median {statistics.median(diffs) * 1e3:+.3f} ms "
          f"= {statistics.median(diffs) / steps * 1e6:+.1f} us per recorded step; "
          f"events recorded: {len(rec.s.buffer)}")


if __name__ == "__main__":
    main()
