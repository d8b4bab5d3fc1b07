"""The caps of intake: what one part file, one submission and one reading of it may hold or take.
Every module of :mod:`grader.grading.intake` reads them from here when it checks, so a cap set here
(a test's smaller one) holds everywhere."""

from __future__ import annotations

__all__ = ["INTAKE_S", "MAX_ARCHIVE_BYTES", "MAX_DEPTH", "MAX_DIRECTORY_BYTES", "MAX_ENTRIES", "MAX_SOURCE_BYTES",
           "MAX_TOTAL_BYTES", "size_text"]

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


def size_text(n: int) -> str:
    """``n`` bytes for a message: ``1 MiB`` where a whole number of MiB, else ``1000 bytes``."""
    return f"{n >> 20} MiB" if n >= (1 << 20) and not n % (1 << 20) else f"{n} bytes"
