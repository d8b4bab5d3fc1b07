"""The renderers (Gradescope, JUnit XML, Markdown) against their formats, on results built by hand.

No grading runs: every result here is made from the dataclasses of :mod:`grader.results`, with one
part per situation a renderer must handle (failures with a mismatch, a timed case, a performance
score, a compile error, a timeout, a crash on a hidden case, a missing file, hidden cases).
"""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET

import pytest

from grader.render import gradescope, junit_xml, markdown
from grader.results import CaseResult, Mismatch, PartResult, Performance, SubmissionResult, Timing

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


TIMING = Timing(median_ms=0.0123, spread=0.021, runs=30, gbps=333.3, copy_fraction=0.42, reference_ms=0.011,
                ratio=1.118, cpu_speedup=55.0)
HIDDEN_TIMING = Timing(median_ms=0.7071, spread=0.03, runs=30, gbps=10.06)

PART1 = PartResult(
    key="part1_naive", number=1, title="naive inclusive scan", file="sub/part1_naive.cu", status="fail",
    cases=(
        case("n=1", 1, "pass", elapsed_ms=1.5),
        case("n=33", 33, "fail", message=MISMATCH_MSG,
             mismatch=Mismatch("out", 3, 5, 17, 30, first_wrong_tile=0, hint="inclusive where exclusive is asked")),
        case("n=512", 512, "pass", timing=TIMING),
        case("n=777777", 777777, "fail", seed=HIDDEN_SEED, visibility="hidden",
             message="out[9] = 31337, expected 27182 SECRETMSG", mismatch=Mismatch("out", 9, 31337, 27182, 4)),
        case("stress", 888883, "pass", seed=HIDDEN_SEED, visibility="hidden", timing=HIDDEN_TIMING),
    ),
    performance=Performance(points=7.5, max_points=10.0, ratio=1.4, message="ratio 1.40: 7.5 of 10 points"),
)
PART2 = PartResult(
    key="part2_blelloch", number=2, title="Blelloch scan", file="sub/part2_blelloch.cu", status="compile-error",
    message=COMPILER_OUTPUT,
    cases=tuple(case(f"n={n}", n, "not-run", message="not run: part2_blelloch.cu does not compile") for n in (1, 33)),
)
PART3 = PartResult(
    key="part3_extra", number=3, title="an extra part", file="part3_extra.cu", status="missing",
    message="part3_extra.cu is missing from the submission",
    cases=tuple(case(f"n={n}", n, "not-run", message="not run: part3_extra.cu is missing") for n in (5, 6)),
)
PART4 = PartResult(
    key="part4_any_size", number=4, title="any size", file="sub/part4_any_size.cu", status="timeout",
    message=TIMEOUT_MSG,
    cases=(case("n=1", 1, "pass", 2.0), case("n=1025", 1025, "pass", 2.0),
           case("n=65537", 65537, "timeout", 2.0, message=TIMEOUT_FIRST),
           case("n=1048577", 1048577, "not-run", 2.0, message="not run: an earlier step timeout"),
           case("n=16000000", 16000000, "not-run", 2.0, message="not run: an earlier step timeout")),
)
PART5 = PartResult(
    key="part5_single_pass", number=5, title="single-pass scan", file="sub/part5_single_pass.cu", status="crash",
    message="the process running this part crashed (SIGSEGV) during case n=999331\n"
            "last output of the kernel:\nSECRETOUT",
    cases=(case("n=4096", 4096, "pass", timing=Timing(0.031, 0.01, 30, 1057.0)),
           case("n=1048576", 1048576, "pass", timing=Timing(0.25, 0.01, 30, 33554.0)),
           case("n=999331", 999331, "crash", seed=HIDDEN_SEED, visibility="hidden",
                message="the process running this part crashed (SIGSEGV) during case n=999331"),
           case("n=16777216", 16777216, "not-run", message="not run: an earlier step crash")),
)


def submission(*parts: PartResult, seed: int = BASE_SEED, elapsed_s: float = 12.6) -> SubmissionResult:
    return SubmissionResult(submission="sub", backend="pycuda", backend_reason="--backend pycuda",
                            device={"backend": "pycuda", "device": "NVIDIA H100 80GB HBM3",
                                    "compute_capability": "9.0"},
                            config="config.yaml", seed=seed, block_size=512, parts=parts,
                            scangrade_version="0.1.0", started_at="2026-11-22T02:43:59+00:00", elapsed_s=elapsed_s,
                            timed=True, timing_note="timed on the GPU")


