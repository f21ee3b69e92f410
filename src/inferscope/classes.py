"""The one classification module: every name rule InferScope uses to put host code, API calls
and GPU activity into classes.  Pure Python (``re`` only, no numpy), so the live collector's
sampler imports it too.  Analyses turn these rules into span masks once per *distinct string*
(``analyze/classify.py``); the breakdown builds its categories from those masks and every other
section and renderer (HTML strip, sync table, findings) reads the breakdown's classes.

Each rule says why it is there.  A name is a name as the source recorded it (API names may carry
``_v3020`` suffixes; Python frames look like ``torch/nn/modules/module.py(1518): _call_impl``
in Kineto ``with_stack`` traces and like absolute file names in the live sampler).
"""
from __future__ import annotations

import re
import sys

from . import vocab as V

# ---------------------------------------------------------------------------------------------
# Python code: which package a frame belongs to
# ---------------------------------------------------------------------------------------------
NEUTRAL, TOK, PRE, FW, USER = 0, 1, 2, 3, 4
DOMAIN_NAMES = {TOK: V.CLS_TOKENIZATION, PRE: V.CLS_PREPROCESSING, FW: V.CLS_FRAMEWORK, USER: V.CLS_USER_CODE}

# Tokenizer libraries: all of their time is tokenization.
TOK_PACKAGES = frozenset({"tokenizers", "sentencepiece", "tiktoken", "tokenmonster", "youtokentome"})
# Data/image/audio preparation libraries.  numpy counts here (live and offline alike): in an
# inference program it prepares inputs (normalise, stack, pad); model compute runs in the framework.
PRE_PACKAGES = frozenset({"PIL", "cv2", "numpy", "scipy", "torchvision", "librosa", "soundfile", "imageio", "skimage",
                          "albumentations", "torchaudio", "decord", "av", "pandas"})
# Model frameworks and their helpers: dispatch, module calls, generation loops.
FW_PACKAGES = frozenset({"torch", "transformers", "accelerate", "safetensors", "optimum", "vllm", "sglang", "triton",
                         "jax", "jaxlib", "flax", "tensorflow", "keras", "onnxruntime", "peft", "diffusers",
                         "sentence_transformers", "functorch", "xformers", "flash_attn", "bitsandbytes",
                         "huggingface_hub", "tensorrt", "timm", "deepspeed", "einops", "_pytest"})
# transformers keeps tokenizers and processors inside the framework package: decide by file name.
TRANSFORMERS_TOK_FILES = ("tokenization_",)
TRANSFORMERS_PRE_FILES = ("image_processing_", "feature_extraction_", "processing_", "video_processing_",
                          "image_transforms", "image_utils")
STDLIB_MODULES = frozenset(getattr(sys, "stdlib_module_names", ()))

# Function, range (record_function / NVTX) and scope() names that say what the code does.
# Word-ish boundaries: "decode" alone is NOT tokenization (scope("decode") is an LLM phase).
TOKENIZE_NAME_RE = re.compile(
    r"(?i)tokeni[sz]|detokeni|sentencepiece|tiktoken|wordpiece|(?<![a-z])bpe(?![a-z])|encode_batch|batch_encode"
    r"|apply_chat_template")
PREPROCESS_NAME_RE = re.compile(
    r"(?i)pre[-_ ]?process|preproc|prepare_input|data[-_ ]?load|collate|(?<![a-z])resize|decode_image|image_decode"
    r"|imdecode|augment|normali[sz]e_image|feature_extract|image_processing")


def package_domain(pkg: str, basename: str = "") -> int:
    """Domain of a top-level package (NEUTRAL when unknown)."""
    if pkg in TOK_PACKAGES or (pkg == "transformers" and basename.startswith(TRANSFORMERS_TOK_FILES)):
        return TOK
    if pkg in PRE_PACKAGES or (pkg == "transformers" and basename.startswith(TRANSFORMERS_PRE_FILES)):
        return PRE
    if pkg in FW_PACKAGES:
        return FW
    return NEUTRAL


def name_domain(name: str) -> int:
    """TOK / PRE when a function, range or scope name says so, else NEUTRAL."""
    if TOKENIZE_NAME_RE.search(name):
        return TOK
    if PREPROCESS_NAME_RE.search(name):
        return PRE
    return NEUTRAL


_SITE = re.compile(r"[/\\](?:site|dist)-packages[/\\]")
_FRAME = re.compile(r"^(?P<path>[^()]*?)(?:\((?P<line>\d+)\))?:\s*(?P<func>.*)$")


