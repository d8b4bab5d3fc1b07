"""What a submission may ask of the compiler: only standard and CUDA headers.

A compiler reads whatever a source file includes, and its error messages quote what it read, so
an ``#include "/path/to/private.yaml"`` could echo a private file into a student's report. The
grader therefore refuses, before compiling, any ``#include`` that is not one of the C, C++ and
CUDA headers below, written with angle brackets. Line splices and comments are undone first, so
``#/**/include`` and a directive split over lines are seen for what they are; computed includes
(``#include SOME_MACRO``) are refused.
"""

from __future__ import annotations

import re

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

_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(include_next|include|import|embed)\b[ \t]*(.*)$", re.MULTILINE)


def _logical_text(source: str) -> str:
    """The source with line splices joined and comments blanked (line breaks kept, so line numbers
    stay right), string and character literals left alone."""
    text = source.replace("\\\r\n", "\0\n").replace("\\\n", "\0\n")  # mark splices, keep the line count
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\0":  # a splice: join with the next line, remember the lost newline at the end
            i += 2
            out.append("\0")
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = len(text) if j < 0 else j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = len(text) if j < 0 else j + 2
            out.append(" " + "\n" * text.count("\n", i, j))
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while j < len(text) and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
            continue
        out.append(c)
        i += 1
    # Put the newlines of splices back at the end of each logical line.
    lines = []
    for line in "".join(out).split("\n"):
        joined = line.count("\0")
        lines.append(line.replace("\0", "") + "\n" * joined)
    return "\n".join(lines)


def check_includes(source: str, *, filename: str) -> None:
    """Refuse a submission that includes anything but the allowed headers.

    Args:
        source: the student's file as written (without the grader's part header).
        filename: its name, for the message.

    Raises:
        CompileError: naming the file, the line and the directive's kind, never the included
            path's contents, and listing what may be included.
    """
    text = _logical_text(source)
    for m in _DIRECTIVE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        kind, arg = m.group(1), m.group(2).strip()
        name = arg[1:-1] if len(arg) > 2 and arg[0] == "<" and arg[-1] == ">" else None
        if kind != "include" or name is None or name not in ALLOWED_HEADERS:
            shown = arg if len(arg) <= 60 else arg[:57] + "..."
            raise CompileError(
                f"{filename}:{line}: `#{kind} {shown}` is not allowed: a submission may include only the "
                "standard C, C++ and CUDA headers, in angle brackets (" + ", ".join(sorted(ALLOWED_HEADERS)) + ")")
