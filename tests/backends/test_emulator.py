"""The CPU emulator backend on its own: real kernels compiled, launched and checked against numpy.

Only the emulator and the modules it builds on (base, errors, parts) are used. Kernels live in
tests/emulator_kernels/ (one-block scans, ids, atomics, failures, dialect features).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from grader.backends.emulator import EmulatorArray, EmulatorBackend, EmulatorModule
from grader.backends.emulator.rewrite import rewrite_source
from grader.core.errors import CompileError, KernelError, LaunchError
from grader.core.kernels import KernelSpec, Param
from grader.assignment.parts import PARTS, PartSpec, part_header
from tests.conftest import EMULATOR_KERNELS, emulator_cache

INT = np.dtype(np.int32)
SIZES = [1, 33, 512, 1000]


# ---- helpers ------------------------------------------------------------------------------------

def spec(name: str, *params: tuple[str, str, str]) -> KernelSpec:
    return KernelSpec(name, tuple(Param(*p) for p in params))


def out_n(name: str) -> KernelSpec:
    """A kernel ``name(int* out, int n)``."""
    return spec(name, ("out", "int*", "ptr"), ("n", "int", "int"))


def header_for(kernels: tuple[KernelSpec, ...], filename: str, block_size: int = 256) -> str:
    """The grader's part header for an ad-hoc part holding ``kernels``."""
    part = PartSpec("test_part", 0, "test", filename, kernels, False, None)
    return part_header(part, block_size=block_size, dtype=INT)


def marker_line(filename: str, marker: str) -> int:
    """1-based line of ``// LINE:<marker>`` in a kernel file."""
    for n, line in enumerate((EMULATOR_KERNELS / filename).read_text().splitlines(), start=1):
        if f"LINE:{marker}" in line:
            return n
    raise AssertionError(f"no LINE:{marker} in {filename}")


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return emulator_cache(tmp_path_factory.mktemp("emulator-cache"))


@pytest.fixture(scope="session")
def emu(cache_dir: Path) -> EmulatorBackend:
    be = EmulatorBackend(workers=2, cache_dir=cache_dir, nvcc_check=False)
    yield be
    be.close()


def compile_file(emu: EmulatorBackend, tmp_path: Path, filename: str, kernels: tuple[KernelSpec, ...],
                 *, block_size: int = 256, body: str | None = None) -> EmulatorModule:
    text = body if body is not None else (EMULATOR_KERNELS / filename).read_text()
    return emu.compile(source=header_for(kernels, filename, block_size) + text, filename=filename,
                           kernels=kernels, workdir=tmp_path)


def run(emu: EmulatorBackend, module: EmulatorModule, kernel: str, *, grid, block, count: int,
        n: int, shared_bytes: int = 0, fill: int = 0) -> np.ndarray:
    out = emu.alloc(count, INT)
    emu.to_device(np.full(count, fill, dtype=INT), out)
    emu.launch(module, kernel, grid=grid, block=block, shared_bytes=shared_bytes, args=[out, n])
    return emu.to_host(out)


# ---- one-block scans ------------------------------------------------------------------------------

SCANS = {
    # kernel file: (part key, BLOCK_SIZE)
    "hillis_steele_static.cu": ("part1_naive", 1024),
    "hillis_steele_extern.cu": ("part1_naive", 1024),
    "hillis_steele_file_scope.cu": ("part1_naive", 1024),
    "blelloch_static.cu": ("part2_blelloch", 512),
    "blelloch_extern.cu": ("part2_blelloch", 512),
    "blelloch_file_scope.cu": ("part2_blelloch", 512),
}


@pytest.fixture(scope="module", params=sorted(SCANS))
def scan_module(request, emu: EmulatorBackend, tmp_path_factory) -> tuple[str, EmulatorModule, PartSpec, int]:
    filename = request.param
    part = PARTS[SCANS[filename][0]]
    block_size = SCANS[filename][1]
    source = part_header(part, block_size=block_size, dtype=INT) + (EMULATOR_KERNELS / filename).read_text()
    module = emu.compile(source=source, filename=filename, kernels=part.kernels,
                             workdir=tmp_path_factory.mktemp("scan"))
    return filename, module, part, block_size


