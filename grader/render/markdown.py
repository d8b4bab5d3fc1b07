"""A Markdown summary of a :class:`~grader.results.SubmissionResult` (GitHub-flavoured Markdown).

For a CI job summary (``$GITHUB_STEP_SUMMARY``) or a pull-request comment, so it is student-facing:
hidden cases are shown by name, status and points only.
"""

from __future__ import annotations

import re

from grader.render._common import (CASE_STATUS_WORDS, PART_STATUS_WORDS, device_text, is_hidden, points,
                                   public_case_name, public_part_message, public_seed, stopped_case,
                                   whole_part_failure)
from grader.results import CaseResult, PartResult, SubmissionResult, Timing

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~#!])")
_DASH = "—"


def _md(text: str) -> str:
    """Text safe inside a paragraph, list item or table cell: no markup, no HTML, one line."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return "<br>".join(text.splitlines())


def _code_block(text: str) -> list[str]:
    fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    return [fence + "text", text.rstrip("\n"), fence]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _timing_cells(t: Timing | None) -> list[str]:
    if t is None:
        return [_DASH] * 5
    return [f"{t.median_ms:.4g}", f"±{100 * t.spread:.1f} %", f"{t.gbps:.1f}",
            _DASH if t.copy_fraction is None else f"{100 * t.copy_fraction:.0f} %",
            _DASH if t.ratio is None else f"{t.ratio:.2f}×"]


def _case_message(part: PartResult, case: CaseResult) -> str:
    if case is stopped_case(part) and part.message:
        return public_part_message(part)
    return case.message


def _part_section(part: PartResult) -> list[str]:
    lines = [f"### Part {part.number}: {_md(part.title)} — {points(part.points)}/{points(part.max_points)} points",
             "", f"File {_md(part.file)} · {PART_STATUS_WORDS[part.status]}", ""]
    if whole_part_failure(part):
        lines.append(f"No case ran ({len(part.cases)} not run, {points(sum(c.max_points for c in part.cases))} "
                     "points).")
        msg = public_part_message(part)
        if msg:
            lines += [""] + _code_block(msg)
    else:
        timed = any(c.timing is not None and not is_hidden(c) for c in part.cases)
        head = ["Case", "Status", "Points"] + (["ms", "spread", "GB/s", "% of copy", "× reference"] if timed else [])
        table = [_row(head), _row(["---", "---"] + ["---:"] * (len(head) - 2))]
        for c in part.cases:
            cells = [_md(public_case_name(part, c)), CASE_STATUS_WORDS[c.status],
                     f"{points(c.points)}/{points(c.max_points)}"]
            if timed:
                cells += _timing_cells(None if is_hidden(c) else c.timing)
            table.append(_row(cells))
        if part.status == "pass" and not timed:  # nothing to read in it: fold it away
            table = [f"<details><summary>{len(part.cases)} cases, all passed</summary>", ""] + table + ["", "</details>"]
        lines += table
        failing = [c for c in part.cases if c.status not in ("pass", "not-run")]
        if failing:
            lines += ["", "Failing cases:", ""]
            for c in failing:
                name, status = _md(public_case_name(part, c)), CASE_STATUS_WORDS[c.status]
                if is_hidden(c):
                    lines.append(f"- {name} — {status} (hidden case: details are not shown)")
                    continue
                msg = _case_message(part, c)
                first, _, rest = msg.partition("\n")
                lines.append(f"- {name} — {status}: {_md(first)}" + (f" (seed {c.seed})" if first else ""))
                if rest.strip():
                    lines += [""] + ["  " + x for x in _code_block(rest)]
        skipped = [c for c in part.cases if c.status == "not-run"]
        if skipped:
            lines += ["", f"Not run: {len(skipped)} case(s) — {_md(skipped[0].message or 'not run')}"]
    perf = part.performance
    if perf is not None:
        ratio = f" (ratio to the reference {perf.ratio:.2f})" if perf.ratio is not None else ""
        lines += ["", f"Performance: {points(perf.points)}/{points(perf.max_points)} points{ratio} — "
                      f"{_md(perf.message)}"]
    return lines + [""]


def markdown(result: SubmissionResult) -> str:
    """A Markdown summary of the result (GitHub-flavoured; a str ending in a newline, no I/O).

    Layout: a ``##`` header with the total points; a line with submission, backend and device,
    seed, BLOCK_SIZE and grader version; the timing note; an overview table (part, status, cases
    passed, points, and a total row); then per part a ``###`` section with a table of its cases
    (case, status, points, and — when any visible case was timed — median ms, spread, GB/s, % of
    copy bandwidth, ratio to the reference), its failing cases with their messages (a timed-out or
    crashed case's multi-line message in a code block), the count of cases not run, and the
    performance score. A part that failed before any case ran shows its message (compiler output)
    in a code block instead of the table.

    Student-facing: a hidden case shows its name (``hidden case K`` when the name gives its size
    away), status and points only — no size, seed, values, message or timing. Text from the
    submission (messages, compiler output, paths) is escaped or fenced, so it cannot inject
    Markdown or HTML.
    """
    ok = result.passed
    lines = [f"## scangrade: {points(result.points)}/{points(result.max_points)} points — "
             f"{'all cases passed' if ok else 'some cases did not pass'}", ""]
    dev = device_text(result)
    facts = [f"Submission {_md(result.submission)}", f"backend {_md(result.backend)}"]
    if dev:
        facts.append(f"device: {_md(dev)}")
    seed = public_seed(result)
    if seed is not None:
        facts.append(f"seed {seed}")
    facts += [f"BLOCK\\_SIZE {result.block_size}", f"scangrade {_md(result.scangrade_version)}",
              f"graded in {result.elapsed_s:.1f} s"]
    lines += [" · ".join(facts), ""]
    if result.timing_note:
        lines += [f"_{_md(result.timing_note)}_", ""]
    lines += [_row(["Part", "Status", "Cases passed", "Points"]), _row(["---", "---", "---:", "---:"])]
    for p in result.parts:
        passed = sum(c.status == "pass" for c in p.cases)
        lines.append(_row([f"{p.number}. {_md(p.title)}", PART_STATUS_WORDS[p.status], f"{passed}/{len(p.cases)}",
                           f"{points(p.points)}/{points(p.max_points)}"]))
    total_cases = sum(len(p.cases) for p in result.parts)
    total_passed = sum(c.status == "pass" for p in result.parts for c in p.cases)
    lines += [_row(["**Total**", "**passed**" if ok else "**failed**", f"{total_passed}/{total_cases}",
                    f"**{points(result.points)}/{points(result.max_points)}**"]), ""]
    for p in result.parts:
        lines += _part_section(p)
    return "\n".join(lines).rstrip("\n") + "\n"
