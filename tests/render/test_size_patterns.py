"""Which sizes give wrong values (issue 34): a part's pattern against powers of two and its tile
(grader.render._patterns), on case results built by hand, each rule where it is right and where a
single size breaks it; then once through a grade of a broken Part 4 on the emulator and every
renderer that shows it.

The failing sizes are written out, not derived from the rules: those of
tests/kernels/part4_full_last_tile_empty.cu (``count = n % TILE``) are the sizes with a full last
tile at some level, worked by hand from the shipped Part 4 sizes (tile 512)."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET

import pytest

from grader.backends import Selection
from grader.assignment.config import load_config
from grader.render import gradescope, junit_xml, markdown, render_text
from grader.render._patterns import size_pattern, split_sizes
from grader.core.results import CaseResult, PartResult, SubmissionResult
from grader.grading.runner import grade
from tests.conftest import BROKEN, ROOT

PART4_SIZES = load_config(ROOT / "config.yaml").parts["part4_any_size"].sizes
TILE = 512  # Part 4 at the shipped block size 256
#: The shipped sizes at which a full last tile is taken as empty: n a multiple of 512, or 262143 and
#: 1048575, whose 512 and 2048 tile sums are a multiple of 512 at the second level.
FULL_LAST_TILE_FAILS = (512, 1024, 2048, 65536, 262143, 262144, 1048575, 1048576, 16000000)


def _case(n: int, status: str = "pass", kind: str | None = None, dtype: str = "int32", **kw) -> CaseResult:
    return CaseResult(name=f"n={n} {dtype}", n=n, dtype=dtype, seed=1, status=status,
                      points=1.0 if status == "pass" else 0.0, max_points=1.0, kind=kind, **kw)


def _part(failing, sizes=PART4_SIZES, key="part4_any_size", number=4, block_size=256, extra=()) -> PartResult:
    cases = tuple(_case(n, "fail", "mismatch") if n in failing else _case(n) for n in sizes)
    return PartResult(key=key, number=number, title="t", file=f"{key}.cu", status="fail" if failing else "pass",
                      cases=cases + tuple(extra), block_size=block_size)


def test_the_shipped_sizes_tell_the_rules_apart():
    assert {1, 2, 511, 512, 513, 262143, 262144, 262145, 16000000} <= set(PART4_SIZES)


def test_not_powers_of_two():
    failing = [n for n in PART4_SIZES if n & (n - 1)]
    assert size_pattern(_part(failing)).startswith("the passing sizes are exactly the powers of two")
    assert size_pattern(_part(failing + [1024])) is None  # a power of two fails too
    assert size_pattern(_part([n for n in failing if n != 513])) is None  # a size that is not one passes


def test_no_rule_is_said_that_a_dtype_s_passing_size_breaks():
    """int32 fails at every n that is not a power of two, float32 passes at n = 33: 'the passing sizes are
    exactly the powers of two' would contradict the part's PASS line for float32 n = 33 (issue 52)."""
    failing = [n for n in PART4_SIZES if n & (n - 1)]
    assert size_pattern(_part(failing)) is not None
    f32 = tuple(_case(n, dtype="float32") if n == 513 else _case(n, "fail", "mismatch", dtype="float32")
                for n in failing)
    assert size_pattern(_part(failing, extra=f32)) is None


def test_multiples_of_the_tile():
    failing = [512, 1024, 2048, 65536, 262144, 1048576, 16000000]
    assert size_pattern(_part(failing)).startswith("every failing n is a multiple of the 512-element tile, and no "
                                                   "passing n is")
    assert "multiple of the 512" not in (size_pattern(_part(failing[:-1])) or "")  # 16000000 = 31250·512 passes
    assert size_pattern(_part(failing + [513])) is None


def test_a_full_last_tile_at_some_level():
    said = size_pattern(_part(FULL_LAST_TILE_FAILS))
    assert said.startswith("every failing n has a full last tile at some level of the hierarchy")
    assert "(n = 262143: 512 tile sums at level 2, 1 full tile)" in said
    assert size_pattern(_part([n for n in FULL_LAST_TILE_FAILS if n != 262143])) is None  # 262143 passing breaks it
    assert size_pattern(_part(FULL_LAST_TILE_FAILS + (262145,))) is None  # 513 tile sums: no full tile anywhere
    # Part 5 has no levels of tile sums: the same sizes fit no rule there
    part5 = _part(FULL_LAST_TILE_FAILS, key="part5_single_pass", number=5, block_size=128)
    assert size_pattern(part5) is None  # without its items a thread (a result saved before), no tile: no rule
    assert size_pattern(dataclasses.replace(part5, items_per_thread=1)) is None  # tile 128: no levels, no rule


def test_a_partial_last_tile():
    failing = [n for n in PART4_SIZES if n > TILE and n % TILE]
    assert size_pattern(_part(failing)).startswith("every failing n has a partial last tile (above one tile, not a "
                                                   "multiple of 512)")
    assert size_pattern(_part(failing + [511])) is None  # one tile, partial, failing too: not the last-tile bounds


def test_above_one_tile_and_above_two_levels():
    assert size_pattern(_part([n for n in PART4_SIZES if n > TILE])).startswith(
        "every n above one tile (512 elements) fails, and every n up to one tile passes")
    assert size_pattern(_part([n for n in PART4_SIZES if n >= TILE])) is None  # n = 512 is one tile
    assert size_pattern(_part([n for n in PART4_SIZES if n > TILE * TILE])).startswith(
        "every n that needs three or more levels of tile sums (n above 512² = 262144) fails")
    assert size_pattern(_part([n for n in PART4_SIZES if n >= TILE * TILE])) is None


def test_no_pattern_from_too_few_sizes_other_failures_or_no_tile():
    assert size_pattern(_part([1048575, 16000000])) is None  # two failing sizes, no rule
    assert size_pattern(_part([513])) is None  # one failing size is no pattern
    assert size_pattern(_part([513, 1025], sizes=(1, 513, 1025))) is None  # one passing size
    failing = [512, 1024, 2048, 65536, 262144, 1048576, 16000000]
    raced = _part(failing, extra=(_case(777, "fail", "race"), _case(778, "timeout", "timeout")))
    assert split_sizes(raced)[0] == failing and 777 not in split_sizes(raced)[1]  # neither failing nor passing
    assert size_pattern(raced) is not None
    hidden = _part(failing, extra=(_case(0, "fail", visibility="hidden"),))  # a student's view: no size
    assert split_sizes(hidden) == split_sizes(_part(failing))
    # a one-block part has no tile: only the powers of two can be told
    part2 = _part([512, 1024], sizes=(1, 2, 33, 512, 777, 1024), key="part2_blelloch", number=2, block_size=512)
    assert size_pattern(part2) is None
    assert size_pattern(_part([33, 777], sizes=(1, 2, 33, 512, 777, 1024), key="part2_blelloch", number=2,
                              block_size=512)).startswith("the passing sizes are exactly the powers of two")


def test_a_size_fails_where_any_dtype_gives_wrong_values():
    failing = [512, 1024, 2048, 65536, 262144, 1048576, 16000000]
    floats = tuple(_case(n, "fail", "mismatch", dtype="float32") for n in (1024,))
    part = _part([n for n in failing if n != 1024], extra=floats)
    assert 1024 in split_sizes(part)[0] and 1024 not in split_sizes(part)[1]


def _submission(part: PartResult) -> SubmissionResult:
    return SubmissionResult(submission="sub", backend="emulator", backend_reason="test", device={}, config="c.yaml",
                            backend_times_kernels=False, backend_uses_gpus=False,  # the emulator's traits
                            seed=1, block_size=512, parts=(part,), scangrade_version="0", started_at="",
                            elapsed_s=1.0)


def test_every_report_tells_the_pattern_once(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("block_size: 256\nseed: 7\nparts:\n  part4_any_size:\n    points_per_case: 1\n"
                    "    dtypes: [int32, float32]\n    sizes: [1, 2, 511, 512, 513, 1024, 1025]\n")
    result = grade(BROKEN / "part4_full_last_tile_empty.cu", cfg=load_config(path),
                   selection=Selection("emulator", "test"), parts=["part4_any_size"])
    part = result.parts[0]
    assert split_sizes(part) == ([512, 1024], [1, 2, 511, 513, 1025])
    said = size_pattern(part)
    assert said.startswith("every failing n is a multiple of the 512-element tile")
    text = render_text(result)
    assert text.count("PATTERN of the wrong values: every failing n is a multiple of the 512") == 1
    assert markdown(result).count("**Pattern of the wrong values:** every failing n is a multiple") == 1
    outputs = [t.get("output", "") for t in gradescope(result)["tests"]]
    assert sum("pattern of the wrong values, every dtype of the part: every failing n" in o for o in outputs) == 1
    props = {p.get("name"): p.get("value") for p in ET.fromstring(junit_xml(result)).iter("property")}
    assert props["wrong_values_pattern"] == said
    passing = _submission(_part([]))
    assert "PATTERN" not in render_text(passing) and "Pattern" not in markdown(passing)
    assert "pattern" not in json.dumps(gradescope(passing))


def test_part5_tells_its_own_tile():
    pc5 = load_config(ROOT / "config.yaml").parts["part5_single_pass"]
    tile = pc5.block_size * pc5.items_per_thread
    failing = [n for n in pc5.sizes if n % tile == 0]
    part5 = _part(failing, sizes=pc5.sizes, key="part5_single_pass", number=5, block_size=pc5.block_size)
    said = size_pattern(dataclasses.replace(part5, items_per_thread=pc5.items_per_thread))
    assert said.startswith(f"every failing n is a multiple of the {tile}-element tile")
