"""What a submission may ask of the preprocessor: only standard and CUDA headers, no file names.

A compiler reads whatever a source file includes, and its diagnostics quote what it read: an
``#include "/path/to/private.yaml"`` echoes a private file into a student's report, ``#line 1
"job.json"`` followed by ``#error`` makes the compiler show line 1 of ``job.json`` under the error
(GCC prints the source line of every diagnostic, read from the file the location names), and
``__has_include("/proc/1/cwd/...")`` tells whether a file exists. The grader therefore refuses,
before any compiler runs:

- any ``#include`` that is not one of the C, C++ and CUDA headers of :data:`ALLOWED_HEADERS`, in
  angle brackets; computed includes (``#include SOME_MACRO``) too;
- every other directive that names or reads a file: ``#include_next``, ``#import``, ``#embed``,
  ``#line`` with anything but a line number, GNU line markers (``# 12 "file"``), ``#ident``,
  ``#sccs``, ``#assert``, ``#unassert`` and any directive name it does not know;
- ``__has_include``, ``__has_include_next`` and ``__has_embed`` unless their operand is an allowed
  header in angle brackets (``#ifdef __has_include`` and ``defined(__has_include)`` are fine);
- ``#pragma GCC dependency`` (it reads a file's date) and ``_Pragma`` unless its operand is a plain
  string literal that does not name a dependency.

The directives are found the way the preprocessor finds them: line splices (backslash-newline, and
backslash, blanks, newline as GCC accepts it) are undone, comments become a space (a block comment
may hide a line break inside a directive), blanks include form feed, vertical tab and NUL, ``%:`` is
``#``, string, character and raw string literals and pp-numbers (``1'000``) are skipped whole, and
the text is read both with and without trigraphs (``??=`` is ``#``, ``??/`` a backslash), since
which the compiler applies depends on its language mode. Anything seen in either reading is checked.

This is a first line only: where bubblewrap exists the compilers run in a sandbox that shows them
no private file (the emulator's compile, and the GPU path's nvcc: see
:mod:`grader.backends.pycuda_backend`); token pasting can spell ``__has_include`` or ``_Pragma``
out of pieces this filter cannot see through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from grader.errors import CompileError

#: Headers a submission may include (``#include <name>``).
ALLOWED_HEADERS = frozenset({
    # CUDA
    "cuda.h", "cuda_runtime.h", "cuda_runtime_api.h", "device_launch_parameters.h", "device_functions.h",
    "cooperative_groups.h", "cuda_fp16.h", "math_constants.h", "sm_20_atomic_functions.h",
    # C
    "assert.h", "float.h", "limits.h", "math.h", "stddef.h", "stdint.h", "stdio.h", "stdlib.h", "string.h",
    # C++
    "algorithm", "cassert", "cfloat", "climits", "cmath", "cstddef", "cstdint", "cstdio", "cstdlib", "cstring",
    "limits", "type_traits", "utility",
})

#: Directives that name no file and read none (``#line`` is checked apart: a number only).
_HARMLESS_DIRECTIVES = frozenset({
    "define", "undef", "if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else", "endif",
    "error", "warning", "pragma",
})
#: Operators that test for a file by name.
_HAS_FILE = frozenset({"__has_include", "__has_include_next", "__has_embed", "__has_include__",
                       "__has_include_next__"})
_TRIGRAPHS = {"=": "#", "/": "\\", "'": "^", "(": "[", ")": "]", "!": "|", "<": "{", ">": "}", "-": "~"}
_BLANKS = " \t\f\v\0"
_RAW_PREFIXES = frozenset({"R", "u8R", "uR", "UR", "LR"})
_ID_START = re.compile(r"[A-Za-z_$\x80-\U0010ffff]|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}")
_ID_REST = re.compile(r"(?:[A-Za-z0-9_$\x80-\U0010ffff]|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8})*")
_PP_NUMBER = re.compile(r"\.?[0-9](?:[eEpP][+-]|'[A-Za-z0-9_]|[A-Za-z0-9_.]|\\u[0-9A-Fa-f]{4})*")
_ALLOWED_TEXT = ", ".join(sorted(ALLOWED_HEADERS))


@dataclass(frozen=True)
class _Token:
    kind: str   # "id", "number", "string", "char", "header", "hash", "paste", "punct", "newline"
    text: str
    line: int   # line of the original source (1-based)


def _phase2(source: str, *, trigraphs: bool, blank_splices: bool) -> tuple[str, list[int]]:
    """Translation phases 1 and 2: line endings made ``\\n``, trigraphs replaced (if asked), line
    splices removed. Returns the text and, for each of its characters, its original line."""
    text = source.replace("\r\n", "\n").replace("\r", "\n")
    if text.startswith("\ufeff"):
        text = text[1:]
    out: list[str] = []
    lines: list[int] = []
    line, i, n = 1, 0, len(text)
    while i < n:
        c = text[i]
        width = 1
        if trigraphs and c == "?" and text.startswith("??", i) and i + 2 < n and text[i + 2] in _TRIGRAPHS:
            c, width = _TRIGRAPHS[text[i + 2]], 3
        if c == "\\":
            j = i + width
            if blank_splices:
                while j < n and text[j] in " \t\f\v":
                    j += 1
            if j < n and text[j] == "\n":  # a splice: the backslash and the newline vanish
                line += 1
                i = j + 1
                continue
        if c == "\n":
            out.append("\n")
            lines.append(line)
            line += 1
            i += 1
            continue
        out.append(c)
        lines.append(line)
        i += width
    return "".join(out), lines


def _tokens(text: str, lines: list[int]):
    """Preprocessing tokens of a phase-2 text (comments and blanks dropped, newlines kept as tokens;
    the operand of ``#include`` and of ``__has_include(`` read as a header name)."""
    n = len(text)
    i = 0
    recent: list[str] = []  # the last few token texts of the line, to know where a header name may come

    def line_of(k: int) -> int:
        return lines[min(k, n - 1)] if n else 1

    while i < n:
        c = text[i]
        if c in _BLANKS:
            i += 1
            continue
        if c == "\n":
            recent.clear()
            yield _Token("newline", "\n", line_of(i))
            i += 1
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        start = i
        header_context = (len(recent) >= 2 and recent[-2] == "#" and recent[-1] in (
            "include", "include_next", "import", "embed")) or (
            len(recent) >= 2 and recent[-2] in _HAS_FILE and recent[-1] == "(")
        if header_context and c == "<":
            j = text.find(">", i + 1)
            k = text.find("\n", i + 1)
            if j >= 0 and (k < 0 or j < k):
                i = j + 1
                tok = _Token("header", text[start:i], line_of(start))
                recent.append(tok.text)
                yield tok
                continue
        if c in "\"'":
            i = _end_of_literal(text, i + 1, c)
            tok = _Token("string" if c == '"' else "char", text[start:i], line_of(start))
        elif _PP_NUMBER.match(text, i):
            i = _PP_NUMBER.match(text, i).end()
            tok = _Token("number", text[start:i], line_of(start))
        elif _ID_START.match(text, i):
            i = _ID_REST.match(text, _ID_START.match(text, i).end()).end()
            word = text[start:i]
            if i < n and text[i] == '"' and word in _RAW_PREFIXES:
                i = _end_of_raw_string(text, i + 1)
                tok = _Token("string", text[start:i], line_of(start))
            else:
                tok = _Token("id", word, line_of(start))
        elif text.startswith("%:%:", i) or text.startswith("##", i):
            i += 4 if c == "%" else 2
            tok = _Token("paste", "##", line_of(start))
        elif c == "#" or text.startswith("%:", i):
            i += 1 if c == "#" else 2
            tok = _Token("hash", "#", line_of(start))
        else:
            i += 1
            tok = _Token("punct", c, line_of(start))
        recent.append(tok.text)
        del recent[:-3]
        yield tok


def _end_of_literal(text: str, i: int, quote: str) -> int:
    """End of a string or character literal opened before ``i``; an unterminated one ends at the line's
    end, as the preprocessor ends it."""
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] != "\n":
            i += 2
            continue
        if c == quote:
            return i + 1
        if c == "\n":
            return i
        i += 1
    return n


