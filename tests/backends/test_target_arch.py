"""The emulator compiles for the course's GPU (config ``target_arch``, an H100 by default): the macros
nvcc's device pass predefines for it, so an ``#if __CUDA_ARCH__ >= 800`` takes the branch the GPU
takes, and the inline PTX of that branch (Part 5's bulk copy on sm_90) runs."""

from __future__ import annotations

import shlex
import shutil
import subprocess

import pytest

from grader.backends import Selection
from grader.assignment.config import DEFAULT_TARGET_ARCH, TARGET_ARCHS, load_config
from grader.core.errors import CompileError, ConfigError
from grader.grading.case.cases import case_list
from grader.grading.case.run import run_case
from grader.assignment.parts import PARTS
from grader.grading.compile import compile_part
from grader.grading.runner import grade
from tests.conftest import ATTACKS, SOLUTIONS, write_config

EMULATOR = Selection("emulator", "test")
NVCC = shutil.which("nvcc")
PART5 = PARTS["part5_single_pass"]


def _two_kernels() -> str:
    """Part 2 as two kernels chosen by the architecture: for sm_80 and later a Blelloch scan without
    barriers (it races), below it a serial scan (tests/attacks/emulator_macro_two_scans.cu, its
    choice made by ``__CUDA_ARCH__`` instead of a macro naming the emulator)."""
    text = (ATTACKS / "emulator_macro_two_scans.cu").read_text()
    assert text.count("#ifdef __SCANGRADE_EMULATOR__") == 1
    return text.replace("#ifdef __SCANGRADE_EMULATOR__", "#if __CUDA_ARCH__ < 800")


def test_a_kernel_that_branches_on_cuda_arch_is_checked_as_the_target_gpu_compiles_it(tmp_path):
    """Compiled with the H100's ``__CUDA_ARCH__`` 900 (the default), the emulator checks the racy
    kernel an H100 runs and fails it; with ``target_arch: 75`` the serial one, which passes."""
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "part2_blelloch.cu").write_text(_two_kernels())
    sizes = {"part2_blelloch": [5, 100, 256]}
    on_h100 = grade(folder, cfg=load_config(write_config(tmp_path, sizes=sizes)), selection=EMULATOR).parts[0]
    assert on_h100.status == "fail" and any(c.kind == "race" for c in on_h100.cases), \
        [(c.name, c.status, c.kind) for c in on_h100.cases]
    older = tmp_path / "older"
    older.mkdir()
    on_turing = grade(folder, cfg=load_config(write_config(older, sizes=sizes, extra="target_arch: 75\n")),
                      selection=EMULATOR).parts[0]
    assert on_turing.status == "pass", [(c.name, c.status, c.message[:200]) for c in on_turing.cases]


def _predefined(argv: list[str]) -> dict[str, str]:
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return {line.split()[1]: line.split(" ", 2)[2] if line.count(" ") >= 2 else ""
            for line in out.splitlines() if line.startswith("#define ")}


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("arch", [DEFAULT_TARGET_ARCH, 80])
def test_the_emulator_predefines_what_nvccs_device_pass_does(tmp_path, arch):
    """Every macro nvcc's device pass for ``sm_<arch>`` predefines (its command line, as its dry run
    shows it, with the host compiler's own), the emulator's module compile predefines with the same
    value, and no other; the CUDA headers nvcc includes are left out of both (the emulator's stubs
    differ: docs/security.md)."""
    from grader.backends.emulator.build import PRELUDE, EmulatorToolchain

    empty = tmp_path / "empty.cu"
    empty.write_text("")
    dry = subprocess.run([NVCC, f"-arch=sm_{arch}", "-E", "--dryrun", str(empty)], capture_output=True, text=True)
    line = next(li for li in (dry.stdout + dry.stderr).splitlines() if "-D__CUDA_ARCH__=" in li and " -E " in li)
    argv = shlex.split(line.removeprefix("#$ "))
    keep, skip = [], 0
    for a in argv:  # the device pass without its CUDA headers (-include cuda_runtime.h, -I, -isystem)
        if skip:
            skip -= 1
        elif a in ("-include", "-isystem", "-I"):
            skip = 1
        elif not a.startswith("-I"):
            keep.append(a)
    theirs = _predefined([*keep[:-1], "-dM", str(empty)])
    command = EmulatorToolchain(target_arch=arch).module_command(empty, tmp_path / "m.so")
    command = [a for a in command[:command.index("-include")] if a != str(PRELUDE)]
    ours = _predefined([*command, "-dM", "-E", "-x", "c++", str(empty)])
    assert theirs["__CUDA_ARCH__"] == str(arch * 10) and "__NVCC__" in theirs
    assert ours == theirs, {k: (ours.get(k), theirs.get(k)) for k in set(ours) | set(theirs)
                            if ours.get(k) != theirs.get(k)}


def test_without_nvcc_the_emulator_predefines_the_target_and_nvcc_13s_macros():
    from grader.backends.emulator.macros import NVCC_DEFINES, nvcc_defines

    defines = dict(nvcc_defines(80, None))
    assert defines["__CUDA_ARCH__"] == "800" and defines["__CUDA_ARCH_LIST__"] == "800"
    assert {k: defines[k] for k, _ in NVCC_DEFINES} == dict(NVCC_DEFINES) and defines["__NVCC__"] == "1"


