"""The CLI's shared options, its one exit-status mapping, and config discovery (grader.assignment.config.find_config)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader import cli
from grader.assignment import config
from grader.cli import build_parser, main
from grader.assignment.config import find_config
from grader.core.errors import ConfigError, ScangradeError, UsageError
from tests.conftest import write_config

SHARED = ["--backend", "emulator", "--config", "c.yaml", "--private-config", "p.yaml", "--no-checks"]


@pytest.mark.parametrize("command", [["grade", "sub"], ["check"], ["batch", "subs", "--out", "o"]])
def test_grade_check_and_batch_share_the_backend_config_and_checks_options(command):
    args = build_parser().parse_args(command + SHARED)
    assert (args.backend, args.config, args.private_config, args.checks) == ("emulator", "c.yaml", "p.yaml", False)
    assert build_parser().parse_args(command).checks is True


@pytest.mark.parametrize("command", [["grade", "sub"], ["check"]])
def test_grade_and_check_share_the_run_and_report_options(command):
    from grader.assignment.parts import PARTS
    from grader.render.formats import FORMATS
    flagged = [f for f in FORMATS.values() if f.flag]
    assert flagged and all(f.flag == f"--{f.name}" for f in flagged)
    keys = list(PARTS)
    args = build_parser().parse_args(command + ["--seed", "5", *(x for k in keys for x in ("--part", k)),
                                                *(x for f in flagged for x in (f.flag, f"{f.name}.out"))])
    assert (args.seed, args.parts) == (5, keys)
    assert all(getattr(args, f.name) == f"{f.name}.out" for f in flagged)


def test_batch_takes_no_single_grade_options():
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["batch", "subs", "--out", "o", "--seed", "3"])
    assert info.value.code == 2


def test_every_command_runs_through_the_one_exit_status_mapping():
    parser = build_parser()
    commands = {"grade": ["grade", "x"], "check": ["check"], "batch": ["batch", "x", "--out", "o"],
                "merge": ["merge", "x", "--out", "o"], "report": ["report", "x"], "release": ["release", "x"],
                "gradescope-bundle": ["gradescope-bundle", "x"], "prairielearn-bundle": ["prairielearn-bundle", "x"],
                "private-template": ["private-template"], "bench": ["bench"]}
    assert set(commands) == set(parser._subparsers._group_actions[0].choices)
    for argv in commands.values():
        run = parser.parse_args(argv).run
        assert run.__wrapped__ is not None, argv  # functools.wraps of cli._exit_status


@pytest.mark.parametrize("error, status", [(UsageError("bad flag"), 2), (ConfigError("bad key", path="c.yaml"), 2),
                                           (ScangradeError("anything"), 2)])
def test_an_error_is_printed_once_with_its_exit_status_and_no_traceback(capsys, error, status):
    def command(args):
        raise error
    assert cli._exit_status(command)(None) == status
    err = capsys.readouterr().err
    assert err == f"scangrade: error: {error}\n"


def test_an_incomplete_merge_exits_1_not_2(capsys):
    from grader.classwork.merge import IncompleteMerge

    def command(args):
        raise IncompleteMerge("shard 1 missing", missing=["1"])
    assert cli._exit_status(command)(None) == 1
    assert "scangrade: error: shard 1 missing" in capsys.readouterr().err


def test_a_report_file_that_cannot_be_written_exits_2_after_the_report(tmp_path, capsys):
    path = write_config(tmp_path, sizes={"part1_naive": [1]})
    (tmp_path / "part1_naive.cu").write_text("this does not compile\n")
    status = main(["grade", str(tmp_path), "--config", str(path), "--backend", "emulator", "--no-checks",
                   "--part", "part1_naive", "--json", str(tmp_path / "no" / "such" / "dir" / "r.json")])
    out, err = capsys.readouterr()
    assert status == 2 and "part1_naive" in out
    assert "scangrade: error: cannot write" in err and "r.json" in err and "Traceback" not in err


def test_grade_writes_each_report_format_of_the_table_that_it_is_asked_for(tmp_path, capsys):
    import json

    from grader.assignment.config import load_config
    from grader.render.formats import FORMATS, STUDENT_FOLDER, batch_reports, report_files, student_reports
    from grader.core.results import result_from_dict
    path = write_config(tmp_path, sizes={"part1_naive": [1]})
    path.write_text(path.read_text() + "prairielearn:\n  compile_error: zero\n")
    (tmp_path / "part1_naive.cu").write_text("this does not compile\n")
    files = {f.name: tmp_path / f"report-{f.name}" for f in FORMATS.values() if f.flag}
    assert "json" in files  # read back below
    argv = [x for name, file in files.items() for x in (f"--{name}", str(file))]
    assert main(["grade", str(tmp_path), "--config", str(path), "--backend", "emulator", "--no-checks",
                 "--part", "part1_naive", *argv]) == 1
    capsys.readouterr()
    result = result_from_dict(json.loads(files["json"].read_text()))
    cfg = load_config(path)
    for name, file in files.items():
        assert file.read_text() == FORMATS[name].render(result, cfg), name
    assert json.loads(files["prairielearn"].read_text())["gradable"] is True  # the config's compile_error: zero
    student = {f.file for f in FORMATS.values() if f.file and f.student_facing}
    assert set(student_reports(result)) == student and student == set(report_files(student=True))  # the student-safe set
    assert set(batch_reports(result)) == set(report_files()) | {f"{STUDENT_FOLDER}/{name}" for name in student}


def test_find_config_takes_the_option_relative_to_the_start_folder(tmp_path):
    assert find_config("sub/c.yaml", start=tmp_path) == tmp_path / "sub" / "c.yaml"
    assert find_config(str(tmp_path / "abs.yaml"), start=tmp_path / "elsewhere") == tmp_path / "abs.yaml"


def test_a_relative_config_option_stays_as_written_from_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert str(find_config("sub/c.yaml", start=Path())) == "sub/c.yaml"
    (tmp_path / "config.yaml").write_text("seed: 1\n")
    assert find_config(None, start=Path()) == tmp_path / "config.yaml"


def test_find_config_prefers_the_start_folders_config_then_the_graders(tmp_path, monkeypatch):
    grader_root = tmp_path / "grader_root"
    grader_root.mkdir()
    (grader_root / "config.yaml").write_text("seed: 1\n")
    monkeypatch.setattr(config, "PROJECT_ROOT", grader_root)
    here = tmp_path / "here"
    here.mkdir()
    assert find_config(None, start=here) == grader_root / "config.yaml"
    (here / "config.yaml").write_text("seed: 2\n")
    assert find_config(None, start=here) == here / "config.yaml"


def test_find_config_without_any_names_the_flag_to_pass(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "PROJECT_ROOT", tmp_path / "nothing")
    with pytest.raises(UsageError, match="no config.yaml in this folder or beside the grader; "
                                         "pass one with --scangrade-config FILE"):
        find_config(None, start=tmp_path, flag="--scangrade-config")
    with pytest.raises(UsageError, match="pass one with --config FILE"):
        find_config("", start=tmp_path)


def test_the_cli_without_a_config_anywhere_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(config, "PROJECT_ROOT", tmp_path / "nothing")
    monkeypatch.chdir(tmp_path)
    assert main(["grade", str(tmp_path), "--backend", "emulator"]) == 2
    assert "no config.yaml in this folder or beside the grader; pass one with --config FILE" in capsys.readouterr().err


def test_the_progress_bar_on_a_terminal_shows_the_time_left(monkeypatch):
    import io

    from rich.console import Console
    from rich.progress import TimeRemainingColumn

    from grader import cli

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True
    monkeypatch.setattr(cli.sys, "stderr", Terminal())
    progress = cli._Progress(4)
    progress.bar.update(progress.task, completed=2)
    assert any(isinstance(c, TimeRemainingColumn) for c in progress.bar.columns)
    out = Console(file=io.StringIO(), width=120, color_system=None)
    out.print(progress.bar.make_tasks_table(progress.bar.tasks))
    assert "2/4" in out.file.getvalue() and "eta" in out.file.getvalue(), out.file.getvalue()


@pytest.mark.parametrize("color_system", ["standard", "windows", "256"])
def test_the_progress_bar_shows_no_red_on_8_and_16_colour_terminals(monkeypatch, color_system):
    import io
    import re

    from rich.console import Console

    from grader import cli

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True
    monkeypatch.setattr(cli.sys, "stderr", Terminal())
    progress = cli._Progress(4)
    seen = []
    for done in (1, 2, 4):  # filling, and finished
        progress.bar.update(progress.task, completed=done)
        out = Console(file=io.StringIO(), width=100, color_system=color_system, force_terminal=True)
        out.print(progress.bar.make_tasks_table(progress.bar.tasks))
        seen.append(out.file.getvalue())
    codes = {c for text in seen for seq in re.findall(r"\x1b\[([0-9;]*)m", text) for c in seq.split(";")}
    # SGR red: 31 (red), 91 (bright red); in 256 colours, the reds and pinks rich maps rgb(249,38,114) to
    assert codes and not codes & {"31", "91"}, seen
    if color_system == "256":
        assert not re.search(r"38;5;(1|9|160|161|196|197|198|203|204)m", "".join(seen)), seen
    assert "32" in codes  # the done segments: green
