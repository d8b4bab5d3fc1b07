"""Inline PTX: an ``asm`` statement whose instructions the emulator runs is replaced by C++ doing
the same (:func:`grader.backends.emulator.ptx.ptx_statement`), in a function body or in a
``#define`` body (a macro's ``asm(...)`` without its ``;`` becomes ``do { ... } while (0)``, a
statement wherever the macro's call is one); an ``asm`` statement of other instructions is "not
supported by the emulator" (it cannot be emulated: a GPU grades the part); any other ``asm`` (a
label, at file scope, where it is host assembly, or a template that is no string literal) is left
as written, for the lockdown header to refuse.
"""

from __future__ import annotations

import re

from grader.backends.emulator.lockdown import ASM_KEYWORDS
from grader.backends.emulator.ptx import ptx_statement
from grader.backends.emulator.rewrite.edits import SourceEdits
from grader.backends.emulator.rewrite.tokens import Unsupported, match_backward, match_forward

#: The most of an unsupported template a message quotes.
_QUOTED = 120


def _unemulated(template: str) -> str:
    """What the emulator says of an ``asm`` statement whose inline PTX it does not run: the part
    waits for a GPU (``grader.grading.worker.main``: its cases are pending, not a compile error)."""
    text = " ".join(template.split())
    if len(text) > _QUOTED:
        text = text[:_QUOTED - 3] + "..."
    return (f"inline PTX `{text}` cannot be emulated (the emulator runs the instructions of docs/emulator.md, "
            f"\"Inline PTX\"); a run on a GPU grades this part")


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


#: What may stand between ``asm`` and its ``(``.
_ASM_QUALIFIERS = {"volatile", "__volatile__", "__volatile", "inline", "__inline", "__inline__"}


class AsmStatements:
    """The rewrite of the ``asm`` statements of inline PTX of a translation unit being rewritten
    (``unit``): each one rewritten adds its replacement to ``unit.edits``."""

    def __init__(self, unit: SourceEdits) -> None:
        self.unit = unit

    def statement_starts(self, i: int) -> bool:
        """Whether a statement starts at ``unit.toks[i]`` (after ``;``, a brace, a label's ``:``,
        ``else``, ``do``, or the condition of an ``if``, ``for``, ``while`` or ``switch``): not an asm
        label of a declaration (``void f() __asm__("name");``)."""
        toks, p = self.unit.toks, self.unit.p
        prev = i - 1
        while prev >= 0 and toks[prev].kind == "pp":
            prev -= 1
        if prev < 0 or p(prev) in (";", "{", "}", ":") or toks[prev].text in ("else", "do"):
            return True
        if p(prev) != ")":
            return False
        opened = match_backward(toks, prev, 0)
        return opened > 0 and toks[opened - 1].text in ("if", "for", "while", "switch")

    def rewrite(self, i: int, *, macro: bool = False) -> int | None:
        """An ``asm`` statement at ``unit.toks[i]`` whose inline PTX the emulator runs
        (:func:`.ptx.ptx_statement`), replaced on its first line by what does the same; the index
        after its ``;``. None where it is no ``asm`` statement of a string literal (left as written, for
        the lockdown to refuse). ``macro``: the tokens are a ``#define`` body, where the statement
        may end the body without its ``;`` (then ``do { ... } while (0)``, the index after it).

        Raises:
            Unsupported: an ``asm`` statement whose inline PTX the emulator does not run ("cannot
                be emulated"), at the ``asm``'s line.
        """
        toks, p, j = self.unit.toks, self.unit.p, i + 1
        while j < len(toks) and toks[j].kind == "id" and toks[j].text in _ASM_QUALIFIERS:
            j += 1
        if p(j) != "(":
            return None
        close = match_forward(toks, j, len(toks))
        bare = macro and close == len(toks) - 1  # a macro's asm(...) whose call supplies the `;`
        if close < 0 or (p(close + 1) != ";" and not bare):
            return None
        sections: list[list[int]] = [[]]
        depth = 0
        for k in range(j + 1, close):
            w = p(k)
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
            found = self._operands(section, names, base=sum(len(o) for o in operands))
            if found is None:
                raise Unsupported(_unemulated("".join(template)), toks[i].start)
            operands.append(found)
        statement = ptx_statement("".join(template), operands[0], operands[1], names, extended=len(sections) > 1)
        if statement is None:
            raise Unsupported(_unemulated("".join(template)), toks[i].start)
        if bare:
            self.unit.edits.append((toks[i].start, toks[close].end, f"do {statement} while (0)"))
            return close + 1
        self.unit.edits.append((toks[i].start, toks[close + 1].end, statement))
        return close + 2

    def rewrite_define(self, text: str, head_end: int, base: int) -> str:
        """The ``#define`` directive ``text`` (its body from ``head_end``; ``base``: the body's offset
        in the source, for messages) with the ``asm`` statements of its body that the emulator runs
        rewritten as :meth:`rewrite` does in a function; each keeps its lines (a statement over several
        continued lines ends with as many empty continued lines).

        Raises:
            Unsupported: an ``asm`` statement whose inline PTX the emulator does not run, at its line.
        """
        body = text[head_end:]
        if not any(word in body for word in ASM_KEYWORDS):
            return text
        src = ";" + body  # `;`: a statement starts the body
        sub = AsmStatements(SourceEdits(src, self.unit.filename))
        i = 1
        while i < len(sub.unit.toks):
            tok = sub.unit.toks[i]
            if tok.kind == "id" and tok.text in ASM_KEYWORDS and sub.statement_starts(i):
                try:
                    after = sub.rewrite(i, macro=True)
                except Unsupported as exc:
                    raise Unsupported(exc.what, base + exc.offset - 1, exc.lead) from None
                if after is not None:
                    i = after
                    continue
            i += 1
        out, pos = [], 0
        for start, end, new in sorted(sub.unit.edits):
            out += [src[pos:start], new, " \\\n" * src.count("\n", start, end)]
            pos = end
        return text[:head_end] + ("".join(out) + src[pos:])[1:]

    def _operands(self, section: list[int], names: dict[str, int], *, base: int) -> list[tuple[str, str]] | None:
        """``(constraint, expression)`` of each operand of an ``asm`` section (token indices), an
        operand's ``[name]`` recorded in ``names`` with its index (from ``base``); None where one
        does not read ``[name] "constraint" (expression)``."""
        toks, p, out = self.unit.toks, self.unit.p, []
        pieces: list[list[int]] = [[]]
        depth = 0
        for k in section:
            w = p(k)
            depth += w in ("(", "[", "{")
            depth -= w in (")", "]", "}")
            if w == "," and depth == 0:
                pieces.append([])
            else:
                pieces[-1].append(k)
        for piece in (x for x in pieces if x):
            if len(piece) >= 3 and p(piece[0]) == "[" and p(piece[2]) == "]" and toks[piece[1]].kind == "id":
                names[toks[piece[1]].text] = base + len(out)
                piece = piece[3:]
            if len(piece) < 3 or toks[piece[0]].kind != "str" or p(piece[1]) != "(" or p(piece[-1]) != ")" \
                    or match_forward(toks, piece[1], piece[-1] + 1) != piece[-1]:
                return None
            constraint = _c_literal(toks[piece[0]].text)
            if constraint is None:
                return None
            out.append((constraint, self.unit.join(piece[1] + 1, piece[-1])))
        return out