def test_target_arch_must_be_a_gpu_the_emulator_can_stand_for(tmp_path):
    cfg = load_config(write_config(tmp_path))
    assert cfg.target_arch == DEFAULT_TARGET_ARCH == 90
    with pytest.raises(ConfigError) as info:
        load_config(write_config(tmp_path, extra="target_arch: 61\n"))
    assert info.value.key == "target_arch" and "unknown GPU architecture" in info.value.detail
    assert ", ".join(map(str, TARGET_ARCHS)) in info.value.detail


# -- inline PTX: Part 5's sm_90 bulk copy -------------------------------------------------------------

def _part5(cfg, source: str, tmp_path, *, arch: int = DEFAULT_TARGET_ARCH):
    from grader.backends.emulator import EmulatorBackend

    backend = EmulatorBackend(workers=1, checks=True, nvcc_check=False, target_arch=arch,
                              device_memory=64 * 2**20)
    module = compile_part(backend, PART5, source, pc=cfg.parts[PART5.key], dtype="int32", workdir=tmp_path)
    return backend, module


def test_part5s_reference_runs_its_bulk_copy_path_on_the_emulator(tmp_path):
    """Under ``__CUDA_ARCH__`` 900 the reference's ``cp.async.bulk`` tile load and its mbarrier run
    (rewritten from its inline PTX), and pass the checked cases; the same file with its bulk copy
    taken for the last, partial tile too reads past the input, which the checks name."""
    from grader.backends.emulator.rewrite import rewrite_source

    cfg = load_config(SOLUTIONS.parent.parent / "config.yaml")
    reference = (SOLUTIONS / PART5.filename).read_text()
    assert "__sg_ptx_mbarrier_wait_parity" in rewrite_source(reference, filename=PART5.filename).text
    cases = [c for c in case_list(cfg, PART5.key) if c.dtype == "int32" and c.n in (5633, 11264)]
    backend, module = _part5(cfg, reference, tmp_path / "ok")
    try:
        for case in cases:
            result = run_case(backend, module, cfg=cfg, part=PART5, case=case, schedules=("ascending", "descending"))
            assert result.status == "pass", (case.name, result.message)
    finally:
        backend.close()
    guard = "if (aligned && n - t * TILE_ITEMS >= TILE_ITEMS) {"
    assert reference.count(guard) == 1
    broken = reference.replace(guard, "if (aligned) {")
    line = broken[:broken.index("cp.async.bulk.shared::cluster")].count("\n") + 1
    backend, module = _part5(cfg, broken, tmp_path / "broken")
    try:
        result = run_case(backend, module, cfg=cfg, part=PART5, case=cases[0], schedules=("ascending",))
    finally:
        backend.close()
    assert result.status == "fail" and result.kind == "out-of-bounds", result.message
    assert "global memory read of in[" in result.message and f"part5_single_pass.cu:{line} " in result.message, \
        result.message  # the bulk copy's loads are checked as its thread's, on the asm's line


def test_inline_ptx_the_emulator_does_not_run_is_not_supported_naming_its_line(tmp_path):
    """Not the lockdown's refusal (a compile error of the student's): the emulator's gap, which a GPU
    grades (grader.core.errors.is_emulator_gap)."""
    cfg = load_config(SOLUTIONS.parent.parent / "config.yaml")
    source = ("__global__ void scan_single_pass(const scan_t* in, scan_t* out, int n,\n"
              "    unsigned long long* tile_status, unsigned int* tile_counter) {\n"
              "    unsigned int r;\n"
              "    asm volatile(\"prmt.b32 %0, %1, %1, 0x0123;\" : \"=r\"(r) : \"r\"(n));\n"
              "    if (threadIdx.x == 0) out[0] = r;\n}\n")
    with pytest.raises(CompileError) as info:
        _part5(cfg, source, tmp_path)
    message = str(info.value).splitlines()[0]
    assert message.startswith("not supported by the emulator: inline PTX `prmt.b32"), message
    assert "cannot be emulated" in message and "part5_single_pass.cu:4" in message, message


def test_only_an_asm_statement_in_a_function_body_is_read_as_ptx():
    """An asm label of a declaration, or a file-scope asm, spelling a supported instruction stays an
    ``asm`` (the lockdown refuses it): only statements become the prelude's calls."""
    from grader.backends.emulator.rewrite import rewrite_source

    fence = 'asm volatile("fence.proxy.async.shared::cta;" ::: "memory");'
    text = ('void f(void*) __asm__("fence.proxy.async");\n' + fence + "\n"
            "__device__ void g(int c) {\n    " + fence + "\n    if (c) " + fence + "\n}\n")
    out = rewrite_source(text, filename="x.cu").text.splitlines()
    assert out[0].startswith("void f(void*) __asm__(") and out[1] == fence
    assert out[3].strip() == "{ __sg_ptx_fence(); }" and out[4].strip() == "if (c) { __sg_ptx_fence(); }"
