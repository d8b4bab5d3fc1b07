"""Forward progress on the emulator: a kernel that ends is never called a deadlock however many
barriers it runs, and an endless loop through barriers is found by proof — its block's state at a
barrier release is one it was in before (block/loops.h, "Endless loops") — naming the loop's
barriers, long before any deadline. Kernels: tests/emulator_kernels/progress.cu.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from grader.backends.emulator import EmulatorBackend, EmulatorModule
from grader.core.errors import KernelError
from grader.core.kernels import KernelSpec, Param
from grader.assignment.parts import PartSpec, part_header
from tests.conftest import EMULATOR_KERNELS, emulator_cache

FILE = "progress.cu"
INT = np.dtype(np.int32)
KERNELS = tuple(KernelSpec(name, (Param("in", "const int*", "ptr"), Param("out", "int*", "ptr"),
                                  Param("flag", "int*", "ptr"), Param("n", "int", "int")))
                for name in ("scan_then_rounds", "endless_two_barriers", "wait_for_last_block", "wait_forever",
                             "bounded_poll"))
#: What a launch may take before the watchdog stops its executor: far above what detection takes
#: (well under a second alone), so that only a detection that does not work fails on time.
WATCHDOG_S = 60.0


def line_of(marker: str) -> int:
    for n, line in enumerate((EMULATOR_KERNELS / FILE).read_text().splitlines(), start=1):
        if f"LINE:{marker}" in line:
            return n
    raise AssertionError(f"no LINE:{marker} in {FILE}")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return emulator_cache(tmp_path_factory.mktemp("emu-cache"))


def backend(cache_dir: Path, *, checks: bool, workers: int = 1) -> EmulatorBackend:
    be = EmulatorBackend(workers=workers, cache_dir=cache_dir, nvcc_check=False, checks=checks)
    be.detect_deadlock = True  # as the grader sets it, checked or not (grading/worker/main.py)
    return be


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "checked"])
def emu(request, cache_dir, tmp_path_factory):
    be = backend(cache_dir, checks=request.param)
    part = PartSpec("test_part", 0, "test", FILE, KERNELS, False, None)
    source = part_header(part, block_size=256, dtype=INT) + (EMULATOR_KERNELS / FILE).read_text()
    module = be.compile(source=source, filename=FILE, kernels=KERNELS, workdir=tmp_path_factory.mktemp("progress"))
    yield be, module
    be.close()


def run(be: EmulatorBackend, module: EmulatorModule, kernel: str, *, grid: int, block: int, n: int,
        x: np.ndarray | None = None) -> np.ndarray:
    """One launch, stopped by a watchdog (its executor killed) after WATCHDOG_S."""
    size = grid * block
    src, out, flag = be.alloc(size, INT), be.alloc(size, INT), be.alloc(1, INT)
    be.to_device(x if x is not None else np.ones(size, INT), src)
    be.to_device(np.zeros(size, INT), out)
    be.to_device(np.zeros(1, INT), flag)
    watchdog = threading.Timer(WATCHDOG_S, module.stop)
    watchdog.start()
    try:
        be.launch(module, kernel, grid=grid, block=block, shared_bytes=0, args=[src, out, flag, n])
    finally:
        watchdog.cancel()
    return be.to_host(out)


@pytest.mark.parametrize("rounds", [1900, 2100, 5000])
def test_many_barrier_rounds_with_progress_in_registers_end_right(emu, rounds) -> None:
    be, module = emu
    x = np.random.default_rng(rounds).integers(-9, 9, 256, dtype=np.int32)
    out = run(be, module, "scan_then_rounds", grid=1, block=256, n=rounds, x=x)
    np.testing.assert_array_equal(out, np.cumsum(x, dtype=np.int32))


@pytest.mark.parametrize("grid", [1, 8])
def test_an_endless_loop_through_two_barriers_is_found_naming_its_lines(emu, grid) -> None:
    """Alone (grid 1), or with other blocks waiting to run (grid 8: the loop reads only shared
    memory and registers, so what other blocks do cannot end it)."""
    be, module = emu
    with pytest.raises(KernelError) as info:
        run(be, module, "endless_two_barriers", grid=grid, block=64, n=5)
    err = info.value
    assert err.kind == "deadlock", str(err)
    first = err.findings[0]
    assert first.kind == "deadlock" and first.file == FILE
    assert {first.line, first.other_line} == {line_of("loop_a"), line_of("loop_b")}, str(err)
    assert "the kernel never ends" in first.message and "for ever" in first.message


def test_a_wait_for_another_blocks_flag_with_barriers_is_no_deadlock(emu) -> None:
    """Block 0 goes round the same barriers in the same state while it waits, for many more
    releases than the watch needs; the flag it reads can still change (its writer runs), so that
    is no proof, and the launch ends right."""
    be, module = emu
    out = run(be, module, "wait_for_last_block", grid=3, block=32, n=3000)
    assert (out == 1).all()


def test_a_wait_nothing_can_end_is_found_once_the_block_is_alone(emu) -> None:
    be, module = emu
    with pytest.raises(KernelError) as info:
        run(be, module, "wait_forever", grid=1, block=32, n=0)
    err = info.value
    assert err.kind == "deadlock" and err.findings[0].line == line_of("forever"), str(err)
    assert "only block left" in err.findings[0].message


def test_a_bounded_poll_that_counts_in_a_register_is_no_deadlock(emu) -> None:
    """Each poll reads the same value at the same place (a stale poll, as the runtime saw it before),
    but the thread's state changes each time: no proof that it polls for ever, and it ends."""
    be, module = emu
    out = run(be, module, "bounded_poll", grid=1, block=32, n=3000)
    assert (out == 3000).all()
