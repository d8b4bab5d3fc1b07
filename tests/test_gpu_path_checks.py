"""What the GPU path takes from the emulator's checks (grader.worker.unseen_by_sanitizer): the
findings compute-sanitizer cannot make, so the same file gets the same verdict on a GPU as on the
emulator. Runs on the CPU: the emulator's real findings on kernels of tests/, and the GPU path's
merge of them into a case (grader.execute.run_case with a grader.sanitizer.CaseChecks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.backends import Selection
from grader.config import load_config
from grader.execute import case_list, run_case
from grader.parts import PARTS
from grader.runner import grade
from grader.sanitizer import CaseChecks
from grader.worker import unseen_by_sanitizer
from tests.conftest import BROKEN

VERDICTS = Path(__file__).parent / "verdicts"


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "config.yaml"
    path.write_text("block_size: 64\nseed: 7\nparts:\n"
                    "  part5_single_pass:\n    block_size: 64\n    items_per_thread: 4\n    points_per_case: 1\n"
                    "    dtypes: [int32]\n    sizes: [1000]\n")
    return load_config(path)


@pytest.fixture(scope="module")
def verdicts_cfg():
    return load_config(VERDICTS / "config.yaml")


def emulator_findings(cfg, source: Path, part: str):
    """The findings of the first failing case of ``source`` graded on the emulator."""
    (result,) = grade(source, cfg=cfg, selection=Selection("emulator", "test"), parts=[part]).parts
    case = next(c for c in result.cases if c.status == "fail")
    return case.findings


def test_a_missing_fence_between_blocks_is_taken(cfg):
    found = unseen_by_sanitizer(emulator_findings(cfg, BROKEN / "part5_missing_fence.cu", "part5_single_pass"))
    assert [f.kind for f in found] == ["race"] and "(memory order)" in found[0].message
    assert found[0].file == "part5_single_pass.cu" and found[0].line is not None


def test_an_overrun_inside_the_blocks_shared_memory_is_taken(verdicts_cfg):
    found = unseen_by_sanitizer(emulator_findings(verdicts_cfg, VERDICTS / "part2_shared_overrun.cu", "part2_blelloch"))
    assert [f.kind for f in found] == ["out-of-bounds"] and "shared array temp" in found[0].message


def test_a_race_in_shared_memory_is_left_to_racecheck(verdicts_cfg):
    findings = emulator_findings(verdicts_cfg, VERDICTS / "part1_missing_barrier.cu", "part1_naive")
    assert findings and unseen_by_sanitizer(findings) == []


def test_a_read_past_n_is_taken_where_memcheck_may_miss_it(verdicts_cfg):
    """memcheck passed a read of in[n] at n = 128 and 256 on an H100 (part1_le_n_guard.cu); where it
    sees one too, the case tells it once (the next test)."""
    found = unseen_by_sanitizer(emulator_findings(verdicts_cfg, VERDICTS / "part2_read_past_n.cu", "part2_blelloch"))
    assert [f.kind for f in found] == ["out-of-bounds"] and "in[" in found[0].message


def test_a_deadlock_is_left_to_the_gpus_deadline(verdicts_cfg):
    findings = emulator_findings(verdicts_cfg, BROKEN / "part1_hang.cu", "part1_naive")
    assert [f.kind for f in findings] == ["deadlock"] and unseen_by_sanitizer(findings) == []


def test_a_case_fails_on_the_emulators_finding_alone_and_says_who_found_it(cfg):
    part = PARTS["part5_single_pass"]
    case = case_list(cfg, part.key)[0]
    extra = unseen_by_sanitizer(emulator_findings(cfg, BROKEN / "part5_missing_fence.cu", "part5_single_pass"))
    result = run_case(None, None, cfg=cfg, part=part, case=case, checked=CaseChecks([], True, ["memcheck"], emulator=extra),
                      checker="compute-sanitizer")
    assert result.status == "fail" and result.kind == "race"
    assert "missing __threadfence()" in result.message and "found by the emulator's checks" in result.message


def test_a_finding_both_make_is_told_once_as_compute_sanitizers(verdicts_cfg):
    cfg = verdicts_cfg
    part = PARTS["part2_blelloch"]
    case = case_list(cfg, part.key)[0]
    (mine,) = unseen_by_sanitizer(emulator_findings(cfg, VERDICTS / "part2_shared_overrun.cu", "part2_blelloch"))
    from dataclasses import replace
    theirs = replace(mine, message=f"memcheck's words for it at {mine.file}:{mine.line}")
    result = run_case(None, None, cfg=cfg, part=part, case=case,
                      checked=CaseChecks([theirs], True, ["memcheck"], emulator=[mine]), checker="compute-sanitizer")
    assert result.status == "fail" and result.message.count("out-of-bounds") == 1, result.message
    assert "memcheck's words" in result.message and "found by compute-sanitizer" in result.message
