"""The rewrite's view of a translation unit: its tokens, where each stands (``#line`` markers
followed), bracket matching, C string literals, and the error a construct the rewrite cannot
express raises.

Every other module of :mod:`grader.backends.emulator.rewrite` works on the token list built here.
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
class _Tok:
    """A token of the rewrite: ``text`` is what it means (an identifier with its universal character
    names decoded, a digraph as its primary spelling), ``src`` the original text it came from (what is
    written back when it is not rewritten); ``parts`` are a directive's tokens (kind ``pp``).
    Punctuators other than ``::`` and ``->`` come one character a token (``<<`` is ``<`` ``<``)."""

    kind: str  # id, num, str, chr, punct, pp (a whole preprocessor directive)
    text: str
    start: int
    end: int
    src: str = ""
    parts: tuple[Token, ...] = ()


class _Unsupported(Exception):
    """A construct the rewrite cannot express, or refuses (``lead``), at ``offset`` of the text;
    :func:`grader.backends.emulator.rewrite.rewrite_source` turns it into a CompileError naming
    the file and line."""

    def __init__(self, what: str, offset: int, lead: str = "not supported by the emulator") -> None:
        super().__init__(what)
        self.what, self.offset, self.lead = what, offset, lead


class _Locator:
    """Maps an offset of the text to (file, line) through ``#line`` markers."""

    def __init__(self, text: str, default_file: str) -> None:
        self._newlines = [i for i, c in enumerate(text) if c == "\n"]
        # (physical line where the mapping starts, file, logical line at that physical line)
        self._marks: list[tuple[int, str, int]] = [(1, default_file, 1)]

    def physical_line(self, offset: int) -> int:
        """The line of the text (1-based, markers ignored) holding ``offset``."""
        return bisect.bisect_left(self._newlines, offset) + 1

    def directive(self, tok: _Tok) -> None:
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


def _tokenize(text: str) -> list[_Tok]:
    """The rewrite's tokens of ``text`` (:func:`grader.source.ctokens.tokenize`, as GCC reads it): a directive
    is one ``pp`` token from its ``#`` to the end of its logical line (trailing comments and splices
    included); other punctuators are split into single characters but ``::`` and ``->``."""
    toks: list[_Tok] = []
    for line in logical_lines(tokenize(text)):
        if line[0].value == "#":
            start, end = line[0].start, _DIRECTIVE_TAIL.match(text, line[-1].end).end()
            while end > start and text[end - 1] in "\r\n":  # the line break ending it is not its own
                end -= 1
            toks.append(_Tok("pp", text[start:end], start, end, text[start:end], tuple(line)))
            continue
        for t in line:
            kind, meaning = _KINDS[t.kind], (t.value if t.kind in ("id", "punct") else t.text)
            if kind != "punct" or len(meaning) == 1 or meaning in ("::", "->"):
                toks.append(_Tok(kind, meaning, t.start, t.end, text[t.start:t.end]))
                continue
            pieces = ["->", *meaning[2:]] if meaning.startswith("->") else list(meaning)
            if t.end - t.start == len(meaning):  # as written: each piece its own characters
                cuts = [t.start + sum(len(x) for x in pieces[:n]) for n in range(len(pieces) + 1)]
            else:  # a digraph or a splice inside: the first piece takes what the rest do not
                cuts = [t.start] + [t.end - (len(pieces) - n) for n in range(1, len(pieces) + 1)]
            for piece, a, b in zip(pieces, cuts, cuts[1:]):
                toks.append(_Tok("punct", piece, a, b, text[a:b]))
    return toks


def _define_head(tok: _Tok) -> tuple[str, list[str] | None, int] | None:
    """``(name, parameters or None, end of the head in tok.text)`` of a ``#define`` directive token
    (``...`` as ``__VA_ARGS__``), or None for any other directive."""
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


def _directive_names(tok: _Tok, lo: int = 2) -> set[str]:
    """The identifiers of a directive token from its part ``lo`` on."""
    return {t.value for t in tok.parts[lo:] if t.kind == "id"}


def _match_forward(toks: list[_Tok], i: int, end: int) -> int:
    """Index of the bracket closing ``toks[i]`` (one of ``( [ {``), or -1."""
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


def _match_backward(toks: list[_Tok], i: int, lo: int) -> int:
    """Index of the bracket opening ``toks[i]`` (one of ``) ] }``), or -1."""
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


def _glued(toks: list[_Tok], k: int) -> bool:
    """Whether token k follows token k - 1 with no gap (so `<` `<` is `<<`)."""
    return k > 0 and toks[k].start == toks[k - 1].end


def _pt(toks: list[_Tok], k: int, lo: int, hi: int) -> str:
    """Punctuation text of token k within [lo, hi), or ''."""
    return toks[k].text if lo <= k < hi and toks[k].kind == "punct" else ""


def _depth0(toks: list[_Tok], lo: int, hi: int) -> list[int]:
    """Indices of toks[lo:hi] outside brackets."""
    out: list[int] = []
    depth = 0
    for k in range(lo, hi):
        w = toks[k].text if toks[k].kind == "punct" else ""
        if w in ("(", "[", "{"):
            depth += 1
        elif w in (")", "]", "}"):
            depth -= 1
        elif depth == 0:
            out.append(k)
    return out


def _c_literal(src: str) -> str | None:
    """The characters of a plain or ``u8`` string literal as written (``"a\\tb"``); None for any other
    (a raw, wide or UTF-16/32 string)."""
    if src.startswith('u8"'):
        src = src[2:]
    if not (len(src) >= 2 and src[0] == src[-1] == '"'):
        return None
    simple = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "?": "?", "0": "\0", "a": "\a",
              "b": "\b", "f": "\f", "v": "\v"}
    return re.sub(r"\\(.)", lambda m: simple.get(m.group(1), m.group(1)), src[1:-1], flags=re.S)


def _c_string(text: str) -> str:
    """``text`` as a C string literal."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'

