"""PrairieLearn's results.json (grader/render/prairielearn.py) on results built by hand: the contract,
case groups, hidden cases, compile errors either way, pending performance, the throughput image and
the 1 MB limit."""

from __future__ import annotations

import base64
import dataclasses
import json
import math

import pytest

from grader.render.prairielearn import LIMIT_BYTES, TEST_KEYS, TOP_LEVEL_KEYS, THROUGHPUT_LABEL, dumps, prairielearn
from grader.core.performance import Performance, Profile, Timing
from grader.core.results import (MESSAGE_BYTES, PART_CASES_BYTES, CaseResult, Mismatch, PartResult, SubmissionResult,
                                 clean_case, clean_part_message)
from tests.render.test_render import (HIDDEN_SECRETS, PART1, PART2, PART4, PART5, PART5_TIMED, PART9, RESULT, case,
                               submission)


def check_contract(doc: dict) -> dict:
    """``doc`` against PrairieLearn's grading results: the documented keys and types, a score in [0, 1]
    (or ``gradable: false`` with format errors), tests with points, images as labelled data URLs,
    under 1 MB as sent. Returns ``doc``."""
    assert set(doc) <= TOP_LEVEL_KEYS, set(doc) - TOP_LEVEL_KEYS
    assert json.loads(dumps(doc)) == doc
    assert len(dumps(doc).encode()) < LIMIT_BYTES
    if doc.get("gradable", True) is False:
        errors = doc["format_errors"]
        assert errors and (isinstance(errors, str) or all(isinstance(e, str) and e for e in errors))
    else:
        assert isinstance(doc["score"], float) and 0.0 <= doc["score"] <= 1.0
    for key in ("message", "output"):
        assert isinstance(doc.get(key, ""), str)
    images = list(doc.get("images", []))
    for test in doc.get("tests", []):
        assert set(test) <= TEST_KEYS and {"name", "points", "max_points"} <= set(test), test
        assert isinstance(test["name"], str) and test["name"]
        assert isinstance(test["points"], float) and isinstance(test["max_points"], float)
        assert 0 <= test["points"] <= test["max_points"]
        for key in ("description", "message", "output"):
            assert isinstance(test.get(key, ""), str)
        images += test.get("images", [])
    for image in images:  # a PNG (a plot) or an SVG (a picture of the HTML report)
        assert set(image) == {"label", "url"}, image
        head, data = image["url"].split(",", 1)
        assert head in ("data:image/png;base64", "data:image/svg+xml;base64"), head
        raw = base64.b64decode(data)
        assert raw.startswith(b"\x89PNG\r\n\x1a\n") if head.endswith("png;base64") else raw.startswith(b"<svg ")
    return doc


def _test(doc: dict, name: str) -> dict:
    (test,) = [t for t in doc["tests"] if t["name"] == name]
    return test


def emulator(*parts: PartResult) -> SubmissionResult:
    return dataclasses.replace(submission(*parts), backend="emulator", backend_reason="--backend emulator",
                               device={"backend": "emulator"}, timed=False,
                               timing_note="not timed: the emulator runs kernels on the CPU",
                               backend_times_kernels=False, backend_uses_gpus=False)


NOT_TIMED = Performance(0.0, 6.0, None, "not timed: the emulator backend cannot time kernels; performance points "
                                       "need a run on a GPU")
PASSED = PartResult(key="part4_any_size", number=4, title="any size", file="sub/part4_any_size.cu", status="pass",
                    cases=(case("n=1 int32", 1, "pass"), case("n=513 int32", 513, "pass"),
                           dataclasses.replace(case("n=513 float32", 513, "pass"), dtype="float32"),
                           case("hidden #1 int32", 777777, "pass", visibility="hidden")),
                    performance=NOT_TIMED)


@pytest.mark.parametrize("result, compile_error", [
    (RESULT, "not-gradable"), (RESULT, "zero"), (submission(PART5_TIMED), "zero"), (emulator(PASSED), "zero"),
    (submission(PART9), "zero"), (submission(PART2, PART9), "zero")],
    ids=["compile-error", "compile-error-zero", "timed", "pending", "missing", "nothing-ran"])
def test_every_document_keeps_to_the_contract(result, compile_error):
    check_contract(prairielearn(result, compile_error=compile_error))


