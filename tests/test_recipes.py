"""docs/architecture.md, "How to add... a report format", tried: a throwaway format (TAP, the Test
Anything Protocol) registered as a row of :data:`grader.render.formats.FORMATS` at run time, with
nothing else changed, gets its ``grade``/``check`` option, its files in a batch's student folders
(the staff's and, being student-facing, the student's), and the hidden-case tests of
``tests/test_render.py`` and ``tests/test_student_view.py``, which fail when it leaks a hidden case."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.cli import build_parser, main
from grader.render.formats import FORMATS, STUDENT_FOLDER, ReportFormat, batch_reports, report_files
from tests.conftest import write_config

ROOT = Path(__file__).resolve().parent.parent

#: The throwaway format's renderer, as a renderer module would hold it; with ``LEAK`` it renders the
#: result itself instead of :func:`grader.render._common.student_view` of it (a student-facing
#: format done wrong: hidden cases' sizes and messages in full).
TAP_MODULE = '''
from grader.render._common import student_view
from grader.render.formats import FORMATS, ReportFormat

LEAK = {leak}


def tap(result, cfg):
    view = result if LEAK else student_view(result)
    cases = [(p, c) for p in view.parts for c in p.cases]
    lines = ["TAP version 13", f"1..{{len(cases)}}"]
    for i, (p, c) in enumerate(cases, 1):
        detail = f" n={{c.n}} {{c.message}}" if LEAK else ""
        lines.append(f"{{'ok' if c.status == 'pass' else 'not ok'}} {{i}} - Part {{p.number}} {{c.name}}{{detail}}")
    lines += [f"# Part {{p.number}}: {{p.status}}: {{line}}" for p in view.parts for line in p.message.splitlines()]
    return "\\n".join(lines) + "\\n"


FORMATS["tap"] = ReportFormat("tap", tap, "also write TAP to FILE", True, "report.tap")
'''


def _tap(result, cfg) -> str:
    return "TAP version 13\n" + "".join(f"ok - {p.key}\n" for p in result.parts)


@pytest.fixture
def tap(monkeypatch) -> ReportFormat:
    fmt = ReportFormat("tap", _tap, "also write TAP to FILE", True, "report.tap")
    monkeypatch.setitem(FORMATS, "tap", fmt)
    return fmt


def test_a_format_added_to_the_table_gets_its_option_and_is_written_by_grade(tap, tmp_path, capsys):
    assert build_parser().parse_args(["grade", "sub", "--tap", "t.tap"]).tap == "t.tap"
    assert build_parser().parse_args(["check", "--tap", "t.tap"]).tap == "t.tap"
    path = write_config(tmp_path, sizes={"part1_naive": [1]})
    (tmp_path / "part1_naive.cu").write_text("this does not compile\n")
    out = tmp_path / "report.tap"
    assert main(["grade", str(tmp_path), "--config", str(path), "--backend", "emulator", "--no-checks",
                 "--part", "part1_naive", "--tap", str(out)]) == 1
    capsys.readouterr()
    assert out.read_text() == "TAP version 13\nok - part1_naive\n"


def test_a_student_facing_format_added_to_the_table_goes_into_both_folders_of_a_batch(tap):
    from tests.test_render import RESULT
    assert "report.tap" in report_files() and "report.tap" in report_files(student=True)
    files = batch_reports(RESULT)
    assert files["report.tap"] == files[f"{STUDENT_FOLDER}/report.tap"] == _tap(RESULT, None)


def test_a_staff_format_added_to_the_table_stays_out_of_the_student_folder(monkeypatch):
    from tests.test_render import RESULT
    monkeypatch.setitem(FORMATS, "tap", ReportFormat("tap", _tap, "also write TAP to FILE", False, "report.tap"))
    files = batch_reports(RESULT)
    assert "report.tap" in files and f"{STUDENT_FOLDER}/report.tap" not in files


def _hidden_case_tests(tmp_path: Path, *, leak: bool) -> subprocess.CompletedProcess:
    """The hidden-case tests of the two test files, only those of the format ``tap``, run by pytest with
    the throwaway format registered as a plugin before the test files are collected."""
    plugin = tmp_path / f"tap_plugin_{int(leak)}"
    plugin.mkdir()
    (plugin / "scangrade_tap.py").write_text(textwrap.dedent(TAP_MODULE.format(leak=leak)))
    env = {"PYTHONPATH": f"{plugin}:{ROOT}", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "scangrade_tap", "-p", "no:cacheprovider",
                           "-k", "tap", "tests/test_render.py", "tests/test_student_view.py"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_the_hidden_case_tests_check_a_student_facing_format_added_to_the_table(tmp_path):
    safe = _hidden_case_tests(tmp_path, leak=False)
    assert safe.returncode == 0, safe.stdout[-3000:] + safe.stderr[-3000:]
    ran = int(safe.stdout.rsplit(" passed", 1)[0].rsplit("\n", 1)[-1].split()[-1])
    assert ran >= 10, safe.stdout[-2000:]  # the leak tests of both files, each over the new format
    leaky = _hidden_case_tests(tmp_path, leak=True)
    assert leaky.returncode == 1, leaky.stdout[-3000:] + leaky.stderr[-3000:]
    failed = [ln for ln in leaky.stdout.splitlines() if ln.startswith("FAILED")]
    assert any("test_render.py::test_student_views_leak_nothing_of_hidden_cases[" in ln for ln in failed), failed
    assert any("test_student_view.py::" in ln for ln in failed), failed
