"""The pytest plugin: ``pytest --scangrade SUBMISSION`` makes one item per grading case."""

from __future__ import annotations

import os
import shutil
import xml.etree.ElementTree as ET
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from grader.assignment.config import load_config
from grader.grading.case.cases import case_list
from tests.conftest import BROKEN, SOLUTIONS, write_config

pytest_plugins = ["pytester"]

#: The emulator's build cache, kept across pytester's runs (pytester gives each its own HOME).
CACHE_HOME = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
SIZES = {"part1_naive": [5], "part2_blelloch": [7, 40]}


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch):
    """``run(submission_files, *pytest_args)``: a submission folder ``sub`` of those files (name in
    the submission -> source file), graded by pytest in a child process."""
    monkeypatch.setenv("XDG_CACHE_HOME", CACHE_HOME)
    monkeypatch.delenv("SCANGRADE_BACKEND", raising=False)
    write_config(pytester.path, sizes=SIZES)

    def go(files: dict[str, Path], *args: str, timeout: float = 300) -> pytest.RunResult:
        sub = pytester.path / "sub"
        sub.mkdir(exist_ok=True)
        for name, src in files.items():
            shutil.copy(src, sub / name)
        return pytester.runpytest_subprocess("--scangrade", "sub", "--scangrade-backend", "emulator",
                                             "-p", "no:cacheprovider", "-p", "no:randomly", *args, timeout=timeout)
    return go


def _literal(text: str) -> str:
    """``text`` as an fnmatch pattern that matches it literally (brackets escaped)."""
    return text.replace("[", "[[]")


CORRECT = {"part1_naive.cu": SOLUTIONS / "part1_naive.cu", "part2_blelloch.cu": SOLUTIONS / "part2_blelloch.cu"}


def test_the_plugin_is_registered_as_a_pytest11_entry_point():
    found = [e for e in entry_points(group="pytest11") if e.name == "scangrade"]
    assert [e.value for e in found] == ["grader.pytest_plugin"]


def test_a_correct_submission_passes_one_item_per_case(run, pytester):
    cfg = load_config(pytester.path / "config.yaml")
    ids = [f"sub::{k}[{c.dtype}-n={c.n}]" for k in cfg.parts for c in case_list(cfg, k)]
    assert len(ids) == 3 + 4  # n = 1 and the one-block maximum are always graded
    result = run(CORRECT, "-v")
    result.assert_outcomes(passed=len(ids))
    result.stdout.fnmatch_lines([_literal(f"{i} PASSED") + "*" for i in ids], consecutive=False)
    result.stdout.fnmatch_lines(["scangrade: *sub · config *config.yaml · backend emulator (--backend option)"])


def test_a_broken_part_fails_its_cases_with_the_first_mismatch_and_junit_has_one_testcase_per_case(run, pytester):
    result = run({**CORRECT, "part2_blelloch.cu": BROKEN / "part2_off_by_one.cu"}, "--junitxml", "junit.xml")
    result.assert_outcomes(passed=5, failed=2)
    result.stdout.fnmatch_lines([
        "*_ " + _literal("part2_blelloch[int32-n=7]") + " _*",
        _literal("fail: out[0] = ") + "*, expected 0; 7 of 7 elements wrong",  # one block: no tile hint
        "n = 7 (int32), seed 7",
    ])
    assert "Traceback" not in result.stdout.str() and "_CaseFailed" not in result.stdout.str()

    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    by_name = {c.get("name"): c for c in cases}
    assert sorted(by_name) == sorted(["part1_naive[int32-n=1]", "part1_naive[int32-n=5]", "part1_naive[int32-n=128]",
                                      "part2_blelloch[int32-n=1]", "part2_blelloch[int32-n=7]",
                                      "part2_blelloch[int32-n=40]", "part2_blelloch[int32-n=256]"])
    assert {c.get("classname") for c in by_name.values()} == {"sub"}
    failed = {name for name, c in by_name.items() if c.find("failure") is not None}
    assert failed == {"part2_blelloch[int32-n=7]", "part2_blelloch[int32-n=40]"}
    assert "40 of 40 elements wrong" in by_name["part2_blelloch[int32-n=40]"].find("failure").get("message")


