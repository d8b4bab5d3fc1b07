"""float32 checked as strictly as int32 where it can be (issue 34).

The exact cases draw multiples of 0.25 in [-4, 4]: every sum is exact in float32, so every order of
addition gives the reference, and the output is compared exactly. The fractional cases (a part's
``fractional_sizes``) draw [0, 1) and allow each element the rounding of its own prefix of |in|
(grader.grading.case.checks.error_bound). tests/kernels/part4_full_last_tile_empty.cu, a Part 4 whose last
block takes a full last tile as empty (``count = n % TILE``), must fail float32 at every size where
it fails int32, 16,000,000 included; the reference solutions must still pass both kinds of case."""

from __future__ import annotations

import numpy as np
import pytest

from grader.backends import Selection
from grader.assignment.config import ConfigError, load_config
from grader.grading.case.cases import case_list
from grader.grading.case.checks import diagnose, error_bound
from grader.grading.case.inputs import FLOAT_BOUND, FLOAT_STEP, make_input, reference_output, sums_are_exact
from grader.assignment.parts import PARTS
from grader.grading.runner import grade
from tests.conftest import BROKEN, ROOT, SOLUTIONS

EMULATOR = Selection("emulator", "test")
PART4 = PARTS["part4_any_size"]
FULL_LAST_TILE = BROKEN / "part4_full_last_tile_empty.cu"


def _config(tmp_path, body: str, name: str = "config.yaml"):
    path = tmp_path / name
    path.write_text(body)
    return load_config(path)


def _part4_config(tmp_path, sizes, dtypes="[int32, float32]", fractional="[]"):
    return _config(tmp_path, f"block_size: 256\nseed: 11\nparts:\n  part4_any_size:\n    points_per_case: 1\n"
                             f"    dtypes: {dtypes}\n    sizes: {sizes}\n    fractional_sizes: {fractional}\n")


def test_exact_inputs_give_the_reference_in_every_order_of_addition():
    cfg = load_config(ROOT / "config.yaml")
    x = make_input(cfg, PART4, 1 << 20, 5, np.float32)
    assert np.all(np.abs(x) <= FLOAT_BOUND) and np.array_equal(x / FLOAT_STEP, np.rint(x / FLOAT_STEP))
    expected = reference_output(PART4, x)
    assert sums_are_exact(x, expected, inclusive=False)
    assert error_bound(expected, source=x, inclusive=False, depth=1536) is None
    sequential = np.concatenate([[0], np.cumsum(x[:-1], dtype=np.float32)])
    tiles = x.reshape(-1, 512)  # tile by tile, then the tiles' offsets: another order, the same bits
    local = np.cumsum(tiles, axis=1, dtype=np.float32) - tiles
    offsets = np.concatenate([[0], np.cumsum(tiles.sum(axis=1, dtype=np.float32)[:-1], dtype=np.float32)])
    hierarchical = (local + offsets[:, None].astype(np.float32)).ravel()
    for got in (sequential, hierarchical):
        assert diagnose(got.astype(np.float32), expected, source=x, inclusive=False, tile=512) is None
    off = sequential.astype(np.float32)
    off[-3] += FLOAT_STEP  # one step off: an exact case sees it
    mm = diagnose(off, expected, source=x, inclusive=False, tile=512)
    assert mm is not None and mm.index == x.size - 3 and mm.allowed is None


def test_fractional_inputs_get_a_bound_per_element_and_a_truncation_fails():
    cfg = load_config(ROOT / "config.yaml")
    x = make_input(cfg, PART4, 65537, 5, np.float32, fractional=True)
    assert x.min() >= 0 and x.max() < 1 and not np.array_equal(x, np.rint(x))
    expected = reference_output(PART4, x)
    depth = PART4.addition_depth(cfg.parts["part4_any_size"], x.size)
    tol = error_bound(expected, source=x, inclusive=False, depth=depth)
    assert tol is not None and tol[0] == 0 and np.all(np.diff(tol) >= 0)  # each element's own prefix of |in|
    scan = np.concatenate([[0], np.cumsum(x[:-1], dtype=np.float32)])
    assert diagnose(scan, expected, source=x, inclusive=False, tile=512, depth=depth) is None
    truncated = np.trunc(scan)  # a float sum stored through an int
    assert diagnose(truncated, expected, source=x, inclusive=False, tile=512, depth=depth) is not None
    early = scan.copy()
    early[700] += 0.5  # small beside the array's total, large beside the first tiles' sums: wrong
    assert diagnose(early, expected, source=x, inclusive=False, tile=512, depth=depth).index == 700


