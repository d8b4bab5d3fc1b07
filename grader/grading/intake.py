"""Intake: one submission's part files, checked, found and read, before anything grades them.

A submission is untrusted input, as a folder or a zip. Intake never follows a symbolic link in
it, reads no part file with another hard link, none that is not a regular file (a FIFO named
``x.zip`` is opened without blocking and refused) and none over :data:`MAX_SOURCE_BYTES`, gives up
on a submission whose reading takes more than :data:`INTAKE_S` seconds, and refuses a whole
submission that holds more than :data:`MAX_ENTRIES` files and folders, more than
:data:`MAX_TOTAL_BYTES` bytes (a zip's end record and declared sizes are checked before anything is
read, and what is read is capped again), or folders nested deeper than :data:`MAX_DEPTH`. A part
file that is absent, misnamed (``Part1_Naive.cu``, ``part1_naive.cu.txt``...) or refused becomes an
:class:`Absent` carrying the message the student sees in that part of the report.

This module sits below the runner and imports nothing above it (``tests/project/test_import_graph.py``):

- :func:`resolve_submission` (``scangrade grade`` and ``check``, the pytest plugin, through
  :func:`grader.grading.runner.grade`): the part files directly in one folder, graded in place.
- :func:`snapshot` (``scangrade batch``, through :func:`grader.classwork.submissions.find_submissions`):
  a folder's or a zip's part files, found anywhere in it, copied as plain files into a fresh folder
  of the grader's own: an :class:`Intake`, which :func:`grader.grading.runner.grade` grades as it is (its
  notes and where each file was included).
- :func:`read_source` (the worker) decodes a part file for the compiler.

Every part file is read once at intake, so that one the grader cannot read, or whose bytes are not
text (:func:`text_problem`: a binary file under a part's name), becomes an :class:`Absent` naming it
and saying what to do, instead of a worker's failure or pages of compiler errors.
"""

from __future__ import annotations

import os
import shutil
import stat
import struct
import tempfile
import threading
import zipfile
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from grader.core.errors import SubmissionError, UsageError
from grader.assignment.parts import PARTS
from grader.core.safe_text import one_line
from grader.grading.intake_names import suggestions

#: The largest part file read, in bytes (1 MiB; the reference solutions are under 10 KiB).
MAX_SOURCE_BYTES = 1 << 20
#: The most files and folders one submission may hold (hidden ones and ``__MACOSX`` not counted).
MAX_ENTRIES = 5000
#: The most bytes one submission may hold: its regular files' sizes, or a zip's declared sizes.
MAX_TOTAL_BYTES = 100 << 20
#: The largest zip archive opened, in bytes: no larger than what it may hold.
MAX_ARCHIVE_BYTES = MAX_TOTAL_BYTES
#: The largest central directory (a zip's list of entries) read, in bytes: 5000 entries of names up
#: to 800 bytes each.
MAX_DIRECTORY_BYTES = 4 << 20
#: The deepest folder nesting looked into, below the submission's own folder.
MAX_DEPTH = 32
#: Seconds reading one submission (listing it, checking and copying its part files) may take before
#: it is refused and the batch goes on; the caps make an honest one take milliseconds.
INTAKE_S = 60.0

_PART_FILES = {p.filename: k for k, p in PARTS.items()}


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= (1 << 20) and not n % (1 << 20) else f"{n} bytes"


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
                out[key] = file if file.is_file() else _missing(key, None)
        return out


def show(name: str) -> str:
    """A file name fit for a report: undecodable bytes as U+FFFD, on one line, control and
    bidirectional-control characters written as escapes (:func:`grader.core.safe_text.one_line`)."""
    return one_line(name.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))