def _end_of_raw_string(text: str, i: int) -> int:
    """End of a raw string literal whose ``"`` is at ``i - 1`` (``R"delim( ... )delim"``)."""
    m = re.compile(r'([^ ()\\\t\v\f\n"]{0,16})\(').match(text, i)
    if m is None:  # not a raw string after all: read it as a plain one
        return _end_of_literal(text, i, '"')
    close = ")" + m.group(1) + '"'
    j = text.find(close, m.end())
    return len(text) if j < 0 else j + len(close)


def _logical_lines(tokens):
    """Group tokens into lines (a newline inside a block comment does not end one)."""
    line: list[_Token] = []
    for tok in tokens:
        if tok.kind == "newline":
            if line:
                yield line
            line = []
        else:
            line.append(tok)
    if line:
        yield line


def _refuse(filename: str, line: int, what: str, why: str) -> CompileError:
    shown = what if len(what) <= 60 else what[:57] + "..."
    return CompileError(f"{filename}:{line}: `{shown}` is not allowed: {why}")


_INCLUDE_WHY = ("a submission may include only the standard C, C++ and CUDA headers, in angle brackets ("
                + _ALLOWED_TEXT + ")")


def _spell(tokens: list[_Token]) -> str:
    return " ".join(t.text for t in tokens)


