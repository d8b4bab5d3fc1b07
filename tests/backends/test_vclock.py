"""A kernel cannot tell the run whose output is graded from a checked run (docs/security.md, "The
checked run and the graded run"): the emulator's clocks are virtual (clock64(), clock(): the thread's
own count of accesses, not the host's time), and each run a case grades starts from the module's
``__device__`` variables as loaded.

The runtime's side runs kernels of tests/emulator_kernels/vclock.cu on an emulator backend; the
grader's side grades Part 4 kernels of tests/kernels/ that take a racy path only when they believe
they are not checked (a clock gate, a launch count), above the shipped checks_max_n."""

from __future__ import annotations


import numpy as np
import pytest

from grader.backends import Selection
from grader.backends.emulator import EmulatorBackend
from grader.backends.emulator.device_globals import module_globals
from grader.backends.pycuda.module import device_globals_bytes
from grader.assignment.parts import PARTS
from grader.grading.case.cases import SAMPLED_CHECKER
from grader.grading.runner import grade
from tests.conftest import BROKEN, FIXTURES, gpu_available
from tests.backends.test_emulator_checks import build, out_n
from tests.grading.test_sampled_checks import shipped

KERNELS = tuple(out_n(k) for k in ("time_loads", "count_launches"))


@pytest.fixture(scope="module")
def emulator() -> EmulatorBackend:
    be = EmulatorBackend(workers=2, nvcc_check=False)
    yield be
    be.close()


@pytest.fixture(scope="module")
def module(emulator, tmp_path_factory):
    return build(emulator, tmp_path_factory.mktemp("vclock"), "vclock.cu", KERNELS)


def times(be: EmulatorBackend, module, *, grid: int, block: int, loads: int) -> np.ndarray:
    """time_loads on ``grid`` blocks of ``block`` threads: each thread's (clock64, clock) differences."""
    out = be.alloc(2 * grid * block, np.int32)
    be.to_device(np.arange(2 * grid * block, dtype=np.int32), out)
    be.launch(module, "time_loads", grid=grid, block=block, shared_bytes=0, args=[out, loads])
    return be.to_host(out).reshape(-1, 2)


def test_the_clock_reads_the_same_values_checked_and_unchecked_in_every_order_and_sample(emulator, module):
    """clock64() and clock() count the thread's own accesses: the same numbers whether its block is
    checked, sampled or not, in any thread order, however many blocks are resident."""
    seen = []
    for checks, sample, schedule in [(False, None, "ascending"), (True, None, "ascending"),
                                     (True, None, "random"), (True, "all", "descending"), (False, None, "random")]:
        emulator.checks, emulator.sample = checks, sample
        emulator.set_schedule(schedule, 11)
        seen.append(times(emulator, module, grid=8, block=64, loads=256))
    emulator.checks, emulator.sample = False, None
    emulator.set_schedule("ascending", 0)
    for other in seen[1:]:
        np.testing.assert_array_equal(seen[0], other)
    t64, t32 = seen[0][:, 0], seen[0][:, 1]
    assert (t64 == t64[0]).all() and (t32 == t32[0]).all()  # every thread did the same work
    assert 256 <= t64[0] < 4 * 256, t64[0]  # about one tick per load, not host nanoseconds
    assert t32[0] == t64[0]


def launch_numbers(be, module, *, grid: int = 4) -> list[int]:
    """count_launches on ``grid`` blocks: the launch number each block saw."""
    out = be.alloc(grid, np.int32)
    be.to_device(np.zeros(grid, np.int32), out)
    be.launch(module, "count_launches", grid=grid, block=32, shared_bytes=0, args=[out, 0])
    return be.to_host(out).tolist()


def test_fresh_globals_gives_the_next_launch_the_device_variables_as_loaded(emulator, module):
    """A __device__ launch counter keeps counting from launch to launch (as on a GPU) until
    fresh_globals, after which the next launch is the first again, checked or not; the runtime's
    own state (kept in the same module) is not touched, so launches go on working."""
    emulator.fresh_globals(module)
    assert launch_numbers(emulator, module) == [1] * 4
    assert launch_numbers(emulator, module) == [2] * 4
    pid = module.pid
    emulator.fresh_globals(module)
    assert module.pid == pid  # restored in place, not by a new executor
    assert launch_numbers(emulator, module) == [1] * 4
    emulator.checks = True
    try:
        emulator.fresh_globals(module)
        assert launch_numbers(emulator, module) == [1] * 4
        assert launch_numbers(emulator, module, grid=9) == [2] * 9
    finally:
        emulator.checks = False
    emulator.fresh_globals(module)
    assert launch_numbers(emulator, module) == [1] * 4
    assert times(emulator, module, grid=2, block=32, loads=8).shape == (64, 2)


