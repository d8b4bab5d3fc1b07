"""A submission graded in place (``scangrade grade`` and ``check``, the pytest plugin): each part's
file directly in one folder, or one part's file named on the command line, checked and read where it
is (:func:`resolve_submission`); and the check that a folder holds a part file at all
(:func:`require_part_file`)."""

from __future__ import annotations

import os
from pathlib import Path

from grader.assignment.parts import PARTS
from grader.core.errors import UsageError
from grader.grading.intake.names import suggestions
from grader.grading.intake.part_file import check_entry, lstat_or_none, read_part
from grader.grading.intake.records import PART_FILES, Absent, missing_part, show

__all__ = ["require_part_file", "resolve_parts", "resolve_submission"]


def resolve_parts(path: Path, keys: list[str]) -> dict[str, Path | Absent]:
    """Each part's file in ``path``, or why there is none (see :func:`resolve_submission`).

    Args:
        path: a folder holding the part files (looked for directly in it; a link there is refused),
            or one part's file (which may be a link: it was named on the command line).
        keys: the part keys to grade.

    Returns:
        part key -> the file, or an :class:`Absent` (missing, misnamed, a link, too large,
        unreadable, not text).

    Raises:
        UsageError: the path does not exist or cannot be read, or a single file's name is not a part's
            file name (with the likely part's name, when there is one). A folder with no part file
            at all is graded, every part missing (a batch records it; the report says so at its top);
            ``scangrade grade`` and ``check`` refuse it first (:func:`require_part_file`).
    """
    try:
        return _resolve_parts(path, keys)
    except OSError as exc:  # the folder itself (or the path to it) cannot be read
        raise UsageError(_unlistable(path, exc)) from None


def _unlistable(path: Path, exc: OSError) -> str:
    """Why the folder ``path`` cannot be looked into, and what to do."""
    todo = (f"make it readable to this user (chmod u+rx {path}) or give a copy that is"
            if isinstance(exc, PermissionError) else "give another folder")
    return f"{path}: cannot be read ({exc.strerror or exc}); {todo}"


def _resolve_parts(path: Path, keys: list[str]) -> dict[str, Path | Absent]:
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder; give a submission folder or one part's .cu file")
    if path.is_file():
        refused = check_entry(path, show(path.name), os.stat(path), named=True)  # a link here was named on purpose
        if refused is None:  # an Absent is false: never `or`
            refused = read_part(path, show(path.name), follow=True)
        if len(keys) == 1:
            return {keys[0]: path if refused is None else refused}
        if path.name not in PART_FILES:
            guess = suggestions(list(PARTS), [(path.name, path.name)])
            hint = "".join(f"; did you mean {PARTS[k].filename}? Rename it" for k in guess)
            raise UsageError(f"{path}: not a part's file{hint}; the files are named " + ", ".join(PART_FILES)
                             + " (or name the part with --part KEY)")
        return {PART_FILES[path.name]: path if refused is None else refused}
    out: dict[str, Path | Absent] = {}
    for k in keys:
        f = path / PARTS[k].filename
        st = lstat_or_none(f)
        refused = check_entry(f, PARTS[k].filename, st)
        if refused is None and st is not None:
            refused = read_part(f, PARTS[k].filename, follow=False)
        out[k] = Absent("") if st is None else f if refused is None else refused
    missing = [k for k, v in out.items() if isinstance(v, Absent) and not v.message]
    if missing:
        guess = suggestions(missing, _names(path))
        out.update({k: missing_part(k, guess.get(k)) for k in missing})
    return out


def _names(folder: Path) -> list[tuple[str, str]]:
    """``(name, name shown)`` of the entries directly in ``folder`` that are not folders ([] where it
    cannot be listed), for :func:`grader.grading.intake.names.suggestions`."""
    try:
        names = sorted(e.name for e in os.scandir(folder) if not e.is_dir(follow_symlinks=False))
    except OSError:
        names = []
    return [(n, show(n)) for n in names]


def require_part_file(folder: Path) -> None:
    """Check that ``folder``, where it is a folder, holds at least one part's file (of any part,
    whatever is graded): a student who points ``scangrade grade`` or ``check`` at the wrong folder is
    told so in one line, before anything is graded, rather than shown every part missing. A path that
    is not a folder is left to :func:`resolve_submission`.

    Raises:
        UsageError: none of the part files is in ``folder`` (the message names them, and the files
            it holds that look like them); or the folder cannot be read.
    """
    try:
        if not folder.is_dir() or any(lstat_or_none(folder / name) is not None for name in PART_FILES):
            return
        guess = suggestions(list(PARTS), _names(folder))
    except OSError as exc:
        raise UsageError(_unlistable(folder, exc)) from None
    found = "".join(f"; found {guess[k]}: did you mean {PARTS[k].filename}?" for k in PARTS if k in guess)
    raise UsageError(f"{folder}: no part file in this folder (none of {', '.join(PART_FILES)}){found}; give the "
                     "folder that holds them (named exactly so)")




def resolve_submission(path: Path, parts: list[str] | None = None) -> dict[str, Path | Absent]:
    """Map each part to be graded to its file in the submission, or why there is none (an
    :class:`Absent`: missing, misnamed, a link, too large, unreadable, not text; it is false like None).

    Args:
        path: a folder holding the parts' ``.cu`` files, or one part's ``.cu`` file (named as the
            part's file, or graded as the single part in ``parts``).
        parts: part keys to grade (default: every part).

    Raises:
        UsageError: the path does not exist or cannot be read, or a single file's name is not a
            part's file name (with the part's name it most likely meant).
    """
    return resolve_parts(path, parts or list(PARTS))