def test_a_compile_error_is_not_gradable_with_the_compilers_message_by_default():
    doc = prairielearn(RESULT)
    assert doc["gradable"] is False and "score" not in doc and "tests" not in doc
    error, missing = doc["format_errors"]  # every problem found, not the compile error alone (issue 52)
    assert error.startswith("Part 2 (part2_blelloch.cu) does not compile") and "no attempt" in error
    assert missing == "Part 9: part9_bonus.cu is missing from the submission"
    assert "leave the file out" in error  # other parts were submitted
    assert 'part2_blelloch.cu(12): error: expected a ";"' in doc["output"]
    assert "\x1b" not in doc["output"] and "int x = <y> & z;" in doc["output"]  # colours dropped, text as is


def test_a_compile_error_under_zero_is_one_graded_test_with_the_compilers_message():
    doc = prairielearn(RESULT, compile_error="zero")
    test = _test(doc, "Part 2 · blelloch_scan · does not compile")
    assert test["points"] == 0 and test["max_points"] == 2
    assert 'error: expected a ";"' in test["output"] and "1 error detected" in test["output"]


def test_no_part_file_at_all_is_not_gradable():
    doc = prairielearn(submission(PART9))
    assert doc["gradable"] is False and doc["format_errors"] == [
        "No part file was found in the submission; expected part9_bonus.cu."]


def test_the_score_is_the_points_over_the_possible_points_and_the_tests_add_up():
    doc = prairielearn(RESULT, compile_error="zero")
    assert doc["score"] == pytest.approx(RESULT.points / RESULT.max_points)
    assert math.fsum(t["points"] for t in doc["tests"]) == pytest.approx(RESULT.points)
    assert math.fsum(t["max_points"] for t in doc["tests"]) == pytest.approx(RESULT.max_points)


def test_one_test_per_part_and_case_group_with_the_configs_points():
    doc = prairielearn(RESULT, compile_error="zero")
    assert [t["name"] for t in doc["tests"]] == [
        "Part 1 · naive_scan · int32", "Part 1 · naive_scan · hidden cases", "Part 1 · naive_scan · performance",
        "Part 2 · blelloch_scan · does not compile", "Part 2 · blelloch_scan · performance",
        "Part 9 · part9_bonus · file missing",
        "Part 4 · scan_tiles + add_tile_offsets · int32", "Part 4 · scan_tiles + add_tile_offsets · performance",
        "Part 5 · scan_single_pass · int32", "Part 5 · scan_single_pass · hidden cases",
        "Part 5 · scan_single_pass · performance"]
    part4 = _test(doc, "Part 4 · scan_tiles + add_tile_offsets · int32")
    assert (part4["points"], part4["max_points"]) == (4.0, 10.0)  # 2 points a case, two of five passed
    assert part4["message"] == "2 of 5 cases passed; 1 timed out, 2 not run"
    assert "KERNELOUT 123" in part4["output"]  # the case the part stopped on carries its full message
    assert "NOT RUN  n = 1048577, 16000000: not run: an earlier step ended in timeout" in part4["output"]
    assert part4["output"].endswith("passed: n = 1, 1025")


def test_visible_cases_are_grouped_by_dtype():
    doc = prairielearn(emulator(PASSED))
    assert [t["name"] for t in doc["tests"]][:3] == [
        "Part 4 · scan_tiles + add_tile_offsets · int32", "Part 4 · scan_tiles + add_tile_offsets · float32",
        "Part 4 · scan_tiles + add_tile_offsets · hidden cases"]


def test_a_failing_case_shows_its_message_n_and_seed():
    out = _test(prairielearn(RESULT, compile_error="zero"), "Part 1 · naive_scan · int32")["output"]
    assert "FAILED  n=33 int32" in out and "out[3] = 5, expected 17" in out and "seed 20261122" in out


@pytest.mark.parametrize("secret", HIDDEN_SECRETS)
def test_hidden_cases_show_name_and_status_only(secret):
    doc = prairielearn(RESULT, compile_error="zero")
    assert secret not in dumps(doc)
    assert _test(doc, "Part 1 · naive_scan · hidden cases")["output"] == "hidden #1 int32: failed\nhidden case 2: passed"
    assert _test(doc, "Part 5 · scan_single_pass · hidden cases")["output"] == "hidden #1 int32: failed"  # crashed


def test_performance_that_waits_for_a_gpu_is_pending_not_failed():
    doc = prairielearn(emulator(PASSED))
    test = _test(doc, "Part 4 · scan_tiles + add_tile_offsets · performance (pending)")
    assert (test["points"], test["max_points"]) == (0.0, 0.0)  # PrairieLearn shows 0/0 as information
    assert test["message"].startswith("pending: 6 points wait for a run on a GPU")
    assert doc["score"] == 1.0  # every case passed; the pending points are not in the denominator
    assert "Performance (6 points) is pending a run on a GPU" in doc["message"]


