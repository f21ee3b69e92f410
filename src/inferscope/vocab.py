"""The one vocabulary every layer shares: the names of the host classes and breakdown categories, the native-library
role table, torch's symbol rule, and the kinds of the blocking calls.  Pure Python (``os``, ``re`` only, no numpy), so
the live collector imports it as well as the importers and the analyses; ``classes.py`` holds the *name rules* (which
Python package, function or API name is which class), this module the names and the native-code table.

Who reads what:
- sample classes: the live sampler (collect/thread_state.py, native_threads.py, pyspy.py) writes them as CPU_SAMPLE
  span names, the nsys importer (ingest/nsys_host.py) too; the breakdown (analyze/breakdown.py) and the host
  sections read them back;
- the library table (``library_role``): live perf IP samples (collect/perfip.role_of) and nsys host call chains
  (ingest/nsys_host.module_class), each folding the roles it does not use (below);
- ``symbol_role``: IP samples in torch's own libraries split by function (collect/perfip, collect/perfsyms);
- ``OFFCPU_CAT`` / ``RUNNING`` / ``kind_of``: the off-CPU probe's marks (collect/blocking.py) and their analysis
  (analyze/blocking.py).
"""
from __future__ import annotations

import os
import re

from .symname import qualified_name

# ---------------------------------------------------------------------------------------------
# Host classes: the names of CPU_SAMPLE spans (live sampler, nsys host samples, py-spy stacks)
# ---------------------------------------------------------------------------------------------
CLS_TOKENIZATION = "tokenization"
CLS_PREPROCESSING = "preprocessing"
CLS_USER_CODE = "user_code"
CLS_FRAMEWORK = "framework"
CLS_CPU_COMPUTE = "cpu_compute"
CLS_PAGE_FAULTS = "page_faults"   # page-fault kernel time of native code: the part of cpu_compute of that name
CLS_WAITING = "waiting"           # off-CPU (sleep, I/O, locks)
CLS_RUN_QUEUE = "run_queue"       # runnable but not running: waiting for a CPU (schedstat)
# the classes a Python frame gives (classes.DOMAIN_NAMES' values)
PYTHON_CLASSES = (CLS_TOKENIZATION, CLS_PREPROCESSING, CLS_USER_CODE, CLS_FRAMEWORK)
OFF_CPU_CLASSES = (CLS_WAITING, CLS_RUN_QUEUE)
# a thread Python never ran on (OpenMP / BLAS / Rayon pools: collect/native_threads.py) is named this, then its comm
NATIVE_THREAD_LABEL = "native thread"
# live runs: cumulative CPU seconds the sampler laid as a native tokenizer's code (perf IP samples in its library),
# written by collect/kernel_time.Totals, read by analyze/tokenizer_split.py
NATIVE_TOKENIZER_METRIC = "proc.native_tokenizer_cpu_s"
# the classes whose time is the breakdown's cpu_preprocessing, each counted as its part of the same name
PREPROCESSING_CLASSES = (CLS_TOKENIZATION, CLS_PREPROCESSING, CLS_USER_CODE)
SAMPLE_CLASSES = PYTHON_CLASSES + (CLS_CPU_COMPUTE, CLS_PAGE_FAULTS) + OFF_CPU_CLASSES
# (the breakdown's categories and their labels: result/base.py CATEGORIES, with the report types)

# ---------------------------------------------------------------------------------------------
# Native code: the role of the shared object a sample's instruction pointer (or call-chain frame) is in
# ---------------------------------------------------------------------------------------------
COMPUTE, PYTHON, OTHER, TOKENIZER, FRAMEWORK, RUNTIME, SYSTEM = 1, 2, 3, 4, 5, 6, 7
ROLE_NAMES = {COMPUTE: "compute", PYTHON: "python", OTHER: "other", TOKENIZER: "tokenizer", FRAMEWORK: "framework",
              RUNTIME: "runtime", SYSTEM: "system"}