@pytest.mark.parametrize("n", SIZES)
def test_one_block_scan_matches_numpy(emu: EmulatorBackend, scan_module, n: int) -> None:
    filename, module, part, block_size = scan_module
    x = np.random.default_rng(n).integers(-1000, 1000, n, dtype=np.int32)
    src, out = emu.alloc(n, INT), emu.alloc(n, INT)
    emu.to_device(x, src)
    emu.launch(module, part.kernels[0].name, grid=1, block=block_size, shared_bytes=2 * block_size * 4,
                   args=[src, out, n])
    expected = np.cumsum(x, dtype=np.int32)
    if not part.inclusive:
        expected = np.concatenate([[0], expected[:-1]]).astype(np.int32)
    np.testing.assert_array_equal(emu.to_host(out), expected, err_msg=f"{filename}, n={n}")


# ---- ids in multi-dimensional grids and blocks ------------------------------------------------------

@pytest.fixture(scope="module")
def ids_module(emu: EmulatorBackend, tmp_path_factory) -> EmulatorModule:
    return compile_file(emu, tmp_path_factory.mktemp("ids"), "ids.cu", (out_n("record_ids"),))


@pytest.mark.parametrize("grid, block", [
    ((5, 1, 1), (7, 1, 1)),
    ((3, 2, 1), (4, 3, 1)),
    ((2, 2, 2), (2, 3, 4)),
    ((1, 3, 2), (8, 2, 2)),
])
def test_threads_see_their_ids_in_2d_and_3d_launches(emu, ids_module, grid, block) -> None:
    gx, gy, gz = grid
    bx, by, bz = block
    threads = gx * gy * gz * bx * by * bz
    got = run(emu, ids_module, "record_ids", grid=grid, block=block, count=8 * threads, n=8 * threads,
              fill=-1).reshape(threads, 8)
    # expected: global index g = block_linear * threads_per_block + thread_linear, x fastest
    bzz, byy, bxx, tz, ty, tx = np.meshgrid(range(gz), range(gy), range(gx), range(bz), range(by), range(bx),
                                            indexing="ij")
    expected = np.stack([tx, ty, tz, bxx, byy, bzz], axis=-1).reshape(threads, 6)
    np.testing.assert_array_equal(got[:, :6], expected)
    assert (got[:, 6] == bx * 10000 + by * 100 + bz).all()
    assert (got[:, 7] == gx * 10000 + gy * 100 + gz).all()


# ---- atomics across blocks and workers ---------------------------------------------------------------

@pytest.mark.parametrize("workers", [1, 2])
def test_multi_block_atomics_are_exact(cache_dir: Path, emu, tmp_path: Path, workers: int) -> None:
    be = EmulatorBackend(workers=workers, cache_dir=cache_dir, nvcc_check=False)
    module = compile_file(be, tmp_path, "atomics.cu", (spec("count_atomics", ("counters", "int*", "ptr"),
                                                            ("n", "int", "int")),))
    blocks, threads = 64, 256
    total = blocks * threads
    counters = be.alloc(8, INT)
    be.to_device(np.array([0, 0, 0, -1, 1 << 30, 0, 0, 0], dtype=INT), counters)
    be.launch(module, "count_atomics", grid=blocks, block=threads, shared_bytes=0, args=[counters, 0])
    got = be.to_host(counters)
    assert got.tolist()[:7] == [total, blocks * threads * (threads - 1) // 2, total, total - 1, 0, total,
                                -2 * total]


# ---- compile-time diagnostics ------------------------------------------------------------------------

def test_compile_error_reports_the_students_file_and_line(emu, tmp_path: Path) -> None:
    body = "// line 1\n__global__ void naive_scan(const scan_t* in, scan_t* out, int n) {\n" \
           "    int ok = 1;\n    out[0] = in[0] + undefined_name;\n}\n"
    with pytest.raises(CompileError) as info:
        compile_file(emu, tmp_path, "part1_naive.cu", PARTS["part1_naive"].kernels, body=body)
    err = info.value
    assert "part1_naive.cu does not compile" in str(err)
    assert re.search(r"part1_naive\.cu:4:\d+: error: .*undefined_name", err.log), err.log
    assert str(tmp_path) not in err.log
    assert err.command.split()[0]  # the compiler command line is kept


