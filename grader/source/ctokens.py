"""C and C++ preprocessing tokens, read as GCC's preprocessor reads them.

One lexer for everything in the grader that has to know what a compiler will see in a source file:
the directive filter (:mod:`grader.source.directives`), the emulator's source rewrite
(:mod:`grader.backends.emulator.rewrite`) and the check of a preprocessor's output before nvcc's
second stage reads it again (:func:`grader.source.directives.check_preprocessed`). Two lexers could
disagree about what a directive is; one cannot.

What it does, after the C++ standard's translation phases 1 to 3 ([lex.phases], [lex.pptoken]) and
GCC's documented extensions (the GNU C preprocessor manual, "Initial processing" and "Tokenization"):

- phase 1: ``\\r\\n`` and a lone ``\\r`` end a line, a UTF-8 byte-order mark at the start is dropped,
  and, when asked (``trigraphs=True``: C, and C++ before C++17), trigraphs are replaced (``??=`` is
  ``#``, ``??/`` a backslash...);
- phase 2: line splices are removed: a backslash (or ``??/``) right before a line break, and, as GCC
  accepts it (``blank_splices=True``), a backslash followed by blanks and then a line break;
- phase 3: comments (one blank, also when a block comment spans lines: the logical line goes on),
  blanks (space, tab, form feed, vertical tab, and NUL as GCC reads it), and the tokens: identifiers
  (``$`` and characters beyond ASCII included, universal character names ``\\u0069`` decoded in
  :attr:`Token.value`), pp-numbers (``1'000``, ``0x1p-3``, ``1.e+5``), character and string literals
  with their encoding prefixes (``u8``, ``u``, ``U``, ``L``) and user-defined suffixes, raw strings
  (``R"delim( ... )delim"``, which may span lines), header names (only where the preprocessor reads
  them: after ``#include``, ``#include_next``, ``#import``, ``#embed`` and inside ``__has_include(``,
  ``__has_include_next(``, ``__has_embed(``), punctuators by the longest match, digraphs included
  (:attr:`Token.value` gives ``%:`` as ``#``, ``<:`` as ``[``...), and any other character alone.

Every token keeps where it came from in the original text (offsets and line), so a caller can edit
the original or name a line in a message.

Public API: :class:`Token`, :func:`tokenize`, :func:`logical_lines`, :func:`decode_ucns`.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Iterable, Iterator

__all__ = ["Token", "tokenize", "logical_lines", "decode_ucns", "DIGRAPHS", "HEADER_DIRECTIVES", "HAS_FILE"]

#: Digraphs and their primary spelling.
DIGRAPHS = {"%:": "#", "%:%:": "##", "<:": "[", ":>": "]", "<%": "{", "%>": "}"}
#: Directives whose operand is a header name (``#include <x>``).
HEADER_DIRECTIVES = frozenset({"include", "include_next", "import", "embed"})
#: Operators whose parenthesised operand is a header name (``__has_include(<x>)``).
HAS_FILE = frozenset({"__has_include", "__has_include_next", "__has_embed", "__has_include__",
                      "__has_include_next__"})

_TRIGRAPHS = {"=": "#", "/": "\\", "'": "^", "(": "[", ")": "]", "!": "|", "<": "{", ">": "}", "-": "~"}
_UCN = r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}"
_TOKEN = re.compile(rf"""
  (?P<nl>\n)
