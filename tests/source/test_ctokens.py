"""The one C preprocessing-token lexer (grader.source.ctokens): what GCC's preprocessor reads, where in the
original text each token came from, and that the directive filter and the emulator's rewrite see the
same directives through it."""

from __future__ import annotations

import pytest

from grader.source.ctokens import decode_ucns, logical_lines, tokenize


def kinds(source: str, **options) -> list[tuple[str, str]]:
    return [(t.kind, t.value) for t in tokenize(source, **options)]


def lines(source: str, **options) -> list[list[str]]:
    return [[t.value for t in line] for line in logical_lines(tokenize(source, **options))]


@pytest.mark.parametrize("source, expected", [
    ("a<<=b", [("id", "a"), ("punct", "<<="), ("id", "b")]),                    # longest match
    ("x->*p...", [("id", "x"), ("punct", "->*"), ("id", "p"), ("punct", "...")]),
    ("a<=>b", [("id", "a"), ("punct", "<=>"), ("id", "b")]),
    ("%:%: %: <: :> <% %>", [("punct", "##"), ("punct", "#"), ("punct", "["), ("punct", "]"),
                             ("punct", "{"), ("punct", "}")]),                   # digraphs
    ("v<::T>", [("id", "v"), ("punct", "<"), ("punct", "::"), ("id", "T"), ("punct", ">")]),  # C++11's <:: rule
    ("a<::>b", [("id", "a"), ("punct", "["), ("punct", "]"), ("id", "b")]),
    ("1'000'000 0x1p-3 1.e+5 .5f 1_000", [("number", "1'000'000"), ("number", "0x1p-3"), ("number", "1.e+5"),
                                          ("number", ".5f"), ("number", "1_000")]),
    ("u8\"a\" L'b' U\"c\"_s u'd'", [("string", 'u8"a"'), ("char", "L'b'"), ("string", 'U"c"_s'), ("char", "u'd'")]),
    ('"a\\"b" \'\\\'\'', [("string", '"a\\"b"'), ("char", "'\\''")]),
    ("$x é_1 @ `", [("id", "$x"), ("id", "é_1"), ("other", "@"), ("other", "`")]),
    ("\\u0069nt __has_\\u0069nclude \\U0000005fPragma", [("id", "int"), ("id", "__has_include"), ("id", "_Pragma")]),
    ("a /* x */ b // c\nd", [("id", "a"), ("id", "b"), ("id", "d")]),
])
def test_tokens_are_what_the_preprocessor_reads(source, expected):
    assert kinds(source) == expected


def test_a_raw_string_may_span_lines_and_hide_a_directive():
    toks = tokenize('s = R"end(\n#include "x"\n)" )end";\n#define A\n')
    assert [t.kind for t in toks[:3]] == ["id", "punct", "string"]
    assert toks[2].text == 'R"end(\n#include "x"\n)" )end"' and toks[3].value == ";"
    assert lines('s = R"end(\n#include "x"\n)" )end";\n#define A\n')[1] == ["#", "define", "A"]


def test_an_unterminated_literal_ends_at_its_line_and_a_comment_at_the_end():
    assert kinds("'abc\nx") == [("char", "'abc"), ("id", "x")]
    assert kinds('"abc\nx') == [("string", '"abc'), ("id", "x")]
    assert kinds("a /* no end\n#include <x>") == [("id", "a")]


@pytest.mark.parametrize("source, expected", [
    ("#inc\\\nlude <a.h>\n", [["#", "include", "<a.h>"]]),                       # a splice inside a token
    ("#define A \\   \n  1\n", [["#", "define", "A", "1"]]),                      # GCC's blank-tolerant splice
    ("x = 1; /*\n*/ #include <a.h>\n", [["x", "=", "1", ";", "#", "include", "<", "a", ".", "h", ">"]]),
    ("a\r\n#b\rc\n", [["a"], ["#", "b"], ["c"]]),                                # every line ending
])
def test_logical_lines_follow_splices_comments_and_line_endings(source, expected):
    assert lines(source) == expected


def test_without_blank_splices_a_backslash_before_blanks_is_a_stray_character():
    assert lines("#define A \\   \n1\n", blank_splices=False) == [["#", "define", "A", "\\"], ["1"]]


def test_trigraphs_only_when_asked():
    assert lines("??=include <a.h>\n??/\nx ??< ??>", trigraphs=True) == [["#", "include", "<a.h>"], ["x", "{", "}"]]
    assert lines("??=include <a.h>\n") == [["?", "?", "=", "include", "<", "a", ".", "h", ">"]]


def test_header_names_only_where_the_preprocessor_reads_them():
    assert kinds("#include <a b.h>")[-1] == ("header", "<a b.h>")
    assert kinds('#  include_next "q\\"')[-1] == ("header", '"q\\"')                # no escapes in a header name
    assert kinds("#if __has_include(<x.h>)")[-2] == ("header", "<x.h>")
    assert ("header", "<b>") not in kinds("a <b> c; #include <b>")                   # not a directive: # is not first
    assert kinds("x < y > z")[1] == ("punct", "<")


def test_offsets_and_lines_point_into_the_original_text():
    source = "\ufeffint a;\r\n  b ??= c\\\nd \\u0069\n"
    toks = tokenize(source, trigraphs=True)
    assert [(t.value, t.line, source[t.start:t.end]) for t in toks] == [
        ("int", 1, "int"), ("a", 1, "a"), (";", 1, ";"), ("b", 2, "b"), ("#", 2, "??="), ("cd", 2, "c\\\nd"),
        ("i", 3, "\\u0069")]
    assert [t.first for t in toks] == [True, False, False, True, False, False, False]
    assert [t.flush for t in toks if t.first] == [True, False]


def test_a_splice_right_after_a_token_is_not_part_of_it():
    source = "#define A(x) x\\\n + 1\n"
    toks = tokenize(source)
    assert source[toks[-3].start:toks[-3].end] == "x" and toks[-1].line == 2


def test_universal_character_names_decode_only_to_characters():
    assert decode_ucns("a\\u00e9\\U0001F600b") == "aé\U0001F600b"
    assert decode_ucns("\\ud800 \\U00110000") == "\\ud800 \\U00110000"  # a surrogate, past Unicode: left as written


def test_the_filter_and_the_rewrite_see_the_same_directives():
    """A digraph directive is a directive to both (the rewrite used to read `%:define` as code)."""
    from grader.backends.emulator.rewrite.tokens import rewrite_tokens
    from grader.source.directives import check_includes
    from grader.core.errors import CompileError

    source = "%:define SHIFT(a) ((a) >> 1)\nint x;\n"
    kinds = [t.kind for t in rewrite_tokens(source)]
    assert kinds[0] == "pp" and kinds.count("pp") == 1
    with pytest.raises(CompileError, match=r"x.cu:1: `#include"):
        check_includes("%:\\\ninclude </etc/passwd>\n", filename="x.cu")
    assert [t.kind for t in rewrite_tokens("%:\\\ninclude </etc/passwd>\n")] == ["pp"]