def test_performance_of_a_failed_part_on_the_emulator_is_lost_not_pending():
    failed = dataclasses.replace(PASSED, status="fail", cases=(case("n=1 int32", 1, "fail"),),
                                 performance=Performance(0.0, 6.0, None, "not timed: performance is scored only "
                                                                         "when every case passes"))
    doc = prairielearn(emulator(failed))
    test = _test(doc, "Part 4 · scan_tiles + add_tile_offsets · performance")
    assert (test["points"], test["max_points"]) == (0.0, 6.0) and doc["score"] == 0.0


def test_a_gpu_run_has_an_image_of_throughput_against_the_reference():
    pytest.importorskip("matplotlib")
    doc = check_contract(prairielearn(submission(PART5_TIMED)))
    (image,) = doc["images"]
    assert image["label"] == THROUGHPUT_LABEL
    perf = _test(doc, "Part 5 · scan_single_pass · performance")
    assert (perf["points"], perf["max_points"]) == (10.0, 10.0)
    assert "timed n=16777216 int32: median 0.25 ms" in perf["output"]
    assert "images" not in prairielearn(submission(PART5_TIMED), plot=False)
    assert "images" not in prairielearn(emulator(PASSED))  # nothing timed, nothing drawn


def test_rejects_an_unknown_compile_error_policy():
    with pytest.raises(ValueError, match="not-gradable, zero"):
        prairielearn(RESULT, compile_error="ungradable")


# --------------------------------------------------------------------------------------- the 1 MB limit

#: Characters that JSON doubles (a quote, a backslash) and one that UTF-8 takes 4 bytes for.
_WORST = '"\\\U0001F600' * (MESSAGE_BYTES // 6)


def _capped_part(number: int, key: str) -> PartResult:
    """A part whose every message is at its cap: 300 failing cases of two dtypes and 100 hidden ones,
    each with a mismatch and 20 warnings, drawn down through the part's budget for case messages as
    the runner does, and a part message at its own cap."""
    budget = [PART_CASES_BYTES]
    cases = []
    for i in range(400):
        hidden = i >= 300
        c = CaseResult(name=f"{'hidden #' if hidden else 'n='}{i} {'int32' if i % 2 else 'float32'}",
                       n=i + 1, dtype="int32" if i % 2 else "float32", seed=5, status="fail", points=0.0,
                       max_points=1.0, message=_WORST * 4, visibility="hidden" if hidden else "visible",
                       mismatch=Mismatch("out", 3, _WORST, _WORST, 9, hint=_WORST), warnings=(_WORST,) * 30)
        cases.append(clean_case(c, budget))
    cases.append(CaseResult(name="timed n=1048576 int32", n=1048576, dtype="int32", seed=5, status="pass",
                            points=0.0, max_points=0.0, timing=Timing(0.02, 0.01, 30, 400.0, 0.2, 0.019, 1.05)))
    return PartResult(key=key, number=number, title=key, file=f"{key}.cu", status="fail",
                      message=clean_part_message(_WORST * 64), cases=tuple(cases),
                      performance=Performance(1.0, 6.0, 1.05, clean_part_message(_WORST * 64)),
                      profile=Profile(1.0, 4.0, clean_part_message(_WORST * 64), worst=_WORST))


def test_a_submission_whose_messages_are_at_their_caps_stays_under_one_megabyte():
    keys = ("part1_naive", "part2_blelloch", "part3_conflict_free", "part4_any_size", "part5_single_pass")
    parts = [_capped_part(i, k) for i, k in enumerate(keys, 1)]
    crashed = dataclasses.replace(parts[1], status="compile-error",
                                  cases=tuple(dataclasses.replace(c, status="not-run") for c in parts[1].cases
                                              if c.timing is None))
    result = submission(parts[0], crashed, *parts[2:])
    unbounded = prairielearn(result, compile_error="zero", limit_bytes=10**9)
    assert len(dumps(unbounded).encode()) > LIMIT_BYTES  # the caps alone would not keep it under the limit
    doc = check_contract(prairielearn(result, compile_error="zero"))
    assert [t["name"] for t in doc["tests"]] == [t["name"] for t in unbounded["tests"]]
    assert [(t["points"], t["max_points"]) for t in doc["tests"]] == \
        [(t["points"], t["max_points"]) for t in unbounded["tests"]]
    assert doc["score"] == unbounded["score"]
    assert any("… (cut:" in t.get("output", "") for t in doc["tests"])
    for policy in ("not-gradable", "zero"):  # the compile error's document too
        check_contract(prairielearn(submission(crashed, crashed), compile_error=policy))