# COMPUTE: numeric kernels on the CPU - torch and its runtimes, BLAS/LAPACK/FFT/OpenMP/TBB of any vendor (numpy's
#   and scipy's bundled OpenBLAS and Fortran runtime live in numpy.libs/ scipy.libs), oneDNN/MKL, XNNPACK/FBGEMM,
#   sleef, ONNX Runtime, and numpy's/scipy's own compiled loops: a large numpy elementwise op or matmul is compute
#   work.  In a run with GPU activity the breakdown counts a compute sample as framework overhead (the host side
#   of GPU work: analyze/breakdown.py), and nsys host samples say so at import (nsys_host.module_class).
# TOKENIZER: tokenizers implemented natively (HF tokenizers' Rust extension, sentencepiece, tiktoken).
# FRAMEWORK: the host side of the GPU math libraries - cuBLAS/cuBLASLt, cuDNN, NVRTC, cuFFT, cuRAND, cuSPARSE,
#   cuSOLVER, cuTENSOR, TensorRT.  None of them computes on the CPU: their host time is handle and workspace
#   set-up, algorithm heuristics, JIT compilation and the launch of their kernels, i.e. framework overhead in any
#   run (issue 41: the live table called it compute, which a run without recorded GPU activity reported as "model
#   compute runs on the CPU"; nsys called it framework).  Also what ``symbol_role`` gives torch's own plumbing.
# RUNTIME: the CUDA driver and runtime, CUPTI, NCCL, NVIDIA's other libraries, the profiler's injection libraries:
#   the launch path.  nsys call chains: framework (the first frame outside the system libraries decides); live perf
#   samples: the code that called it decides (perfip folds it into OTHER: a leaf IP in libcuda is its caller's
#   launch, and a driver's own threads must not explain the main thread's waiting: native_threads.py).
# PYTHON: the interpreter itself.  SYSTEM: libc, the dynamic loader, libstdc++/libgcc/libm, the kernel's pseudo
#   modules - helpers that never decide (nsys: transparent; perf: OTHER, which follows its caller).
# OTHER: anything else (the program's own executable, other extensions).
# Rules in order, on the file's basename (prefix) or full path (substring; directories only for shared objects):
TOKENIZER_PREFIXES = ("tokenizers.", "_sentencepiece", "_tiktoken", "libsentencepiece", "libtokenizers")
TOKENIZER_DIRS = ("/tokenizers/", "/sentencepiece/", "/tiktoken/", "/tokenmonster/")
SYSTEM_RE = re.compile(r"^(libc|libpthread|ld-linux[^/]*|ld|libdl|librt|libm|libstdc\+\+|libgcc_s|libresolv)[.-]")
GPU_LIBRARY_PREFIXES = ("libcublas", "libcudnn", "libnvrtc", "libcufft", "libcurand", "libcusparse", "libcusolver",
                        "libcutensor", "libnvinfer", "libnvonnxparser", "libtensorrt")
COMPUTE_PREFIXES = ("libtorch", "libc10", "libgomp", "libiomp", "libomp", "libtbb", "libmkl", "libdnnl", "libmkldnn",
                    "libopenblas", "libscipy_openblas", "libsleef", "libblas", "libcblas", "liblapack", "libflexiblas",
                    "libblis", "libshm", "libxnnpack", "libfbgemm", "libonnxruntime", "libgfortran", "libquadmath",
                    "libfftw", "_multiarray_umath", "_umath_linalg", "_pocketfft")
PY_PREFIXES = ("libpython", "python")
RUNTIME_RE = re.compile(r"libcuda|libcupti|libnccl|libnv|libToolsInjection|nsight-systems|/wsl/drivers/", re.I)
COMPUTE_DIRS = ("/numpy.libs/", "/scipy.libs/", "/numpy/", "/scipy/", "/torch/lib/", "/onnxruntime/capi/")


