"""The docs and docstrings that list report formats, report files or parts agree with the tables
they come from: :data:`grader.render.formats.FORMATS` (through :func:`report_files`) and
:data:`grader.assignment.parts.PARTS`; so do the result's schema version the docs name
(:data:`grader.core.results.SCHEMA_VERSION`), the commands they list (the CLI's parser) and the
backends' ``device`` keys (:data:`grader.backends.emulator.backend.DEVICE_KEYS`,
:data:`grader.backends.pycuda.device.DEVICE_KEYS`). A row added to a table fails here until the lists
that restate it say so."""

from __future__ import annotations

import re

import pytest

from grader.classwork import store
from grader.classwork.store import RESULT
from grader.assignment.parts import PARTS
from grader.render.class_report import LINKED_REPORTS
from grader.render.formats import FORMATS, STUDENT_FOLDER, report_files

from tests.conftest import ROOT

_FILE_NAME = re.compile(r"[\w-]+\.(?:txt|md|json|xml|html)\b")


def _line_after(text: str, start: str) -> str:
    """The first line of ``text`` that starts (after indentation) with ``start``."""
    line = next((ln for ln in text.splitlines() if ln.strip().startswith(start)), None)
    assert line is not None, f"no line starting with {start!r}"
    return line


def _files(line: str, after: str) -> list[str]:
    """The file names listed on ``line`` after ``after``."""
    return _FILE_NAME.findall(line.split(after, 1)[1])


#: Where a student's folder of a batch is listed: (the text, the staff folder's line start, the student
#: folder's line start).
LAYOUTS = {
    "docs/slurm.md": ((ROOT / "docs" / "slurm.md").read_text(encoding="utf-8"), "<id>/", f"<id>/{STUDENT_FOLDER}/"),
    "grader/classwork/store.py": (store.__doc__, "OUT/<id>/report", f"OUT/<id>/{STUDENT_FOLDER}/"),
}


@pytest.mark.parametrize("where", LAYOUTS)
def test_a_listed_student_folder_holds_the_files_of_the_format_table(where):
    text, staff, student = LAYOUTS[where]
    staff_files = _files(_line_after(text, staff), "/")
    assert sorted(set(staff_files) - {RESULT}) == sorted(report_files()), (where, staff_files)
    # The student-safe set: the names on the student folder's line and on the lines that continue it
    # (indented further, in the right-hand column), leaving out the modules a line cites.
    lines = text.splitlines()
    at = lines.index(_line_after(text, student))
    indent = len(lines[at]) - len(lines[at].lstrip())
    block = [lines[at].split(student, 1)[1]]
    for ln in lines[at + 1:]:
        if len(ln) - len(ln.lstrip()) <= indent + 10:
            break
        block.append(ln)
    listed = [name for name in _FILE_NAME.findall(" ".join(block)) if not name.startswith("grader")]
    assert sorted(set(listed)) == sorted(report_files(student=True)), (where, listed)


