"""``--model-config FILE``: the model's description when no live hook saw it (seed 003 "per-stage MFU").

Accepted: a Hugging Face ``config.json`` (``num_hidden_layers``/``n_layer``, ``hidden_size``/``n_embd``/``d_model``,
``num_attention_heads``/``n_head``, ``num_key_value_heads``, ``intermediate_size``/``n_inner``, ``vocab_size``,
``torch_dtype``, ``tie_word_embeddings``), or a small JSON/YAML mapping with the short keys ``params``, ``layers``,
``hidden``, ``heads``, ``kv_heads``, ``intermediate``, ``vocab``, ``dtype``, plus ``peak_tflops`` (the device's dense
peak for that dtype, used when the trace's device is not in thresholds.DEVICE_PEAKS and --peak-tflops is not given) and
``stage_tokens`` ({"prefill": N, "decode": M}: tokens processed per ``<name>_Stage`` range, for traces whose ranges do
not name their tokens).

Parameters: ``params`` when given, else counted from the dimensions: embedding vocab x hidden, per layer the attention
projections hidden x (2 x hidden + 2 x kv_heads x head_dim) and the MLP (3 x hidden x intermediate for a gated MLP -
SiLU/GELU-gated families, ``hidden_act`` silu - else 2 x), plus the LM head unless the embeddings are tied (norms and
biases left out).  FLOPs of a stage: 2 x params x the stage's tokens (attention over the context not counted).

Step time (``step_times_ms``, the one both MFU and MBU divide by, cited as the stage's ``step_time_ms``: the mean
over its steps): per step the longer of its range (``wall_ms``) and the span of the GPU work launched inside it
(``gpu_span_ms``, first start to last end; both in report.json's steps table): a CUDA-graph replay runs after the
host has left the step (the shared vLLM decode capture's range is 2.41 ms, its GPU work spans 10.74 ms: over the
range MFU would read 4.5x too high, and MBU 192 % of the MI300X's peak).  Work queued behind earlier steps is not
counted as the step's.  Achieved TFLOP/s = FLOPs / (steps x step_time_ms).

MBU of a decode stage (``decode_mbu``; decode is memory-bound, so beside MFU this is the number to read): the bytes a
decode step must read over the mean step time over the device's peak memory bandwidth (analyze/device_peaks.py:
--peak-gbps, else the device's thresholds.DEVICE_PEAKS row; the live generate() path computes its MBU with the same
function):

    bytes per step = params x dtype bytes  -  input-embedding bytes not read  +  2 x layers x kv_heads x head_dim x
                     dtype bytes x KV tokens
    MBU % = 100 x bytes per step / (step_time_ms / 1e3) / (peak GB/s x 1e9)

Input embedding (``embedding_unread``): a decode step gathers only its batch's rows of the table, so with untied
embeddings (``tie_word_embeddings`` false, as the parameter count assumes when absent) the table's bytes (vocab x
hidden x dtype bytes) less the rows read (the step's tokens - the stage's tokens / steps, else its batch - x hidden x
dtype bytes) are subtracted; the LM head is read whole.  Tied embeddings are one table, read whole as the LM head:
nothing is subtracted.  Without vocab and hidden the table is counted in full (said in ``mbu_basis``); without the
step's tokens the whole table is left out and the MBU is a lower bound.  The live generate() path applies the same
rule to what the hook read from the model itself (``live_embedding``: the input embedding weight's shape and dtype
size, tied when the LM head's weight is that tensor); a model without those methods has its table counted in full.

KV tokens: the step's context length summed over its batch (context x batch), the mean over the stage's steps, as
the trace names it (vLLM/SGLang ``execute_..`` ranges: the ``sk`` counts).  Assumptions: every other weight is read
once per step whatever the batch (an MoE model reads only its active experts), the whole KV cache of the batch is
read once per step at the weights' dtype, activations and logits are left out.  Where the trace names no context
length (``<name>_Stage`` / ``step[DECODE bs=N]`` ranges), or the KV dimensions are unknown, the KV part is left out
and the number is labelled a lower bound (``mbu_lower_bound``, with the reason in ``mbu_basis`` and a warning); a
``<name>_Stage`` range is counted as one weight read though it may hold several forward passes, a lower bound too.
No dtype: bytes per parameter unknown, MBU null with a warning.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from ..errors import ConfigError
from .option_file import read_bounded

MAX_BYTES = 1 << 20
_ALIASES = {"layers": ("layers", "num_hidden_layers", "n_layer", "num_layers"),
            "hidden": ("hidden", "hidden_size", "n_embd", "d_model"),
            "heads": ("heads", "num_attention_heads", "n_head"),
            "kv_heads": ("kv_heads", "num_key_value_heads"),
            "intermediate": ("intermediate", "intermediate_size", "n_inner", "ffn_dim"),
            "vocab": ("vocab", "vocab_size")}
_DTYPES = {"bfloat16": ("bf16", 2), "bf16": ("bf16", 2), "float16": ("fp16", 2), "fp16": ("fp16", 2),
           "half": ("fp16", 2), "float32": ("fp32", 4), "fp32": ("fp32", 4), "float": ("fp32", 4),
           "float8": ("fp8", 1), "fp8": ("fp8", 1), "int8": ("int8", 1)}
_GATED = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "olmo", "deepseek", "yi", "internlm")


def _read(path: str):
    raw = read_bounded("--model-config", path, MAX_BYTES, "larger than 1 MB, not a model configuration")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"--model-config {path}: not UTF-8 text (bad byte at offset {e.start})") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise ConfigError(f"--model-config {path}: nested too deeply") from None
    except ValueError:
        pass
    try:
        import yaml
        return yaml.safe_load(text)
    except RecursionError:
        raise ConfigError(f"--model-config {path}: nested too deeply") from None
    except Exception:
        raise ConfigError(f"--model-config {path}: neither JSON nor YAML") from None


def _text(v) -> str | None:
    """A string the report can write: a lone surrogate (a JSON "\\ud800" escape) replaced by U+FFFD."""
    if not isinstance(v, str):
        return None
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in v[:200])


def _pos(path: str, key: str, v, integer: bool = True):
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 < v < 1e16
    if not ok or (integer and v != int(v)):
        raise ConfigError(f"--model-config {path}: {key} must be a positive {'integer' if integer else 'number'}, "
                          f"got {str(v)[:40]!r}")
    return int(v) if integer else float(v)


def load(path: str) -> dict:
    """The model dict llm.py reads (``source`` "config"), or ConfigError (exit 2) naming what is wrong."""
    d = _read(path)
    if not isinstance(d, dict):
        raise ConfigError(f"--model-config {path}: expected a mapping (a config.json object or YAML keys)")
    m: dict = {"source": "config", "file": _text(str(path))}
    for k, names in _ALIASES.items():
        v = next((d[n] for n in names if d.get(n) is not None), None)
        m[k] = None if v is None else _pos(path, k, v)
    if m["kv_heads"] is None:
        m["kv_heads"] = m["heads"]
    m["head_dim"] = (_pos(path, "head_dim", d["head_dim"]) if d.get("head_dim") is not None
                     else (m["hidden"] // m["heads"] if m["hidden"] and m["heads"] else None))
    dt = str(d.get("dtype") or d.get("torch_dtype") or "").lower().removeprefix("torch.")
    if dt and dt not in _DTYPES:
        raise ConfigError(f"--model-config {path}: unknown dtype {dt[:40]!r} (one of {', '.join(sorted(_DTYPES))})")
    m["dtype"], m["elem_bytes"] = _DTYPES.get(dt, (None, None))
    m["model_type"] = _text(d.get("model_type"))
    arch = d.get("architectures")
    m["name"] = (_text(d.get("name")) or (_text(arch[0]) if isinstance(arch, list) and arch else None)
                 or m["model_type"] or _text(Path(path).name))
    tied = m["tied_embeddings"] = bool(d.get("tie_word_embeddings", False))
    if d.get("params") is not None:
        m["params"] = _pos(path, "params", d["params"])
        m["params_basis"] = "params from the file"
    elif all(m[k] for k in ("layers", "hidden", "vocab")):
        h, L, V = m["hidden"], m["layers"], m["vocab"]
        kv = m["kv_heads"] * m["head_dim"] if m["head_dim"] else h
        inter = m["intermediate"] or 4 * h
        gated = (str(d.get("hidden_act", "")).lower() in ("silu", "swiglu")
                 or any((m["model_type"] or "").lower().startswith(g) for g in _GATED))
        per_layer = h * (2 * h + 2 * kv) + (3 if gated else 2) * h * inter
        m["params"] = V * h * (1 if tied else 2) + L * per_layer
        m["params_basis"] = (f"counted from the dimensions: embedding{'' if tied else ' + LM head'} + {L} layers x "
                             f"(attention + {'gated ' if gated else ''}MLP); norms and biases left out")
    else:
        raise ConfigError(f"--model-config {path}: give params, or layers, hidden and vocab "
                          "(num_hidden_layers, hidden_size, vocab_size)")
    m["peak_tflops"] = _pos(path, "peak_tflops", d["peak_tflops"], integer=False) if d.get("peak_tflops") is not None else None
    st = d.get("stage_tokens") or {}
    if not isinstance(st, dict) or not all(k in ("prefill", "decode") for k in st):
        raise ConfigError(f"--model-config {path}: stage_tokens must map prefill/decode to tokens per stage range")
    m["stage_tokens"] = {k: _pos(path, f"stage_tokens.{k}", v) for k, v in st.items()}
    if m["elem_bytes"]:
        m["param_bytes"] = m["params"] * m["elem_bytes"]
        m["kv_elem_bytes"] = m["elem_bytes"]
    return m


def model_section(m: dict) -> dict:
    """The report's ``model`` section from a --model-config model."""
    fpt = 2.0 * m["params"]
    return {"name": m["name"], "class": None, "model_type": m["model_type"], "params": m["params"],
            "param_bytes": m.get("param_bytes") or 0, "params_by_dtype": {m["dtype"]: m["params"]} if m["dtype"] else {},
            "bytes_by_dtype": {m["dtype"]: m["param_bytes"]} if m["dtype"] else {},
            **{k: m[k] for k in ("layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab")},
            "linear_weight_elems": None, "lm_head_elems": None,
            "flops_per_token": {"prefill": fpt, "decode": fpt, "prefill_context": None, "decode_context": None},
            "kv_bytes_per_token": (2 * m["layers"] * m["kv_heads"] * m["head_dim"] * m["elem_bytes"]
                                   if m["layers"] and m["kv_heads"] and m["head_dim"] and m["elem_bytes"] else None),
            "flops_basis": f"--model-config {m['file']}: 2 x params per token ({m['params_basis']}); attention over "
                           "the context not counted",
            "source": "config"}