def test_the_addition_depth_is_the_contracts_longest_chain():
    cfg = load_config(ROOT / "config.yaml")
    pc4, pc5 = cfg.parts["part4_any_size"], cfg.parts["part5_single_pass"]
    assert PARTS["part2_blelloch"].addition_depth(cfg.parts["part2_blelloch"], 1024) == 1023  # one thread's loop
    assert PART4.addition_depth(pc4, 513) == 513 and PART4.addition_depth(pc4, 16_000_000) == 3 * 512  # 3 levels
    assert PARTS["part5_single_pass"].addition_depth(pc5, 16_000_000) == 5632 + 2841  # a tile + a serial look-back


def test_float_rtol_is_refused_with_what_replaced_it(tmp_path):
    with pytest.raises(ConfigError) as err:
        _config(tmp_path, "seed: 1\nfloat_rtol: 1.0e-6\nparts:\n  part1_naive:\n    sizes: [3]\n")
    assert err.value.key == "float_rtol" and err.value.line == 2
    assert "no longer used" in str(err.value) and "fractional_sizes" in str(err.value)


def test_case_names_say_which_float32_cases_are_exact_and_which_fractional(tmp_path):
    cfg = _part4_config(tmp_path, "[512]", fractional="[1025]")
    assert [(c.name, c.fractional) for c in case_list(cfg, "part4_any_size")] == [
        ("n=1 int32", False), ("n=512 int32", False), ("n=1 float32 exact", False),
        ("n=512 float32 exact", False), ("n=1025 float32 fractional", True)]
    with pytest.raises(ConfigError, match="fractional_sizes"):
        _part4_config(tmp_path, "[512]", fractional="[0]")


def _failing(result) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {"int32": set(), "float32": set()}
    for c in result.parts[0].cases:
        if c.status != "pass":
            out[c.dtype].add(c.n)
    return out


def test_a_full_last_tile_taken_as_empty_fails_float32_wherever_it_fails_int32(tmp_path):
    sizes = [1, 511, 512, 513, 1024, 1025, 262143, 262144]
    result = grade(FULL_LAST_TILE, cfg=_part4_config(tmp_path, sizes), selection=EMULATOR, parts=["part4_any_size"])
    failing = _failing(result)
    # the multiples of the 512-element tile, and 262143, whose 512 tile sums fill the second level's tile
    assert failing["int32"] == {512, 1024, 262143, 262144}
    assert failing["float32"] == failing["int32"]


def test_a_full_last_tile_taken_as_empty_fails_float32_at_16000000(tmp_path):
    # Above emulator.checks_max_n; without the checks, one plain run of every block judges the output.
    cfg = _part4_config(tmp_path, "[16000000]", dtypes="[float32]")
    result = grade(FULL_LAST_TILE, cfg=cfg, selection=EMULATOR, parts=["part4_any_size"], checks=False)
    case = next(c for c in result.parts[0].cases if c.n == 16_000_000)
    assert case.status == "fail" and case.kind == "mismatch", case.message
    assert case.mismatch.first_wrong_tile == 16_000_000 - 512 and case.mismatch.allowed is None
    assert "compared exactly" in case.message


def test_the_reference_solutions_pass_exact_and_fractional_float32(tmp_path):
    body = "seed: 3\nparts:\n"
    for key, sizes, fractional in (("part1_naive", "[33, 512]", "[500]"), ("part2_blelloch", "[777, 1024]", "[1000]"),
                                   ("part3_conflict_free", "[777, 1024]", "[1000]"),
                                   ("part4_any_size", "[513, 2048, 262145]", "[65537]"),
                                   ("part5_single_pass", "[5633, 65537]", "[11265]")):
        body += (f"  {key}:\n    points_per_case: 1\n    dtypes: [float32]\n    sizes: {sizes}\n"
                 f"    fractional_sizes: {fractional}\n")
        if key == "part5_single_pass":
            body += "    block_size: 128\n    items_per_thread: 44\n"
    result = grade(SOLUTIONS, cfg=_config(tmp_path, body), selection=EMULATOR)
    names = {c.name for p in result.parts for c in p.cases}
    assert {"n=1000 float32 fractional", "n=2048 float32 exact"} <= names
    assert [(c.name, c.message) for p in result.parts for c in p.cases if c.status != "pass"] == []