RESULT = submission(PART1, PART2, PART3, PART4, PART5)


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
    ("part2_blelloch", 1, 0, 1, 0),     # compile error: one errored testcase
    ("part3_extra", 1, 0, 1, 0),        # missing file: one errored testcase
    ("part4_any_size", 5, 0, 1, 2),     # timeout on the third case, two not run
    ("part5_single_pass", 4, 0, 1, 1),  # crash on a hidden case, one not run
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


def test_junit_totals_add_up(junit_root):
    suites = junit_root.findall("testsuite")
    for attr in ("tests", "failures", "errors"):
        assert int(junit_root.get(attr)) == sum(int(s.get(attr)) for s in suites)
    assert junit_root.get("time") == "12.600"


@pytest.mark.parametrize("key, name, element", [
    ("part1_naive", "n=1", None),
    ("part1_naive", "n=33", "failure"),
    ("part1_naive", "n=777777", "failure"),
    ("part1_naive", "performance", "failure"),
    ("part4_any_size", "n=1025", None),
    ("part4_any_size", "n=65537", "error"),
    ("part4_any_size", "n=16000000", "skipped"),
    ("part5_single_pass", "n=999331", "error"),
    ("part5_single_pass", "n=16777216", "skipped"),
    ("part2_blelloch", "compile-error", "error"),
    ("part3_extra", "missing", "error"),
])
def test_junit_element_per_status(junit_root, key, name, element):
    tc = _testcase(junit_root, key, name)
    assert tc.get("classname") == key
    outcomes = [c.tag for c in tc if c.tag in ("failure", "error", "skipped")]
    assert outcomes == ([element] if element else [])


def test_junit_failure_carries_message_and_mismatch(junit_root):
    failure = _testcase(junit_root, "part1_naive", "n=33").find("failure")
    assert failure.get("message") == MISMATCH_MSG
    assert "index 3" in failure.text and "expected 17" in failure.text and "inclusive where" in failure.text


def test_junit_compile_error_body_is_compiler_output(junit_root):
    error = _testcase(junit_root, "part2_blelloch", "compile-error").find("error")
    assert error.get("type") == "compile-error"
    assert error.get("message") == COMPILER_OUTPUT.splitlines()[0]
    assert "int x = <y> & z;" in error.text            # escaped on the way out, back intact
    assert "\\x1b[31m" in error.text                    # ANSI escape made printable, not dropped


def test_junit_timeout_case_carries_the_part_message(junit_root):
    error = _testcase(junit_root, "part4_any_size", "n=65537").find("error")
    assert error.get("type") == "timeout" and error.get("message") == TIMEOUT_FIRST
    assert "KERNELOUT 123" in error.text


def test_junit_times_are_seconds(junit_root):
    assert _testcase(junit_root, "part1_naive", "n=1").get("time") == "0.002"  # 1.5 ms, 3 decimals
    assert _testcase(junit_root, "part1_naive", "n=33").get("time") == "0.003"


def test_junit_keeps_hidden_details_for_course_ci(junit_root):
    assert "SECRETMSG" in _testcase(junit_root, "part1_naive", "n=777777").find("failure").get("message")


def test_junit_timed_case_reports_timing(junit_root):
    out = _testcase(junit_root, "part1_naive", "n=512").find("system-out").text
    assert "0.0123 ms" in out and "333.3 GB/s" in out and "1.12× the reference" in out


# ----------------------------------------------------------------------------------------- Gradescope

# The fields Gradescope's autograder specification documents, and their JSON types.
GS_TOP = {"score": (int, float), "execution_time": int, "output": str, "output_format": str,
          "test_output_format": str, "test_name_format": str, "visibility": str, "stdout_visibility": str,
          "extra_data": dict, "tests": list, "leaderboard": list}
GS_TEST = {"score": (int, float), "max_score": (int, float), "status": str, "name": str, "name_format": str,
           "number": str, "output": str, "output_format": str, "tags": list, "visibility": str, "extra_data": dict}
GS_VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


@pytest.fixture(scope="module")
def gs() -> dict:
    return gradescope(RESULT)


def _gs_test(gs: dict, name: str) -> dict:
    (test,) = [t for t in gs["tests"] if t["name"] == name]
    return test


def test_gradescope_top_level_fields_are_documented(gs):
    assert set(gs) <= set(GS_TOP)
    for key, value in gs.items():
        assert isinstance(value, GS_TOP[key]) and not isinstance(value, bool), key
    assert gs["visibility"] in GS_VISIBILITY and gs["stdout_visibility"] in GS_VISIBILITY
    assert gs["execution_time"] == 13
    json.dumps(gs)  # JSON-ready as it is