| (?P<blank>[ \t\f\v\0]+)
| (?P<lc>//[^\n]*)
| (?P<bc>/\*(?:.*?\*/|.*\Z))
| (?P<raw>(?:u8|[uUL])?R"(?P<delim>[^ ()\\\t\v\f\n"]{{0,16}})\()
| (?P<string>(?:u8|[uUL])?"(?:\\[^\n]|[^"\\\n])*(?:"(?:[A-Za-z_][A-Za-z0-9_]*)?|(?=\n)|\Z))
| (?P<char>(?:u8|[uUL])?'(?:\\[^\n]|[^'\\\n])*(?:'(?:[A-Za-z_][A-Za-z0-9_]*)?|(?=\n)|\Z))
| (?P<number>\.?[0-9](?:[eEpP][+-]|'[A-Za-z0-9_]|[A-Za-z0-9_.$]|{_UCN}|[^\x00-\x7f\s])*)
| (?P<id>(?:[A-Za-z_$]|{_UCN}|[^\x00-\x7f\s])(?:[A-Za-z0-9_$]|{_UCN}|[^\x00-\x7f\s])*)
| (?P<punct>%:%:|\.\.\.|<<=|>>=|->\*|<=>|::|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||\*=|/=|%=|\+=|-=|&=|\|=|\^=
   |\#\#|\.\*|<:|:>|<%|%>|%:|[{{}}\[\]\#();:?.~!+\-*/%^&|=<>,])
| (?P<other>.)
""", re.S | re.X)
_HEADER_ANGLE = re.compile(r"<[^>\n]*>")
_HEADER_QUOTE = re.compile(r'"[^"\n]*"')
_UCN_RE = re.compile(_UCN)


@dataclass(frozen=True, slots=True)
class Token:
    """One preprocessing token.

    Attributes:
        kind: ``"id"``, ``"number"``, ``"string"`` (raw strings included), ``"char"``, ``"header"``
            (a header name: ``<stdio.h>`` or ``"x.h"`` after ``#include``), ``"punct"`` or
            ``"other"`` (a character that starts no token: a stray backslash, ``@``...).
        text: the token as spelled after phases 1 and 2 (splices removed, trigraphs replaced when
            asked).
        value: what the token means: an identifier with its universal character names decoded
            (``__has_\\u0069nclude`` is ``__has_include``), a digraph as its primary spelling
            (``%:`` is ``#``), else ``text``.
        start, end: offsets of its first character and just past its last one in the original
            text (a line splice inside it included, one right after it not).
        line: the 1-based line of the original text it starts on.
        first: whether it is the first token of its logical line (a ``#`` there starts a directive).
        flush: whether it is the first thing on its logical line, with not even a blank before it.
    """

    kind: str
    text: str
    value: str
    start: int
    end: int
    line: int
    first: bool
    flush: bool


def decode_ucns(text: str) -> str:
    """``text`` with every universal character name (``\\uXXXX``, ``\\UXXXXXXXX``) replaced by its
    character (one outside Unicode, or a surrogate, is left as written)."""
    def one(m: re.Match[str]) -> str:
        code = int(m.group()[2:], 16)
        return chr(code) if code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else m.group()
    return _UCN_RE.sub(one, text) if "\\" in text else text


class _Phase2:
    """Translation phases 1 and 2 of a text, with the way back to the original's offsets."""

    def __init__(self, source: str, *, trigraphs: bool, blank_splices: bool) -> None:
        self.source = source
        self._p2: list[int] = []  # breakpoints: from phase-2 offset _p2[i] on, the original is _orig[i] + (offset - _p2[i])
        self._orig: list[int] = []
        self._repl_end: dict[int, int] = {}  # phase-2 offset of a replaced character -> original offset past it
        blanks = "[ \\t\\f\\v]*" if blank_splices else ""
        backslash = r"(?:\\|\?\?/)" if trigraphs else r"\\"
        parts = [rf"(?P<splice>{backslash}{blanks}(?:\r\n|\r|\n))", r"(?P<eol>\r\n|\r)"]
        if trigraphs:
            parts.append(r"(?P<tri>\?\?[=/'()!<>\-])")
        special = re.compile("|".join(parts))
        start = 1 if source.startswith("\ufeff") else 0
        if start == 0 and not special.search(source):
            self.text = source
            return
        out: list[str] = []
        n2 = 0  # length of the phase-2 text so far
        pos = start
        self._mark(0, start)
        for m in special.finditer(source, start):
            if m.start() > pos:
                out.append(source[pos:m.start()])
                n2 += m.start() - pos
            if m.lastgroup == "splice":
                self._mark(n2, m.end())
            else:
                char = "\n" if m.lastgroup == "eol" else _TRIGRAPHS[m.group()[2]]
                self._mark(n2, m.start())
                out.append(char)
                self._repl_end[n2] = m.end()
                n2 += 1
                self._mark(n2, m.end())
            pos = m.end()
        out.append(source[pos:])
        self.text = "".join(out)

    def _mark(self, p2: int, orig: int) -> None:
        if self._p2 and self._p2[-1] == p2:
            self._orig[-1] = orig
        else:
            self._p2.append(p2)
            self._orig.append(orig)

    def orig(self, p2: int) -> int:
        """Original offset of the phase-2 character at ``p2`` (``len`` maps to the original's end)."""
        if not self._p2:
            return p2
        if p2 >= len(self.text):
            return len(self.source)
        i = bisect.bisect_right(self._p2, p2) - 1
        return self._orig[i] + (p2 - self._p2[i])

    def orig_end(self, p2_end: int) -> int:
        """Original offset just past the phase-2 character at ``p2_end - 1``."""
        if not self._p2 or p2_end <= 0:
            return p2_end
        last = p2_end - 1
        return self._repl_end.get(last, self.orig(last) + 1)


def _expects_header_name(recent: list[str]) -> bool:
    """Whether a ``<`` or ``"`` after the logical line's tokens ``recent`` (the last three values)
    opens a header name: right after ``#include`` and its kin, or after ``__has_include(``."""
    return ((len(recent) == 2 and recent[0] == "#" and recent[1] in HEADER_DIRECTIVES)
            or (len(recent) >= 2 and recent[-2] in HAS_FILE and recent[-1] == "("))


def _next_token(text: str, pos: int, recent: list[str]) -> tuple[str, int]:
    """The kind and end offset of the token of phase-2 ``text`` at ``pos`` (not a line break); kind
    "" for blanks and comments. A raw string is a ``string`` running to its closing delimiter (the
    text's end when none)."""
    if text[pos] in '<"' and _expects_header_name(recent):
        m = (_HEADER_ANGLE if text[pos] == "<" else _HEADER_QUOTE).match(text, pos)
        if m:
            return "header", m.end()
    m = _TOKEN.match(text, pos)
    kind, end = m.lastgroup or "other", m.end()
    if kind in ("blank", "lc", "bc"):
        return "", end
    if kind in ("delim", "raw"):
        delim = m.group("delim") or ""
        close = text.find(")" + delim + '"', end)
        return "string", len(text) if close < 0 else close + len(delim) + 2
    if kind == "punct" and text.startswith("<::", pos) and text[pos + 3:pos + 4] not in (":", ">"):
        end = pos + 1  # C++11: `<::` not followed by `:` or `>` is `<` then `::` (std::vector<::T>)
    return kind, end


def _token_value(kind: str, spelled: str) -> str:
    """A token's value: an identifier with its UCNs decoded, a digraph as the punctuator it spells."""
    if kind == "id":
        return decode_ucns(spelled)
    if kind == "punct":
        return DIGRAPHS.get(spelled, spelled)
    return spelled


def tokenize(source: str, *, trigraphs: bool = False, blank_splices: bool = True) -> list[Token]:
    """The preprocessing tokens of ``source``, in order (blanks, comments and line breaks dropped;
    :attr:`Token.first` marks where a logical line begins).

    Args:
        source: a C or C++ source file, or a preprocessor's output.
        trigraphs: replace trigraphs first (C, C++ before C++17, ``-trigraphs``).
        blank_splices: also read a backslash followed by blanks and a line break as a splice, as GCC
            does (with a warning); off, only a backslash right before the line break is one.

    Returns:
        The tokens. An unterminated literal ends at its line's end (as GCC reads it), an unterminated
        comment or raw string at the end of the text.
    """
    p2 = _Phase2(source, trigraphs=trigraphs, blank_splices=blank_splices)
    text = p2.text
    line_starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", source)]
    tokens: list[Token] = []
    recent: list[str] = []  # values of the logical line's tokens so far (the last three)
    at_line_start = True  # nothing but blanks and comments since the last line break
    flush = True  # nothing at all since the last line break
    pos, n = 0, len(text)
    while pos < n:
        if text[pos] == "\n":
            recent.clear()
            at_line_start = flush = True
            pos += 1
            continue
        kind, end = _next_token(text, pos, recent)
        if not kind:
            flush = False
            pos = end
            continue
        spelled = text[pos:end]
        value = _token_value(kind, spelled)
        start = p2.orig(pos)
        tokens.append(Token(kind, spelled, value, start, p2.orig_end(end), bisect.bisect_right(line_starts, start),
                            at_line_start, at_line_start and flush))
        if at_line_start:
            recent.clear()
        recent.append(value)
        if len(recent) > 3:
            del recent[0]
        at_line_start = flush = False
        pos = end
    return tokens


def logical_lines(tokens: Iterable[Token]) -> Iterator[list[Token]]:
    """The tokens grouped by logical line (a line break inside a block comment or a raw string does
    not end one; a splice never does)."""
    line: list[Token] = []
    for tok in tokens:
        if tok.first and line:
            yield line
            line = []
        line.append(tok)
    if line:
        yield line
