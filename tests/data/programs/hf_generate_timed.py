"""A random-weight Llama generate() with no InferScope calls, timing itself with a streamer
(tests/test_llm.py runs it under `inferscope run` and compares the report with these numbers)."""
import json, sys, time
import torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
torch.set_num_threads(1)
cfg = LlamaConfig(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=8,
                  num_key_value_heads=4, vocab_size=4000, max_position_embeddings=512)
model = LlamaForCausalLM(cfg).eval()


class Clock:
    def __init__(self):
        self.t = []

    def put(self, value):
        self.t.append(time.perf_counter())

    def end(self):
        pass


out = []
ids = torch.randint(5, 4000, (4, 32))
for _ in range(2):
    c = Clock()
    t0 = time.perf_counter()
    with torch.no_grad():
        seq = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=64, min_new_tokens=64,
                             do_sample=False, streamer=c, pad_token_id=0)
    t1 = time.perf_counter()
    tok = c.t[1:]          # the first put() is the prompt
    out.append({"ttft_ms": (tok[0] - t0) * 1e3, "tpot_ms": (tok[-1] - tok[0]) / (len(tok) - 1) * 1e3,
                "request_ms": (t1 - t0) * 1e3, "generated": int(seq.shape[1] - ids.shape[1]), "tokens_seen": len(tok)})
out_params = sum(p.numel() for p in model.parameters())
json.dump({"requests": out, "params": out_params}, open(sys.argv[1], "w"))
