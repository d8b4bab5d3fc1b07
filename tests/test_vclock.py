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

from grader.backends.emulator import EmulatorBackend
from tests.test_emulator_checks import build, out_n

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