def test_the_readme_names_every_report_option_of_the_format_table():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(--[a-z]+) FILE`", readme))
    flags = {f.flag for f in FORMATS.values() if f.flag}
    assert flags <= named, sorted(flags - named)
    assert not {flag for flag in named if flag.removeprefix("--") in FORMATS} - flags


def test_the_readme_names_the_first_and_last_part_files():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    files = [p.filename for p in PARTS.values()]
    assert f"(`{files[0]}` … `{files[-1]}`)" in readme


def test_the_class_report_doc_names_the_reports_a_student_links_to():
    doc = (ROOT / "docs" / "class-report.md").read_text(encoding="utf-8")
    line = _line_after(doc, "error line), and links to the student's")
    assert _FILE_NAME.findall(line) == list(LINKED_REPORTS)


def test_the_stores_terminal_report_is_the_text_formats_file():
    assert store.TERMINAL_REPORT == FORMATS["text"].file


def _schema_keys(model) -> list[str]:
    """Every key a config file may hold, from the models (the sections' and a part's own, nested)."""
    import typing

    keys = []
    for name, field in model.model_fields.items():
        keys.append(field.alias or name)
        for inner in (field.annotation, *typing.get_args(field.annotation)):
            for arg in (inner, *typing.get_args(inner)):
                if hasattr(arg, "model_fields"):
                    keys += _schema_keys(arg)
    return keys


def test_the_shipped_config_names_every_key_of_the_schema():
    """config.yaml is the commented reference a course starts from: every key of the config's models
    is set in it or named in its comments; the private config's keys are in the private template."""
    import re

    from grader.assignment.config import load_config
    from grader.assignment.config_schema import ConfigFile
    from grader.assignment.private_template import private_template

    shipped = (ROOT / "config.yaml").read_text(encoding="utf-8")
    private = private_template(load_config(ROOT / "config.yaml"))
    unnamed = sorted({k for k in _schema_keys(ConfigFile)
                      if not re.search(rf"(?<![\w-]){re.escape(k)}(?![\w-])", shipped)
                      and not re.search(rf"(?<![\w-]){re.escape(k)}:", private)})
    assert not unnamed, f"keys of the config schema that config.yaml never names: {unnamed}"


def _versions_named(text: str) -> list[str]:
    """Every version of ``scangrade.result`` a doc states: ``scangrade.result vN``, the heading's
    ``(schema `scangrade.result`, version N)``, a ``"schema_version": N`` and the field table's row."""
    return re.findall(r"scangrade\.result v(\d+)|schema `scangrade\.result`, version (\d+)"
                      r"|\"schema_version\": (\d+)|\| `schema_version` \| integer \| `(\d+)` \|", text)


@pytest.mark.parametrize("doc", ["docs/architecture.md", "docs/results.md"])
def test_the_docs_name_the_result_schema_version_the_code_writes(doc):
    from grader.core.results import SCHEMA_VERSION

    named = ["".join(groups) for groups in _versions_named((ROOT / doc).read_text(encoding="utf-8"))]
    assert named, f"{doc} names no version of scangrade.result"
    wrong = sorted({v for v in named if v != str(SCHEMA_VERSION)})
    assert not wrong, f"{doc} names scangrade.result version {wrong}; grader.core.results writes {SCHEMA_VERSION}"


def _commands() -> list[str]:
    """The ``scangrade`` commands, from the CLI's parser (its subcommands)."""
    import argparse

    from grader.cli import build_parser

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return list(sub.choices)


def _differences(listed, actual, *, what: str, where: str) -> str:
    missing, extra = sorted(set(actual) - set(listed)), sorted(set(listed) - set(actual))
    return f"{where}: {what} missing {missing}, not in the code {extra}"


def test_the_architecture_doc_names_every_command_of_the_cli():
    line = _line_after((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"), "| `grader/cli.py` |")
    listed = [c.strip() for c in re.search(r"the `scangrade` commands \(([^)]*)\)", line).group(1).split(",")]
    assert sorted(listed) == sorted(_commands()), _differences(listed, _commands(), what="commands",
                                                               where="docs/architecture.md, grader/cli.py's row")


def test_the_readme_has_a_row_for_every_command_of_the_cli():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `scangrade ([\w-]+)", readme, flags=re.M)
    assert set(listed) == set(_commands()), _differences(listed, _commands(), what="commands",
                                                         where="README.md's table of commands")


def _outside_parentheses(text: str) -> str:
    """``text`` without what its parentheses hold (nested ones too)."""
    out, depth = [], 0
    for ch in text:
        depth += ch == "("
        if depth == 0:
            out.append(ch)
        depth -= ch == ")" and depth > 0
    return "".join(out)


@pytest.mark.parametrize("backend, table, sentence", [
    ("emulator", "grader.backends.emulator.backend", ("With `emulator`", "Both:")),
    ("pycuda", "grader.backends.pycuda.device", ("With `pycuda`", "and after timing")),
])
def test_the_results_doc_names_every_device_key_of_each_backend(backend, table, sentence):
    """docs/results.md, the ``device`` field: the keys listed "With `emulator`" are the emulator's
    :data:`~grader.backends.emulator.backend.DEVICE_KEYS`, and those "With `pycuda`" (before what timing
    adds) the GPU backend's :data:`~grader.backends.pycuda.device.DEVICE_KEYS`: what each ``describe()``
    returns, in its order."""
    import importlib

    keys = [key for key, _ in importlib.import_module(table).DEVICE_KEYS]
    row = _line_after((ROOT / "docs" / "results.md").read_text(encoding="utf-8"), "| `device` |")
    start, end = sentence
    listed = re.findall(r"`([^`]+)`", _outside_parentheses(row.split(start, 1)[1].split(end, 1)[0]))
    assert listed == keys, _differences(listed, keys, what=f"the {backend} backend's device keys",
                                        where="docs/results.md, the device field")
