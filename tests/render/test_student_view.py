"""What students see of the hidden cases: their names and whether each passed, nothing more.

A kernel that chooses, on a size it was not shown, to fail, crash or hang must not be able to read
anything back from any format students read: the case's status word, the part's status or
message, the performance or profile messages, or the run time (which a kernel spinning in
proportion to a hidden size would turn into that size). So every student-facing format of
:data:`grader.render.formats.FORMATS` must render the same text for results that differ only in
how a hidden case failed, in the hidden sizes and seeds, and in the run's wall time. The course
staff's copies (JUnit, the JSON result, ``grade --show-hidden``) keep every detail.

The results are built by hand as the runner reports them: a hidden case that fails its check
(the part ``fail``, performance and profile taken away after the hidden cases), and one on which
the part's worker crashed, hung or stopped (the part ``crash``, ``timeout`` or ``error`` with its
message, the cases after it not run, performance and profile never reported after the hidden cases).
"""

from __future__ import annotations

import dataclasses
import re
from types import SimpleNamespace

import pytest

from grader.render.formats import FORMATS
from grader.core.performance import Performance, Profile, Timing
from grader.core.results import CaseResult, Mismatch, PartResult, SubmissionResult

STUDENT_FORMATS = [f.name for f in FORMATS.values() if f.student_facing]
STAFF_FORMATS = [f.name for f in FORMATS.values() if not f.student_facing or f.staff_render]
CFG = SimpleNamespace(prairielearn=SimpleNamespace(compile_error="zero"))
SEED = 20261122

TIMING = Timing(median_ms=0.0123, spread=0.02, runs=30, gbps=333.3, copy_fraction=0.42, reference_ms=0.011, ratio=1.1)


def _case(name: str, n: int, status: str, *, seed: int = SEED, hidden: bool = False, **kw) -> CaseResult:
    return CaseResult(name=name, n=n, dtype="int32", seed=seed, status=status,
                      points=1.0 if status == "pass" else 0.0, max_points=1.0,
                      visibility="hidden" if hidden else "visible", **kw)


def _visible() -> tuple[CaseResult, ...]:
    return (_case("n=1 int32", 1, "pass", elapsed_ms=1.0), _case("n=33 int32", 33, "pass", elapsed_ms=2.0),
            CaseResult(name="timed n=1024 int32", n=1024, dtype="int32", seed=SEED, status="pass", points=0.0,
                       max_points=0.0, timing=TIMING))


PROFILE = Profile(4.0, 4.0, "4/4: as few wavefronts as the reference", n=1024, wavefronts=317, ideal_wavefronts=317,
                  conflict_wavefronts=0, reference_wavefronts=317, ratio=1.0, sectors_per_request=4.0)


def hidden_failure(how: str, *, n: int, seed: int, elapsed_s: float, message: str = "") -> SubmissionResult:
    """A result of one part whose visible cases, timing and profile are the same in every variant,
    whose hidden #1 passes, and whose hidden #2 (the part's last case) fails ``how``: ``fail``
    (a wrong value), ``crash``, ``timeout`` or ``error`` (the worker stopped on it)."""
    first = _case("hidden #1 int32", n + 1, "pass", seed=seed, hidden=True, elapsed_ms=3.0)
    if how == "fail":
        last = _case("hidden #2 int32", n, "fail", seed=seed, hidden=True, kind="mismatch", elapsed_ms=4.0,
                     message=message or f"out[{n - 1}] = 3, expected 4",
                     mismatch=Mismatch("out", n - 1, 3, 4, 1))
        part_status, part_message = "fail", ""
        performance = Performance(0.0, 4.0, None, "no performance points: a hidden case did not pass (performance "
                                                  "is scored only when every case passes)")
        profile = Profile(0.0, 4.0, "no profile points: not every case passed (a hidden case did not)")
    else:
        part_message = message or {
            "crash": f"the process running this part crashed (SIGSEGV) during case hidden #2 int32 — often a read "
                     f"or write outside an array\nlast output of the kernel:\nn is {n}",
            "timeout": "case hidden #2 int32 ran past its deadline (a few seconds plus 20 times the reference "
                       "solution's time; timeouts.case_s at most): the kernel may never finish there",
            "error": "the grader's worker stopped unexpectedly (exit status 1) during case hidden #2 int32",
        }[how]
        last = _case("hidden #2 int32", n, how, seed=seed, hidden=True, kind=how, message=part_message.splitlines()[0])
        part_status = how
        performance = Performance(0.0, 4.0, None, "not timed: the part did not finish")
        profile = Profile(0.0, 4.0, "not profiled: the part did not finish")
    part = PartResult(key="part3_conflict_free", number=3, title="conflict-free Blelloch scan",
                      file="sub/part3_conflict_free.cu", status=part_status, message=part_message,
                      cases=(*_visible()[:2], first, last, _visible()[2]), performance=performance, profile=profile,
                      phases_s={"compile": 1.0, "cases": 2.0, "hidden": elapsed_s - 3.0, "total": elapsed_s})
    return SubmissionResult(submission="sub", backend="pycuda", backend_reason="--backend pycuda",
                            device={"device": "NVIDIA H100 80GB HBM3"}, config="config.yaml", seed=SEED,
                            block_size=512, parts=(part,), scangrade_version="0.1.0",
                            started_at="2026-11-22T02:43:59+00:00", elapsed_s=elapsed_s, timed=True,
                            timing_note="timed on the GPU")


