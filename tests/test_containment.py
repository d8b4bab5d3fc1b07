"""Containment (the integrity issue): directives that make a compiler read or name a file, the GPU
path's compile in the sandbox, thread bombs, and signals to other processes.

- The directive filter (:func:`grader.sandbox.check_includes`) sees every spelling of a directive the
  preprocessor sees (digraphs, form feeds, comments, splices, trigraphs, literals) and refuses
  ``#line`` with a file name and ``__has_include`` of anything but a standard header.
- The GPU path's nvcc runs in the emulator's sandbox (bubblewrap where it works, resource limits, a
  wall-clock limit, a fresh folder): these tests run the same ``nvcc --cubin -arch=sm_90`` command the
  PyCUDA backend runs, without a GPU, on attack sources the filter would refuse (it is bypassed here)
  and check that no secret token of a private file reaches the compile error, and that
  ``#include "/dev/zero"`` is stopped.
"""

from __future__ import annotations

import secrets
import shutil
import time
from pathlib import Path

import pytest

from grader.errors import CompileError
from grader.sandbox import check_includes
from tests.conftest import ROOT

ATTACKS = ROOT / "tests" / "attacks"


# -- the directive filter -----------------------------------------------------------------------------------

@pytest.mark.parametrize("source, line, shown", [
    ('%:include "/etc/hostname"\n', 1, "#include"),                      # digraph
    ('int x;\n#\f include "/etc/hostname"\n', 2, "#include"),            # form feed after the #
    ('#\vinclude "/etc/hostname"\n', 1, "#include"),                     # vertical tab
    ('# /* comment */ include "/etc/hostname"\n', 1, "#include"),
    ('#\\\ninclude "/etc/hostname"\n', 1, "#include"),                   # line splice after the #
    ('#\\   \ninclude "/etc/hostname"\n', 1, "#"),                       # GCC's blank-tolerant splice
    ('#\0include "/etc/hostname"\n', 1, "#include"),                     # NUL is a blank to GCC
    ('??=include "/etc/hostname"\n', 1, "#include"),                     # trigraph #
    ('// a comment ending in a trigraph backslash ??/\n#include "x"\n', 2, "#include"),
    ('#include /* a comment\n over two lines */ "/etc/hostname"\n', 1, "#include"),
    ("int a = 1'2'/*';\n#include \"/etc/hostname\"\n// */\n", 2, "#include"),  # a digit separator, not a char
    ('const char* s = R"(a"/*)";\n#include "/etc/hostname"\n// */\n', 2, "#include"),  # a raw string
    ('x = 1; /*\n*/\n#include "/etc/hostname"\n', 3, "#include"),
    ('#include "/dev/zero"\n', 1, "#include"),
    ('#include <cstdio> "/etc/hostname"\n', 1, "#include"),
    ('#embed "/etc/hostname"\n', 1, "#embed"),
    ('#import "/etc/hostname"\n', 1, "#import"),
    ('int x;\n#line 1 "job.json"\n#error here\n', 2, "#line"),
    ('#line 7 SOME_FILE_NAME\n', 1, "#line"),
    ('# 1 "job.json"\n', 1, "#1"),                                         # a GNU line marker
    ('#ident "x"\n', 1, "#ident"),
    ('#pragma GCC dependency "/etc/hostname"\n', 1, "#pragma"),
    ('#if __has_include("/proc/1/cwd/job.json")\n#endif\n', 1, "__has_include"),
    ('#if __has_include(</proc/1/cwd/job.json>)\n#endif\n', 1, "__has_include"),
    ('#if __has_include_next("/etc/hostname")\n#endif\n', 1, "__has_include_next"),
    ('#define HAS(f) __has_include(f)\n', 1, "__has_include"),
    ('#define HAS __has_include\n', 1, "__has_include"),
    ('#if __has_embed("/etc/hostname")\n#endif\n', 1, "__has_embed"),
    ('_Pragma("GCC dependency \\"/etc/hostname\\"")\n', 1, "_Pragma"),
    ('#define P(x) _Pragma(#x)\n', 1, "_Pragma"),
])
def test_every_spelling_of_a_directive_that_names_a_file_is_refused_with_its_line(source, line, shown):
    with pytest.raises(CompileError) as info:
        check_includes(source, filename="part1_naive.cu")
    assert str(info.value).startswith(f"part1_naive.cu:{line}: `{shown}"), str(info.value)
    assert "is not allowed" in str(info.value)


@pytest.mark.parametrize("source", [
    "#include <cstdio>\n%:include <cuda_runtime.h>\n#pragma once\n#pragma unroll 4\n",
    "#line 40\n#define A(x) (x + 1)\n#undef A\n#\n#error not reached\n",
    "#ifdef __has_include\n#if defined(__has_include) && __has_include(<cstdio>)\n#endif\n#endif\n",
    "x = 1; /*\n*/ #include \"not a directive: the line began before the comment\"\n",
    'const char* s = R"(\n#include "inside a raw string"\n)";\n',
    "int million = 1'000'000;\nconst char* q = \"??= is not a trigraph here\";\n",
    '_Pragma("unroll")\n',
])
def test_honest_directives_and_lookalikes_outside_directives_are_allowed(source):
    check_includes(source, filename="part1_naive.cu")


def test_the_reference_solutions_and_test_kernels_pass_the_filter():
    files = [*(ROOT / "reference").rglob("*.cu"), *(ROOT / "tests" / "kernels").rglob("*.cu"),
             *(ROOT / "tests" / "emulator_kernels").rglob("*.cu")]
    assert files
    for f in files:
        check_includes(f.read_text(errors="replace"), filename=f.name)
