"""The one classification module: the live sampler and the offline analyses give one answer."""
import pytest

from inferscope import classes as K
from inferscope.collect import classify as live

SITE = "/x/lib/python3.11/site-packages/"
# (site-packages relative file, function): domain, the same whether sampled live or recorded by a profiler
CASES = [
    ("numpy/core/fromnumeric.py", "sum", K.PRE),            # numpy prepares inputs: preprocessing both ways
    ("PIL/Image.py", "resize", K.PRE),
    ("tokenizers/__init__.py", "encode", K.TOK),
    ("transformers/models/bert/tokenization_bert.py", "tokenize", K.TOK),
    ("transformers/models/llama/modeling_llama.py", "forward", K.FW),
    ("torch/nn/modules/module.py", "_call_impl", K.FW),
    ("sglang/srt/managers/schedule_batch.py", "<listcomp>", K.FW),
]


@pytest.mark.parametrize("rel,func,dom", CASES)
def test_live_and_offline_agree(rel, func, dom):
    assert live._file_domain(SITE + rel)[0] == dom
    assert K.recorded_frame_domain(f"{SITE}{rel}(12): {func}") == dom
    assert K.recorded_frame_domain(f"{rel}(12): {func}") == dom          # Kineto's relative form


def test_scope_and_range_names():
    # an LLM phase is not tokenization (scope("decode") used to make a loop "96.6 % tokenization")
    assert live.scope_domain(["decode"]) == K.NEUTRAL
    assert live.scope_domain(["generate", "tokenize"]) == K.TOK
    assert live.scope_domain(["preprocess_images"]) == K.PRE
    assert K.name_domain("decode") == K.NEUTRAL and K.name_domain("detokenize") == K.TOK
    assert K.name_domain("decode_image") == K.PRE


def test_user_code_offline():
    assert K.recorded_frame_domain("/home/me/app.py(3): main") == K.USER
    assert K.recorded_frame_domain("app.py(3): tokenize_batch") == K.TOK
    assert K.recorded_frame_domain("threading.py(1002): _bootstrap") == K.FW      # stdlib
    assert K.recorded_frame_domain("/src/sglang/python/sglang/srt/x.py(1): f") == K.FW   # source checkout


def test_communication_and_sync_names():
    assert K.COMM_KERNEL_RE.search("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*)")
    assert K.COMM_KERNEL_RE.search("void vllm::cross_device_reduce_1stage<half, 8>(...)")
    assert not K.COMM_KERNEL_RE.search("void at::native::reduce_kernel<512, 1>(...)")
    assert K.BLOCKING_SYNC_API_RE.search("cudaStreamSynchronize_v3020")
    assert not K.BLOCKING_SYNC_API_RE.search("cudaEventQuery")          # a poll: not blocked time
    assert K.SYNC_LIKE_NAME_RE.search("cudaEventQuery")                 # ...but in the seed-004 name view
