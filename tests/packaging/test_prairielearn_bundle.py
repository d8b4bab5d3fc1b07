"""scangrade prairielearn-bundle: the serverFilesCourse folder, and its entrypoint run in a scratch
folder laid out as PrairieLearn's /grade (SCANGRADE_GRADE_ROOT or --root), its results.json checked
against PrairieLearn's contract (tests/render/test_prairielearn.py: check_contract).

Every run here grades on the emulator with small sizes. Waits are bounded by the test configs'
timeouts (case_s), never asserted on the clock."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.cli import main
from grader.assignment.config import load_config
from grader.packaging.prairielearn_bundle import (DEFAULT_TIMEOUT_S, ENTRYPOINT, STARTUP_S, build_prairielearn_bundle,
                                         grading_options)
from tests.conftest import ATTACKS, BROKEN, ROOT, SOLUTIONS
from tests.render.test_prairielearn import check_contract

PRIVATE_SEED = 5550123
HANG = ATTACKS / "hang_kernel.cu"


def _config(tmp: Path, *, compile_error: str = "not-gradable", timeouts: str = "part_s: 120\n  case_s: 5\n"
                                                                               "  submission_s: 100",
            more_parts: str = "") -> Path:
    """Parts 1 and 2 (and ``more_parts``, YAML under ``parts:``), few sizes; a hanging case is stopped
    after case_s = 5 s."""
    path = tmp / "config.yaml"
    path.write_text(f"""block_size: 128
seed: 7
timeouts:
  {timeouts}
prairielearn:
  compile_error: {compile_error}
parts:
  part1_naive:
    points_per_case: 1
    sizes: [1]
  part2_blelloch:
    points_per_case: 2
    sizes: [7, 40]
{more_parts}""")
    return path


def _private(tmp: Path) -> Path:
    path = tmp / "private.yaml"
    path.write_text(f"seed: {PRIVATE_SEED}\nparts:\n  part2_blelloch:\n    hidden_sizes: [233]\n")
    return path


def _job(bundle: Path, root: Path, files: dict[str, Path | str]) -> Path:
    """``root`` laid out as PrairieLearn's /grade: the bundle in serverFilesCourse/scangrade, the
    student's files (name -> a file to copy, or text), data/data.json; no results/ folder."""
    shutil.copytree(bundle, root / "serverFilesCourse" / "scangrade")
    (root / "student").mkdir(parents=True)
    for name, source in files.items():
        target = root / "student" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, Path):
            shutil.copy(source, target)
        else:
            target.write_text(source)
    (root / "data").mkdir()
    (root / "data" / "data.json").write_text(json.dumps({"params": {}, "submitted_answers": {}}))
    return root


def _run(root: Path, *args: str, by_argument: bool = False, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("SCANGRADE_") and k != "PYTHONPATH"}
    full.update({"SCANGRADE_PYTHON": sys.executable, "SCANGRADE_BACKEND": "emulator"})
    if by_argument:
        args = ("--root", str(root), *args)
    else:
        full["SCANGRADE_GRADE_ROOT"] = str(root)
    full.update(env)
    return subprocess.run([str(root / "serverFilesCourse" / "scangrade" / ENTRYPOINT), *args], cwd=root, env=full,
                          capture_output=True, text=True, timeout=600, check=False)


def _results(root: Path, run: subprocess.CompletedProcess) -> dict:
    assert run.returncode == 0, run.stdout + run.stderr
    return check_contract(json.loads((root / "results" / "results.json").read_text(encoding="utf-8")))


def _test(doc: dict, name: str) -> dict:
    (test,) = [t for t in doc["tests"] if t["name"] == name]
    return test


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("plbundle")
    return build_prairielearn_bundle(tmp / "scangrade", config=_config(tmp), private_config=_private(tmp)).folder


