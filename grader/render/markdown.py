"""A Markdown summary of a :class:`~grader.core.results.SubmissionResult` (GitHub-flavoured Markdown).

For a CI job summary (``$GITHUB_STEP_SUMMARY``) or a pull-request comment, so it is student-facing:
hidden cases are shown by name, status and points only.
"""

from __future__ import annotations

import re

from grader.render._common import (CASE_STATUS_WORDS, part_status_words, analysis_notes, analysis_table,
                                   block_size_text, device_text, folded_sizes, group_findings, is_hidden,
                                   is_timed_case, pending_text, performance_shown, points, printable,
                                   public_case_name, public_elapsed_s, public_part_message, public_seed,
                                   quick_check_text, roofline_lines, stopped_case, student_view, whole_part_failure)
from grader.render._patterns import size_pattern
from grader.core.performance import Timing
from grader.core.results import TO_REGRADE, CaseResult, PartResult, SubmissionResult

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
_DASH = "—"


def _md(text: str) -> str:
    """Text safe inside a paragraph, list item or table cell: no markup, no HTML, one line."""
    text = printable(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return "<br>".join(text.splitlines())


def _code_block(text: str, indent: str = "") -> list[str]:
    """A fenced block showing ``text`` verbatim (fence longer than any run of backticks in it)."""
    text = printable(text).rstrip("\n")
    fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    return [indent + line for line in [fence + "text", *text.splitlines(), fence]]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(head: list[str], rows: list[list[str]], left: int = 2) -> list[str]:
    """A table whose first ``left`` columns and a ``Message`` column align left, the rest right."""
    align = ["---" if i < left or h == "Message" else "---:" for i, h in enumerate(head)]
    return [_row(head), _row(align)] + [_row(r) for r in rows]


def _timing_cells(t: Timing | None) -> list[str]:
    if t is None:
        return [_DASH] * 6
    return [f"{t.median_ms:.4g}", f"±{100 * t.spread:.1f} %", f"{t.gbps:.1f}",
            _DASH if t.copy_fraction is None else f"{100 * t.copy_fraction:.0f} %",
            _DASH if t.ratio is None else f"{t.ratio:.2f}×",
            _DASH if t.cpu_speedup is None else f"{t.cpu_speedup:.0f}×"]


def _case_message(part: PartResult, case: CaseResult) -> str:
    if case is stopped_case(part) and part.message:
        return public_part_message(part)
    return case.message


def _where(case: CaseResult) -> str:
    """A failing case's first finding in a few words: ``race at part1_naive.cu:31``, ``mismatch``."""
    first = case.findings[0] if case.findings else None
    kind = first.kind if first else (case.kind or case.status)
    return f"{kind} at {first.file}:{first.line}" if first and first.file and first.line else kind


def _repeated(part: PartResult, cases: list[CaseResult]) -> list[list[CaseResult]]:
    """The groups of two or more visible failing cases whose first finding is the same (kind, file,
    line and message with its numbers masked: :func:`grader.render._common.group_findings`), not
    counting the case a part stopped on (its own message is told in full)."""
    stopped = stopped_case(part) if part.message else None
    failing = [c for c in cases if c.status not in ("pass", "not-run") and not is_hidden(c) and c is not stopped]
    return [g for g in group_findings(failing) if len(g) > 1]


def _findings_list(groups: list[list[CaseResult]]) -> list[str]:
    """Each repeated finding once, with the sizes it failed (a race at one line in 38 cases is one item)."""
    if not groups:
        return []
    lines = ["Findings in several cases, each told once:", ""]
    for g in groups:
        first = g[0].message.partition("\n")[0]
        lines.append(f"- **{_md(_where(g[0]))}** in {len(g)} cases, n = {_md(folded_sizes(g))}: {_md(first)}")
    return lines + [""]


def _message_cell(part: PartResult, case: CaseResult, base_seed: int, repeated: frozenset[int] = frozenset()) -> str:
    """The first line of a case's message for its table row (empty for passing and not-run cases);
    for a case of a repeated finding (``repeated``: their ids), where it is and that the list below
    tells it."""
    if case.status in ("pass", "not-run"):
        return ""
    if is_hidden(case):
        return "hidden case: details are not shown"
    if id(case) in repeated:
        return f"{_md(_where(case))} (told once below)"
    first = _case_message(part, case).partition("\n")[0]
    seed = f" (seed {case.seed})" if case.seed != base_seed and not is_timed_case(case) else ""
    return _md(first) + seed


def _case_table(part: PartResult, cases: list[CaseResult], base_seed: int, *, timing: bool,
                repeated: list[list[CaseResult]] = ()) -> list[str]:
    head = ["Timed case" if timing else "Case", "Status"]
    head += ["ms", "spread", "GB/s", "% of copy", "× reference", "× CPU"] if timing else ["Points"]
    ids = frozenset(id(c) for g in repeated for c in g)
    messages = [_message_cell(part, c, base_seed, ids) for c in cases]
    if any(messages):
        head.append("Message")
    rows = []
    for c, msg in zip(cases, messages):
        row = [_md(public_case_name(part, c)), CASE_STATUS_WORDS[c.status]]
        if timing:
            row += _timing_cells(None if is_hidden(c) else c.timing)
        else:
            row.append(f"{points(c.points)}/{points(c.max_points)}")
        rows.append(row + ([msg] if any(messages) else []))
    table = _table(head, rows)
    if all(c.status == "pass" for c in cases) and not timing:  # nothing to read in it: fold it away
        table = [f"<details><summary>{len(cases)} cases, all passed</summary>", ""] + table + ["", "</details>"]
    return table + [""]


def _part_section(part: PartResult, base_seed: int, *, pending: bool = False) -> list[str]:
    lines = [f"### Part {part.number}: {_md(part.title)} — {points(part.points)}/{points(part.max_points)} points",
             "", f"File {_md(part.file)} · {part_status_words(part)}", ""]
    checks = [c for c in part.cases if not is_timed_case(c)]
    timed = [c for c in part.cases if is_timed_case(c)]
    if whole_part_failure(part):
        lines.append(f"No case ran ({len(part.cases)} cases, "
                     f"{points(sum(c.max_points for c in part.cases))} points).")
        msg = public_part_message(part)
        if msg:
            lines += [""] + _code_block(msg)
        lines.append("")
    else:
        if checks:
            repeated = _repeated(part, checks)
            lines += _case_table(part, checks, base_seed, timing=False, repeated=repeated)
            lines += _findings_list(repeated)
            pattern = size_pattern(part)
            if pattern:
                lines += [f"**Pattern of the wrong values:** {_md(pattern)}", ""]
        if timed:
            lines += _case_table(part, timed, base_seed, timing=True)
        stopped = stopped_case(part)
        if stopped is not None and not is_hidden(stopped):
            rest = _case_message(part, stopped).partition("\n")[2]
            if rest.strip():
                lines += [f"More on {_md(stopped.name)}:", ""] + _code_block(rest) + [""]
        skipped = [c for c in part.cases if c.status == "not-run"]
        if skipped:
            why = (skipped[0].message or "").removeprefix("not run: ")
            lines += [f"{len(skipped)} case(s) not run" + (f": {_md(why)}." if why else "."), ""]
    perf = part.performance
    if pending:
        lines += [f"Performance: **pending**, {_md(pending_text(perf.max_points))} — {_md(perf.message)}", ""]
    elif perf is not None and performance_shown(part):
        ratio = f" (time / reference time {perf.ratio:.2f})" if perf.ratio is not None else ""
        lines += [f"Performance: {points(perf.points)}/{points(perf.max_points)} points{ratio} — {_md(perf.message)}",
                  ""]
    return lines + _profile_md(part) + _analysis_md(part)


def _profile_md(part: PartResult) -> list[str]:
    """The part's bank-conflict profile (grader.core.access_profile), one paragraph line per report line."""
    from grader.core.access_profile import report_lines
    found = report_lines(part.profile)
    if not found:
        return []
    lines = [_md(found[0][:1].upper() + found[0][1:]), ""]
    for extra in found[1:]:
        lines += [_md(extra[:1].upper() + extra[1:]), ""]
    return lines


def _analysis_md(part: PartResult) -> list[str]:
    """The part's analysis table on a GPU (:func:`grader.render._common.analysis_table`) with its
    notes as a list, and its emulator roofline as a list; [] for neither."""
    lines = []
    if part.analysis is not None:
        head, rows = analysis_table(part.analysis)
        lines += ["**Analysis** (the assignment's testing and analysis):", ""]
        lines += _table(head, rows, left=1) + [""] + [f"- {_md(note)}" for note in analysis_notes(part.analysis)]
        lines.append("")
    found = roofline_lines(part.roofline)
    if found:
        lines += [f"**Roofline** — {_md(found[0].partition(': ')[2])}", ""] + [f"- {_md(x)}" for x in found[1:]] + [""]
    return lines


def markdown(result: SubmissionResult) -> str:
    """A Markdown summary of the result (GitHub-flavoured; a str ending in a newline, no I/O).

    Layout: a ``##`` header with the total points; a line with submission, backend, device facts,
    seed, BLOCK_SIZE, grader version and wall time (:func:`grader.render._common.public_elapsed_s`);
    the timing note; an overview table (part, status, cases passed, points, and a total row); then
    per part a ``###`` section with a table of
    its correctness cases (case, status, points, and the first line of each failing case's
    message; folded into ``<details>`` when all passed), a table of its timed cases when it has any
    (median ms, spread, GB/s, % of copy bandwidth, ratio to the reference, speed-up over the CPU
    scan), the rest of a multi-line message (a timeout's or crash's) in a code block, how many
    cases did not run and why, and the performance score. A part that failed before any case ran
    shows its message (the compiler output) in a code block instead of tables. A case's seed is
    shown only where it differs from the run's seed in the header.

    Student-facing, it renders :func:`grader.render._common.student_view` of the result: a hidden
    case shows its name (``hidden case K`` when the name gives its size away), ``passed`` or
    ``failed`` (a crash or a timeout there is ``failed``) and points only — no size, seed, values,
    message or timing; the wall time is left out when hidden cases ran. Text from the
    submission (messages, compiler output, paths) is escaped or fenced, so it cannot inject
    Markdown or HTML; ANSI colour sequences are dropped.
    """
    seed, elapsed = public_seed(result), public_elapsed_s(result)
    result = student_view(result)
    lines = [f"## scangrade: {points(result.points)}/{points(result.max_points)} points — "
             f"{'all cases passed' if result.passed else 'some cases did not pass'}", ""]
    facts = [f"Submission {_md(result.submission)}", f"backend {_md(result.backend)}"]
    dev = device_text(result)
    if dev:
        facts.append(f"device: {_md(dev)}")
    if seed is not None:
        facts.append(f"seed {seed}")
    facts += [_md(block_size_text(result)), f"scangrade {_md(result.scangrade_version)}"]
    if elapsed is not None:
        facts.append(f"graded in {elapsed:.1f} s")
    lines += [" · ".join(facts), ""]
    if result.timing_note:
        lines += [f"_{_md(result.timing_note)}_", ""]
    quick = quick_check_text(result)
    if quick:
        lines += [f"**{_md(quick)}.**", ""]
    rows = []
    for p in result.parts:
        checks = [c for c in p.cases if not is_timed_case(c)]
        rows.append([f"{p.number}. {_md(p.title)}", part_status_words(p),
                     f"{sum(c.status == 'pass' for c in checks)}/{len(checks)}",
                     f"{points(p.points)}/{points(p.max_points)}"])
    all_checks = [c for p in result.parts for c in p.cases if not is_timed_case(c)]
    total = TO_REGRADE if result.to_regrade else "passed" if result.passed else "failed"
    rows.append(["**Total**", f"**{total}**",
                 f"{sum(c.status == 'pass' for c in all_checks)}/{len(all_checks)}",
                 f"**{points(result.points)}/{points(result.max_points)}**"])
    lines += _table(["Part", "Status", "Cases passed", "Points"], rows) + [""]
    if result.pending_points:
        lines += [f"**Pending:** {_md(pending_text(result.pending_points))}.", ""]
    for p in result.parts:
        lines += _part_section(p, result.seed, pending=result.performance_pending(p))
    return "\n".join(lines).rstrip("\n") + "\n"
