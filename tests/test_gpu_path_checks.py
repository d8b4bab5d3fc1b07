"""What the GPU path takes from the emulator's checks (grader.worker.taken_from_emulator): every
finding of a checker's kind but a deadlock, the emulator's kind of the case leading, so the same
file gets the same verdict on a GPU as on the emulator. Runs on the CPU: the emulator's real findings on kernels of tests/, and the GPU path's
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
from grader.sanitizer import Finding
from grader.worker import taken_from_emulator
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


def emulator_case(cfg, source: Path, part: str):
    """The first failing case of ``source`` graded on the emulator."""
    (result,) = grade(source, cfg=cfg, selection=Selection("emulator", "test"), parts=[part]).parts
    return next(c for c in result.cases if c.status == "fail")


def emulator_findings(cfg, source: Path, part: str):
    """The findings of the first failing case of ``source`` graded on the emulator."""
    return emulator_case(cfg, source, part).findings


def taken(findings):
    """taken_from_emulator of a case's findings (the first is its kind)."""
    return taken_from_emulator(findings, findings[0].kind if findings else None)


def test_a_missing_fence_between_blocks_is_taken(cfg):
    found = taken(emulator_findings(cfg, BROKEN / "part5_missing_fence.cu", "part5_single_pass"))
    assert [f.kind for f in found] == ["race"] and "(memory order)" in found[0].message
    assert found[0].file == "part5_single_pass.cu" and found[0].line is not None


def test_an_overrun_inside_the_blocks_shared_memory_is_taken(verdicts_cfg):
    found = taken(emulator_findings(verdicts_cfg, VERDICTS / "part2_shared_overrun.cu", "part2_blelloch"))
    assert [f.kind for f in found] == ["out-of-bounds"] and "shared array temp" in found[0].message


def test_a_race_in_shared_memory_is_taken_too_where_racecheck_misses_it(verdicts_cfg):
    """racecheck reported the missing barrier of part2_missing_sync.cu at 6 of its 32 cases on an
    H100; the emulator's finding fails the other 26 as it does on the emulator."""
    cfg = verdicts_cfg
    part = PARTS["part2_blelloch"]
    failing = emulator_case(cfg, BROKEN / "part2_missing_sync.cu", part.key)
    taken = taken_from_emulator(failing.findings, failing.kind)
    assert [f.kind for f in taken][:1] == ["race"]
    case = next(c for c in case_list(cfg, part.key) if c.name == failing.name)
    result = run_case(None, None, cfg=cfg, part=part, case=case,
                      checked=CaseChecks([], True, ["memcheck", "racecheck", "synccheck"], emulator=taken),
                      checker="compute-sanitizer")
    assert result.status == "fail" and result.kind == "race" and "found by the emulator's checks" in result.message


def test_where_both_checkers_report_a_case_the_emulators_kind_leads(verdicts_cfg):
    """A read of temp[-1] is a race to racecheck (the word before the array is another's) and out
    of bounds to the emulator (tests/kernels/part2_reads_minus_one.cu): the GPU path gives the
    emulator's kind, and tells the race as well."""
    cfg = verdicts_cfg
    part = PARTS["part2_blelloch"]
    failing = emulator_case(cfg, BROKEN / "part2_reads_minus_one.cu", part.key)
    assert failing.kind == "out-of-bounds"
    taken = taken_from_emulator(failing.findings, failing.kind)
    case = next(c for c in case_list(cfg, part.key) if c.name == failing.name)
    racecheck = Finding("race", "racecheck's hazard at part2_blelloch.cu:30", "part2_blelloch.cu", 30)
    result = run_case(None, None, cfg=cfg, part=part, case=case,
                      checked=CaseChecks([racecheck], True, ["racecheck"], emulator=taken), checker="compute-sanitizer")
    assert result.status == "fail" and result.kind == "out-of-bounds", result.message
    assert "also: race at part2_blelloch.cu:30" in result.message
    assert [f.kind for f in result.findings][:2] == ["out-of-bounds", "race"]


def test_a_read_past_n_is_taken_where_memcheck_may_miss_it(verdicts_cfg):
    """memcheck passed a read of in[n] at n = 128 and 256 on an H100 (part1_le_n_guard.cu); where it
    sees one too, the case tells it once (the next test)."""
    found = taken(emulator_findings(verdicts_cfg, VERDICTS / "part2_read_past_n.cu", "part2_blelloch"))
    assert [f.kind for f in found] == ["out-of-bounds"] and "in[" in found[0].message


def test_a_deadlock_is_left_to_the_gpus_deadline(verdicts_cfg):
    findings = emulator_findings(verdicts_cfg, BROKEN / "part1_hang.cu", "part1_naive")
    assert [f.kind for f in findings] == ["deadlock"] and taken(findings) == []


def test_a_case_fails_on_the_emulators_finding_alone_and_says_who_found_it(cfg):
    part = PARTS["part5_single_pass"]
    case = case_list(cfg, part.key)[0]
    extra = taken(emulator_findings(cfg, BROKEN / "part5_missing_fence.cu", "part5_single_pass"))
    result = run_case(None, None, cfg=cfg, part=part, case=case, checked=CaseChecks([], True, ["memcheck"], emulator=extra),
                      checker="compute-sanitizer")
    assert result.status == "fail" and result.kind == "race"
    assert "missing __threadfence()" in result.message and "found by the emulator's checks" in result.message


def test_a_finding_both_make_is_told_once_as_compute_sanitizers(verdicts_cfg):
    cfg = verdicts_cfg
    part = PARTS["part2_blelloch"]
    case = case_list(cfg, part.key)[0]
    (mine,) = taken(emulator_findings(cfg, VERDICTS / "part2_shared_overrun.cu", "part2_blelloch"))
    from dataclasses import replace
    theirs = replace(mine, message=f"memcheck's words for it at {mine.file}:{mine.line}")
    result = run_case(None, None, cfg=cfg, part=part, case=case,
                      checked=CaseChecks([theirs], True, ["memcheck"], emulator=[mine]), checker="compute-sanitizer")
    assert result.status == "fail" and result.message.count("out-of-bounds") == 1, result.message
    assert "memcheck's words" in result.message and "found by compute-sanitizer" in result.message


def test_the_gpu_paths_emulator_runs_on_the_quick_runtime_and_finds_what_the_emulator_does(cfg, tmp_path):
    """The GPU path's emulator (grader.worker._checking_emulator) builds its runtime with
    QUICK_RUNTIME_FLAGS (a new machine's first case waits for that build): the same names for the
    lockdown, and the same finding on a real kernel."""
    from grader.backends.emulator.build import QUICK_RUNTIME_FLAGS, Toolchain, expected_names
    from grader.parts import compile_part
    from grader.worker import _checking_emulator, _emulator_check

    part = PARTS["part5_single_pass"]
    emulator = _checking_emulator(cfg, part)
    try:
        assert emulator.toolchain.runtime_flags == QUICK_RUNTIME_FLAGS
        assert emulator.toolchain.runtime_names() == expected_names()
        module = compile_part(emulator, part, (BROKEN / "part5_missing_fence.cu").read_text(),
                              pc=cfg.parts[part.key], dtype="int32", workdir=tmp_path)
        failed = _emulator_check(emulator, module, cfg, part, case_list(cfg, part.key)[-1])  # n = 1000
    finally:
        emulator.close()
    assert failed is not None and failed.kind == "race" and "(memory order)" in failed.message
    assert emulator.toolchain.runtime_key() != Toolchain().runtime_key()  # its own object, not the -O2 one