def step_times_ms(steps: list[dict]) -> list[float]:
    """Each step's time, the one MFU and MBU both divide by: the longer of its range (``wall_ms``) and the span of the
    GPU work launched inside it (``gpu_span_ms``; null without GPU: the range)."""
    return [max(r["wall_ms"], r["gpu_span_ms"] or 0.0) for r in steps]


def embedding_unread(m: dict, rows_per_step: float | None) -> dict:
    """The input-embedding bytes a decode step does not read (the module docstring has the rule): ``bytes`` to
    subtract from the weights, ``note`` for the basis, ``gap`` (a lower-bound reason) when the rows read are unknown."""
    V, h, e = m.get("vocab"), m.get("hidden"), m.get("elem_bytes")
    if m.get("tied_embeddings"):
        return {"bytes": 0.0, "note": "input embedding tied to the LM head: read whole", "gap": None}
    if not (V and h and e) or V * h >= m["params"]:
        why = m.get("embedding_unknown") or "vocab or hidden unknown"
        return {"bytes": 0.0, "note": f"the input embedding table counted in full ({why})", "gap": None}
    table = V * h * e
    if rows_per_step is None:
        return {"bytes": float(table), "note": f"input embedding table {table:,} B left out",
                "gap": "the embedding rows a step reads are unknown (the whole table left out)"}
    rows = min(float(rows_per_step), float(V))
    unread = table - rows * h * e
    return {"bytes": unread, "note": f"input embedding rows not read {unread:,.0f} B ({V:,} - {rows:,.6g} rows x {h:,} x "
                                     f"{e} B; the untied LM head read whole)", "gap": None}


