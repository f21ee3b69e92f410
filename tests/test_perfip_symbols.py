"""IP samples in torch's libraries split by function (issue 45 item 6): the ELF symbol reader (collect/elfsyms.py) on
a library built here with known symbols, the symbol -> role rules (perfip.symbol_role) on real names of this
venv's libtorch, the batch resolver (collect/perfsyms.py) through PerfIP.read, and - live, in this process - the
FRAMEWORK share of a tiny-op loop against a large GEMM's."""
import collections
import ctypes
import mmap
import os
import shutil
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from inferscope.collect import elfsyms
from inferscope.collect import perfip as P
from inferscope.collect import perfsyms
from inferscope import vocab as V

FW, CP = P.FRAMEWORK, P.COMPUTE
# Real symbols of this venv's torch 2.x (nm -D --defined-only libtorch_cpu.so / libc10.so / libtorch_python.so; the
# anonymous-namespace kernels from .symtab, nm without -D), with the role the rules in vocab.py give by definition.
REAL = [
    ("libtorch_cpu", "_ZN2at18TensorIteratorBase5buildERNS_20TensorIteratorConfigE", FW),       # iterator set-up
    ("libc10", "_ZN3c109alloc_cpuEm", FW),                                                        # the allocator
    ("libtorch_cpu", "_ZN2at4_ops10mul_Tensor4callERKNS_6TensorES4_", FW),                      # op entry point
    ("libtorch_cpu", "_ZN2at6detail9empty_cpuEN3c108ArrayRefIlEERKNS1_13TensorOptionsE", FW),    # output alloc
    ("libtorch_cpu", "_ZN2at6native16DispatchStubImpl19try_choose_cpu_implEPvS2_S2_", FW),       # kernel dispatch
    ("libtorch_cpu", "_ZN2at14RecordFunction17runStartCallbacksEv", FW),                         # profiler hooks
    ("libc10", "_ZN3c1010TensorImplD2Ev", FW),                                                    # TensorImpl dtor
    ("libtorch_python", "_Z16THPVariable_WrapON2at10TensorBaseE", FW),                           # Python binding
    ("libtorch_cpu", "_ZN3c1013intrusive_ptrINS_10TensorImplENS_19UndefinedTensorImplEE7retain_Ev", FW),
    ("libtorch_cpu", "_ZNK3c104impl13OperatorEntry6lookupENS_14DispatchKeySetE", FW),           # the dispatcher
    ("libtorch_cpu", "_ZN2at12_GLOBAL__N_122wrapper_CPU_mul_TensorERKNS_6TensorES3_", FW),      # registration
    ("libtorch_cpu", "_ZN2at6native22structured_cat_out_cpu4implERKN3c108IListRefINS_6TensorEEEllbbbNS2_12Memory"
                     "FormatERKS4_", CP),                                    # an op that runs its own copy loops
    ("libtorch_cpu", "_ZN2at6nativeL26index_select_out_cpu_dim1_ERNS_6TensorERKS1_S4_", CP),
    ("libtorch_cpu", "_ZN2at16CPUGeneratorImpl6randomEv", CP),                                  # the RNG's math
    ("libtorch_cpu", "mkl_blas_def_sgemm_kernel_0_zen", CP),                                    # MKL, C symbol
    # a kernel's lambda: TensorIteratorBase is a parameter type of add_kernel, not the function
    ("libtorch_cpu", "_ZZN2at6native12_GLOBAL__N_110add_kernelERNS_18TensorIteratorBaseERKN3c106ScalarEENKUlvE_clEv"
                     ".isra.0", CP),
    ("libtorch_cpu", "_ZZZZN2at6native6AVX512L11tanh_kernelERNS_18TensorIteratorBaseEENKUlvE_clEvENKUlvE_clEvENKUl"
                     "PPcPKllE_clES7_S9_l.isra.0", CP),
    # the vectorised loop body TensorIterator calls: c10::function_ref<...>::callback_fn<VectorizedLoop2d<add_kernel>>
    ("libtorch_cpu", "_ZN3c1012function_refIFvPPcPKlllEE11callback_fnIN2at6native4AVX216VectorizedLoop2dIZZZNS9_12_"
                     "GLOBAL__N_110add_kernelERNS8_18TensorIteratorBaseERKNS_6ScalarEENKUlvE_clEvENKUlvE6_clEvEUlddE_"
                     "ZZZNSC_10add_kernelESE_SH_ENKSI_clEvENKSJ_clEvEUlNS8_3vec4AVX210VectorizedIdEESO_E_EEEEvlS2_"
                     "S4_ll",
     CP),
]


@pytest.mark.parametrize("lib,name,role", REAL, ids=[r[1][:60] for r in REAL])
def test_symbol_rules_on_real_libtorch_names(lib, name, role):
    assert P.symbol_role(name) == role, (P.qualified_name(name), P.ROLE_NAMES[P.symbol_role(name)])


