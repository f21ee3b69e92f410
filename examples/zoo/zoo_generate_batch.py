"""Planted: the same generate() work at a different batch size (issue 24 item 4, ``inferscope diff``).

``python zoo_generate_batch.py B``: a random-weight 2-layer Llama (hidden 256) generates 24 new tokens for B prompts
of 16 tokens, 3 times, with no InferScope calls.  A larger batch makes every step (and the run) longer
but produces more tokens per second.  Truth (self-timed): generated tokens (x batch) per second of the
generate() calls, and their total wall time, printed as one JSON line.
"""
import json
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
torch.set_num_threads(1)
cfg = LlamaConfig(hidden_size=256, intermediate_size=688, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=1000, max_position_embeddings=128)
model = LlamaForCausalLM(cfg).eval()
batch = int(sys.argv[1]) if len(sys.argv) > 1 else 1
ids = torch.randint(5, 1000, (batch, 16))
NEW = 24
gen = 0
t0 = time.perf_counter_ns()
for _ in range(3):
    with torch.no_grad():
        seq = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW,
                             min_new_tokens=NEW, do_sample=False, pad_token_id=0)
    gen += int(seq.shape[0]) * int(seq.shape[1] - ids.shape[1])
t1 = time.perf_counter_ns()
print(json.dumps({"batch": batch, "generated_tokens": gen, "wall_ms": (t1 - t0) / 1e6,
                  "tokens_per_s": gen / ((t1 - t0) / 1e9)}))