def test_compile_error_points_inside_a_rewritten_declaration(emu, tmp_path: Path) -> None:
    body = ("__global__ void naive_scan(const scan_t* in, scan_t* out, int n) {\n"
            "    __shared__ scan_t temp[BLOCK_SIZE];\n"
            "    temp[threadIdx.x] = in[threadIdx.x];\n"
            "    __syncthreads();\n"
            "    out[0] = temp[0] +* 1;\n"  # line 5
            "}\n")
    with pytest.raises(CompileError) as info:
        compile_file(emu, tmp_path, "part1_naive.cu", PARTS["part1_naive"].kernels, body=body)
    assert re.search(r"part1_naive\.cu:5:\d+: error", info.value.log), info.value.log


@pytest.mark.parametrize("body, hint", [
    ("__global__ void something_else(const scan_t* in, scan_t* out, int n) { }\n", "define it"),
    ("// wrong parameter types\n__global__ void naive_scan(int* in, int* out, int n) { out[0] = in[0] + n; }\n",
     "part1_naive.cu:2 defines `naive_scan(int* in, int* out, int n)`"),
], ids=["missing", "wrong-signature"])
def test_a_kernel_without_the_contract_signature_is_reported(emu, tmp_path: Path, body: str, hint: str) -> None:
    with pytest.raises(CompileError) as info:
        compile_file(emu, tmp_path, "part1_naive.cu", PARTS["part1_naive"].kernels, body=body)
    message = str(info.value)
    assert ("the kernel `naive_scan` is not defined with the contract's signature "
            "`__global__ void naive_scan(const scan_t* in, scan_t* out, int n)`") in message
    assert hint in message


@pytest.mark.parametrize("body, what, line", [
    ("__global__ void k(int* out, int n) {\n    __shared__ int x = 0;\n}\n", "an initializer", 2),
    ("struct S {\n  int a;\n  __shared__ int x[4];\n};\n", "inside a class", 3),
    ("__global__ void k(int* out, int n) {\n\n\n    __shared__ int (*fp)(int);\n}\n", "declarator", 4),
], ids=["initializer", "class-member", "function-pointer"])
def test_unsupported_shared_forms_give_a_clear_compile_error(body: str, what: str, line: int) -> None:
    with pytest.raises(CompileError, match=rf"not supported by the emulator: .*{what}.* \(student\.cu:{line}\)"):
        rewrite_source(header_for((out_n("k"),), "student.cu") + body)


def test_a_shared_declaration_hidden_in_a_macro_is_a_compile_error(emu, tmp_path: Path) -> None:
    body = "#define SMEM __shared__\n__global__ void k(int* out, int n) {\n    SMEM int x[4];\n    out[0] = x[0];\n}\n"
    with pytest.raises(CompileError, match=r"macro\.cu:3:\d+: error: not supported by the emulator: __shared__"):
        compile_file(emu, tmp_path, "macro.cu", (out_n("k"),), body=body)


def test_rewrite_keeps_every_line_and_skips_comments_and_literals() -> None:
    source = header_for((out_n("k"),), "student.cu") + (
        '// __shared__ int in_comment[4];\n'
        'const char* s = "__shared__ int in_string;"; char c = \'"\';\n'
        '__global__ void k(int* out, int n) {\n'
        '    __shared__ int a[4],\n'
        '        b;  /* two lines */\n'
        '    out[0] = a[0] + b;\n'
        '}\n')
    text = rewrite_source(source).text
    assert text.count("\n") == source.count("\n")
    assert "// __shared__ int in_comment[4];" in text
    assert '"__shared__ int in_string;"' in text
    assert "__shared__" not in text.split("in_string")[1]
    rewritten_line = text.splitlines()[source.splitlines().index("    __shared__ int a[4],")]
    assert "__sg_shared" in rewritten_line and "&a =" in rewritten_line and "&b =" in rewritten_line


# ---- run-time failures ------------------------------------------------------------------------------

FAILURES = tuple(out_n(k) for k in ("assert_kernel", "trap_kernel", "too_much_static_shared",
                                    "static_plus_dynamic", "warp_shuffle", "fail_late_block", "fault"))


@pytest.fixture(scope="module")
def failures(emu: EmulatorBackend, tmp_path_factory) -> EmulatorModule:
    return compile_file(emu, tmp_path_factory.mktemp("failures"), "failures.cu", FAILURES)


