"""Submissions may include only standard and CUDA headers: nothing private reaches a report."""

from __future__ import annotations

import pytest

from grader.source.directives import check_includes
from grader.core.errors import CompileError
from grader.grading.runner import grade
from tests.conftest import SOLUTIONS
from tests.grading.test_grading import parts_of, submission


@pytest.mark.parametrize("source", [
    "#include <cstdio>\n#include <cuda_runtime.h>\n",
    '// #include "/etc/passwd"\n',
    'const char* s = "#include \\"x\\"";\n',
    "/* #include </etc/passwd> */\n",
])
def test_standard_headers_comments_and_strings_are_allowed(source):
    check_includes(source, filename="part1_naive.cu")


@pytest.mark.parametrize("source, line", [
    ('#include "helper.cuh"\n', 1),
    ("int x;\n#include </etc/passwd>\n", 2),
    ('#include "../../config.private.yaml"\n', 1),
    ('#/**/include "/etc/hostname"\n', 1),
    ("#inc\\\nlude </etc/hostname>\n", 1),
    ('#define F "/etc/hostname"\n#include F\n', 2),
    ("#include_next <stdio.h>\n", 1),
    ("#include <../reference/solutions/part1_naive.cu>\n", 1),
])
def test_other_includes_are_refused_with_the_line(source, line):
    with pytest.raises(CompileError) as info:
        check_includes(source, filename="part1_naive.cu")
    assert str(info.value).startswith(f"part1_naive.cu:{line}: `#include")


def test_an_include_of_a_private_file_never_reaches_the_report(tmp_path, backend, small_config):
    secret = tmp_path / "private.yaml"
    secret.write_text("seed: 424242\nhidden: the-secret-words\n")
    evil = tmp_path / "evil.cu"
    evil.write_text(f'#include "{secret}"\n' + (SOLUTIONS / "part1_naive.cu").read_text())
    folder = submission(tmp_path, part1_naive=evil)
    result = grade(folder, cfg=small_config, selection=backend, parts=["part1_naive"])
    p = parts_of(result)["part1_naive"]
    assert p.status == "compile-error" and "is not allowed" in p.message
    assert "the-secret-words" not in result.to_json() and "424242" not in result.to_json()


def test_the_handout_and_the_part5_template_name_every_allowed_header_and_why_cub_is_not():
    from grader.source.directives import ALLOWED_HEADERS
    from tests.conftest import TEMPLATES

    readme = (TEMPLATES / "README.md").read_text()
    template = (TEMPLATES / "part5_single_pass.cu").read_text()
    assert {h for h in ALLOWED_HEADERS if f"`<{h}>`" not in readme} == set()
    assert {h for h in ALLOWED_HEADERS if h not in template.replace(",", " ").split()} == set()
    for text in (readme, template):
        assert "cub/cub.cuh" in text and "decoupled look-back" in text and "__CUDA_ARCH__" in text
    with pytest.raises(CompileError, match="cub/cub.cuh"):
        check_includes("#include <cub/cub.cuh>\n", filename="part5_single_pass.cu")