def test_the_bundle_holds_the_entrypoint_the_image_the_configs_and_the_grader(bundle):
    files = {p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()}
    assert {"run.sh", "Dockerfile", "config.yaml", "private.yaml", "scangrade/pyproject.toml",
            "scangrade/README.md", "scangrade/grader/cli.py", "scangrade/grader/render/prairielearn.py",
            "scangrade/grader/backends/emulator/runtime/prelude.h", "scangrade/reference/scan.py",
            "scangrade/reference/solutions/part2_blelloch.cu"} <= files
    assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc")]
    assert os.access(bundle / "run.sh", os.X_OK) and not os.access(bundle / "config.yaml", os.X_OK)
    text = (bundle / "run.sh").read_text()
    assert "@" not in text.replace('"${parts[@]}"', "").replace('"${args[@]}"', "")  # every placeholder filled
    assert "TIME_LIMIT=120\n" in text and "import html, json, sys" in text
    check = subprocess.run(["bash", "-n", str(bundle / "run.sh")], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stderr
    assert "FROM ${BASE}" in (bundle / "Dockerfile").read_text()


def test_a_correct_submission_scores_one_with_hidden_cases_by_name_and_status(bundle, tmp_path):
    root = _job(bundle, tmp_path / "grade", {"part1_naive.cu": SOLUTIONS / "part1_naive.cu",
                                             "part2_blelloch.cu": SOLUTIONS / "part2_blelloch.cu"})
    run = _run(root)
    doc = _results(root, run)  # the results folder was created
    assert doc["gradable"] is True and doc["score"] == 1.0
    assert [t["name"] for t in doc["tests"]] == [
        "Part 1 · naive_scan · int32", "Part 2 · blelloch_scan · int32", "Part 2 · blelloch_scan · hidden cases"]
    assert _test(doc, "Part 2 · blelloch_scan · int32")["max_points"] == 2 * 4  # n = 1, 7, 40, 256; 2 points each
    assert _test(doc, "Part 2 · blelloch_scan · hidden cases")["output"] == "hidden #1 int32: passed"
    assert "233" not in json.dumps(doc) and str(PRIVATE_SEED) not in json.dumps(doc)
    assert "scangrade 0.1.0 — grading" in run.stdout and "Part 2:" in run.stdout  # the report, in the staff's log


def test_a_broken_submission_is_graded_with_its_failures(bundle, tmp_path):
    root = _job(bundle, tmp_path / "grade", {"part1_naive.cu": SOLUTIONS / "part1_naive.cu",
                                             "scan/part2_blelloch.cu": BROKEN / "part2_off_by_one.cu"})
    doc = _results(root, _run(root, by_argument=True))
    assert doc["gradable"] is True and 0.0 < doc["score"] < 1.0
    part2 = _test(doc, "Part 2 · blelloch_scan · int32")
    assert part2["points"] < part2["max_points"] and "FAILED" in part2["output"] and "seed 7" in part2["output"]


COMPILE_ERROR = (SOLUTIONS / "part2_blelloch.cu").read_text() + "\nthis line is not C++;\n"


def test_a_compile_error_is_not_gradable_with_the_compilers_message(bundle, tmp_path):
    root = _job(bundle, tmp_path / "grade", {"part1_naive.cu": SOLUTIONS / "part1_naive.cu",
                                             "part2_blelloch.cu": COMPILE_ERROR})
    doc = _results(root, _run(root))
    assert doc["gradable"] is False and "score" not in doc
    (error,) = doc["format_errors"]
    assert error.startswith("Part 2 (part2_blelloch.cu) does not compile") and "no attempt" in error
    assert "part2_blelloch.cu does not compile" in doc["output"] and "error: expected" in doc["output"]


def test_a_compile_error_under_zero_is_a_graded_zero_for_that_part(tmp_path):
    made = build_prairielearn_bundle(tmp_path / "zero", config=_config(tmp_path, compile_error="zero")).folder
    root = _job(made, tmp_path / "grade", {"part1_naive.cu": SOLUTIONS / "part1_naive.cu",
                                           "part2_blelloch.cu": COMPILE_ERROR})
    doc = _results(root, _run(root))
    assert doc["gradable"] is True and doc["score"] == pytest.approx(2 / (2 + 8))  # part 1's two cases
    test = _test(doc, "Part 2 · blelloch_scan · does not compile")
    assert test["points"] == 0 and test["max_points"] == 8 and "error: expected" in test["output"]


@pytest.mark.parametrize("policy", ["not-gradable", "zero"])
def test_under_not_gradable_a_compile_error_stops_before_any_case_naming_every_problem(tmp_path, policy):
    """The entrypoint's command (grade --intake --prairielearn): under not-gradable, every part is
    compiled first, and a part that does not compile ends the grading there: no case of any part
    runs (Part 2 compiles and is not graded), and the document names the compile error and the
    misnamed Part 1 both. Under zero, grading goes on: Part 2's cases run and pass."""
    config = _config(tmp_path, compile_error=policy,
                     more_parts="  part4_any_size:\n    points_per_case: 1\n    sizes: [1, 600]\n")
    sub = tmp_path / "student"
    (sub / "scan").mkdir(parents=True)
    shutil.copy(SOLUTIONS / "part1_naive.cu", sub / "Part1_Naive.cu")  # misnamed
    shutil.copy(SOLUTIONS / "part2_blelloch.cu", sub / "part2_blelloch.cu")
    shutil.copy(BROKEN / "part4_compile_error.cu", sub / "scan" / "part4_any_size.cu")
    pl, full = tmp_path / "results.json", tmp_path / "result.json"
    assert main(["grade", str(sub), "--intake", "--config", str(config), "--backend", "emulator",
                 "--prairielearn", str(pl), "--json", str(full)]) == 1
    doc = check_contract(json.loads(pl.read_text(encoding="utf-8")))
    ran = {p["key"]: {c["status"] for c in p["cases"]} for p in json.loads(full.read_text())["parts"]}
    status = {p["key"]: p["status"] for p in json.loads(full.read_text())["parts"]}
    assert status["part4_any_size"] == "compile-error" and status["part1_naive"] == "missing"
    if policy == "zero":
        assert doc["gradable"] is True and ran["part2_blelloch"] == {"pass"}
        return
    assert doc["gradable"] is False and "score" not in doc
    assert ran == {key: {"not-run"} for key in ("part1_naive", "part2_blelloch", "part4_any_size")}
    part4, part1 = doc["format_errors"]
    assert part4.startswith("Part 4 (part4_any_size.cu) does not compile") and "no attempt" in part4
    assert part1.startswith("Part 1: part1_naive.cu is missing") and "Part1_Naive.cu" in part1
    assert "part4_any_size.cu:61" in doc["output"]  # the compiler's message, at the broken line


def test_a_missing_file_is_a_graded_zero_and_no_file_at_all_is_not_gradable(bundle, tmp_path):
    root = _job(bundle, tmp_path / "one", {"part1_naive.cu": SOLUTIONS / "part1_naive.cu",
                                           "Part2_Blelloch.cu": SOLUTIONS / "part2_blelloch.cu"})
    doc = _results(root, _run(root))
    missing = _test(doc, "Part 2 · blelloch_scan · file missing")
    assert missing["points"] == 0 and missing["max_points"] == 2 * 5  # four visible cases and the hidden one
    assert missing["message"].startswith("part2_blelloch.cu is missing from the submission")
    assert "did you mean" in missing["output"] and "Part2_Blelloch.cu" in missing["output"]
    root = _job(bundle, tmp_path / "none", {"notes.txt": "my scan is in my other folder"})
    doc = _results(root, _run(root))
    assert doc["gradable"] is False
    assert doc["format_errors"] == ["No part file was found in the submission; expected part1_naive.cu, "
                                    "part2_blelloch.cu."]


def test_one_part_is_graded_with_part(bundle, tmp_path):
    root = _job(bundle, tmp_path / "grade", {"part2_blelloch.cu": SOLUTIONS / "part2_blelloch.cu"})
    doc = _results(root, _run(root, "--part", "part2_blelloch"))
    assert doc["score"] == 1.0 and {t["name"].split(" · ")[0] for t in doc["tests"]} == {"Part 2"}


def test_a_hanging_kernel_is_a_graded_timeout_within_case_s(tmp_path, pace):
    # the bundle's config with a shorter case_s than the module's 5 s (2 s on an idle machine, scaled
    # by tests/pace.py, never above 5 s): each of the part's two hung cases waits it out
    timeouts = f"part_s: 120\n  case_s: {min(5.0, pace.seconds(2)):.1f}\n  submission_s: 100"
    made = build_prairielearn_bundle(tmp_path / "b", config=_config(tmp_path, timeouts=timeouts),
                                     private_config=_private(tmp_path)).folder
    root = _job(made, tmp_path / "grade", {"part1_naive.cu": HANG, "part2_blelloch.cu": SOLUTIONS /
                                           "part2_blelloch.cu"})
    doc = _results(root, _run(root))
    assert doc["gradable"] is True
    part1 = _test(doc, "Part 1 · naive_scan · int32")
    assert part1["points"] == 0 and "timed out" in part1["message"] and "timeouts.case_s" in part1["output"]
    assert _test(doc, "Part 2 · blelloch_scan · int32")["points"] == 8  # the other part is graded as usual
    assert doc["score"] == pytest.approx(10 / 12)


def test_past_the_jobs_time_limit_it_still_writes_results(tmp_path):
    """A config edited after the bundle was built (the bundle fits it) whose timeouts outlast the
    job: run.sh stops scangrade 5 s before the job's timeout (16 s) and says so."""
    made = build_prairielearn_bundle(tmp_path / "b", config=_config(tmp_path, timeouts="submission_s: 6"),
                                     timeout_s=16).folder
    config = made / "config.yaml"
    config.write_text(config.read_text().replace("submission_s: 6", "submission_s: 500\n  case_s: 500\n  part_s: 500"))
    root = _job(made, tmp_path / "grade", {"part1_naive.cu": HANG})
    doc = _results(root, _run(root))
    assert doc["gradable"] is False and "tests" not in doc
    (error,) = doc["format_errors"]
    assert error.startswith("The autograder could not grade this submission: grading ran past the time limit of 16 s")


def _crashing_python(tmp_path: Path) -> Path:
    """A Python whose ``-m grader`` dies with a traceback (as a bug in scangrade would)."""
    fake = tmp_path / "python"
    fake.write_text(f"""#!/usr/bin/env bash
if [ "$1" = -m ]; then
    echo 'Traceback (most recent call last):' >&2
    echo 'RuntimeError: boom in the grader' >&2
    exit 1
fi
exec {sys.executable} "$@"
""")
    fake.chmod(0o755)
    return fake


@pytest.mark.parametrize("how", ["config error", "traceback", "no python", "bad argument"])
def test_the_entrypoint_writes_results_even_when_scangrade_cannot_grade(tmp_path, how):
    made = build_prairielearn_bundle(tmp_path / "b", config=_config(tmp_path)).folder
    if how == "config error":
        (made / "config.yaml").write_text((made / "config.yaml").read_text() + "bogus_key: 1\n")
    root = _job(made, tmp_path / "grade", {"part1_naive.cu": SOLUTIONS / "part1_naive.cu"})
    env = {"traceback": {"SCANGRADE_PYTHON": str(_crashing_python(tmp_path))},
           "no python": {"SCANGRADE_PYTHON": str(tmp_path / "missing" / "python")}}.get(how, {})
    doc = _results(root, _run(root, *(["--parts", "x"] if how == "bad argument" else []), **env))
    assert doc["gradable"] is False
    (error,) = doc["format_errors"]
    assert error.startswith("The autograder could not grade this submission") and "no attempt" in error
    expected = {"config error": "key 'bogus_key': unknown key", "traceback": "RuntimeError: boom in the grader",
                "no python": "could not run (exit status 127)", "bad argument": "unknown argument '--parts'"}[how]
    assert expected in error + doc.get("output", "")


def test_the_error_output_is_kept_from_students_when_the_bundle_has_a_private_config(tmp_path):
    made = build_prairielearn_bundle(tmp_path / "b", config=_config(tmp_path), private_config=_private(tmp_path))
    (made.folder / "private.yaml").write_text(f"seed: {PRIVATE_SEED}\nparts:\n  part2_blelloch:\n"
                                              "    hidden_sizes: [x]\n")
    root = _job(made.folder, tmp_path / "grade", {"part1_naive.cu": SOLUTIONS / "part1_naive.cu"})
    run = _run(root)
    assert "hidden_sizes" in run.stderr  # the staff see it in the job's log
    doc = _results(root, run)
    assert doc["gradable"] is False and "exit status 2" in doc["format_errors"][0]
    assert "hidden_sizes" not in json.dumps(doc) and str(PRIVATE_SEED) not in json.dumps(doc)


def test_prairielearn_bundle_fits_the_timeouts_into_the_job_and_says_so(tmp_path, capsys):
    config = _config(tmp_path)  # part_s 120, case_s 5, submission_s 100
    out = tmp_path / "bundle"
    assert main(["prairielearn-bundle", str(out), "--config", str(config), "--timeout", "60"]) == 0
    printed = capsys.readouterr().out
    assert "its config.yaml: timeouts.submission_s 100 -> 50 s (the job's timeout of 60 s less 10 s" in printed
    assert "its config.yaml: timeouts.part_s 120 -> 50 s (at most timeouts.submission_s)" in printed
    assert "case_s" not in printed  # 5 s fits: unchanged
    shipped = load_config(out / "config.yaml")
    assert (shipped.timeouts.submission_s, shipped.timeouts.part_s, shipped.timeouts.case_s) == (50, 50, 5)
    changed = [line for line in (out / "config.yaml").read_text().splitlines()
               if line != "" and line not in config.read_text().splitlines()]
    assert [line.split("  # ")[0] for line in changed] == ["  part_s: 50", "  submission_s: 50"]
    assert all(line.split("  # ")[1].startswith("prairielearn-bundle --timeout 60: ") for line in changed)
    assert len((out / "config.yaml").read_text().splitlines()) == len(config.read_text().splitlines())  # the rest kept
    assert load_config(config).timeouts.submission_s == 100  # the course's config is not touched
    (tmp_path / "nested").mkdir()
    nested = _config(tmp_path / "nested", timeouts="part_s: 60\n  case_s: 5\n  submission_s: 100")
    assert main(["prairielearn-bundle", str(tmp_path / "b2"), "--config", str(nested), "--timeout", "300"]) == 0
    assert "its config.yaml" not in capsys.readouterr().out  # everything fits a 300 s job: nothing changed
    assert (tmp_path / "b2" / "config.yaml").read_text() == nested.read_text()


def test_the_shipped_config_makes_a_bundle_as_the_readme_writes_the_command(tmp_path, capsys):
    """``scangrade prairielearn-bundle OUT`` with no option: the checkout's config.yaml, a 120 s job."""
    out = tmp_path / "scangrade"
    assert main(["prairielearn-bundle", str(out), "--config", str(ROOT / "config.yaml")]) == 0
    printed = capsys.readouterr().out
    assert printed.count("its config.yaml: timeouts.") == 3
    timeouts = load_config(out / "config.yaml").timeouts
    assert timeouts.submission_s + STARTUP_S <= DEFAULT_TIMEOUT_S
    assert timeouts.case_s <= timeouts.part_s <= timeouts.submission_s


def test_prairielearn_bundle_refuses_a_timeout_it_cannot_take_and_says_which_it_can(tmp_path, capsys):
    config = str(_config(tmp_path))
    out = tmp_path / "bundle"
    for timeout in ("10", "601"):
        assert main(["prairielearn-bundle", str(out), "--config", config, "--timeout", timeout]) == 2
        assert "pass a --timeout from 11 to 600" in capsys.readouterr().err
    assert main(["prairielearn-bundle", str(out), "--config", config, "--timeout", "11"]) == 0
    assert load_config(out / "config.yaml").timeouts.submission_s == 1
    capsys.readouterr()
    out = tmp_path / "scangrade"
    assert main(["prairielearn-bundle", str(out), "--config", config]) == 0
    printed = capsys.readouterr().out
    assert json.loads(printed[printed.index("{"):]) == {"externalGradingOptions": grading_options("scangrade",
                                                                                                  timeout_s=120)}
    assert main(["prairielearn-bundle", str(out), "--config", config]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["prairielearn-bundle", str(out), "--config", config, "--force"]) == 0


@pytest.mark.parametrize("timeouts, kept", [
    ("", True),                                        # no timeouts section: one is added, comments kept
    ("timeouts:\n  case_s: 5\n", True),               # the keys it lacks are added below it
    ("timeouts: {part_s: 300, case_s: 5}\n", False),  # flow style: the mapping is written out whole
])
def test_the_timeouts_are_fitted_whatever_the_layout_of_the_config(tmp_path, timeouts, kept):
    config = tmp_path / "config.yaml"
    config.write_text("# the course's config\nseed: 7\n" + timeouts
                      + "parts:\n  part1_naive:\n    points_per_case: 1\n    sizes: [1]\n")
    made = build_prairielearn_bundle(tmp_path / "b", config=config, timeout_s=40)
    shipped = load_config(made.folder / "config.yaml")
    assert (shipped.timeouts.submission_s, shipped.timeouts.part_s, shipped.timeouts.case_s) == \
        (30, 30, 5 if "case_s" in timeouts else 30)
    assert shipped.parts["part1_naive"].sizes == (1,) and shipped.seed == 7
    assert list(made.fitted) == ["submission_s", "part_s"] + ([] if "case_s" in timeouts else ["case_s"])
    assert ("# the course's config" in (made.folder / "config.yaml").read_text()) == kept