def test_device_assert_fails_the_launch_with_file_line_and_ids(emu, failures) -> None:
    with pytest.raises(KernelError) as info:
        run(emu, failures, "assert_kernel", grid=4, block=32, count=32, n=0)
    err = info.value
    assert err.kind == "assert"
    assert f"failures.cu:{marker_line('failures.cu', 'assert')}" in str(err)
    assert "block (0, 0, 0), thread (5, 0, 0)" in str(err)


def test_the_lowest_failing_block_is_reported(emu, failures) -> None:
    with pytest.raises(KernelError, match=r"block \(9, 0, 0\), thread \(7, 0, 0\)") as info:
        run(emu, failures, "fail_late_block", grid=40, block=16, count=40 * 16, n=9)
    assert info.value.kind == "assert"


def test_trap_fails_the_launch(emu, failures) -> None:
    with pytest.raises(KernelError, match=rf"failures\.cu:{marker_line('failures.cu', 'trap')}.*"
                                          r"block \(2, 0, 0\), thread \(3, 0, 0\)") as info:
        run(emu, failures, "trap_kernel", grid=4, block=8, count=1, n=0)
    assert info.value.kind == "trap"


def test_static_shared_memory_over_48_kib_fails_the_launch(emu, failures) -> None:
    with pytest.raises(KernelError, match=r"__shared__ big .*needs 53248 bytes") as info:
        run(emu, failures, "too_much_static_shared", grid=1, block=32, count=32, n=1)
    assert info.value.kind == "shared-memory-limit"


def test_static_plus_dynamic_shared_memory_over_the_limit_fails(emu, failures) -> None:
    out = run(emu, failures, "static_plus_dynamic", grid=2, block=32, count=32, n=3, shared_bytes=4096)
    assert (out == 6).all()
    with pytest.raises(KernelError) as info:
        run(emu, failures, "static_plus_dynamic", grid=2, block=32, count=32, n=3, shared_bytes=16 * 1024)
    assert info.value.kind == "shared-memory-limit"


def test_pre_volta_warp_primitives_are_reported_as_unsupported(emu, failures) -> None:
    with pytest.raises(KernelError, match=rf"__shfl_up \(deprecated.*\) \(failures\.cu:{marker_line('failures.cu', 'shfl')}\)"
                       ) as info:
        run(emu, failures, "warp_shuffle", grid=1, block=32, count=32, n=1)
    assert info.value.kind == "unsupported"


@pytest.mark.parametrize("which, n, kind, pattern", [
    (0, 0, "illegal-address", r"invalid memory access at address 0x0 \(a null or small pointer\)"),
    (0, 0x1234567, "illegal-address", r"invalid memory access at address 0x1234567"),
    (1, 100, "stack-overflow", r"stack overflowed \(64 KiB per emulated thread\)"),
    (2, 5, "division-by-zero", r"integer division by zero"),
    (3, 12 * 1024 + 10, "out-of-bounds",
     r"out-of-bounds shared memory write of dyn\[12298\] \(12283 past the end of shared array dyn, 16 elements\)"),
], ids=["null-pointer", "wild-pointer", "stack-overflow", "division-by-zero", "shared-overrun"])
def test_faults_in_device_code_fail_the_launch_with_ids(emu, failures, which, n, kind, pattern) -> None:
    with pytest.raises(KernelError, match=pattern + r".*block \(1, 0, 0\), thread \(2, 0, 0\)") as info:
        run(emu, failures, "fault", grid=3, block=4, count=1, n=n, shared_bytes=64, fill=which)
    assert info.value.kind == kind


def test_a_failed_launch_leaves_the_module_usable(emu, failures) -> None:
    with pytest.raises(KernelError):
        run(emu, failures, "trap_kernel", grid=4, block=8, count=1, n=0)
    assert run(emu, failures, "trap_kernel", grid=2, block=8, count=1, n=11).tolist() == [11]


# ---- launch arguments ---------------------------------------------------------------------------------

