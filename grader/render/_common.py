"""Helpers shared by the renderers: labels, number formats, and what a student may see.

The student-facing renderers (the formats whose row in :data:`grader.render.formats.FORMATS` is
``student_facing``) render :func:`student_view` of a result: each hidden case by name and ``passed``
or ``failed`` only, and nothing else that depends on how the hidden cases ran (a crash or a
timeout there reads as a failure; :func:`student_view` says what it changes). Run times shown to
students are :func:`public_elapsed_s`. Three things need care beyond not printing the case's fields:

- a hidden case's *name* may itself give the size away (the runner names cases ``n=<size>``);
  such a name is replaced by ``hidden case K`` (:func:`public_case_name`);
- a part's message (timeout, crash, worker error) is written by the runner for the whole part and
  may name the hidden case it stopped on, or carry kernel output printed while hidden cases ran
  (:func:`public_part_message`);
- the run's base seed is a hidden case's seed when the private config gave it no seed of its own
  (:func:`public_seed`).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import re
from pathlib import Path

from grader.core.performance import Performance, Profile, Timing
from grader.core.results import TO_REGRADE, CaseResult, CaseStatus, PartResult, PartStatus, SubmissionResult
from grader.core.safe_text import printable  # noqa: F401  (the renderers' cleaner, re-exported)

#: Part statuses for which a part is shown as one failing entry when none of its cases ran.
WHOLE_PART_FAILURES = ("compile-error", "missing", "timeout", "crash", "error")
#: Part statuses whose message belongs to the case the part stopped on (status equal to the part's).
STOPPED_STATUSES = ("timeout", "crash", "error")

#: Plain words for each part status, for readers.
PART_STATUS_WORDS = {
    "pass": "passed", "fail": "failed", "compile-error": "does not compile", "missing": "file missing",
    "timeout": "timed out", "crash": "crashed", "error": "could not be graded",
}
#: What a part the grader failed on says beside its status words
#: (:attr:`grader.core.results.PartResult.to_regrade`): never the student's doing.
REGRADE_WORDS = f"the grader failed, not the submission: {TO_REGRADE}"


def part_status_words(part: PartResult) -> str:
    """The part's status in plain words (:data:`PART_STATUS_WORDS`), with :data:`REGRADE_WORDS` where
    the grader failed on it."""
    words = PART_STATUS_WORDS[part.status]
    return f"{words} ({REGRADE_WORDS})" if part.to_regrade else words


#: Plain words for each case status.
CASE_STATUS_WORDS = {
    "pass": "passed", "fail": "failed", "error": "error", "timeout": "timed out", "crash": "crashed",
    "not-run": "not run",
}

HIDDEN_NOTE = "hidden case: only its name and result are shown"


def points(x: float) -> str:
    """Points without trailing zeros (``2``, ``1.5``)."""
    return f"{x:g}"


def part_label(part: PartResult) -> str:
    """The part's kernel names from the contract (``blelloch_scan``; ``scan_tiles + add_tile_offsets``).

    Falls back to the part's key for a part this version of the grader does not define.
    """
    from grader.assignment.parts import PARTS  # late: keeps importing the renderers cheap for callers

    spec = PARTS.get(part.key)
    return " + ".join(k.name for k in spec.kernels) if spec else part.key


def ran(case: CaseResult) -> bool:
    """Whether the case was run at all."""
    return case.status != "not-run"


def is_hidden(case: CaseResult) -> bool:
    """Whether students may see this case by name and status only."""
    return case.visibility == "hidden"


def whole_part_failure(part: PartResult) -> bool:
    """True when the part failed before any case ran (compile error, missing file, ...).

    Such a part is rendered as one failing entry carrying the part's message instead of one per case.
    """
    return part.status in WHOLE_PART_FAILURES and not any(ran(c) for c in part.cases)


def stopped_case(part: PartResult) -> CaseResult | None:
    """The case a timed-out, crashed or errored part stopped on (it carries the part's message)."""
    if part.status not in STOPPED_STATUSES:
        return None
    return next((c for c in reversed(part.cases) if c.status == part.status), None)


def _mentions(text: str, number: int) -> bool:
    """Whether ``text`` holds ``number`` as a token of its own (``n=777``, ``777``, not ``int32``)."""
    return re.search(rf"(?<![\w.]){abs(number)}(?![\w.])", text) is not None


def is_timed_case(case: CaseResult) -> bool:
    """Whether the case is a timing run rather than a correctness case: the worker names timing
    runs ``timed n=<n> <dtype>`` and gives them no points (one that failed has no timing)."""
    return case.name.startswith("timed ") or (case.timing is not None and case.max_points == 0)


def public_case_name(part: PartResult, case: CaseResult) -> str:
    """The case's name as a student may see it.

    Visible cases keep their name. A hidden case keeps its name unless the name contains the case's
    size or seed as a number, in which case it becomes ``hidden case K`` (K counts the part's hidden
    cases from 1, in config order, so it is stable between runs of one config).
    """
    if not is_hidden(case):
        return case.name
    if not (_mentions(case.name, case.n) or _mentions(case.name, case.seed)):
        return case.name
    hidden = [c for c in part.cases if is_hidden(c)]
    k = next((i for i, c in enumerate(hidden, 1) if c is case), None)
    return f"hidden case {k}" if k is not None else "hidden case"


def public_part_message(part: PartResult) -> str:
    """The part's message as a student may see it.

    Unchanged when no hidden case of the part ran (a compile error, a missing file, or a part of
    visible cases only). When the part stopped on a hidden case, only what happened is said. When
    it stopped on a visible case after hidden ones ran, only the message's first line is kept: the
    rest may hold kernel output printed while the hidden cases ran.
    """
    if not any(is_hidden(c) and ran(c) for c in part.cases):
        return part.message
    culprit = stopped_case(part)
    if culprit is not None and is_hidden(culprit):
        return (f"{part_status_words(part)} during {public_case_name(part, culprit)}; "
                "details are not shown for hidden cases")
    lines = part.message.splitlines()
    if len(lines) <= 1:
        return part.message
    return lines[0] + "\n(further output is not shown: hidden cases ran in the same process)"


def no_part_file(result: SubmissionResult) -> str:
    """The sentence saying that the submission held no part file at all (every part graded is
    missing), for the top of a report; "" when any part file was there."""
    if not result.parts or any(p.status != PartStatus.MISSING for p in result.parts):
        return ""
    names = ", ".join(Path(p.file).name for p in result.parts)
    return f"No part file was found in the submission; expected {names}."


def public_seed(result: SubmissionResult) -> int | None:
    """The run's base seed, or None when printing it would give away a hidden case's seed."""
    cases = [c for p in result.parts for c in p.cases]
    hidden = {c.seed for c in cases if is_hidden(c)}
    visible = {c.seed for c in cases if not is_hidden(c)}
    return None if result.seed in hidden and result.seed not in visible else result.seed


def largest_timed_case(part: PartResult) -> CaseResult | None:
    """The timed case with the largest n, or None when the part has no timed case or any of its
    timed cases failed (a kernel whose output was wrong after the timed runs has no fair time)."""
    timed = [c for c in part.cases if is_timed_case(c)]
    if not timed or any(c.status != "pass" or c.timing is None for c in timed):
        return None
    return max(timed, key=lambda c: c.n)


def pending_performance(result: SubmissionResult, part: PartResult) -> bool:
    """Whether the part's performance points wait for a run on a GPU rather than being lost
    (:meth:`grader.core.results.SubmissionResult.performance_pending`)."""
    return result.performance_pending(part)


def performance_shown(part: PartResult) -> bool:
    """Whether a report shows the part's performance at all: not for a timed part worth no points
    that was not timed (Part 3's timing on the emulator: nothing measured, nothing to give)."""
    perf = part.performance
    return perf is not None and (perf.max_points > 0 or perf.ratio is not None)


def pending_text(pending: float) -> str:
    """The words every report uses for performance points that wait for a GPU run."""
    return f"{points(pending)} performance points pending a run on a GPU (not in this score)"


def device_text(result: SubmissionResult) -> str:
    """The device facts as one line (``H100 ..., compute_capability 9.0``), backend left out."""
    dev = dict(result.device)
    dev.pop("backend", None)
    name = dev.pop("device", None)
    rest = ", ".join(f"{k} {v}" for k, v in dev.items())
    return ", ".join(x for x in (name, rest) if x)


def timing_text(t: Timing) -> str:
    """One line about a case's timing: median, spread, runs, bandwidth, ratios."""
    bits = [f"median {t.median_ms:.4g} ms (spread {100 * t.spread:.1f} %, {t.runs} runs)", f"{t.gbps:.1f} GB/s"]
    if t.copy_fraction is not None:
        bits.append(f"{100 * t.copy_fraction:.0f} % of copy bandwidth")
    if t.ratio is not None:
        ref = f" ({t.reference_ms:.4g} ms)" if t.reference_ms is not None else ""
        bits.append(f"{t.ratio:.2f}× the reference{ref}")
    if t.cpu_speedup is not None:
        bits.append(f"{t.cpu_speedup:.1f}× faster than the CPU scan")
    return " · ".join(bits)


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


#: The analysis table's columns (:class:`grader.core.performance.AnalysisRow`): header, cell. Said once: the
#: text, Markdown and the other formats' tables all read it (:func:`analysis_table`).
ANALYSIS_COLUMNS = (
    ("n", lambda r: f"{r.n:,}"),
    ("GPU ms", lambda r: f"{r.gpu_ms:.4g}"),
    ("CPU ms", lambda r: _num(r.cpu_ms, ".4g")),
    ("speed-up", lambda r: "-" if r.speedup is None else f"{r.speedup:.1f}×"),
    ("adds", lambda r: f"{r.adds:,}"),
    ("GFLOPS", lambda r: f"{r.gflops:.1f}"),
    ("% FP32 peak", lambda r: _num(r.fp32_percent, ".2f")),
    ("CPU GFLOPS", lambda r: _num(r.cpu_gflops, ".2f")),
    ("GB/s", lambda r: f"{r.dram_gbps:.0f}"),
    ("% DRAM peak", lambda r: _num(r.dram_percent, ".1f")),
    ("% of copy", lambda r: _num(r.copy_percent, ".1f")),
)


def analysis_table(analysis) -> tuple[list[str], list[list[str]]]:
    """The analysis table of a part's :class:`grader.core.performance.Analysis`: ``(headers, rows of cells)``."""
    return [h for h, _ in ANALYSIS_COLUMNS], [[cell(r) for _, cell in ANALYSIS_COLUMNS] for r in analysis.rows]


def analysis_notes(analysis) -> list[str]:
    """The lines under the analysis table: the GPU's peaks, how adds are counted, each size's bound."""
    peaks = ("peaks of the " + (analysis.device or "GPU") + ": "
             + (f"FP32 {analysis.peak_fp32_gflops:.0f} GFLOPS" if analysis.peak_fp32_gflops else "FP32 unknown")
             + (f", DRAM {analysis.peak_dram_gbps:.0f} GB/s" if analysis.peak_dram_gbps else ", DRAM unknown")
             + f" ({analysis.peaks})")
    return ([peaks, f"adds counted as {analysis.formula}; the CPU's sequential scan does n - 1"]
            + [f"n = {r.n:,}: {r.bound}" for r in analysis.rows])


def analysis_lines(analysis) -> list[str]:
    """The analysis as plain text (no indent): a heading, the aligned table, then
    :func:`analysis_notes`; [] for None."""
    if analysis is None:
        return []
    head, rows = analysis_table(analysis)
    widths = [max(len(c) for c in col) for col in zip(head, *rows)]
    table = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in [head, *rows]]
    return ["analysis (the assignment's testing and analysis; GPU times are medians):", *table, *analysis_notes(analysis)]


