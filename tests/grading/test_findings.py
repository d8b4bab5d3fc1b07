"""A failing case lists every finding, each kind once, in cause order (issue 20): a broken contract
first, then races, out-of-bounds accesses, divergence, undefined behaviour, and wrong values last.
results.json keeps them as a list; the student report and Gradescope's output show the first three."""

from __future__ import annotations

import json

import pytest

from grader.backends import Selection
from grader.assignment.config import load_config
from grader.core.kinds import CAUSES, KINDS, in_cause_order
from grader.render import gradescope
from grader.render.text import render_text
from grader.core.results import CaseFinding, CaseResult, PartResult, SubmissionResult, result_from_dict
from grader.grading.runner import grade
from tests.conftest import BROKEN, VERDICTS

EMULATOR = Selection("emulator", "test")


def _part5_config(tmp_path):
    path = tmp_path / "config.yaml"
    # one emulator worker: the blocks run in one order (with several, which prefix a look-back reads,
    # and so whether the sign-extended one is read, depends on the threads' timing)
    path.write_text("block_size: 64\nseed: 7\nemulator:\n  workers: 1\nparts:\n  part5_single_pass:\n    block_size: 64\n"
                    "    items_per_thread: 4\n    points_per_case: 1\n    dtypes: [int32, float32]\n"
                    "    sizes: [5000]\n")
    return load_config(path)


@pytest.fixture(scope="module")
def no_ticket_sign_extend(tmp_path_factory):
    """Part 5 without a ticket and with a status word that sign-extends a negative value, graded as
    every command grades (checks on)."""
    cfg = _part5_config(tmp_path_factory.mktemp("cfg"))
    return grade(BROKEN / "part5_no_ticket_sign_extend.cu", cfg=cfg, selection=EMULATOR,
                 parts=["part5_single_pass"])


def _case(result: SubmissionResult, name: str) -> CaseResult:
    return next(c for p in result.parts for c in p.cases if c.name == name)


def _part1_case_of_33(tmp_path, kernel) -> CaseResult:
    """``kernel`` graded as Part 1 on the emulator (checks on) at its one size, n = 33, int32: that case."""
    path = tmp_path / "config.yaml"
    path.write_text("block_size: 64\nseed: 7\nparts:\n  part1_naive:\n    points_per_case: 1\n    sizes: [33]\n")
    result = grade(kernel, cfg=load_config(path), selection=EMULATOR, parts=["part1_naive"])
    return _case(result, "n=33 int32")


def test_a_case_with_two_causes_lists_both_the_broken_contract_first(no_ticket_sign_extend):
    c = _case(no_ticket_sign_extend, "n=5000 int32")
    # A reader that takes a sign-extended inclusive prefix for an aggregate reads on past it, into the
    # word the tile before it had read: a write-to-read chain with no fence, whose older value the
    # emulator gives that read (a stale-read, docs/emulator.md, "Memory order between blocks"),
    # between the contract and the wrong values.
    assert [f.kind for f in c.findings] == ["ticket", "stale-read", "mismatch"], c.findings
    assert c.kind == "ticket" and c.status == "fail"
    assert c.message.startswith("*tile_counter is 0 after the launch, expected 20")
    assert "write-to-read" in c.findings[1].message
    assert c.findings[2].message.startswith("out[") and c.mismatch is not None
    # float32 exact inputs go negative too (quarters in [-4, 4]): the same two causes, compared exactly
    f32 = _case(no_ticket_sign_extend, "n=5000 float32 exact")
    assert [f.kind for f in f32.findings] == ["ticket", "stale-read", "mismatch"] and "compared exactly" in f32.findings[2].message


def test_the_report_gradescope_and_the_json_show_every_finding(no_ticket_sign_extend):
    report = render_text(no_ticket_sign_extend)
    assert "also mismatch: out[" in report, report
    (test,) = [t for t in gradescope(no_ticket_sign_extend)["tests"] if t["name"].endswith(" · int32")]
    assert "\nFAILED  n=5000 int32\n    *tile_counter is 0" in test["output"]
    assert "\n    also mismatch: out[" in test["output"]
    doc = json.loads(no_ticket_sign_extend.to_json())
    assert doc["schema_version"] == 2
    (case,) = [c for c in doc["parts"][0]["cases"] if c["name"] == "n=5000 int32"]
    assert [f["kind"] for f in case["findings"]] == ["ticket", "stale-read", "mismatch"]
    assert set(case["findings"][0]) == {"kind", "message", "file", "line", "block", "thread", "other_file",
                                        "other_line", "other_block", "other_thread", "access", "address", "code",
                                        "other_code"}
    again = result_from_dict(doc)  # a saved result reads back with its findings
    assert _case(again, "n=5000 int32").findings == _case(no_ticket_sign_extend, "n=5000 int32").findings


def test_a_race_and_the_wrong_output_it_causes_are_both_listed(tmp_path):
    c = _part1_case_of_33(tmp_path, BROKEN / "part1_missing_sync.cu")
    assert [f.kind for f in c.findings] == ["race", "mismatch"], c.findings
    race = c.findings[0]
    assert race.file == "part1_naive.cu" and race.line and race.block == (0, 0, 0) and race.thread is not None
    assert c.message.startswith("the kernel failed (race)")


