"""The gradebook (``gradebook.csv``) and the class summary (``summary.txt``) of a batch.

Both are pure functions of ``(id, result)`` rows: one ``scangrade batch`` of a class and the
merge of its shards write them byte for byte the same.
"""

from __future__ import annotations

import csv
import io
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from grader.core.results import TO_REGRADE, SubmissionResult


#: What a spreadsheet takes for the start of a formula in a cell (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"-?\d+(\.\d+)?(e[+-]?\d+)?")


def spreadsheet_cell(text: str) -> str:
    """``text`` as a CSV cell no spreadsheet runs as a formula: a cell that begins with one of
    :data:`FORMULA_STARTS` (and is not a plain number) gets a leading ``'``, as OWASP's CSV-injection
    guidance says; quoting is the csv module's."""
    return "'" + text if text.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(text) else text


@dataclass(frozen=True)
class Person:
    """Who a gradebook row is, besides its id.

    Attributes:
        name: the submitter's name (Gradescope's export, ``:name:``), or "".
        email: the submitter's email (``:email:``), or "".
        folder: the entry of the class folder the row was graded from (``submission_101``,
            ``alice.zip``), or "" (a row of a batch that did not record it).
    """

    name: str = ""
    email: str = ""
    folder: str = ""


def gradebook_csv(rows: list[tuple[str, SubmissionResult]], part_keys: list[str],
                  notes: Mapping[str, str] | None = None, people: Mapping[str, Person] | None = None) -> str:
    """The gradebook: id, name, email, folder, points per part, total, max, pending, status,
    backend, GPU, note — one row per submission, every cell safe to open in a spreadsheet
    (:func:`spreadsheet_cell`). ``name``, ``email``, ``folder``: ``people[id]``'s (:class:`Person`:
    Gradescope's export names the submitter; the folder is the submission's entry in the class
    folder), empty where not known. ``pending`` is the performance points that wait for a run on
    a GPU (an emulator run of parts that passed;
    :attr:`~grader.core.results.SubmissionResult.pending_points`): in ``max``, never in ``total``, so
    ``max - pending`` is what the row could earn here. ``status``: the result's
    :attr:`~grader.core.results.SubmissionResult.verdict`. ``note``: ``notes[id]``, e.g. an id collision
    (:attr:`grader.classwork.submissions.Submission.collision`), else empty."""
    notes, people = notes or {}, people or {}
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["student", "name", "email", "folder", *part_keys, "total", "max", "pending", "status", "backend",
                "gpu", "note"])
    for sid, r in rows:
        by_key = {p.key: p for p in r.parts}
        who = people.get(sid, Person())
        w.writerow([spreadsheet_cell(str(cell)) for cell in (
            sid, who.name, who.email, who.folder, *(f"{by_key[k].points:g}" if k in by_key else "" for k in part_keys),
            f"{r.points:g}", f"{r.max_points:g}", f"{r.pending_points:g}", r.verdict,
            r.backend, r.device.get("device", ""), notes.get(sid, ""))])
    return out.getvalue()


#: Notes the summary lists one by one; past it, how many more (every one is in gradebook.csv).
SUMMARY_NOTES = 20


def class_summary(rows: list[tuple[str, SubmissionResult]], part_keys: list[str],
                  notes: Mapping[str, str] | None = None) -> str:
    """Per part: mean, median and how many submissions passed every case; failures by kind; the
    submissions :data:`~grader.core.results.TO_REGRADE`, by id; the rows with a note (``notes[id]``: an
    id collision), by id."""
    lines = [f"{len(rows)} submissions"]
    for k in part_keys:
        pts = [p.points for _, r in rows for p in r.parts if p.key == k]
        if not pts:
            continue
        passed = sum(p.status == "pass" for _, r in rows for p in r.parts if p.key == k)
        top = max((p.max_points for _, r in rows for p in r.parts if p.key == k), default=0)
        lines.append(f"{k:<20} mean {statistics.mean(pts):6.2f}  median {statistics.median(pts):6.2f}  "
                     f"of {top:g}  all cases passed: {passed}/{len(pts)}")
    kinds: dict[str, int] = {}
    for _, r in rows:
        for p in r.parts:
            if p.status != "pass":
                kinds[p.status] = kinds.get(p.status, 0) + 1
    pending = [r.pending_points for _, r in rows if r.pending_points]
    if pending:
        lines.append(f"performance pending a run on a GPU: {sum(pending):g} points in {len(pending)} submission(s) "
                     "(in max, not in total; gradebook.csv's pending column)")
    if kinds:
        lines.append("parts not passing, by status: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    regrade = [sid for sid, r in rows if r.to_regrade]
    if regrade:
        lines.append(f"{TO_REGRADE}: {len(regrade)} submission(s) the grader failed on, not by their doing (a "
                     f"grading worker died twice, or the grader raised); --resume grades them again: "
                     + ", ".join(regrade[:SUMMARY_NOTES]) + (f" and {len(regrade) - SUMMARY_NOTES} more"
                                                              if len(regrade) > SUMMARY_NOTES else ""))
    noted = [(sid, notes[sid]) for sid, _ in rows if notes and notes.get(sid)]
    if noted:
        lines.append(f"{len(noted)} row(s) with a note (gradebook.csv's note column):")
        lines += [f"  {sid}: {note}" for sid, note in noted[:SUMMARY_NOTES]]
        if len(noted) > SUMMARY_NOTES:
            lines.append(f"  and {len(noted) - SUMMARY_NOTES} more")
    return "\n".join(lines) + "\n"
