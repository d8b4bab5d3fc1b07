"""Rendering a :class:`~grader.core.results.SubmissionResult` for the terminal.

Rendering is kept apart from the data: the same result is written as JSON by
:meth:`SubmissionResult.to_json` and in other formats by the other modules of :mod:`grader.render`.
"""

from __future__ import annotations

import re

import textwrap

from grader.render._common import (REGRADE_WORDS, SHOWN_FINDINGS, analysis_lines, block_size_text, folded_sizes,
                                   group_findings, is_hidden, is_timed_case, no_part_file, other_findings, pending_text,
                                   performance_shown, printable, public_elapsed_s, public_seed, quick_check_text,
                                   roofline_lines, student_view)
from grader.render._patterns import size_pattern
from grader.core.results import CaseResult, PartResult, SubmissionResult

#: The emulator's sandbox when all of it is in force (``EmulatorBackend.describe()["sandbox"]``).
FULL_SANDBOX = "bubblewrap + seccomp"
_MARK = {"pass": "PASS", "fail": "FAIL", "error": "ERROR", "timeout": "TIMEOUT", "crash": "CRASH",
         "not-run": "NOT RUN"}


def _points(x: float) -> str:
    return f"{x:g}"


def _timing_lines(p: PartResult, pending: bool) -> list[str]:
    timed = [c for c in p.cases if c.timing is not None]
    lines = []
    if timed:
        lines.append(f"    {'timed case':<24} {'median ms':>10} {'spread':>7} {'GB/s':>8} {'% copy':>7} "
                     f"{'ref ms':>9} {'× ref':>6} {'× CPU':>7}")
        for c in timed:
            t = c.timing
            ref = f"{t.reference_ms:.4f}" if t.reference_ms else "-"
            ratio = f"{t.ratio:.2f}" if t.ratio else "-"
            copy = f"{100 * t.copy_fraction:.1f}" if t.copy_fraction else "-"
            cpu = f"{t.cpu_speedup:.0f}" if t.cpu_speedup else "-"
            lines.append(f"    {c.name:<24} {t.median_ms:>10.4f} {100 * t.spread:>6.1f}% {t.gbps:>8.1f} {copy:>7} "
                         f"{ref:>9} {ratio:>6} {cpu:>7}")
    perf = p.performance
    if pending:
        lines.append(f"    PENDING performance: {_points(perf.max_points)} points wait for a run on a GPU, not in this "
                     f"score — {perf.message}")
    elif perf is not None and performance_shown(p):
        lines.append(f"    performance: {_points(perf.points)}/{_points(perf.max_points)} points — {perf.message}")
    return lines


def _part_block(p: PartResult, pending: bool = False, *, show_hidden: bool = True) -> list[str]:
    """The part's lines; ``pending``: its performance points wait for a run on a GPU; without
    ``show_hidden`` (a student's report, of :func:`grader.render._common.student_view`), the hidden
    cases are one line for those that passed and one for those that failed, by name."""
    head = f"Part {p.number}: {p.title}  [{p.file}]  {_points(p.points)}/{_points(p.max_points)} points"
    if pending:
        head += f" ({_points(p.performance.max_points)} pending a GPU run)"
    if p.to_regrade:
        head += f" ({REGRADE_WORDS})"
    lines = [head]
    if p.status in ("compile-error", "missing", "error") or (p.message and p.status in ("timeout", "crash")):
        lines += ["    " + m for m in p.message.splitlines()]
    if p.status in ("compile-error", "missing", "error"):
        return lines + _timing_lines(p, pending) + _profile_lines(p)
    checked = [c for c in p.cases if not is_timed_case(c) and (show_hidden or not is_hidden(c))]
    passed = [c for c in checked if c.status == "pass"]
    if passed:
        every = "all " if len(passed) == len(checked) and (show_hidden or not any(map(is_hidden, p.cases))) else ""
        lines.append(f"    PASS    {every}{_cases(passed)}: n = {folded_sizes(passed)}")
    for group in group_findings([c for c in p.cases if c.status not in ("pass", "not-run")
                                 and (show_hidden or not is_hidden(c))]):
        lines += _failure_lines(group)
    pattern = size_pattern(p)
    if pattern:
        lines += textwrap.wrap(f"PATTERN of the wrong values: {pattern}", WIDTH, initial_indent="    ",
                               subsequent_indent=_INDENT, break_on_hyphens=False)
    skipped = [c for c in checked if c.status == "not-run"]
    if skipped:
        lines.append(f"    NOT RUN {_cases(skipped)}: n = {folded_sizes(skipped)}")
    if not show_hidden:
        lines += _hidden_lines(p)
    return lines + _warning_lines(p) + _timing_lines(p, pending) + _profile_lines(p)


