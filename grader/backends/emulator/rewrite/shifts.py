"""Shifts: finding every ``<<`` / ``>>`` operator of a token range and its left operand, so that the
rewrite can hand the operand to the prelude's clamping helpers (``__sg_sh`` / ``__sg_sha``).

Public here: :func:`find_shifts` (and the :class:`Shift` it finds), :func:`shift_wraps` (the helper
calls around them), :func:`sum_shifts` (shifts whose amount is a sum), and the ``SHIFT_*`` flags the
helpers take.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from grader.backends.emulator.rewrite.tokens import Tok, glued, match_backward, match_forward, punct_at

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


def _operand_end(toks: list[Tok], k: int, lo: int) -> bool:
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
        if t.text in ("+", "-") and k - 1 >= lo and toks[k - 1].text == t.text and glued(toks, k):
            return _operand_end(toks, k - 2, lo)  # x++ << 1
    return False


def _operand_start(toks: list[Tok], k: int, hi: int) -> bool:
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
class Shift:
    """A shift whose left operand was delimited (:func:`find_shifts`): token indices of its operator
    and operand, and the ``SHIFT_*`` flags its helper gets (:data:`SHIFT_COMPOUND` for ``<<=`` /
    ``>>=``, else :data:`SHIFT_PLUS` / :data:`SHIFT_MINUS` for a ``+`` / ``-`` in its amount)."""

    op: int  # first token of the operator
    last: int  # last token of the operator (the `=` of a compound one)
    text: str  # <<, >>, <<=, >>=
    start: int  # first token of the left operand
    flags: int


def _find_shift_ops(toks: list[Tok], lo: int, hi: int) -> list[tuple[int, int, str]]:
    """The shift operators among toks[lo:hi]: ``(first, last, text)``, in order.

    `<` `<` and `>` `>` glued together are a shift when an operand ends before them and one starts
    after them; `>>` while two `<` that may open template argument lists are open at the same
    bracket depth closes them instead; runs of three (`<<<` launch syntax, `>>>`) and
    `operator<<` are never shifts.
    """
    return _ShiftOpScan(toks, lo, hi).run()


class _ShiftOpScan:
    """One left-to-right pass of :func:`_find_shift_ops`: the bracket depth, the `<` that may open
    a template argument list (``cands``: index and depth), and the shift operators found."""

    def __init__(self, toks: list[Tok], lo: int, hi: int) -> None:
        self.toks, self.lo, self.hi = toks, lo, hi
        self.ops: list[tuple[int, int, str]] = []
        self.cands: list[tuple[int, int]] = []  # (index, bracket depth) of `<` that may open a template
        self.depth = 0

    def run(self) -> list[tuple[int, int, str]]:
        """Scan toks[lo:hi]; the shift operators found, in order."""
        j = self.lo
        while j < self.hi:
            t = self.toks[j]
            if t.kind == "punct" and t.text in ("<", ">"):
                j = self._angle_run(j)
                continue
            if t.kind == "punct":
                self._bracket_or_end(t.text)
            j += 1
        return self.ops

    def _forget_from(self, depth: int) -> None:
        """Drop the template candidates opened at ``depth`` or deeper (their bracket closed)."""
        self.cands = [c for c in self.cands if c[1] < depth]

    def _bracket_or_end(self, w: str) -> None:
        """Follow a bracket or a ``;``: candidates do not outlive the bracket or statement holding them."""
        if w in ("(", "[", "{"):
            if w == "{":
                self._forget_from(self.depth)
            self.depth += 1
        elif w in (")", "]", "}"):
            self._forget_from(self.depth)
            self.depth = max(0, self.depth - 1)
            if w == "}":
                self._forget_from(self.depth)
        elif w == ";":
            self._forget_from(self.depth)

    def _angle_run(self, j: int) -> int:
        """Classify the run of glued `<` or `>` starting at toks[j] (with a glued `=` after it); the
        index after the run."""
        toks, lo, hi = self.toks, self.lo, self.hi
        w = toks[j].text
        run = j
        while run + 1 < hi and punct_at(toks, run + 1, lo, hi) == w and glued(toks, run + 1):
            run += 1
        n = run - j + 1
        eq = punct_at(toks, run + 1, lo, hi) == "=" and glued(toks, run + 1)
        after = run + 1 + (1 if eq else 0)
        here = [c for c in self.cands if c[1] == self.depth]
        if n == 1:
            self._single_angle(j, w, eq, here)
        elif n == 2:
            self._double_angle(j, w, eq, after, here)
        elif w == ">":
            for c in here[-n:]:
                self.cands.remove(c)
        return after

    def _single_angle(self, j: int, w: str, eq: bool, here: list[tuple[int, int]]) -> None:
        """A lone `<` after a name may open a template argument list; a lone `>` closes the latest."""
        toks = self.toks
        if w == "<" and not eq and j > self.lo and toks[j - 1].kind == "id" and toks[j - 1].text != "operator":
            self.cands.append((j, self.depth))
        elif w == ">" and not eq and here:
            self.cands.remove(here[-1])

    def _double_angle(self, j: int, w: str, eq: bool, after: int, here: list[tuple[int, int]]) -> None:
        """`<<` / `>>` (``eq``: `<<=` / `>>=`): `>>` closes two open template lists if there are;
        otherwise it is a shift when operands stand on both sides and it is not ``operator<<``."""
        toks, lo = self.toks, self.lo
        if w == ">" and len(here) >= 2:
            self.cands.remove(here[-1])
            self.cands.remove(here[-2])
        elif (_operand_end(toks, j - 1, lo) and _operand_start(toks, after, self.hi)
              and not (j - 1 >= lo and toks[j - 1].text == "operator")):
            self.ops.append((j, after - 1, w * 2 + ("=" if eq else "")))


def _template_open(toks: list[Tok], j: int, lo: int) -> int:
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
                m = match_backward(toks, k, lo)
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


def _left_operand(toks: list[Tok], op: int, lo: int, chain: dict[int, int], lasts: set[int]) -> int:
    """First token of the left operand of the shift whose operator starts at toks[op], or -1
    where it cannot be told for certain.

    The operand is an additive-expression: it extends leftwards over names, literals, bracketed
    groups, unary and additive/multiplicative operators, member access, casts, template-ids
    followed by `(` or `::`, and earlier shifts of the same chain (``chain``: last token of a
    shift operator -> its first; ``lasts``: the last tokens of every binary shift operator, a shift
    of the chain that could not be delimited among them); it stops at anything of lower precedence.
    """
    return _LeftOperandScan(toks, op, lo, chain, lasts).run()


#: What a step of :class:`_LeftOperandScan` decides: take the token and go on, stop before it, or
#: give up (the operand cannot be told for certain).
_GO, _STOP, _FAIL = "go", "stop", "fail"


class _LeftOperandScan:
    """The leftward scan of :func:`_left_operand`: ``start`` is the leftmost token taken so far,
    ``nxt`` what it was (atom, paren, sub, op, ``::``, tmpl), ``j`` the token looked at next."""

    def __init__(self, toks: list[Tok], op: int, lo: int, chain: dict[int, int], lasts: set[int]) -> None:
        self.toks, self.op, self.lo, self.chain, self.lasts = toks, op, lo, chain, lasts
        self.j, self.start, self.nxt = op - 1, op, ""

    def run(self) -> int:
        """The operand's first token, or -1."""
        toks = self.toks
        while self.j >= self.lo:
            t = toks[self.j]
            if t.kind == "pp":
                break
            if t.kind == "id":
                step = self._word(t)
            elif t.kind in ("num", "chr", "str"):
                step = self._literal(t)
            else:
                step = self._punct(t.text)
            if step == _FAIL:
                return -1
            if step == _STOP:
                break
        start = self.start
        if start >= self.op or toks[start].text in (".", "->") and toks[start].kind == "punct":
            return -1
        return start

    def _take(self, start: int, nxt: str, j: int) -> str:
        """Extend the operand to toks[start] (a ``nxt``), and look at toks[j] next."""
        self.start, self.nxt, self.j = start, nxt, j
        return _GO

    def _word(self, t: Tok) -> str:
        """An identifier: part of the operand unless a keyword ends it or two names would meet."""
        if t.text in _NAME_BEFORE_KW:
            return _FAIL  # T::template f<int>() << 1: the keyword belongs to the operand
        if t.text in ("__VA_ARGS__", "__VA_OPT__"):
            return _FAIL  # arguments with commas would not make one argument of the helper
        if t.text in _SHIFT_STOP_KW:
            return _STOP
        if self.nxt == "atom" and t.text not in ("sizeof", "alignof"):
            return _STOP
        return self._take(self.j, "atom", self.j - 1)

    def _literal(self, t: Tok) -> str:
        """A literal: part of the operand unless an atom follows it (adjacent strings concatenate)."""
        if self.nxt in ("atom", "paren") and not (t.kind == "str" and self.toks[self.start].kind == "str"):
            return _STOP
        return self._take(self.j, "atom", self.j - 1)

    def _punct(self, w: str) -> str:
        """A punctuator: an earlier shift of the chain, a bracketed group, a template-id's `>`, or a
        unary, multiplicative, additive or member-access operator extend the operand."""
        j = self.j
        if j in self.chain:  # an earlier shift of the chain: a << b >> c is (a << b) >> c
            return self._take(self.chain[j], "op", self.chain[j] - 1)
        if j in self.lasts:
            return _FAIL  # an earlier shift of the chain that could not be delimited
        if w in (")", "]"):
            return self._group(w)
        if w == ">":
            return self._template_id()
        if w in _UNARY_OR_ADDITIVE:
            return self._take(j, ("::" if w == "::" else "op"), j - 1)
        return _STOP

    def _group(self, w: str) -> str:
        """A bracketed group closed by toks[j] (``w``: `)` or `]`): a call, a cast, a subscript."""
        toks, lo = self.toks, self.lo
        m = match_backward(toks, self.j, lo)
        if m < 0:
            return _FAIL
        before = toks[m - 1] if m - 1 >= lo else None
        if before is not None and before.kind == "id" and before.text in _HEAD_KW:
            return _STOP  # if (c) x <<= 1
        if self.nxt == "atom" and (w == "]" or _operand_end(toks, m - 1, lo)):
            return _STOP  # f(a) x, a[i] x: not one operand
        return self._take(m, ("paren" if w == ")" else "sub"), m - 1)

    def _template_id(self) -> str:
        """A `>`: the end of a template-id when `(` or `::` follows it, else a relational operator."""
        if self.nxt not in ("paren", "::"):
            return _STOP  # a relational >
        k = _template_open(self.toks, self.j, self.lo)
        if k < 0:
            return _FAIL
        return self._take(k + 1, "tmpl", k)


