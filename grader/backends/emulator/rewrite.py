"""The emulator's source rewrite: what the prelude's macros cannot express.

Every ``__shared__`` declaration becomes storage in the running block's shared-memory arena:

- function scope, ``__shared__ T name[A][B];`` ->
  ``typedef T __sg_T3[A][B]; static ::__sg_slot __sg_S3 = {...};
  __sg_T3 &name = *reinterpret_cast<__sg_T3 *>(__sg_shared_at(&__sg_S3, sizeof(__sg_T3), <align>, <element bytes>));``
  (the first thread of a block to reach the slot allocates it; the others get the same address;
  the slot is a function-local static, so each template instantiation has its own);
- ``extern __shared__ T name[];`` -> a reference to the arena's dynamic part
  (``__sg_dyn_shared_at("name", <element bytes>)``), at function or file scope;
- file scope -> an accessor function ``__sg_ref3()`` defined in place, and every later use of
  ``name`` (also inside ``#define`` bodies) replaced by ``(__sg_ref3())``.

``__shared__`` may stand anywhere among the declaration specifiers, next to ``static``,
``volatile``, ``extern``, ``__device__``, ``__align__(n)``, ``alignas(n)`` or
``__attribute__((aligned(n)))``; several declarators are allowed. Comments, string and character
literals are skipped. Every line break is kept (a declaration spanning lines is rewritten on its
first line and followed by the same number of line breaks), so ``#line`` markers and compiler
diagnostics still point at the student's file and line.

Every shift (``<<``, ``>>``, ``<<=``, ``>>=``, in code and in ``#define`` bodies) gets its left
operand wrapped in the prelude's ``__sg_sh`` / ``__sg_sha`` with the operator's file and line, so
that an amount of the operand's width or more gives PTX's clamped value, as on a GPU, with a warning
(:func:`find_shifts`).

Every ``return`` of a ``__global__`` function (it ends the thread) and every ``break`` and
``continue`` of a ``__global__`` or ``__device__`` function (not a ``constexpr`` one, whose calls
may be constant-evaluated) tells the runtime where it is: ``break;`` ->
``{ __sg_jump_at(1, "f.cu", 19); break; }``, so that a barrier divergence, or threads that exited while
others wait at a barrier, can name the statement that sent them apart.

The inserted code names the runtime only through the prelude's ``__sg_*_at`` macros: it follows the
lockdown header (:mod:`.lockdown`), after which the runtime's own names are compile errors.

Public API: :func:`rewrite_source`, :func:`find_shifts`.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Callable

from grader.backends.emulator.lockdown import ASM_KEYWORDS, REFUSED_ATTRIBUTES
from grader.backends.emulator.ptx import ptx_statement
from grader.ctokens import Token, logical_lines, tokenize
from grader.errors import CompileError

__all__ = ["rewrite_source", "RewriteResult", "find_definitions", "find_shifts"]

#: Blanks, comments and line splices after a directive's last token, up to the line break ending it.
_DIRECTIVE_TAIL = re.compile(r"(?:[ \t\f\v\0]+|/\*.*?\*/|//[^\n]*|\\[ \t\f\v]*(?:\r\n|\r|\n))*", re.S)
#: The lexer's kinds as the rewrite names them (a header name only occurs inside a directive).
_KINDS = {"id": "id", "number": "num", "string": "str", "char": "chr", "header": "str", "punct": "punct",
          "other": "punct"}

#: Names of the emulator's runtime (its memory-check hooks, entry points and ABI): a submission that
#: defines or names one could switch the checks off, so it is refused.
_RESERVED_RE = re.compile(r"__tsan_\w*|__ubsan_\w*|__asan_\w*|__sanitizer_\w*|__sg_\w*|__SG_\w*"
                          r"|sg_(?:abi_version|kernel_\w+|trim|take_output|findings|launch\w*|alloc|result)")
#: Attributes that turn the instrumentation (and so the emulator's checks) off for a function.
_UNCHECKED_ATTRIBUTES = {"no_sanitize", "__no_sanitize__", "no_sanitize_thread", "__no_sanitize_thread__",
                         "no_sanitize_undefined", "__no_sanitize_undefined__", "disable_sanitizer_instrumentation",
                         "__disable_sanitizer_instrumentation__"}

#: What may stand between ``asm`` and its ``(``.
_ASM_QUALIFIERS = {"volatile", "__volatile__", "__volatile", "inline", "__inline", "__inline__"}
#: Jump statements reported to the runtime (the kinds of sg_abi.h's __SG_J_*).
_JUMPS = {"return": 0, "break": 1, "continue": 2}
#: Calls whose result is the lanes that execute them together (_close_am_block numbers them).
_ACTIVEMASK = {"__activemask", "coalesced_threads"}
_SPEC_DROP = {"__shared__", "static", "__device__", "register", "inline", "__forceinline__"}
_PTR_OPS = {"*", "&", "const", "volatile", "__restrict__", "__restrict", "restrict"}
_STMT_STOP = {";", "{", "}", ":", "else", "do"}
_ATTRIBUTE_KEYWORDS = {"__align__", "alignas", "__attribute__", "__declspec"}
_KEYWORDS = {
    "int", "unsigned", "signed", "char", "short", "long", "float", "double", "bool", "void", "auto",
    "const", "volatile", "struct", "class", "union", "enum", "typename", "template", "operator",
    "sizeof", "alignof", "decltype", "return", "if", "for", "while", "switch", "case", "default",
}


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


@dataclass
class RewriteResult:
    """The rewritten text and what was rewritten.

    Attributes:
        text: the source with every ``__shared__`` declaration replaced; same number of lines.
        shared: ``(file, line, name, kind)`` per rewritten variable, kind ``"static"`` or
            ``"dynamic"``, in source order.
        shifts: ``(file, line, operator)`` per shift handed to the prelude's clamping helpers
            (``<<``, ``>>``, ``<<=``, ``>>=``), code first, then ``#define`` bodies, each in source order.
        sum_shifts: ``(file, line) -> (operator, sign)`` for the lines of code with a shift whose
            amount has a ``+`` or ``-`` outside brackets (``n >> 5 + n``: check the precedence), or
            that use a macro whose body has one; every such shift, handed to the helpers or not.
    """

    text: str
    shared: list[tuple[str, int, str, str]] = field(default_factory=list)
    shifts: list[tuple[str, int, str]] = field(default_factory=list)
    sum_shifts: dict[tuple[str, int], tuple[str, str]] = field(default_factory=dict)


class _Unsupported(Exception):
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
        phys = self.physical_line(offset)
        start, file, logical = self._marks[0]
        for s, f, lg in self._marks:
            if s <= phys:
                start, file, logical = s, f, lg
        return file, logical + (phys - start)


def _tokenize(text: str) -> list[_Tok]:
    """The rewrite's tokens of ``text`` (:func:`grader.ctokens.tokenize`, as GCC reads it): a directive
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


