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

The directives are found the way the preprocessor finds them, by the grader's one lexer
(:mod:`grader.source.ctokens`, which the emulator's rewrite shares): line splices (backslash-newline, and
backslash, blanks, newline as GCC accepts it) are undone, comments become a space (a block comment
may hide a line break inside a directive), blanks include form feed, vertical tab and NUL, ``%:`` is
``#``, universal character names are decoded (``#\\u0069nclude`` is ``#include``,
``__has_\\u0069nclude`` is ``__has_include``), string, character and raw string literals and
pp-numbers (``1'000``) are skipped whole, and the text is read both with and without trigraphs
(``??=`` is ``#``, ``??/`` a backslash), since which the compiler applies depends on its language
mode. Anything seen in either reading is checked.

Token pasting (``a##b``) builds an identifier from its leftmost piece on, and that piece is written
somewhere in the file: so an identifier that begins the name of ``__has_include``,
``__has_include_next``, ``__has_embed`` or ``_Pragma`` without being it (``__has_``, ``_Prag``, ``_``,
``__``) is refused wherever it stands, and no macro can assemble those operators. (Pasting cannot make
a directive within one preprocessing pass; what nvcc's second pass would read as one is judged on the
first pass's output: :func:`check_preprocessed`.)

This is a first line only: where bubblewrap exists the compilers run in a sandbox that shows them
no private file (the emulator's compile, and the GPU path's nvcc: see
:mod:`grader.backends.pycuda.compile`).
"""

from __future__ import annotations

import re

from grader.source.ctokens import HAS_FILE, Token, logical_lines, tokenize
from grader.core.errors import CompileError

#: Headers a submission may include (``#include <name>``).
ALLOWED_HEADERS = frozenset({
    # CUDA
    "cuda.h", "cuda_runtime.h", "cuda_runtime_api.h", "device_launch_parameters.h", "device_functions.h",
    "cooperative_groups.h", "cuda_fp16.h", "math_constants.h", "sm_20_atomic_functions.h",
    # libcu++ (CCCL): the atomics CCCL's documentation teaches; the emulator has its own (runtime/include/cuda/)
    "cuda/atomic", "cuda/std/atomic",
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
_ALLOWED_TEXT = ", ".join(sorted(ALLOWED_HEADERS))
#: Operators the preprocessor evaluates by name, and what each could be made to do.
_OPERATORS = {**{name: "tests whether a file exists" for name in HAS_FILE},
              "_Pragma": "runs a pragma that no filter of the written text sees"}
#: Identifiers that begin an operator's name: token pasting (``a##b``) builds a name from its left
#: piece on, so ``__has_ ## include`` is ``__has_include``; the leftmost piece is always written
#: somewhere in the file (maybe as a macro's argument or body).
_PIECES = {name[:k]: name for name in sorted(_OPERATORS, key=lambda n: (n != "__has_include", n), reverse=True)
           for k in range(1, len(name))}  # a piece of several names is named after __has_include first
for _name in _OPERATORS:
    _PIECES.pop(_name, None)  # the whole name is checked where it stands


def _refuse(filename: str, line: int, what: str, why: str) -> CompileError:
    shown = what if len(what) <= 60 else what[:57] + "..."
    return CompileError(f"{filename}:{line}: `{shown}` is not allowed: {why}")


_INCLUDE_WHY = ("a submission may include only the standard C, C++ and CUDA headers, in angle brackets ("
                + _ALLOWED_TEXT + ")")


def _spell(tokens: list[Token]) -> str:
    return " ".join(t.value if t.kind == "id" else t.text for t in tokens)


_ONLY_DIRECTIVES = ("a submission may use only #include <header>, #define, #undef, #if, #ifdef, #ifndef, #elif, "
                    "#else, #endif, #pragma, #error, #warning and #line <number>")


def _check_directive(toks: list[Token], filename: str) -> None:
    """Check a logical line that is a directive (its first token is ``#``)."""
    hash_, name, rest = toks[0], toks[1], toks[2:]
    shown = f"#{name.value if name.kind == 'id' else name.text} {_spell(rest)}".strip()
    if name.kind == "number":
        raise _refuse(filename, hash_.line, shown,
                      "a line marker names a file for the compiler's messages; write no line markers")
    if name.kind != "id":
        raise _refuse(filename, hash_.line, shown, "it is not a preprocessing directive this grader accepts")
    if name.value == "include":
        header = rest[0].text[1:-1] if rest and rest[0].kind == "header" and rest[0].text[0] == "<" else None
        if header is None or header not in ALLOWED_HEADERS or len(rest) > 1:
            raise _refuse(filename, hash_.line, shown, _INCLUDE_WHY)
    elif name.value in ("include_next", "import", "embed"):
        raise _refuse(filename, hash_.line, shown, _INCLUDE_WHY)
    elif name.value == "line":
        if len(rest) != 1 or rest[0].kind != "number" or not rest[0].text.isdigit():
            raise _refuse(filename, hash_.line, shown,
                          "`#line` may give a line number only, never a file name (the compiler would "
                          "quote that file in its messages)")
    elif name.value not in _HARMLESS_DIRECTIVES:
        raise _refuse(filename, hash_.line, shown, _ONLY_DIRECTIVES)
    elif name.value == "pragma" and any(t.kind == "id" and t.value == "dependency" for t in rest):
        raise _refuse(filename, hash_.line, shown, "`#pragma GCC dependency` reads a file")


def _check_operators(toks: list[Token], filename: str) -> None:
    """Check the file-testing operators (``__has_include``...) and ``_Pragma`` of a logical line."""
    for k, tok in enumerate(toks):
        if tok.kind != "id":
            continue
        after = toks[k + 1:k + 4]
        if tok.value in _PIECES:
            name = _PIECES[tok.value]
            raise _refuse(filename, tok.line, tok.value,
                          f"token pasting (`a##b`) could build `{name}` from it, which {_OPERATORS[name]}; "
                          "rename it")
        if tok.value in HAS_FILE:
            plain = (len(after) == 3 and after[0].value == "(" and after[1].kind == "header"
                     and after[1].text[0] == "<" and after[1].text[1:-1] in ALLOWED_HEADERS and after[2].value == ")")
            tested = not (after and after[0].value == "(") and (  # no operand: `defined` or `#ifdef` tests it
                "defined" in [t.value for t in toks[max(0, k - 2):k]]
                or (k == 2 and toks[0].value == "#" and toks[1].value in ("ifdef", "ifndef", "elifdef", "elifndef")))
            if not (tested or plain):
                raise _refuse(filename, tok.line, _spell(toks[k:k + 4]),
                              f"`{tok.value}` may test only for a standard C, C++ or CUDA header in angle "
                              f"brackets ({_ALLOWED_TEXT})")
        elif tok.value == "_Pragma":
            literal = (len(after) == 3 and after[0].value == "(" and after[1].kind == "string"
                       and after[2].value == ")")
            if not literal or re.search(r"\bdependency\b", after[1].text):
                raise _refuse(filename, tok.line, _spell(toks[k:k + 4]),
                              "`_Pragma` may take only a string literal, and none that names a dependency file")


def _check_line(toks: list[Token], filename: str) -> None:
    """Check one logical line: a directive, and any file-testing operator or ``_Pragma`` on it."""
    if toks[0].value == "#" and len(toks) > 1:
        _check_directive(toks, filename)
    _check_operators(toks, filename)


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
        for toks in logical_lines(tokenize(source, trigraphs=trigraphs, blank_splices=blank_splices)):
            _check_line(toks, filename)


#: What the compiled file's stage-one output may make a second preprocessing read again (anything else
#: that is a directive there was made by a macro).
_MARKER_FLAGS = frozenset({"1", "2", "3", "4"})
#: Where the fast reading of a preprocessor's output does not hold: a raw string, a line splice, a
#: trigraph, a universal character name, or an operator's name (its tokens need the lexer).
_NEEDS_LEXER = re.compile(r'R"|\\[ \t\f\v]*\n|\?\?|\\[uU]|_Pragma|__has_(?:include|embed)')
_DIRECTIVE_START = re.compile(r"^(?:[^\S\n]|\0)*(?:#|%:)", re.M)  # after any blanks, Unicode's too


def _stage_one_lines(output: str):
    """``(tokens, physical line)`` of the logical lines of a preprocessor's output that begin with
    ``#``, and of every line holding an operator name (``_Pragma``, ``__has_include``...), in order."""
    if _NEEDS_LEXER.search(output) is None:  # the usual case: every line a logical line, none of them split
        phys, counted = 1, 0
        for m in _DIRECTIVE_START.finditer(output):
            phys += output.count("\n", counted, m.start())
            counted = m.start()
            end = output.find("\n", m.start())
            yield tokenize(output[m.start():end if end >= 0 else len(output)]), phys
        return
    readings = [False, True] if "??" in output else [False]
    for trigraphs in readings:
        for toks in logical_lines(tokenize(output, trigraphs=trigraphs)):
            lead = next((t for t in toks if not (t.kind == "other" and t.text.isspace())), None)
            if (lead is not None and lead.value == "#") or any(t.kind == "id" and t.value in _OPERATORS for t in toks):
                yield toks, toks[0].line


def check_preprocessed(output: str, *, filename: str, compiled_name: str | None = None) -> None:
    """Refuse a preprocessor's output that a second preprocessing would read differently: what nvcc's
    second stage (cicc) reads after its first (the host compiler's ``-E``).

    A macro can expand to ``#`` (``#define H #``, then ``H include "FILE"``): the first stage prints
    `` # include "FILE"`` as text, and cicc, which preprocesses its input again, runs it, quoting the
    file in its errors. The first stage's own lines are line markers (``# 12 "file" 1``) and
    ``#pragma`` lines, each at the very start of its line (GCC writes a space before any other ``#``
    that begins a line). Everything else that would begin a directive, or name ``_Pragma`` or a
    file-testing operator, was made by the submission.

    Args:
        output: the first stage's output (``nvcc -E`` with the compile's options).
        filename: the student's file, for the message.
        compiled_name: the name the compiled copy has in the line markers (default ``filename``):
            lines of that file are reported as ``filename``'s.

    Raises:
        CompileError: ``"<filename>:<line>: `<line>` is not allowed: ..."`` (the line as the markers
            give it), without anything the named file holds.
    """
    compiled = {filename, compiled_name or filename}
    marker: tuple[str, int, int] | None = None  # (file, its line at the next physical line, that physical line)
    for toks, phys in _stage_one_lines(output):
        where_file, where_line = (marker[0], marker[1] + phys - marker[2]) if marker else (filename, phys)
        shown_file = filename if where_file.rsplit("/", 1)[-1] in compiled else where_file
        first = toks[0]
        genuine = first.flush and first.text == "#" and len(toks) > 1
        if genuine and toks[1].kind == "number" and toks[1].text.isdigit() and len(toks) > 2 \
                and toks[2].kind == "string" and toks[2].text.startswith('"') \
                and all(t.kind == "number" and t.text in _MARKER_FLAGS for t in toks[3:]):
            marker = (toks[2].text[1:-1], int(toks[1].text), phys + 1)
            continue
        if genuine and toks[1].value == "pragma":
            _check_directive(toks, shown_file)
            continue
        if first.value == "#" or (toks[0].kind == "other" and first.text.isspace()):
            raise _refuse(shown_file, where_line, _spell(toks),
                          "a macro made this a directive after preprocessing, and nvcc preprocesses its first "
                          "stage's output again; write directives as directives")
        name = next(t.value for t in toks if t.kind == "id" and t.value in _OPERATORS)
        raise _refuse(shown_file, where_line, name,
                      f"a macro made `{name}` after preprocessing, and nvcc preprocesses its first stage's output "
                      f"again, where it {_OPERATORS[name]}")