def roofline_lines(roofline) -> list[str]:
    """A part's emulator roofline (:class:`grader.core.performance.Roofline`) as plain text (no indent): what
    was counted, then the bound at each timed size beside the reference's; [] for None."""
    if roofline is None:
        return []
    lines = [f"roofline (ESTIMATE, no points): {roofline.message}"]
    if roofline.bytes_per_element is None:
        return lines
    ref = (f"; the reference: {roofline.reference_bytes_per_element:.2f} bytes per element, "
           f"{roofline.reference_launches} launches" if roofline.reference_bytes_per_element is not None else "")
    lines.append(f"counted on the CPU emulator at n = {roofline.n:,} ({roofline.dtype}): "
                 f"{roofline.bytes_per_element:.2f} bytes per element, {roofline.launches} launches{ref}")
    lines.append(_span_line("span", roofline.span_steps, roofline.barriers, roofline.span_exponent)
                 + ("" if roofline.reference_span_steps is None else
                    _span_line("; the reference's", roofline.reference_span_steps, roofline.reference_barriers,
                               roofline.reference_span_exponent)))
    lines.append(f"target: {roofline.target}, {roofline.peak_dram_gbps:g} GB/s, {roofline.step_ns:g} ns a step "
                 f"(a memory operation or a barrier), {roofline.launch_us:g} µs a launch; bound = max(bytes / "
                 f"bandwidth, (span + barriers) x step) + launches x launch, an ESTIMATE")
    for r in roofline.rows:
        against = ("" if r.reference_bound_ms is None else
                   f" (the reference's {r.reference_bound_ms:.4g} ms; {r.ratio:.2f}×)")
        lines.append(f"n = {r.n:,}: at least {r.bound_ms:.4g} ms (estimate){against}")
    return lines + prediction_lines(roofline.prediction)


