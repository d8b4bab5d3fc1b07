"""Gradescope's ``results.json`` from a :class:`~grader.core.results.SubmissionResult`.

Fields follow Gradescope's autograder specification
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): top level ``score``,
``execution_time``, ``output``, ``visibility``, ``stdout_visibility``, ``tests``, ``leaderboard``;
per test ``name``, ``number``, ``score``, ``max_score``, ``status``, ``output`` and, when asked
for, ``visibility``. See ``docs/gradescope.md``.
"""

from __future__ import annotations

import html
from typing import Any

from grader.render._common import (part_status_words, analysis_report, device_text,
                                   is_timed_case, largest_timed_case, part_label, pending_text,
                                   performance_shown, points, printable, public_elapsed_s,
                                   public_part_message, public_seed, student_view,
                                   whole_part_failure)
from grader.render._groups import (CaseGroup, case_groups, group_counts, group_description, group_output,
                                   timed_run_lines)
from grader.assignment.parts import CHALLENGE_PART
from grader.render.pictures import part_pictures
from grader.core.results import PartResult, SubmissionResult

#: The visibility values Gradescope documents, for the top level, ``stdout_visibility`` and each test.
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
#: Keys the specification documents for the top level and for each test.
TOP_LEVEL_KEYS = frozenset({"score", "execution_time", "output", "output_format", "test_output_format",
                            "test_name_format", "visibility", "stdout_visibility", "extra_data", "tests",
                            "leaderboard"})
TEST_KEYS = frozenset({"score", "max_score", "status", "name", "name_format", "number", "output", "output_format",
                       "tags", "visibility", "extra_data"})
LEADERBOARD_KEYS = frozenset({"name", "value", "order"})


def _test(part: PartResult, index: int, what: str, score: float, max_score: float, passed: bool | None,
          output: str, visibility: str | None = None) -> dict[str, Any]:
    """One test; ``passed`` None leaves ``status`` out (Gradescope then goes by the score)."""
    t: dict[str, Any] = {"name": f"Part {part.number} · {part_label(part)} · {what}",
                         "number": f"{part.number}.{index}", "score": float(score), "max_score": float(max_score),
                         "output": printable(output)}
    if passed is not None:
        t["status"] = "passed" if passed else "failed"
    if visibility is not None:
        t["visibility"] = visibility
    return t


def _group_output(part: PartResult, group: CaseGroup) -> str:
    """A group test's output, as PrairieLearn's test shows the same group: what the group holds, how
    its cases ended, then their details (the failing cases listed; of the hidden ones, each name and
    result only)."""
    return "\n".join([group_description(part, group), group_counts(group.cases), "", group_output(part, group)])


def _part_tests(part: PartResult, hidden_case_visibility: str | None, *, pending: bool) -> list[dict[str, Any]]:
    tests: list[dict[str, Any]] = []
    if whole_part_failure(part):
        tests.append(_test(part, 1, part_status_words(part), sum(c.points for c in part.cases),
                           sum(c.max_points for c in part.cases), False,
                           public_part_message(part) or part_status_words(part)))
    else:
        for i, group in enumerate(case_groups(part), 1):
            tests.append(_test(part, i, group.label, group.points, group.max_points, group.passed,
                               _group_output(part, group), hidden_case_visibility if group.hidden else None))
    perf, timed = part.performance, [c for c in part.cases if is_timed_case(c)]
    if pending:  # not a failure: 0 of 0, no status, the points named
        tests.append(_test(part, len(tests) + 1, "performance (pending)", 0.0, 0.0, None,
                           f"{pending_text(perf.max_points)}: {perf.message}"))
    elif perf is not None and (performance_shown(part) or timed):
        tests.append(_test(part, len(tests) + 1, "performance", perf.points, perf.max_points,
                           perf.points >= perf.max_points and all(c.status == "pass" for c in timed),
                           "\n".join([perf.message, *timed_run_lines(part)])))
    prof = part.profile
    if prof is not None and prof.max_points:
        from grader.core.access_profile import report_lines
        tests.append(_test(part, len(tests) + 1, "bank conflicts", prof.points, prof.max_points,
                           prof.points >= prof.max_points, "\n".join(report_lines(prof))))
    pictures = part_pictures(part, plot=False)  # the HTML report's (the plot is the analysis test's)
    if pictures:  # information, 0 of 0: a race's threads, the bank grids, where the wrong elements lie
        test = _test(part, len(tests) + 1, "pictures", 0.0, 0.0, None, "")
        test["output"] = str(pictures)
        test["output_format"] = "html"
        tests.append(test)
    analysis = analysis_report(part)
    if analysis:  # information, 0 of 0: the table (or the roofline) and the time plot, as HTML
        test = _test(part, len(tests) + 1, "analysis", 0.0, 0.0, None, "")
        test["output"] = "<pre>" + html.escape(printable(analysis), quote=False) + "</pre>" + _plot_html(part)
        test["output_format"] = "html"
        tests.append(test)
    return tests


