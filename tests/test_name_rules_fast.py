"""Issue 26: the fast paths of the name rules give the same answers as the plain ones.

- ``classify.lower_twin``: a case-insensitive rule written in lower case, run without re.I on
  ``s.lower()`` for ASCII names, must match exactly where the rule itself matches;
- ``StringTable.ids_matching(pred, ids)``: the same mask as over every string, at the ids given;
- ``kernels.kernel_classes``: one class per distinct kernel name, the same as per interned string.
"""
from __future__ import annotations

import random
import re

import numpy as np

from inferscope import classes as C
from inferscope.analyze import classify
from inferscope.analyze.kernels import KERNEL_CLASSES, _kernel_class_patterns
from inferscope.analyze.run_phases import COPY_API_RE, RELEASE_API_RE
from inferscope.trace.strings import StringTable

RULES = [C.COMM_KERNEL_RE, C.TOKENIZE_NAME_RE, C.PREPROCESS_NAME_RE, C.SYNC_LIKE_NAME_RE, C.ASYNC_MEMOP_API_RE,
         RELEASE_API_RE, COPY_API_RE] + [re.compile(p, re.I) for _c, p in KERNEL_CLASSES]


def _names(rng: random.Random, n: int = 3000) -> list[str]:
    words = ["nccl", "AllReduce", "ncclDevKernel_AllGather_RING_LL", "custom_all_reduce", "Tokenizer", "BPE", "xbpe",
             "gemm", "Sm90_xmma", "flash_fwd", "Softmax", "copy", "elementwise", "vectorized", "Memcpy", "cudaMemcpyAsync",
             "Resize", "preprocess", "collate", "Synchronize", "Unload", "FINALIZE", "triton_poi", "void", "::", "<", ">",
             "(", ")", "_", " ", "0", "16816", "K", "\u212a", "\u017f", "ſ", "İ", "é", "ǅ"]
    out = []
    for _ in range(n):
        k = rng.randint(1, 6)
        s = "".join(rng.choice(words) for _ in range(k))
        s = "".join(ch.upper() if rng.random() < 0.3 else ch for ch in s)
        out.append(s)
    return out


def test_lower_twin_matches_the_rule_itself():
    rng = random.Random(26)
    names = _names(rng)
    for rule in RULES:
        tw = classify.lower_twin(rule)
        for s in names:
            fast = (tw.search(s.lower()) if tw is not None and s.isascii() else rule.search(s)) is not None
            assert fast == (rule.search(s) is not None), (rule.pattern, s)


def test_lower_twin_refuses_patterns_it_cannot_guarantee():
    for src in (r"(?i)\x41b", r"(?i)a\Db", r"(?i)A", r"(?i)a(?-i:b)", "(?i)\u00e9", r"(?i)\u0041"):
        assert classify.lower_twin(re.compile(src)) is None, src
    assert classify.lower_twin(re.compile(r"abc")) is None          # not case-insensitive: nothing to do


def test_ids_matching_subset_equals_full_mask_at_those_ids():
    rng = random.Random(7)
    st = StringTable(_names(rng, 500))
    pred = lambda s: C.COMM_KERNEL_RE.search(s) is not None   # noqa: E731
    full = st.ids_matching(pred)
    ids = np.array([rng.randrange(-1, len(st)) for _ in range(2000)], dtype=np.int32)
    sub = st.ids_matching(pred, ids)
    ok = ids >= 0
    assert (sub[ids[ok]] == full[ids[ok]]).all()
    assert not sub[np.setdiff1d(np.arange(len(st)), ids[ok])].any()
    assert not st.ids_matching(pred, np.zeros(0, np.int32)).any()


def test_kernel_class_fast_path_equals_re_i():
    pats, lower = _kernel_class_patterns()
    assert lower is not None
    rng = random.Random(3)
    for s in _names(rng):
        slow = next((i for i, p in enumerate(pats) if p.search(s)), len(pats))
        ps, t = (lower, s.lower()) if s.isascii() else (pats, s)
        fast = next((i for i, p in enumerate(ps) if p.search(t)), len(ps))
        assert fast == slow, s
