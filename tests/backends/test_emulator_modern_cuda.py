"""Modern CUDA C++ on the emulator: libcu++'s atomics (``<cuda/atomic>``, ``<cuda/std/atomic>``: the
emulator's own headers, runtime/include/cuda/), the scoped atomic functions (``atomicAdd_block``,
``atomicAdd_system``...), and the inline PTX of the memory model (ld / st with semantics and scope,
atom, red, fence, membar) and of the special registers (``%laneid``...) (ptx.py). Inline PTX the
emulator does not run is "not supported by the emulator", naming its line: never a compile error of
the student's (docs/emulator.md, "Inline PTX")."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from grader.backends.emulator import EmulatorBackend
from grader.backends.emulator.ptx import ptx_statement
from grader.core.errors import CompileError, KernelError
from grader.core.kernels import KernelSpec, Param
from tests.backends.test_emulator_checks import line_of
from tests.backends.test_integrity_checks import cache_dir, checked, compile_part, plain  # noqa: F401  (fixtures)
from tests.conftest import EMULATOR_KERNELS

FILE = EMULATOR_KERNELS / "modern_cuda.cu"
NAMES = ("warp_scan_laneid", "atomic_ref_release_acquire", "atomic_ref_relaxed", "std_fences", "scoped_fences",
         "ptx_release_acquire", "ptx_fences", "ptx_relaxed", "scoped_counts", "ptx_atomics")
GRID = 4


def specs(*names: str) -> tuple[KernelSpec, ...]:
    return tuple(KernelSpec(k, (Param("out", "int*", "ptr"), Param("n", "int", "int"))) for k in names)


@pytest.fixture(scope="module")
def module(checked, tmp_path_factory):
    return compile_part(checked, tmp_path_factory.mktemp("modern"), FILE, specs(*NAMES), block_size=32)


@pytest.fixture(scope="module")
def plain_module(plain, tmp_path_factory):
    return compile_part(plain, tmp_path_factory.mktemp("modern-plain"), FILE, specs(*NAMES), block_size=32)


def run(be, module, kernel: str, init: np.ndarray, *, block: int = 32, n: int = 0) -> np.ndarray:
    out = be.alloc(init.size, np.int32)
    be.to_device(init.astype(np.int32), out)
    be.launch(module, kernel, grid=GRID, block=block, shared_bytes=0, args=[out, n])
    return be.to_host(out)


def test_a_warp_scan_reading_laneid_from_inline_ptx_scans(checked, module):
    n = GRID * 64
    values = np.arange(n) % 7 + 1
    got = run(checked, module, "warp_scan_laneid", np.concatenate([values, np.zeros(2 * n)]), block=64, n=n)
    assert got[:n].tolist() == np.cumsum(values.reshape(-1, 32), axis=1).ravel().tolist()
    assert got[n:2 * n].tolist() == (np.arange(n) % 64).tolist()  # %warpid * 32 + popc(%lanemask_lt)
    assert got[2 * n:].tolist() == [1] * n  # the lane masks agree


@pytest.mark.parametrize("kernel", ["atomic_ref_release_acquire", "std_fences", "scoped_fences",
                                    "ptx_release_acquire", "ptx_fences"])
def test_message_passing_between_blocks_with_release_and_acquire_is_clean(checked, module, kernel):
    got = run(checked, module, kernel, np.zeros(3 * GRID))
    assert got[2 * GRID + 1:].tolist() == list(range(1, GRID))


@pytest.mark.parametrize("kernel", ["atomic_ref_relaxed", "ptx_relaxed"])
def test_relaxed_flags_without_a_fence_are_a_memory_order_finding(checked, module, kernel):
    """The orders asked for reach the runtime's checks: relaxed ones order nothing."""
    with pytest.raises(KernelError) as info:
        run(checked, module, kernel, np.zeros(3 * GRID))
    assert any(f.line == line_of("modern_cuda.cu", "value_load") and "memory order" in f.message
               for f in info.value.findings), [f.message for f in info.value.findings]


def test_scoped_atomic_functions_and_cuda_atomic_ref_count_right(plain, plain_module):
    """What each operation computes (unchecked: the memory-order checks of atomics of several scopes
    on several counters are the runtime's, tested with it)."""
    got = run(plain, plain_module, "scoped_counts", np.zeros(20))
    threads = GRID * 32
    assert got[:4].tolist() == [threads] * 4
    assert got[4:13].tolist() == [31, -31, 0x7fffffff, 7, 8, -threads, 31, threads, -1]
    assert got[13:17].tolist() == [-4, 1, 1609, 3]
    assert got[17].view(np.float32) == np.float32(3.75) and got[18] == 15 and got[19] == -4


