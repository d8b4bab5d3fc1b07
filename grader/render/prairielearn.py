"""PrairieLearn's ``results.json`` from a :class:`~grader.core.results.SubmissionResult`.

Fields follow PrairieLearn's "External Grading" documentation (grading results), as its
``<pl-external-grader-results>`` element shows them: top level ``gradable``, ``score`` (a float in
[0, 1]), ``format_errors`` (when not gradable), ``message``, ``output``, ``images`` and ``tests``;
per test ``name``, ``description``, ``points``, ``max_points``, ``message``, ``output`` and
``images``. Each image is ``{"label": ..., "url": "data:image/png;base64,..."}``. PrairieLearn
escapes text itself (``message`` and ``output`` go through ansi2html, names through the template),
so the text here is plain, with control characters written as ``\\xNN``. The document is kept
under :data:`LIMIT_BYTES`. See ``docs/prairielearn.md``.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

from grader.assignment.config import COMPILE_ERROR_CHOICES
from grader.render._common import (part_status_words, analysis_report, device_text, no_part_file,
                                   is_timed_case, part_label, pending_performance, points, printable,
                                   public_part_message, public_seed, student_view,
                                   whole_part_failure)
from grader.render._groups import (CaseGroup, case_groups, group_counts, group_description, group_output,
                                   timed_run_lines)
from grader.core.results import PartResult, SubmissionResult, clean_text
from grader.render.plot import time_plot_png
from grader.render.pictures import picture_images

#: PrairieLearn's limit on ``results.json`` (bytes); :func:`prairielearn` keeps the document under
#: :data:`TARGET_FRACTION` of it.
LIMIT_BYTES = 1_000_000
TARGET_FRACTION = 0.9
#: Keys the documentation gives for the top level and for each test.
TOP_LEVEL_KEYS = frozenset({"gradable", "score", "format_errors", "message", "output", "images", "tests"})
TEST_KEYS = frozenset({"name", "description", "points", "max_points", "message", "output", "images"})
#: The label of the throughput image of a GPU run.
THROUGHPUT_LABEL = "Throughput: your kernels against the reference solution"
#: Bytes kept of a test's ``message`` and ``description`` (its output carries the details).
MESSAGE_BYTES = 1024


def dumps(doc: dict[str, Any]) -> str:
    """The document as PrairieLearn receives it: compact JSON, UTF-8 text (not ``\\u`` escapes), so
    its size in bytes is what :func:`prairielearn` measured."""
    return json.dumps(doc, ensure_ascii=False, allow_nan=False)


def size_bytes(doc: dict[str, Any]) -> int:
    """Bytes of :func:`dumps` of ``doc`` in UTF-8."""
    return len(dumps(doc).encode("utf-8"))


def _test(part: PartResult, what: str, pts: float, max_pts: float, *, description: str = "", message: str = "",
          output: str = "") -> dict[str, Any]:
    t: dict[str, Any] = {"name": f"Part {part.number} · {part_label(part)} · {what}", "points": float(pts),
                         "max_points": float(max_pts)}
    for key, text in (("description", description), ("message", message), ("output", output)):
        if text:
            t[key] = printable(text if key == "output" else clean_text(text, max_bytes=MESSAGE_BYTES, max_lines=4))
    return t


def _group(part: PartResult, group: CaseGroup) -> dict[str, Any]:
    """One test for a :class:`~grader.render._groups.CaseGroup`: the visible cases of one dtype, or
    the part's hidden cases."""
    return _test(part, group.label, group.points, group.max_points, description=group_description(part, group),
                 message=group_counts(group.cases), output=group_output(part, group))