def live_embedding(m: dict) -> dict:
    """``embedding_unread``'s input for a model the live hook described (collect/llmhook.input_embedding: the input
    embedding weight's ``rows`` x ``dim``, ``elem_bytes``, ``tied``); without those facts the table is counted in full."""
    e = m.get("embedding")
    ok = (isinstance(e, dict) and all(type(e.get(k)) is int and 0 < e[k] < 1 << 53 for k in ("rows", "dim", "elem_bytes"))
          and type(e.get("tied")) is bool and type(m.get("params")) is int and m["params"] > 0)
    if not ok:
        return {"params": m.get("params"), "embedding_unknown": "the live hook recorded no input embedding weight"}
    return {"vocab": e["rows"], "hidden": e["dim"], "elem_bytes": e["elem_bytes"], "tied_embeddings": e["tied"],
            "params": m.get("params")}


def decode_mbu(weight_bytes: int | None, kv_bytes_per_token: int | None, kv_tokens_mean: float | None,
               step_ms_mean: float, peak_gbps: float | None, one_forward_per_step: bool = True,
               embedding: dict | None = None) -> tuple[dict, list[str]]:
    """A decode stage's MBU fields (``bytes_per_step``, ``mbu_pct``, ``mbu_lower_bound``, ``mbu_basis``; the module
    docstring has the formula) and the warnings to give: why it is null, or why it is a lower bound.  ``step_ms_mean``
    is the stage's ``step_time_ms`` (``step_times_ms``' mean); ``embedding`` is ``embedding_unread``'s answer (None:
    the table counted in full)."""
    out: dict = {"bytes_per_step": None, "mbu_pct": None, "mbu_lower_bound": None, "mbu_basis": None}
    if not weight_bytes:
        return out, ["decode MBU is null: bytes per parameter unknown (give dtype or torch_dtype in --model-config)"]
    kv = kv_bytes_per_token * kv_tokens_mean if (kv_bytes_per_token and kv_tokens_mean is not None) else None
    skip = embedding["bytes"] if embedding else 0.0
    need = weight_bytes - skip + (kv or 0.0)
    gaps = []
    if kv is None:
        gaps.append("the KV-cache read is left out: " + (
            "the steps do not name their context length" if kv_tokens_mean is None
            else "the KV dimensions are unknown (layers, kv_heads, head_dim)"))
    if embedding and embedding["gap"]:
        gaps.append(embedding["gap"])
    if not one_forward_per_step:
        gaps.append("each stage range counts one weight read, though it may hold several forward passes")
    emb = ""
    if embedding:
        emb = f" - {embedding['note']}" if skip else f" ({embedding['note']})"
    basis = (f"(weights {weight_bytes:,} B{emb}" + (f" + KV cache {kv_bytes_per_token:,} B/token x {kv_tokens_mean:,.1f} "
                                                   "tokens (context x batch)" if kv is not None else "")
             + f") per step / mean step {step_ms_mean:.6g} ms (the longer of its range and its GPU work's span)"
             + (f" / peak {peak_gbps:g} GB/s" if peak_gbps else ""))
    out.update(bytes_per_step=float(need), mbu_lower_bound=bool(gaps),
               mbu_basis=basis + ("; a lower bound: " + "; ".join(gaps) if gaps else ""))
    warnings = [f"decode MBU is a lower bound: {'; '.join(gaps)}"] if gaps else []
    if not peak_gbps or step_ms_mean <= 0:
        return out, ["decode MBU is null: no peak memory bandwidth for this device (pass --peak-gbps)"
                     if not peak_gbps else "decode MBU is null: no step time"]
    out["mbu_pct"] = 100.0 * need / (step_ms_mean / 1e3) / (peak_gbps * 1e9)
    return out, warnings