def test_unknown_function_keeps_the_library_role():
    # an unknown or C function is not evidence of overhead: the library's role (whatever it is) stays
    assert P.symbol_role("cpuinfo_x86_decode_uarch", P.OTHER) == P.OTHER
    assert P.symbol_role("_ZN5boost4asio3runEv", P.TOKENIZER) == P.TOKENIZER
    assert P.symbol_role("_ZN3c109alloc_cpuEm", P.OTHER) == FW            # (a rule wins over the library)


def test_qualified_name_drops_parameters_templates_and_lambdas():
    q = P.qualified_name
    assert q("_ZN2at18TensorIteratorBase5buildERNS_20TensorIteratorConfigE") == ("at::TensorIteratorBase::build", "")
    assert q(REAL[15][1])[0] == "at::native::(anon)::add_kernel.isra.0"
    assert q(REAL[16][1])[0] == "at::native::AVX512::tanh_kernel.isra.0"
    n, targs = q(REAL[8][1])
    assert n == "c10::intrusive_ptr::retain_" and "10TensorImpl" in targs
    assert q("_ZN3c1010TensorImplD2Ev")[0] == "c10::TensorImpl::~TensorImpl"
    assert q("mkl_blas_def_sgemm_kernel_0_zen") == ("mkl_blas_def_sgemm_kernel_0_zen", "")
    assert q("_Zgarbage") == ("_Zgarbage", "")


def _torch_lib(stem):
    torch = pytest.importorskip("torch")
    p = Path(torch.__file__).parent / "lib" / f"{stem}.so"
    if not p.exists():
        pytest.skip(f"{p.name} not in this torch")
    return p


def test_real_names_are_in_this_venvs_libraries():
    """The rule test's names are this torch's: each is a function of the library named (elfsyms' own table)."""
    by_lib = collections.defaultdict(list)
    for lib, name, _r in REAL:
        by_lib[lib].append(name)
    for lib, names in by_lib.items():
        t = elfsyms.load(str(_torch_lib(lib)))
        assert t is not None
        have = {t.name(i) for i in range(len(t))}
        missing = [n for n in names if n not in have]
        assert not missing, (lib, missing)


C_SRC = r"""
int fw_dispatch(int x) { return x * 3 + 1; }
__attribute__((noinline)) static int helper_local(int x) { return x ^ 0x55; }
int math_kernel(int n) { int s = 0; for (int i = 0; i < n; i++) s += helper_local(i); return s; }
"""


