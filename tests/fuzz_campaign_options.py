"""Campaign mutators (issue 44) for the option files of issue 46: ``--model-config`` (HF config.json or JSON/YAML)
and ``--cublas-log`` (a cuBLASLt trace log, with or without legacy cuBLAS API blocks).  Each mutant: a small Kineto
trace with prefill/decode ranges and the mutated file; the harness expects exit 0 with a full report set, or exit 2
with one line."""
from __future__ import annotations

import random

import fuzz_mutators as fm

_HF = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 172,
       "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
       "torch_dtype": "bfloat16", "tie_word_embeddings": False}
_SHORT = {"params": 1_000_000, "dtype": "fp16", "peak_tflops": 100.0, "stage_tokens": {"prefill": 128, "decode": 4}}
_LINE = ("[2024-06-01 10:00:00][cublasLt][42][Trace][cublasLtMatmul] A=0X1 Adesc=[type=R_16BF rows={ar} cols={ac} ld={ar}] "
         "B=0X2 Bdesc=[type=R_16BF rows={ar} cols={n} ld={ar}] C=0X3 Cdesc=[type=R_16BF rows={m} cols={n} ld={m}] D=0X3 "
         "Ddesc=[type=R_16BF rows={m} cols={n} ld={m}{extra}] computeDesc=[computeType=COMPUTE_32F scaleType=R_32F{t}] "
         "algo=[algoId={algo} tile=MATMUL_TILE_64x64 stages=MATMUL_STAGES_64x5] workSpace=0X0 workSpaceSizeInBytes=0")


def _trace() -> bytes:
    doc = fm.kineto_seed()
    ev = doc["traceEvents"]
    for name, ts in (("Prefill_Stage", 5), ("decode", 150), ("Decode_Stage", 150), ("decode", 260)):
        ev.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 90})
    return fm._dumps(doc)


def model_config(rng: random.Random, cut_json, mutant):
    cfg: object = dict(rng.choice([_HF, _SHORT]))
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(7)
        if op == 0:
            cfg = rng.choice(fm.VALUES)
        elif op == 1 and isinstance(cfg, dict):              # a wrong type / extreme value for a known key
            cfg[rng.choice(list(cfg) + ["head_dim", "params", "peak_tflops"])] = rng.choice(
                fm.VALUES + [[1, 2], {"a": 1}, "x", float("nan"), float("inf"), True, 10 ** 30])
        elif op == 2 and isinstance(cfg, dict):              # stage_tokens of the wrong shape
            cfg["stage_tokens"] = rng.choice([{"sampling": 3}, [1], {"prefill": -1}, {"decode": 2 ** 70}, "x", None])
        elif op == 3 and isinstance(cfg, dict):              # odd texts
            cfg[rng.choice(["name", "model_type", "dtype", "torch_dtype"])] = rng.choice(
                ["", "\ud800", "x" * 100_000, "\u202e", "torch.float13", "\x00"])
        elif op == 4:
            cfg = fm._deep(rng.choice([100, 5000]))
        elif op == 5 and isinstance(cfg, dict):              # dimensions that do not fit
            cfg.update(hidden_size=rng.choice([1, 3, 2 ** 40]), num_attention_heads=rng.choice([7, 2 ** 40]))
        elif op == 6 and isinstance(cfg, dict) and cfg:       # (an earlier op may have emptied it)
            cfg.pop(rng.choice(list(cfg)), None)
    raw = fm._dumps(cfg)
    r = rng.random()
    if r < 0.2:
        raw = cut_json(raw, rng)
    elif r < 0.3:
        raw = rng.choice([b"", b"\xff\xfe", b"params: [\n", b"a: b: c", b"- 1\n- 2\n", b" " * (2 << 20)])
    files = {"t.json": _trace(), "m.json": raw}
    return mutant(files, ["t.json", "--model-config", "m.json"], len(files["t.json"]))


_API = ("I! cuBLAS (v12.4.5) function cublasStatus_t {fn}(cublasHandle_t, ...) called:\n"
        "i!  transa: type=cublasOperation_t; val={ta}\ni!  transb: type=cublasOperation_t; val=CUBLAS_OP_N(0)\n"
        "i!  m: type=int; val={m}\ni!  n: type=int; val={n}\ni!  k: type=int; val={k}\n"
        "i!  Atype: type=cudaDataType_t; val={t}\ni!  batchCount: type=int; val={b}\n"
        "i!  computeType: type=cublasComputeType_t; val=CUBLAS_COMPUTE_32F(68)\ni! Time: 2026-01-01T00:00:00")


def _api_block(rng: random.Random) -> str:
    """A legacy cuBLAS API log block (CUBLAS_LOGINFO_DBG=1), the values sometimes hostile."""
    v = [1, 16, 141, 4096, 2 ** 62, 10 ** 30, -1, "POINTER", "", "9" * 40]
    blk = _API.format(fn=rng.choice(["cublasGemmEx", "cublasSgemm_v2", "cublasGemmStridedBatchedEx", "cublasSgemv_v2",
                                     "cublas\u202eGemmEx"]), ta=rng.choice(["CUBLAS_OP_T(1)", "CUBLAS_OP_N(0)", "",
                                                                              "CUBLAS_OP_"]),
                      m=rng.choice(v), n=rng.choice(v), k=rng.choice(v), b=rng.choice(v),
                      t=rng.choice(["CUDA_R_16F(2)", "<img src=x>", "=HYPERLINK(1)", "a|b", "\x1b[31m", "x" * 500]))
    if rng.random() < 0.3:
        blk = blk[:rng.randrange(len(blk))]                  # cut mid-block
    return blk


def cublas_log(rng: random.Random, mutant):
    lines = []
    for _ in range(rng.randint(0, 8) if rng.random() < 0.5 else 0):   # half the files carry cuBLAS API blocks too
        lines.append(_api_block(rng))
    for _ in range(rng.randint(0, 20)):
        m, n, k = (rng.choice([1, 16, 141, 4096, 2 ** 62, 10 ** 30]) for _ in range(3))
        line = _LINE.format(ar=k, ac=m, m=m, n=n, algo=rng.choice([0, 21, -1, "x"]),
                            t=rng.choice(["", " transa=OP_T", " transa="]), extra=rng.choice(["", " batchCount=8",
                                                                                              " batchCount=-1"]))
        op = rng.randrange(6)
        if op == 0:
            line = line[:rng.randrange(len(line))]           # cut mid-line
        elif op == 1:
            line = line.replace("]", "", 1)                  # an unclosed descriptor
        elif op == 2:
            line = line.replace("rows=", "rows=" + rng.choice(["", "-", "nan", "9" * 40]), 1)
        lines.append(line)
    raw = "\n".join(lines).encode()
    r = rng.random()
    if r < 0.1:
        raw = rng.choice([b"", b"\x00\x01\x02" * 100, b"\xff\xfe" + raw, raw.replace(b"\n", b"\r")])
    files = {"t.json": _trace(), "c.log": raw}
    return mutant(files, ["t.json", "--cublas-log", "c.log"], len(files["t.json"]))