def test_gradescope_test_fields_are_documented(gs):
    for test in gs["tests"]:
        assert set(test) <= set(GS_TEST), test["name"]
        for key, value in test.items():
            assert isinstance(value, GS_TEST[key]) and not isinstance(value, bool), (test["name"], key)
        assert test["status"] in ("passed", "failed")
        assert re.fullmatch(r"\d+\.\d+", test["number"])
        assert 0 <= test["score"] <= test["max_score"]
        assert test.get("visibility", "visible") in GS_VISIBILITY


def test_gradescope_scores_add_up(gs):
    assert gs["score"] == pytest.approx(RESULT.points)
    assert math.fsum(t["score"] for t in gs["tests"]) == pytest.approx(RESULT.points)
    assert math.fsum(t["max_score"] for t in gs["tests"]) == pytest.approx(RESULT.max_points)


@pytest.mark.parametrize("name, number, score, status", [
    ("Part 1 · naive_scan · n=1", "1.1", 1.0, "passed"),
    ("Part 1 · naive_scan · n=33", "1.2", 0.0, "failed"),
    ("Part 1 · naive_scan · hidden case 1", "1.4", 0.0, "failed"),
    ("Part 1 · naive_scan · stress", "1.5", 1.0, "passed"),
    ("Part 1 · naive_scan · performance", "1.6", 7.5, "failed"),
    ("Part 2 · blelloch_scan · does not compile", "2.1", 0.0, "failed"),
    ("Part 3 · part3_extra · file missing", "3.1", 0.0, "failed"),
    ("Part 4 · scan_tiles + add_tile_offsets · n=65537", "4.3", 0.0, "failed"),
    ("Part 4 · scan_tiles + add_tile_offsets · n=16000000", "4.5", 0.0, "failed"),
    ("Part 5 · part5_single_pass · hidden case 1", "5.3", 0.0, "failed"),
])
def test_gradescope_tests(gs, name, number, score, status):
    test = _gs_test(gs, name)
    assert (test["number"], test["score"], test["status"]) == (number, score, status)


def test_gradescope_test_count(gs):
    # 5 cases + performance, 1 for the compile error, 1 for the missing file, 5 cases, 4 cases
    assert len(gs["tests"]) == 6 + 1 + 1 + 5 + 4


def test_gradescope_compile_error_is_one_failing_test_with_the_compiler_output(gs):
    part2 = [t for t in gs["tests"] if t["number"].startswith("2.")]
    assert len(part2) == 1
    assert part2[0]["output"] == COMPILER_OUTPUT
    assert part2[0]["max_score"] == sum(c.max_points for c in PART2.cases)


def test_gradescope_failure_output_has_the_message(gs):
    output = _gs_test(gs, "Part 1 · naive_scan · n=33")["output"]
    assert MISMATCH_MSG in output and f"seed {BASE_SEED}" in output


def test_gradescope_timeout_case_carries_the_part_message(gs):
    assert "KERNELOUT 123" in _gs_test(gs, "Part 4 · scan_tiles + add_tile_offsets · n=65537")["output"]


def test_gradescope_hidden_case_is_shown_by_name_and_status(gs):
    test = _gs_test(gs, "Part 5 · part5_single_pass · hidden case 1")
    assert "visibility" not in test  # Gradescope's "hidden" would hide it, its status and the total score
    assert test["output"].startswith("crashed")


def test_gradescope_hidden_case_visibility_applies_to_hidden_tests_only():
    gs = gradescope(RESULT, hidden_case_visibility="after_due_date")
    marked = {t["name"] for t in gs["tests"] if "visibility" in t}
    assert marked == {"Part 1 · naive_scan · hidden case 1", "Part 1 · naive_scan · stress",
                      "Part 5 · part5_single_pass · hidden case 1"}


@pytest.mark.parametrize("kwargs", [{"visibility": "public"}, {"stdout_visibility": "yes"},
                                    {"hidden_case_visibility": "secret"}])
def test_gradescope_rejects_undocumented_visibility(kwargs):
    with pytest.raises(ValueError, match="must be one of"):
        gradescope(RESULT, **kwargs)


def test_gradescope_leaderboard_is_the_largest_timed_case_of_the_challenge_part(gs):
    assert gs["leaderboard"] == [{"name": "Part 5 time (ms)", "value": 0.25, "order": "asc"}]