def _plot_html(part: PartResult) -> str:
    """The part's time plot as an HTML image (a data URL), or "" where there is none."""
    import base64

    from grader.render.plot import time_plot_png
    png = time_plot_png(part)
    if png is None:
        return ""
    return (f'<img alt="Part {part.number}: time against n" '
            f'src="data:image/png;base64,{base64.b64encode(png).decode()}">')


def _summary(result: SubmissionResult) -> str:
    lines = [f"scangrade {result.scangrade_version}: {points(result.points)}/{points(result.max_points)} points."]
    dev = device_text(result)
    lines.append(f"Backend: {result.backend} ({result.backend_reason}).")
    if dev:
        lines.append(f"Device: {dev}.")
    if result.timing_note:
        lines.append(result.timing_note.rstrip(".") + ".")
    if result.pending_points:
        lines.append(f"Performance ({points(result.pending_points)} points) is pending a run on a GPU: "
                     "this score counts correctness only.")
    for p in result.parts:
        checks = [c for c in p.cases if not is_timed_case(c)]
        ok = sum(c.status == "pass" for c in checks)
        state = (part_status_words(p) if whole_part_failure(p)
                 else f"{ok} of {len(checks)} cases passed" + (f", {part_status_words(p)}"
                                                                if p.status not in ("pass", "fail") else ""))
        lines.append(f"Part {p.number} ({p.title}): {points(p.points)}/{points(p.max_points)} points, {state}.")
    seed = public_seed(result)
    if seed is not None:
        lines.append(f"Inputs were drawn with seed {seed}; scangrade check --seed {seed} replays them.")
    return "\n".join(lines)


def _leaderboard(result: SubmissionResult, key: str | None) -> list[dict[str, Any]]:
    part = next((p for p in result.parts if p.key == key), None) if key else None
    case = largest_timed_case(part) if part else None
    if case is None or case.timing is None:
        return []
    return [{"name": f"Part {part.number} time (ms)", "value": round(case.timing.median_ms, 6), "order": "asc"}]


def _check_visibilities(**visibilities: str | None) -> None:
    """Raise ValueError naming the first argument, in the order given, that is not None and not one of
    :data:`VISIBILITIES`."""
    for arg, value in visibilities.items():
        if value is not None and value not in VISIBILITIES:
            raise ValueError(f"{arg} must be one of {', '.join(VISIBILITIES)}, not {value!r}")


