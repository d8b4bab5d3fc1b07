"""Macros whose shifts must stay the built-in ones: those an ``#if`` may expand (a call of the
prelude's helpers cannot be evaluated there), and those whose parameter stands unbracketed in a
shift's left operand while some use passes an argument that would regroup around the helper.
"""

from __future__ import annotations

from grader.backends.emulator.rewrite.shifts import find_shifts
from grader.backends.emulator.rewrite.tokens import Tok, define_head, glued, match_forward, punct_at, rewrite_tokens

#: A ``#define``: its name, its parameters (None for an object-like macro), and its body's tokens
#: after a leading ``;`` (so that no operand reaches out of the body).
_Define = tuple[str, "list[str] | None", list[Tok]]
#: (macro, parameter index) -> the macros whose shift helpers an unsafe argument there would misplace.
_Slots = dict[tuple[str, int], set[str]]


def _depth0(toks: list[Tok], lo: int, hi: int) -> list[int]:
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


def _has_low_precedence(toks: list[Tok], lo: int, hi: int) -> bool:
    """Whether toks[lo:hi] has, outside brackets, an operator of lower precedence than a shift
    (relational, equality, bitwise, logical, conditional, assignment, comma)."""
    for k in _depth0(toks, lo, hi):
        w = toks[k].text if toks[k].kind == "punct" else ""
        if w in ("=", "&", "|", "^", "?", ":", ","):
            return True
        if w in ("<", ">") and not (punct_at(toks, k - 1, lo, hi) == w and glued(toks, k)) and not (
                punct_at(toks, k + 1, lo, hi) == w and glued(toks, k + 1)):
            return True
    return False


def _invocations(toks: list[Tok], lo: int, names: set[str]) -> list[tuple[str, list[tuple[int, int]]]]:
    """Function-like macro invocations ``NAME(args)`` of toks[lo:] for NAME in ``names``: the name
    and the token range of each argument."""
    found: list[tuple[str, list[tuple[int, int]]]] = []
    for k in range(lo, len(toks) - 1):
        if toks[k].kind != "id" or toks[k].text not in names or punct_at(toks, k + 1, lo, len(toks)) != "(":
            continue
        close = match_forward(toks, k + 1, len(toks))
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


def macros_with_unsafe_arguments(toks: list[Tok]) -> set[str]:
    """Macros of ``toks`` whose body has a parameter, not parenthesised, in a shift's left operand
    (``#define F(a) a >> 2``) and that some use gives an argument with an operator of lower
    precedence (``F(x == y)`` is ``x == (y >> 2)``: wrapping ``a`` would shift ``x == y``).

    Followed through macros that pass their parameters on (``#define G(b) F(b)``), and through
    macro names in an argument whose body has such an operator.
    """
    defines = _defines(toks)
    if not defines:
        return set()
    low = _low_precedence_macros(defines)
    slots = _shift_operand_slots(defines)
    if not slots:
        return set()
    names = _pass_slots_on(defines, slots)
    return _unsafe_uses(toks, defines, slots, names, low)


def _defines(toks: list[Tok]) -> list[_Define]:
    """Every ``#define`` of ``toks``, in order (see :data:`_Define`)."""
    defines: list[_Define] = []
    for t in toks:
        head = define_head(t) if t.kind == "pp" else None
        if head is not None:
            defines.append((head[0], head[1], rewrite_tokens(";" + t.text[head[2]:])))
    return defines


def _names_low(body: list[Tok], lo: int, hi: int, low: set[str]) -> bool:
    """Whether body[lo:hi] names, outside brackets, a macro of ``low``."""
    return any(body[k].kind == "id" and body[k].text in low for k in _depth0(body, lo, hi))


def _low_precedence_macros(defines: list[_Define]) -> set[str]:
    """Names whose expansion has an operator of lower precedence than a shift outside brackets,
    directly or through a macro named outside brackets."""
    low = {name for name, _, body in defines if _has_low_precedence(body, 1, len(body))}
    grown = True
    while grown:
        grown = False
        for name, _, body in defines:
            if name not in low and _names_low(body, 1, len(body), low):
                low.add(name)
                grown = True
    return low


def _shift_operand_slots(defines: list[_Define]) -> _Slots:
    """The parameters that stand outside brackets in a shift's left operand of their macro's body."""
    slots: _Slots = {}
    for name, params, body in defines:
        for s in (find_shifts(body, 1) if params else ()):
            for k in _depth0(body, s.start, s.op):
                if body[k].kind == "id" and body[k].text in params:
                    slots.setdefault((name, params.index(body[k].text)), set()).add(name)
    return slots


def _pass_slots_on(defines: list[_Define], slots: _Slots) -> set[str]:
    """Grow ``slots`` until stable: G's parameter passed on to F's unsafe slot is an unsafe slot of
    G. Returns the macros with an unsafe slot."""
    names = {name for name, _ in slots}
    grown = True
    while grown:
        grown = False
        for name, params, body in defines:
            if params and _slots_passed_on(name, params, body, slots, names):
                names.add(name)
                grown = True
    return names


def _slots_passed_on(name: str, params: list[str], body: list[Tok], slots: _Slots, names: set[str]) -> bool:
    """Add to ``slots`` the parameters of macro ``name`` that its body passes to an unsafe slot of a
    macro of ``names``; whether any slot grew."""
    grew = False
    for callee, args in _invocations(body, 1, names):
        for j, (lo, hi) in enumerate(args):
            for k in _depth0(body, lo, hi):
                if body[k].kind == "id" and body[k].text in params:
                    key = (name, params.index(body[k].text))
                    before = len(slots.get(key, ()))
                    slots.setdefault(key, set()).update(slots.get((callee, j), ()))
                    grew = grew or len(slots[key]) != before
    return grew


def _unsafe_uses(toks: list[Tok], defines: list[_Define], slots: _Slots, names: set[str], low: set[str]) -> set[str]:
    """The macros whose shift helpers some use (in the code or in a macro body) would misplace: an
    argument in an unsafe slot with a low-precedence operator or a ``low`` macro outside brackets."""
    unsafe: set[str] = set()
    for seq, lo in [(toks, 0)] + [(body, 1) for _, _, body in defines]:
        for callee, args in _invocations(seq, lo, names):
            for j, (a, b) in enumerate(args):
                if (callee, j) in slots and (_has_low_precedence(seq, a, b) or _names_low(seq, a, b, low)):
                    unsafe |= slots[(callee, j)]
    return unsafe


def macros_in_if(toks: list[Tok]) -> set[str]:
    """Names an ``#if`` / ``#elif`` may expand: those it names, and what their bodies name."""
    bodies: dict[str, set[str]] = {}
    roots: set[str] = set()
    for t in toks:
        if t.kind != "pp":
            continue
        head = define_head(t)
        if head is not None:
            bodies.setdefault(head[0], set()).update(
                p.value for p in t.parts if p.kind == "id" and p.start >= t.start + head[2])
        elif len(t.parts) > 1 and t.parts[1].value in ("if", "elif"):
            roots |= {p.value for p in t.parts[2:] if p.kind == "id"}
    closure: set[str] = set()
    todo = list(roots)
    while todo:
        n = todo.pop()
        if n not in closure:
            closure.add(n)
            todo.extend(bodies.get(n, ()))
    return closure

