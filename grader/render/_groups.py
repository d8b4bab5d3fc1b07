"""A part's cases in the groups the learning-management formats grade them by: one test per part
and dtype (PrairieLearn's and Gradescope's ``results.json``).

The groups of a part that ran (:func:`case_groups`): the visible correctness cases of each dtype,
in config order, then the part's hidden cases together, whose text is each case's public name and
``passed`` or ``failed``. Timed runs are no group's: they belong to the part's performance test
(:func:`timed_run_lines`). Both renderers take the groups
and their text from here, so that a case lands in the same test with the same words in both.

Every function renders what it is given: callers pass :func:`grader.render._common.student_view`
of a result, where a hidden case has its public name, no size, no message and ``pass`` or ``fail``.
"""

from __future__ import annotations

from dataclasses import dataclass

from grader.render._common import (CASE_STATUS_WORDS, is_hidden, is_timed_case, public_case_name,
                                   public_part_message, stopped_case, timing_text, visible_case_details)
from grader.render._patterns import size_pattern
from grader.core.results import CaseResult, FailureKind, PartResult

#: The label of a part's group of hidden cases (its test is ``Part N · KERNELS · hidden cases``).
HIDDEN_GROUP = "hidden cases"


@dataclass(frozen=True)
class CaseGroup:
    """One test's cases.

    Attributes:
        label: the dtype of a visible group (``int32``), or :data:`HIDDEN_GROUP`.
        cases: its cases, in config order (never empty).
        hidden: whether these are the part's hidden cases.
    """

    label: str
    cases: tuple[CaseResult, ...]
    hidden: bool = False

    @property
    def points(self) -> float:
        """Points earned: the sum of its cases'."""
        return sum(c.points for c in self.cases)

    @property
    def max_points(self) -> float:
        """Points possible: the sum of its cases'."""
        return sum(c.max_points for c in self.cases)

    @property
    def passed(self) -> bool:
        """Whether every case passed."""
        return all(c.status == "pass" for c in self.cases)


def case_groups(part: PartResult) -> list[CaseGroup]:
    """The part's correctness cases (timed runs left out) as :class:`CaseGroup`: the visible cases of
    each dtype, dtypes in the order of their first case, then the hidden cases, when there are any.
    Their points add up to the part's case points."""
    checks = [c for c in part.cases if not is_timed_case(c)]
    visible = [c for c in checks if not is_hidden(c)]
    groups = [CaseGroup(dtype, tuple(c for c in visible if c.dtype == dtype))
              for dtype in dict.fromkeys(c.dtype for c in visible)]
    hidden = tuple(c for c in checks if is_hidden(c))
    if hidden:
        groups.append(CaseGroup(HIDDEN_GROUP, hidden, hidden=True))
    return groups


def group_counts(cases: tuple[CaseResult, ...] | list[CaseResult]) -> str:
    """``14 of 16 cases passed; 1 failed, 1 not run``: how the cases ended, in one line."""
    tally: dict[str, int] = {}
    for c in cases:
        if c.status != "pass":
            word = CASE_STATUS_WORDS[c.status]
            tally[word] = tally.get(word, 0) + 1
    ok = sum(c.status == "pass" for c in cases)
    head = f"{ok} of {len(cases)} cases passed"
    return head + ("; " + ", ".join(f"{k} {w}" for w, k in tally.items()) if tally else "")


def group_description(part: PartResult, group: CaseGroup) -> str:
    """What the group holds, in one line: ``Blelloch scan: 6 cases of int32 input, n = 1, 2, ...``;
    for the hidden cases, how many and that only names and results are shown."""
    count = len(group.cases)
    if group.hidden:
        return (f"{part.title}: {count} hidden case{'s' if count > 1 else ''}; only names and results are "
                "shown")
    sizes = ", ".join(str(c.n) for c in group.cases)
    return f"{part.title}: {count} cases of {group.label} input, n = {sizes}"


def group_output(part: PartResult, group: CaseGroup) -> str:
    """The group's details, several lines. Visible cases: each case that did not pass with its
    message, n and seed (the case a part stopped on with the part's full message), then the
    not-run sizes by reason, then the sizes that passed on one line, then, in the first group with
    a wrong-values case only, the part's pattern of sizes
    (:func:`grader.render._patterns.size_pattern`). Hidden cases: each case's public name
    (:func:`grader.render._common.public_case_name`) and status words, nothing more."""
    if group.hidden:
        return "\n".join(f"{public_case_name(part, c)}: {CASE_STATUS_WORDS[c.status]}" for c in group.cases)
    lines = []
    for c in group.cases:
        if c.status in ("pass", "not-run"):
            continue
        details = visible_case_details(c, public_part_message(part) if c is stopped_case(part) and part.message
                                       else None)
        lines.append(f"{CASE_STATUS_WORDS[c.status].upper()}  {c.name}")
        lines += ["    " + line for line in details.splitlines()]
    not_run: dict[str, list[str]] = {}
    for c in group.cases:
        if c.status == "not-run":
            not_run.setdefault(c.message, []).append(str(c.n))
    for why, sizes in not_run.items():
        lines.append(f"NOT RUN  n = {', '.join(sizes)}" + (f": {why}" if why else ""))
    passed = [str(c.n) for c in group.cases if c.status == "pass"]
    if passed:
        lines.append("passed: n = " + ", ".join(passed))
    pattern = size_pattern(part)
    if pattern and group.label == next((g.label for g in case_groups(part) if not g.hidden
                                        and any(c.kind == FailureKind.MISMATCH for c in g.cases)), None):
        lines.append(f"pattern of the wrong values, every dtype of the part: {pattern}")
    return "\n".join(lines)


def timed_run_lines(part: PartResult) -> list[str]:
    """One line per timed run of the part, for its performance test: ``timed n=... int32: median
    ...`` (:func:`grader.render._common.timing_text`), or its status words and message where it
    has no timing (a run whose output was wrong after the timed launches)."""
    return [f"{c.name}: " + (timing_text(c.timing) if c.timing is not None
                             else f"{CASE_STATUS_WORDS[c.status]}: {c.message}")
            for c in part.cases if is_timed_case(c)]
