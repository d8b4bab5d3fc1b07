"""The one cleaner of text a student controls, for every place a person reads it.

Compiler output quoting the student's source, device ``printf`` output, a crashed kernel's last
output, file names from a folder or a zip: any of it may hold characters that act on whoever shows
it instead of being shown. :func:`printable` takes them out or writes them visibly, and is what the
results (:func:`grader.core.results.clean_text`, where a worker's text enters them), every renderer
(terminal and report.txt, JSON, JUnit, Markdown, Gradescope, PrairieLearn, HTML) and intake's file names
(:func:`one_line`) use:

- ANSI/VT escape sequences (CSI, OSC, DCS, SOS, PM and APC strings, two-character escapes) are
  removed: they would clear a terminal, recolour it or set its title;
- C0 and C1 control characters other than newline and tab, and DEL, are written ``\\xNN``
  (a carriage return ending a line is dropped);
- every other code point Python does not call printable (``str.isprintable``: Unicode's "Other"
  and "Separator" categories but the ASCII space) is written ``\\xNN``, ``\\uNNNN`` or
  ``\\UNNNNNNNN``: the bidirectional controls (U+061C, U+200E-200F, U+202A-202E, U+2066-2069),
  which reorder what a terminal, an editor or a browser shows ("Trojan Source", CVE-2021-42574:
  ``0/100`` reads as ``100/0``); the other format characters (zero-width spaces and joiners, the
  soft hyphen, a byte-order mark, tag characters), which hide text; the line and paragraph
  separators and the other spaces (U+00A0, U+3000); lone surrogates; private-use code points; and
  the unassigned ones, the noncharacters among them (U+FDD0-FDEF and the last two of every plane,
  U+FFFE-FFFF up to U+10FFFE-10FFFF), which XML cannot hold and a terminal shows as it likes.

Public API: :func:`printable`, :func:`one_line`, :func:`cut`.
"""

from __future__ import annotations

import re

__all__ = ["printable", "one_line", "cut"]

#: ANSI/VT escape sequences: CSI (ESC [ or the one-character C1 CSI), OSC, DCS/SOS/PM/APC strings
#: up to their terminator (BEL or ST), and two-character escapes.
_ESCAPE = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
                     r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]).*?(?:\x07|\x1b\\|\x9c|$)"
                     r"|\x1b[ -/]*[0-~]", re.S)


def _code(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` safe to show anywhere: escape sequences removed, ``\\r\\n`` as ``\\n``, every other
    code point that is not printable (a control, a bidirectional or other format character, a
    separator, a surrogate, a private-use, unassigned or non-character code point) written
    ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN`` (see the module docstring); newline and tab kept.
    Idempotent."""
    text = _ESCAPE.sub("", text.replace("\r\n", "\n"))
    if text.replace("\n", "").replace("\t", "").isprintable():  # the common case, at C speed
        return text
    return "".join(c if c.isprintable() or c in "\n\t" else _code(ord(c)) for c in text)


def one_line(text: str) -> str:
    """A name (a file, a folder, an entry of a zip) shown exactly and on one line: every character
    Python does not call printable (controls, newline and tab, format characters such as the
    bidirectional controls and zero-width ones, separators, surrogates, unassigned code points) written
    ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN``, an escape sequence's ESC included, so nothing is hidden."""
    return "".join(c if c.isprintable() else _code(ord(c)) for c in text)


def cut(text: str, *, max_bytes: int, max_lines: int) -> str:
    """``text`` cut to ``max_lines`` lines and ``max_bytes`` UTF-8 bytes, ending in
    ``… (cut: N bytes)`` with the number of bytes left out; as it is when it fits."""
    kept = "\n".join(text.split("\n")[:max_lines])
    data = kept.encode("utf-8", errors="replace")
    if len(data) > max_bytes:
        kept = data[:max_bytes].decode("utf-8", errors="ignore")
    left = len(text.encode("utf-8", errors="replace")) - len(kept.encode("utf-8", errors="replace"))
    return kept if left <= 0 else kept.rstrip() + f"\n… (cut: {left} bytes)"