def test_inline_ptx_atom_red_ld_volatile_and_timers(plain, plain_module):
    init = np.zeros(16, np.int32)
    init[14] = 1234
    got = run(plain, plain_module, "ptx_atomics", init)
    threads = GRID * 32
    assert got[:5].tolist() == [threads, 2 * threads, 31, -31, threads % 10]
    assert got[5:9].tolist() == [42, 42, 0, 77]
    assert got[9].view(np.float32) == np.float32(1.75) and got[10] == 2
    assert got[11] == 1234 and got[12:14].view(np.int64)[0] == 1 << 40
    assert got[15] == 11  # %globaltimer and %clock64 count, %smid is 0


def test_inline_ptx_the_emulator_does_not_run_is_not_supported_naming_its_line(checked, tmp_path):
    path = EMULATOR_KERNELS / "modern_cuda_unsupported.cu"
    with pytest.raises(CompileError) as info:
        compile_part(checked, tmp_path, path, specs("permute"), block_size=32)
    message = str(info.value)
    assert message.startswith("not supported by the emulator"), message
    assert "cannot be emulated" in message and "prmt.b32" in message
    assert f"{path.name}:{line_of(path.name, 'prmt')}" in message


def test_a_student_naming_the_scope_entry_is_refused(checked, tmp_path):
    """The headers reach __sg_scope through the prelude's alias; the name itself stays the runtime's."""
    path = tmp_path / "named.cu"
    path.write_text('extern "C" __global__ void k(int* out, int n) { __sg_scope(2); out[0] = 1; }\n')
    with pytest.raises(CompileError, match=r"not allowed.*__sg_scope"):
        compile_part(checked, tmp_path, path, specs("k"), block_size=32)


@pytest.mark.parametrize("template, outputs, inputs, expect", [
    ("ld.acquire.gpu.global.u32 %0, [%1];", [("=r", "v")], [("l", "p")],
     "__sg_ptx_ld<unsigned int, __ATOMIC_ACQUIRE, __SG_SCOPE_DEVICE>(__sg_o1)"),
    ("ld.volatile.shared.f32 %0, [%1+8];", [("=f", "v")], [("r", "a")],
     "__sg_ptx_ld<float, __SG_PTX_VOLATILE, __SG_SCOPE_DEVICE>(__sg_ptx_shared((__sg_o1 + (unsigned long long)(8ll))))"),
    ("st.release.sys.s64 [%0], %1;", [], [("l", "p"), ("l", "v")],
     "__sg_ptx_st<long long, __ATOMIC_RELEASE, __SG_SCOPE_SYSTEM>(__sg_o0, __sg_o1)"),
    ("ld.global.b64 %0, [%1];", [("=l", "v")], [("l", "p")], "__sg_ptx_ld<unsigned long long, __SG_PTX_WEAK,"),
    ("atom.release.cta.shared.exch.b32 %0, [%1], %2;", [("=r", "v")], [("r", "a"), ("r", "x")],
     "__sg_ptx_atom<unsigned int, __SG_A_EXCH, __ATOMIC_RELEASE, __SG_SCOPE_BLOCK>"),
    ("fence.acq_rel.cta;", [], [], "__sg_ptx_fence_acq_rel<__SG_SCOPE_BLOCK>()"),
    ("fence.sc.sys;", [], [], "__sg_ptx_fence_sc(__SG_SCOPE_SYSTEM)"),
    ("membar.gl;", [], [], "__sg_ptx_fence_sc(__SG_SCOPE_DEVICE)"),
    ("mov.u32 %0, %%lanemask_ge;", [("=r", "m")], [], "__sg_ptx_lanemask_ge()"),
    ("mov.u32 %0, %%tid.y;", [("=r", "t")], [], "threadIdx.y"),
])
def test_the_memory_model_instructions_translate(template, outputs, inputs, expect):
    statement = ptx_statement(template, outputs, inputs)
    assert statement is not None and expect in statement, statement


@pytest.mark.parametrize("template, outputs, inputs", [
    ("ld.acquire.global.u32 %0, [%1];", [("=r", "v")], [("l", "p")]),  # .acquire needs a scope
    ("ld.global.gpu.u32 %0, [%1];", [("=r", "v")], [("l", "p")]),  # a scope needs semantics
    ("ld.release.gpu.u32 %0, [%1];", [("=r", "v")], [("l", "p")]),  # no release load
    ("st.acquire.gpu.u32 [%0], %1;", [], [("l", "p"), ("r", "v")]),  # no acquire store
    ("red.acquire.gpu.add.u32 [%0], %1;", [], [("l", "p"), ("r", "v")]),
    ("atom.global.inc.u64 %0, [%1], %2;", [("=l", "v")], [("l", "p"), ("l", "b")]),  # inc is .u32 only
    ("atom.global.cas.b32 %0, [%1], %2;", [("=r", "v")], [("l", "p"), ("r", "b")]),  # cas takes two
    ("mov.u32 %0, %%nsmid;", [("=r", "v")], []),
    ("add.u32 %0, %1, 1;", [("=r", "v")], [("r", "x")]),
])
def test_what_is_not_the_ptx_isas_is_not_translated(template, outputs, inputs):
    assert ptx_statement(template, outputs, inputs) is None


