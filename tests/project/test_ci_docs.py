"""docs/ci: the GitHub Actions workflow and GitLab CI job parse, have their jobs, and run real commands."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from grader.cli import build_parser
from tests.conftest import ROOT

CI = ROOT / "docs" / "ci"


def _load(name: str) -> dict:
    data = yaml.safe_load((CI / name).read_text())
    assert isinstance(data, dict), name
    return data


def simple_commands(script: str) -> list[list[str]]:
    """The words of every simple command of a shell script (between ``&&``, ``||``, ``;`` and ``|``;
    continuation lines joined; comments and leading ``NAME=value`` assignments left out)."""
    commands = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split, lexer.commenters = True, "#"
        command: list[str] = []
        for word in [*lexer, ";"]:
            if word in ("&&", "||", ";", "|"):
                words = [w for i, w in enumerate(command) if "=" not in w or any("=" not in v for v in command[:i])]
                if words:
                    commands.append(words)
                command = []
            else:
                command.append(word)
    return commands


def scangrade_commands(script: str) -> list[list[str]]:
    """The arguments of every ``scangrade`` command of a shell script (see :func:`simple_commands`)."""
    return [words[1:] for words in simple_commands(script) if Path(words[0]).name == "scangrade"]


def _parsed(args: list[str]):
    try:
        return build_parser().parse_args(args)
    except SystemExit:
        pytest.fail(f"not a scangrade command line: scangrade {shlex.join(args)}")


def test_scangrade_commands_are_found_in_scripts_and_bad_ones_are_refused():
    script = ("set -e\n.venv/bin/scangrade check --junit a.xml \\\n  --markdown \"$X\"  # the cases\n"
              "echo scangrade\ncd x && SCANGRADE_BACKEND=emulator scangrade grade a; ls\n")
    assert scangrade_commands(script) == [["check", "--junit", "a.xml", "--markdown", "$X"], ["grade", "a"]]
    with pytest.raises(pytest.fail.Exception, match="not a scangrade command line"):
        _parsed(["check", "--junit-xml", "a.xml"])


def test_the_github_workflow_grades_on_push_with_the_emulator_and_on_a_self_hosted_gpu_runner():
    wf = _load("github-actions.yml")
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` key as true
    assert "push" in triggers
    jobs = wf["jobs"]
    assert set(jobs) == {"emulator", "gpu"}
    assert jobs["emulator"]["runs-on"] == "ubuntu-latest"
    assert set(jobs["gpu"]["runs-on"]) == {"self-hosted", "gpu"} and "SCANGRADE_GPU" in jobs["gpu"]["if"]

    for name, backend, command in (("emulator", "emulator", "check"), ("gpu", "pycuda", "grade")):
        steps = jobs[name]["steps"]
        runs = [scangrade_commands(s["run"]) for s in steps if "run" in s]
        graded = [_parsed(c) for cmds in runs for c in cmds]
        assert [(a.command, a.backend) for a in graded] == [(command, backend)], name
        args = graded[0]
        assert args.markdown == "$GITHUB_STEP_SUMMARY" and args.json
        if command == "grade":
            assert args.path == "assignment"
        uses = {s["uses"].split("@")[0]: s for s in steps if "uses" in s}
        assert uses["actions/checkout"]
        report, upload = uses["mikepenz/action-junit-report"], uses["actions/upload-artifact"]
        assert report["with"]["report_paths"] == args.junit  # the file scangrade wrote is the one published
        assert args.junit in upload["with"]["path"].split() and args.json in upload["with"]["path"].split()
        assert "cancelled()" in report["if"] and "cancelled()" in upload["if"]  # also when cases fail
        # a fork's pull request has a read-only token: annotations on the lines, no check run
        assert "head.repo.fork" in report["with"]["annotate_only"]
    assert wf["permissions"]["checks"] == "write"


def test_the_gitlab_jobs_grade_with_the_emulator_and_on_a_gpu_runner_and_publish_junit():
    ci = _load("gitlab-ci.yml")
    assert ci["stages"] == ["grade"]
    jobs = {k: v for k, v in ci.items() if isinstance(v, dict) and "script" in v}
    assert set(jobs) == {"scangrade-emulator", "scangrade-gpu"}
    assert "gpu" in jobs["scangrade-gpu"]["tags"]
    assert any("SCANGRADE_GPU" in rule["if"] for rule in jobs["scangrade-gpu"]["rules"])
    for name, backend, command in (("scangrade-emulator", "emulator", "check"), ("scangrade-gpu", "pycuda", "grade")):
        job = jobs[name]
        assert job["stage"] in ci["stages"]
        graded = [_parsed(c) for line in job["script"] for c in scangrade_commands(line)]
        assert [(a.command, a.backend) for a in graded] == [(command, backend)], name
        args = graded[0]
        artifacts = job["artifacts"]
        assert artifacts["when"] == "always" and artifacts["reports"]["junit"] == args.junit
        assert {args.junit, args.json, args.markdown} <= set(artifacts["paths"])
    install = " ".join(jobs["scangrade-emulator"]["before_script"])
    assert "pip install ." in install and "g++" in install


def test_the_readme_names_both_files_and_the_commands():
    text = (CI / "README.md").read_text()
    for needle in ("github-actions.yml", "gitlab-ci.yml", "scangrade check --backend emulator",
                   "self-hosted", "SCANGRADE_GPU", "artifacts:reports:junit", "`file`", "`line`", "annotate_only"):
        assert needle in text, needle


def _quick_start_blocks() -> list[list[str]]:
    """The README's quick start: each code block's lines."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start\n", 1)[1].split("\n## ", 1)[0]
    return [block.strip().splitlines() for block in section.split("```")[1::2]]