def _performance(result: SubmissionResult, part: PartResult) -> dict[str, Any] | None:
    """The part's performance test: pending (0 of 0, PrairieLearn shows it as information) when the
    points wait for a GPU run, else the points with each timed run's timing; None for a part
    without performance points and without timed runs."""
    perf = part.performance
    if perf is None:
        return None
    timed = [c for c in part.cases if is_timed_case(c)]
    if pending_performance(result, part):
        return _test(part, "performance (pending)", 0.0, 0.0,
                     message=f"pending: {points(perf.max_points)} points wait for a run on a GPU and are not "
                             "counted in this score",
                     output=perf.message)
    if not perf.max_points and not any(c.timing for c in timed):
        return None
    return _test(part, "performance", perf.points, perf.max_points, message=perf.message.splitlines()[0],
                 output="\n".join([perf.message, *timed_run_lines(part)]))


def _part_tests(result: SubmissionResult, part: PartResult) -> list[dict[str, Any]]:
    """The part's tests: one per case group (the visible cases of each dtype, the hidden cases),
    or one for a part that failed before any case ran; then performance and bank conflicts."""
    checks = [c for c in part.cases if not is_timed_case(c)]
    if whole_part_failure(part):
        message = public_part_message(part) or part_status_words(part)
        tests = [_test(part, part_status_words(part), sum(c.points for c in checks),
                       sum(c.max_points for c in checks), description=f"{part.title}: {Path(part.file).name}",
                       message=message.splitlines()[0], output=message)]
    else:
        tests = [_group(part, g) for g in case_groups(part)]
    perf = _performance(result, part)
    if perf is not None:
        tests.append(perf)
    prof = part.profile
    if prof is not None:
        from grader.core.access_profile import report_lines
        tests.append(_test(part, "bank conflicts", prof.points, prof.max_points, message=prof.message.splitlines()[0],
                           output="\n".join(report_lines(prof))))
    pictures = picture_images(part)
    if pictures:  # information, 0 of 0: the HTML report's pictures, as images (PrairieLearn shows no HTML)
        test = _test(part, "pictures", 0.0, 0.0, message=f"{len(pictures)} picture(s): {pictures[0]['label']}",
                     output="\n".join(p["label"] for p in pictures))
        test["images"] = pictures
        tests.append(test)
    analysis = analysis_report(part)
    if analysis:  # information, 0 of 0: the table (or the roofline) and the time plot
        test = _test(part, "analysis", 0.0, 0.0, message=analysis.splitlines()[0], output=analysis)
        png = time_plot_png(part)
        if png is not None:
            test["images"] = [{"label": f"Part {part.number}: time against n",
                               "url": "data:image/png;base64," + base64.b64encode(png).decode()}]
        tests.append(test)
    return tests


