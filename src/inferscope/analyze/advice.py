"""Suggestion texts chosen by what the culprit is and by the program's language (issue 47).

A finding's advice must fit the program: Python advice (numpy, torch.compile, .item(), pin_memory()) only when the
program is Python (``source.language``, analyze/language.py) or, for a function culprit, when the culprit itself
is a Python function; a native culprit (a C/C++ symbol from nsys CPU samples) gets native advice (a CPU profiler
with call stacks, compiler flags, the algorithm); a CUDA C program gets CUDA runtime API advice.
"""
from __future__ import annotations

from .evidence import get_path


def language(res: dict) -> str:
    """python | native | unknown (a report without the field: unknown)."""
    return str((res.get("source") or {}).get("language") or "unknown")


def is_native(res: dict) -> bool:
    return language(res) == "native"


def culprit_kind(row: dict | None, res: dict) -> str:
    """'python' (a Python function: a .py file, a profiler Python frame, or the live sampler's frame of a Python
    program), 'native' (a sampled native symbol: nsys 'symbol (module)') or 'unknown' (no row)."""
    if not isinstance(row, dict) or not row.get("function"):
        return "unknown"
    f = str(row.get("file") or "")
    if ".py" in f or str(row.get("source") or "").startswith("profiler Python frames"):
        return "python"
    if (res.get("source") or {}).get("format") == "nsys":
        return "native"                        # nsys never sees Python frames: its symbols are native code
    return "python" if language(res) == "python" else "native" if is_native(res) else "unknown"


def user_code(res: dict, named: str) -> tuple[str, str]:
    """(title, suggestion) for the cpu_preprocessing finding when user code dominates, by its top function."""
    row = get_path(res, "culprits.functions[user_code]")
    if culprit_kind(row, res) == "native" or (row is None and is_native(res)):
        return ("User code dominates CPU time",
                "Your program's own native code holds the time" + named + ": profile it with a sampling CPU profiler and "
                "call stacks (perf record -g, nsys --sample=cpu --backtrace=dwarf) to find the hot loops, build with "
                "optimisation (-O2/-O3, -march=native, LTO; no debug build), improve the algorithm or data layout, or "
                "move the work to the GPU or off the request path.")
    return ("User code dominates CPU time",
            "Your own Python code holds the time" + named + ": profile and speed up the hot functions named here "
            "(vectorise loops with numpy/torch, cache repeated work, avoid per-item Python), or move them off the "
            "request path.")


# per-topic suggestions: (Python / unknown program, native program)
_TEXTS = {
    "gpu_idle.cpu_preprocessing": (
        "Overlap CPU preprocessing with GPU work: tokenize/prepare the next batch in a worker thread or process while "
        "the GPU runs the current one.",
        "Overlap the host work with GPU work: prepare the next batch on another thread while the GPU runs the current "
        "one (asynchronous launches and cudaMemcpyAsync on CUDA streams), and speed up the host code itself."),
    "gpu_idle.framework_overhead": (
        "Reduce per-op host overhead: capture the steady-state loop in CUDA graphs (torch.compile mode='reduce-overhead' "
        "or torch.cuda.graphs), fuse small ops, or raise the batch size.",
        "Reduce per-call host overhead: capture the steady-state loop in a CUDA graph (cudaStreamBeginCapture / "
        "cudaGraphLaunch), fuse small kernels, allocate once outside the loop, or give each call more work."),
    "sync_stall": (
        "Avoid per-step .item()/.cpu()/print of GPU tensors and explicit torch.cuda.synchronize() in the loop; "
        "keep results on the GPU and read them once per batch, or use non_blocking copies with CUDA events.",
        "Avoid cudaDeviceSynchronize and blocking cudaMemcpy in the loop: issue work and copies asynchronously on "
        "streams (cudaMemcpyAsync from pinned memory), wait on CUDA events only where the result is needed, and read "
        "results back once per batch."),
    "pageable_copy": (
        "Allocate host buffers pinned (tensor.pin_memory(), DataLoader(pin_memory=True)) and copy with "
        "non_blocking=True, so copies are true DMA and can overlap compute.",
        "Allocate host buffers pinned (cudaMallocHost / cudaHostAlloc, or cudaHostRegister an existing buffer) and copy "
        "with cudaMemcpyAsync on a stream, so copies are true DMA and can overlap compute."),
    "host_launch_bound": (
        "Cut per-kernel host cost: CUDA graphs (torch.compile mode='reduce-overhead'), fewer/fused ops, larger batches; "
        "check for Python overhead between ops.",
        "Cut per-kernel host cost: capture the launches in a CUDA graph (stream capture, cudaGraphLaunch), fuse small "
        "kernels, give each launch more work."),
    "framework_overhead": (
        "Reduce op count and Python between ops (torch.compile, fused modules, inference_mode), or batch more "
        "work per call.",
        "Reduce CUDA API calls on the host path: allocate and set up once outside the loop (no cudaMalloc/cudaFree per "
        "iteration), batch work into fewer, larger calls, and use CUDA graphs for repeated launch sequences."),
}


def text(topic: str, res: dict) -> str:
    """The suggestion for ``topic`` that fits the program's language."""
    py, native = _TEXTS[topic]
    return native if is_native(res) else py