def read_source(path: Path, *, limit: int = MAX_SOURCE_BYTES) -> str:
    """A part file's text for the compiler.

    A byte-order mark is dropped (UTF-8), or honoured (UTF-16). Text that is not UTF-8 is read as
    Latin-1, which maps every byte to one character, so nothing is lost or replaced and every
    backend compiles the same text (non-ASCII bytes can only matter in comments and strings).

    Raises:
        SubmissionError: the file is larger than ``limit`` bytes, not a regular file (a FIFO,
            a device: opened without blocking, never read), or not text (:func:`text_problem`).
        OSError: the file cannot be read.
    """
    with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise SubmissionError(_not_regular(path.name, st))
        data = f.read(limit + 1)
    if len(data) > limit:
        raise SubmissionError(f"{path.name}: larger than {limit} bytes; not read")
    refused = _not_text(path.name, data)
    if refused is not None:
        raise SubmissionError(refused.message)
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", "replace")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", "replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _missing(key: str, found: str | None) -> Absent:
    filename = PARTS[key].filename
    msg = f"{filename} is missing from the submission"
    if found:
        msg += f"; found {found}: did you mean {filename}? Rename the file to {filename} exactly"
    return Absent(msg)


def _too_big(shown: str, size: int | None = None) -> Absent:
    what = f" is {size} bytes," if size is not None else " is"
    return Absent(f"{shown}{what} over the {_size(MAX_SOURCE_BYTES)} limit of a part file; it was not read", "error")


#: Characters that are no part of a source file's text: the C0 control codes but tab, line feed,
#: vertical tab, form feed, carriage return and escape, and DEL.
_ODD = bytes(sorted(set(range(0x20)) - set(b"\t\n\v\f\r\x1b") | {0x7f}))


def text_problem(data: bytes) -> str | None:
    """Why ``data`` is not the text of a source file, or None when it is.

    Perl's rule for ``-T`` / ``-B`` (perlfunc, "-X"), on the whole file: a NUL byte makes it binary,
    and so do odd characters making up more than a third of it (control codes other than white
    space; bytes above 0x7F too, unless the file is valid UTF-8). Text in UTF-16 with a byte-order
    mark is judged once decoded. A stray control code in a text file is left to the compiler, which
    names its line.

    Returns:
        The reason, for a message (``a NUL byte on line 3``), or None.
    """
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        data = data.decode("utf-16", "replace").encode("utf-8")
    nul = data.find(b"\0")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        return f"a NUL byte on line {line}"
    odd = len(data) - len(data.translate(None, _ODD))
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        odd += sum(b >= 0x80 for b in data)
    if 3 * odd > len(data):
        return f"{100 * odd // len(data)} % of its bytes are control codes or not text"
    return None


def _not_text(shown: str, data: bytes) -> Absent | None:
    """An :class:`Absent` for a part file whose bytes are not text (:func:`text_problem`), else None."""
    why = text_problem(data)
    if why is None:
        return None
    return Absent(f"{shown} is not a text file ({why}); it was not compiled: submit the CUDA source itself, "
                  "saved as text (UTF-8)", "error")


def _unreadable(shown: str, exc: OSError) -> Absent:
    """An :class:`Absent` for a part file that could not be read (permissions, an I/O error)."""
    todo = ("make it readable (chmod a+r) and grade it again" if isinstance(exc, PermissionError)
            else "grade it again, or submit it again")
    return Absent(f"{shown} could not be read ({exc.strerror or exc}); it was not graded: {todo}", "error")