# -- shifts: PTX clamps the amount, C++ leaves it undefined ----------------------------------------
# Every binary `<<` / `>>` and compound `<<=` / `>>=` of the source becomes a call of the prelude's
# helpers around its LEFT operand only:  `a >> b`  ->  `__sg_sh(a, "f.cu", 12, 2) >> b`  (and
# `x <<= n` -> `__sg_sha(x, "f.cu", 12, 0) <<= n`). The helper returns a proxy whose operator
# computes the shift as PTX does (0, or -1 for a negative value shifted right, when the amount is
# the width or more) and reports it; the right operand is left to the compiler, so only the left
# operand's extent has to be found here. Where that extent is not certain (a `>` that may close a
# template, brackets that do not match...), the shift is left alone: -fsanitize=shift-exponent
# still reports it (kind undefined-shift). A proxy that lands inside a wider expression (a macro
# body's shift whose operand continues at the use site) converts to its value: the shift is then
# the built-in one, as written.

#: Flags passed to the helpers (the runtime's message depends on them).
SHIFT_PLUS, SHIFT_MINUS, SHIFT_COMPOUND = 2, 4, 8
#: Keywords that end an operand (scanning leftwards) or cannot start one.
_SHIFT_STOP_KW = {"return", "case", "throw", "else", "do", "goto", "default", "co_return", "co_yield", "co_await",
                  "new", "delete", "if", "while", "for", "switch", "catch", "typedef", "using", "operator",
                  "template", "typename", "class", "struct", "union", "enum", "namespace", "public", "private",
                  "protected", "static", "extern", "inline", "constexpr", "const", "volatile", "register",
                  "static_assert", "asm", "__asm__", "virtual", "friend", "explicit", "mutable"}
#: Keywords that cannot end an operand (a `>>` after them closes templates: `A<B<int>>`).
_TYPE_KW = {"int", "unsigned", "signed", "char", "short", "long", "float", "double", "bool", "void", "auto",
            "const", "volatile", "wchar_t", "char16_t", "char32_t", "char8_t", "size_t"}
#: Keywords that may stand just before a name in an expression (the shift is left alone there).
_NAME_BEFORE_KW = {"template", "typename", "operator", "class", "struct", "union", "enum"}
#: Statement keywords whose parenthesised head is not part of an operand (`if (c) x <<= 1`).
_HEAD_KW = {"if", "while", "for", "switch", "catch"}
_UNARY_OR_ADDITIVE = {"+", "-", "*", "/", "%", "!", "~", "#", ".", "->", "::"}
_OPERAND_START_PUNCT = {"(", "+", "-", "!", "~", "*", "&"}


def _glued(toks: list[_Tok], k: int) -> bool:
    """Whether token k follows token k - 1 with no gap (so `<` `<` is `<<`)."""
    return k > 0 and toks[k].start == toks[k - 1].end


def _pt(toks: list[_Tok], k: int, lo: int, hi: int) -> str:
    """Punctuation text of token k within [lo, hi), or ''."""
    return toks[k].text if lo <= k < hi and toks[k].kind == "punct" else ""


def _operand_end(toks: list[_Tok], k: int, lo: int) -> bool:
    """Whether token k can end an operand (so a `<<` / `>>` after it is a binary operator)."""
    if k < lo:
        return False
    t = toks[k]
    if t.kind == "id":
        return t.text not in _SHIFT_STOP_KW and t.text not in _TYPE_KW
    if t.kind in ("num", "str", "chr"):
        return True
    if t.kind == "punct":
        if t.text in (")", "]"):
            return True
        if t.text in ("+", "-") and k - 1 >= lo and toks[k - 1].text == t.text and _glued(toks, k):
            return _operand_end(toks, k - 2, lo)  # x++ << 1
    return False


def _operand_start(toks: list[_Tok], k: int, hi: int) -> bool:
    """Whether token k can start an operand (`::` is left out: `A<B<int>>::type`)."""
    if k >= hi:
        return False
    t = toks[k]
    if t.kind == "id":
        return t.text not in _SHIFT_STOP_KW or t.text in ("sizeof", "alignof")
    if t.kind in ("num", "str", "chr"):
        return True
    return t.kind == "punct" and t.text in _OPERAND_START_PUNCT


@dataclass(frozen=True)
class _Shift:
    op: int  # first token of the operator
    last: int  # last token of the operator (the `=` of a compound one)
    text: str  # <<, >>, <<=, >>=
    start: int  # first token of the left operand
    flags: int


def _find_shift_ops(toks: list[_Tok], lo: int, hi: int) -> list[tuple[int, int, str]]:
    """The shift operators among toks[lo:hi]: ``(first, last, text)``, in order.

    `<` `<` and `>` `>` glued together are a shift when an operand ends before them and one starts
    after them; `>>` while two `<` that may open template argument lists are open at the same
    bracket depth closes them instead; runs of three (`<<<` launch syntax, `>>>`) and
    `operator<<` are never shifts.
    """
    ops: list[tuple[int, int, str]] = []
    cands: list[tuple[int, int]] = []  # (index, bracket depth) of `<` that may open a template
    depth = 0
    j = lo
    while j < hi:
        t = toks[j]
        if t.kind != "punct":
            j += 1
            continue
        w = t.text
        if w in ("(", "[", "{"):
            if w == "{":
                cands = [c for c in cands if c[1] < depth]
            depth += 1
        elif w in (")", "]", "}"):
            cands = [c for c in cands if c[1] < depth]
            depth = max(0, depth - 1)
            if w == "}":
                cands = [c for c in cands if c[1] < depth]
        elif w == ";":
            cands = [c for c in cands if c[1] < depth]
        elif w in ("<", ">"):
            run = j
            while run + 1 < hi and _pt(toks, run + 1, lo, hi) == w and _glued(toks, run + 1):
                run += 1
            n = run - j + 1
            eq = _pt(toks, run + 1, lo, hi) == "=" and _glued(toks, run + 1)
            after = run + 1 + (1 if eq else 0)
            here = [c for c in cands if c[1] == depth]
            if n == 1:
                if w == "<" and not eq and j > lo and toks[j - 1].kind == "id" and toks[j - 1].text != "operator":
                    cands.append((j, depth))
                elif w == ">" and not eq and here:
                    cands.remove(here[-1])
            elif n == 2:
                if w == ">" and len(here) >= 2:
                    cands.remove(here[-1])
                    cands.remove(here[-2])
                elif (_operand_end(toks, j - 1, lo) and _operand_start(toks, after, hi)
                      and not (j - 1 >= lo and toks[j - 1].text == "operator")):
                    ops.append((j, after - 1, w * 2 + ("=" if eq else "")))
            elif w == ">":
                for c in here[-n:]:
                    cands.remove(c)
            j = after
            continue
        j += 1
    return ops


