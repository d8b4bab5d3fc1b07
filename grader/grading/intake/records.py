"""What intake hands on: a part file not graded and why (:class:`Absent`), one submission as a batch
grades it (:class:`Intake`), and a name fit for a report (:func:`show`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grader.assignment.parts import PARTS
from grader.core.safe_text import one_line

__all__ = ["Absent", "Intake", "PART_FILES", "missing_part", "show"]

#: Each part's file name -> its part key (``part1_naive.cu`` -> ``part1_naive``).
PART_FILES = {p.filename: k for k, p in PARTS.items()}


@dataclass(frozen=True)
class Absent:
    """A part file that is not graded, and why; false in a boolean context, like ``None``.

    Attributes:
        message: what the student reads in the part's report (names the file, says what to do).
        status: the part's status: ``missing`` (no such file, perhaps misnamed) or ``error``
            (a file is there but was refused: a link, not a regular file, too large, unreadable).
    """

    message: str
    status: str = "missing"

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True)
class Intake:
    """One submission as the batch grades it.

    Attributes:
        path: the folder holding the part files to grade (a snapshot of the grader's own).
        notes: part key -> why that part's file is not graded, where there is more to say than
            "missing" (a suggestion for a misnamed file, a refused link...).
        refused: why the whole submission is not graded ("" when it is).
        sources: part key -> where its file was in the submission (a path relative to it, or in
            the zip), for the reports: ``path`` is the grader's copy.
    """

    path: Path
    notes: dict[str, Absent] = field(default_factory=dict)
    refused: str = ""
    sources: dict[str, str] = field(default_factory=dict)

    def files(self, keys: list[str]) -> dict[str, Path | Absent]:
        """Each part's file to grade (``path / <its file name>``), or why there is none: its note,
        else an :class:`Absent` saying it is missing."""
        out: dict[str, Path | Absent] = {}
        for key in keys:
            file = self.path / PARTS[key].filename
            if key in self.notes:  # an Absent is false: test for it, never with `or`
                out[key] = self.notes[key]
            else:
                out[key] = file if file.is_file() else missing_part(key, None)
        return out


def show(name: str) -> str:
    """A file name fit for a report: undecodable bytes as U+FFFD, on one line, control and
    bidirectional-control characters written as escapes (:func:`grader.core.safe_text.one_line`)."""
    return one_line(name.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))


def missing_part(key: str, found: str | None) -> Absent:
    """Part ``key``'s file is missing; ``found``: the file shown that was likely meant (a misnamed one)."""
    filename = PARTS[key].filename
    msg = f"{filename} is missing from the submission"
    if found:
        msg += f"; found {found}: did you mean {filename}? Rename the file to {filename} exactly"
    return Absent(msg)