def _read_part(path: Path, shown: str, *, follow: bool) -> Absent | None:
    """Why the regular file at ``path`` cannot be graded once read (unreadable, not text), or None.
    ``follow``: open it through a symbolic link (a file named on the command line)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    try:
        with open(os.open(path, flags), "rb") as f:
            data = f.read(MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        return _unreadable(shown, exc)
    return _not_text(shown, data)


def _check_file(path: Path, shown: str, st: os.stat_result | None, *, named: bool = False) -> Absent | None:
    """Why the entry at ``path`` (its ``lstat``) cannot be graded, or None when it can: a symbolic
    or hard link, not a regular file, too large. ``named``: the file was named on the command line
    (``st`` is its ``stat``; whoever typed it chose it, so its links are not refused)."""
    if st is None:
        return None
    if stat.S_ISLNK(st.st_mode):
        try:
            target = f" (to {show(os.readlink(path))})"
        except OSError:
            target = ""
        return Absent(f"{shown} is a symbolic link{target}; it was not read: links are refused in "
                      "submissions, submit the file itself", "error")
    if not stat.S_ISREG(st.st_mode):
        return Absent(_not_regular(shown, st), "error")
    if st.st_nlink > 1 and not named:
        return _hard_link(shown, st.st_nlink)
    if st.st_size > MAX_SOURCE_BYTES:
        return _too_big(shown, st.st_size)
    return None


#: Kinds of files that are not regular files, as messages name them.
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _not_regular(shown: str, st: os.stat_result) -> str:
    """Why a file that is not a regular file (a FIFO, a device, a socket...) is not read."""
    kind = next((f"{name}, not" for test, name in _KINDS if test(st.st_mode)), "not")
    return f"{shown} is {kind} a regular file; it was not read"


def _hard_link(shown: str, links: int) -> Absent:
    """A part file with more than one name (a hard link: the same file as the reference solution,
    a classmate's file or the private config, perhaps) is not read."""
    return Absent(f"{shown} has {links} hard links (the same file under another name); it was not read: "
                  "links are refused in submissions, submit a copy of the file itself", "error")


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


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
        refused = _check_file(path, show(path.name), os.stat(path), named=True)  # a link here was named on purpose
        if refused is None:  # an Absent is false: never `or`
            refused = _read_part(path, show(path.name), follow=True)
        if len(keys) == 1:
            return {keys[0]: path if refused is None else refused}
        if path.name not in _PART_FILES:
            guess = suggestions(list(PARTS), [(path.name, path.name)])
            hint = "".join(f"; did you mean {PARTS[k].filename}? Rename it" for k in guess)
            raise UsageError(f"{path}: not a part's file{hint}; the files are named " + ", ".join(_PART_FILES)
                             + " (or name the part with --part KEY)")
        return {_PART_FILES[path.name]: path if refused is None else refused}
    out: dict[str, Path | Absent] = {}
    for k in keys:
        f = path / PARTS[k].filename
        st = _lstat(f)
        refused = _check_file(f, PARTS[k].filename, st)
        if refused is None and st is not None:
            refused = _read_part(f, PARTS[k].filename, follow=False)
        out[k] = Absent("") if st is None else f if refused is None else refused
    missing = [k for k, v in out.items() if isinstance(v, Absent) and not v.message]
    if missing:
        guess = suggestions(missing, _names(path))
        out.update({k: _missing(k, guess.get(k)) for k in missing})
    return out


def _names(folder: Path) -> list[tuple[str, str]]:
    """``(name, name shown)`` of the entries directly in ``folder`` that are not folders ([] where it
    cannot be listed), for :func:`grader.grading.intake_names.suggestions`."""
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
        if not folder.is_dir() or any(_lstat(folder / name) is not None for name in _PART_FILES):
            return
        guess = suggestions(list(PARTS), _names(folder))
    except OSError as exc:
        raise UsageError(_unlistable(folder, exc)) from None
    found = "".join(f"; found {guess[k]}: did you mean {PARTS[k].filename}?" for k in PARTS if k in guess)
    raise UsageError(f"{folder}: no part file in this folder (none of {', '.join(_PART_FILES)}){found}; give the "
                     "folder that holds them (named exactly so)")


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
            if len(entries) > MAX_ENTRIES:
                return entries, f"it holds more than {MAX_ENTRIES} files and folders; submit the part files only"
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
                if total > MAX_TOTAL_BYTES:
                    return entries, (f"it holds more than {_size(MAX_TOTAL_BYTES)} of files; "
                                     "submit the part files only")
            elif stat.S_ISDIR(st.st_mode):
                if depth + 1 > MAX_DEPTH:
                    return entries, (f"{show(shown)} is nested more than {MAX_DEPTH} folders deep; "
                                     "submit the part files at most a few folders down")
                stack.append((Path(e.path), shown, depth + 1))
    return entries, ""


def _fresh(dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)


def _copy_capped(src: Path, dest: Path, shown: str) -> Absent | None:
    """Copy a regular file without following a link (re-checked at open), at most the cap."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return _unreadable(shown, exc)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return Absent(_not_regular(shown, st), "error")
        if st.st_nlink > 1:  # linked between the check and the open
            return _hard_link(shown, st.st_nlink)
        data = f.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        return _too_big(shown)
    refused = _not_text(shown, data)
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
    _fresh(dest)
    entries, refused = _walk(folder)
    if refused:
        return Intake(dest, refused=refused)
    counts: dict[Path, tuple[int, int, str]] = {folder: (0, 0, "")}
    for path, shown, _, depth in entries:
        if path.name in _PART_FILES:
            n, _, rel = counts.get(path.parent, (0, depth, shown.rpartition("/")[0]))
            counts[path.parent] = (n + 1, depth, rel)
    root = min(counts, key=lambda p: (-counts[p][0], counts[p][1], str(p)))
    prefix = counts[root][2]
    elsewhere: dict[str, tuple[int, str, Path, os.stat_result]] = {}  # part file name -> its shallowest copy
    for path, shown, st, depth in entries:
        if path.name in _PART_FILES and not stat.S_ISDIR(st.st_mode):
            elsewhere[path.name] = min(elsewhere.get(path.name, (depth, shown, path, st)), (depth, shown, path, st),
                                       key=lambda e: (e[0], e[1]))
    notes: dict[str, Absent] = {}
    sources: dict[str, str] = {}
    missing = []
    for key, spec in PARTS.items():
        src = root / spec.filename
        shown = show(f"{prefix}/{spec.filename}" if prefix else spec.filename)
        st = _lstat(src)
        if st is None and spec.filename in elsewhere:
            _, rel, src, st = elsewhere[spec.filename]
            shown = show(rel)
        note = _check_file(src, shown, st) if st is not None else None
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
        notes[key] = _missing(key, found)
    return Intake(dest, notes, sources=sources)


def _is_link(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def snapshot_zip(archive: Path, dest: Path) -> Intake:
    """Extract a zip submission's part files into ``dest`` (emptied first), by base name: no path
    in the archive is ever used as a destination. Per part, the shallowest entry of its name.

    The archive is refused, before its list of entries is read, when it is larger than
    :data:`MAX_ARCHIVE_BYTES` or its end-of-central-directory record declares more than
    :data:`MAX_ENTRIES` entries or a list of entries over :data:`MAX_DIRECTORY_BYTES`
    (:func:`zip_directory`); then when it declares more than :data:`MAX_TOTAL_BYTES` bytes uncompressed; a part entry that is a link, is declared or turns
    out larger than :data:`MAX_SOURCE_BYTES`, or cannot be decompressed is not graded, with a message.
    """
    _fresh(dest)
    try:
        fd = os.open(archive, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO must not block intake
    except OSError as exc:
        return Intake(dest, refused=f"{show(archive.name)} could not be opened ({exc.strerror}); it was not read: "
                                    "make it readable (chmod a+r) and grade it again")
    with os.fdopen(fd, "rb") as file:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return Intake(dest, refused=_not_regular(show(archive.name), st))
        return _snapshot_zip(file, archive, dest)


_EOCD = struct.Struct("<4s4H2LH")            # end of central directory record (APPNOTE 4.3.16)
_ZIP64_LOCATOR = struct.Struct("<4sLQL")      # zip64 end of central directory locator (4.3.15)
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")     # zip64 end of central directory record (4.3.14)


def zip_directory(file, size: int) -> tuple[int, int] | None:
    """What a zip archive's end-of-central-directory record declares: ``(entries, central
    directory bytes)``, read from its last 64 KiB only, or None where no record is found (the zip
    module then says the archive is unreadable).

    The record is found as :mod:`zipfile` finds it (at the very end, else the last signature in the
    final 64 KiB + 22 bytes, where a comment may follow it), and a zip64 record, when its locator
    precedes it, replaces its counts. Source: PKWARE's APPNOTE.TXT 6.3, sections 4.3.14-4.3.16.

    Args:
        file: the archive, open for reading in binary mode (seekable).
        size: its size in bytes.
    """
    tail_start = max(size - (_EOCD.size + (1 << 16)), 0)
    file.seek(tail_start)
    tail = file.read(size - tail_start)
    at = len(tail) - _EOCD.size
    if at < 0:
        return None
    if not (tail[at:at + 4] == b"PK\x05\x06" and tail[-2:] == b"\0\0"):
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or at + _EOCD.size > len(tail):
            return None
    _, _, _, _, entries, directory, _, _ = _EOCD.unpack_from(tail, at)
    where = tail_start + at - _ZIP64_LOCATOR.size
    if where >= _ZIP64_EOCD.size:
        file.seek(where - _ZIP64_EOCD.size)
        head = file.read(_ZIP64_EOCD.size + _ZIP64_LOCATOR.size)
        if len(head) == _ZIP64_EOCD.size + _ZIP64_LOCATOR.size and head[_ZIP64_EOCD.size:][:4] == b"PK\x06\x07" \
                and head[:4] == b"PK\x06\x06":
            record = _ZIP64_EOCD.unpack_from(head)
            entries, directory = record[7], record[8]
    return entries, directory


def _zip_refusal(file, size: int, shown: str) -> str:
    """Why an archive is refused before :mod:`zipfile` reads its central directory (which costs time
    and memory per entry), or "": its size over
    :data:`MAX_ARCHIVE_BYTES`, its declared entries over :data:`MAX_ENTRIES`, its central directory
    over :data:`MAX_DIRECTORY_BYTES` (which bounds what is read however many entries it claims)."""
    if size > MAX_ARCHIVE_BYTES:
        return f"{shown} is {size} bytes, more than {_size(MAX_ARCHIVE_BYTES)}; submit the part files only"
    declared = zip_directory(file, size)
    if declared is None:
        return ""
    entries, directory = declared
    if entries > MAX_ENTRIES:
        return f"the zip declares {entries} entries, more than {MAX_ENTRIES}; submit the part files only"
    if directory > MAX_DIRECTORY_BYTES:
        return (f"the zip's list of entries is {directory} bytes, more than {_size(MAX_DIRECTORY_BYTES)}; "
                "submit the part files only")
    return ""


def _snapshot_zip(file, archive: Path, dest: Path) -> Intake:
    """:func:`snapshot_zip` on the archive's open regular ``file``."""
    refused = _zip_refusal(file, os.fstat(file.fileno()).st_size, show(archive.name))
    if refused:
        return Intake(dest, refused=refused)
    file.seek(0)
    try:
        z = zipfile.ZipFile(file)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        return Intake(dest, refused=f"{show(archive.name)} is not a readable zip archive ({exc})")
    with z:
        infos = z.infolist()
        if len(infos) > MAX_ENTRIES:
            return Intake(dest, refused=f"the zip holds {len(infos)} entries, more than {MAX_ENTRIES}; "
                                        "submit the part files only")
        declared = sum(i.file_size for i in infos)
        if declared > MAX_TOTAL_BYTES:
            return Intake(dest, refused=f"the zip declares {declared} bytes uncompressed, more than "
                                        f"{_size(MAX_TOTAL_BYTES)}; submit the part files only")
        chosen: dict[str, zipfile.ZipInfo] = {}
        names = []
        for info in infos:
            parts = info.filename.replace("\\", "/").split("/")
            if info.is_dir() or any(p.startswith(".") or p == "__MACOSX" for p in parts[:-1]):
                continue
            names.append((parts[-1], show(info.filename)))
            key = _PART_FILES.get(parts[-1])
            if key and (key not in chosen or len(parts) < chosen[key].filename.count("/") + 1):
                chosen[key] = info
        notes: dict[str, Absent] = {}
        sources: dict[str, str] = {}
        for key, info in chosen.items():
            shown = sources[key] = show(info.filename)
            if _is_link(info):
                notes[key] = Absent(f"{shown} is a symbolic link in the zip; it was not read: links are refused "
                                    "in submissions, submit the file itself", "error")
                continue
            if info.file_size > MAX_SOURCE_BYTES:
                notes[key] = _too_big(shown, info.file_size)
                continue
            try:
                with z.open(info) as f:
                    data = f.read(MAX_SOURCE_BYTES + 1)
            except (zipfile.BadZipFile, RuntimeError, NotImplementedError, OSError, EOFError, zlib.error) as exc:
                notes[key] = Absent(f"{shown} could not be extracted from the zip ({exc}); it was not graded",
                                    "error")
                continue
            refused = _too_big(shown) if len(data) > MAX_SOURCE_BYTES else _not_text(shown, data)
            if refused is not None:
                notes[key] = refused
                continue
            (dest / PARTS[key].filename).write_bytes(data)
    missing = [k for k in PARTS if k not in chosen]
    for key, found in suggestions(missing, names).items():
        notes[key] = _missing(key, found)
    return Intake(dest, notes, sources=sources)


