"""Shared memory no thread wrote: the emulator fills every block's shared arrays with
``EmulatorBackend.shared_fill`` (static and dynamic ones), and with checks on a read of an unwritten
slot is a warning (``uninitialized-read``, from ``take_warnings()``) that never fails a launch by
itself: the output decides. A kernel whose unwritten slots never reach the output gives the same
output under two fills; one whose output depends on them does not. The red zones between the arrays
keep their bounds checks. Kernels: tests/emulator_kernels/uninit_shared.cu.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grader.backends.emulator import EmulatorBackend, EmulatorModule
from grader.backends.emulator.backend import DEFAULT_SHARED_FILL
from grader.core.errors import KernelError
from grader.core.kernels import KernelSpec, Param
from grader.assignment.parts import PartSpec, part_header
from tests.conftest import EMULATOR_KERNELS, emulator_cache

FILE = "uninit_shared.cu"
INT = np.dtype(np.int32)
NAMES = ("tail_unwritten", "sum_unwritten", "read_fill", "overrun_static", "overrun_dynamic", "race_and_unwritten")
KERNELS = tuple(KernelSpec(k, (Param("in", "const int*", "ptr"), Param("out", "int*", "ptr"), Param("n", "int", "int")))
                for k in NAMES)
OTHER_FILL = 0x12345678


def line_of(marker: str) -> int:
    for n, line in enumerate((EMULATOR_KERNELS / FILE).read_text().splitlines(), start=1):
        if f"LINE:{marker}" in line:
            return n
    raise AssertionError(f"no LINE:{marker} in {FILE}")


def as_int(word: int) -> int:
    return int(np.uint32(word).view(np.int32))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return emulator_cache(tmp_path_factory.mktemp("emu-cache"))


def _backend(cache_dir: Path, checks: bool):
    be = EmulatorBackend(workers=1, cache_dir=cache_dir, nvcc_check=False, checks=checks)
    yield be
    be.close()


@pytest.fixture(scope="module")
def checked(cache_dir):
    yield from _backend(cache_dir, True)


@pytest.fixture(scope="module")
def plain(cache_dir):
    yield from _backend(cache_dir, False)


def _module(be: EmulatorBackend, workdir: Path) -> EmulatorModule:
    part = PartSpec("test_part", 0, "test", FILE, KERNELS, False, None)
    source = part_header(part, block_size=256, dtype=INT) + (EMULATOR_KERNELS / FILE).read_text()
    return be.compile(source=source, filename=FILE, kernels=KERNELS, workdir=workdir)


@pytest.fixture(scope="module")
def checked_mod(checked, tmp_path_factory) -> EmulatorModule:
    return _module(checked, tmp_path_factory.mktemp("uninit-checked"))


@pytest.fixture(scope="module")
def plain_mod(plain, tmp_path_factory) -> EmulatorModule:
    return _module(plain, tmp_path_factory.mktemp("uninit-plain"))


@pytest.fixture(autouse=True)
def _default_fill(checked, plain):
    for be in (checked, plain):
        be.shared_fill = DEFAULT_SHARED_FILL
        be.take_warnings()
    yield
    for be in (checked, plain):
        be.shared_fill = DEFAULT_SHARED_FILL


def run(be, module, kernel, x, *, block, count=None, n=None, shared_bytes=0, grid=1) -> np.ndarray:
    x = np.asarray(x, dtype=INT)
    src, out = be.alloc(max(len(x), 1), INT), be.alloc(count or len(x), INT)
    be.to_device(np.resize(x, max(len(x), 1)).astype(INT), src)
    be.to_device(np.zeros(out.count, INT), out)
    be.launch(module, kernel, grid=grid, block=block, shared_bytes=shared_bytes,
              args=[src, out, len(x) if n is None else n])
    return be.to_host(out)


def test_default_fill_is_the_poison_word_and_not_zero() -> None:
    assert EmulatorBackend.__doc__ and "shared_fill" in EmulatorBackend.__doc__
    assert DEFAULT_SHARED_FILL == 0xA5A5A5A5 and DEFAULT_SHARED_FILL != 0


def test_unwritten_slots_that_never_reach_the_output_are_a_warning(checked, checked_mod) -> None:
    x = (np.arange(200) % 7 - 3).astype(INT)
    outs = []
    for fill in (DEFAULT_SHARED_FILL, OTHER_FILL):
        checked.shared_fill = fill
        outs.append(run(checked, checked_mod, "tail_unwritten", x, block=256))  # raises nothing
        np.testing.assert_array_equal(outs[-1], np.cumsum(x, dtype=np.int32))
    np.testing.assert_array_equal(outs[0], outs[1])
    warnings = checked.take_warnings()
    assert {w.kind for w in warnings} == {"uninitialized-read"}
    lines = [w.line for w in warnings]
    assert sorted(lines) == sorted({line_of("tail_own"), line_of("tail_left")})  # one per line, two launches
    assert all(w.file == FILE for w in warnings)
    own = next(w for w in warnings if w.line == line_of("tail_own"))
    assert "reads temp[200] (inside shared array temp, 256 elements)" in own.message, own.message
    assert f"at {FILE}:{line_of('tail_own')}, which no thread of the block has written" in own.message
    assert own.thread == (200, 0, 0) and own.block == (0, 0, 0)
    assert checked.take_warnings() == []  # taken


def test_unwritten_slots_that_reach_the_output_differ_under_two_fills(checked, checked_mod) -> None:
    x = np.arange(1, 101, dtype=INT)
    outs = []
    for fill in (DEFAULT_SHARED_FILL, OTHER_FILL):
        checked.shared_fill = fill
        outs.append(run(checked, checked_mod, "sum_unwritten", x, block=256)[0])
    assert outs[0] != outs[1]  # the output depends on the fill: the grader fails the case
    assert outs[0] != x.sum()
    warnings = checked.take_warnings()
    assert [(w.kind, w.line) for w in warnings] == [("uninitialized-read", line_of("sum_read"))]
    assert "shared array tile, 256 elements" in warnings[0].message


def test_no_warnings_without_unwritten_reads(checked, checked_mod) -> None:
    x = np.arange(256, dtype=INT)
    np.testing.assert_array_equal(run(checked, checked_mod, "tail_unwritten", x, block=256), np.cumsum(x))
    assert checked.take_warnings() == []


@pytest.mark.parametrize("mode", ["plain", "checked"])
@pytest.mark.parametrize("fill", [DEFAULT_SHARED_FILL, OTHER_FILL, 0])
def test_the_fill_reaches_static_and_dynamic_arrays(request, mode, fill) -> None:
    be = request.getfixturevalue(mode)
    module = request.getfixturevalue(f"{mode}_mod")
    be.shared_fill = fill
    out = run(be, module, "read_fill", [0], block=32, count=5, n=1, shared_bytes=64)
    assert out.tolist() == [as_int(fill)] * 5
    if mode == "checked":
        warnings = be.take_warnings()
        assert {w.kind for w in warnings} == {"uninitialized-read"}
        messages = " | ".join(w.message for w in warnings)
        for name in ("never_written[1] (", "wide[1] (", "chars["):
            assert name in messages, messages
        assert "dyn[1] (inside shared array dyn, 16 elements)" in messages, messages


@pytest.mark.parametrize("mode", ["plain", "checked"])
def test_red_zone_overruns_are_still_out_of_bounds(request, mode) -> None:
    be = request.getfixturevalue(mode)
    module = request.getfixturevalue(f"{mode}_mod")
    be.shared_fill = OTHER_FILL
    with pytest.raises(KernelError) as info:
        run(be, module, "overrun_static", [0] * 32, block=32, n=1)
    assert info.value.kind == "out-of-bounds"
    assert "a[32] (1 past the end of shared array a, 32 elements)" in str(info.value)
    assert f"{FILE}:{line_of('overrun_static')}" in str(info.value)
    with pytest.raises(KernelError) as info:
        run(be, module, "overrun_dynamic", [0] * 16, block=16, n=16, shared_bytes=64)
    assert info.value.kind == "out-of-bounds"
    assert "dyn[16] (1 past the end of shared array dyn, 16 elements)" in str(info.value)
    assert be.take_warnings() == []


def test_a_fatal_finding_comes_first_and_the_warnings_after_it(checked, checked_mod) -> None:
    with pytest.raises(KernelError) as info:
        run(checked, checked_mod, "race_and_unwritten", [0] * 64, block=64)
    err = info.value
    assert err.kind == "race" and err.findings[0].kind == "race"
    assert err.findings[0].line == line_of("ru_race")
    assert str(err).startswith("race_and_unwritten: race (")
    kinds = [f.kind for f in err.findings]
    assert "uninitialized-read" in kinds
    assert kinds.index("uninitialized-read") > max(i for i, k in enumerate(kinds) if k == "race")
    assert {f.line for f in err.findings if f.kind == "uninitialized-read"} == {line_of("ru_read"), line_of("ru_race")}
    assert checked.take_warnings() == []  # a failed launch's warnings come with its error