def _template_open(toks: list[_Tok], j: int, lo: int) -> int:
    """Index of the name before the `<` matching the `>` at toks[j] (a template-id), or -1."""
    count = 0
    k = j
    while k >= lo:
        t = toks[k]
        if t.kind == "pp":
            return -1
        if t.kind == "punct":
            w = t.text
            if w in (")", "]"):
                m = _match_backward(toks, k, lo)
                if m < 0:
                    return -1
                k = m - 1
                continue
            if w == ">":
                count += 1
            elif w == "<":
                count -= 1
                if count == 0:
                    return k - 1 if k - 1 >= lo and toks[k - 1].kind == "id" else -1
            elif w in (";", "{", "}", "(", "[", "=", "?"):
                return -1
        k -= 1
    return -1


def _left_operand(toks: list[_Tok], op: int, lo: int, chain: dict[int, int], lasts: set[int]) -> int:
    """First token of the left operand of the shift whose operator starts at toks[op], or -1
    where it cannot be told for certain.

    The operand is an additive-expression: it extends leftwards over names, literals, bracketed
    groups, unary and additive/multiplicative operators, member access, casts, template-ids
    followed by `(` or `::`, and earlier shifts of the same chain (``chain``: last token of a
    shift operator -> its first; ``lasts``: the last tokens of every binary shift operator, a shift
    of the chain that could not be delimited among them); it stops at anything of lower precedence.
    """
    j = op - 1
    start = op
    nxt = ""  # what was included last (leftmost): atom, paren, sub, op, ::
    while j >= lo:
        t = toks[j]
        if t.kind == "pp":
            break
        if t.kind == "id":
            if t.text in _NAME_BEFORE_KW:
                return -1  # T::template f<int>() << 1: the keyword belongs to the operand
            if t.text in ("__VA_ARGS__", "__VA_OPT__"):
                return -1  # arguments with commas would not make one argument of the helper
            if t.text in _SHIFT_STOP_KW:
                break
            if nxt == "atom" and t.text not in ("sizeof", "alignof"):
                break
            start, nxt, j = j, "atom", j - 1
            continue
        if t.kind in ("num", "chr", "str"):
            if nxt in ("atom", "paren") and not (t.kind == "str" and toks[start].kind == "str"):
                break
            start, nxt, j = j, "atom", j - 1
            continue
        w = t.text
        if j in chain:  # an earlier shift of the chain: a << b >> c is (a << b) >> c
            start, nxt, j = chain[j], "op", chain[j] - 1
            continue
        if j in lasts:
            return -1  # an earlier shift of the chain that could not be delimited
        if w in (")", "]"):
            m = _match_backward(toks, j, lo)
            if m < 0:
                return -1
            before = toks[m - 1] if m - 1 >= lo else None
            if before is not None and before.kind == "id" and before.text in _HEAD_KW:
                break  # if (c) x <<= 1
            if nxt == "atom":
                if w == "]" or _operand_end(toks, m - 1, lo):
                    break  # f(a) x, a[i] x: not one operand
            start, nxt, j = m, ("paren" if w == ")" else "sub"), m - 1
            continue
        if w == ">":
            if nxt not in ("paren", "::"):
                break  # a relational >
            k = _template_open(toks, j, lo)
            if k < 0:
                return -1
            start, nxt, j = k + 1, "tmpl", k
            continue
        if w in _UNARY_OR_ADDITIVE:
            start, nxt, j = j, ("::" if w == "::" else "op"), j - 1
            continue
        break
    if start >= op or toks[start].text in (".", "->") and toks[start].kind == "punct":
        return -1
    return start


def _amount_flags(toks: list[_Tok], k: int, hi: int) -> int:
    """SHIFT_PLUS / SHIFT_MINUS when the right operand starting at toks[k] has a binary `+` / `-`
    outside brackets (`n >> 5 + n`: precedence is the likely mistake)."""
    flags = 0
    prev_operand = False
    j = k
    while j < hi:
        t = toks[j]
        if t.kind == "pp":
            break
        if t.kind != "punct":
            if t.kind == "id" and t.text in _SHIFT_STOP_KW and t.text not in ("sizeof", "alignof"):
                break
            prev_operand, j = True, j + 1
            continue
        w = t.text
        if w in ("(", "["):
            m = _match_forward(toks, j, hi)
            if m < 0:
                break
            prev_operand, j = True, m + 1
            continue
        if w in ("+", "-"):
            if j + 1 < hi and toks[j + 1].text == w and _glued(toks, j + 1):
                j += 2  # ++ / --
                continue
            if prev_operand:
                flags |= SHIFT_PLUS if w == "+" else SHIFT_MINUS
            prev_operand, j = False, j + 1
            continue
        if w in ("*", "/", "%", "!", "~", "#", ".", "->", "::"):
            prev_operand, j = False, j + 1
            continue
        break
    return flags


def find_shifts(toks: list[_Tok], lo: int = 0, hi: int | None = None) -> list[_Shift]:
    """The shifts of toks[lo:hi] whose left operand could be delimited for certain, in order."""
    hi = len(toks) if hi is None else hi
    ops = _find_shift_ops(toks, lo, hi)
    chain = {last: first for first, last, text in ops if "=" not in text}
    lasts = set(chain)
    found: list[_Shift] = []
    for first, last, text in ops:
        start = _left_operand(toks, first, lo, chain, lasts)
        if start < 0:
            chain.pop(last, None)  # a later shift of its chain cannot be delimited either
            continue
        flags = SHIFT_COMPOUND if text.endswith("=") else _amount_flags(toks, last + 1, hi)
        found.append(_Shift(first, last, text, start, flags))
    return found


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


def _has_low_precedence(toks: list[_Tok], lo: int, hi: int) -> bool:
    """Whether toks[lo:hi] has, outside brackets, an operator of lower precedence than a shift
    (relational, equality, bitwise, logical, conditional, assignment, comma)."""
    for k in _depth0(toks, lo, hi):
        w = toks[k].text if toks[k].kind == "punct" else ""
        if w in ("=", "&", "|", "^", "?", ":", ","):
            return True
        if w in ("<", ">") and not (_pt(toks, k - 1, lo, hi) == w and _glued(toks, k)) and not (
                _pt(toks, k + 1, lo, hi) == w and _glued(toks, k + 1)):
            return True
    return False


def _invocations(toks: list[_Tok], lo: int, names: set[str]) -> list[tuple[str, list[tuple[int, int]]]]:
    """Function-like macro invocations ``NAME(args)`` of toks[lo:] for NAME in ``names``: the name
    and the token range of each argument."""
    found: list[tuple[str, list[tuple[int, int]]]] = []
    for k in range(lo, len(toks) - 1):
        if toks[k].kind != "id" or toks[k].text not in names or _pt(toks, k + 1, lo, len(toks)) != "(":
            continue
        close = _match_forward(toks, k + 1, len(toks))
        if close < 0:
            continue
        args: list[tuple[int, int]] = []
        start = k + 2
        for c in _depth0(toks, k + 2, close) + [close]:
            if c == close or toks[c].text == ",":
                args.append((start, c))
                start = c + 1
        found.append((toks[k].text, args))
    return found


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