@pytest.mark.parametrize("result, part", [
    (RESULT, None),                            # no leaderboard asked for
    (RESULT, "part4_any_size"),                # a part with no timed case
    (submission(PART1, PART4), "part5_single_pass"),  # the challenge part not graded
])
def test_gradescope_no_leaderboard(result, part):
    assert "leaderboard" not in gradescope(result, leaderboard_part=part)


def test_gradescope_top_level_output_is_a_summary(gs):
    assert "10.5/19 points" not in gs["output"]  # parts are summarised one by one, not invented
    for p in RESULT.parts:
        assert f"Part {p.number} (" in gs["output"]
    assert f"seed {BASE_SEED}" in gs["output"]


# ----------------------------------------------------------------------------------------- Markdown

@pytest.fixture(scope="module")
def md() -> str:
    return markdown(RESULT)


@pytest.mark.parametrize("part", RESULT.parts, ids=lambda p: p.key)
def test_markdown_has_a_section_per_part(md, part):
    assert f"### Part {part.number}: " in md
    assert f"{part.points:g}/{part.max_points:g} points" in md


@pytest.mark.parametrize("text", [
    "expected 17; 30 of 33 elements wrong",   # the mismatch
    "KERNELOUT 123",                          # the timed-out case's full message
    "int x = <y> & z;",                       # compiler output, verbatim in a code block
    "part3\\_extra.cu is missing",            # the missing file
    "ratio 1.40: 7.5 of 10 points",           # the performance score
])
def test_markdown_shows_each_failure(md, text):
    assert text in md


def test_markdown_header_names_backend_and_device(md):
    header = md.split("\n| Part |")[0]
    assert "pycuda" in header and "NVIDIA H100 80GB HBM3" in header and str(BASE_SEED) in header


def test_markdown_timing_columns_when_timed(md):
    part1 = md.split("### Part 1:")[1].split("### Part 2:")[0]
    assert "| ms | spread | GB/s | % of copy | × reference |" in part1
    assert "| n=512 | passed | 1/1 | 0.0123 | ±2.1 % | 333.3 | 42 % | 1.12× |" in part1
    part4 = md.split("### Part 4:")[1]
    assert "GB/s" not in part4.split("### Part 5:")[0]


def test_markdown_escapes_submission_text(md):
    line = next(x for x in md.splitlines() if "30 of 33 elements wrong" in x)
    assert "<b>" not in line and "&lt;b&gt;" in line
    assert "\\|" in line  # a pipe cannot end a table cell or open one


def test_markdown_compile_error_is_fenced(md):
    block = re.search(r"```text\n(.*?)\n```", md, re.S)
    assert block is not None and block.group(1) == COMPILER_OUTPUT


# ----------------------------------------------------------------------------------------- hidden cases

def _student_views(result: SubmissionResult) -> dict[str, str]:
    return {"gradescope": json.dumps(gradescope(result), ensure_ascii=False), "markdown": markdown(result)}


@pytest.mark.parametrize("view", ["gradescope", "markdown"])
@pytest.mark.parametrize("secret", HIDDEN_SECRETS)
def test_student_views_leak_nothing_of_hidden_cases(view, secret):
    assert secret not in _student_views(RESULT)[view]


@pytest.mark.parametrize("view", ["gradescope", "markdown"])
def test_student_views_hide_a_base_seed_only_hidden_cases_use(view):
    seed = 5550123
    only_hidden = PartResult(key="part1_naive", number=1, title="t", file="f.cu", status="fail",
                             cases=(case("n=31", 31, "pass", seed=91), case("n=4321", 4321, "fail", seed=seed,
                                                                           visibility="hidden", message="x")))
    text = _student_views(submission(only_hidden, seed=seed))[view]
    assert str(seed) not in text and "4321" not in text


@pytest.mark.parametrize("view", ["gradescope", "markdown"])
def test_student_views_still_show_hidden_cases_by_name_and_status(view):
    text = _student_views(RESULT)[view]
    assert "hidden case 1" in text and "stress" in text


def test_hidden_case_after_visible_failure_keeps_first_line_only():
    # A part that stopped on a visible case after a hidden one ran: the kernel output may come
    # from the hidden case, so only the first line of the part's message is shown.
    part = PartResult(key="part4_any_size", number=4, title="t", file="f.cu", status="timeout",
                      message=TIMEOUT_FIRST + "\nlast output of the kernel:\nSECRETOUT",
                      cases=(case("big", 777777, "pass", seed=HIDDEN_SEED, visibility="hidden"),
                             case("n=65537", 65537, "timeout", message=TIMEOUT_FIRST)))
    for text in _student_views(submission(part)).values():
        assert TIMEOUT_FIRST in text and "SECRETOUT" not in text