def _within_time(read_one: Callable[[Path, Path], Intake], entry: Path, dest: Path) -> Intake:
    """``read_one(entry, dest)`` within :data:`INTAKE_S` seconds, else a refused :class:`Intake`.

    The snapshot runs in a thread of its own, into a private folder beside ``dest`` that becomes
    ``dest`` when it is done; one still running at the deadline (a file system that hangs, a file
    that blocks a read) is left behind with its folder, its submission refused, and the batch goes
    on. An exception the snapshot raises is raised here.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{dest.name}.reading-", dir=dest.parent))
    box: list = []

    def read() -> None:
        try:
            box.append(read_one(entry, scratch))
        except BaseException as exc:  # handed to the caller's thread
            box.append(exc)

    thread = threading.Thread(target=read, name=f"intake of {entry.name}", daemon=True)
    thread.start()
    thread.join(INTAKE_S)
    if not box:
        return Intake(dest, refused=f"reading {show(entry.name)} took longer than {INTAKE_S:g} s; it was not graded")
    if isinstance(box[0], BaseException):
        shutil.rmtree(scratch, ignore_errors=True)
        raise box[0]
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(scratch, dest)
    return replace(box[0], path=dest)


def snapshot(entry: Path, dest: Path) -> Intake:
    """A submission folder's or ``.zip``'s part files copied into ``dest`` (:func:`snapshot_folder`,
    :func:`snapshot_zip`), within :data:`INTAKE_S` seconds; an entry that is a symbolic link is refused,
    never followed. ``dest`` exists afterwards. The intake's ``sources`` are relative to ``entry``.

    Raises:
        OSError: ``dest`` cannot be made.
    """
    if entry.is_symlink():
        intake = Intake(dest, refused=f"{show(entry.name)} is a symbolic link; it was not followed: "
                                      "links are refused as submissions")
    elif entry.is_dir():
        intake = _within_time(snapshot_folder, entry, dest)
    else:
        intake = _within_time(snapshot_zip, entry, dest)
    dest.mkdir(parents=True, exist_ok=True)
    return intake


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