def test_without_a_snapshot_a_new_executor_gives_the_fresh_globals(emulator, module):
    """A module whose writable ranges are unknown (no link map) is made fresh by a new executor."""
    module._restorable = False
    try:
        assert launch_numbers(emulator, module)[0] >= 1
        pid = module.pid
        emulator.fresh_globals(module)
        assert launch_numbers(emulator, module) == [1] * 4
        assert module.pid != pid
    finally:
        module.stop()  # the next executor takes its snapshot again


def test_the_link_map_gives_the_students_writable_sections_only():
    """GNU ld's map (-Wl,-Map): the input sections of the student's object in the output .data and
    .bss (a long name on a line of its own), adjacent ones merged; the runtime's are left out."""
    link_map = """\
.data.rel.ro    0x0000000000003e40        0x8
 .data.rel.ro   0x0000000000003e40        0x8 m.so.o

.data           0x0000000000004008       0x20
 *(.data .data.* .gnu.linkonce.d.*)
 .data          0x0000000000004008        0x0 /usr/lib/x86_64-linux-gnu/crti.o
 .data          0x0000000000004010        0x4 m.so.o
                0x0000000000004010                inited
 .data.rel.local
                0x0000000000004018        0x8 m.so.o
 .data._ZZ1fvE1x
                0x0000000000004020        0x4 m.so.o
 .data          0x0000000000004024        0x4 /tmp/cache/emulator/runtime-1234.o

.bss            0x0000000000004028       0x10
 .bss           0x0000000000004028        0x1 /usr/lib/gcc/x86_64-linux-gnu/12/crtbeginS.o
 .bss           0x000000000000402c        0x8 /work/scratch/m.so.o
 .bss           0x0000000000004034        0x4 /tmp/cache/emulator/runtime-1234.o
"""
    assert module_globals(link_map, "m.so.o") == [(0x4010, 4), (0x4018, 12), (0x402C, 8)]
    assert module_globals("not a map", "m.so.o") is None


@pytest.mark.parametrize("gate", [1, 2], ids=["clock64-gate", "launch-count-gate"])
def test_a_race_taken_only_when_unchecked_fails_above_checks_max_n(tmp_path, gate):
    """tests/kernels/part4_racy_when_unchecked.cu takes a racy path (a plain `+=` on one shared word
    by every thread) only when it believes its run is not checked: gate 1 when 256 of its loads are
    fast by clock64(), gate 2 on the second launch by a __device__ launch counter. Above
    checks_max_n, where the checks run on sampled blocks and a plain run gives the judged output,
    the case fails as a race naming the `+=` line: the checked runs took the graded run's path."""
    source = tmp_path / PARTS["part4_any_size"].filename
    source.write_text(f"#define RACY_GATE {gate}\n" + (BROKEN / "part4_racy_when_unchecked.cu").read_text())
    number = next(i for i, text in enumerate(source.read_text().splitlines(), start=1)
                  if text.strip().startswith("total += a + b;"))
    result = grade(source, cfg=shipped("part4_any_size", [262143]), selection=Selection("emulator", "test"),
                   parts=["part4_any_size"])
    large = next(c for c in result.parts[0].cases if c.n == 262143)
    assert large.status == "fail" and large.kind == "race", large.message
    assert large.checker == SAMPLED_CHECKER
    assert f"{PARTS['part4_any_size'].filename}:{number}" in large.message
    assert any(f.kind == "race" and f.line == number for f in large.findings)


# ---- the GPU path ---------------------------------------------------------------------------------

#: Two cubins nvcc 13.0 compiled from the .cu files beside them, kept so that the section count below
#: is tested on every machine (regenerate: ``nvcc --cubin -arch sm_80 stateful.cu -o stateful.cubin``).


def test_a_cubins_device_variables_are_counted_from_its_sections():
    """The GPU path reloads a module before a graded run only where it has __device__ variables
    (.nv.global, .nv.global.init; __constant__ data is not writable by kernels)."""
    assert device_globals_bytes((FIXTURES / "stateful.cubin").read_bytes()) == 4 + 4 + 12
    assert device_globals_bytes((FIXTURES / "stateless.cubin").read_bytes()) == 0
    assert device_globals_bytes(b"not an ELF") == -1


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available()[0], reason=f"no usable CUDA GPU: {gpu_available()[1]}")
def test_on_a_gpu_fresh_globals_gives_the_next_launch_the_device_variables_as_loaded(tmp_path):
    """As on the emulator: a __device__ launch counter counts on until fresh_globals, after which the
    next launch is the first again (the GPU backend reloads the module from its cubin)."""
    from grader.backends.pycuda import PyCudaBackend
    be = PyCudaBackend()
    try:
        module = build(be, tmp_path, "vclock.cu", KERNELS)
        assert module.stateful
        be.fresh_globals(module)
        assert launch_numbers(be, module) == [1] * 4
        assert launch_numbers(be, module) == [2] * 4
        be.fresh_globals(module)
        assert launch_numbers(be, module) == [1] * 4
        assert launch_numbers(be, module, grid=9) == [2] * 9
    finally:
        be.close()