def prediction_lines(pred) -> list[str]:
    """A part's predicted time (:class:`grader.core.performance.Prediction`) as plain text (no
    indent): the message, then the predicted time at each timed size beside the reference's; [] for
    None. Predicted points are said as such: they are never counted."""
    if pred is None:
        return []
    lines = [f"PREDICTED (not counted): {pred.message}"]
    for r in pred.rows:
        against = ("" if r.reference_ms is None else f" (the reference's {r.reference_ms:.4g} ms; ratio {r.ratio:.2f})")
        lines.append(f"n = {r.n:,}: predicted {r.predicted_ms:.4g} ms on an {pred.gpu}{against}")
    return lines


def _span_line(what: str, span: int | None, barriers: int | None, exponent: float | None) -> str:
    """A roofline's span in words: the memory operations of one thread, its barriers, and how it
    grows with n (the exponent of n measured from n / 4 to n)."""
    if span is None:
        return f"{what}: not counted (the bound comes from the bytes and the launches only)"
    grows = (f", growing as n^{exponent:.2f} (counted at n / 4 and n)" if exponent and exponent >= 0.005
             else ", kept as counted at larger n")
    return f"{what}: {span:,} memory operations of one thread and {barriers or 0} barriers{grows}"


def analysis_report(part: PartResult) -> str:
    """The part's analysis table (GPU) and roofline (emulator) as plain text, "" for neither: the
    output of the ``analysis`` test of Gradescope, PrairieLearn and JUnit."""
    return "\n".join(analysis_lines(part.analysis) + roofline_lines(part.roofline))


