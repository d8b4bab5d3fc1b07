"""The rewrite's view of a translation unit: its tokens (:class:`Tok`, :func:`rewrite_tokens`), where
each stands (:class:`Locator`, ``#line`` markers followed), a ``#define``'s head, bracket matching,
and the error a construct the rewrite cannot express raises (:class:`Unsupported`).

Every other module of :mod:`grader.backends.emulator.rewrite` works on the token list built here; the
token indices the helpers take and return are indices of that list.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from grader.source.ctokens import Token, logical_lines, tokenize

_DIRECTIVE_TAIL = re.compile(r"(?:[ \t\f\v\0]+|/\*.*?\*/|//[^\n]*|\\[ \t\f\v]*(?:\r\n|\r|\n))*", re.S)
#: The lexer's kinds as the rewrite names them (a header name only occurs inside a directive).
_KINDS = {"id": "id", "number": "num", "string": "str", "char": "chr", "header": "str", "punct": "punct",
          "other": "punct"}


@dataclass(frozen=True)
class Tok:
    """A token of the rewrite: ``text`` is what it means (an identifier with its universal character
    names decoded, a digraph as its primary spelling), ``src`` the original text it came from (what is
    written back when it is not rewritten), ``start`` and ``end`` the character offsets of ``src``
    in the text (end exclusive); ``parts`` are a directive's tokens (kind ``pp``). Punctuators
    other than ``::`` and ``->`` come one character a token (``<<`` is ``<`` ``<``)."""

    kind: str  # id, num, str, chr, punct, pp (a whole preprocessor directive)
    text: str
    start: int
    end: int
    src: str = ""
    parts: tuple[Token, ...] = ()


class Unsupported(Exception):
    """A construct the rewrite cannot express, or refuses, raised by the rewrite's parts:
    :func:`grader.backends.emulator.rewrite.rewrite_source` turns it into a CompileError naming
    the file and line, ``"<lead>: <what> (<file>:<line>)"``.

    Attributes:
        what: what was found (the message's body).
        offset: where, a character offset of the text being rewritten.
        lead: the message's head, ``"not supported by the emulator"`` or ``"not allowed"``.
    """

    def __init__(self, what: str, offset: int, lead: str = "not supported by the emulator") -> None:
        super().__init__(what)
        self.what, self.offset, self.lead = what, offset, lead


class Locator:
    """Maps a character offset of ``text`` to the (file, line) it stands for, following the ``#line``
    markers handed to :meth:`directive` in source order (before the first: ``default_file``, the
    text's own line). An offset is only placed right once every marker before it was handed over."""

    def __init__(self, text: str, default_file: str) -> None:
        self._newlines = [i for i, c in enumerate(text) if c == "\n"]
        # (physical line where the mapping starts, file, logical line at that physical line)
        self._marks: list[tuple[int, str, int]] = [(1, default_file, 1)]

    def physical_line(self, offset: int) -> int:
        """The line of the text (1-based, markers ignored) holding ``offset``."""
        return bisect.bisect_left(self._newlines, offset) + 1

    def directive(self, tok: Tok) -> None:
        """Follow ``tok`` when it is a ``#line`` directive or a line marker (``# 12 "file"``)."""
        p = tok.parts
        k = 2 if len(p) > 1 and p[1].kind == "id" and p[1].value == "line" else 1
        if len(p) <= k or p[k].kind != "number" or not p[k].text.isdigit():
            return
        if len(p) > k + 1 and p[k + 1].kind == "string" and p[k + 1].text.startswith('"'):
            file = p[k + 1].text[1:-1]
            file = file.encode().decode("unicode_escape") if "\\" in file else file
        else:
            file = self.locate(tok.start)[0]
        next_physical = self.physical_line(tok.end) + 1
        self._marks.append((next_physical, file, int(p[k].text)))

    def locate(self, offset: int) -> tuple[str, int]:
        """(file, line) of ``offset`` as the ``#line`` markers followed so far name it."""
        phys = self.physical_line(offset)
        start, file, logical = self._marks[0]
        for s, f, lg in self._marks:
            if s <= phys:
                start, file, logical = s, f, lg
        return file, logical + (phys - start)


def rewrite_tokens(text: str) -> list[Tok]:
    """The rewrite's tokens of ``text`` (:func:`grader.source.ctokens.tokenize`, as GCC reads it), in
    order, comments left out: a directive is one ``pp`` token from its ``#`` to the end of its
    logical line (trailing comments and splices included; the line break is not); other punctuators
    are split into single characters but ``::`` and ``->`` (see :class:`Tok`). Never raises: a
    character that starts no token comes as a ``punct`` token of its own."""
    toks: list[Tok] = []
    for line in logical_lines(tokenize(text)):
        if line[0].value == "#":
            start, end = line[0].start, _DIRECTIVE_TAIL.match(text, line[-1].end).end()
            while end > start and text[end - 1] in "\r\n":  # the line break ending it is not its own
                end -= 1
            toks.append(Tok("pp", text[start:end], start, end, text[start:end], tuple(line)))
            continue
        for t in line:
            kind, meaning = _KINDS[t.kind], (t.value if t.kind in ("id", "punct") else t.text)
            if kind != "punct" or len(meaning) == 1 or meaning in ("::", "->"):
                toks.append(Tok(kind, meaning, t.start, t.end, text[t.start:t.end]))
                continue
            pieces = ["->", *meaning[2:]] if meaning.startswith("->") else list(meaning)
            if t.end - t.start == len(meaning):  # as written: each piece its own characters
                cuts = [t.start + sum(len(x) for x in pieces[:n]) for n in range(len(pieces) + 1)]
            else:  # a digraph or a splice inside: the first piece takes what the rest do not
                cuts = [t.start] + [t.end - (len(pieces) - n) for n in range(1, len(pieces) + 1)]
            for piece, a, b in zip(pieces, cuts, cuts[1:]):
                toks.append(Tok("punct", piece, a, b, text[a:b]))
    return toks


def define_head(tok: Tok) -> tuple[str, list[str] | None, int] | None:
    """The head of a ``#define`` directive token (kind ``pp``): ``(name, parameters, end)``, the
    parameters None for an object-like macro (``...`` named ``__VA_ARGS__``), ``end`` the offset in
    ``tok.text`` where the body starts. None for any other directive, or one without a name."""
    p = tok.parts
    if len(p) < 3 or p[1].value != "define" or p[2].kind != "id":
        return None
    name = p[2]
    if len(p) > 3 and p[3].value == "(" and p[3].start == name.end:  # function-like: `(` right after the name
        close = next((k for k in range(4, len(p)) if p[k].value == ")"), None)
        if close is not None:
            params = [("__VA_ARGS__" if t.value == "..." else t.value) for t in p[4:close] if t.value != ","]
            return name.value, params, p[close].end - tok.start
    return name.value, None, name.end - tok.start


def match_forward(toks: list[Tok], i: int, end: int) -> int:
    """Index of the bracket closing ``toks[i]`` (one of ``( [ {``), looking up to ``end``
    (exclusive); -1 when none does there or a bracket of another kind closes first. Only ``punct``
    tokens count (a directive's brackets do not)."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = [pairs[toks[i].text]]
    j = i + 1
    while j < end:
        t = toks[j].text if toks[j].kind == "punct" else ""
        if t in pairs:
            stack.append(pairs[t])
        elif t in (")", "]", "}"):
            if t != stack[-1]:
                return -1
            stack.pop()
            if not stack:
                return j
        j += 1
    return -1


def match_backward(toks: list[Tok], i: int, lo: int) -> int:
    """Index of the bracket opening ``toks[i]`` (one of ``) ] }``), looking back down to ``lo``
    (inclusive); -1 as :func:`match_forward`."""
    pairs = {")": "(", "]": "[", "}": "{"}
    stack = [pairs[toks[i].text]]
    j = i - 1
    while j >= lo:
        t = toks[j].text if toks[j].kind == "punct" else ""
        if t in pairs:
            stack.append(pairs[t])
        elif t in ("(", "[", "{"):
            if t != stack[-1]:
                return -1
            stack.pop()
            if not stack:
                return j
        j -= 1
    return -1


def glued(toks: list[Tok], k: int) -> bool:
    """Whether ``toks[k]`` follows ``toks[k - 1]`` with no gap (so `<` `<` is `<<`); False for k = 0."""
    return k > 0 and toks[k].start == toks[k - 1].end


def punct_at(toks: list[Tok], k: int, lo: int, hi: int) -> str:
    """The text of ``toks[k]`` when it is a punctuator and ``lo <= k < hi``, else ``""`` (k may be
    out of range)."""
    return toks[k].text if lo <= k < hi and toks[k].kind == "punct" else ""