def test_the_quick_start_is_an_apt_line_then_two_make_commands_that_ci_runs_in_a_clone():
    apt, commands, *by_hand = _quick_start_blocks()
    assert len(apt) == 1 and apt[0].startswith("sudo apt install ")
    packages = set(apt[0].split()[3:])
    setup = (ROOT / "grader" / "release_files" / "setup.mk").read_text()
    named = set(re.findall(r"sudo apt install ([\w.+-]+)", setup))  # what make says to install when missing
    assert {"g++", "python3-venv"} <= named and {"g++", "python3-venv", "make"} <= packages
    assert commands == ["make grade", "make test"]
    assert by_hand and by_hand[0][-2:] == ["scangrade grade reference/solutions", "pytest"]

    ci = simple_commands((ROOT / ".ci" / "run").read_text())
    ran = [" ".join(words[words.index("make"):]) for words in ci if "make" in words]
    for command in commands:
        assert command in ran, f".ci/run does not run the README's `{command}`"
    assert ran.count("make test") == 1  # the suite runs once
    clone = next(i for i, words in enumerate(ci) if words[:2] == ["git", "clone"])
    first_make = next(i for i, words in enumerate(ci) if "make" in words)
    assert clone < first_make  # in a fresh clone, as a new user would
    assert ran.index("make grade") < ran.index("make test") < len(ran) - ran[::-1].index("make grade") - 1


def test_the_junit_the_workflow_publishes_places_a_race_on_the_students_line(tmp_path, monkeypatch, capsys):
    """The emulator job's own command, in a student repository holding a Part 1 with a race: the
    JUnit file it publishes carries ``file`` and ``line`` on the failing testcases, the attributes
    the JUnit action named in the workflow turns into annotations, naming the student's file (a
    path below the repository, as the action makes it relative to the workspace) and the racy line."""
    import json
    import xml.etree.ElementTree as ET

    from grader.cli import main
    from tests.conftest import BROKEN, write_config
    repo = tmp_path / "repo"
    (repo / "assignment").mkdir(parents=True)
    source = repo / "assignment" / "part1_naive.cu"
    source.write_bytes((BROKEN / "part1_missing_sync.cu").read_bytes())
    write_config(repo, sizes={"part1_naive": [1, 33]})
    monkeypatch.chdir(repo)
    step = next(s["run"] for s in _load("github-actions.yml")["jobs"]["emulator"]["steps"]
                if "run" in s and scangrade_commands(s["run"]))
    (args,) = scangrade_commands(step.replace("$GITHUB_STEP_SUMMARY", "summary.md"))
    assert main([*args, "--part", "part1_naive"]) == 1
    capsys.readouterr()
    junit, result = _parsed(args).junit, json.loads((repo / _parsed(args).json).read_text())
    cases = {tc.get("name"): tc for tc in ET.parse(repo / junit).getroot().iter("testcase")}
    racy = cases["n=33 int32"]
    assert racy.find("failure") is not None
    (finding,) = [f for c in result["parts"][0]["cases"] if c["name"] == "n=33 int32" for f in c["findings"]
                  if f["kind"] == "race"]
    where = Path(racy.get("file"))
    assert (where if where.is_absolute() else repo / where).resolve() == source.resolve()
    assert Path(str(where).replace(f"{repo}/", "")).as_posix() == "assignment/part1_naive.cu"  # as the action strips
    assert racy.get("line") == str(finding["line"])
    assert "buf[" in source.read_text().splitlines()[int(racy.get("line")) - 1]  # the racy access itself
    assert cases["n=1 int32"].find("failure") is None and "file" not in cases["n=1 int32"].attrib
