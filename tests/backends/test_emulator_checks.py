"""The emulator's semantics beyond barriers (warp intrinsics, spin-waits, several resident blocks,
printf, schedules) and its checking mode (races, bounds, alignment, uninitialised shared memory,
barrier divergence, deadlock): kernels broken on purpose, each with its exact diagnosis, and
correct variants that must raise nothing. Kernels live in tests/emulator_kernels/.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from grader.backends.emulator import EmulatorBackend, EmulatorModule, Finding
from grader.core.errors import CompileError, KernelError
from grader.core.kernels import KernelSpec, Param
from grader.assignment.parts import PartSpec, part_header
from tests.conftest import EMULATOR_KERNELS, emulator_cache

INT = np.dtype(np.int32)


def spec(name: str, *params: tuple[str, str, str]) -> KernelSpec:
    return KernelSpec(name, tuple(Param(*p) for p in params))


def out_n(name: str) -> KernelSpec:
    return spec(name, ("out", "int*", "ptr"), ("n", "int", "int"))


def in_out_n(name: str) -> KernelSpec:
    return spec(name, ("in", "const int*", "ptr"), ("out", "int*", "ptr"), ("n", "int", "int"))


def lookback(name: str) -> KernelSpec:
    return spec(name, ("in", "const int*", "ptr"), ("out", "int*", "ptr"),
                ("state", "unsigned long long*", "ptr"), ("n", "int", "int"))


def line_of(filename: str, marker: str) -> int:
    for n, line in enumerate((EMULATOR_KERNELS / filename).read_text().splitlines(), start=1):
        if f"LINE:{marker}" in line:
            return n
    raise AssertionError(f"no LINE:{marker} in {filename}")


def build(be: EmulatorBackend, workdir: Path, filename: str, kernels: tuple[KernelSpec, ...]) -> EmulatorModule:
    part = PartSpec("test_part", 0, "test", filename, kernels, False, None)
    source = part_header(part, block_size=256, dtype=INT) + (EMULATOR_KERNELS / filename).read_text()
    return be.compile(source=source, filename=filename, kernels=kernels, workdir=workdir)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return emulator_cache(tmp_path_factory.mktemp("emu-cache"))


@pytest.fixture(scope="module")
def plain(cache_dir) -> EmulatorBackend:
    be = EmulatorBackend(workers=2, cache_dir=cache_dir, nvcc_check=False)
    yield be
    be.close()


@pytest.fixture(scope="module")
def checked(cache_dir) -> EmulatorBackend:
    be = EmulatorBackend(workers=1, cache_dir=cache_dir, nvcc_check=False, checks=True)
    yield be
    be.close()


# ---- warp intrinsics and printf -------------------------------------------------------------------

WARP_KERNELS = tuple(in_out_n(k) for k in ("shfl_block_scan", "warp_votes", "say_hello", "shout"))


@pytest.fixture(scope="module")
def warp_module(plain, tmp_path_factory) -> EmulatorModule:
    return build(plain, tmp_path_factory.mktemp("warp"), "warp_scans.cu", WARP_KERNELS)


@pytest.mark.parametrize("schedule", ["ascending", "descending", "random"])
@pytest.mark.parametrize("threads", [32, 100, 1024])
def test_warp_shuffle_block_scan(plain, warp_module, schedule, threads) -> None:
    plain.set_schedule(schedule, seed=7)
    try:
        x = np.random.default_rng(threads).integers(-50, 50, threads, dtype=np.int32)
        src, out = plain.alloc(threads, INT), plain.alloc(threads, INT)
        plain.to_device(x, src)
        plain.launch(warp_module, "shfl_block_scan", grid=1, block=threads, shared_bytes=0, args=[src, out, threads])
        np.testing.assert_array_equal(plain.to_host(out), np.cumsum(x, dtype=np.int32))
    finally:
        plain.set_schedule("ascending")


def test_warp_votes_and_reductions(plain, warp_module) -> None:
    x = np.arange(64, dtype=np.int32) * 3
    src, out = plain.alloc(64, INT), plain.alloc(16, INT)
    plain.to_device(x, src)
    plain.launch(warp_module, "warp_votes", grid=1, block=64, shared_bytes=0, args=[src, out, 100])
    got = plain.to_host(out).reshape(2, 8)
    for w in range(2):
        v = x[32 * w:32 * w + 32]
        odd = sum(1 << i for i in range(32) if v[i] & 1)
        assert got[w, 0] == v.sum() and got[w, 1] == v.sum()
        assert np.uint32(got[w, 2]) == np.uint32(odd)
        assert got[w, 3] == int((v > 100).any()) and got[w, 4] == 1 and got[w, 5] == v[0]
        assert np.uint32(got[w, 6]) == 0xFFFF and got[w, 7] == 32


def test_printf_is_captured_per_launch_and_capped(plain, warp_module) -> None:
    dummy = plain.alloc(4, INT)
    plain.take_output()
    plain.launch(warp_module, "say_hello", grid=2, block=4, shared_bytes=0, args=[dummy, dummy, 2])
    text = plain.take_output()
    assert sorted(text.splitlines()) == sorted(f"hello from thread {t} of block {b}" for b in range(2) for t in range(2))
    assert plain.take_output() == ""
    plain.launch(warp_module, "shout", grid=1, block=64, shared_bytes=0, args=[dummy, dummy, 40])
    text = plain.take_output()
    assert len(text) < 66 * 1024 and text.rstrip().endswith("[output cut: device printf wrote more than 64 KiB]")


# ---- decoupled look-back: spin-waits across blocks -------------------------------------------------

LOOKBACK = tuple(lookback(k) for k in ("lookback_ticket", "lookback_blockidx", "lookback_wrong_way"))


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("kernel", ["lookback_ticket", "lookback_blockidx"])
def test_decoupled_lookback_finishes_and_is_right(cache_dir, tmp_path, workers, kernel) -> None:
    be = EmulatorBackend(workers=workers, cache_dir=cache_dir, nvcc_check=False, schedule="random",
                         schedule_seed=workers)
    module = build(be, tmp_path, "lookback.cu", LOOKBACK)
    n = 256 * 40 + 17
    tiles = -(-n // 256)
    x = np.random.default_rng(3).integers(-9, 9, n, dtype=np.int32)
    src, out = be.alloc(n, INT), be.alloc(n, INT)
    state = be.alloc(tiles + 1, np.uint64)
    be.to_device(x, src)
    for _ in range(2):
        be.to_device(np.zeros(tiles + 1, np.uint64), state)
        be.launch(module, kernel, grid=tiles, block=256, shared_bytes=0, args=[src, out, state, n])
        np.testing.assert_array_equal(be.to_host(out), np.cumsum(x, dtype=np.int32))


def test_lookback_is_clean_under_checks(cache_dir, tmp_path) -> None:
    be = EmulatorBackend(workers=2, cache_dir=cache_dir, nvcc_check=False, checks=True, schedule="random")
    module = build(be, tmp_path, "lookback.cu", LOOKBACK)
    n, tiles = 256 * 12, 12
    x = np.ones(n, dtype=np.int32)
    src, out, state = be.alloc(n, INT), be.alloc(n, INT), be.alloc(tiles + 1, np.uint64)
    be.to_device(x, src)
    be.to_device(np.zeros(tiles + 1, np.uint64), state)
    be.launch(module, "lookback_ticket", grid=tiles, block=256, shared_bytes=0, args=[src, out, state, n])
    np.testing.assert_array_equal(be.to_host(out), np.arange(1, n + 1))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_spin_wait_nobody_ends_is_a_deadlock(cache_dir, tmp_path, workers) -> None:
    be = EmulatorBackend(workers=workers, cache_dir=cache_dir, nvcc_check=False, checks=True)
    module = build(be, tmp_path, "lookback.cu", LOOKBACK)
    dummy, state = be.alloc(8, INT), be.alloc(9, np.uint64)
    be.to_device(np.zeros(9, np.uint64), state)
    with pytest.raises(KernelError) as info:
        be.launch(module, "lookback_wrong_way", grid=8, block=32, shared_bytes=0, args=[dummy, dummy, state, 8])
    err = info.value
    assert err.kind == "deadlock"
    assert f"lookback.cu:{line_of('lookback.cu', 'spin')}" in str(err)
    assert err.findings[0].kind == "deadlock" and err.findings[0].line == line_of("lookback.cu", "spin")


# ---- the checks: one broken kernel per defect ------------------------------------------------------

BROKEN_NAMES = ("race_raw", "race_war", "race_waw", "warp_synchronous", "warp_synchronous_fixed", "oob_shared",
                "oob_global", "misaligned", "uninitialized", "divergent_barrier", "exit_before_barrier",
                "shuffle_outside_mask", "shuffle_half_missing", "spin_forever", "global_race", "clean_in_place",
                "flag_without_barrier")


@pytest.fixture(scope="module")
def broken(checked, tmp_path_factory) -> EmulatorModule:
    return build(checked, tmp_path_factory.mktemp("broken"), "broken.cu", tuple(out_n(k) for k in BROKEN_NAMES))


def launch(be, module, kernel, *, grid=1, block=32, count=None, n=0) -> np.ndarray:
    count = count if count is not None else grid * block
    out = be.alloc(count, INT)
    be.to_device(np.zeros(count, INT), out)
    be.launch(module, kernel, grid=grid, block=block, shared_bytes=0, args=[out, n])
    return be.to_host(out)


def diagnosis(be, module, kernel, **kw) -> KernelError:
    with pytest.raises(KernelError) as info:
        launch(be, module, kernel, **kw)
    err = info.value
    assert err.findings and all(isinstance(f, Finding) for f in err.findings)
    assert err.kind == err.findings[0].kind
    return err


@pytest.mark.parametrize("kernel, block, kind, line, other", [
    ("race_raw", 256, "race", "raw", "raw"),
    ("race_war", 64, "race", "war_write", "war_read"),
    ("race_waw", 64, "race", "waw", "waw"),
    ("warp_synchronous", 64, "race", "legacy", "legacy"),
])
def test_races_name_both_lines(checked, broken, kernel, block, kind, line, other) -> None:
    err = diagnosis(checked, broken, kernel, block=block)
    first = err.findings[0]
    assert (first.kind, first.file) == (kind, "broken.cu")
    if kernel == "warp_synchronous":  # five racy lines: the first finding is among them
        legacy = line_of("broken.cu", "legacy")
        assert legacy <= first.line < legacy + 5 and legacy <= first.other_line < legacy + 5
        assert "__syncwarp" in first.message
    else:
        assert {first.line, first.other_line} == {line_of("broken.cu", line), line_of("broken.cu", other)}
    assert first.thread != first.other_thread and first.block == (0, 0, 0)
    assert f"race ({first.access})" in first.message and first.access in ("read-after-write", "write-after-read",
                                                                          "write-after-write")
    if kernel == "race_waw":  # the others' order depends on which thread the emulator ran first
        assert first.access == "write-after-write"
    assert re.fullmatch(r"\w+\[\d+\] \(inside shared array \w+, \d+ elements?\)", first.address), first.address
    assert f"broken.cu:{first.line}" in str(err) and "race (" in str(err)
    assert len({(f.kind, f.line, f.other_line) for f in err.findings}) == len(err.findings)  # deduplicated


def test_races_between_blocks_in_global_memory(checked, broken) -> None:
    err = diagnosis(checked, broken, "global_race", grid=4, block=32)
    first = err.findings[0]
    assert first.kind == "race" and "global memory" in first.message
    assert {first.line, first.other_line} == {line_of("broken.cu", "g_read"), line_of("broken.cu", "g_write")}
    assert first.block != first.other_block and first.access and first.address  # the element, named
    # no flag at all: the advice is the fence and the flag
    assert "(a __threadfence() and a flag, or separate kernels)" in first.message


def test_a_block_that_publishes_before_its_threads_are_done_is_told_to_wait_for_them(checked, broken) -> None:
    """The block has a fence and a flag; what it lacks is a __syncthreads() before thread 0 publishes,
    so the fence-and-flag advice would be wrong."""
    err = diagnosis(checked, broken, "flag_without_barrier", grid=4, block=32, count=4 * 33)
    assert {(f.kind, f.line, f.other_line) for f in err.findings} == {
        ("race", line_of("broken.cu", "fb_read"), line_of("broken.cu", "fb_write"))}
    (first,) = err.findings
    assert "a __threadfence() and a flag, or separate kernels" not in first.message
    # the memory-order check's advice (tests/backends/test_memory_order.py): the barrier is what is missing
    assert ("thread (31, 0, 0) stored the value and thread (0, 0, 0) the later one with no __syncthreads() between "
            "them: put one after the value's store") in first.message, first.message


@pytest.mark.parametrize("kernel, block, kind, marker", [
    ("oob_shared", 33, "out-of-bounds", "oob_shared"),
    ("misaligned", 32, "misaligned", "misaligned"),
    ("divergent_barrier", 64, "barrier-divergence", "bar_a"),
    ("shuffle_outside_mask", 32, "barrier-divergence", "mask"),
    ("shuffle_half_missing", 32, "barrier-divergence", "half"),
    ("spin_forever", 32, "deadlock", "deadlock"),
])
def test_each_defect_is_diagnosed_with_its_line(checked, broken, kernel, block, kind, marker) -> None:
    err = diagnosis(checked, broken, kernel, block=block, n=block - 3)
    first = err.findings[0]
    assert first.kind == kind, str(err)
    lines = {first.line, first.other_line} if kernel == "divergent_barrier" else {first.line}
    assert first.file == "broken.cu" and line_of("broken.cu", marker) in lines, str(err)
    assert f"broken.cu:{first.line}" in str(err)


def test_an_unwritten_shared_read_is_a_warning_not_a_failure(checked, broken) -> None:
    out = launch(checked, broken, "uninitialized", block=64, n=61)  # raises nothing: the output decides
    assert (out[:32] == 1).all() and (out[32:64] == np.uint32(0xA5A5A5A5).view(np.int32)).all()
    warnings = checked.take_warnings()
    assert [(w.kind, w.file, w.line) for w in warnings] == [("uninitialized-read", "broken.cu",
                                                            line_of("broken.cu", "uninit"))]
    assert "reads s[32] (inside shared array s, 64 elements)" in warnings[0].message
    assert warnings[0].thread == (32, 0, 0)


@pytest.mark.parametrize("schedule", ["ascending", "descending"])
def test_a_shuffle_whose_mask_names_lanes_that_exited(checked, broken, plain, tmp_path, schedule) -> None:
    """Lanes 0-15 shuffle with the full mask; lanes 16-31 never call it and return. Checked: a barrier
    divergence, found at the call where the lanes have returned first (descending: it names the first
    of them), else when the block is stuck (ascending). Plain: the call completes with the lanes left."""
    checked.set_schedule(schedule, seed=3)
    try:
        err = diagnosis(checked, broken, "shuffle_half_missing", block=32)
    finally:
        checked.set_schedule("ascending")
    first = err.findings[0]
    assert first.kind == "barrier-divergence" and first.line == line_of("broken.cu", "half")
    if schedule == "descending":
        assert "but lane 16 of its warp, named in the mask, has exited" in first.message, first.message
    else:
        assert "for lanes 0xffff0000 of its warp, which have exited or never call it" in first.message, first.message
    module = build(plain, tmp_path, "broken.cu", tuple(out_n(k) for k in BROKEN_NAMES))
    plain.set_schedule(schedule, seed=3)
    try:
        assert launch(plain, module, "shuffle_half_missing", block=32).tolist() == [0] * 32
    finally:
        plain.set_schedule("ascending")


def test_divergent_barriers_name_both_lines(checked, broken) -> None:
    first = diagnosis(checked, broken, "divergent_barrier", block=64).findings[0]
    assert {first.line, first.other_line} == {line_of("broken.cu", "bar_a"), line_of("broken.cu", "bar_b")}


def test_exit_before_a_barrier_is_a_warning_as_on_a_gpu(checked, broken) -> None:
    # Since Volta exited threads do not count at a barrier: the others go on, and compute-sanitizer's
    # synccheck is silent (measured on an H100), so the output decides and the exit is a warning.
    launch(checked, broken, "exit_before_barrier", block=64, n=40)
    warnings = checked.take_warnings()
    assert [(w.kind, w.line) for w in warnings] == [("early-exit", line_of("broken.cu", "exit_bar"))]
    assert "have exited" in warnings[0].message
    # what made them leave: the early return, by its line
    assert (f"(thread (40, 0, 0) first, at the `return` at broken.cu:{line_of('broken.cu', 'exit_return')}) have "
            "exited") in warnings[0].message, warnings[0].message


def test_out_of_bounds_global_names_the_allocation(checked, broken) -> None:
    err = diagnosis(checked, broken, "oob_global", grid=2, block=32, count=40, n=40)
    first = err.findings[0]
    assert first.kind == "out-of-bounds" and first.line == line_of("broken.cu", "oob_global")
    assert "past the end of a 160-byte device allocation" in first.message
    assert first.block == (1, 0, 0) and first.thread == (8, 0, 0)


@pytest.mark.parametrize("kernel, block", [("clean_in_place", 256), ("warp_synchronous_fixed", 64)])
def test_correct_kernels_raise_nothing_under_checks(checked, broken, kernel, block) -> None:
    out = launch(checked, broken, kernel, block=block)
    if kernel == "clean_in_place":
        assert (out[:256] == 256).all()
    else:
        assert out[0] == 64


def test_correct_warp_scan_is_clean_under_every_schedule(cache_dir, tmp_path) -> None:
    for schedule in ("ascending", "descending", "random"):
        be = EmulatorBackend(workers=1, cache_dir=cache_dir, nvcc_check=False, checks=True, schedule=schedule)
        module = build(be, tmp_path, "warp_scans.cu", WARP_KERNELS)
        x = np.arange(1000, dtype=np.int32) % 7
        src, out = be.alloc(1000, INT), be.alloc(1000, INT)
        be.to_device(x, src)
        be.launch(module, "shfl_block_scan", grid=1, block=1000, shared_bytes=0, args=[src, out, 1000])
        np.testing.assert_array_equal(be.to_host(out), np.cumsum(x, dtype=np.int32))


def test_without_checks_races_go_unreported_but_schedules_differ(plain, tmp_path) -> None:
    module = build(plain, tmp_path, "broken.cu", tuple(out_n(k) for k in BROKEN_NAMES))
    results = {}
    for schedule in ("ascending", "descending", "random"):
        plain.set_schedule(schedule, seed=1)
        results[schedule] = launch(plain, module, "race_raw", block=256)
    plain.set_schedule("ascending")
    assert not all(np.array_equal(results["ascending"], r) for r in results.values())


def test_describe_says_checks_and_schedule(cache_dir) -> None:
    be = EmulatorBackend(cache_dir=cache_dir, checks=True, schedule="random", schedule_seed=5, nvcc_check=False)
    d = be.describe()
    assert d["checks"] == "on" and d["schedule"] == "random (seed 5)"
    with pytest.raises(ValueError):
        be.set_schedule("sideways")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
def test_code_that_nvcc_rejects_is_a_compile_error(cache_dir, tmp_path) -> None:
    be = EmulatorBackend(cache_dir=cache_dir, nvcc_check=True)
    body = "__global__ void k(int* out, int n) {\n    out[0] = __shfl_up(n, 1);\n}\n"
    part = PartSpec("test_part", 0, "test", "nv.cu", (out_n("k"),), False, None)
    with pytest.raises(CompileError, match="not with nvcc") as info:
        be.compile(source=part_header(part, block_size=32, dtype=INT) + body, filename="nv.cu",
                   kernels=(out_n("k"),), workdir=tmp_path)
    assert "nv.cu(2)" in info.value.log
