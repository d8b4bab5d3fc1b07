"""A batch's folder submission taken in: its part files found anywhere in it, checked, and copied as
plain files into a folder of the grader's own (:func:`snapshot_folder`); nothing followed through a
link, every cap of :mod:`grader.grading.intake.limits` applied while it is listed."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import grader.grading.intake.limits as limits
from grader.assignment.parts import PARTS
from grader.grading.intake.names import suggestions
from grader.grading.intake.part_file import (check_entry, hard_link, lstat_or_none, not_regular, not_text, too_big,
                                             unreadable)
from grader.grading.intake.records import PART_FILES, Absent, Intake, missing_part, show

__all__ = ["fresh_folder", "snapshot_folder"]


def _walk(folder: Path) -> tuple[list[tuple[Path, str, os.stat_result, int]], str]:
    """Every entry below ``folder`` (links not followed, hidden entries and ``__MACOSX`` skipped):
    ``(path, shown relative path, lstat, depth)``, and why the submission is refused ("" if not)."""
    entries, total, stack = [], 0, [(folder, "", 0)]
    while stack:
        here, rel, depth = stack.pop()
        try:
            with os.scandir(here) as it:
                listing = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            return entries, (f"{show(rel) or 'the submission'} cannot be listed ({exc.strerror}); make it readable "
                             "(chmod -R u+rX) and grade it again")
        for e in listing:
            if e.name.startswith(".") or e.name == "__MACOSX":
                continue
            shown = f"{rel}/{e.name}" if rel else e.name
            st = e.stat(follow_symlinks=False)
            entries.append((Path(e.path), shown, st, depth))
            if len(entries) > limits.MAX_ENTRIES:
                return entries, f"it holds more than {limits.MAX_ENTRIES} files and folders; submit the part files only"
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
                if total > limits.MAX_TOTAL_BYTES:
                    return entries, (f"it holds more than {limits.size_text(limits.MAX_TOTAL_BYTES)} of files; "
                                     "submit the part files only")
            elif stat.S_ISDIR(st.st_mode):
                if depth + 1 > limits.MAX_DEPTH:
                    return entries, (f"{show(shown)} is nested more than {limits.MAX_DEPTH} folders deep; "
                                     "submit the part files at most a few folders down")
                stack.append((Path(e.path), shown, depth + 1))
    return entries, ""


def fresh_folder(dest: Path) -> None:
    """Make ``dest`` an empty folder (what it held removed), its parents made as needed."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)


def _copy_capped(src: Path, dest: Path, shown: str) -> Absent | None:
    """Copy a regular file without following a link (re-checked at open), at most the cap."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return unreadable(shown, exc)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return Absent(not_regular(shown, st), "error")
        if st.st_nlink > 1:  # linked between the check and the open
            return hard_link(shown, st.st_nlink)
        data = f.read(limits.MAX_SOURCE_BYTES + 1)
    if len(data) > limits.MAX_SOURCE_BYTES:
        return too_big(shown)
    refused = not_text(shown, data)
    if refused is None:
        dest.write_bytes(data)
    return refused


def snapshot_folder(folder: Path, dest: Path) -> Intake:
    """Copy a folder submission's part files into ``dest`` (emptied first).

    The part files are taken from the folder below ``folder`` that holds the most of them (the
    shallowest on a tie); a part file not there is taken from where the shallowest file of its name
    is (a submission whose parts sit in different folders), as in a zip. Nothing is followed
    through a link; every cap of this module applies.
    """
    fresh_folder(dest)
    entries, refused = _walk(folder)
    if refused:
        return Intake(dest, refused=refused)
    counts: dict[Path, tuple[int, int, str]] = {folder: (0, 0, "")}
    for path, shown, _, depth in entries:
        if path.name in PART_FILES:
            n, _, rel = counts.get(path.parent, (0, depth, shown.rpartition("/")[0]))
            counts[path.parent] = (n + 1, depth, rel)
    root = min(counts, key=lambda p: (-counts[p][0], counts[p][1], str(p)))
    prefix = counts[root][2]
    elsewhere: dict[str, tuple[int, str, Path, os.stat_result]] = {}  # part file name -> its shallowest copy
    for path, shown, st, depth in entries:
        if path.name in PART_FILES and not stat.S_ISDIR(st.st_mode):
            elsewhere[path.name] = min(elsewhere.get(path.name, (depth, shown, path, st)), (depth, shown, path, st),
                                       key=lambda e: (e[0], e[1]))
    notes: dict[str, Absent] = {}
    sources: dict[str, str] = {}
    missing = []
    for key, spec in PARTS.items():
        src = root / spec.filename
        shown = show(f"{prefix}/{spec.filename}" if prefix else spec.filename)
        st = lstat_or_none(src)
        if st is None and spec.filename in elsewhere:
            _, rel, src, st = elsewhere[spec.filename]
            shown = show(rel)
        note = check_entry(src, shown, st) if st is not None else None
        if st is None:
            missing.append(key)
        elif note is None:
            note = _copy_capped(src, dest / spec.filename, shown)
        if note is not None:
            notes[key] = note
        if st is not None:
            sources[key] = shown
    names = [(path.name, show(shown)) for path, shown, st, _ in entries if not stat.S_ISDIR(st.st_mode)]
    for key, found in suggestions(missing, names).items():
        notes[key] = missing_part(key, found)
    return Intake(dest, notes, sources=sources)