def test_k_selects_items_and_only_their_parts_are_graded(run, pace):
    # Part 1 hangs until timeouts.part_s (120 s): were it graded, this run would not end within 60 s
    # (on an idle machine; on a busy one in proportion, below those 120 s).
    result = run({**CORRECT, "part1_naive.cu": BROKEN / "part1_hang.cu"}, "-k", "part2_blelloch and (n40 or n7)",
                 "-v", timeout=min(pace.seconds(60), 100))
    result.assert_outcomes(passed=2, deselected=5)
    result.stdout.fnmatch_lines([_literal("sub::part2_blelloch[int32-n=7] PASSED") + "*",
                                 _literal("sub::part2_blelloch[int32-n=40] PASSED") + "*"])


def test_a_part_that_does_not_compile_fails_every_item_with_the_compiler_log(run, pytester):
    broken = pytester.path / "broken.cu"
    broken.write_text('extern "C" __global__ void blelloch_scan(const scan_t* in, scan_t* out, int n) {\n'
                      "    out[0] = undeclared_thing;\n}\n")
    result = run({**CORRECT, "part2_blelloch.cu": broken}, "-k", "part2_blelloch")
    result.assert_outcomes(failed=4, deselected=3)
    text = result.stdout.str()
    # Each item's own section starts with the message; the short summary (which pytest prints in full,
    # not cut to the terminal's width, when the CI variable is set) is not counted.
    lines = text.splitlines()
    assert lines.count("not-run: not run: part2_blelloch.cu does not compile") == 4
    assert text.count("undeclared_thing") >= 4  # the compiler's message, in every item's report


def test_without_the_option_the_plugin_does_nothing(pytester, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", CACHE_HOME)
    pytester.makepyfile(test_plain="def test_one():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest("-p", "no:cacheprovider")  # in this process: the plugin is loaded here too
    result.assert_outcomes(passed=1)
    assert "scangrade:" not in result.stdout.str()
    help_text = pytester.runpytest("--help").stdout.str()
    assert "--scangrade=SUBMISSION" in help_text and "--scangrade-config=FILE" in help_text


def test_a_submission_that_is_not_there_is_a_usage_error(run):
    result = run({}, "--scangrade", "nowhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--scangrade: */nowhere: no such file or folder*"])


def test_grading_collects_only_the_submissions_cases_with_no_warning_where_a_project_has_testpaths(run, pytester):
    """Run where a project (a student release) sets testpaths but has no tests folder, and has a
    conftest.py and a test of its own: neither is collected or imported, and pytest says nothing."""
    pytester.path.joinpath("pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    pytester.path.joinpath("conftest.py").write_text("raise SystemExit('the conftest was imported')\n")
    pytester.path.joinpath("test_own.py").write_text("def test_own():\n    assert False\n")
    result = run(CORRECT, "-k", "part1_naive and n5", "--scangrade-no-checks")
    result.assert_outcomes(passed=1, deselected=6, warnings=0)
    assert "No files were found" not in result.stdout.str() + result.stderr.str()


def test_grading_from_the_project_root_with_junitxml_collects_only_the_submissions_cases(tmp_path):
    """The submission and config named by absolute paths moved pytest's rootdir away from the project,
    so its pyproject.toml was not read and its whole suite was collected (1000+ items)."""
    import subprocess
    import sys
    from tests.conftest import ROOT
    sub = tmp_path / "sub"
    sub.mkdir()
    shutil.copy(SOLUTIONS / "part1_naive.cu", sub)
    config = write_config(tmp_path, sizes={"part1_naive": [5]})
    env = {**os.environ, "XDG_CACHE_HOME": CACHE_HOME}
    env.pop("SCANGRADE_BACKEND", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "--scangrade", str(sub), "--scangrade-config", str(config),
                           "--scangrade-backend", "emulator", "--junitxml", str(tmp_path / "j.xml"),
                           "-p", "no:cacheprovider", "--collect-only", "-q"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 tests collected" in proc.stdout, proc.stdout
    assert "Warning" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