def _hidden_lines(p: PartResult) -> list[str]:
    """A student's lines for the part's hidden cases that ran: those that passed, those that
    failed, by name (whatever the way they failed: the part is :func:`student_view`'s)."""
    lines = []
    for mark, status in (("PASS", "pass"), ("FAIL", "fail")):
        cases = [c for c in p.cases if is_hidden(c) and c.status == status]
        if cases:
            lines.append(f"    {mark:<7} {len(cases)} hidden case{'s' if len(cases) != 1 else ''}: "
                         f"{', '.join(c.name for c in cases)}")
    if any(is_hidden(c) and c.status == "fail" for c in p.cases):
        lines.append(f"{_INDENT}(only names and results are shown for hidden cases)")
    return lines


#: Columns a report line is wrapped at (messages of 250 characters and more otherwise).
WIDTH = 100
_INDENT = " " * 12


def _cases(cases: list[CaseResult]) -> str:
    return f"{len(cases)} case{'s' if len(cases) != 1 else ''}"


def _wrapped(text: str) -> list[str]:
    """``text`` (lines) wrapped at :data:`WIDTH` under the report's message indent."""
    return [w for line in text.splitlines() or [""]
            for w in textwrap.wrap(line, WIDTH, initial_indent=_INDENT, subsequent_indent=_INDENT + "  ",
                                   break_on_hyphens=False) or [_INDENT]]


def _failure_lines(group: list[CaseResult]) -> list[str]:
    """One finding and the cases it failed (grouped by :func:`grader.render._common.group_findings`):
    a heading with what, where and which sizes, then the first case's message and other findings,
    wrapped. A finding of one case keeps the case's name on the heading."""
    first = group[0]
    mark = _MARK[first.status]
    if len(group) == 1:
        head = f"    {mark:<7} {first.name}"
    else:
        finding = first.findings[0] if first.findings else None
        what = finding.kind if finding else (first.kind or first.status)
        where = f" at {finding.file}:{finding.line}" if finding and finding.file and finding.line else (
            f" at line {finding.line}" if finding and finding.line else "")
        head = f"    {mark:<7} {what}{where}: {_cases(group)}, n = {folded_sizes(group)}"
    if len(group) == 1:
        return [head] + _wrapped("\n".join(first.message.splitlines() + other_findings(first)))
    return [head] + _wrapped("\n".join(first.message.splitlines() + [f"(as reported for {first.name})"]
                                        + _other_findings(group)))


def _other_findings(group: list[CaseResult]) -> list[str]:
    """The findings a group's cases have besides the one they share, each kind once in cause order
    with how many of the cases have it and where it first is (at most SHOWN_FINDINGS - 1 kinds,
    then the names of the rest)."""
    seen: dict[str, list] = {}
    for c in group:
        for f in c.findings[1:]:
            seen.setdefault(f.kind, [f, c, 0])[2] += 1
    lines = [f"also {kind}: {f.message.splitlines()[0] if f.message else ''} ({count} of {len(group)} cases, "
             f"as first at {c.name})" for kind, (f, c, count) in seen.items()]
    if len(lines) >= SHOWN_FINDINGS:
        lines = lines[:SHOWN_FINDINGS - 1] + [f"and {len(lines) - SHOWN_FINDINGS + 1} more: "
                                              f"{', '.join(list(seen)[SHOWN_FINDINGS - 1:])} (all in the JSON result)"]
    return lines


#: A block's or a thread's ids in a warning's text, ``(3, 0, 0)``: left out where warnings are compared.
_IDS = re.compile(r"\(\d+, \d+, \d+\)")
#: The blocks a warning names (``block (3, 0, 0)``).
_BLOCKS = re.compile(r"\bblock (\(\d+, \d+, \d+\))")


def _warning_lines(p: PartResult) -> list[str]:
    """Each distinct warning of the part's visible cases once, with the cases it came from: warnings
    that differ only in the block and thread ids they name are one (the first is shown, with how
    many blocks the others name)."""
    seen: dict[str, tuple[str, list[CaseResult], set[str]]] = {}
    for c in p.cases:
        if c.visibility != "hidden":
            for w in c.warnings:
                first, cases, blocks = seen.setdefault(_IDS.sub("", w), (w, [], set()))
                blocks.update(_BLOCKS.findall(w))
                if not cases or cases[-1] is not c:  # a case's warnings come together: once each
                    cases.append(c)
    return [f"    WARNING {w}{f' (the same in {len(blocks)} blocks)' if len(blocks) > 1 else ''} "
            f"(n = {folded_sizes(cases)})" for w, cases, blocks in seen.values()]


