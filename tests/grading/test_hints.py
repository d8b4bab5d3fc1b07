"""Hints checked against causes (issue 20): a hint fires only where no finding explains what it
describes better. Each hint is tried on a kernel where it is right and on one where it would be
wrong: the partial-tile hint (the bounds, or a race), the advice for a race between blocks (a fence
and a flag, or a __syncthreads() before publishing: tests/backends/test_emulator_checks.py), the operator
precedence advice for shifts (a sum in the amount, or a lane mask: tests/backends/test_emulator_shifts.py).

Where the first wrong element sits in tile terms (issue 34): a tile off by one amount throughout
(its offset: Part 4's second level, Part 5's tiles before), the last tile when full, the first tile;
each where it is right and where it must not fire. The part's pattern of sizes: tests/render/test_size_patterns.py."""

from __future__ import annotations

import numpy as np

from grader.backends import Selection
from grader.assignment.config import load_config
from grader.grading.case.checks import (FIRST_TILE, FULL_LAST_TILE, PARTIAL_TILE, TILE_OFFSET, diagnose,
                                        explain_tile_hint)
from grader.grading.case.run import _WordedFinding
from grader.core.results import CaseFinding
from grader.grading.runner import grade
from reference.scan import exclusive_scan
from tests.conftest import BROKEN, VERDICTS


EMULATOR = Selection("emulator", "test")


def _part4(tmp_path, file: str, n: int, block_size: int = 128):
    path = tmp_path / "config.yaml"
    path.write_text(f"block_size: {block_size}\nseed: 7\nparts:\n  part4_any_size:\n    points_per_case: 1\n"
                    f"    dtypes: [int32]\n    sizes: [{n}]\n")
    result = grade(BROKEN / file, cfg=load_config(path), selection=EMULATOR, parts=["part4_any_size"])
    return next(c for c in result.parts[0].cases if c.n == n)


def test_the_partial_tile_hint_sends_a_bounds_bug_to_the_bounds(tmp_path):
    c = _part4(tmp_path, "part4_offsets_off_by_one.cu", 300)
    assert [f.kind for f in c.findings] == ["mismatch"]
    assert c.mismatch.hint == (f"{PARTIAL_TILE} (tile 1, elements 256 to 299; a tile is 256 elements): check the "
                               "bounds for n = 300, which is not a multiple of 256")
    assert c.message.endswith(c.mismatch.hint)


def test_the_partial_tile_hint_names_the_race_that_explains_it(tmp_path):
    c = _part4(tmp_path, "part4_partial_tile_race.cu", 300)
    assert [f.kind for f in c.findings] == ["race", "mismatch"], c.findings
    race = c.findings[0]
    assert c.mismatch.hint == (f"{PARTIAL_TILE} (tile 1, elements 256 to 299; a tile is 256 elements), which the "
                               f"race above ({race.file}:{race.line}) explains")
    assert "check the bounds" not in c.findings[1].message and c.findings[1].message.endswith(c.mismatch.hint)


def test_an_unchecked_case_takes_the_race_of_a_smaller_case_as_the_cause():
    x = np.ones(300, dtype=np.int32)
    got = exclusive_scan(x).astype(np.int32)
    got[-1] += 1
    mm = diagnose(got, exclusive_scan(x), source=x, inclusive=False, tile=256)
    told = [_WordedFinding(CaseFinding("mismatch", f"out[299] ... — {mm.hint}"), f"out[299] ... — {mm.hint}")]
    race = CaseFinding("race", "race ...", "part4_any_size.cu", 31, (1, 0, 0), (1, 0, 0))
    same, kept = explain_tile_hint(told, mm, 300, 256, ())  # nothing explains it: the bounds
    assert kept is mm and same == told
    told2, mm2 = explain_tile_hint(told, mm, 300, 256, (CaseFinding("mismatch", "m"), race))
    assert mm2.hint.endswith("which the race at part4_any_size.cu:31, found in a smaller case of this part, "
                             "probably explains")
    assert told2[0].finding.message.endswith(mm2.hint) and "check the bounds" not in told2[0].text


def test_a_wrong_second_level_is_named_where_tile_0_would_be_blamed(tmp_path):
    # n = 262143, tile 512: 512 tiles, whose 512 tile sums fill one full tile at the second level,
    # which the last block takes as empty: every offset is 0, every tile from 1 on is its own scan
    c = _part4(tmp_path, "part4_full_last_tile_empty.cu", 262143, block_size=256)
    assert [f.kind for f in c.findings] == ["mismatch"] and c.mismatch.index == 512
    assert c.mismatch.hint.startswith(f"{TILE_OFFSET} 1 of 512 is off by the same amount, {-c.mismatch.expected}, "
                                      "and every wrong tile after it (510) is likewise off by one amount throughout")
    assert c.mismatch.hint.endswith("the offset added to each is wrong; it comes from the scan of the 512 tile sums at "
                                    "the second level, where they fill exactly 1 full tile; every such offset is 0, "
                                    "as if none was added")
    assert "tile 1 of 512 (elements from 512), element 0 of it" in c.message and "never written" not in c.message


def test_a_full_last_tile_is_named_where_its_errors_vary(tmp_path):
    c = _part4(tmp_path, "part4_full_last_tile_empty.cu", 1024, block_size=256)  # the same bug, at the first level
    assert c.mismatch.hint == (f"{FULL_LAST_TILE} (tile 1, elements 512 to 1023; a tile is 512 elements): check what "
                               "the last block does when n = 1024 is a multiple of 512, so that its tile is full")
    assert TILE_OFFSET not in c.message  # the tile's errors vary: no offset is to blame


