"""Classify Python code objects into domains, cached per code object.

Domains: TOK (tokenization), PRE (other preprocessing), FW (framework), USER, NEUTRAL
(stdlib, unknown third-party libraries, InferScope itself: transparent, the sampler keeps
walking outwards).  Rules, by the file's top-level package under site-packages:
  TOK  tokenizers, sentencepiece, tiktoken, transformers/**/tokenization_*.py; and any code whose
       function name says tokenize/tokenizer/detokenize/bpe (your own tokenizer counts too)
  PRE  PIL, cv2, numpy, scipy, torchvision/transforms, librosa, soundfile, imageio, skimage,
       albumentations, transformers image_processing_* / feature_extraction_* / processing_*;
       and functions named preprocess/resize/decode_image/augment/normalize_image...
  FW   torch, transformers (rest), accelerate, safetensors, optimum, vllm, triton, jax, tensorflow ...
  USER files outside site-packages and the standard library (your scripts), <stdin>, <string>
"""
from __future__ import annotations

import os
import re
import sysconfig

NEUTRAL, TOK, PRE, FW, USER = 0, 1, 2, 3, 4
DOMAIN_NAMES = {TOK: "tokenization", PRE: "preprocessing", FW: "framework", USER: "user_code"}

TOK_PACKAGES = {"tokenizers", "sentencepiece", "tiktoken", "tokenmonster", "youtokentome"}
PRE_PACKAGES = {"PIL", "cv2", "numpy", "scipy", "torchvision", "librosa", "soundfile", "imageio", "skimage",
                "albumentations", "torchaudio", "decord", "av", "pandas"}
FW_PACKAGES = {"torch", "transformers", "accelerate", "safetensors", "optimum", "vllm", "triton", "jax",
               "jaxlib", "flax", "tensorflow", "keras", "onnxruntime", "peft", "diffusers", "sentence_transformers",
               "functorch", "xformers", "flash_attn", "bitsandbytes", "huggingface_hub", "tensorrt"}
SELF_PACKAGES = {"inferscope"}
TOK_NAME = re.compile(r"(?i)(tokeni[sz]|tokenizer|detokeni|(^|_)bpe($|_)|wordpiece|sentencepiece)")
PRE_NAME = re.compile(r"(?i)((^|_)preprocess|(^|_)prepare_input|decode_image|(^|_)resize|(^|_)augment|normali[sz]e_image|(^|_)collate)")
TOK_SCOPE = re.compile(r"(?i)(token|encode|decode|bpe)")
PRE_SCOPE = re.compile(r"(?i)(preproc|prepare|resize|image|collate|load_data|augment)")

_stdlib = {os.path.normcase(os.path.realpath(p)) for p in
           {sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib")} if p}
_site_markers = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)
_inferscope_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_file_cache: dict[str, tuple[int, str, str]] = {}
# code object id -> (code, domain, label).  Keyed by id, not by the code object: hashing a code
# object (code_hash) re-hashes its name, bytecode and constants on every lookup - measured as
# ~14 % of the sampler thread's CPU.  The entry keeps the code object alive, so its id cannot be
# reused by another code object while cached (bounded by the distinct code objects sampled).
CODE_CACHE: dict[int, tuple] = {}


def _file_domain(filename: str) -> tuple[int, str, str]:
    """(domain, package, label) for a file name."""
    r = _file_cache.get(filename)
    if r is not None:
        return r
    dom, pkg, label = USER, "", os.path.basename(filename)
    if filename.startswith("<"):
        dom = NEUTRAL   # <frozen ...>, <string> (exec, dataclasses, python -c): transparent; all-neutral -> user
    elif filename.startswith(_inferscope_dir):
        dom, pkg = NEUTRAL, "inferscope"
    else:
        rel = None
        for m in _site_markers:
            i = filename.rfind(m)
            if i >= 0:
                rel = filename[i + len(m):]
                break
        if rel is not None:
            pkg = rel.split(os.sep, 1)[0].split(".", 1)[0]
            label = rel.replace(os.sep, "/")
            base = os.path.basename(rel)
            if pkg in TOK_PACKAGES or (pkg == "transformers" and base.startswith("tokenization_")):
                dom = TOK
            elif pkg in PRE_PACKAGES or (pkg == "transformers" and base.startswith(
                    ("image_processing_", "feature_extraction_", "processing_", "video_processing_", "image_transforms", "image_utils"))):
                dom = PRE
            elif pkg in FW_PACKAGES:
                dom = FW
            elif pkg in SELF_PACKAGES:
                dom = NEUTRAL
            else:
                dom = NEUTRAL  # unknown third-party library: transparent
        else:
            real = os.path.normcase(filename)
            if any(real.startswith(s) for s in _stdlib) or "/lib/python3" in filename:
                dom, pkg = NEUTRAL, "stdlib"
    r = (dom, pkg, label)
    _file_cache[filename] = r
    return r


IMPORT = 8   # flag bit: import machinery frame (import in progress)


def code_info(code) -> tuple[int, str]:
    """(domain, 'file:func' label) for a code object; cached."""
    e = CODE_CACHE.get(id(code))
    if e is None or e[0] is not code:
        e = code_entry(code)
    return e[1], e[2]


def code_entry(code) -> tuple:
    """Classify a code object and cache it: (code, domain, label)."""
    dom, pkg, flabel = _file_domain(code.co_filename)
    qual = getattr(code, "co_qualname", code.co_name)
    if dom == USER:
        if TOK_NAME.search(qual):
            dom = TOK
        elif PRE_NAME.search(qual):
            dom = PRE
    if code.co_filename.startswith("<frozen importlib"):
        dom = IMPORT
    e = (code, dom, f"{flabel}:{qual}")
    CODE_CACHE[id(code)] = e
    return e


def scope_domain(names) -> int:
    """Domain implied by the innermost scope() name that says tokenization / preprocessing."""
    for n in reversed(names):
        if TOK_SCOPE.search(n):
            return TOK
        if PRE_SCOPE.search(n):
            return PRE
    return NEUTRAL
