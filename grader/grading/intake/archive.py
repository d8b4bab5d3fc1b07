"""A batch's zip submission taken in: refused from its end record before its list of entries is read
where it is too large (:func:`zip_directory`), else each part's entry checked and extracted, by base
name only, into a folder of the grader's own (:func:`snapshot_zip`)."""

from __future__ import annotations

import os
import stat
import struct
import zipfile
import zlib
from pathlib import Path

import grader.grading.intake.limits as limits
from grader.assignment.parts import PARTS
from grader.grading.intake.folder import fresh_folder
from grader.grading.intake.names import suggestions
from grader.grading.intake.part_file import not_regular, not_text, too_big
from grader.grading.intake.records import PART_FILES, Absent, Intake, missing_part, show

__all__ = ["snapshot_zip", "zip_directory"]


def _is_link(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def snapshot_zip(archive: Path, dest: Path) -> Intake:
    """Extract a zip submission's part files into ``dest`` (emptied first), by base name: no path
    in the archive is ever used as a destination. Per part, the shallowest entry of its name.

    The archive is refused, before its list of entries is read, when it is larger than
    :data:`~.limits.MAX_ARCHIVE_BYTES` or its end-of-central-directory record declares more than
    :data:`~.limits.MAX_ENTRIES` entries or a list of entries over :data:`~.limits.MAX_DIRECTORY_BYTES`
    (:func:`zip_directory`); then when it declares more than :data:`~.limits.MAX_TOTAL_BYTES` bytes
    uncompressed; a part entry that is a link, is declared or turns out larger than
    :data:`~.limits.MAX_SOURCE_BYTES`, or cannot be decompressed is not graded, with a message.
    """
    fresh_folder(dest)
    try:
        fd = os.open(archive, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO must not block intake
    except OSError as exc:
        return Intake(dest, refused=f"{show(archive.name)} could not be opened ({exc.strerror}); it was not read: "
                                    "make it readable (chmod a+r) and grade it again")
    with os.fdopen(fd, "rb") as file:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return Intake(dest, refused=not_regular(show(archive.name), st))
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
    and memory per entry), or "": its size over :data:`~.limits.MAX_ARCHIVE_BYTES`, its declared entries
    over :data:`~.limits.MAX_ENTRIES`, its central directory over :data:`~.limits.MAX_DIRECTORY_BYTES`
    (which bounds what is read however many entries it claims)."""
    if size > limits.MAX_ARCHIVE_BYTES:
        cap = limits.size_text(limits.MAX_ARCHIVE_BYTES)
        return f"{shown} is {size} bytes, more than {cap}; submit the part files only"
    declared = zip_directory(file, size)
    if declared is None:
        return ""
    entries, directory = declared
    if entries > limits.MAX_ENTRIES:
        return f"the zip declares {entries} entries, more than {limits.MAX_ENTRIES}; submit the part files only"
    if directory > limits.MAX_DIRECTORY_BYTES:
        cap = limits.size_text(limits.MAX_DIRECTORY_BYTES)
        return f"the zip's list of entries is {directory} bytes, more than {cap}; submit the part files only"
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
        if len(infos) > limits.MAX_ENTRIES:
            return Intake(dest, refused=f"the zip holds {len(infos)} entries, more than {limits.MAX_ENTRIES}; "
                                        "submit the part files only")
        declared = sum(i.file_size for i in infos)
        if declared > limits.MAX_TOTAL_BYTES:
            return Intake(dest, refused=f"the zip declares {declared} bytes uncompressed, more than "
                                        f"{limits.size_text(limits.MAX_TOTAL_BYTES)}; submit the part files only")
        chosen: dict[str, zipfile.ZipInfo] = {}
        names = []
        for info in infos:
            parts = info.filename.replace("\\", "/").split("/")
            if info.is_dir() or any(p.startswith(".") or p == "__MACOSX" for p in parts[:-1]):
                continue
            names.append((parts[-1], show(info.filename)))
            key = PART_FILES.get(parts[-1])
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
            if info.file_size > limits.MAX_SOURCE_BYTES:
                notes[key] = too_big(shown, info.file_size)
                continue
            try:
                with z.open(info) as f:
                    data = f.read(limits.MAX_SOURCE_BYTES + 1)
            except (zipfile.BadZipFile, RuntimeError, NotImplementedError, OSError, EOFError, zlib.error) as exc:
                notes[key] = Absent(f"{shown} could not be extracted from the zip ({exc}); it was not graded",
                                    "error")
                continue
            refused = too_big(shown) if len(data) > limits.MAX_SOURCE_BYTES else not_text(shown, data)
            if refused is not None:
                notes[key] = refused
                continue
            (dest / PARTS[key].filename).write_bytes(data)
    missing = [k for k in PARTS if k not in chosen]
    for key, found in suggestions(missing, names).items():
        notes[key] = missing_part(key, found)
    return Intake(dest, notes, sources=sources)