def _profile_lines(p: PartResult) -> list[str]:
    from grader.core.access_profile import report_lines
    return ["    " + line for line in report_lines(p.profile) + analysis_lines(p.analysis) + roofline_lines(p.roofline)]


def render_text(result: SubmissionResult, *, show_hidden: bool = False) -> str:
    """A plain-text report: a header, a block per part with every failing case and the timing
    table where timed, then a summary table.

    Without ``show_hidden`` it is what a student may read (the terminal of ``scangrade grade`` and
    ``check``, a student's ``report.txt``): it renders :func:`grader.render._common.student_view`
    of the result, each hidden case by name and passed or failed, the base seed only where a
    visible case uses it, the wall time only where no hidden case ran. With it, the course staff's
    report (``grade --show-hidden``, the ``report.txt`` of a student's folder of a batch): every
    hidden case in full."""
    seed, elapsed = result.seed, result.elapsed_s
    if not show_hidden:
        seed, elapsed = public_seed(result), public_elapsed_s(result)
        result = student_view(result)
    lines = header_lines(result, seed)
    for p in result.parts:
        lines += part_lines(result, p, show_hidden=show_hidden) + [""]
    lines += summary_lines(result, elapsed)
    return printable("\n".join(lines))  # results are clean already; a result read back from a file may not be


def part_lines(result: SubmissionResult, part: PartResult, *, show_hidden: bool = False) -> list[str]:
    """The text report's block of one part of ``result`` (unindented heading, indented lines):
    its cases, findings, pattern, warnings, timing and profile. Without ``show_hidden``, ``result``
    is :func:`grader.render._common.student_view`'s (as :func:`render_text` gives it)."""
    return _part_block(part, result.performance_pending(part), show_hidden=show_hidden)


def header_lines(result: SubmissionResult, seed: int | None) -> list[str]:
    """The text report's header: the grader, the submission, the backend, the config and ``seed``
    (None: not shown), BLOCK_SIZE, and any notes and warnings of the run; ends in an empty line."""
    dev = result.device.get("device")
    lines = [f"scangrade {result.scangrade_version} — grading {result.submission}",
             f"backend: {result.backend}{f' on {dev}' if dev else ''} ({result.backend_reason})",
             f"config: {result.config}{f' · seed {seed}' if seed is not None else ''} · {block_size_text(result)}",
             ""]
    quick = quick_check_text(result)
    if quick:
        lines.insert(3, f"mode: quick check, sizes up to n = {result.quick_max_n} (`scangrade check --full`: every size)")
    if result.device.get("checker"):
        lines.insert(3, f"checks: {result.device['checker']}")
    sandbox = result.device.get("sandbox")
    if sandbox:
        lines.insert(3, f"sandbox: {sandbox}")
        if not result.backend_uses_gpus and sandbox != FULL_SANDBOX:
            lines.insert(3, "WARNING: the submission's code ran without the emulator's whole OS sandbox (bubblewrap "
                            "and seccomp), with what the sandbox line says (docs/security.md)")
    for warning in result.device.get("warnings", "").split("\n"):
        if warning:
            lines.insert(3, f"WARNING: {warning}")
    nothing = no_part_file(result)
    if nothing:
        lines.insert(3, f"NOTHING GRADED: {nothing}")
    return lines


def summary_lines(result: SubmissionResult, elapsed: float | None) -> list[str]:
    """The text report's closing table (each part's status, cases passed and points, then the
    total), the pending and quick-check notes, the timing note and ``elapsed`` seconds (None: not shown)."""
    quick = quick_check_text(result)
    width = max([len(p.key) for p in result.parts] + [5])
    lines = [f"{'part':<{width}}  {'status':<13}  {'cases':>7}  {'points':>11}"]
    for p in result.parts:
        graded = [c for c in p.cases if not is_timed_case(c)]
        ok = sum(c.status == "pass" for c in graded)
        lines.append(f"{p.key:<{width}}  {p.status:<13}  {f'{ok}/{len(graded)}':>7}  "
                     f"{f'{_points(p.points)}/{_points(p.max_points)}':>11}")
    lines.append(f"{'total':<{width}}  {result.verdict:<13}  {'':>7}  "
                 f"{f'{_points(result.points)}/{_points(result.max_points)}':>11}")
    if result.pending_points:
        lines.append(f"PENDING {pending_text(result.pending_points)}.")
    if quick:
        lines.append(f"QUICK CHECK: {quick[len('Quick check: '):]}.")
    lines.append(f"{result.timing_note}." + (f" Graded in {elapsed:.1f} s." if elapsed is not None else ""))
    return lines