def _check_line(toks: list[_Token], filename: str) -> None:
    """Check one logical line: a directive, and any file-testing operator or ``_Pragma`` on it."""
    first = toks[0]
    if first.kind == "hash" and len(toks) > 1:
        name, rest = toks[1], toks[2:]
        shown = f"#{name.text} {_spell(rest)}".strip()
        if name.kind == "number":
            raise _refuse(filename, first.line, shown,
                          "a line marker names a file for the compiler's messages; write no line markers")
        if name.kind != "id":
            raise _refuse(filename, first.line, shown, "it is not a preprocessing directive this grader accepts")
        if name.text == "include":
            header = rest[0].text[1:-1] if rest and rest[0].kind == "header" else None
            if header is None or header not in ALLOWED_HEADERS or len(rest) > 1:
                raise _refuse(filename, first.line, shown, _INCLUDE_WHY)
            return
        if name.text in ("include_next", "import", "embed"):
            raise _refuse(filename, first.line, shown, _INCLUDE_WHY)
        if name.text == "line":
            if len(rest) != 1 or rest[0].kind != "number" or not rest[0].text.isdigit():
                raise _refuse(filename, first.line, shown,
                              "`#line` may give a line number only, never a file name (the compiler would "
                              "quote that file in its messages)")
            return
        if name.text not in _HARMLESS_DIRECTIVES:
            raise _refuse(filename, first.line, shown,
                          "a submission may use only #include <header>, #define, #undef, #if, #ifdef, "
                          "#ifndef, #elif, #else, #endif, #pragma, #error, #warning and #line <number>")
        if name.text == "pragma" and any(t.kind == "id" and t.text == "dependency" for t in rest):
            raise _refuse(filename, first.line, shown, "`#pragma GCC dependency` reads a file")
    for k, tok in enumerate(toks):
        if tok.kind != "id":
            continue
        if tok.text in _HAS_FILE:
            before = [t.text for t in toks[max(0, k - 2):k]]
            tested = ("defined" in before or (len(toks) > 1 and toks[0].kind == "hash"
                                              and toks[1].text in ("ifdef", "ifndef", "elifdef", "elifndef")
                                              and k == 2))
            after = toks[k + 1:k + 4]
            plain = (len(after) == 3 and after[0].text == "(" and after[1].kind == "header"
                     and after[1].text[1:-1] in ALLOWED_HEADERS and after[2].text == ")")
            if after and after[0].text == "(":
                tested = False  # an operand follows: it must be a plain header, `defined` or not
            if not (tested or plain):
                raise _refuse(filename, tok.line, _spell(toks[k:k + 4]),
                              f"`{tok.text}` may test only for a standard C, C++ or CUDA header in angle "
                              f"brackets ({_ALLOWED_TEXT})")
        elif tok.text == "_Pragma":
            after = toks[k + 1:k + 4]
            literal = (len(after) == 3 and after[0].text == "(" and after[1].kind == "string"
                       and after[2].text == ")")
            if not literal or re.search(r"\bdependency\b", after[1].text):
                raise _refuse(filename, tok.line, _spell(toks[k:k + 4]),
                              "`_Pragma` may take only a string literal, and none that names a dependency file")


def check_includes(source: str, *, filename: str) -> None:
    """Refuse a submission whose preprocessing directives could make a compiler read or name a file.

    Checks every logical line, read with and without trigraphs and with and without GCC's blank-tolerant
    line splices (see the module docstring for what is refused).

    Args:
        source: the student's file as written (without the grader's part header).
        filename: its name, for the message.

    Raises:
        CompileError: ``"<filename>:<line>: `<directive>` is not allowed: <why>"``, naming the line of
            the original file, never the named file's contents, and saying what is allowed.
    """
    readings = [(False, False)]
    if "??" in source:
        readings.append((True, False))
    if re.search(r"\\[ \t\f\v]+\r?\n", source) or ("??" in source and "??/" in source):
        readings += [(False, True), (True, True)]
    for trigraphs, blank_splices in readings:
        text, lines = _phase2(source, trigraphs=trigraphs, blank_splices=blank_splices)
        for toks in _logical_lines(_tokens(text, lines)):
            _check_line(toks, filename)
