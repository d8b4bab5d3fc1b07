"""One part file checked and read: what a file must be to be graded (a regular file with one link,
within :data:`~grader.grading.intake.limits.MAX_SOURCE_BYTES`, readable, text: :func:`text_problem`),
each refusal as the :class:`~grader.grading.intake.records.Absent` the student reads, and a part
file's text for the compiler (:func:`read_source`)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import grader.grading.intake.limits as limits
from grader.core.errors import SubmissionError
from grader.grading.intake.records import Absent, show

__all__ = ["check_entry", "hard_link", "lstat_or_none", "not_regular", "not_text", "read_part", "read_source",
           "text_problem", "too_big", "unreadable"]


def read_source(path: Path, *, limit: int | None = None) -> str:
    """A part file's text for the compiler.

    A byte-order mark is dropped (UTF-8), or honoured (UTF-16). Text that is not UTF-8 is read as
    Latin-1, which maps every byte to one character, so nothing is lost or replaced and every
    backend compiles the same text (non-ASCII bytes can only matter in comments and strings).

    Raises:
        SubmissionError: the file is larger than ``limit`` bytes (default
            :data:`~grader.grading.intake.limits.MAX_SOURCE_BYTES`), not a regular file (a FIFO,
            a device: opened without blocking, never read), or not text (:func:`text_problem`).
        OSError: the file cannot be read.
    """
    with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise SubmissionError(not_regular(path.name, st))
        limit = limits.MAX_SOURCE_BYTES if limit is None else limit
        data = f.read(limit + 1)
    if len(data) > limit:
        raise SubmissionError(f"{path.name}: larger than {limit} bytes; not read")
    refused = not_text(path.name, data)
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


def too_big(shown: str, size: int | None = None) -> Absent:
    """An :class:`Absent` for a part file over :data:`~grader.grading.intake.limits.MAX_SOURCE_BYTES`
    (``size``: its bytes, where known before it was read)."""
    what = f" is {size} bytes," if size is not None else " is"
    cap = limits.size_text(limits.MAX_SOURCE_BYTES)
    return Absent(f"{shown}{what} over the {cap} limit of a part file; it was not read", "error")


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


def not_text(shown: str, data: bytes) -> Absent | None:
    """An :class:`Absent` for a part file whose bytes are not text (:func:`text_problem`), else None."""
    why = text_problem(data)
    if why is None:
        return None
    return Absent(f"{shown} is not a text file ({why}); it was not compiled: submit the CUDA source itself, "
                  "saved as text (UTF-8)", "error")


def unreadable(shown: str, exc: OSError) -> Absent:
    """An :class:`Absent` for a part file that could not be read (permissions, an I/O error)."""
    todo = ("make it readable (chmod a+r) and grade it again" if isinstance(exc, PermissionError)
            else "grade it again, or submit it again")
    return Absent(f"{shown} could not be read ({exc.strerror or exc}); it was not graded: {todo}", "error")


def read_part(path: Path, shown: str, *, follow: bool) -> Absent | None:
    """Why the regular file at ``path`` cannot be graded once read (unreadable, not text), or None.
    ``follow``: open it through a symbolic link (a file named on the command line)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    try:
        with open(os.open(path, flags), "rb") as f:
            data = f.read(limits.MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        return unreadable(shown, exc)
    return not_text(shown, data)


def check_entry(path: Path, shown: str, st: os.stat_result | None, *, named: bool = False) -> Absent | None:
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
        return Absent(not_regular(shown, st), "error")
    if st.st_nlink > 1 and not named:
        return hard_link(shown, st.st_nlink)
    if st.st_size > limits.MAX_SOURCE_BYTES:
        return too_big(shown, st.st_size)
    return None


#: Kinds of files that are not regular files, as messages name them.
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def not_regular(shown: str, st: os.stat_result) -> str:
    """Why a file that is not a regular file (a FIFO, a device, a socket...) is not read."""
    kind = next((f"{name}, not" for test, name in _KINDS if test(st.st_mode)), "not")
    return f"{shown} is {kind} a regular file; it was not read"


def hard_link(shown: str, links: int) -> Absent:
    """A part file with more than one name (a hard link: the same file as the reference solution,
    a classmate's file or the private config, perhaps) is not read."""
    return Absent(f"{shown} has {links} hard links (the same file under another name); it was not read: "
                  "links are refused in submissions, submit a copy of the file itself", "error")


def lstat_or_none(path: Path) -> os.stat_result | None:
    """``os.lstat(path)``, or None where nothing is there."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
