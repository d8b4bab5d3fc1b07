"""The poison every output and guard word holds before a launch (grader.assignment.plans.POISON_BITS) is one
that arithmetic changes: a stray ``out[i] += off`` past the end shows in the guard zone's bits for
float32 as for int32, also above the checks' limit, where only the guard zones tell."""

from __future__ import annotations

import numpy as np
import pytest

from grader.backends import Selection
from grader.assignment.config import load_config
from grader.assignment.plans import POISON_BITS
from grader.grading.runner import grade
from tests.conftest import BROKEN, write_config

#: Magnitudes a scan produces: from float32's smallest input step (2**-24) to 1e9.
MAGNITUDES = [2.0**-24, 1e-7, 3e-5, 1e-3, 0.5, 1.0, 7.0, 1e3, 65504.0, 1e6, 2.0**24 + 3, 1e9]


def changes(poison_bits: int, dtype: np.dtype, v: float) -> bool:
    """Whether poison + v and poison - v both differ from the poison in bits (in ``dtype``)."""
    poison = np.array([poison_bits], dtype=np.uint32).view(dtype)
    value = np.array([v], dtype=dtype)
    with np.errstate(over="ignore"):
        results = [(poison + value).view(np.uint32)[0], (poison - value).view(np.uint32)[0]]
    return all(int(r) != poison_bits for r in results)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_adding_or_subtracting_a_scan_value_changes_the_poison(dtype) -> None:
    dtype = np.dtype(dtype)
    values = MAGNITUDES if dtype.kind == "f" else sorted({max(1, int(m)) for m in MAGNITUDES})
    for v in values:
        assert changes(POISON_BITS, dtype, v), (dtype, v)
    # the old poison, 0x7F7F7F7F (3.39e38 as float32), did not: a small += off rounds back to it
    if dtype.kind == "f":
        assert not changes(0x7F7F7F7F, dtype, 1e3)


def test_the_poison_is_implausible_and_no_nan() -> None:
    f = np.array([POISON_BITS], dtype=np.uint32).view(np.float32)[0]
    i = np.array([POISON_BITS], dtype=np.uint32).view(np.int32)[0]
    assert np.isfinite(f) and f != 0 and abs(f) >= np.finfo(np.float32).tiny  # no NaN, no denormal
    assert f < 0  # no scan of the fractional float inputs in [0, 1) is negative
    assert f / 0.25 != round(f / 0.25)  # no scan of the exact float inputs (multiples of 0.25)
    assert abs(f) > 0.1  # far from the tolerance of an expected 0 (an unwritten out[0] of an exclusive scan)
    assert abs(int(i)) > 2**28  # far from small sums of the int inputs


def test_an_unbounded_offset_add_fails_float32_above_the_checks_limit(tmp_path) -> None:
    """Part 4 with ``out[i] += off`` and no bound on n, graded without the checks (``--no-checks``;
    above emulator.checks_max_n a GPU's run is the same: only sampled blocks are checked): only the
    guard zone after out shows the write, and only if the addition changes the poison's float32 bits."""
    path = write_config(tmp_path, block_size=32, sizes={"part4_any_size": [70001]})  # tiles of 64: fast
    path.write_text(path.read_text().replace("sizes: [70001]", "sizes: [70001]\n    dtypes: [float32]"))
    cfg = load_config(path)
    assert 70001 > cfg.emulator.checks_max_n and cfg.parts["part4_any_size"].dtypes == ("float32",)
    source = tmp_path / "part4_any_size.cu"
    source.write_text((BROKEN / "part4_unbounded_offsets.cu").read_text())
    result = grade(source, cfg=cfg, selection=Selection("emulator", "test"), parts=["part4_any_size"], checks=False)
    cases = {(c.n, c.dtype): c for c in result.parts[0].cases}
    case = cases[(70001, "float32")]
    assert case.status == "fail", case.message
    assert "out-of-bounds write" in case.message and "past the end of out" in case.message, case.message


def test_the_same_unbounded_add_is_found_by_the_sampled_checks_above_the_checks_limit(tmp_path) -> None:
    """With the checks on, the last block of each launch is among the sampled ones above
    emulator.checks_max_n: the write past out is an out-of-bounds finding, whatever the poison."""
    path = write_config(tmp_path, block_size=32, sizes={"part4_any_size": [70001]})
    cfg = load_config(path)
    source = tmp_path / "part4_any_size.cu"
    source.write_text((BROKEN / "part4_unbounded_offsets.cu").read_text())
    result = grade(source, cfg=cfg, selection=Selection("emulator", "test"), parts=["part4_any_size"])
    case = next(c for c in result.parts[0].cases if c.n == 70001)
    assert case.status == "fail" and case.kind == "out-of-bounds", case.message
    assert case.checker and "sampled" in case.checker, case.checker