def library_role(path: str) -> int:
    """Role of a shared object or executable from its file path (a non-empty path; ``[name]`` is a kernel or
    profiler pseudo module: SYSTEM)."""
    if path.startswith("[") and path.endswith("]"):
        return SYSTEM
    base = os.path.basename(path)
    shared = base.endswith(".so") or ".so." in base
    if base.startswith(TOKENIZER_PREFIXES) or (shared and any(d in path for d in TOKENIZER_DIRS)):
        return TOKENIZER
    if SYSTEM_RE.match(base):
        return SYSTEM
    if base.startswith(GPU_LIBRARY_PREFIXES):
        return FRAMEWORK
    if base.startswith(COMPUTE_PREFIXES):
        return COMPUTE
    if base.startswith(PY_PREFIXES):
        return PYTHON
    if RUNTIME_RE.search(path):
        return RUNTIME
    if shared and any(d in path for d in COMPUTE_DIRS):
        return COMPUTE
    return OTHER


# torch's own plumbing around the math - the dispatcher, op wrappers, TensorIterator set-up, autograd, the allocator,
# refcounting, Python argument parsing - is FRAMEWORK.  Told by the function, not the library: samples in SYMBOL_LIBS
# are resolved to their symbol (collect/perfsyms.py, elfsyms.py) and ``symbol_role`` decides.  A loop of 80k tiny
# ops on 8x8 tensors read 74 % cpu_compute by library, ~all of it dispatch overhead.  A stripped library (no .symtab
# nor .dynsym function) keeps the library rule: all of it COMPUTE.
SYMBOL_LIBS = ("libtorch_cpu", "libtorch_python", "libtorch.", "libc10.", "libc10_")
# Rules on the function's qualified name without its template arguments and parameters (``symname.qualified_name``:
# read from the Itanium-mangled symbol, no demangler - a parameter of type TensorIteratorBase& must not make
# add_kernel plumbing; a lambda is named by the function it is in: add_kernel(...)::{lambda} ->
# at::native::(anon)::add_kernel).  In order, first match wins:
# 1. FRAMEWORK_PARTS - plumbing wherever it lives: the dispatcher and boxing (c10::impl::, KernelFunction,
#    OperatorEntry), DispatchStub, TensorIterator(Base/Config) set-up, structured kernels' set_output_*, the meta
#    functions (at::meta::), resize/empty helpers, autograd, RecordFunction;
# 2. COMPUTE_PARTS - the math: any name part with "kernel" (the per-CPU-capability kernels: add_kernel,
#    softmax_lastdim_kernel_impl, cpu_kernel_vec), the inner loops TensorIterator calls (vectorized_loop,
#    basic_loop, VectorizedLoop2d), at::vec:: and at::native::cpublas::, BLAS/GEMM, mkldnn/oneDNN, MKL, sleef,
#    FBGEMM, QNNPACK/XNNPACK, the parallel regions' outlined bodies (._omp_fn), im2col, the CPU RNG (normal_);
# 3. at::native:: otherwise COMPUTE: op implementations there run their own loops (index_select_out_cpu_dim1_,
#    structured_cat_out_cpu::impl: 85-98 % of a large op's samples), so an unlisted one is not overhead;
# 4. torch's other C++ namespaces -> FRAMEWORK (FRAMEWORK_NAMESPACES: c10:: - the allocator alloc_cpu, TensorImpl,
#    intrusive_ptr refcounting, DispatchKeySet, TLS -, the rest of at:: - at::_ops:: op entry points, the
#    at::(anon)::wrapper_CPU_* registrations, at::detail::empty_cpu, TensorBase -, torch:: - autograd, the Python
#    binding's PythonArgs / FunctionSignature::parse -, pybind11 (the GIL), caffe2::TypeMeta, THP* C functions);
# 5. anything else keeps the library's role (COMPUTE): C symbols (mkl_*, cblas_*, Sleef_*, xnn_*, dnnl_*), names
#    this reader cannot parse; an unknown function is not evidence of overhead.
# Measured (bench/README.md: perf at 0.25 ms on one thread): an 8x8 add/mul/relu loop 49 % FRAMEWORK (0 % by
# library); GEMM, conv, softmax, layer_norm, index_select, cat, sort, sum, large elementwise >= 95 % COMPUTE.
FRAMEWORK_PARTS = ("c10::impl::", "KernelFunction", "BoxedKernel", "OperatorEntry", "OperatorHandle", "Dispatcher",
                   "DispatchStub", "TensorIterator", "set_output", "at::meta::", "resize_", "empty_", "autograd",
                   "RecordFunction")
