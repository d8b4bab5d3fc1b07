"""A class's submissions: the entries of a class folder, each a :class:`Submission` with a safe,
unique id (Gradescope's export metadata names them), read by :func:`grader.intake.snapshot`.

Users: ``scangrade batch`` (:func:`find_submissions`), its Slurm and command-line checks
(:func:`require_submissions`, :func:`count_submissions`). What one submission holds, and every
check on it, is :mod:`grader.intake`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from grader.classwork.store import RESERVED
from grader.errors import UsageError
from grader.intake import Intake, show, snapshot

_LOOKED_FOR = ("one folder or .zip per submission (hidden entries skipped), or Gradescope's export "
               "(submission folders beside submission_metadata.yml)")


@dataclass(frozen=True)
class Submission(Intake):
    """One entry of a batch: its :class:`~grader.intake.Intake` (the grader's copy of its part files,
    the notes on those not graded, why the whole submission is refused if it is, and ``sources``: where
    each file was, ``alice/src/part1_naive.cu``, ``bob.zip:part1_naive.cu``), and its id.

    Attributes:
        id: its gradebook row and output folder name (safe: no separators, no ``..``, no control
            characters, unique in the batch, never one of the batch's own output names).
    """

    id: str = field(default="", kw_only=True)


def _safe_id(name: str, taken: set[str]) -> str:
    """A file-name-safe, unique id (compared case-insensitively) from a folder or student name."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    sid = re.sub(r"[^A-Za-z0-9._@-]+", "_", text).strip("._-")[:80] or "submission"
    base, n = sid, 1
    while sid.lower() in taken or sid.lower() in RESERVED:
        n += 1
        sid = f"{base}_{n}"
    taken.add(sid.lower())
    return sid


def _gradescope_ids(folder: Path) -> dict[str, str]:
    """Folder name -> student id from Gradescope's ``submission_metadata.yml``, when present."""
    meta = folder / "submission_metadata.yml"
    if not meta.is_file():
        return {}
    try:
        data = yaml.safe_load(meta.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError:
        return {}
    ids = {}
    for key, info in data.items() if isinstance(data, dict) else ():
        submitters = (info or {}).get(":submitters") or (info or {}).get("submitters") or []
        if submitters and isinstance(submitters[0], dict):
            first = submitters[0]
            sid = first.get(":sid") or first.get("sid") or first.get(":email") or first.get("email")
            if sid:
                ids[str(key)] = str(sid)
    return ids


def _entries(folder: Path) -> list[Path]:
    """The entries of ``folder`` that are submissions: folders and ``.zip`` files, links to them
    included (graded as refused, never followed); hidden entries are skipped."""
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a folder of submissions (one folder or .zip per submission)")
    return [e for e in sorted(folder.iterdir()) if not e.name.startswith(".")
            and (e.is_dir() or e.suffix.lower() == ".zip")]  # is_dir() follows a link: one to a folder counts


def count_submissions(folder: Path) -> int:
    """How many submissions :func:`find_submissions` will find, without reading them.

    Raises:
        UsageError: ``folder`` is not a folder.
    """
    return len(_entries(folder))


def require_submissions(folder: Path) -> int:
    """How many submissions ``folder`` holds, at least one.

    Raises:
        UsageError: ``folder`` is not a folder, or holds no submission (the message says what was
            looked for).
    """
    count = count_submissions(folder)
    if not count:
        raise UsageError(f"{folder}: no submissions found; looked for {_LOOKED_FOR}. Nothing was written")
    return count


def find_submissions(folder: Path, *, work: Path) -> list[Submission]:
    """Every submission in ``folder``, sorted by entry name; the part files of each are copied into
    ``work/<id>`` (links refused, sizes capped), which is graded.

    Raises:
        UsageError: ``folder`` is not a folder.
    """
    entries = _entries(folder)
    ids = _gradescope_ids(folder)
    found: list[Submission] = []
    taken: set[str] = set()
    for entry in entries:
        base = entry.name[:-4] if entry.suffix.lower() == ".zip" else entry.name
        sid = _safe_id(ids.get(entry.name, base), taken)
        intake = snapshot(entry, work / sid)
        sep = ":" if entry.suffix.lower() == ".zip" else "/"
        found.append(Submission(intake.path, intake.notes, intake.refused,
                                {k: f"{show(entry.name)}{sep}{rel}" for k, rel in intake.sources.items()}, id=sid))
    return found