def _shift_wraps(shifts: list[_Shift], site: Callable[[_Shift], str]
                 ) -> tuple[dict[int, list[str]], dict[int, str]]:
    """Per token: the helper calls that open before it (outermost first) and the text after it."""
    prefix: dict[int, list[tuple[int, str]]] = {}
    suffix: dict[int, str] = {}
    for s in shifts:
        helper = "__sg_sha(" if s.text.endswith("=") else "__sg_sh("
        prefix.setdefault(s.start, []).append((s.op, helper))
        suffix[s.op - 1] = suffix.get(s.op - 1, "") + ", " + site(s) + ")"
    return ({k: [h for _, h in sorted(v, reverse=True)] for k, v in prefix.items()}, suffix)


class _Rewriter:
    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.loc = _Locator(text, filename)
        self.toks = _tokenize(text)
        self.edits: list[tuple[int, int, str]] = []  # (start, end, replacement without newlines)
        self.overrides: dict[int, str] = {}  # token index -> replacement text
        self.filename = filename
        # shifts (see find_shifts): helper calls opened before a token, and closed after one
        self.shift_prefix: dict[int, list[str]] = {}
        self.shift_suffix: dict[int, str] = {}
        # macros an #if may expand, or whose arguments would change a shift's operand: their shifts
        # stay built-in
        self.if_macros: set[str] = set()
        self.file_names: dict[str, str] = {}  # file-scope shared name -> accessor function name
        # per open brace, the jump statements reported (_jump): set() or {"break", "continue"}, with
        # "return" in a kernel
        self.jumps_on: list[set[str]] = []
        # __activemask() calls (_close_am_block): how many so far, and per open block (a brace, or
        # the brace-less statement of an `if`, `else`, `for`, `while`) the count at its start, whether
        # it is a loop's body, whether it is brace-less, and its calls' `(` tokens with their indices
        self.am_count = 0
        self.am_blocks: list[tuple[int, bool, bool, list[tuple[int, int]]]] = [(0, False, False, [])]
        self.am_bodies: dict[int, bool] = {}  # first token of a brace-less if/for/while body -> a loop's
        self.next_id = 0
        self.result = RewriteResult(text="")

    # -- helpers ---------------------------------------------------------------------------
    def join(self, lo: int, hi: int) -> str:
        """Tokens [lo, hi) as text: one space where the source had a gap, none where it had none."""
        out: list[str] = []
        for k in range(lo, hi):
            if k > lo and self.toks[k].start > self.toks[k - 1].end:
                out.append(" ")
            out.append(self.tok_text(k))
        return "".join(out)

    def tok_text(self, k: int) -> str:
        """Token k as rewritten: its override (or text), inside the shift helpers wrapped around it."""
        text = self.overrides.get(k, self.toks[k].src)
        if k in self.shift_prefix or k in self.shift_suffix:
            text = "".join(self.shift_prefix.get(k, ())) + text + self.shift_suffix.get(k, "")
        return text

    def p(self, k: int) -> str:
        """Punctuation text of token k, or '' when it is not punctuation."""
        return self.toks[k].text if 0 <= k < len(self.toks) and self.toks[k].kind == "punct" else ""

    # -- main loop ---------------------------------------------------------------------------
    def run(self) -> RewriteResult:
        toks = self.toks
        scopes: list[str] = []  # "ns", "class", "func", "init"
        head = 0  # first token of the current statement head (at brace level)
        paren = 0
        self._wrap_shifts()
        i = 0
        while i < len(toks):
            t = toks[i]
            if i in self.am_bodies:  # a brace-less body: a block of its own for __activemask()
                self.am_blocks.append((self.am_count, self.am_bodies.pop(i), True, []))
            if t.kind == "pp":
                self.loc.directive(t)
                for part in t.parts:
                    if part.kind == "id":
                        self._refuse_reserved(part.value, part.start)
                if len(t.parts) > 2 and t.parts[1].value in ("define", "undef") and t.parts[2].value in REFUSED_ATTRIBUTES:
                    raise _Unsupported(f"`#{t.parts[1].value} {t.parts[2].value}`: the emulator keeps this attribute "
                                       "out of student code (it binds a symbol to a name of its own choosing, which "
                                       "could switch the memory checks off); remove it", t.start, "not allowed")
                self._rewrite_define(i)
                i += 1
                continue
            if t.kind == "id":
                self._refuse_reserved(t.text, t.start)
            if t.kind == "id" and t.text in ASM_KEYWORDS and "func" in scopes and self._statement_starts(i):
                after = self._asm(i)
                if after is not None:
                    i = head = after
                    paren = 0
                    continue
            if t.kind == "id" and t.text == "__shared__":
                in_func = any(s == "func" for s in scopes)
                if not in_func and any(s in ("class", "init") for s in scopes):
                    raise _Unsupported("a __shared__ declaration inside a class or an initializer", t.start)
                i = self._declaration(i, function_scope=in_func)
                head, paren = i, 0
                continue
            if t.kind == "id" and self.jumps_on and t.text in self.jumps_on[-1]:
                self._jump(i)
            if t.kind == "id" and t.text in _ACTIVEMASK and self.p(i + 1) == "(" and self.p(i + 2) == ")":
                self.am_blocks[-1][3].append((i + 1, self.am_count))
                self.am_count += 1
            if t.kind == "id" and t.text == "else" and self.p(i + 1) != "{":
                self.am_blocks.append((self.am_count, False, True, []))
            if t.kind == "id" and t.text in ("if", "for", "while", "switch") and self.p(i + 1) == "(":
                close = _match_forward(toks, i + 1, len(toks))
                if close > 0 and self.p(close + 1) not in ("{", ";"):
                    self.am_bodies[close + 1] = t.text != "if" and t.text != "switch"
            if t.kind == "id" and t.text in self.file_names:
                prev = self.p(i - 1)
                accessor = self.file_names[t.text]
                if prev == "::":  # ns::name -> ns::__sg_refN()
                    self.overrides[i] = f"{accessor}()"
                elif prev not in (".", "->"):
                    self.overrides[i] = f"({accessor}())"
            txt = t.text if t.kind == "punct" else ""
            if txt == "(":
                paren += 1
            elif txt == ")":
                paren = max(0, paren - 1)
            elif txt == ";" and paren == 0:
                head = i + 1
                while self.am_blocks[-1][2]:  # the end of brace-less statements
                    self._close_am_block()
            elif txt == "{":
                self.am_blocks.append((self.am_count, self._loop_body(i), False, []))
                kind = self._classify(head, i, scopes)
                if kind == "func" and "func" not in scopes:  # a function's body
                    words = {w.text for w in toks[head:i] if w.kind == "id"}
                    on = set() if words & {"constexpr", "consteval"} else {
                        k for k in _JUMPS if "__global__" in words or ("__device__" in words and k != "return")}
                    self.jumps_on.append(on)
                else:
                    self.jumps_on.append(self.jumps_on[-1] if self.jumps_on and kind == "func" else set())
                scopes.append(kind)
                head, paren = i + 1, 0
            elif txt == "}":
                if scopes:
                    scopes.pop()
                    self.jumps_on.pop()
                while len(self.am_blocks) > 1 and self.am_blocks[-1][2]:
                    self._close_am_block()
                if len(self.am_blocks) > 1:
                    self._close_am_block()
                if not (i + 1 < len(toks) and toks[i + 1].kind == "id" and toks[i + 1].text == "else"):
                    while self.am_blocks[-1][2]:  # brace-less statements end with this block
                        self._close_am_block()
                head, paren = i + 1, 0
            i += 1
        while self.am_blocks:
            self._close_am_block()
        return self._apply()

    def _loop_body(self, brace: int) -> bool:
        """Whether the ``{`` at toks[brace] opens the body of a ``for``, ``while`` or ``do``."""
        if brace > 0 and self.toks[brace - 1].kind == "id" and self.toks[brace - 1].text == "do":
            return True
        if brace == 0 or self.p(brace - 1) != ")":
            return False
        k = _match_backward(self.toks, brace - 1, 0)
        return k > 0 and self.toks[k - 1].kind == "id" and self.toks[k - 1].text in ("for", "while")

    def _close_am_block(self) -> None:
        """Close the innermost block of __activemask() calls: each call of it gets its place
        (``__activemask(ord, first, last, loop)``: its index among the file's calls, the indices of the
        block's first and last, whether the block is a loop's body), from which the runtime tells
        which calls a lane reaches a call from without leaving its block (rt_blocks.inc,
        resolve_activemask: a GPU reconverges the warp there)."""
        first, loop, _, calls = self.am_blocks.pop()
        for paren, ord_ in calls:
            self.overrides[paren] = f"({ord_}, {first}, {self.am_count - 1}, {int(loop)}"
    def _statement_starts(self, i: int) -> bool:
        """Whether a statement starts at ``toks[i]`` (after ``;``, a brace, a label's ``:``, ``else``,
        ``do``, or the condition of an ``if``, ``for``, ``while`` or ``switch``): not an asm label of a
        declaration (``void f() __asm__("name");``)."""
        prev = i - 1
        while prev >= 0 and self.toks[prev].kind == "pp":
            prev -= 1
        if prev < 0 or self.p(prev) in (";", "{", "}", ":") or self.toks[prev].text in ("else", "do"):
            return True
        if self.p(prev) != ")":
            return False
        opened = _match_backward(self.toks, prev, 0)
        return opened > 0 and self.toks[opened - 1].text in ("if", "for", "while", "switch")

    def _asm(self, i: int) -> int | None:
        """An ``asm`` statement at ``toks[i]`` whose inline PTX the emulator runs
        (:func:`.ptx.ptx_statement`), replaced on its first line by what does the same; the index
        after its ``;``. None where it is not one (left as written, for the lockdown to refuse)."""
        toks, j = self.toks, i + 1
        while j < len(toks) and toks[j].kind == "id" and toks[j].text in _ASM_QUALIFIERS:
            j += 1
        if self.p(j) != "(":
            return None
        close = _match_forward(toks, j, len(toks))
        if close < 0 or self.p(close + 1) != ";":
            return None
        sections: list[list[int]] = [[]]
        depth = 0
        for k in range(j + 1, close):
            w = self.p(k)
            if toks[k].kind == "pp":
                return None
            if w in ("(", "[", "{"):
                depth += 1
            elif w in (")", "]", "}"):
                depth -= 1
            if depth == 0 and w in (":", "::"):
                sections.extend([] for _ in w)
                continue
            sections[-1].append(k)
        if len(sections) > 4 or not sections[0] or any(toks[k].kind != "str" for k in sections[0]):
            return None
        template = [_c_literal(toks[k].text) for k in sections[0]]
        if None in template:
            return None
        names: dict[str, int] = {}
        operands: list[list[tuple[str, str]]] = []
        for section in (sections[1:3] + [[], []])[:2]:
            found = self._asm_operands(section, names, base=sum(len(o) for o in operands))
            if found is None:
                return None
            operands.append(found)
        statement = ptx_statement("".join(template), operands[0], operands[1], names)
        if statement is None:
            return None
        self.edits.append((toks[i].start, toks[close + 1].end, statement))
        return close + 2

    def _asm_operands(self, section: list[int], names: dict[str, int], *, base: int) -> list[tuple[str, str]] | None:
        """``(constraint, expression)`` of each operand of an ``asm`` section (token indices), an
        operand's ``[name]`` recorded in ``names`` with its index (from ``base``); None where one
        does not read ``[name] "constraint" (expression)``."""
        toks, out = self.toks, []
        pieces: list[list[int]] = [[]]
        depth = 0
        for k in section:
            w = self.p(k)
            depth += w in ("(", "[", "{")
            depth -= w in (")", "]", "}")
            if w == "," and depth == 0:
                pieces.append([])
            else:
                pieces[-1].append(k)
        for piece in (p for p in pieces if p):
            if len(piece) >= 3 and self.p(piece[0]) == "[" and self.p(piece[2]) == "]" and toks[piece[1]].kind == "id":
                names[toks[piece[1]].text] = base + len(out)
                piece = piece[3:]
            if len(piece) < 3 or toks[piece[0]].kind != "str" or self.p(piece[1]) != "(" or self.p(piece[-1]) != ")" \
                    or _match_forward(toks, piece[1], piece[-1] + 1) != piece[-1]:
                return None
            constraint = _c_literal(toks[piece[0]].text)
            if constraint is None:
                return None
            out.append((constraint, self.join(piece[1] + 1, piece[-1])))
        return out

    def _jump(self, i: int) -> None:
        """Report the jump statement at toks[i] (``return``, ``break``, ``continue``) to the runtime:
        the statement becomes a block that first calls ``__sg_jump_at(kind, file, line)`` (the
        prelude's name for ``__sg_jump``). Left alone where its ``;`` is not found for certain (a
        directive or an unbalanced bracket before it)."""
        toks, j, depth = self.toks, i + 1, 0
        while j < len(toks) and toks[j].kind != "pp":
            w = self.p(j)
            if w and w in "([{":
                depth += 1
            elif w and w in ")]}":
                depth -= 1
                if depth < 0:
                    return
            elif w == ";" and depth == 0:
                break
            j += 1
        else:
            return
        if toks[i].text != "return" and j != i + 1:
            return
        file, line = self.loc.locate(toks[i].start)
        self.overrides[i] = f"{{ __sg_jump_at({_JUMPS[toks[i].text]}, {_c_string(file)}, {line}); {toks[i].text}"
        self.overrides[j] = "; }"

    def _refuse_reserved(self, word: str, offset: int) -> None:
        """Raise when ``word`` (an identifier of the student's code) belongs to the runtime."""
        if _RESERVED_RE.fullmatch(word):
            what = f"`{word}`: this name is reserved for the emulator's runtime (its memory-check hooks); rename it"
        elif word in _UNCHECKED_ATTRIBUTES:
            what = f"`{word}`: it would turn off the emulator's memory checks; remove it"
        else:
            return
        if not self.loc.locate(offset)[0].startswith("<scangrade"):
            raise _Unsupported(what, offset, "not allowed")

    def _classify(self, head: int, brace: int, scopes: list[str]) -> str:
        if any(s == "func" for s in scopes):
            return "func"
        words = [t.text for t in self.toks[head:brace] if t.kind != "pp"]
        if "namespace" in words:
            return "ns"
        if len(words) >= 2 and words[-2] == "extern" and self.toks[brace - 1].kind == "str":
            return "ns"
        if "operator" in words:
            return "func"
        for w in words:
            if w == "(":
                return "func"
            if w == "=":
                return "init"
        if any(w in ("struct", "class", "union", "enum") for w in words):
            return "class"
        return "init" if words else "ns"

    # -- one declaration ---------------------------------------------------------------------
    def _declaration(self, i: int, *, function_scope: bool) -> int:
        toks = self.toks
        shared_tok = toks[i]
        # statement start
        s = i - 1
        while s >= 0:
            t = toks[s]
            if t.kind == "pp" or (t.kind in ("punct", "id") and t.text in _STMT_STOP):
                break
            if t.kind == "punct" and t.text == ")":
                m = _match_backward(toks, s, 0)
                if m < 1:
                    break
                kw = toks[m - 1].text
                if m >= 2 and kw == "(" and toks[m - 2].text == "__attribute__":
                    s = m - 3
                    continue
                if m >= 1 and kw in _ATTRIBUTE_KEYWORDS:
                    s = m - 2
                    continue
                break
            if t.kind == "punct" and t.text == "]" and self.p(s - 1) == "]":
                m = _match_backward(toks, s, 0)
                if m >= 0:
                    s = m - 1
                    continue
                break
            s -= 1
        s += 1
        # statement end
        e = i + 1
        while e < len(toks):
            t = toks[e]
            if t.kind == "pp":
                raise _Unsupported("a preprocessor directive inside a __shared__ declaration", t.start)
            txt = t.text if t.kind == "punct" else ""
            if txt in ("(", "["):
                m = _match_forward(toks, e, len(toks))
                if m < 0:
                    raise _Unsupported("an unbalanced __shared__ declaration", shared_tok.start)
                e = m + 1
                continue
            if txt in ("{", "}"):
                raise _Unsupported("a __shared__ declaration with braces (an initializer or an unnamed type)",
                                   shared_tok.start)
            if txt == ";":
                break
            e += 1
        if e >= len(toks):
            raise _Unsupported("a __shared__ declaration without a terminating ';'", shared_tok.start)

        # specifiers: drop storage classes, collect alignment
        keep: list[int] = []
        dynamic = False
        align = "1"
        k = s
        while k < e:
            t = toks[k]
            w = t.text
            if t.kind == "id" and w == "extern":
                dynamic = True
                k += 1
                continue
            if t.kind == "id" and w in _SPEC_DROP:
                k += 1
                continue
            if t.kind == "id" and w in ("__align__", "alignas") and self.p(k + 1) == "(":
                m = _match_forward(toks, k + 1, e)
                align = f"({self.join(k + 2, m)})"
                k = m + 1
                continue
            if t.kind == "id" and w == "__attribute__" and self.p(k + 1) == "(":
                m = _match_forward(toks, k + 1, e)
                inner = [x.text for x in toks[k + 1:m + 1]]
                if "aligned" in inner:
                    a = k + 1 + inner.index("aligned")
                    if self.p(a + 1) == "(":
                        am = _match_forward(toks, a + 1, m)
                        align = f"({self.join(a + 2, am)})"
                    else:
                        align = "16"
                k = m + 1
                continue
            if t.kind == "punct" and w == "[" and self.p(k + 1) == "[":
                m = _match_forward(toks, k, e)
                k = m + 1
                continue
            if t.kind == "id" and w in ("typedef", "template", "friend", "constexpr", "thread_local"):
                raise _Unsupported(f"'{w}' in a __shared__ declaration", t.start)
            keep.append(k)
            k += 1

        declarators = self._split_declarators(keep)
        if not declarators:
            raise _Unsupported("a __shared__ declaration without a variable", shared_tok.start)
        specs_text = ""
        parts: list[str] = []
        for n, chunk in enumerate(declarators):
            specs, ptr, name_k, dims = self._parse_declarator(chunk, first=(n == 0), at=shared_tok.start)
            if n == 0:
                specs_text = self._join_indices(specs)
            name = toks[name_k].text
            sid = self.next_id
            self.next_id += 1
            ty = f"__sg_T{sid}"
            ptr_text = self._join_indices(ptr)
            dims_text = self._join_indices(dims)
            typedef = f"typedef {specs_text} {ptr_text}{' ' if ptr_text else ''}{ty}{dims_text};"
            if dynamic:
                addr = f"__sg_dyn_shared_at(\"{name}\", __sg_elem_size<{ty}>())"
                slot = ""
            else:
                slot = (f"static ::__sg_slot __sg_S{sid} = {{0u, \"{name}\", __FILE__, __LINE__}}; ")
                addr = (f"__sg_shared_at(&__sg_S{sid}, sizeof({ty}), __sg_align(alignof({ty}), {align}), "
                        f"__sg_elem_size<{ty}>())")
            ref = f"*reinterpret_cast<{ty} *>({addr})"
            if function_scope:
                parts.append(f"{typedef} {slot}{ty} &{name} = {ref};")
            else:
                accessor = f"__sg_ref{sid}"
                parts.append(f"{typedef} static inline {ty} &{accessor}() {{ {slot}return {ref}; }}")
                self.file_names[name] = accessor
            file, line = self.loc.locate(shared_tok.start)
            self.result.shared.append((file, line, name, "dynamic" if dynamic else "static"))
        self.edits.append((toks[s].start, toks[e].end, " ".join(parts)))
        return e + 1

    def _join_indices(self, idx: list[int]) -> str:
        if not idx:
            return ""
        out: list[str] = []
        for n, k in enumerate(idx):
            if n and (k != idx[n - 1] + 1 or self.toks[k].start > self.toks[k - 1].end):
                out.append(" ")
            out.append(self.tok_text(k))
        return "".join(out)

    def _split_declarators(self, keep: list[int]) -> list[list[int]]:
        chunks: list[list[int]] = [[]]
        depth = angle = 0
        for k in keep:
            w = self.p(k)
            if w in ("(", "[", "{"):
                depth += 1
            elif w in (")", "]", "}"):
                depth -= 1
            elif w == "<" and depth == 0:
                angle += 1
            elif w == ">" and depth == 0 and angle > 0:
                angle -= 1
            elif w == "," and depth == 0 and angle == 0:
                chunks.append([])
                continue
            chunks[-1].append(k)
        return [c for c in chunks if c] if any(chunks) else []

    def _parse_declarator(self, chunk: list[int], *, first: bool, at: int
                          ) -> tuple[list[int], list[int], int, list[int]]:
        toks = self.toks
        depth = 0
        for k in chunk:
            w = self.p(k)
            if w in ("(", "[", "{"):
                depth += 1
            elif w in (")", "]", "}"):
                depth -= 1
            elif w == "=" and depth == 0:
                raise _Unsupported("an initializer on a __shared__ variable", toks[k].start)
        j = len(chunk) - 1
        # trailing [dims]
        while j >= 0 and self.p(chunk[j]) == "]":
            depth = 0
            while j >= 0:
                w = self.p(chunk[j])
                if w == "]":
                    depth += 1
                elif w == "[":
                    depth -= 1
                    if depth == 0:
                        break
                j -= 1
            j -= 1
        dims = chunk[j + 1:]
        if j < 0 or toks[chunk[j]].kind != "id" or toks[chunk[j]].text in _KEYWORDS:
            raise _Unsupported("this form of __shared__ declarator", toks[chunk[max(j, 0)]].start)
        name_k = chunk[j]
        j -= 1
        p = j
        while p >= 0 and toks[chunk[p]].text in _PTR_OPS and toks[chunk[p]].kind in ("punct", "id"):
            p -= 1
        run = chunk[p + 1:j + 1]
        # cv-qualifiers before the first * or & belong to the specifiers
        lead = 0
        while lead < len(run) and toks[run[lead]].text not in ("*", "&"):
            lead += 1
        ptr = run[lead:]
        specs = chunk[:p + 1] + run[:lead]
        if first and not specs:
            raise _Unsupported("a __shared__ declaration without a type", toks[name_k].start)
        if not first and specs:
            raise _Unsupported("this form of __shared__ declarator", toks[chunk[0]].start)
        if any(self.p(k) in ("(", ")") for k in ptr):
            raise _Unsupported("this form of __shared__ declarator", toks[name_k].start)
        return specs, ptr, name_k, dims

    def _rewrite_define(self, i: int) -> None:
        """Hand a ``#define`` body's shifts to the prelude's helpers, and apply file-scope shared
        names inside it, as a macro would."""
        t = self.toks[i]
        text = self._shift_define(t)
        head = _define_head(t)
        if head is None or not self.file_names:
            if text != t.text:
                self.edits.append((t.start, t.end, text))
            return
        body = text[head[2]:]
        out: list[str] = []
        pos, before = 0, ""
        for tok in tokenize(body):
            out.append(body[pos:tok.start])
            accessor = self.file_names.get(tok.value) if tok.kind == "id" else None
            if accessor is None or before in (".", "->"):
                out.append(body[tok.start:tok.end])
            else:
                out.append(f"{accessor}()" if before == "::" else f"({accessor}())")
            pos, before = tok.end, tok.value
        new = text[:head[2]] + "".join(out) + body[pos:]
        if new != t.text:
            self.edits.append((t.start, t.end, new))

    # -- shifts ------------------------------------------------------------------------------------
    def _wrap_shifts(self) -> None:
        """Wrap the left operand of every shift of the code (not directives) in the prelude's helper
        (see :func:`find_shifts`); the calls carry the operator's file and line."""
        self.if_macros = self._macros_in_if() | self._macros_with_unsafe_arguments()
        self._sum_shifts()
        shifts = find_shifts(self.toks)
        if not shifts:
            return
        loc = _Locator(self.text, self.filename)
        k = 0
        sites: dict[int, str] = {}
        for s in shifts:
            while k < s.op:
                if self.toks[k].kind == "pp":
                    loc.directive(self.toks[k])
                k += 1
            file, line = loc.locate(self.toks[s.op].start)
            sites[s.op] = f"{_c_string(file)}, {line}, {s.flags}"
            self.result.shifts.append((file, line, s.text))
        self.shift_prefix, self.shift_suffix = _shift_wraps(shifts, lambda s: sites[s.op])

    def _sum_shifts(self) -> None:
        """Fill ``result.sum_shifts``: the lines of code with a shift whose amount has a ``+`` or
        ``-`` outside brackets, or that name a macro whose body has one (which an operator
        precedence mistake explains; a lane mask ``1u << lane`` has none)."""
        def sums(toks: list[_Tok], lo: int) -> list[tuple[int, str, str]]:
            found = []
            for first, last, text in _find_shift_ops(toks, lo, len(toks)):
                flags = 0 if text.endswith("=") else _amount_flags(toks, last + 1, len(toks))
                if flags & (SHIFT_PLUS | SHIFT_MINUS):
                    found.append((first, text, "+" if flags & SHIFT_PLUS else "-"))
            return found
        macros: dict[str, tuple[str, str]] = {}
        for t in self.toks:
            head = _define_head(t) if t.kind == "pp" else None
            body = sums(_tokenize(";" + t.text[head[2]:]), 1) if head is not None else []
            if body:
                macros[head[0]] = body[0][1:]
        code = {first: (text, sign) for first, text, sign in sums(self.toks, 0)}
        loc = _Locator(self.text, self.filename)
        for k, t in enumerate(self.toks):
            if t.kind == "pp":
                loc.directive(t)
            site = code.get(k) or (macros.get(t.text) if t.kind == "id" else None)
            if site:
                self.result.sum_shifts.setdefault(loc.locate(t.start), site)

    def _shift_define(self, t: _Tok) -> str:
        """The directive ``t`` with the shifts of its ``#define`` body wrapped (``t.text`` when none,
        or when an ``#if`` may expand the macro: a call cannot be evaluated there). The helpers get
        the line of the shift and, through ``__LINE__``, the line where the macro is used."""
        head = _define_head(t)
        if head is None or head[0] in self.if_macros:
            return t.text
        src = ";" + t.text[head[2]:]  # `;`: a leading `#` is not a directive, and no operand reaches out
        toks = _tokenize(src)
        shifts = find_shifts(toks, 1)
        if not shifts:
            return t.text
        base = t.start + head[2] - 1
        name = _c_string(head[0])

        def site(s: _Shift) -> str:
            file, line = self.loc.locate(base + toks[s.op].start)
            self.result.shifts.append((file, line, s.text))
            return f"{_c_string(file)}, {line}, {s.flags}, __LINE__, {name}"

        prefix, suffix = _shift_wraps(shifts, site)
        out: list[str] = []
        pos = 1
        for k in range(1, len(toks)):
            tk = toks[k]
            out.append(src[pos:tk.start])
            out.append("".join(prefix.get(k, ())) + tk.src + suffix.get(k, ""))
            pos = tk.end
        out.append(src[pos:])
        return t.text[:head[2]] + "".join(out)

    def _macros_with_unsafe_arguments(self) -> set[str]:
        """Macros whose body has a parameter, not parenthesised, in a shift's left operand
        (``#define F(a) a >> 2``) and that some use gives an argument with an operator of lower
        precedence (``F(x == y)`` is ``x == (y >> 2)``: wrapping ``a`` would shift ``x == y``).

        Followed through macros that pass their parameters on (``#define G(b) F(b)``), and through
        macro names in an argument whose body has such an operator.
        """
        defines: list[tuple[str, list[str] | None, list[_Tok]]] = []
        for t in self.toks:
            head = _define_head(t) if t.kind == "pp" else None
            if head is not None:
                defines.append((head[0], head[1], _tokenize(";" + t.text[head[2]:])))
        if not defines:
            return set()
        # names whose expansion has a low-precedence operator outside brackets
        low = {name for name, _, toks in defines if _has_low_precedence(toks, 1, len(toks))}
        grown = True
        while grown:
            grown = False
            for name, _, toks in defines:
                if name not in low and any(toks[k].kind == "id" and toks[k].text in low
                                           for k in _depth0(toks, 1, len(toks))):
                    low.add(name)
                    grown = True
        # (macro, parameter index) -> macros whose shift helpers an unsafe argument there would misplace
        sinks: dict[tuple[str, int], set[str]] = {}
        for name, params, toks in defines:
            for s in (find_shifts(toks, 1) if params else ()):
                for k in _depth0(toks, s.start, s.op):
                    if toks[k].kind == "id" and toks[k].text in params:
                        sinks.setdefault((name, params.index(toks[k].text)), set()).add(name)
        if not sinks:
            return set()
        names = {name for name, _ in sinks}
        grown = True
        while grown:  # G's parameter passed on to F's unsafe slot is an unsafe slot of G
            grown = False
            for name, params, toks in defines:
                for callee, args in _invocations(toks, 1, names):
                    for j, (lo, hi) in enumerate(args):
                        for k in _depth0(toks, lo, hi):
                            if params and toks[k].kind == "id" and toks[k].text in params:
                                key = (name, params.index(toks[k].text))
                                before = len(sinks.get(key, ()))
                                sinks.setdefault(key, set()).update(sinks.get((callee, j), ()))
                                if len(sinks[key]) != before:
                                    names.add(name)
                                    grown = True
        unsafe: set[str] = set()
        bodies = [toks for _, _, toks in defines]
        for toks, lo in [(self.toks, 0)] + [(b, 1) for b in bodies]:
            for callee, args in _invocations(toks, lo, names):
                for j, (a, b) in enumerate(args):
                    if (callee, j) in sinks and (_has_low_precedence(toks, a, b) or any(
                            toks[k].kind == "id" and toks[k].text in low for k in _depth0(toks, a, b))):
                        unsafe |= sinks[(callee, j)]
        return unsafe

    def _macros_in_if(self) -> set[str]:
        """Names an ``#if`` / ``#elif`` may expand: those it names, and what their bodies name."""
        bodies: dict[str, set[str]] = {}
        roots: set[str] = set()
        for t in self.toks:
            if t.kind != "pp":
                continue
            head = _define_head(t)
            if head is not None:
                bodies.setdefault(head[0], set()).update(
                    p.value for p in t.parts if p.kind == "id" and p.start >= t.start + head[2])
            elif len(t.parts) > 1 and t.parts[1].value in ("if", "elif"):
                roots |= _directive_names(t)
        closure: set[str] = set()
        todo = list(roots)
        while todo:
            n = todo.pop()
            if n not in closure:
                closure.add(n)
                todo.extend(bodies.get(n, ()))
        return closure

    def _apply(self) -> RewriteResult:
        text = self.text
        edits = list(self.edits)
        for k in set(self.overrides) | set(self.shift_prefix) | set(self.shift_suffix):
            edits.append((self.toks[k].start, self.toks[k].end, self.tok_text(k)))
        edits.sort()
        out: list[str] = []
        pos = 0
        for start, end, rep in edits:
            if start < pos:
                continue  # inside an earlier edit (e.g. a use inside a rewritten declaration)
            out.append(text[pos:start])
            original = text[start:end]
            if "\n" in rep:
                out.append(rep)  # a #define body: its own line breaks are kept in place
            else:
                out.append(rep + "\n" * original.count("\n"))
            pos = end
        out.append(text[pos:])
        self.result.text = "".join(out)
        return self.result


