"""The checks above ``emulator.checks_max_n`` (issue 38): a sample of each launch's blocks (the first,
the last and a few drawn from the case's seed) is checked under the same three thread orders, and the
random order switches threads at memory accesses too, so a race that exists only at large n fails.

The runtime's side runs kernels of tests/emulator_kernels/sampling.cu on an emulator backend; the
grader's side grades the kernels of tests/kernels/*_above_checks.cu, which are the reference up to
n = 70,000 (the shipped checks_max_n) and race above it, with the shipped config's checks_max_n and
some of its sizes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grader.backends import Selection
from grader.backends.emulator import EmulatorBackend
from grader.backends.emulator.launch import SAMPLE_DRAWN, sampled_blocks
from grader.assignment.config import load_config
from grader.core.errors import KernelError
from grader.grading.case.cases import SAMPLED_CHECKER
from grader.grading.case.run import SAMPLED_BLOCK_CHECKS
from grader.assignment.parts import PARTS
from grader.grading.runner import grade
from tests.conftest import BROKEN, ROOT, SOLUTIONS
from tests.backends.test_emulator_checks import build, line_of, out_n

KERNELS = tuple(out_n(k) for k in ("mark_blocks", "race_in_block", "shared_count", "race_after_work"))


@pytest.fixture(scope="module")
def emulator() -> EmulatorBackend:
    be = EmulatorBackend(workers=2, nvcc_check=False, checks=True)
    yield be
    be.close()


@pytest.fixture(scope="module")
def module(emulator, tmp_path_factory):
    return build(emulator, tmp_path_factory.mktemp("sampling"), "sampling.cu", KERNELS)


def launch(be: EmulatorBackend, module, kernel: str, *, grid: int, n: int, block: int = 64) -> tuple[np.ndarray, KernelError | None]:
    """``kernel`` on ``grid`` blocks: ``(out, the KernelError it raised or None)``."""
    out = be.alloc(grid, np.int32)
    be.to_device(np.zeros(grid, np.int32), out)
    error = None
    try:
        be.launch(module, kernel, grid=grid, block=block, shared_bytes=0, args=[out, n])
    except KernelError as exc:
        error = exc
    return be.to_host(out), error


def set_up(be: EmulatorBackend, *, sample: str | None, schedule: str = "ascending", seed: int = 7,
           checks: bool = True) -> None:
    be.checks, be.sample = checks, sample
    be.set_schedule(schedule, seed)


def test_a_sample_is_the_first_and_last_block_and_some_drawn_from_the_seed():
    blocks = sampled_blocks(31250, 20261122)
    assert blocks[0] == 0 and blocks[-1] == 31249 and len(blocks) == SAMPLE_DRAWN + 2
    assert blocks == sampled_blocks(31250, 20261122)  # the three orders and a replay check the same blocks
    draws = {sampled_blocks(31250, seed) for seed in range(20)}
    assert len(draws) > 10  # the private seed draws other blocks than the public one
    assert sampled_blocks(3, 1) == (0, 1, 2) and sampled_blocks(1, 1) == (0,)


def test_where_blocks_are_independent_only_the_sampled_ones_run(emulator, module):
    set_up(emulator, sample="only", seed=11)
    out, error = launch(emulator, module, "mark_blocks", grid=5000, n=5000)
    assert error is None
    ran = tuple(int(b) for b in np.flatnonzero(out))
    assert ran == sampled_blocks(5000, 11)  # the check's cost does not grow with the grid
    assert all(out[b] == b + 1 for b in ran)


def test_where_blocks_wait_on_others_every_block_runs_and_the_sampled_ones_are_checked(emulator, module):
    sample = sampled_blocks(300, 5)
    inside, outside = sample[1], next(b for b in range(1, 300) if b not in sample)
    set_up(emulator, sample="all", seed=5)
    out, error = launch(emulator, module, "race_in_block", grid=300, n=inside)
    assert (out == np.arange(1, 301)).all()  # every block ran
    assert error is not None and error.kind == "race"
    assert error.findings[0].line == line_of("sampling.cu", "race_store") and error.findings[0].block == (inside, 0, 0)
    out, error = launch(emulator, module, "race_in_block", grid=300, n=outside)
    assert (out == np.arange(1, 301)).all() and error is None  # an unsampled block runs plainly
    set_up(emulator, sample=None)
    _, error = launch(emulator, module, "race_in_block", grid=300, n=outside)
    assert error is not None and error.kind == "race"  # checked whole, it is found


def test_a_sampled_block_of_independent_blocks_is_checked_for_its_first_accesses_only(emulator, module):
    """A block that alone does a launch's work (one thread scanning everything) is not checked access by
    access at every size: in a launch of sampled blocks only, each block's first SAMPLED_BLOCK_CHECKS
    accesses are checked, the rest run plainly; a launch that runs every block checks them all."""
    header = (ROOT / "grader/backends/emulator/runtime/sg_host.h").read_text()
    assert f"#define SG_SAMPLED_BLOCK_CHECKS (1u << {SAMPLED_BLOCK_CHECKS.bit_length() - 1})" in header
    line = line_of("sampling.cu", "late_race")
    for n, found in ((1000, True), (SAMPLED_BLOCK_CHECKS + 10, False)):
        set_up(emulator, sample="only")
        out, error = launch(emulator, module, "race_after_work", grid=1, n=n)
        assert out[0] == n
        assert (error is not None and error.kind == "race" and error.findings[0].line == line) == found, (n, error)
    for sample in ("all", None):  # every block runs: each is checked whole
        set_up(emulator, sample=sample)
        _, error = launch(emulator, module, "race_after_work", grid=1, n=SAMPLED_BLOCK_CHECKS + 10)
        assert error is not None and error.kind == "race" and error.findings[0].line == line, sample


def test_the_random_order_switches_at_memory_accesses_so_a_plain_increment_loses_updates(emulator, module):
    """``count += 1`` by every thread of a block: the checks report the race (both lines) in every
    order; in ascending order each thread's load and store run together and the count is exact, in
    the random order threads switch between them and updates are lost, as on a GPU."""
    line = line_of("sampling.cu", "plus_one")
    counts = {}
    for schedule in ("ascending", "random"):
        set_up(emulator, sample=None, schedule=schedule)
        out, error = launch(emulator, module, "shared_count", grid=4, n=4, block=256)
        assert error is not None and error.kind == "race" and getattr(error, "completed", False)
        race = error.findings[0]
        assert race.line == line and race.other_line == line
        counts[schedule] = out
    assert (counts["ascending"] == 256).all()
    assert (counts["random"] < 256).any(), counts["random"]
    set_up(emulator, sample=None, schedule="random", checks=False)
    out, error = launch(emulator, module, "shared_count", grid=4, n=4, block=256)
    assert error is None and (out == 256).all()  # unchecked, the random order switches at barriers only


def shipped(key: str, sizes: list[int]):
    """The shipped config (its checks_max_n, 70000) with part ``key`` graded on ``sizes`` in int32."""
    cfg = load_config(ROOT / "config.yaml").override(parts={key: {"sizes": sizes, "dtypes": ["int32"]}})
    assert cfg.emulator.checks_max_n == 70000 and all(n in load_config(ROOT / "config.yaml").parts[key].sizes
                                                       for n in sizes)
    return cfg


@pytest.mark.parametrize("key, kernel, sizes, line", [
    ("part4_any_size", "part4_race_above_checks.cu", [65537, 262143], "smem[w] += a + b;"),
    ("part5_single_pass", "part5_lookback_race_above_checks.cu", [65535, 1048575], "*window_sum += v;"),
])
def test_a_race_only_above_checks_max_n_fails_with_its_line(tmp_path, key, kernel, sizes, line):
    """The reference up to n = 70,000 and a race above it: the checked case passes, the case above
    checks_max_n fails as a race naming the line, found by the checks of its sampled blocks."""
    source = tmp_path / PARTS[key].filename
    source.write_text((BROKEN / kernel).read_text())
    number = next(i for i, text in enumerate(source.read_text().splitlines(), start=1) if text.strip() == line)
    result = grade(source, cfg=shipped(key, sizes), selection=Selection("emulator", "test"), parts=[key])
    by_n = {c.n: c for c in result.parts[0].cases}  # n = 1 is always graded too
    small, large = by_n[sizes[0]], by_n[sizes[1]]
    assert small.status == "pass" and small.checker == "emulator checks", small.message
    assert large.status == "fail" and large.kind == "race", large.message
    assert large.checker == SAMPLED_CHECKER
    assert f"{PARTS[key].filename}:{number}" in large.message and "above emulator.checks_max_n" in large.message
    assert any(f.kind == "race" and f.line == number for f in large.findings)


@pytest.mark.parametrize("key, n", [("part4_any_size", 262143), ("part5_single_pass", 1048575)])
def test_the_reference_passes_the_checks_of_sampled_blocks_and_hidden_cases_use_the_private_seed(tmp_path, key, n):
    cfg = shipped(key, [n]).override(parts={key: {"hidden_sizes": [n + 2]}}, private_seed=99)
    result = grade(SOLUTIONS / PARTS[key].filename, cfg=cfg, selection=Selection("emulator", "test"), parts=[key])
    cases = [c for c in result.parts[0].cases if c.n > 1]  # n = 1 is always graded too
    assert [(c.status, c.checker) for c in cases] == [("pass", SAMPLED_CHECKER)] * 2, [c.message for c in cases]
    assert cases[1].visibility == "hidden" and cases[1].seed == 99