def _amount_flags(toks: list[Tok], k: int, hi: int) -> int:
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
            m = match_forward(toks, j, hi)
            if m < 0:
                break
            prev_operand, j = True, m + 1
            continue
        if w in ("+", "-"):
            if j + 1 < hi and toks[j + 1].text == w and glued(toks, j + 1):
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


def find_shifts(toks: list[Tok], lo: int = 0, hi: int | None = None) -> list[Shift]:
    """The shifts of toks[lo:hi] (``hi``: the end when None) whose left operand could be delimited
    for certain, in order; a shift left out is one whose helper could misplace the operand (a
    template's ``>``, unmatched brackets, ``__VA_ARGS__``...). Never raises."""
    hi = len(toks) if hi is None else hi
    ops = _find_shift_ops(toks, lo, hi)
    chain = {last: first for first, last, text in ops if "=" not in text}
    lasts = set(chain)
    found: list[Shift] = []
    for first, last, text in ops:
        start = _left_operand(toks, first, lo, chain, lasts)
        if start < 0:
            chain.pop(last, None)  # a later shift of its chain cannot be delimited either
            continue
        flags = SHIFT_COMPOUND if text.endswith("=") else _amount_flags(toks, last + 1, hi)
        found.append(Shift(first, last, text, start, flags))
    return found