#: Findings of a case a student's report shows: the first (the case's message) and two more.
SHOWN_FINDINGS = 3


def other_findings(case: CaseResult) -> list[str]:
    """The lines a report puts after a failing case's message for its other findings (the case's
    message tells the first): the next :data:`SHOWN_FINDINGS` - 1 in cause order, one line each
    (``also race: ...``), then one line naming the kinds of the rest; empty for one finding."""
    rest = case.findings[1:]
    lines = [f"also {f.kind}: {f.message.splitlines()[0] if f.message else ''}" for f in rest[:SHOWN_FINDINGS - 1]]
    if len(rest) >= SHOWN_FINDINGS:
        more = rest[SHOWN_FINDINGS - 1:]
        lines.append(f"and {len(more)} more: {', '.join(f.kind for f in more)} (all in the JSON result)")
    return lines


def visible_case_details(case: CaseResult, message: str | None = None) -> str:
    """Everything about a visible case for its reader: message, size, seed and timing (multi-line).

    ``message`` replaces the case's own message (the part's full message for the case a part
    stopped on).
    """
    message = case.message if message is None else message
    lines = [message] if message else []
    lines += other_findings(case)
    lines.append(f"n = {case.n} ({case.dtype}), seed {case.seed}")
    if case.timing is not None:
        lines.append(timing_text(case.timing))
    return "\n".join(lines)


def utc_timestamp(iso: str) -> str | None:
    """An ISO 8601 time as UTC without zone (``2026-11-22T02:43:59``), or None if unreadable."""
    try:
        t = _dt.datetime.fromisoformat(iso)
    except ValueError:
        return None
    if t.tzinfo is not None:
        t = t.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    return t.isoformat(timespec="seconds")


_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")