@pytest.mark.parametrize("args, pattern", [
    (lambda a: [a], r"record_ids: the kernel takes 2 arguments \(out, n\), got 1"),
    (lambda a: [a, 1, 2], r"takes 2 arguments \(out, n\), got 3"),
    (lambda a: [3, 1], r"argument 1 `out` \(int\*\) must be a device array"),
    (lambda a: [a, a], r"argument 2 `n` \(int\) must be an int"),
    (lambda a: [a, True], r"argument 2 `n` \(int\) must be an int"),
    (lambda a: [a, 2**31], r"argument 2 `n` \(int\) = 2147483648 does not fit"),
], ids=["too-few", "too-many", "int-for-pointer", "array-for-int", "bool-for-int", "out-of-range"])
def test_wrong_launch_arguments_are_refused(emu, ids_module, args, pattern) -> None:
    out = emu.alloc(8, INT)
    with pytest.raises(LaunchError, match=pattern):
        emu.launch(ids_module, "record_ids", grid=1, block=1, shared_bytes=0, args=args(out))


def test_an_unknown_kernel_is_refused(emu, ids_module) -> None:
    with pytest.raises(LaunchError, match=r"no kernel `nope` \(its kernels: record_ids\)"):
        emu.launch(ids_module, "nope", grid=1, block=1, shared_bytes=0, args=[])


# ---- dialect features ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def features(emu: EmulatorBackend, tmp_path_factory) -> EmulatorModule:
    return compile_file(emu, tmp_path_factory.mktemp("features"), "features.cu",
                        (out_n("barrier_predicates"), out_n("shared_forms"), out_n("read_poison"),
                         out_n("scopes")))


def test_barrier_predicates_and_per_instantiation_shared_slots(emu, features) -> None:
    out = run(emu, features, "barrier_predicates", grid=3, block=100, count=8, n=0)
    assert out.tolist()[:6] == [34, 0, 1, 4 * 1, 64 * 2, 1]


def test_shared_declaration_forms(emu, features) -> None:
    out = run(emu, features, "shared_forms", grid=2, block=64, count=8, n=9)
    assert out.tolist() == [9, 42, 131, 64, 0, 0, 8, 5 + 3 + 4 + 4 + 31]


def test_unwritten_shared_memory_reads_the_poison_pattern(emu, features) -> None:
    out = run(emu, features, "read_poison", grid=1, block=4, count=2, n=1, shared_bytes=64)
    assert out.tolist() == [np.int32(np.uint32(0xA5A5A5A5).view(np.int32))] * 2


def test_shared_in_namespaces_methods_and_lambdas(emu, features) -> None:
    out = run(emu, features, "scopes", grid=2, block=64, count=64, n=0)
    mirrored = 63 - np.arange(64)
    np.testing.assert_array_equal(out, 2 * mirrored + 1000 * mirrored + 7)


def test_windows_line_endings_keep_line_numbers(emu, tmp_path: Path) -> None:
    body = ("// crlf\r\n__global__ void k(int* out, int n) {\r\n"
            "    __shared__ int s[4],\r\n        u;\r\n    out[0] = s[0] + u + ;\r\n}\r\n")
    with pytest.raises(CompileError) as info:
        compile_file(emu, tmp_path, "crlf.cu", (out_n("k"),), body=body)
    assert re.search(r"crlf\.cu:5:\d+: error", info.value.log), info.value.log


# ---- memory and build products --------------------------------------------------------------------------

def test_arrays_are_aligned_and_views_share_memory(emu) -> None:
    a = emu.alloc(100, INT)
    assert isinstance(a, EmulatorArray) and a.address % 256 == 0 and a.nbytes == 400
    emu.to_device(np.arange(100, dtype=INT), a)
    v = a.view(10, 5)
    assert v.address == a.address + 40 and emu.to_host(v).tolist() == [10, 11, 12, 13, 14]
    with pytest.raises(ValueError):
        a.view(98, 5)


