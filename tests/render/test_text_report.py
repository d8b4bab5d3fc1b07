"""The terminal text report a student reads: one group per finding (a race that fails every size is
one entry, not one line per size), passing sizes folded, lines wrapped, colour on a terminal."""

from __future__ import annotations

import shutil

import pytest

from grader.backends import Selection
from grader.cli import styled_report
from grader.assignment.config import load_config
from grader.render.text import WIDTH, render_text
from grader.grading.runner import grade
from tests.conftest import BROKEN, SOLUTIONS


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> str:
    """The text report of Part 1 without its barrier (a race at every size above 2) and a correct
    Part 2, graded with the checks on the emulator."""
    root = tmp_path_factory.mktemp("text")
    sub = root / "sub"
    sub.mkdir()
    shutil.copy(BROKEN / "part1_missing_sync.cu", sub / "part1_naive.cu")
    shutil.copy(SOLUTIONS / "part2_blelloch.cu", sub)
    (root / "config.yaml").write_text(
        "block_size: 128\nseed: 7\nparts:\n"
        "  part1_naive: {points_per_case: 1, dtypes: [int32, float32], sizes: [3, 31, 32, 33, 64, 100, 127]}\n"
        "  part2_blelloch: {points_per_case: 1, dtypes: [int32, float32], sizes: [7, 40]}\n")
    cfg = load_config(root / "config.yaml")
    return render_text(grade(sub, cfg=cfg, selection=Selection("emulator", "test"), checks=True))


def test_a_race_at_every_size_is_one_entry_with_its_sizes(report):
    part1 = report.split("Part 2:")[0]
    fails = [line for line in part1.splitlines() if line.lstrip().startswith("FAIL")]
    assert len(fails) == 1, part1
    assert fails[0].startswith("    FAIL    race at part1_naive.cu:") and "16 cases, n = 3, 31, 32, 33, 64, 100, 127, 128 (int32, float32)" in fails[0]
    assert "(int32, float32)" in fails[0]
    assert part1.count("race (read-after-write)") == 1
    assert "scangrade-build" not in report  # the student's file name, not the build folder's copy


def test_passing_sizes_are_folded_and_lines_wrapped(report):
    part2 = report.split("Part 2:")[1].split("\n\n")[0]
    assert "PASS    all 8 cases: n = 1, 7, 40, 256 (int32, float32)" in part2
    assert max(len(line) for line in report.splitlines() if line.startswith(" " * 12)) <= WIDTH  # messages


def test_status_words_are_coloured_on_every_line(report):
    styled = styled_report(report)
    spans = {(s.start, str(s.style)) for s in styled.spans}
    assert (report.index("\n    FAIL") + 1, "bold red") in spans  # not on the first line: every line is looked at
    assert (report.index("\n    PASS    all") + 1, "green") in spans
    assert (report.index("\nPart 2:") + 1, "bold") in spans


def test_the_report_says_when_the_emulator_ran_without_its_sandbox(tmp_path):
    (tmp_path / "config.yaml").write_text("block_size: 128\nseed: 7\nparts:\n"
                                          "  part1_naive: {points_per_case: 1, sizes: [5]}\n")
    cfg = load_config(tmp_path / "config.yaml").override(emulator={"sandbox": "off"})
    text = render_text(grade(SOLUTIONS / "part1_naive.cu", cfg=cfg, selection=Selection("emulator", "test"),
                             checks=False))
    assert "sandbox: off (emulator.sandbox: off)" in text
    assert "WARNING: the submission's code ran without the emulator's whole OS sandbox" in text


def test_the_header_names_each_part_launched_with_its_own_block_size(tmp_path):
    from grader.render.markdown import markdown
    from grader.core.results import result_from_dict
    (tmp_path / "config.yaml").write_text(
        "block_size: 128\nseed: 7\nparts:\n  part1_naive: {points_per_case: 1, sizes: [5]}\n"
        "  part4_any_size: {block_size: 64, points_per_case: 1, sizes: [5]}\n"
        "  part5_single_pass: {block_size: 64, items_per_thread: 4, points_per_case: 1, sizes: [5]}\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    for name in ("part1_naive.cu", "part4_any_size.cu", "part5_single_pass.cu"):
        shutil.copy(SOLUTIONS / name, sub)
    result = grade(sub, cfg=load_config(tmp_path / "config.yaml"), selection=Selection("emulator", "test"),
                   checks=False)
    expected = "BLOCK_SIZE 128 (Part 4: 64; Part 5: 64 × 4 items a thread)"
    assert expected in render_text(result).splitlines()[2]
    assert expected.replace("_", "\\_") in markdown(result)
    assert render_text(result_from_dict(result.to_dict())) == render_text(result)  # the JSON keeps them