def rewrite_source(text: str, *, filename: str = "<source>") -> RewriteResult:
    """Rewrite every ``__shared__`` declaration of a CUDA C++ translation unit for the emulator, and
    hand every shift's left operand to the prelude's clamping helpers (see :func:`find_shifts`).

    Args:
        text: the full source (the grader's part header with its ``#line`` markers, then the
            student's file).
        filename: the name used for locations before the first ``#line`` marker.

    Returns:
        A :class:`RewriteResult` whose ``text`` has exactly as many lines as ``text``.

    Raises:
        CompileError: ``"not supported by the emulator: <what> (<file>:<line>)"`` for a
            ``__shared__`` declaration this rewrite cannot express (an initializer, a function
            pointer declarator, a declaration inside a class...); ``"not allowed: `<name>`: ...
            (<file>:<line>)"`` for a name reserved for the runtime (``__tsan_*``, ``__ubsan_*``,
            ``__sg_*``, the ``sg_*`` ABI) or an attribute that turns the instrumentation off
            (``no_sanitize_thread``, ``no_sanitize(...)``).
    """
    rw = _Rewriter(text, filename)
    try:
        return rw.run()
    except _Unsupported as exc:
        # Resolve #line markers up to the failure point (directives after it were not seen).
        loc = _Locator(text, filename)
        for tok in rw.toks:
            if tok.start >= exc.offset:
                break
            if tok.kind == "pp":
                loc.directive(tok)
        file, line = loc.locate(exc.offset)
        raise CompileError(f"{exc.lead}: {exc.what} ({file}:{line})") from None


def find_definitions(text: str, name: str) -> list[tuple[str, int, str]]:
    """Function definitions named ``name`` in ``text`` (comments and literals skipped).

    Returns:
        ``(file, line, parameter text)`` for each ``name(...) {`` found, in source order, with
        locations resolved through ``#line`` markers.
    """
    toks = _tokenize(text)
    loc = _Locator(text, "<source>")
    found: list[tuple[str, int, str]] = []
    for k, tok in enumerate(toks):
        if tok.kind == "pp":
            loc.directive(tok)
            continue
        if tok.kind != "id" or tok.text != name or k + 1 >= len(toks) or toks[k + 1].text != "(":
            continue
        close = _match_forward(toks, k + 1, len(toks))
        if close < 0:
            continue
        j = close + 1
        while j < len(toks) and toks[j].kind == "id":  # const, noexcept, __attribute__-free qualifiers
            j += 1
        if j < len(toks) and toks[j].kind == "punct" and toks[j].text == "{":
            params = " ".join(t.text for t in toks[k + 2:close])
            params = re.sub(r"\s+([,)\]*&])", r"\1", params).replace("( ", "(").replace("[ ", "[")
            file, line = loc.locate(tok.start)
            found.append((file, line, params))
    return found
