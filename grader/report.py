"""Rendering a :class:`~grader.results.SubmissionResult` for the terminal.

Rendering is kept apart from the data: the same result is written as JSON by
:meth:`SubmissionResult.to_json`.
"""

from __future__ import annotations

from grader.results import CaseResult, PartResult, SubmissionResult

_MARK = {"pass": "PASS", "fail": "FAIL", "error": "ERROR", "timeout": "TIMEOUT", "crash": "CRASH",
         "not-run": "NOT RUN"}


def _points(x: float) -> str:
    return f"{x:g}"


def _case_line(c: CaseResult) -> str:
    return f"    {_MARK[c.status]:<7} {c.name:<12} {c.message}"


def _part_block(p: PartResult) -> list[str]:
    head = f"Part {p.number}: {p.title}  [{p.file}]  {_points(p.points)}/{_points(p.max_points)} points"
    lines = [head]
    if p.status in ("compile-error", "missing", "error") or (p.message and p.status in ("timeout", "crash")):
        lines += ["    " + m for m in p.message.splitlines()]
    if p.status in ("compile-error", "missing", "error"):
        return lines
    passed = [c.name.removeprefix("n=") for c in p.cases if c.status == "pass"]
    if passed:
        lines.append(f"    PASS    n = {', '.join(passed)}")
    for c in p.cases:
        if c.status != "pass" and c.status != "not-run":
            lines.append(_case_line(c))
    skipped = [c.name.removeprefix("n=") for c in p.cases if c.status == "not-run"]
    if skipped:
        lines.append(f"    NOT RUN n = {', '.join(skipped)}")
    return lines


def render_text(result: SubmissionResult) -> str:
    """A plain-text report: a header, a block per part with every failing case, a summary table."""
    dev = result.device.get("device")
    lines = [f"scangrade {result.scangrade_version} — grading {result.submission}",
             f"backend: {result.backend}{f' on {dev}' if dev else ''} ({result.backend_reason})",
             f"config: {result.config} · seed {result.seed} · BLOCK_SIZE {result.block_size} · scan_t int32",
             ""]
    for p in result.parts:
        lines += _part_block(p) + [""]
    width = max([len(p.key) for p in result.parts] + [5])
    lines.append(f"{'part':<{width}}  {'status':<13}  {'cases':>7}  {'points':>11}")
    for p in result.parts:
        ok = sum(c.status == "pass" for c in p.cases)
        lines.append(f"{p.key:<{width}}  {p.status:<13}  {f'{ok}/{len(p.cases)}':>7}  "
                     f"{f'{_points(p.points)}/{_points(p.max_points)}':>11}")
    lines.append(f"{'total':<{width}}  {'pass' if result.passed else 'fail':<13}  {'':>7}  "
                 f"{f'{_points(result.points)}/{_points(result.max_points)}':>11}")
    lines.append(f"{result.timing_note}. Graded in {result.elapsed_s:.1f} s.")
    return "\n".join(lines)