def recorded_frame_domain(label: str) -> int:
    """Domain of a Python frame as a profiler recorded it (Kineto with_stack:
    ``path(line): func``; ``nn.Module: X``; ``<built-in method ...>``), without the machine it
    ran on.  Returns TOK, PRE, FW or USER (no NEUTRAL: stdlib, builtins and unknown installed
    libraries count as framework code, since nothing deeper is recorded for them)."""
    if label.startswith(("nn.Module:", "<built-in ", "<frozen ", "<")):
        return FW
    m = _FRAME.match(label)
    path, func = (m.group("path"), m.group("func")) if m else (label, "")
    path = path.replace("\\", "/")
    sm = _SITE.search(path)
    rel = path[sm.end():] if sm else path
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    base = parts[-1] if parts else ""
    # the first directory that is a known package decides (installed or a source checkout:
    # /src/sglang/python/sglang/srt/..., triton-custom/python/triton/...)
    for pkg in parts[:-1]:
        d = package_domain(pkg, base)
        if d != NEUTRAL:
            return d
    if sm or "/lib/python3" in path:          # installed library not listed, or the stdlib
        return FW
    mod = base[:-3] if base.endswith(".py") else base
    if len(parts) == 1 and mod in STDLIB_MODULES:   # threading.py(1002): _bootstrap
        return FW
    nd = name_domain(func or label)
    return nd if nd != NEUTRAL else USER


# ---------------------------------------------------------------------------------------------
# Host API calls (CUDA / HIP runtime and driver)
# ---------------------------------------------------------------------------------------------
# Calls that block the calling thread until the GPU reaches a point: explicit synchronisation,
# and the synchronous (non-Async) copy/memset entry points.  *Async copies with a pageable host
# side block too, but that is a property of the copy, not of the name: analyze/classify.py adds
# them through the launch flow (pageable_copy_launch_mask).
BLOCKING_SYNC_API_RE = re.compile(
    r"^(cuda|hip)(DeviceSynchronize|StreamSynchronize|EventSynchronize|ThreadSynchronize|StreamQuery_blocking)"
    r"|^cu(Ctx|Stream|Event)Synchronize"
    r"|^(cuda|hip)Memcpy(_v\d+)?$|^(cuda|hip)Memcpy(2D|3D|ToSymbol|FromSymbol|Peer)(_v\d+)?$"
    r"|^cuMemcpy(HtoD|DtoH|DtoD|)(_v\d+)?(_v\d+)?$"
    r"|^(cuda|hip)Memset(_v\d+)?$"
)
# Seed 004's wider "sync-like" name rule (nsys-llm-explainer): Synchronize / Wait / Query in the
# name.  It includes polls (cudaEventQuery) and GPU-side waits (cudaStreamWaitEvent) that do not
# block the host, so it is only a name view (table `sync_like_api_names`), never blocked time.
SYNC_LIKE_NAME_RE = re.compile(r"Synchroni[sz]e|WaitEvent|Wait\b|Query", re.I)
# Calls that make a stream wait on an event: a GPU-side dependency, the host is not blocked.
STREAM_WAIT_API_RE = re.compile(r"^(cuda|hip)StreamWaitEvent|^cuStreamWaitEvent")
LAUNCH_API_RE = re.compile(
    r"^(cuda|hip)(LaunchKernel|LaunchCooperativeKernel|ExtLaunchKernel|LaunchKernelExC|GraphLaunch|ModuleLaunchKernel|ExtModuleLaunchKernel)"
    r"|^cu(LaunchKernel|LaunchKernelEx|LaunchCooperativeKernel|GraphLaunch)"
    r"|^hipLaunchKernel|^hipGraphLaunch"
)
GRAPH_LAUNCH_API_RE = re.compile(r"GraphLaunch")
# Async copy/memset entry points (nsys `cuda_memcpy_async` rule): the call returns before the
# copy ends unless the host side is pageable.
ASYNC_MEMOP_API_RE = re.compile(r"(Memcpy|Memset)\w*Async|Async$", re.I)

# ---------------------------------------------------------------------------------------------
# GPU activity: communication vs compute (HTA separates them the same way, by kernel name)
# ---------------------------------------------------------------------------------------------
# Collective and point-to-point kernels of NCCL / RCCL / MSCCL(++) and the custom all-reduce
# kernels of vLLM/SGLang/TensorRT-LLM.  Names only: a generic "reduce" kernel is compute.
COMM_KERNEL_RE = re.compile(
    r"(?i)nccl|rccl|msccl|cross_device_reduce|custom_?all_?reduce|one_?shot_?all_?reduce|two_?shot_?all_?reduce"
    r"|allreduce_(fusion|kernel)|quick_?reduce")
# Host-side collective ops (torch.distributed / c10d, Gloo on the CPU): the op that issues them.
COMM_OP_RE = re.compile(r"^(nccl|gloo|mpi|ucc):|^c10d::|^record_param_comms$")


def api_base_name(name: str) -> str:
    """cudaStreamSynchronize_v3020 -> cudaStreamSynchronize."""
    return re.sub(r"_v\d+$", "", name)