@pytest.fixture(scope="module")
def built_lib(tmp_path_factory):
    """A shared library built here (gcc -shared) with three functions, and a stripped copy (.dynsym only)."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("elf")
    (d / "t.c").write_text(C_SRC)
    so = d / "libh13syms.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(so), str(d / "t.c")], check=True)
    stripped = d / "libh13strip.so"
    shutil.copy(so, stripped)
    if shutil.which("strip") is None:
        pytest.skip("no strip")
    subprocess.run(["strip", "--strip-all", str(stripped)], check=True)
    return so, stripped


def _nm(path):
    """Truth from binutils: {name: (link-time address, size)} of the defined functions (nm -S)."""
    if shutil.which("nm") is None:
        pytest.skip("no nm")
    out = subprocess.run(["nm", "-S", "--defined-only", str(path)], capture_output=True, text=True, check=True).stdout
    res = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "tTiW":
            res[f[3]] = (int(f[0], 16), int(f[1], 16))
        elif len(f) == 3 and f[1] in "tTiW":       # (no size column: size 0)
            res[f[2]] = (int(f[0], 16), 0)
    return res


def test_elf_reader_matches_nm_on_a_built_library(built_lib):
    so, stripped = built_lib
    truth = _nm(so)
    t = elfsyms.load(str(so))
    assert t is not None and t.section == ".symtab"
    for name in ("fw_dispatch", "math_kernel", "helper_local"):
        a, size = truth[name]
        idx = t.lookup([a, a + size - 1, a + size // 2])
        assert [t.name(i) for i in idx] == [name] * 3, name
    starts = {a: n for n, (a, _s) in truth.items()}
    for name, (a, size) in truth.items():        # one past a sized function's end: the next function, or none
        if size:
            i = int(t.lookup([a + size])[0])
            assert (i == -1 and a + size not in starts) or t.name(i) == starts.get(a + size), name
    assert (t.lookup([0]) == -1).all()
    ts = elfsyms.load(str(stripped))            # stripped: .dynsym only, the static function is gone
    assert ts is not None and ts.section == ".dynsym"
    have = {ts.name(i) for i in range(len(ts))}
    assert {"fw_dispatch", "math_kernel"} <= have and "helper_local" not in have


def test_elf_reader_refuses_what_is_not_elf64(tmp_path):
    bad = tmp_path / "x.so"
    bad.write_bytes(b"\x7fELF" + b"\x01\x01" + b"\0" * 100)          # ELF32
    assert elfsyms.load(str(bad)) is None
    bad.write_bytes(b"not an elf at all" * 10)
    assert elfsyms.load(str(bad)) is None
    assert elfsyms.load(str(tmp_path / "missing.so")) is None
    so = tmp_path / "trunc.so"
    so.write_bytes(b"\x7fELF\x02\x01" + b"\xff" * 58)               # headers point past the end
    assert elfsyms.load(str(so)) is None


def _record(ip, ts):
    body = struct.pack("<QQ", ip, ts)
    return struct.pack("<IHH", P.PERF_RECORD_SAMPLE, 0, 8 + len(body)) + body


class _Ring(P.PerfIP):
    def __init__(self, records):
        page = mmap.PAGESIZE
        buf = bytearray(page * 5)
        data = b"".join(records)
        buf[page:page + len(data)] = data
        struct.pack_into("<Q", buf, 1024, len(data))
        self.fd, self.buf, self.size, self.tail, self.period_ns, self.stack_bytes = -1, buf, 4 * page, 0, 0, 0


def test_read_splits_a_symbolised_library_by_function(built_lib, monkeypatch):
    """PerfIP.read on IPs in a loaded library: by the library rule all COMPUTE; with the library listed in
    SYMBOL_LIBS each sample takes its function's role (run-time addresses from the dynamic loader)."""
    so, stripped = built_lib
    monkeypatch.setattr(V, "COMPUTE_PREFIXES", V.COMPUTE_PREFIXES + ("libh13",))   # (the library table: vocab.py)
    monkeypatch.setattr(P, "SYMBOL_LIBS", P.SYMBOL_LIBS + ("libh13",))
    monkeypatch.setattr(P, "symbol_role", lambda name, lib_role: FW if name.startswith("fw_") else lib_role)
    monkeypatch.setattr(perfsyms, "IP_ROLES", {})
    lib, slib = ctypes.CDLL(str(so)), ctypes.CDLL(str(stripped))
    fw = ctypes.cast(lib.fw_dispatch, ctypes.c_void_p).value
    mk = ctypes.cast(lib.math_kernel, ctypes.c_void_p).value
    sfw = ctypes.cast(slib.fw_dispatch, ctypes.c_void_p).value
    truth = _nm(so)
    assert mk - fw == truth["math_kernel"][0] - truth["fw_dispatch"][0]     # the loader kept the layout
    maps = P.Maps()
    ips = [fw, mk + 4, fw + truth["fw_dispatch"][1] - 1, sfw, mk]
    got = _Ring([_record(ip, 1000 + i) for i, ip in enumerate(ips)]).read(maps)
    assert [k for _t, k in got] == [FW, CP, FW, FW, CP]          # the stripped copy still has .dynsym names
    assert [t for t, _k in got] == [1000 + i for i in range(len(ips))]
    assert perfsyms.IP_ROLES[fw] == FW and perfsyms.IP_ROLES[mk] == CP    # remembered by exact IP
    assert [k for _t, k in _Ring([_record(ip, 1) for ip in ips]).read(maps)] == [FW, CP, FW, FW, CP]
    perfsyms.IP_ROLES.clear()
    perfsyms.TABLES[str(stripped)] = None                         # as if it had no symbols at all
    got = _Ring([_record(sfw, 5)]).read(maps)
    assert got == [(5, CP)]                                       # the library rule stays
    perfsyms.TABLES.pop(str(stripped))
    monkeypatch.setattr(P, "SYMBOL_LIBS", ("libnothing",))
    assert [k for _t, k in _Ring([_record(fw, 1)]).read(P.Maps())] == [CP]   # not listed: the library rule


def _perf_self(period_ns):
    p = P.PerfIP.open(threading.get_native_id(), period_ns)
    if p is None:
        pytest.skip("perf_event_open unavailable here (perf_event_paranoid > 2 or seccomp)")
    return p


def test_live_tiny_ops_read_framework_and_gemm_compute():
    """In this process, one thread, perf every 0.25 ms of its CPU: of the samples in torch's libraries, a loop of
    tiny 8x8 ops is mostly FRAMEWORK (measured 70-75 %: 51 % of all samples, 18 % COMPUTE, the rest the
    interpreter); a 512x512 GEMM is COMPUTE (99.8 %).  Task-clock samples count only this thread's CPU time, so
    a CPU hog beside it changes the number of samples, not their split: bands 50 % / 5 %."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    p = _perf_self(250_000)
    try:
        maps = P.Maps()
        a, b = torch.randn(8, 8), torch.randn(8, 8)
        A = torch.randn(512, 512)

        def count(fn, cpu_s=0.4):
            p.read(maps)
            t0 = time.thread_time()
            while time.thread_time() - t0 < cpu_s:
                fn()
            c = collections.Counter(k for _t, k in p.read(maps))
            return c[FW], c[CP]

        def tiny():
            for _ in range(200):
                c = a + b
                c = c * b
                c.relu()
        fw, cp = count(tiny)
        assert fw + cp >= 100 and fw >= 0.5 * (fw + cp), (fw, cp)
        fw, cp = count(lambda: A @ A)
        assert fw + cp >= 100 and fw <= 0.05 * (fw + cp), (fw, cp)
    finally:
        p.close()
        torch.set_num_threads(threads)