def finding_key(case: CaseResult) -> tuple:
    """What makes two failing cases' reports the same finding: status, visibility, the first
    finding's kind and place (file, line), and its message with every number masked (a thread id,
    an index, a value)."""
    first = case.findings[0] if case.findings else None
    text = (first.message if first and first.message else case.message).split("\n", 1)[0]
    return (case.status, case.visibility, first.kind if first else case.kind, first.file if first else None,
            first.line if first else None, _NUMBER_RE.sub("#", text))


def group_findings(cases: list[CaseResult]) -> list[list[CaseResult]]:
    """``cases`` (failing ones) grouped by :func:`finding_key`, each group in run order, the groups
    in the order of their first case: a race that fails 34 sizes is one group."""
    groups: dict[tuple, list[CaseResult]] = {}
    for c in cases:
        groups.setdefault(finding_key(c), []).append(c)
    return list(groups.values())


def folded_sizes(cases: list[CaseResult], *, limit: int = 8) -> str:
    """The sizes of ``cases`` in a few words: ``1, 2, 3 (int32, float32)`` where every dtype has the
    same sizes, else per dtype (``int32: 1, 2; float32: 2``); a list longer than ``limit`` folded
    to its ends and count (``1, 2, 3, …, 511, 512 (18 sizes)``). A hidden case shows its number
    (``#2``), never its size. A float32 case with fractional inputs counts as its own dtype
    (``float32 fractional``)."""
    by_dtype: dict[str, list[str]] = {}
    for c in cases:
        dtype = c.dtype + (" fractional" if c.visibility != "hidden" and c.name.endswith(" fractional") else "")
        by_dtype.setdefault(dtype, []).append(c.name.split()[1] if c.visibility == "hidden" else str(c.n))

    def fold(sizes: list[str]) -> str:
        sizes = list(dict.fromkeys(sizes))
        if len(sizes) <= limit:
            return ", ".join(sizes)
        return ", ".join(sizes[:3] + ["…"] + sizes[-2:]) + f" ({len(sizes)} sizes)"
    lists = list(by_dtype.values())
    if len(lists) > 1 and all(v == lists[0] for v in lists):
        return f"{fold(lists[0])} ({', '.join(by_dtype)})"
    return "; ".join(f"{d}: {fold(v)}" for d, v in by_dtype.items())


def block_size_text(result: SubmissionResult) -> str:
    """The run's BLOCK_SIZE, with the parts launched otherwise named: ``BLOCK_SIZE 512 (Part 4: 256;
    Part 5: 128 × 44 items a thread)``; just ``BLOCK_SIZE 512`` when every part uses it (or the
    result does not record the parts' own)."""
    other = [f"Part {p.number}: {p.block_size}" + (f" × {p.items_per_thread} items a thread" if p.items_per_thread else "")
             for p in result.parts
             if p.block_size is not None and (p.block_size != result.block_size or p.items_per_thread)]
    return f"BLOCK_SIZE {result.block_size}" + (f" ({'; '.join(other)})" if other else "")


# ---- what students see of the hidden cases ---------------------------------------------------------

#: A student-facing format's performance and profile messages for a part in which a hidden case
#: failed, whatever the TA's result says (the part may have stopped there, and lost its scores).
HIDDEN_FAILED_PERFORMANCE = ("no performance points: a hidden case did not pass (performance is scored only when "
                             "every case passes)")
HIDDEN_FAILED_PROFILE = "no profile points: a hidden case did not pass (the profile is scored only when every case passes)"


def hidden_phase_ran(part: PartResult) -> bool:
    """Whether the part reached its hidden cases (any of them ran). They run after every visible
    case, the timing and the profile, so whatever happened before this is the visible cases' doing."""
    return any(is_hidden(c) and ran(c) for c in part.cases)


def _student_case(part: PartResult, case: CaseResult, *, keep_not_run: bool) -> CaseResult:
    """A hidden case as a student may see it: its public name (:func:`public_case_name`), its
    dtype, seed and points, and ``pass`` or ``fail``; no size (0), message, mismatch, timing, kind,
    finding or warning. A case not run stays ``not-run`` only where ``keep_not_run``."""
    status = case.status if case.status == "pass" or (keep_not_run and not ran(case)) else CaseStatus.FAIL
    return CaseResult(name=public_case_name(part, case), n=0, dtype=case.dtype, seed=case.seed, status=status,
                      points=case.points, max_points=case.max_points, visibility=case.visibility)