def _throughput_image(result: SubmissionResult) -> dict[str, str] | None:
    """A PNG of each timed part's effective bandwidth against n: the submission, the reference
    solution and the device-to-device copy (:func:`grader.tools.bench_table.throughput_panel`), as a data URL;
    None when nothing was timed or matplotlib is not installed."""
    series = []
    for p in result.parts:
        runs = [c for c in p.cases if is_timed_case(c) and c.timing is not None and c.timing.gbps]
        if runs:
            series.append((p, runs))
    if not series:
        return None
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    from grader.tools.bench_table import throughput_panel

    fig = Figure(figsize=(6.4, 3.4 * len(series)), layout="constrained")
    for i, (part, runs) in enumerate(series, 1):
        mine, ref, copy = [], [], []
        for c in sorted(runs, key=lambda c: c.n):
            t = c.timing
            mine.append((c.n, t.gbps))
            ref_ms = t.reference_ms or (t.median_ms / t.ratio if t.ratio else None)
            if ref_ms:
                ref.append((c.n, t.gbps * t.median_ms / ref_ms))
            if t.copy_fraction:
                copy.append((c.n, t.gbps / t.copy_fraction))
        throughput_panel(fig.add_subplot(len(series), 1, i),
                         {"your kernels": mine, "reference solution": ref, "device copy (roofline)": copy},
                         title=f"Part {part.number}: {part.title} ({runs[0].dtype})",
                         dashed={"device copy (roofline)"})
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=72, metadata={"Software": None})
    return {"label": THROUGHPUT_LABEL, "url": "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()}


def _message(result: SubmissionResult, earned: float, counted: float, pending: float, seed: int | None) -> str:
    lines = [f"scangrade {result.scangrade_version}: {points(earned)}/{points(counted)} points."]
    if pending:
        lines.append(f"Performance ({points(pending)} points) is pending a run on a GPU: this score counts "
                     "correctness only, and the pending points are not part of it.")
    lines.append(f"Backend: {result.backend} ({result.backend_reason}).")
    dev = device_text(result)
    if dev:
        lines.append(f"Device: {dev}.")
    if result.timing_note:
        lines.append(result.timing_note.rstrip(".") + ".")
    if seed is not None:
        lines.append(f"Inputs were drawn with seed {seed}; scangrade check --seed {seed} replays them.")
    return "\n".join(lines)


def _not_gradable(result: SubmissionResult, compile_error: str) -> dict[str, Any] | None:
    """The document of a submission PrairieLearn should not grade (no score, no attempt used), or
    None: no part file at all, the grader failed on a part (:attr:`~grader.core.results.PartResult.to_regrade`:
    not the student's doing), or (``compile_error="not-gradable"``) a part that does not compile, with
    every other problem found (a part missing or misnamed), so that one submission fixes them all."""
    failed = [p for p in result.parts if p.to_regrade]
    if failed:
        return {"gradable": False, "format_errors": [
            f"The autograder failed on Part {p.number} ({Path(p.file).name}), not because of your code; this "
            "submission was not graded and used no attempt: submit it again." for p in failed]}
    nothing = no_part_file(result)
    if nothing:
        return {"gradable": False, "format_errors": [nothing]}
    broken = [p for p in result.parts if p.status == "compile-error"] if compile_error == "not-gradable" else []
    if not broken:
        return None
    others = len(result.parts) > len(broken)
    errors = [f"Part {p.number} ({Path(p.file).name}) does not compile; the compiler's output is below. Fix it and "
              "submit again" + (", or leave the file out to have the other parts graded without it" if others else "")
              + ". This submission was not graded and used no attempt." for p in broken]
    # every other problem the student would meet on submitting again: a part missing or misnamed
    errors += [f"Part {p.number}: {printable(p.message)}" for p in result.parts if p.status == "missing" and p.message]
    output = "\n\n".join(f"--- Part {p.number}: {Path(p.file).name} ---\n{public_part_message(p)}" for p in broken)
    return {"gradable": False, "format_errors": errors, "output": printable(output)}


def prairielearn(result: SubmissionResult, *, compile_error: str = "not-gradable", plot: bool = True,
                 limit_bytes: int = LIMIT_BYTES) -> dict[str, Any]:
    """PrairieLearn's ``results.json`` for one submission, as a JSON-ready dict (no I/O).

    Not gradable (``{"gradable": false, "format_errors": [...], "output": ...}``, no score: PrairieLearn
    marks the submission invalid and counts no attempt) when no part file was submitted, when the
    grader failed on a part (to regrade: docs/results.md, "The grader's failures"), or when
    ``compile_error`` is ``"not-gradable"`` and a part does not compile (its compiler output in
    ``output``). Otherwise gradable, with:

    - ``tests``, in part order: one per case group of each part, worth its cases' points as in the
      config: the visible cases of each dtype (``"Part 2 · blelloch_scan · int32"``: the cases that
      did not pass with their message, n and seed, then the sizes that passed), and the hidden cases
      (``"... · hidden cases"``: each case's name and status only, names that give a size away
      replaced as in :func:`grader.render._common.public_case_name`; ``passed`` or ``failed`` only:
      what is rendered is :func:`grader.render._common.student_view` of the result). A part that failed before any
      case ran (a compile error under ``compile_error="zero"``, a missing file, a timeout or crash
      while compiling) is one test with the part's message. Then ``"... · performance"`` when the
      part has performance points or timed runs (each run's timing in its output), and
      ``"... · bank conflicts"`` for a profiled part, and ``"... · analysis"`` (0 of 0: information)
      for a timed part with an analysis table (a GPU run) or a roofline (the emulator), its time
      plot in the test's ``images``; before it, ``"... · pictures"`` (0 of 0) where the HTML report
      draws a race, bank grids or wrong elements, each picture an SVG image of the test
      (:func:`grader.render.pictures.picture_images`: PrairieLearn shows no HTML). Performance that waits for a GPU (an emulator
      run of a part whose cases all passed) is ``"... · performance (pending)"``, worth 0 of 0, which
      PrairieLearn shows as information, not as a failure.
    - ``score``: the points earned over the points possible less the pending ones, in [0, 1]; the
      tests' ``points`` add up to the points earned and their ``max_points`` to that denominator.
    - ``message``: the total, the pending performance points, backend, device, and the seed.
    - ``images``: on a GPU run, one PNG of each timed part's effective bandwidth against n beside
      the reference solution's and the device copy's (needs matplotlib; left out without it or
      with ``plot=False``).

    The document is kept under ``TARGET_FRACTION * limit_bytes`` bytes of :func:`dumps` (the image
    goes first, then each test's output is cut to a share of what is left, with a note).

    Args:
        result: the graded submission.
        compile_error: ``"not-gradable"`` or ``"zero"`` (the config's ``prairielearn.compile_error``).
        plot: draw the throughput image of a GPU run.
        limit_bytes: PrairieLearn's size limit (default :data:`LIMIT_BYTES`).

    Raises:
        ValueError: ``compile_error`` is not one of :data:`grader.assignment.config.COMPILE_ERROR_CHOICES`.
    """
    if compile_error not in COMPILE_ERROR_CHOICES:
        raise ValueError(f"compile_error must be one of {', '.join(COMPILE_ERROR_CHOICES)}, not {compile_error!r}")
    target = int(TARGET_FRACTION * limit_bytes)
    seed = public_seed(result)
    result = student_view(result)
    doc = _not_gradable(result, compile_error)
    if doc is not None:
        return _fit(doc, target)
    tests = [t for p in result.parts for t in _part_tests(result, p)]
    pending = sum(p.performance.max_points for p in result.parts if pending_performance(result, p))
    counted = result.max_points - pending
    score = result.points / counted if counted > 0 else float(result.passed)
    doc = {"gradable": True, "score": min(1.0, max(0.0, float(score))),
           "message": printable(_message(result, result.points, counted, pending, seed)), "tests": tests}
    image = _throughput_image(result) if plot else None
    if image is not None:
        doc["images"] = [image]
    return _fit(doc, target)


def _fit(doc: dict[str, Any], target: int) -> dict[str, Any]:
    """``doc`` made to fit ``target`` bytes of :func:`dumps`: first without images (a line in the
    message says so), then with every test's output (and the top-level output) cut to an equal
    share of the bytes left, halving the share until it fits; in the end without outputs."""
    if size_bytes(doc) <= target:
        return doc
    doc = dict(doc)
    if "tests" in doc:
        doc["tests"] = [{k: v for k, v in t.items() if k != "images"} for t in doc["tests"]]
    if doc.pop("images", None) is not None:
        doc["message"] = doc.get("message", "") + "\n(The throughput image was left out: results.json would have " \
                                                  "passed PrairieLearn's size limit.)"
    holders = [t for t in doc.get("tests", []) if t.get("output")] + ([doc] if doc.get("output") else [])
    if not holders or size_bytes(doc) <= target:
        return doc
    originals = [h["output"] for h in holders]
    bare = size_bytes(dict(doc, output="", tests=[dict(t, output="") for t in doc.get("tests", [])]))
    share = max(0, (target - bare) // len(holders))
    while share >= 64:
        for h, text in zip(holders, originals):
            h["output"] = clean_text(text, max_bytes=share, max_lines=10**6)
        if size_bytes(doc) <= target:
            return doc
        share //= 2
    for h in holders:
        h["output"] = "(left out: results.json would have passed PrairieLearn's size limit)"
    return doc
