"""The results vocabulary (grader/core/results.py): StrEnum statuses, and the failure ``kind`` of each case,
from the grader's checks through the worker protocol into JSON and the class report."""

from __future__ import annotations

import json
import shutil

from grader.backends import Selection
from grader.assignment.config import load_config
from grader.render.class_report import part_failures
from grader.core.results import (CASE_STATUSES, PART_STATUSES, CaseResult, CaseStatus, FailureKind, PartStatus,
                            result_from_dict)
from grader.grading.runner import grade
from tests.conftest import BROKEN, write_config

EMULATOR = Selection("emulator", "test")


def test_statuses_are_str_enums_with_the_json_strings():
    assert CASE_STATUSES == ("pass", "fail", "error", "timeout", "crash", "not-run")
    assert PART_STATUSES == ("pass", "fail", "compile-error", "missing", "timeout", "crash", "error")
    assert CaseStatus.NOT_RUN == "not-run" and f"{PartStatus.COMPILE_ERROR}" == "compile-error"
    assert json.dumps([CaseStatus.NOT_RUN, FailureKind.WRONG_AFTER_TIMING]) == '["not-run", "wrong-after-timing"]'


def test_every_case_says_what_kind_of_failure_it_was(tmp_path):
    path = write_config(tmp_path, block_size=64, sizes={
        "part1_naive": [5], "part2_blelloch": [5], "part3_conflict_free": [5], "part4_any_size": [5],
        "part5_single_pass": [5]})
    path.write_text(path.read_text().replace("  part5_single_pass:\n", "  part5_single_pass:\n    items_per_thread: 4\n"))
    cfg = load_config(path)
    folder = tmp_path / "sub"
    folder.mkdir()
    for key, kernel in [("part1_naive", "part1_oob_write"), ("part2_blelloch", "part2_modifies_input"),
                        ("part3_conflict_free", "part3_gems_macro"), ("part4_any_size", "part4_compile_error"),
                        ("part5_single_pass", "part5_no_ticket")]:
        shutil.copy(BROKEN / f"{kernel}.cu", folder / f"{key}.cu")
    result = grade(folder, cfg=cfg, selection=EMULATOR, checks=False)
    kinds = {p.key: [(c.n, c.status, c.kind) for c in p.cases] for p in result.parts}
    assert kinds["part1_naive"] == [(1, "fail", "out-of-bounds"), (5, "fail", "out-of-bounds"), (64, "pass", None)]
    assert {k for _, _, k in kinds["part2_blelloch"]} == {"input-modified"}
    assert {(s, k) for _, s, k in kinds["part3_conflict_free"]} == {("pass", None)}  # a GPU clamps the shift
    assert {(s, k) for _, s, k in kinds["part4_any_size"]} == {("not-run", "compile-error")}
    assert {(s, k) for _, s, k in kinds["part5_single_pass"]} == {("fail", "ticket")}
    assert result.parts[0].cases[0].status is CaseStatus.FAIL and result.parts[3].status is PartStatus.COMPILE_ERROR
    wire = json.loads(result.to_json())
    assert [c["kind"] for c in wire["parts"][0]["cases"]] == ["out-of-bounds", "out-of-bounds", None]
    again = result_from_dict(wire)
    assert again.parts == result.parts


def test_a_wrong_output_is_a_mismatch_and_a_missing_file_says_so(tmp_path):
    cfg = load_config(write_config(tmp_path, sizes={"part1_naive": [5], "part4_any_size": [5, 300]}))
    folder = tmp_path / "sub"
    folder.mkdir()
    shutil.copy(BROKEN / "part4_inclusive.cu", folder / "part4_any_size.cu")
    parts = {p.key: p for p in grade(folder, cfg=cfg, selection=EMULATOR, checks=False).parts}
    assert {(c.status, c.kind) for c in parts["part4_any_size"].cases} == {("fail", "mismatch")}
    assert {(c.status, c.kind) for c in parts["part1_naive"].cases} == {("not-run", "missing")}
    assert [f.kind for f in part_failures("s", parts["part4_any_size"])] == ["wrong-result"]


def test_the_class_report_groups_by_kind_not_by_message():
    case = CaseResult(name="n=5 int32", n=5, dtype="int32", seed=7, status="fail", points=0.0, max_points=1.0,
                      message="anything at all", kind="race")
    from grader.core.results import PartResult
    part = PartResult(key="part1_naive", number=1, title="naive", file="part1_naive.cu", status="fail", cases=(case,))
    assert [f.kind for f in part_failures("s", part)] == ["race"]
    ticket = CaseResult(**{**case.__dict__, "kind": "ticket"})
    assert [f.kind for f in part_failures("s", PartResult(**{**part.__dict__, "cases": (ticket,)}))] == ["wrong-result"]
    shift = CaseResult(**{**case.__dict__, "status": "error", "kind": "undefined-shift"})
    assert [f.kind for f in part_failures("s", PartResult(**{**part.__dict__, "cases": (shift,)}))] == \
        ["undefined-shift"]


def test_a_status_given_as_its_string_becomes_the_member_and_an_unknown_one_is_refused():
    import pytest
    from grader.core.results import PartResult
    case = CaseResult(name="n=1 int32", n=1, dtype="int32", seed=7, status="not-run", points=0.0, max_points=1.0)
    assert case.status is CaseStatus.NOT_RUN
    with pytest.raises(ValueError, match="case status 'passed' is not one of: pass, fail, error, timeout, crash, "
                                         "not-run"):
        CaseResult(name="n=1 int32", n=1, dtype="int32", seed=7, status="passed", points=1.0, max_points=1.0)
    with pytest.raises(ValueError, match="part status 'ok' is not one of: pass, fail, compile-error"):
        PartResult(key="part1_naive", number=1, title="naive", file="part1_naive.cu", status="ok")


def test_the_renderers_never_import_the_grading_code():
    import subprocess
    import sys
    from tests.conftest import ROOT
    script = """
import sys
from grader.core.results import CaseResult, PartResult, SubmissionResult
from grader.render import class_report, gradescope, junit_xml, markdown, render_text
case = CaseResult(name="n=5 int32", n=5, dtype="int32", seed=7, status="fail", points=0.0, max_points=1.0,
                  message="the kernel failed (race): x", kind="race")
part = PartResult(key="part1_naive", number=1, title="naive", file="part1_naive.cu", status="fail", cases=(case,))
result = SubmissionResult(submission="s", backend="emulator", backend_reason="t", device={}, config="c.yaml",
                          backend_times_kernels=False, backend_uses_gpus=False,  # the emulator's traits
                          seed=7, block_size=128, parts=(part,), scangrade_version="0", started_at="", elapsed_s=0.0)
for render in (gradescope, junit_xml, markdown, render_text):
    render(result)
assert "race" in class_report([("s", result)])
print(sorted(m for m in sys.modules if m in ("grader.grading.case", "grader.grading.runner", "grader.grading.part_runner",
                                            "grader.grading.worker_process", "grader.grading.worker")))
"""
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