def sum_shifts(toks: list[Tok], lo: int = 0) -> list[tuple[int, str, str]]:
    """The binary shifts of toks[lo:] whose amount has a binary ``+`` or ``-`` outside brackets
    (``n >> 5 + n``: the operator precedence is the likely mistake), delimited or not:
    ``(index of the operator's first token, operator, sign)`` in order, the sign ``"+"`` where the
    amount has both. A compound ``<<=`` / ``>>=`` is never one."""
    found = []
    for first, last, text in _find_shift_ops(toks, lo, len(toks)):
        flags = 0 if text.endswith("=") else _amount_flags(toks, last + 1, len(toks))
        if flags & (SHIFT_PLUS | SHIFT_MINUS):
            found.append((first, text, "+" if flags & SHIFT_PLUS else "-"))
    return found


def shift_wraps(shifts: list[Shift], site: Callable[[Shift], str]
                ) -> tuple[dict[int, list[str]], dict[int, str]]:
    """The prelude's helper calls around the left operands of ``shifts`` (of one token list):
    ``(prefix, suffix)``, per token index the calls that open before it (outermost first), and the
    text that closes them after it (``, <site(shift)>)`` per shift, ``site`` giving the helper's
    arguments after the operand)."""
    prefix: dict[int, list[tuple[int, str]]] = {}
    suffix: dict[int, str] = {}
    for s in shifts:
        helper = "__sg_sha(" if s.text.endswith("=") else "__sg_sh("
        prefix.setdefault(s.start, []).append((s.op, helper))
        suffix[s.op - 1] = suffix.get(s.op - 1, "") + ", " + site(s) + ")"
    return ({k: [h for _, h in sorted(v, reverse=True)] for k, v in prefix.items()}, suffix)

