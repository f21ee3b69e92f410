"""Hugging Face ``generate()`` recording with no code changes (issue 11).

When the program imports ``transformers.generation.utils`` (or already has), ``GenerationMixin.generate``
is wrapped: each call records one ANNOTATION ``hf.generate`` (a request; detail JSON: batch, prompt and
generated tokens, model id, ``error``: the class name of an exception the call raised, ``parent``: the id of the ``scope(..., tokens=/batch=)`` request it runs in, if any) and, while it runs, every forward of that model one ANNOTATION ``hf.forward``
(a step; detail JSON: tokens in the step, batch, KV length before it).  The first forward is the prefill,
the rest are decode steps.  Cost per step: two clock reads, one tuple appended to the ring buffer.
The model's static description (``model_info``: parameters, bytes by dtype, config sizes, matmul weight
elements, the input embedding's shape and dtype size and whether the LM head shares it: ``embedding``) is taken once
per model and stored in the trace meta (``models``).
"""
from __future__ import annotations

import functools
import sys
import threading
import time

from .errname import error_name
from .importhook import ModuleImportHook

CAT = "inferscope.llm"
GEN = "hf.generate"
FWD = "hf.forward"
_ANN = 8
TARGET = "transformers.generation.utils"


def model_info(model) -> dict:
    """Static description of an HF model: exact parameter counts and bytes, config sizes, matmul weights."""
    import torch
    params = 0
    by_dtype: dict[str, list] = {}
    for p in model.parameters():
        n = int(p.numel())
        params += n
        d = str(p.dtype).replace("torch.", "")
        e = by_dtype.setdefault(d, [0, 0])
        e[0] += n
        e[1] += n * int(p.element_size())
    linear = 0
    for _, m in model.named_modules():
        if isinstance(m, torch.nn.Linear) or _is_hf_conv1d(m):
            linear += int(m.weight.numel())
    lm = 0
    try:
        oe = model.get_output_embeddings()
        if oe is not None and hasattr(oe, "weight"):
            lm = int(oe.weight.numel())
    except Exception:
        pass
    emb = input_embedding(model)
    cfg = getattr(model, "config", None)
    if cfg is not None and hasattr(cfg, "get_text_config"):
        try:
            cfg = cfg.get_text_config()
        except Exception:
            pass

    def c(*names):
        for nm in names:
            v = getattr(cfg, nm, None)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
        return None
    layers = c("num_hidden_layers", "n_layer", "num_layers")
    hidden = c("hidden_size", "n_embd", "d_model")
    heads = c("num_attention_heads", "n_head")
    kv = c("num_key_value_heads") or heads
    head_dim = c("head_dim") or (hidden // heads if hidden and heads else None)
    top = max(by_dtype.items(), key=lambda it: it[1][0]) if by_dtype else None
    kv_dtype = top[0] if top else None          # the KV cache is kept in the weights' dominant dtype
    esize = top[1][1] // max(1, top[1][0]) if top else None
    return {
        "name": str(getattr(cfg, "_name_or_path", "") or type(model).__name__)[:200],
        "class": type(model).__name__, "model_type": str(getattr(cfg, "model_type", "") or "")[:50],
        "params": params, "param_bytes": sum(v[1] for v in by_dtype.values()),
        "params_by_dtype": {k: v[0] for k, v in by_dtype.items()},
        "bytes_by_dtype": {k: v[1] for k, v in by_dtype.items()},
        "layers": layers, "hidden": hidden, "heads": heads, "kv_heads": kv, "head_dim": head_dim,
        "intermediate": c("intermediate_size", "n_inner", "ffn_dim"), "vocab": c("vocab_size"),
        "linear_weight_elems": linear, "lm_head_elems": lm,
        "kv_dtype": kv_dtype, "kv_elem_bytes": esize,
        **({"embedding": emb} if emb else {}),
        "device": str(next(iter(model.parameters())).device) if params else None,
    }


def input_embedding(model) -> dict | None:
    """The input embedding table as the model holds it (analyze/model_config.embedding_unread's facts): ``rows`` x
    ``dim`` of ``get_input_embeddings().weight``, its ``elem_bytes``, and ``tied``: the LM head
    (``get_output_embeddings().weight``) is that same tensor or shares its storage.  None when the model has no such
    2-D weight (the analysis then counts the table in full and says so)."""
    try:
        w = model.get_input_embeddings().weight
        if getattr(w, "ndim", 0) != 2:
            return None
        rows, dim, eb = int(w.shape[0]), int(w.shape[1]), int(w.element_size())
    except Exception:
        return None
    tied = False
    try:
        oe = model.get_output_embeddings()
        o = getattr(oe, "weight", None) if oe is not None else None
        if o is not None:
            tied = o is w or (_storage_ptr(o) not in (None, 0) and _storage_ptr(o) == _storage_ptr(w)
                              and tuple(o.shape) == tuple(w.shape))
    except Exception:
        pass
    return {"rows": rows, "dim": dim, "elem_bytes": eb, "tied": bool(tied)}


def _storage_ptr(t):
    try:
        return int(t.untyped_storage().data_ptr())
    except Exception:
        return None


def _is_hf_conv1d(m) -> bool:
    """transformers' Conv1D (GPT-2, GPT-2-style models): a Linear with a transposed weight, x @ W + b."""
    t = type(m)
    return t.__name__ == "Conv1D" and t.__module__.startswith("transformers.") and getattr(getattr(m, "weight", None),
                                                                                           "ndim", 0) == 2


def _shape(x, i):
    try:
        return int(x.shape[i])
    except Exception:
        return None


class LlmRecorder:
    """Wraps GenerationMixin.generate; events go to the session's ring buffer."""

    def __init__(self, session) -> None:
        self.s = session
        self.models: dict[int, dict] = {}
        self.hook = None
        self.orig = None
        self._tls = threading.local()
        self.error: str | None = None

    def start(self) -> None:
        if TARGET in sys.modules:
            self.patch()
        else:
            self.hook = ModuleImportHook(TARGET, self.patch)
            self.hook.install()

    def stop(self) -> None:
        if self.hook is not None:
            self.hook.remove()
        mod = sys.modules.get(TARGET)
        if self.orig is not None and mod is not None:
            try:
                mod.GenerationMixin.generate = self.orig
            except Exception:
                pass

    def patch(self) -> None:
        mod = sys.modules.get(TARGET)
        gm = getattr(mod, "GenerationMixin", None)
        if gm is None or getattr(gm.generate, "__inferscope__", False):
            return
        orig = gm.generate
        rec = self

        def generate(model, *args, **kwargs):
            s = rec.s
            if s.finalized or getattr(rec._tls, "active", False):
                return orig(model, *args, **kwargs)
            return rec._record(orig, model, args, kwargs)
        generate.__inferscope__ = True
        generate.__wrapped__ = orig
        generate.__doc__ = orig.__doc__
        generate.__name__ = orig.__name__
        self.orig = orig
        gm.generate = generate

    def _record(self, orig, model, args, kwargs):
        s = self.s
        buf = s.buffer
        tid = threading.get_native_id()
        ids = kwargs.get("input_ids")
        if ids is None and args:
            ids = args[0]
        if ids is None:
            ids = kwargs.get("inputs") if kwargs.get("inputs") is not None else kwargs.get("inputs_embeds")
        batch, prompt = _shape(ids, 0), _shape(ids, 1)
        # the user's request scope this call runs in (one request with it: analyze/llm_requests.py); scopes live
        # in collect.api, so when the program never imported it none is open (importing it here cost the first
        # request 3-5 ms of its TTFT)
        api = sys.modules.get("inferscope.collect.api")
        try:
            parent = api.current_request() if api is not None else None
        except Exception:
            parent = None
        key = id(model)
        steps: list = []
        had_fwd = "forward" in model.__dict__
        inner = model.forward
        pc = time.perf_counter_ns

        @functools.wraps(inner)   # keeps inner's signature: generate() inspects it (logits_to_keep, kwargs)
        def forward(*a, **kw):
            x = kw.get("input_ids")
            if x is None:
                x = kw.get("inputs_embeds")
            if x is None and a:
                x = a[0]
            t0 = pc()
            out = inner(*a, **kw)
            steps.append((t0, pc(), _shape(x, 1), _shape(x, 0)))
            return out
        self._tls.active = True
        try:
            model.forward = forward
        except Exception:
            had_fwd = None
        t0 = pc()
        err = None
        try:
            out = orig(model, *args, **kwargs)
        except Exception as e:      # the call failed: its range is still recorded, with the class name (never the message)
            err = error_name(type(e))
            raise
        finally:
            t1 = pc()
            self._tls.active = False
            if had_fwd is False:
                try:
                    del model.forward
                except Exception:
                    pass
            elif had_fwd:
                model.forward = inner
            if err is not None:
                self._emit(buf, tid, t0, t1, steps, batch, prompt, None, key, parent, err)
        if key not in self.models:   # after the call: walking the parameters is not part of the user's request
            try:
                self.models[key] = model_info(model)
            except Exception as e:  # never break the program
                self.models[key] = {"error": f"{type(e).__name__}: {e}"[:200]}
        seq = getattr(out, "sequences", out)
        total = _shape(seq, 1)
        gen = (total - prompt) if (total is not None and prompt is not None and not getattr(model.config, "is_encoder_decoder", False)) \
            else (total if getattr(model.config, "is_encoder_decoder", False) else None)
        self._emit(buf, tid, t0, t1, steps, batch, prompt, gen, key, parent, None)
        return out

    @staticmethod
    def _emit(buf, tid, t0, t1, steps, batch, prompt, gen, key, parent, err) -> None:
        """The call's forwards (``hf.forward``) and the call itself (``hf.generate``; ``"error"``: the exception's
        class name when it raised)."""
        kv = 0
        for i, (a, b, n, bb) in enumerate(steps):
            buf.append((0, _ANN, tid, a, b, FWD,
                        f'{{"step":{i},"tokens":{n if n is not None else "null"},"batch":{bb if bb is not None else "null"},'
                        f'"kv_len":{kv}}}', CAT))
            kv += n or 0
        buf.append((0, _ANN, tid, t0, t1, GEN,
                    f'{{"batch":{batch if batch is not None else "null"},"prompt_tokens":{prompt if prompt is not None else "null"},'
                    f'"generated_tokens":{gen if gen is not None else "null"},"forwards":{len(steps)},"model":{key % 1000003},'
                    f'"parent":{parent if parent is not None else "null"}'
                    + ("" if err is None else f',"error":"{err}"') + '}', CAT))

    def meta(self) -> list[dict]:
        out = []
        for k, v in self.models.items():
            d = dict(v)
            d["model_key"] = k % 1000003
            out.append(d)
        return out
