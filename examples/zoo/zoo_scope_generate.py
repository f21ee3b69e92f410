"""Planted: the user's ``scope("request", tokens=...)`` around a Hugging Face ``generate()`` (issue 24 item 2).

The live generate() hook records its own request too; the two are one request (the user's range, with
the batch and token counts generate() knows), not two.  A random-weight 2-layer Llama, batch 2, 12 new
tokens, 3 requests.  Truth: each request's start/end (perf_counter_ns around the scope), the batch and
generated tokens, printed as one JSON line.
"""
import json
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from inferscope import scope

torch.manual_seed(0)
torch.set_num_threads(1)
cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=500, max_position_embeddings=128)
model = LlamaForCausalLM(cfg).eval()
ids = torch.randint(5, 500, (2, 8))
NEW = 12
out = []
with scope("inference"):
    for _ in range(3):
        t0 = time.perf_counter_ns()
        with scope("request", tokens=NEW), torch.no_grad():     # no batch=: generate() knows it
            seq = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW,
                                 min_new_tokens=NEW, do_sample=False, pad_token_id=0)
        out.append({"start_ns": t0, "end_ns": time.perf_counter_ns(), "batch": int(seq.shape[0]),
                    "generated": int(seq.shape[1] - ids.shape[1])})
print(json.dumps({"requests": out}))
