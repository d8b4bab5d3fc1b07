"""Weak ordering between blocks (issue 20): on a GPU a block's stores become visible to other blocks
in no particular order unless a release (a __threadfence(), a store with release order) orders
them, and a reader's loads likewise unless an acquire does. The emulator's memory is sequentially
consistent, so its checks test the pattern that breaks: a thread that reads a flag of another block
and then a value that block stored before the flag (docs/emulator.md, "Memory order between
blocks")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grader.backends import Selection
from grader.backends.emulator import EmulatorBackend
from grader.assignment.config import load_config
from grader.core.errors import KernelError
from grader.core.kernels import KernelSpec, Param
from grader.grading.runner import grade
from tests.conftest import BROKEN, EMULATOR_KERNELS, SOLUTIONS, emulator_cache
from tests.backends.test_emulator_checks import line_of
from tests.backends.test_integrity_checks import compile_part

FILE = EMULATOR_KERNELS / "memory_order.cu"
NAMES = ("no_fence", "reader_unfenced", "fenced", "release_acquire", "relaxed_atomics", "barrier_then_fence",
         "atomic_poll_unfenced", "atomic_poll_fenced")
GRID = 4


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return emulator_cache(tmp_path_factory.mktemp("emu-cache"))


@pytest.fixture(scope="module")
def checked(cache_dir):
    be = EmulatorBackend(workers=2, cache_dir=cache_dir, checks=True, nvcc_check=False)
    yield be
    be.close()


@pytest.fixture(scope="module")
def module(checked, tmp_path_factory):
    kernels = tuple(KernelSpec(k, (Param("out", "int*", "ptr"), Param("n", "int", "int"))) for k in NAMES)
    return compile_part(checked, tmp_path_factory.mktemp("order"), FILE, kernels, block_size=32)


def run(be, module, kernel) -> np.ndarray:
    out = be.alloc(3 * GRID, np.int32)
    be.to_device(np.zeros(3 * GRID, np.int32), out)
    be.launch(module, kernel, grid=GRID, block=32, shared_bytes=0, args=[out, 0])
    return be.to_host(out)


def at(marker: str) -> str:
    return f"memory_order.cu:{line_of('memory_order.cu', marker)}"


@pytest.mark.parametrize("kernel", ["fenced", "release_acquire", "barrier_then_fence", "atomic_poll_fenced"])
def test_message_passing_with_a_release_and_an_acquire_is_clean(checked, module, kernel):
    got = run(checked, module, kernel)
    assert got[2 * GRID + 1:].tolist() == list(range(1, GRID))


def test_a_release_store_read_by_a_block_on_another_worker_is_ordered(checked, module):
    """8 blocks on two workers (all resident at once), launched 300 times: a block's acquire may load
    the flag of the block before while that block's worker is still in the store's hook. The release
    of an atomic store was recorded after the store, and a race was then reported in this correct
    kernel now and then (1 launch in 300 of 4 blocks on 2 loaded cores); it is recorded before the
    store (memory/hooks.cpp, release_before). And a block whose poll read the flag just set, in a round
    that changed nothing else, was stamped stale as of that round's start: it acts on what it read
    only in its next round, so while its neighbours went round a deadlock was reported (4 to 6
    launches in 40,000 on 2 loaded cores); a block is stuck only after two such rounds in a row
    (grid/worker.cpp). A stress check: it cannot force the interleaving."""
    _chain(checked, module, grid=8, launches=3000)


def test_a_chain_of_more_blocks_than_are_resident_is_no_deadlock(checked, module):
    """256 blocks on two workers (8 resident at once), each waiting for the block before, launched 20
    times. A worker stamped a block whose round changed nothing as stale at the launch's progress
    counted after the round, so a block that polled a flag just before the other worker stored it
    (and counted the store) looked stale at the new count: after three passes running its
    neighbours, a deadlock was reported (1 run of this file in 3, with 20 such launches). It is
    stamped with the progress before the round (grid/worker.cpp). A stress check too."""
    _chain(checked, module, grid=256, launches=20)


def _chain(be, module, *, grid: int, launches: int) -> None:
    """Launch ``release_acquire`` on ``grid`` blocks ``launches`` times: each must be clean and right."""
    for _ in range(launches):
        out = be.alloc(3 * grid, np.int32)
        be.to_device(np.zeros(3 * grid, np.int32), out)
        be.launch(module, "release_acquire", grid=grid, block=32, shared_bytes=0, args=[out, 0])
        assert be.to_host(out)[2 * grid + 1:].tolist() == list(range(1, grid))


def test_an_unfenced_flag_fails_naming_the_two_stores(checked, module):
    with pytest.raises(KernelError) as info:
        run(checked, module, "no_fence")
    (first,) = [f for f in info.value.findings if "memory order" in f.message]
    assert first.kind == "race" and info.value.kind == "race" and info.value.completed
    assert (first.line, first.other_line) == (line_of("memory_order.cu", "nf_value_load"),
                                              line_of("memory_order.cu", "nf_value_store"))
    assert first.block != first.other_block
    assert (f"after reading at {at('nf_flag_load')} what that block stored later, at {at('nf_flag_store')}: missing "
            f"__threadfence() between {at('nf_value_store')} and {at('nf_flag_store')}") in first.message, first.message


def test_a_reader_that_does_not_fence_after_the_flag_fails_naming_its_two_loads(checked, module):
    with pytest.raises(KernelError) as info:
        run(checked, module, "reader_unfenced")
    (first,) = [f for f in info.value.findings if "memory order" in f.message]
    assert f"missing __threadfence() between {at('ru_flag_load')} and {at('ru_value_load')}" in first.message


def test_a_flag_polled_with_a_cuda_atomic_needs_a_fence_before_the_value(checked, module):
    """atomicAdd(flag, 0) reads the flag, but a CUDA atomic is relaxed: no acquire (issue 33)."""
    with pytest.raises(KernelError) as info:
        run(checked, module, "atomic_poll_unfenced")
    (first,) = [f for f in info.value.findings if "memory order" in f.message]
    assert first.line == line_of("memory_order.cu", "ap_value_load")
    assert f"missing __threadfence() between {at('ap_flag_load')} and {at('ap_value_load')}" in first.message


def test_relaxed_atomics_order_nothing(checked, module):
    with pytest.raises(KernelError) as info:
        run(checked, module, "relaxed_atomics")
    assert any(f.line == line_of("memory_order.cu", "ra_value_load") and "memory order" in f.message
               for f in info.value.findings)


def test_an_unfenced_look_back_fails_and_the_reference_passes(tmp_path, backend):
    """The same verdict on a GPU: compute-sanitizer cannot see a missing fence (racecheck watches
    shared memory only), so on the GPU path the emulator's checks decide the case
    (grader.grading.worker.gpu_path.GpuPath.decided)."""
    path = tmp_path / "config.yaml"
    path.write_text("block_size: 64\nseed: 7\nparts:\n  part5_single_pass:\n    block_size: 64\n"
                    "    items_per_thread: 4\n    points_per_case: 1\n    dtypes: [int32]\n    sizes: [1000]\n")
    cfg = load_config(path)
    (bad,) = grade(BROKEN / "part5_missing_fence.cu", cfg=cfg, selection=backend, parts=["part5_single_pass"]).parts
    case = next(c for c in bad.cases if c.n == 1000)
    assert case.status == "fail" and case.kind == "race"
    assert "race (memory order) between blocks" in case.message and "missing __threadfence() between" in case.message
    (good,) = grade(SOLUTIONS / "part5_single_pass.cu", cfg=cfg, selection=backend, parts=["part5_single_pass"]).parts
    assert good.status == "pass", [c.message for c in good.cases]


def test_a_stale_read_fails_only_where_the_older_value_changes_the_output(tmp_path, backend):
    """Write-to-read causality (issue 50): tile t reads tile t - 2's status word after reading tile
    t - 1's, which tile t - 1 stored once it had read tile t - 2's, with no fence. The PTX memory
    model lets a GPU give that read the older value, and the emulator gives it: the look-back that
    polls each word waits and passes; the one that reads each word once sums a zero and fails as
    ``stale-read``, naming the read and the store. The same verdicts through the GPU path, where
    the emulator's checks decide the case."""
    path = tmp_path / "config.yaml"
    path.write_text("block_size: 64\nseed: 7\nparts:\n  part5_single_pass:\n    block_size: 64\n"
                    "    items_per_thread: 4\n    points_per_case: 1\n    dtypes: [int32]\n    sizes: [1000]\n")
    cfg = load_config(path)
    (good,) = grade(BROKEN / "part5_chain_polled.cu", cfg=cfg, selection=backend, parts=["part5_single_pass"]).parts
    assert good.status == "pass", [c.message for c in good.cases]
    (bad,) = grade(BROKEN / "part5_chain_read_once.cu", cfg=cfg, selection=backend, parts=["part5_single_pass"]).parts
    case = next(c for c in bad.cases if c.n == 1000)
    assert case.status == "fail" and case.kind == "stale-read", case.message
    text = (BROKEN / "part5_chain_read_once.cu").read_text().splitlines()
    read_at = next(i for i, line in enumerate(text, start=1) if "LINE:chain_read" in line)
    assert {f.line for f in case.findings if f.kind == "stale-read"} == {read_at} and "the emulator gave it the older value" \
        in case.message and "with that value the output is wrong" in case.message, case.message