def _student_part(part: PartResult) -> PartResult:
    """``part`` as :func:`student_view` gives it."""
    hidden = [c for c in part.cases if is_hidden(c)]
    if not hidden:
        return part
    whole = whole_part_failure(part)  # nothing ran: one entry with the part's (compiler's) message
    cases = tuple(_student_case(part, c, keep_not_run=whole) if is_hidden(c) else c for c in part.cases)
    if not hidden_phase_ran(part):  # what the student sees came before any hidden case ran
        return dataclasses.replace(part, cases=cases)
    status, message = part.status, part.message
    culprit = stopped_case(part)
    if status in STOPPED_STATUSES and not any(c.status == status for c in part.cases if not is_hidden(c)):
        status, message = PartStatus.FAIL, ""  # it stopped on a hidden case: as a failure of that case
    elif culprit is not None and is_hidden(culprit):
        message = ""
    else:
        message = public_part_message(part)
    performance, profile = part.performance, part.profile
    if any(c.status != "pass" for c in hidden):
        # performance and profile are given after the hidden cases and lost when one fails; a part
        # that stopped there lost them otherwise worded: one wording for every way a hidden case
        # fails (points are never changed: a student's score is the result's)
        if performance is not None and not performance.points:
            performance = Performance(0.0, performance.max_points, None, HIDDEN_FAILED_PERFORMANCE)
        if profile is not None and not profile.points:
            profile = Profile(0.0, profile.max_points, HIDDEN_FAILED_PROFILE)
    return dataclasses.replace(part, status=status, message=message, cases=cases, performance=performance,
                               profile=profile, phases_s={})


def student_view(result: SubmissionResult) -> SubmissionResult:
    """``result`` as a student may see it, which every student-facing renderer renders: nothing in it
    depends on the hidden cases beyond their names and whether each passed.

    - each hidden case: its public name (:func:`public_case_name`), dtype, seed and points, and
      ``pass`` or ``fail`` (a crash, a timeout, an error and a case not run after the part stopped
      among the hidden cases are all ``fail``); size 0, no message, mismatch, timing or findings;
      cases not run because the part failed before any case ran (a compile error) stay ``not-run``;
    - a part that stopped (``timeout``, ``crash``, ``error``) on a hidden case is ``fail``, its
      message empty, as a part whose hidden case failed; a part that stopped on a visible case
      after hidden cases ran keeps its message's first line (:func:`public_part_message`);
    - where a hidden case failed, the part's performance and profile (0 points then, as the
      worker scores them) have one message each (:data:`HIDDEN_FAILED_PERFORMANCE`,
      :data:`HIDDEN_FAILED_PROFILE`), however the part's run ended; its phase times are dropped.

    Points are never changed: the view's score is the result's.

    The run's wall time and base seed are not changed here: a renderer shows
    :func:`public_elapsed_s` and :func:`public_seed` (the seeds of the hidden cases are kept so
    that the latter can be taken of the view as of the result). A pure function.
    """
    return dataclasses.replace(result, parts=tuple(_student_part(p) for p in result.parts))


def public_elapsed_s(result: SubmissionResult) -> float | None:
    """The run's wall time a student may see: ``elapsed_s`` when no hidden case ran, else None (the
    time would cover the hidden cases: a kernel could spin in proportion to a hidden size and read it
    back; the visible cases' share cannot be told apart where parts ran at once)."""
    return None if any(hidden_phase_ran(p) for p in result.parts) else result.elapsed_s


def quick_check_text(result: SubmissionResult) -> str | None:
    """What ``scangrade check``'s quick check left out, in one sentence for every report format,
    or None for a grade of every size (or a quick check that left nothing out)."""
    if result.quick_max_n is None or not result.skipped_cases:
        return None
    cases = f"{result.skipped_cases} case{'s' if result.skipped_cases != 1 else ''}"
    worth = f"{result.skipped_points:g} point{'s' if result.skipped_points != 1 else ''}"
    return (f"Quick check: skipped n > {result.quick_max_n} ({cases}, {worth}, neither "
            f"passed nor failed and not in this total); `scangrade check --full` runs every size, as the official "
            f"grade does")