def test_cause_order_puts_contracts_first_and_values_last_each_kind_once():
    found = [CaseFinding(k, k) for k in ("mismatch", "out-of-bounds", "race", "uninitialized-read", "race",
                                         "barrier-divergence", "input-modified", "ticket")]
    assert [f.kind for f in in_cause_order(found)] == ["input-modified", "ticket", "race", "out-of-bounds",
                                                      "barrier-divergence", "uninitialized-read", "mismatch"]
    assert all(k.cause in CAUSES for k in KINDS.values())


def _result(*cases: CaseResult) -> SubmissionResult:
    part = PartResult(key="part1_naive", number=1, title="t", file="part1_naive.cu", status="fail", cases=cases)
    return SubmissionResult(submission="s", backend="emulator", backend_reason="r", device={}, config="c", seed=1,
                            backend_times_kernels=False, backend_uses_gpus=False,  # the emulator's traits
                            block_size=64, parts=(part,), scangrade_version="0", started_at="", elapsed_s=1.0)


def test_reports_show_the_first_three_and_count_the_rest():
    kinds = ["input-modified", "race", "out-of-bounds", "barrier-divergence", "mismatch"]
    c = CaseResult(name="n=33 int32", n=33, dtype="int32", seed=1, status="fail", points=0, max_points=1,
                   message="the input was modified: FIRST", kind=kinds[0],
                   findings=tuple(CaseFinding(k, f"{k} here") for k in kinds))
    report = render_text(_result(c))
    assert "also race: race here" in report and "also out-of-bounds: out-of-bounds here" in report
    assert "barrier-divergence here" not in report
    assert "and 2 more: barrier-divergence, mismatch (all in the JSON result)" in report
    output = gradescope(_result(c))["tests"][0]["output"]  # the int32 cases' test
    failed = output.split("\nFAILED  n=33 int32\n", 1)[1]
    assert [line.strip() for line in failed.splitlines()[:4]] == [
        "the input was modified: FIRST", "also race: race here", "also out-of-bounds: out-of-bounds here",
        "and 2 more: barrier-divergence, mismatch (all in the JSON result)"]


def test_a_version_1_result_still_reads_its_cases_getting_one_finding_each():
    doc = _result(CaseResult(name="n=3 int32", n=3, dtype="int32", seed=1, status="fail", points=0, max_points=1,
                             message="out[1] = 5, expected 7\nmore", kind="mismatch")).to_dict()
    doc["schema_version"] = 1
    for case in doc["parts"][0]["cases"]:
        del case["findings"]
    (c,) = result_from_dict(doc).parts[0].cases
    assert c.findings == (CaseFinding("mismatch", "out[1] = 5, expected 7"),)
    doc["schema_version"] = 3
    with pytest.raises(ValueError, match="version 1 or 2"):
        result_from_dict(doc)


def test_threads_that_exit_before_a_barrier_are_named_with_their_return_line(tmp_path):
    c = _part1_case_of_33(tmp_path, VERDICTS / "part1_early_return.cu")
    line = next(n for n, text in enumerate((VERDICTS / "part1_early_return.cu").read_text()
                                           .splitlines(), 1) if "return;" in text)
    assert c.status == "pass" and any(w.startswith("early-exit: ") and
                                      f"at the `return` at part1_naive.cu:{line}) have exited" in w
                                      for w in c.warnings), c.warnings


def _race(n: int, dtype: str, line: int, thread: int) -> CaseResult:
    name = f"n={n} {dtype}" + (" exact" if dtype == "float32" else "")
    text = f"race on shared memory: thread ({thread}, 0, 0) reads s[{thread - 1}] that thread ({thread - 1}, 0, 0) wrote"
    return CaseResult(name=name, n=n, dtype=dtype, seed=1, status="fail", points=0, max_points=1,
                      message=f"the kernel failed (race): {text}", kind="race",
                      findings=(CaseFinding("race", text, "part1_naive.cu", line, (0, 0, 0), (thread, 0, 0)),))


def test_a_markdown_report_tells_a_finding_repeated_in_many_cases_once_with_its_sizes():
    from grader.render.markdown import markdown
    same = [_race(n, d, 31, 1 + n % 7) for d in ("int32", "float32") for n in (33, 100, 512)]
    other_line = _race(64, "int32", 40, 3)  # the same kind and words at another line: told on its own
    report = markdown(_result(*same, other_line))
    assert report.count("reads s") == 1 + 1, report  # the repeated race once, the other line once
    assert "**race at part1\\_naive.cu:31** in 6 cases, n = 33, 100, 512 (int32, float32)" in report, report
    assert report.count("race at part1\\_naive.cu:31 (told once below)") == 6
    assert "race at part1\\_naive.cu:40 (told once below)" not in report  # one case: its own message in the table
    alone = markdown(_result(_race(33, "int32", 31, 2), other_line))  # no finding repeats: no list
    assert "told once" not in alone and "Findings in several cases" not in alone