COMPUTE_PARTS = ("kernel", "vectorized_loop", "basic_loop", "VectorizedLoop", "loop2d", "at::vec::", "cpublas",
                 "gemm", "gemv", "blas", "mkldnn", "dnnl", "mkl_", "sleef", "Sleef", "fbgemm", "qnnp", "xnn",
                 "_omp_fn", "im2col", "col2im", "CPUGeneratorImpl::random", "mt19937", "philox")
# ... and a function templated on a kernel's loop (c10::function_ref::callback_fn<VectorizedLoop2d<add_kernel..>>,
# TensorIteratorBase::loop_2d_from_1d<sort_kernel..>: the loop body TensorIterator calls) by its template arguments:
LOOP_TARGS = ("kernel", "VectorizedLoop", "vectorized_loop", "basic_loop", "loop2d", "loop_2d")
FRAMEWORK_NAMESPACES = ("c10::", "at::", "torch::", "pybind11::", "caffe2::", "THP")


def symbol_role(name: str, lib_role: int = COMPUTE) -> int:
    """Role of a function of a SYMBOL_LIBS library from its (mangled) symbol name (the rules above)."""
    q, targs = qualified_name(name)
    if any(p in q for p in FRAMEWORK_PARTS):
        return FRAMEWORK
    if any(p in q for p in COMPUTE_PARTS) or q.startswith("at::native::") or any(p in targs for p in LOOP_TARGS):
        return COMPUTE
    if q.startswith(FRAMEWORK_NAMESPACES):
        return FRAMEWORK
    return lib_role


# ---------------------------------------------------------------------------------------------
# Off-CPU: the probe's marks (collect/blocking.py) and the kinds of the calls a thread blocks in
# ---------------------------------------------------------------------------------------------
OFFCPU_CAT = "inferscope.offcpu"  # MARK spans' cat; name = the syscall, or RUNNING when the thread runs again
RUNNING = "running"
# socket data calls: I/O too (issue 45: a loop of 4 KiB recv() from a slow peer, 59 % of the window, read as 'other'
# and blocking_io never fired); accept/connect (waiting for a peer, not for data) stay 'other'
NET_CALLS = frozenset(("recvfrom", "sendto", "recvmsg", "sendmsg", "recvmmsg", "sendmmsg"))
# what the analysis calls each: disk/file/socket I/O, a lock (futex), a sleep, a poll on fds, anything else
IO_CALLS = frozenset((
    "read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2", "fsync",
    "fdatasync", "sync_file_range", "syncfs", "sync", "ftruncate", "fallocate", "truncate", "open", "openat", "close",
    "stat", "lstat", "newfstatat", "statx", "fstat", "getdents", "getdents64", "unlink", "unlinkat", "rename", "mkdir",
    "access", "readahead", "fadvise64", "copy_file_range", "sendfile", "splice", "msync", "io_getevents", "io_submit",
    "io_uring_enter", "flock")) | NET_CALLS
LOCK_CALLS = frozenset(("futex", "futex_waitv", "semop", "semtimedop"))
SLEEP_CALLS = frozenset(("nanosleep", "clock_nanosleep", "pause", "sched_yield"))
POLL_CALLS = frozenset(("poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2"))


def kind_of(name: str) -> str:
    """io | lock | sleep | poll | other (syscall name)."""
    if name in IO_CALLS:
        return "io"
    if name in LOCK_CALLS:
        return "lock"
    if name in SLEEP_CALLS:
        return "sleep"
    if name in POLL_CALLS:
        return "poll"
    return "other"
