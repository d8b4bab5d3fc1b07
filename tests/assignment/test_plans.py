"""Launch plans (grader/assignment/plans.py): one per part, each launching only its contract's kernels with the
geometry the handout gives, on a backend that records launches instead of running them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from grader.backends.base import Backend, DeviceArray, Module
from grader.assignment.config import PartConfig
from grader.core.errors import LaunchError
from grader.assignment.parts import PARTS
from grader.assignment.plans import GUARD, PLANS, POISON_BITS, Run, prepare, tiles


class HostArray(DeviceArray):
    """Device memory as a numpy array (a view shares its base's memory)."""

    def __init__(self, data: np.ndarray) -> None:
        self.data, self.count, self.dtype = data, data.size, data.dtype

    @property
    def address(self) -> int:
        return self.data.ctypes.data

    def view(self, offset: int, count: int) -> HostArray:
        return HostArray(self.data[offset:offset + count])


class Recorder(Backend):
    """Records each launch: kernel, grid, block, shared bytes and, per argument, a buffer's name
    and its first element at launch time or the int."""

    name = "recorder"

    def __init__(self) -> None:
        self.launches: list[tuple] = []
        self.names: dict[int, str] = {}

    def compile(self, **kwargs) -> Module:
        raise AssertionError("the plan tests launch a stand-in module; nothing is compiled")

    def alloc(self, count: int, dtype: np.dtype) -> HostArray:
        return HostArray(np.empty(count, dtype))

    def label(self, array, name, inner_offset, count) -> None:
        super().label(array, name, inner_offset, count)
        self.names[array.address + inner_offset * array.dtype.itemsize] = name

    def to_device(self, host: np.ndarray, dest: HostArray) -> None:
        dest.data[:] = host

    def to_host(self, src: HostArray) -> np.ndarray:
        return src.data.copy()

    def _launch(self, module, kernel, *, grid, block, shared_bytes, args) -> None:
        seen = [(self.names[a.address], a.data[0].item() if a.count else None) if isinstance(a, HostArray) else a
                for a in args]
        self.launches.append((kernel, grid.x, block.x, shared_bytes, seen))


class NoModule(Module):
    def has_kernel(self, name: str) -> bool:
        return True


def plan_of(key: str, n: int, *, block: int = 32, dtype=np.int32, items: int | None = None):
    backend = Recorder()
    run = Run(backend, NoModule(), np.dtype(dtype))
    d_in = run.buffer("in", n, np.arange(n, dtype=dtype), output=False)
    pc = PartConfig(sizes=(n,), points_per_case=1, block_size=block, items_per_thread=items)
    return backend, run, prepare(run, PARTS[key], pc, d_in, n)


def test_every_part_has_a_plan_and_nothing_else_does():
    assert set(PLANS) == set(PARTS)


@pytest.mark.parametrize("key", sorted(PARTS))
@pytest.mark.parametrize("n", [1, 64, 4097])
def test_a_plan_launches_only_its_contracts_kernels_with_their_arity(key, n):
    part = PARTS[key]
    n = min(n, part.limit(32) or n)
    backend, _, plan = plan_of(key, n, items=4 if part.items_per_thread else None)
    plan.run()
    contract = {k.name: len(k.params) for k in part.kernels}
    assert backend.launches and all(contract.get(k) == len(args) for k, _, _, _, args in backend.launches)
    assert plan.out.name == "out" and plan.out.count == n


@pytest.mark.parametrize("key, shared_elements", [("part1_naive", 64), ("part2_blelloch", 64),
                                                  ("part3_conflict_free", 64 + 2 + 0)])
def test_one_block_parts_launch_one_block_with_their_shared_memory(key, shared_elements):
    backend, _, plan = plan_of(key, 50, dtype=np.float32)
    plan.run()
    poison = np.uint32(POISON_BITS).view(np.float32).item()
    assert backend.launches == [(PARTS[key].kernels[0].name, 1, 32, shared_elements * 4,
                                 [("in", 0.0), ("out", poison), 50])]


def test_part3_pads_one_element_per_32_and_one_per_1024():
    backend, _, plan = plan_of("part3_conflict_free", 1024, block=512)
    plan.run()
    assert backend.launches[0][3] == (1024 + 32 + 1) * 4


def test_part4_scans_the_tile_sums_recursively_and_adds_the_offsets_back_top_down():
    n = 64 * 64 + 1  # 65 tiles of 2*B = 64, whose 65 sums make 2 tiles, whose 2 sums make 1
    backend, run, plan = plan_of("part4_any_size", n)
    plan.run()
    assert [(k, grid, block, shared) for k, grid, block, shared, _ in backend.launches] == [
        ("scan_tiles", 65, 32, 256), ("scan_tiles", 2, 32, 256), ("scan_tiles", 1, 32, 256),
        ("add_tile_offsets", 2, 32, 0), ("add_tile_offsets", 65, 32, 0)]
    assert [g.name for g in run.buffers] == ["in", "out", "tile_sums", "out (level 1)", "tile_sums (level 1)",
                                            "out (level 2)", "tile_sums (level 2)"]
    assert [g.count for g in run.buffers] == [n, n, 65, 65, 2, 2, 1]
    assert [a[0] for a in backend.launches[1][4][:3]] == ["tile_sums", "out (level 1)", "tile_sums (level 1)"]
    poison = np.uint32(POISON_BITS).view(np.int32).item()  # the recorder shows element 0 as an int32
    assert backend.launches[-1][4][:2] == [("out", poison), ("out (level 1)", poison)]


def test_part4_of_one_tile_launches_no_offsets():
    backend, _, plan = plan_of("part4_any_size", 64)
    plan.run()
    assert [k for k, *_ in backend.launches] == ["scan_tiles"]


def test_part5_zeroes_its_status_words_and_ticket_counter_before_every_run_not_in_its_launches():
    backend, run, plan = plan_of("part5_single_pass", 1000, items=4)  # tiles of 128 elements
    counter = next(g for g in run.buffers if g.name == "tile_counter")
    for _ in range(2):
        run.backend.to_device(np.full(1, 7, np.uint32), counter.inner)  # a previous launch's tickets
        plan.run()
    assert [(k, g, b, s) for k, g, b, s, _ in backend.launches] == [("scan_single_pass", 8, 32, 128 * 4)] * 2
    assert all(args[3:] == [("tile_status", 0), ("tile_counter", 0)] for *_, args in backend.launches)
    run.backend.to_device(np.full(1, 7, np.uint32), counter.inner)
    plan.launch()  # what a timed run times: the launch alone, the resets done before its window
    assert backend.launches[-1][4][4] == ("tile_counter", 7)


def test_part5_checks_one_ticket_per_block_after_its_launch():
    _, run, plan = plan_of("part5_single_pass", 1000, items=4)  # 8 tiles
    counter = next(g for g in run.buffers if g.name == "tile_counter")
    read = {id(counter): np.array([8], np.uint32)}
    assert [check(lambda g: read[id(g)]) for check in plan.checks] == [None]
    read[id(counter)] = np.array([3], np.uint32)
    (finding,) = [check(lambda g: read[id(g)]) for check in plan.checks]
    assert finding.kind == "ticket" and "*tile_counter is 3 after the launch, expected 8" in finding.message
    assert PARTS["part5_single_pass"].tile_of(plan_pc(1000, items=4)) == 32 * 4 and tiles(1000, 32 * 4) == 8


def plan_pc(n: int, *, block: int = 32, items: int | None = None) -> PartConfig:
    return PartConfig(sizes=(n,), points_per_case=1, block_size=block, items_per_thread=items)


def test_buffers_are_poisoned_around_and_inside_and_the_input_copied():
    _, run, plan = plan_of("part1_naive", 10)
    d_in = run.buffers[0]
    whole = d_in.full.data.view(np.uint32)
    assert whole.size == 10 + 2 * GUARD
    assert (whole[:GUARD] == POISON_BITS).all() and (whole[GUARD + 10:] == POISON_BITS).all()
    assert list(d_in.inner.data) == list(range(10))
    assert (plan.out.full.data.view(np.uint32) == POISON_BITS).all() and plan.out.output and not d_in.output


def test_a_part_without_a_plan_is_refused():
    part = dataclasses.replace(PARTS["part1_naive"], key="part9_unknown")
    backend = Recorder()
    run = Run(backend, NoModule(), np.dtype(np.int32))
    with pytest.raises(LaunchError, match="no launch plan for part part9_unknown"):
        prepare(run, part, PartConfig(sizes=(1,), points_per_case=1), run.buffer("in", 1), 1)
