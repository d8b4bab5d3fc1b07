"""A file the emulator's source rewrite refuses is compiled as written first: a plain syntax error
reads as the compiler's own first error (nvcc's where it is on the PATH, else the host compiler's),
and "not supported by the emulator" is kept for constructs that do compile."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from grader.backends.emulator import EmulatorBackend
from grader.core.errors import CompileError
from grader.assignment.parts import PARTS, part_header
from tests.conftest import emulator_cache

PART = PARTS["part1_naive"]
FILENAME = "part1_naive.cu"

#: A `;` missing after a __shared__ declaration (line 3): the rewrite alone would call it "an
#: initializer on a __shared__ variable".
MISSING_SEMICOLON = """\
__global__ void naive_scan(const scan_t* in, scan_t* out, int n) {
    int tid = threadIdx.x;
    __shared__ scan_t temp[BLOCK_SIZE]
    temp[tid] = tid < n ? in[tid] : 0;
    __syncthreads();
    if (tid < n) out[tid] = temp[tid];
}
"""

#: Valid CUDA (nvcc and the host compiler accept it) that the rewrite cannot express.
FUNCTION_POINTER = """\
__device__ int twice(int x) { return 2 * x; }
__global__ void naive_scan(const scan_t* in, scan_t* out, int n) {
    __shared__ int (*fp)(int);
    if (threadIdx.x == 0) fp = twice;
    __syncthreads();
    if ((int)threadIdx.x < n) out[threadIdx.x] = fp(in[threadIdx.x]);
}
"""

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return emulator_cache(tmp_path_factory.mktemp("emulator-cache"))


@pytest.fixture(scope="module", params=["host", pytest.param("nvcc", marks=needs_nvcc)])
def emu(request, cache_dir: Path) -> EmulatorBackend:
    """An emulator backend that checks refused files with the host compiler, or with nvcc."""
    be = EmulatorBackend(workers=1, cache_dir=cache_dir, nvcc_check=request.param == "nvcc")
    assert be.nvcc_check == (request.param == "nvcc")
    yield be
    be.close()


def compile_body(emu: EmulatorBackend, tmp_path: Path, body: str):
    source = part_header(PART, block_size=128, dtype=np.dtype(np.int32)) + body
    return emu.compile(source=source, filename=FILENAME, kernels=PART.kernels, workdir=tmp_path)


def test_a_missing_semicolon_reads_as_the_compilers_first_error(emu: EmulatorBackend, tmp_path: Path) -> None:
    with pytest.raises(CompileError) as info:
        compile_body(emu, tmp_path, MISSING_SEMICOLON)
    err = info.value
    first = str(err).splitlines()[0]
    assert "not supported by the emulator" not in str(err)
    if emu.nvcc_check:
        assert first.startswith(f"{FILENAME} does not compile (nvcc -ptx): "), first
        assert re.search(rf'{re.escape(FILENAME)}\(4\): error: expected a ";"', first), first
        assert f'compilation of "{FILENAME}"' in err.log, err.log
    else:
        assert first.startswith(f"{FILENAME} does not compile (host C++ compiler under the CPU emulator): "), first
        assert re.search(rf"{re.escape(FILENAME)}:4:\d+: error: expected initializer", first), first
    # The log names the student's file, never the scratch folder or the scratch copy.
    assert FILENAME in err.log and str(tmp_path) not in err.log and ".written-" not in err.log, err.log
    assert err.command
    assert not list(tmp_path.glob("*.written-*")), "the scratch copy is left behind"


def test_an_unsupported_construct_that_compiles_is_still_not_supported(emu: EmulatorBackend, tmp_path: Path) -> None:
    with pytest.raises(CompileError, match=rf"^not supported by the emulator: .*declarator.* \({FILENAME}:3\)$"):
        compile_body(emu, tmp_path, FUNCTION_POINTER)


def test_the_host_compiler_decides_when_nvcc_is_off(cache_dir: Path, tmp_path: Path, monkeypatch) -> None:
    """A machine without nvcc: the host compiler's check alone, with nvcc off the PATH."""
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "nvcc" else _which(name, *a, **k))
    be = EmulatorBackend(workers=1, cache_dir=cache_dir)
    try:
        assert be.nvcc is None and not be.nvcc_check
        with pytest.raises(CompileError, match=r"does not compile \(host C\+\+ compiler under the CPU emulator\): "
                                               r"part1_naive\.cu:4:\d+: error: "):
            compile_body(be, tmp_path, MISSING_SEMICOLON)
    finally:
        be.close()


_which = shutil.which


def test_a_compiler_output_past_the_cap_is_not_read_and_the_compiler_is_stopped(tmp_path: Path) -> None:
    # A stand-in compiler: its first error, then 4 MiB of notes, then a marker file and exit status 1.
    # Reading stops at OUTPUT_BYTES and the process is killed there, so it never gets to the marker.
    import sys

    from grader.toolchain.compiler_process import OUTPUT_BYTES, run_compile
    from grader.toolchain.sandbox import Command

    marker = tmp_path / "finished"
    script = ("import pathlib, sys\n"
              "sys.stderr.write('part1_naive.cu:1:1: error: the first error\\n'); sys.stderr.flush()\n"
              "for _ in range(4096): sys.stdout.write('note: ' + 'x' * 1017 + '\\n')\n"
              f"sys.stdout.flush(); pathlib.Path({str(marker)!r}).write_text('done'); sys.exit(1)\n")
    cmd = Command([sys.executable, "-c", script], {}, str(tmp_path), ["cc", "part1_naive.cu"])
    assert 4096 * 1024 > 4 * OUTPUT_BYTES
    with pytest.raises(CompileError) as info:
        run_compile(cmd, filename=FILENAME, workdir=tmp_path, timeout_s=600, tool="cc",
                    failed=f"{FILENAME} does not compile")
    first = str(info.value).split("\n", 1)[0]
    assert first.startswith(f"{FILENAME} does not compile; cc printed more than {OUTPUT_BYTES // 1024} KiB"), first
    assert info.value.log.startswith("part1_naive.cu:1:1: error: the first error")
    assert len(info.value.log) <= CompileError.LOG_LIMIT + 200
    assert not marker.exists(), "the compiler was not stopped at the cap"