def gradescope(result: SubmissionResult, *, leaderboard_part: str | None = CHALLENGE_PART,
               visibility: str = "visible", stdout_visibility: str = "hidden",
               hidden_case_visibility: str | None = None) -> dict[str, Any]:
    """Gradescope's ``results.json`` for one submission, as a JSON-ready dict (no I/O).

    Tests, in part order: one per case group of each part, as PrairieLearn's results group the
    same run (:func:`grader.render._groups.case_groups`): the visible cases of each dtype (name
    ``"Part 2 · blelloch_scan · int32"``, number ``"2.1"``), then the part's hidden cases
    (``"... · hidden cases"``); score and max_score are the group's cases' points, status ``passed``
    when every case of the group passed and ``failed`` otherwise, and the output lists the cases that
    did not pass, each with its message, n and seed (a timed-out or crashed case with the part's
    full message), then the sizes not run and the sizes that passed. A part that failed before
    any case ran (compile error, missing file, or a timeout, crash or error while compiling) is
    one failing test whose max_score is the part's case points and whose output is the part's
    message. Then, when the part has a performance score or timed runs, one test
    ``"... · performance"`` (status ``passed`` only with full performance points and every timed
    run passing; each timed run's timing in its output), or, where the points wait for a run on a
    GPU (an emulator run of a part that passed), ``"... · performance (pending)"``, 0 of 0 with no
    status and the pending points in its output; a part timed for no points and not timed has
    none. Then ``"... · bank conflicts"`` for a part whose profile earns points. A part with pictures
    in the HTML report (:func:`grader.render.pictures.part_pictures`: a race of a visible case, Part
    3's bank grids, where a visible case's wrong elements lie) then has ``"... · pictures"``, 0 of 0
    with no status, its ``output_format`` ``html``: the same fragment (inline SVG, each picture with its
    text equivalent), without the time plot. A timed part with an
    analysis table (a GPU run) or a roofline (the emulator) then has ``"... · analysis"``, 0 of 0
    with no status, its ``output_format`` ``html``: the table as preformatted text and the time plot
    as an image. The test scores add up to ``result.points`` and the max_scores to
    ``result.max_points`` less ``result.pending_points``.

    What is rendered is :func:`grader.render._common.student_view` of the result: hidden cases
    (``CaseResult.visibility == "hidden"``) reach the student as name, score and ``passed`` or
    ``failed`` only (a crash or a timeout there is ``failed``): their test's output gives each
    one's name and result and nothing else, a name that gives the size or seed away becomes
    ``hidden case K``, and part messages that could reveal one are cut (see
    :mod:`grader.render._common`). ``execution_time`` is left out when hidden cases ran (it would
    cover them: :func:`grader.render._common.public_elapsed_s`). Gradescope's own per-test
    ``"hidden"`` visibility would hide the test, its status and the student's total score
    entirely, so it is not used unless asked for.

    Args:
        result: the graded submission.
        leaderboard_part: the part key whose largest timed run's median time (ms, lower is
            better; default: the challenge part, :data:`grader.assignment.parts.CHALLENGE_PART`) becomes the ``leaderboard`` entry ``"Part N time (ms)"``; no leaderboard when
            None, when the part is absent, has no timed runs, or any of them failed.
        visibility: top-level visibility of the tests (one of :data:`VISIBILITIES`).
        stdout_visibility: who sees the autograder's stdout (default ``hidden``: the terminal
            report there shows hidden cases in full).
        hidden_case_visibility: a per-test ``visibility`` for the tests of hidden cases (None:
            inherit the top level).

    Returns:
        A dict with ``score`` (float points), ``execution_time`` (int, rounded seconds; absent when
        hidden cases ran), ``output`` (a
        short summary, HTML-escaped, as Gradescope renders top-level output as simple HTML),
        ``visibility``, ``stdout_visibility``, ``tests`` (list of dicts) and, when there is one,
        ``leaderboard`` (list of ``{"name", "value", "order": "asc"}``).

    Raises:
        ValueError: a visibility argument is not one Gradescope documents.
    """
    _check_visibilities(visibility=visibility, stdout_visibility=stdout_visibility,
                        hidden_case_visibility=hidden_case_visibility)
    view = student_view(result)
    tests = [t for p in view.parts
             for t in _part_tests(p, hidden_case_visibility, pending=view.performance_pending(p))]
    out: dict[str, Any] = {"score": float(view.points)}
    elapsed = public_elapsed_s(result)
    if elapsed is not None:
        out["execution_time"] = max(0, round(elapsed))
    out |= {
        "output": html.escape(_summary(view), quote=False),
        "visibility": visibility,
        "stdout_visibility": stdout_visibility,
        "tests": tests,
    }
    board = _leaderboard(view, leaderboard_part)
    if board:
        out["leaderboard"] = board
    return out
