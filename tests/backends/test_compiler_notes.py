"""Compiler warnings that explain wrong values (issue 20): the host compiler's warnings on the
student's own lines about conversions that change values and results dropped are shown next to a
wrong output, with the dtype that alone fails."""

from __future__ import annotations

import pytest

from grader.backends import Selection
from grader.backends.emulator.build import EmulatorToolchain, compiler_notes
from grader.assignment.config import load_config
from grader.assignment.parts import DTYPES, PARTS, part_header
from grader.grading.runner import grade
from tests.conftest import BROKEN, SOLUTIONS

INT_SUMS = BROKEN / "part5_int_thread_sums.cu"


def _line(path, marker: str) -> int:
    return next(n for n, text in enumerate(path.read_text().splitlines(), 1) if f"LINE:{marker}" in text)


def test_a_float_total_kept_in_an_int_array_gets_the_conversion_note(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("block_size: 64\nseed: 7\nparts:\n  part5_single_pass:\n    block_size: 64\n"
                    "    items_per_thread: 4\n    points_per_case: 1\n    dtypes: [int32, float32]\n"
                    "    sizes: [300]\n")
    (part,) = grade(INT_SUMS, cfg=load_config(path), selection=Selection("emulator", "test"),
                    parts=["part5_single_pass"]).parts
    assert all(c.status == "pass" for c in part.cases if c.dtype == "int32")
    c = next(c for c in part.cases if c.name == "n=300 float32 exact")
    note = (f"int32 passes, float32 fails; the compiler warns: part5_single_pass.cu:{_line(INT_SUMS, 'convert')} "
            "converts float to int")
    assert c.status == "fail" and c.kind == "mismatch" and c.message.endswith(note), c.message
    assert c.findings[0].message.endswith(note)


def test_notes_come_from_the_students_lines_and_only_for_what_changes_values():
    log = "\n".join([
        "part5_single_pass.cu:42:17: warning: conversion from \u2018scan_t\u2019 {aka \u2018float\u2019} to "
        "\u2018int\u2019 may change value [-Wfloat-conversion]",
        "part5_single_pass.cu:43:5: warning: conversion from 'long int' to 'int' may change value [-Wconversion]",
        "part5_single_pass.cu:44:9: warning: conversion from 'int' to 'float' may change value [-Wconversion]",
        "part5_single_pass.cu:45:9: warning: conversion from 'double' to 'float' may change value [-Wfloat-conversion]",
        "part5_single_pass.cu:46:7: warning: value computed is not used [-Wunused-value]",
        "prelude.h:10:3: warning: conversion from 'float' to 'int' may change value [-Wfloat-conversion]",
        "part5_single_pass.cu:42:30: warning: conversion from 'float' to 'int' may change value [-Wfloat-conversion]",
    ])
    assert compiler_notes(log, "part5_single_pass.cu") == [
        "part5_single_pass.cu:42 converts float to int", "part5_single_pass.cu:43 narrows long int to int",
        "part5_single_pass.cu:45 narrows double to float", "part5_single_pass.cu:46 computes a value and drops it"]


@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_the_reference_solutions_get_no_notes(tmp_path, dtype):
    toolchain = EmulatorToolchain()
    for key, spec in PARTS.items():
        source = part_header(spec, block_size=128, dtype=DTYPES[dtype], items_per_thread=4)
        source += (SOLUTIONS / spec.filename).read_text()
        folder = tmp_path / key
        folder.mkdir()
        assert toolchain.compiler_notes(source, filename=spec.filename, workdir=folder) == [], key