def test_a_percent_is_literal_in_asm_without_operands():
    assert ptx_statement("membar.sys;", [], [], extended=False) == "{ __sg_ptx_fence_sc(__SG_SCOPE_SYSTEM); }"
    assert re.search(r"laneid", ptx_statement("mov.u32 %0, %%laneid;", [("=r", "x")], []) or "")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvccs_cross_check_accepts_the_same_file_with_the_toolkits_headers(cache_dir, tmp_path):
    """The emulator's stub headers are on its own include path only: nvcc -ptx, run beside the
    emulator's compile, reads the CUDA toolkit's <cuda/atomic> and accepts the file."""
    be = EmulatorBackend(workers=1, cache_dir=cache_dir, nvcc_check=True)
    try:
        module = compile_part(be, tmp_path, FILE, specs(*NAMES), block_size=32)
        assert all(module.has_kernel(k) for k in NAMES)
    finally:
        be.close()


def test_a_part_with_inline_ptx_the_emulator_cannot_run_is_pending_not_a_compile_error(tmp_path):
    """Graded without a GPU: the part could not be graded (status ``error``), every case not run with
    a message naming the line and saying a GPU run grades it; never ``compile-error``."""
    from grader.assignment.config import load_config
    from grader.backends import Selection
    from grader.grading.runner import grade
    from tests.conftest import write_config

    cfg = load_config(write_config(tmp_path, sizes={"part1_naive": [33]}))
    source = tmp_path / "part1_naive.cu"
    source.write_text("__global__ void naive_scan(const scan_t* in, scan_t* out, int n)\n{\n"
                      "    unsigned r;\n    asm(\"prmt.b32 %0, %1, %1, 0x0123;\" : \"=r\"(r) : \"r\"(n));\n"
                      "    if (threadIdx.x < n) out[threadIdx.x] = in[threadIdx.x] + r;\n}\n")
    (part,) = grade(source, cfg=cfg, selection=Selection("emulator", "test"), parts=["part1_naive"]).parts
    assert part.status == "error", (part.status, part.message)
    assert part.message.startswith("pending: not supported by the emulator: inline PTX `prmt.b32"), part.message
    assert "a run on a GPU grades this part" in part.message and "part1_naive.cu:4" in part.message
    assert part.cases and all(c.status == "not-run" and "pending" in c.message for c in part.cases)


def test_inline_ptx_in_a_macro_is_rewritten_and_keeps_its_lines():
    """An ``asm`` in a ``#define`` body runs as it does in a function (issue 50: never a compile error
    charged to the student): one that leaves its ``;`` to the call becomes ``do { ... } while (0)``, so
    ``if (c) LANE(x); else ...`` is still one statement; a body over continued lines keeps its lines."""
    from grader.backends.emulator.rewrite import rewrite_source

    src = ('#define LANE(x) asm volatile("mov.u32 %0, %%laneid;" \\\n      : "=r"(x))\n'
           '#define LD(v, p) do { asm("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p)); } while (0)\n'
           "__global__ void k(unsigned* o) { unsigned l; if (o) LANE(l); else LD(l, o); o[0] = l; }\n")
    text = rewrite_source(src, filename="m.cu").text
    assert "asm" not in text and len(text.splitlines()) == len(src.splitlines())
    lane = text.splitlines()[0]
    assert lane.startswith("#define LANE(x) do { __sg_ptx_out((x),") and "__sg_ptx_laneid()" in lane
    assert lane.rstrip().endswith("while (0) \\")
    assert "__sg_ptx_ld<unsigned int, __ATOMIC_ACQUIRE, __SG_SCOPE_DEVICE>" in text.splitlines()[2]


def test_inline_ptx_it_cannot_run_in_a_macro_is_not_supported_naming_its_line():
    from grader.backends.emulator.rewrite import rewrite_source

    with pytest.raises(CompileError) as info:
        rewrite_source('#define SYNC() \\\n    asm("bar.sync 0;")\n__global__ void k() { SYNC(); }\n', filename="m.cu")
    message = str(info.value)
    assert message.startswith("not supported by the emulator: inline PTX `bar.sync 0;`") and "(m.cu:2)" in message