def test_an_offset_hint_gives_way_to_the_finding_that_explains_it(tmp_path):
    # the second level's 5 tile sums are a partial tile whose unwritten shared memory is read: tile 1's
    # offset is wrong because of that read, not of anything the hint would send the student to
    c = _part4(tmp_path, VERDICTS / "part4_unwritten_used.cu", 2049, block_size=256)
    mm = c.mismatch
    assert mm is not None and mm.hint.startswith(f"{TILE_OFFSET} 1 of 5")
    assert "which the uninitialized-read above" in mm.hint
    assert "scanned right" not in mm.hint


def _wrong_at(n: int, tile: int, change) -> object:
    x = np.arange(n, dtype=np.int32) % 7 - 3
    expected = exclusive_scan(x)
    got = expected.astype(np.int32).copy()
    change(got)
    return diagnose(got, expected, source=x, inclusive=False, tile=tile)


def test_each_tile_hint_fires_only_at_its_own_place():
    def element(i, by=1):
        return lambda got: got.__setitem__(i, got[i] + by)

    def span(a, b, by=5):
        return lambda got: got.__setitem__(slice(a, b), got[a:b] + by)

    assert _wrong_at(1100, 512, element(5)).hint.startswith(f"{FIRST_TILE} (tile 0 of 3, from element 5)")
    assert _wrong_at(1100, 512, span(0, 512)).hint.startswith(f"{TILE_OFFSET} 0 of 3")  # an offset, not the scan
    assert _wrong_at(512, 512, element(5)).hint is None  # one tile: nothing to single out
    assert _wrong_at(1100, 512, element(600)).hint is None  # a middle tile, errors varying: nothing sure to say
    assert _wrong_at(1100, 512, span(512, 1024)).hint.startswith(f"{TILE_OFFSET} 1 of 3 is off by the same amount, "
                                                                  "5:")
    assert _wrong_at(1100, 512, span(600, 1024)).hint is None  # part of a tile: not its offset
    assert _wrong_at(1024, 512, element(1000)).hint.startswith(FULL_LAST_TILE)
    assert _wrong_at(1100, 512, element(1099)).hint.startswith(PARTIAL_TILE)  # one element: no offset to tell
    assert _wrong_at(1100, 512, span(1024, 1100)).hint.startswith(f"{TILE_OFFSET} 2 of 3")
    both = _wrong_at(1100, 512, lambda got: (span(512, 1024)(got), span(1024, 1100, 9)(got)))
    assert "and every wrong tile after it (1) is likewise" in both.hint and "every such offset is 0" not in both.hint
    varying = _wrong_at(1100, 512, lambda got: (span(512, 1024)(got), element(1030)(got)))
    assert "after it" not in varying.hint and varying.hint.startswith(f"{TILE_OFFSET} 1 of 3")


def test_an_offset_hint_names_where_the_offsets_come_from():
    x = np.ones(1100, dtype=np.int32)
    expected = exclusive_scan(x)  # 0, 1, 2, ...: tile t's offset is 512·t
    got = expected.astype(np.int32).copy()
    got[512:1024] -= 512
    got[1024:] -= 1024  # every tile its own scan, no offset added
    two_levels = diagnose(got, expected, source=x, inclusive=False, tile=512, hierarchical=True)
    assert two_levels.hint.endswith("it comes from the scan of the 3 tile sums at the second level, where they make "
                                    "one partial tile (3 of 512); every such offset is 0, as if none was added")
    look_back = diagnose(got, expected, source=x, inclusive=False, tile=512)
    assert "it is the sum of the tiles before" in look_back.hint and "second level" not in look_back.hint


def test_a_race_explains_a_full_last_tile_as_it_does_a_partial_one():
    mm = _wrong_at(1024, 512, lambda got: got.__setitem__(1000, got[1000] + 1))
    told = [_WordedFinding(CaseFinding("mismatch", f"out[1000] ... — {mm.hint}"), f"out[1000] ... — {mm.hint}")]
    race = CaseFinding("race", "race ...", "part4_any_size.cu", 31, (1, 0, 0), (1, 0, 0))
    told2, mm2 = explain_tile_hint(told + [_WordedFinding(race, "race ...")], mm, 1024, 512, ())
    assert mm2.hint == (f"{FULL_LAST_TILE} (tile 1, elements 512 to 1023; a tile is 512 elements), which the race "
                        "above (part4_any_size.cu:31) explains")
    assert told2[0].finding.message.endswith(mm2.hint) and "check what the last block" not in told2[0].text


def test_an_offset_hint_allows_a_fractional_case_its_rounding():
    x = np.random.default_rng(1).random(2000).astype(np.float32)  # fractional: compared within a bound
    expected = np.concatenate([[0], np.cumsum(x.astype(np.float64))[:-1]])
    scan = np.concatenate([[0], np.cumsum(x[:-1], dtype=np.float32)]).astype(np.float32)  # rounded, and right

    def hint(got):
        return diagnose(got, expected, source=x, inclusive=False, tile=512, depth=1024, hierarchical=True).hint

    off = scan.copy()
    off[512:1024] -= 3
    assert hint(off).startswith(f"{TILE_OFFSET} 1 of 4 is off by the same amount, about -3:")
    truncated = scan.copy()
    truncated[512:1024] = np.trunc(truncated[512:1024])  # errors of up to 1 that vary: no offset to blame
    assert hint(truncated) is None