@pytest.fixture(scope="module")
def plain_runtime(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runtime (``-O1``) built by one plain compile, once for the tests that compare a build with it."""
    from grader.backends.emulator.build import EmulatorToolchain

    plain = EmulatorToolchain(cache_dir=tmp_path_factory.mktemp("plain"), runtime_flags=("-O1",))
    plain._jobs = 1
    assert len(plain.runtime_steps(("-O1",), "x.o")) == 1
    return plain.runtime_object()


def _linked_names(obj: Path) -> tuple[set[str], set[str]]:
    """(names defined for other objects: global or weak, names referred to) of an object file."""
    from grader.backends.emulator.lockdown import elf_symbols

    symbols = elf_symbols(obj)
    return ({s.name for s in symbols if s.defined and s.binding in ("global", "weak")},
            {s.name for s in symbols if not s.defined})


@pytest.mark.parametrize("jobs", [2, "all"])
def test_a_runtime_built_in_pieces_names_what_a_plain_compile_does(tmp_path, jobs, plain_runtime) -> None:
    """The runtime's translation units are compiled at once and joined; the names they share are made
    local, so a module sees no name it does not see from one plain compile, C++ ones included
    (lockdown.runtime_names leaves those out; a library template the plain compile does not inline
    may be missing), and the same runtime; every unit is in exactly one compile."""
    from grader.backends.emulator.build import RUNTIME_UNITS, EmulatorToolchain
    from grader.backends.emulator.lockdown import runtime_names

    split = EmulatorToolchain(cache_dir=tmp_path / "split", runtime_flags=("-O1",))
    if not shutil.which("objcopy"):  # the units' names cannot be made local here: one plain compile
        assert split.runtime_jobs() == 1 and len(split.runtime_steps(("-O1",), "x.o")) == 1
        return
    split._jobs = len(RUNTIME_UNITS) if jobs == "all" else jobs
    compiles = split.runtime_steps(("-O1",), "x.o")[0]
    units = [[argv[argv.index("-c") + 1], *(argv[i + 1] for i, a in enumerate(argv) if a == "-include")]
             for argv in compiles]
    assert len(units) == split._jobs and all(units)
    assert sorted(u for share in units for u in share) == sorted(map(str, RUNTIME_UNITS))
    split_object, plain_object = split.runtime_object(), plain_runtime
    built, plain = _linked_names(split_object), _linked_names(plain_object)
    assert not [name for name in built[0] if "2sg2rt" in name]
    assert built[0] <= plain[0] and built[1] <= plain[0] | plain[1]
    assert runtime_names(split_object) == runtime_names(plain_object)  # the ABI, whole


def test_a_runtime_whose_build_in_pieces_fails_is_built_in_one_plain_compile(tmp_path, plain_runtime) -> None:
    """Where the pieces' objects cannot be joined (a linker without -r, say), one plain compile
    follows, and nothing is left beside the object."""
    from grader.backends.emulator.build import EmulatorToolchain
    from grader.backends.emulator.lockdown import runtime_names

    broken = EmulatorToolchain(cache_dir=tmp_path / "broken", runtime_flags=("-O1",))
    broken._jobs = 2  # as if the build in pieces were possible here
    steps = broken.runtime_steps

    def failing_link(flags, output):  # the relocatable link fails
        made = steps(flags, output)
        if len(made) > 1:
            failed.append(made[1])
            made[1] = [["sh", "-c", "echo 'ld: cannot do -r' >&2; exit 1"]]
        return made
    failed = []
    broken.runtime_steps = failing_link
    built = broken.runtime_object()
    assert len(failed) == 1, "the build in pieces was tried first, once"
    assert broken.runtime_jobs() == 1 and runtime_names(built) == runtime_names(plain_runtime)
    assert sorted(p.name for p in built.parent.iterdir() if not p.name.startswith(".runtime")) == [built.name]
    assert not [p for p in built.parent.iterdir() if p.name.endswith((".tmp", ".o.o"))]  # no leftovers
    assert not [p for p in built.parent.iterdir() if p.name.startswith(".runtime") and not p.name.endswith(".lock")]


def test_a_second_compile_of_the_same_file_reuses_the_cached_module_and_runtime(emu, tmp_path, cache_dir) -> None:
    kernels = (out_n("record_ids"),)
    first = compile_file(emu, tmp_path, "ids.cu", kernels)
    second = compile_file(emu, tmp_path, "ids.cu", kernels)
    assert first is not second and first.path == second.path  # the compile cache's shared object
    assert second.path.parent == cache_dir / "compiled"
    assert len(list((cache_dir / "emulator").glob("runtime-*.o"))) == 1, sorted(p.name for p in (cache_dir / "emulator").iterdir())
    assert run(emu, second, "record_ids", grid=1, block=1, count=8, n=8).tolist()[6] == 10101
    assert run(emu, first, "record_ids", grid=1, block=1, count=8, n=8).tolist()[6] == 10101
    changed = compile_file(emu, tmp_path / "changed", "ids.cu", kernels,
                           body=(EMULATOR_KERNELS / "ids.cu").read_text() + "\n// changed\n")
    assert changed.path != first.path and changed.path.parent == cache_dir / "compiled"  # compiled anew
