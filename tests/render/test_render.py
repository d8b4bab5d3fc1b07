"""The renderers (Gradescope, JUnit XML, Markdown) against their formats, on results built by hand.

No grading runs: every result here is made from the dataclasses of :mod:`grader.core.results`, with one
part per situation a renderer must handle (failures with a mismatch, a timed case, a performance
score, a compile error, a timeout, a crash on a hidden case, a missing file, hidden cases).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

from grader.render import gradescope, junit_xml, markdown
from grader.render.formats import FORMATS
from grader.core.performance import Performance, Timing
from grader.core.results import CaseResult, Mismatch, PartResult, SubmissionResult

BASE_SEED = 20261122
HIDDEN_SEED = 90917
# Everything about hidden cases that must never reach a student.
HIDDEN_SECRETS = ["777777", "888883", "999331", str(HIDDEN_SEED), "SECRETMSG", "SECRETOUT", "31337", "27182",
                  "0.7071", "10.06"]

MISMATCH_MSG = "out[3] = 5, expected 17; 30 of 33 elements wrong <b>bold</b> | pipe"
COMPILER_OUTPUT = ('part2_blelloch.cu(12): error: expected a ";"\n'
                   "\x1b[31m  int x = <y> & z;\x1b[0m\n1 error detected")
TIMEOUT_FIRST = "timed out after 300 s (timeouts.part_s) during case n=65537: the kernel may never finish"
TIMEOUT_MSG = TIMEOUT_FIRST + "\nlast output of the kernel:\nKERNELOUT 123"


def case(name: str, n: int, status: str, pts: float = 1.0, **kw) -> CaseResult:
    kw.setdefault("seed", BASE_SEED)
    kw.setdefault("elapsed_ms", 2.5)
    return CaseResult(name=name, n=n, dtype="int32", status=status, points=pts if status == "pass" else 0.0,
                      max_points=pts, **kw)


def timed(n: int, status: str = "pass", timing: Timing | None = None, **kw) -> CaseResult:
    """A timing run as the worker reports it: named ``timed n=...``, worth no correctness points."""
    return case(f"timed n={n} int32", n, status, 0.0, timing=timing, **kw)


def not_timed(why: str = "not timed: the part did not finish", pts: float = 4.0) -> Performance:
    return Performance(0.0, pts, None, why)


TIMING = Timing(median_ms=0.0123, spread=0.021, runs=30, gbps=333.3, copy_fraction=0.42, reference_ms=0.011,
                ratio=1.118, cpu_speedup=55.0)
HIDDEN_TIMING = Timing(median_ms=0.7071, spread=0.03, runs=30, gbps=10.06)

PART1 = PartResult(
    key="part1_naive", number=1, title="naive inclusive scan", file="sub/part1_naive.cu", status="fail",
    cases=(
        case("n=1 int32", 1, "pass", elapsed_ms=1.5),
        case("n=33 int32", 33, "fail", message=MISMATCH_MSG,
             mismatch=Mismatch("out", 3, 5, 17, 30, first_wrong_tile=0, hint="inclusive where exclusive is asked")),
        case("hidden #1 int32", 777777, "fail", seed=HIDDEN_SEED, visibility="hidden",
             message="out[9] = 31337, expected 27182 SECRETMSG", mismatch=Mismatch("out", 9, 31337, 27182, 4)),
        # a hidden case whose name gives its size away, and which (unlike the runner's) carries a timing
        case("n=888883 int32", 888883, "pass", seed=HIDDEN_SEED, visibility="hidden", timing=HIDDEN_TIMING),
        timed(512, timing=TIMING),
    ),
    performance=Performance(points=7.5, max_points=10.0, ratio=1.4, message="ratio 1.40: 7.5 of 10 points"),
)
PART2 = PartResult(
    key="part2_blelloch", number=2, title="Blelloch scan", file="sub/part2_blelloch.cu", status="compile-error",
    message=COMPILER_OUTPUT,
    cases=tuple(case(f"n={n} int32", n, "not-run", message="not run: part2_blelloch.cu does not compile")
                for n in (1, 33)),
    performance=not_timed(),
)
PART9 = PartResult(  # a part this grader does not define: labelled by its key
    key="part9_bonus", number=9, title="a bonus part", file="part9_bonus.cu", status="missing",
    message="part9_bonus.cu is missing from the submission",
    cases=tuple(case(f"n={n} int32", n, "not-run", message="not run: part9_bonus.cu is missing") for n in (5, 6)),
)
PART4 = PartResult(
    key="part4_any_size", number=4, title="any size", file="sub/part4_any_size.cu", status="timeout",
    message=TIMEOUT_MSG,
    cases=(case("n=1 int32", 1, "pass", 2.0), case("n=1025 int32", 1025, "pass", 2.0),
           case("n=65537 int32", 65537, "timeout", 2.0, message=TIMEOUT_FIRST),
           case("n=1048577 int32", 1048577, "not-run", 2.0, message="not run: an earlier step ended in timeout"),
           case("n=16000000 int32", 16000000, "not-run", 2.0, message="not run: an earlier step ended in timeout")),
    performance=not_timed(pts=6.0),
)
PART5 = PartResult(
    key="part5_single_pass", number=5, title="single-pass scan", file="sub/part5_single_pass.cu", status="crash",
    message="the process running this part crashed (SIGSEGV) during case hidden #1 int32\n"
            "last output of the kernel:\nSECRETOUT",
    cases=(case("n=4096 int32", 4096, "pass"),
           case("hidden #1 int32", 999331, "crash", seed=HIDDEN_SEED, visibility="hidden",
                message="the process running this part crashed (SIGSEGV) during case hidden #1 int32"),
           case("n=16777216 int32", 16777216, "not-run", message="not run: an earlier step ended in crash")),
    performance=not_timed(pts=10.0),
)
PART5_TIMED = PartResult(
    key="part5_single_pass", number=5, title="single-pass scan", file="sub/part5_single_pass.cu", status="pass",
    cases=(case("n=4096 int32", 4096, "pass"),
           timed(1048576, timing=Timing(0.031, 0.01, 30, 270.6, ratio=0.9)),
           timed(16777216, timing=Timing(0.25, 0.01, 30, 536.9, ratio=0.95))),
    performance=Performance(10.0, 10.0, 0.93, "all points"),
)


def submission(*parts: PartResult, seed: int = BASE_SEED, elapsed_s: float = 12.6) -> SubmissionResult:
    return SubmissionResult(submission="sub", backend="pycuda", backend_reason="--backend pycuda",
                            device={"backend": "pycuda", "device": "NVIDIA H100 80GB HBM3",
                                    "compute_capability": "9.0"},
                            config="config.yaml", seed=seed, block_size=512, parts=parts,
                            scangrade_version="0.1.0", started_at="2026-11-22T02:43:59+00:00", elapsed_s=elapsed_s,
                            timed=True, timing_note="timed on the GPU")


RESULT = submission(PART1, PART2, PART9, PART4, PART5)


# ----------------------------------------------------------------------------------------- JUnit XML

@pytest.fixture(scope="module")
def junit_root() -> ET.Element:
    return ET.fromstring(junit_xml(RESULT).encode("utf-8"))


def _suite(root: ET.Element, key: str) -> ET.Element:
    (suite,) = [s for s in root.findall("testsuite") if s.get("name") == key]
    return suite


def _testcase(root: ET.Element, key: str, name: str) -> ET.Element:
    (tc,) = [t for t in _suite(root, key).findall("testcase") if t.get("name") == name]
    return tc


def test_junit_has_one_suite_per_part_in_order(junit_root):
    assert junit_root.tag == "testsuites"
    assert [s.get("name") for s in junit_root.findall("testsuite")] == [p.key for p in RESULT.parts]


@pytest.mark.parametrize("key, tests, failures, errors, skipped", [
    ("part1_naive", 6, 3, 0, 0),        # 5 cases + performance; fail, hidden fail, performance below full points
    ("part2_blelloch", 2, 0, 1, 1),     # compile error: one errored testcase; performance not timed
    ("part9_bonus", 1, 0, 1, 0),        # missing file: one errored testcase
    ("part4_any_size", 6, 0, 1, 3),     # timeout on the third case, two not run, performance not timed
    ("part5_single_pass", 4, 0, 1, 2),  # crash on a hidden case, one not run, performance not timed
])
def test_junit_suite_counts(junit_root, key, tests, failures, errors, skipped):
    suite = _suite(junit_root, key)
    cases = suite.findall("testcase")
    assert (int(suite.get("tests")), int(suite.get("failures")), int(suite.get("errors")),
            int(suite.get("skipped"))) == (tests, failures, errors, skipped)
    assert len(cases) == tests
    assert sum(tc.find("failure") is not None for tc in cases) == failures
    assert sum(tc.find("error") is not None for tc in cases) == errors
    assert sum(tc.find("skipped") is not None for tc in cases) == skipped


@pytest.mark.parametrize("attr, total", [("tests", 19), ("failures", 3), ("errors", 4)])
def test_junit_totals_add_up(junit_root, attr, total):
    assert int(junit_root.get(attr)) == total == sum(int(s.get(attr)) for s in junit_root.findall("testsuite"))


def test_junit_total_time_is_the_run_time(junit_root):
    assert junit_root.get("time") == "12.600"


@pytest.mark.parametrize("key, name, element", [
    ("part1_naive", "n=1 int32", None),
    ("part1_naive", "n=33 int32", "failure"),
    ("part1_naive", "hidden #1 int32", "failure"),
    ("part1_naive", "timed n=512 int32", None),
    ("part1_naive", "performance", "failure"),
    ("part2_blelloch", "compile-error", "error"),
    ("part2_blelloch", "performance", "skipped"),
    ("part9_bonus", "missing", "error"),
    ("part4_any_size", "n=1025 int32", None),
    ("part4_any_size", "n=65537 int32", "error"),
    ("part4_any_size", "n=16000000 int32", "skipped"),
    ("part5_single_pass", "hidden #1 int32", "error"),
    ("part5_single_pass", "n=16777216 int32", "skipped"),
])
def test_junit_element_per_status(junit_root, key, name, element):
    tc = _testcase(junit_root, key, name)
    assert tc.get("classname") == key
    outcomes = [c.tag for c in tc if c.tag in ("failure", "error", "skipped")]
    assert outcomes == ([element] if element else [])


def test_junit_failure_carries_message_and_mismatch(junit_root):
    failure = _testcase(junit_root, "part1_naive", "n=33 int32").find("failure")
    assert failure.get("message") == MISMATCH_MSG
    assert "index 3" in failure.text and "expected 17" in failure.text and "inclusive where" in failure.text


def test_junit_compile_error_body_is_compiler_output(junit_root):
    error = _testcase(junit_root, "part2_blelloch", "compile-error").find("error")
    assert error.get("type") == "compile-error"
    assert error.get("message") == COMPILER_OUTPUT.splitlines()[0]
    assert "int x = <y> & z;" in error.text            # escaped on the way out, back intact
    assert "\x1b" not in error.text                     # colour codes dropped


def test_junit_writes_characters_xml_cannot_hold_as_escapes():
    part = PartResult(key="part2_blelloch", number=2, title="t", file="f.cu", status="compile-error",
                      message="bad\x00byte \ufffe", cases=())
    error = ET.fromstring(junit_xml(submission(part))).find("testsuite/testcase/error")
    assert error.text == "bad\\x00byte \\ufffe"


def test_junit_timeout_case_carries_the_part_message(junit_root):
    error = _testcase(junit_root, "part4_any_size", "n=65537 int32").find("error")
    assert error.get("type") == "timeout" and error.get("message") == TIMEOUT_FIRST
    assert "KERNELOUT 123" in error.text


@pytest.mark.parametrize("name, seconds", [("n=1 int32", "0.002"), ("n=33 int32", "0.003")])  # 1.5 ms, 2.5 ms
def test_junit_times_are_seconds(junit_root, name, seconds):
    assert _testcase(junit_root, "part1_naive", name).get("time") == seconds


def test_junit_keeps_hidden_details_for_course_ci(junit_root):
    assert "SECRETMSG" in _testcase(junit_root, "part1_naive", "hidden #1 int32").find("failure").get("message")


def test_junit_places_a_compile_error_on_the_students_line(junit_root):
    tc = _testcase(junit_root, "part2_blelloch", "compile-error")
    assert (tc.get("file"), tc.get("line")) == ("sub/part2_blelloch.cu", "12")  # nvcc's FILE(LINE): error
    host = PartResult(key="part4_any_size", number=4, title="t", file="a/part4_any_size.cu", status="compile-error",
                      message="part4_any_size.cu does not compile (host C++ compiler under the CPU emulator): "
                              "scan.h:3:1: error: in the grader's header\npart4_any_size.cu:61:21: error: x")
    tc = ET.fromstring(junit_xml(submission(host))).find("testsuite/testcase")
    assert (tc.get("file"), tc.get("line")) == ("a/part4_any_size.cu", "61")  # the student's file, not another


def test_junit_places_a_case_by_its_first_finding_with_a_line_in_the_students_file():
    from grader.core.results import CaseFinding
    findings = (CaseFinding("race", "elsewhere", file="scan_common.cuh", line=3),
                CaseFinding("out-of-bounds", "here", file="part1_naive.cu", line=42),
                CaseFinding("mismatch", "wrong"))
    part = dataclasses.replace(PART1, cases=(
        case("n=3 int32", 3, "fail", message="race", kind="race", findings=findings),
        case("n=5 int32", 5, "fail", message="out[1] = 2, expected 3", kind="mismatch"),
        case("n=7 int32", 7, "pass", findings=findings[1:2])))
    root = ET.fromstring(junit_xml(submission(part)))
    places = {tc.get("name"): (tc.get("file"), tc.get("line")) for tc in root.iter("testcase")}
    assert places["n=3 int32"] == ("sub/part1_naive.cu", "42")
    assert places["n=5 int32"] == places["n=7 int32"] == (None, None)  # a wrong value has no line; a pass no failure


def test_junit_timed_case_reports_timing(junit_root):
    out = _testcase(junit_root, "part1_naive", "timed n=512 int32").find("system-out").text
    assert "0.0123 ms" in out and "333.3 GB/s" in out and "1.12× the reference" in out


# ----------------------------------------------------------------------------------------- Gradescope

# The fields Gradescope's autograder specification documents, and their JSON types.
GS_TOP = {"score": (int, float), "execution_time": int, "output": str, "output_format": str,
          "test_output_format": str, "test_name_format": str, "visibility": str, "stdout_visibility": str,
          "extra_data": dict, "tests": list, "leaderboard": list}
GS_TEST = {"score": (int, float), "max_score": (int, float), "status": str, "name": str, "name_format": str,
           "number": str, "output": str, "output_format": str, "tags": list, "visibility": str, "extra_data": dict}
GS_LEADERBOARD = {"name": str, "value": (int, float, str), "order": str}
GS_VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


def _check_fields(obj: dict, spec: dict) -> None:
    assert set(obj) <= set(spec), set(obj) - set(spec)
    for key, value in obj.items():
        assert isinstance(value, spec[key]) and not isinstance(value, bool), key


@pytest.fixture(scope="module")
def gs() -> dict:
    return gradescope(RESULT)


def _gs_test(gs: dict, name: str) -> dict:
    (test,) = [t for t in gs["tests"] if t["name"] == name]
    return test


@pytest.mark.parametrize("result", [RESULT, submission(PART5_TIMED)], ids=["mixed", "timed"])
def test_gradescope_top_level_fields_are_documented(result):
    gs = gradescope(result)
    assert json.loads(json.dumps(gs, allow_nan=False)) == gs  # JSON as it is, strict JSON at that
    _check_fields(gs, GS_TOP)
    assert gs["visibility"] in GS_VISIBILITY and gs["stdout_visibility"] in GS_VISIBILITY


ALL_GS_TESTS = gradescope(RESULT)["tests"] + gradescope(submission(PART5_TIMED))["tests"]


@pytest.mark.parametrize("test", ALL_GS_TESTS, ids=[t["name"] for t in ALL_GS_TESTS])
def test_gradescope_test_fields_are_documented(test):
    _check_fields(test, GS_TEST)
    assert test["status"] in ("passed", "failed")
    assert re.fullmatch(r"\d+\.\d+", test["number"])
    assert 0 <= test["score"] <= test["max_score"]
    assert test.get("visibility", "visible") in GS_VISIBILITY


def test_gradescope_leaderboard_fields_are_documented():
    (entry,) = gradescope(submission(PART5_TIMED))["leaderboard"]
    _check_fields(entry, GS_LEADERBOARD)
    assert entry["order"] in ("asc", "desc")


@pytest.mark.parametrize("result", [RESULT, submission(PART5_TIMED), submission(PART2, PART9)],
                         ids=["mixed", "timed", "nothing-ran"])
def test_gradescope_scores_add_up(result):
    gs = gradescope(result)
    assert gs["score"] == pytest.approx(result.points)
    assert math.fsum(t["score"] for t in gs["tests"]) == pytest.approx(result.points)
    assert math.fsum(t["max_score"] for t in gs["tests"]) == pytest.approx(result.max_points)


@pytest.mark.parametrize("elapsed, expected", [(12.6, 13), (0.2, 0), (59.5, 60)])
def test_gradescope_execution_time_is_whole_seconds(elapsed, expected):
    assert gradescope(submission(PART5_TIMED, elapsed_s=elapsed))["execution_time"] == expected


def test_gradescope_leaves_the_execution_time_out_where_hidden_cases_ran():
    assert "execution_time" not in gradescope(submission(PART1, elapsed_s=12.6))


@pytest.mark.parametrize("name, number, score, max_score, status", [
    ("Part 1 · naive_scan · int32", "1.1", 1.0, 2.0, "failed"),          # n=1 passed, n=33 failed
    ("Part 1 · naive_scan · hidden cases", "1.2", 1.0, 2.0, "failed"),   # one failed, one passed
    ("Part 1 · naive_scan · performance", "1.3", 7.5, 10.0, "failed"),
    ("Part 2 · blelloch_scan · does not compile", "2.1", 0.0, 2.0, "failed"),
    ("Part 2 · blelloch_scan · performance", "2.2", 0.0, 4.0, "failed"),
    ("Part 9 · part9_bonus · file missing", "9.1", 0.0, 2.0, "failed"),
    ("Part 4 · scan_tiles + add_tile_offsets · int32", "4.1", 4.0, 10.0, "failed"),
    ("Part 4 · scan_tiles + add_tile_offsets · performance", "4.2", 0.0, 6.0, "failed"),
    ("Part 5 · scan_single_pass · int32", "5.1", 1.0, 2.0, "failed"),
    ("Part 5 · scan_single_pass · hidden cases", "5.2", 0.0, 1.0, "failed"),
    ("Part 5 · scan_single_pass · performance", "5.3", 0.0, 10.0, "failed"),
])
def test_gradescope_tests(gs, name, number, score, max_score, status):
    test = _gs_test(gs, name)
    assert (test["number"], test["score"], test["max_score"], test["status"]) == (number, score, max_score, status)


def test_gradescope_has_one_test_per_part_and_dtype_and_the_hidden_cases(gs):
    # part 1: int32, hidden cases, performance; part 2: compile error, performance; part 9: missing;
    # part 4: int32, performance; part 5: int32, hidden cases, performance
    assert len(gs["tests"]) == 3 + 2 + 1 + 2 + 3


def test_gradescope_groups_are_prairielearns_with_the_same_points():
    from grader.render.prairielearn import prairielearn
    mixed = dataclasses.replace(PART1, cases=PART1.cases + tuple(
        dataclasses.replace(c, dtype="float32", name=c.name.replace("int32", "float32"))
        for c in PART1.cases if c.visibility == "visible" and not c.name.startswith("timed")))
    for result in (RESULT, submission(mixed, PART5_TIMED)):
        pl = {t["name"]: (t["points"], t["max_points"]) for t in prairielearn(result, compile_error="zero")["tests"]}
        gs = {t["name"]: (t["score"], t["max_score"]) for t in gradescope(result)["tests"]}
        groups = [name for name in pl if not name.endswith(("performance", "bank conflicts"))]
        assert groups and {name: pl[name] for name in groups} == {name: gs[name] for name in groups}
    assert [t["name"] for t in gradescope(submission(mixed))["tests"]] == [
        "Part 1 · naive_scan · int32", "Part 1 · naive_scan · float32", "Part 1 · naive_scan · hidden cases",
        "Part 1 · naive_scan · performance"]


def test_gradescope_group_output_lists_the_failing_cases_and_the_sizes_that_passed():
    three = dataclasses.replace(PART1, cases=(
        case("n=1 int32", 1, "pass"), case("n=33 int32", 33, "fail", message=MISMATCH_MSG),
        case("n=65 int32", 65, "fail", message="out[64] = 0, expected 9"), case("n=512 int32", 512, "pass")))
    (group, _) = gradescope(submission(three))["tests"]
    lines = group["output"].splitlines()
    assert lines[1] == "2 of 4 cases passed; 2 failed"
    assert "FAILED  n=33 int32" in lines and "FAILED  n=65 int32" in lines and "passed: n = 1, 512" in lines
    assert MISMATCH_MSG in group["output"] and "out[64] = 0, expected 9" in group["output"]


def test_gradescope_compile_error_is_one_failing_test_with_the_compiler_output(gs):
    test = _gs_test(gs, "Part 2 · blelloch_scan · does not compile")
    assert "error: expected a" in test["output"] and "int x = <y> & z;" in test["output"]
    assert "\x1b" not in test["output"]  # colour codes dropped: Gradescope shows test output as text


def test_gradescope_failure_output_has_the_message_and_seed(gs):
    output = _gs_test(gs, "Part 1 · naive_scan · int32")["output"]
    assert MISMATCH_MSG in output and f"seed {BASE_SEED}" in output


def test_gradescope_timeout_case_carries_the_part_message(gs):
    output = _gs_test(gs, "Part 4 · scan_tiles + add_tile_offsets · int32")["output"]
    assert "TIMED OUT  n=65537 int32" in output and "KERNELOUT 123" in output
    assert "NOT RUN  n = 1048577, 16000000: not run: an earlier step ended in timeout" in output


def test_gradescope_timed_runs_are_in_the_performance_test(gs):
    output = _gs_test(gs, "Part 1 · naive_scan · performance")["output"]
    assert "timed n=512 int32: " in output and "0.0123 ms" in output and "42 % of copy bandwidth" in output
    assert not [t for t in gs["tests"] if "timed" in t["name"]]


def test_gradescope_hidden_cases_are_shown_by_name_and_status(gs):
    test = _gs_test(gs, "Part 5 · scan_single_pass · hidden cases")
    assert "visibility" not in test  # Gradescope's "hidden" would hide it, its status and the total score
    assert test["status"] == "failed" and test["output"].endswith("\nhidden #1 int32: failed")  # it crashed: not said
    assert "only names and results are shown" in test["output"]
    assert _gs_test(gs, "Part 1 · naive_scan · hidden cases")["output"].endswith(
        "\nhidden #1 int32: failed\nhidden case 2: passed")


def test_gradescope_hidden_case_visibility_applies_to_hidden_tests_only():
    gs = gradescope(RESULT, hidden_case_visibility="after_due_date")
    marked = {t["name"]: t["visibility"] for t in gs["tests"] if "visibility" in t}
    assert marked == {"Part 1 · naive_scan · hidden cases": "after_due_date",
                      "Part 5 · scan_single_pass · hidden cases": "after_due_date"}


@pytest.mark.parametrize("kwargs", [{"visibility": "public"}, {"stdout_visibility": "yes"},
                                    {"hidden_case_visibility": "secret"}])
def test_gradescope_rejects_undocumented_visibility(kwargs):
    with pytest.raises(ValueError, match="must be one of"):
        gradescope(RESULT, **kwargs)


def test_gradescope_leaderboard_is_the_largest_timed_case_of_the_challenge_part():
    gs = gradescope(submission(PART1, PART5_TIMED))
    assert gs["leaderboard"] == [{"name": "Part 5 time (ms)", "value": 0.25, "order": "asc"}]


@pytest.mark.parametrize("result, part", [
    (submission(PART5_TIMED), None),               # no leaderboard asked for
    (submission(PART5_TIMED), "part4_any_size"),   # the part asked for is not graded
    (RESULT, "part5_single_pass"),                 # the challenge part crashed: nothing timed
    (submission(PartResult(**{**PART5_TIMED.__dict__, "status": "fail",
                              "cases": PART5_TIMED.cases + (timed(268435456, "fail", message="wrong"),)})),
     "part5_single_pass"),                         # a timed run gave wrong output
], ids=["none", "absent", "crashed", "timed-run-failed"])
def test_gradescope_no_leaderboard(result, part):
    assert "leaderboard" not in gradescope(result, leaderboard_part=part)


@pytest.mark.parametrize("part", RESULT.parts, ids=lambda p: p.key)
def test_gradescope_top_level_output_summarises_each_part(gs, part):
    assert f"Part {part.number} ({part.title}): {part.points:g}/{part.max_points:g} points" in gs["output"]


def test_gradescope_top_level_output_has_total_and_seed(gs):
    assert f"{RESULT.points:g}/{RESULT.max_points:g} points" in gs["output"]
    assert f"seed {BASE_SEED}" in gs["output"]


# ----------------------------------------------------------------------------------------- Markdown

@pytest.fixture(scope="module")
def md() -> str:
    return markdown(RESULT)


def _section(md: str, number: int) -> str:
    return md.split(f"### Part {number}: ")[1].split("\n### ")[0]


@pytest.mark.parametrize("part", RESULT.parts, ids=lambda p: p.key)
def test_markdown_has_a_section_per_part(md, part):
    assert f"### Part {part.number}: {part.title} — {part.points:g}/{part.max_points:g} points" in md


@pytest.mark.parametrize("number, text", [
    (1, "expected 17; 30 of 33 elements wrong"),          # the mismatch
    (1, "ratio 1.40: 7.5 of 10 points"),                  # the performance score
    (2, "int x = <y> & z;"),                              # compiler output, verbatim in a code block
    (9, "part9_bonus.cu is missing from the submission"),  # the missing file, in a code block
    (4, "KERNELOUT 123"),                                 # the timed-out case's full message
    (4, "2 case(s) not run: an earlier step ended in timeout."),  # what did not run, and why
    (4, "| n=16000000 int32 | not run | 0/2 |"),          # ... case by case
    (5, "| hidden #1 int32 | failed | 0/1 | hidden case: details are not shown |"),  # it crashed: not said
])
def test_markdown_shows_each_failure(md, number, text):
    assert text in _section(md, number)


def test_markdown_header_names_backend_and_device(md):
    header = md.split("\n| Part |")[0]
    assert "pycuda" in header and "NVIDIA H100 80GB HBM3" in header and str(BASE_SEED) in header


def test_markdown_overview_has_a_row_per_part_and_a_total(md):
    overview = md.split("\n| Part |")[1].split("\n\n")[0]
    rows = [r for r in overview.splitlines() if r.startswith("| ") and not r.startswith("| ---")]
    assert len(rows) == len(RESULT.parts) + 1
    assert rows[-1].endswith(f"| **{RESULT.points:g}/{RESULT.max_points:g}** |")


def test_markdown_timing_table_when_timed(md):
    part1 = _section(md, 1)
    assert "| Timed case | Status | ms | spread | GB/s | % of copy | × reference | × CPU |" in part1
    assert "| timed n=512 int32 | passed | 0.0123 | ±2.1 % | 333.3 | 42 % | 1.12× | 55× |" in part1
    assert "| hidden case 2 | passed | 1/1 |  |" in part1  # a hidden case's timing is not shown
    assert "GB/s" not in _section(md, 4)


def test_markdown_folds_an_all_passing_case_table():
    text = markdown(submission(PART5_TIMED))
    assert "<details><summary>1 cases, all passed</summary>" in text


def test_markdown_escapes_submission_text(md):
    line = next(x for x in md.splitlines() if "30 of 33 elements wrong" in x)
    assert "<b>" not in line and "&lt;b&gt;" in line
    assert "\\|" in line  # a pipe cannot end a table cell


def test_markdown_compile_error_is_fenced_without_colour_codes(md):
    block = re.search(r"```text\n(.*?)\n```", _section(md, 2), re.S)
    assert block is not None
    assert block.group(1) == COMPILER_OUTPUT.replace("\x1b[31m", "").replace("\x1b[0m", "")


# ----------------------------------------------------------------------------------------- hidden cases

#: Every format students read (grader.render.formats.FORMATS' student_facing rows).
STUDENT_FORMATS = [f.name for f in FORMATS.values() if f.student_facing]


#: A config's keys the renderers read (PrairieLearn grades a part that does not compile as 0, so that
#: the other parts are rendered too).
RENDER_CFG = SimpleNamespace(prairielearn=SimpleNamespace(compile_error="zero"))


def _student_views(result: SubmissionResult) -> dict[str, str]:
    return {name: FORMATS[name].render(result, RENDER_CFG) for name in STUDENT_FORMATS}


def test_the_student_facing_formats_are_those_students_read():
    assert {"text", "gradescope", "prairielearn", "markdown"} <= set(STUDENT_FORMATS)
    assert "junit" not in STUDENT_FORMATS and "json" not in STUDENT_FORMATS  # the course staff's


@pytest.fixture(scope="module")
def views() -> dict[str, str]:
    return _student_views(RESULT)


@pytest.mark.parametrize("view", STUDENT_FORMATS)
@pytest.mark.parametrize("secret", HIDDEN_SECRETS)
def test_student_views_leak_nothing_of_hidden_cases(views, view, secret):
    assert secret not in views[view]


@pytest.mark.parametrize("view", STUDENT_FORMATS)
def test_student_views_show_hidden_cases_by_name_and_status(views, view):
    assert "hidden #1 int32" in views[view] and "hidden case 2" in views[view]


@pytest.mark.parametrize("view", STUDENT_FORMATS)
def test_student_views_hide_a_base_seed_only_hidden_cases_use(view):
    seed = 5550123
    part = PartResult(key="part1_naive", number=1, title="t", file="f.cu", status="fail",
                      cases=(case("n=31 int32", 31, "pass", seed=91),
                             case("hidden #1 int32", 4321, "fail", seed=seed, visibility="hidden", message="x")))
    text = _student_views(submission(part, seed=seed))[view]
    assert str(seed) not in text and "4321" not in text


@pytest.mark.parametrize("view", STUDENT_FORMATS)
def test_part_stopped_after_hidden_cases_ran_keeps_first_line_only(view):
    # The part timed out on a visible case after a hidden one ran: the kernel output may come from
    # the hidden case, so only the first line of the part's message is shown.
    part = PartResult(key="part4_any_size", number=4, title="t", file="f.cu", status="timeout",
                      message=TIMEOUT_FIRST + "\nlast output of the kernel:\nSECRETOUT",
                      cases=(case("hidden #1 int32", 777777, "pass", seed=HIDDEN_SEED, visibility="hidden"),
                             case("n=65537 int32", 65537, "timeout", message=TIMEOUT_FIRST)))
    text = _student_views(submission(part))[view]
    assert "during case n=65537: the kernel may never finish" in text and "SECRETOUT" not in text


def test_junit_gives_a_file_below_the_working_directory_relative_to_it_as_pytest_does(tmp_path, monkeypatch):
    """A runner's absolute path matches no file of the repository that annotates it (issue 52)."""
    from grader.core.results import CaseFinding
    monkeypatch.chdir(tmp_path)
    failing = (case("n=3 int32", 3, "fail", message="oob", kind="out-of-bounds",
                    findings=(CaseFinding("out-of-bounds", "here", file="part1_naive.cu", line=42),)),)
    inside = dataclasses.replace(PART1, file=str(tmp_path / "sub" / "part1_naive.cu"), cases=failing)
    outside = dataclasses.replace(PART1, file="/elsewhere/part1_naive.cu", cases=failing)
    for part, want in ((inside, "sub/part1_naive.cu"), (outside, "/elsewhere/part1_naive.cu")):
        root = ET.fromstring(junit_xml(submission(part)))
        assert {tc.get("file") for tc in root.iter("testcase") if tc.get("file")} == {want}


def test_a_warning_repeated_for_each_block_is_one_line_with_the_blocks_counted():
    """Part 4 printed five near-identical uninitialized-read lines, one per block (issue 52)."""
    from grader.render.text import render_text

    def warned(name, n, blocks):
        return case(name, n, "pass", warnings=tuple(
            f"uninitialized-read: thread (3, 0, 0) of block ({b}, 0, 0) reads temp[300] at part4_any_size.cu:44, "
            "which no thread of its block wrote" for b in blocks))
    part = dataclasses.replace(PART1, status="pass", cases=(warned("n=5 int32", 5, [0, 1, 2]),
                                                           warned("n=7 int32", 7, [3, 4])))
    lines = [line for line in render_text(submission(part)).splitlines() if "WARNING uninitialized-read" in line]
    assert len(lines) == 1 and "(the same in 5 blocks)" in lines[0] and "n = int32: 5, 7" in lines[0], lines