#: One kernel's ways of failing its hidden #2, each with other hidden sizes, seeds and run times.
VARIANTS = {
    "fails": hidden_failure("fail", n=777777, seed=90917, elapsed_s=14.2),
    "fails elsewhere": hidden_failure("fail", n=65537, seed=31337, elapsed_s=61.9, message="out[0] = 1, expected 2"),
    "crashes": hidden_failure("crash", n=999331, seed=27182, elapsed_s=15.8),
    "hangs": hidden_failure("timeout", n=888883, seed=4242, elapsed_s=133.7),
    "stops the worker": hidden_failure("error", n=123457, seed=11, elapsed_s=20.4),
}


@pytest.mark.parametrize("name", STUDENT_FORMATS)
def test_no_student_facing_format_tells_how_or_where_a_hidden_case_failed(name):
    render = FORMATS[name].render
    texts = {how: render(result, CFG) for how, result in VARIANTS.items()}
    assert len(set(texts.values())) == 1, {how: text for how, text in texts.items()}


@pytest.mark.parametrize("name", STUDENT_FORMATS)
@pytest.mark.parametrize("how", list(VARIANTS))
def test_a_student_reads_a_hidden_case_as_failed_and_nothing_of_its_size_seed_or_the_run_time(name, how):
    result = VARIANTS[how]
    text = FORMATS[name].render(result, CFG)
    hidden = [c for c in result.parts[0].cases if c.visibility == "hidden"]
    assert "hidden #2 int32" in text and "hidden #1 int32" in text
    for secret in {str(c.n) for c in hidden} | {str(c.seed) for c in hidden} | {f"{result.elapsed_s:.1f}",
                                                                               str(round(result.elapsed_s))}:
        assert not re.search(rf"(?<![\w.]){re.escape(secret)}(?![\w])", text), (secret, text)
    for word in ("crash", "SIGSEGV", "timed out", "timeout", "deadline", "not run", "stopped", "did not finish",
                 "execution_time"):
        assert word not in text, (word, text)


@pytest.mark.parametrize("name", STUDENT_FORMATS)
def test_the_run_time_is_shown_where_no_hidden_case_ran(name):
    """The control of the test above: without hidden cases the wall time reaches every format that
    shows one (PrairieLearn shows none)."""
    part = dataclasses.replace(VARIANTS["fails"].parts[0], status="pass", message="", cases=_visible(),
                               performance=Performance(4.0, 4.0, 1.1, "all points"), profile=PROFILE)
    result = dataclasses.replace(VARIANTS["fails"], parts=(part,), elapsed_s=47.3)
    text = FORMATS[name].render(result, CFG)
    shown = {"text": "47.3", "markdown": "47.3", "gradescope": '"execution_time": 47'}.get(name)
    if shown is not None:
        assert shown in text, text
    assert all(FORMATS[n].render(result, CFG) == FORMATS[n].render(dataclasses.replace(result, elapsed_s=47.3), CFG)
               for n in STUDENT_FORMATS)


def test_the_course_staffs_copies_keep_how_the_hidden_case_failed():
    crash, hang = VARIANTS["crashes"], VARIANTS["hangs"]
    assert {"text", "json", "junit"} <= set(STAFF_FORMATS)  # and any format added for the course staff
    for name in STAFF_FORMATS:
        fmt = FORMATS[name]
        crashed, hung = fmt.render_for_staff(crash, CFG), fmt.render_for_staff(hang, CFG)
        assert "SIGSEGV" in crashed and "ran past its deadline" in hung, name
        if name != "text":  # the terminal report names a hidden case's size by its number, in full too
            assert "999331" in crashed and "888883" in hung, name


def test_the_terminal_report_with_show_hidden_is_the_staff_copy(tmp_path, capsys):
    from grader.render.text import render_text
    crash = VARIANTS["crashes"]
    assert FORMATS["text"].render_for_staff(crash, None) == render_text(crash, show_hidden=True) + "\n"
    student = render_text(crash)
    assert "PASS    1 hidden case: hidden #1 int32" in student and "FAIL    1 hidden case: hidden #2 int32" in student
    assert "PASS    all" not in student  # the visible cases passed, not all
