"""Hints checked against causes (issue 20): a hint fires only where no finding explains what it
describes better. Each hint is tried on a kernel where it is right and on one where it would be
wrong: the partial-tile hint (the bounds, or a race), the advice for a race between blocks (a fence
and a flag, or a __syncthreads() before publishing: tests/test_emulator_checks.py), the operator
precedence advice for shifts (a sum in the amount, or a lane mask: tests/test_emulator_shifts.py)."""

from __future__ import annotations

import numpy as np

from grader.backends import Selection
from grader.config import load_config
from grader.execute import PARTIAL_TILE, _explained, _Told, diagnose
from grader.results import CaseFinding
from grader.runner import grade
from reference.scan import exclusive_scan
from tests.conftest import BROKEN

EMULATOR = Selection("emulator", "test")


def _part4(tmp_path, file: str, n: int):
    path = tmp_path / "config.yaml"
    path.write_text(f"block_size: 128\nseed: 7\nparts:\n  part4_any_size:\n    points_per_case: 1\n    sizes: [{n}]\n")
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
    told = [_Told(CaseFinding("mismatch", f"out[299] ... — {mm.hint}"), f"out[299] ... — {mm.hint}")]
    race = CaseFinding("race", "race ...", "part4_any_size.cu", 31, (1, 0, 0), (1, 0, 0))
    same, kept = _explained(told, mm, 300, 256, ())  # nothing explains it: the bounds
    assert kept is mm and same == told
    told2, mm2 = _explained(told, mm, 300, 256, (CaseFinding("mismatch", "m"), race))
    assert mm2.hint.endswith("which the race at part4_any_size.cu:31, found in a smaller case of this part, "
                             "probably explains")
    assert told2[0].finding.message.endswith(mm2.hint) and "check the bounds" not in told2[0].text
