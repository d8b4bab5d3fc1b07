"""The inline PTX the emulator runs: Hopper's bulk copy into shared memory and its mbarrier.

The emulator compiles student code with the macros of the course's GPU (:mod:`.macros`; an H100,
``__CUDA_ARCH__`` 900), so a file's ``#if __CUDA_ARCH__ >= 900`` branch is the one it runs, as on
that GPU. Such a branch may hold inline PTX, which the host compiler cannot run (and which the
lockdown refuses: an ``asm`` can bind a name of the runtime, :mod:`.lockdown`). The rewrite hands
each ``asm`` statement's template and operands to :func:`ptx_statement`; where every instruction
is one of :data:`INSTRUCTIONS`, the statement becomes C++ calling the prelude's ``__sg_ptx_*``
functions (``runtime/prelude.h``), and the lockdown never sees an ``asm``. Any other ``asm`` is
left as written, for the lockdown's refusal, which names what is supported.

What the emulation does: the bulk copy (``cp.async.bulk.shared::cluster.global.mbarrier::
complete_tx::bytes``) copies when it is issued, by the issuing thread (its global loads and shared
stores checked as that thread's, on the ``asm``'s line), then completes its bytes on the mbarrier;
the mbarrier (init, arrive, arrive.expect_tx, try_wait.parity / test_wait.parity, inval) is a word
of shared memory changed by atomic operations; a waiting thread that polls yields; the L2 prefetch
does nothing and ``fence.proxy.async`` is a fence. On a GPU the copy is asynchronous until the
mbarrier's phase completes; a kernel that reads the tile without waiting may see it here and not
there (docs/emulator.md, "Inline PTX").

Public API: :func:`ptx_statement`, :data:`INSTRUCTIONS`.
"""

from __future__ import annotations

import re
from typing import Callable

__all__ = ["ptx_statement", "INSTRUCTIONS"]

#: An operand of an instruction as written in the template: ``%0``, ``%[name]``, an integer, ``_``.
_OP = r"(%\d+|%\[\w+\]|-?\d+|_)"
_SH = r"\.shared(?:::cta)?"
_SEM = r"(?:\.(?:release|acquire|relaxed))?(?:\.(?:cta|cluster))?"
#: The instructions supported, by name: their pattern (whitespace collapsed to one space).
INSTRUCTIONS: dict[str, re.Pattern] = {
    "cp.async.bulk.prefetch.L2.global": re.compile(rf"cp\.async\.bulk\.prefetch\.L2\.global \[{_OP}\], {_OP}"),
    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes": re.compile(
        rf"cp\.async\.bulk\.shared::(?:cluster|cta)\.global\.mbarrier::complete_tx::bytes "
        rf"\[{_OP}\], \[{_OP}\], {_OP}, \[{_OP}\]"),
    "mbarrier.init": re.compile(rf"mbarrier\.init{_SH}\.b64 \[{_OP}\], {_OP}"),
    "mbarrier.inval": re.compile(rf"mbarrier\.inval{_SH}\.b64 \[{_OP}\]"),
    "mbarrier.arrive.expect_tx": re.compile(rf"mbarrier\.arrive\.expect_tx{_SEM}{_SH}\.b64 {_OP}, \[{_OP}\], {_OP}"),
    "mbarrier.arrive": re.compile(rf"mbarrier\.arrive{_SEM}{_SH}\.b64 {_OP}, \[{_OP}\](?:, {_OP})?"),
    "mbarrier.try_wait.parity": re.compile(
        rf"mbarrier\.(?:try|test)_wait\.parity{_SEM}{_SH}\.b64 (\w+), \[{_OP}\], {_OP}"),
    "fence.proxy.async": re.compile(r"fence\.proxy\.async(?:\.(?:global|shared::(?:cta|cluster)))?"),
}
#: A wait's predicate into an output: ``selp.u32 %0, 1, 0, p``.
_SELP = re.compile(rf"selp\.[bu]32 {_OP}, 1, 0, (\w+)")
_REG = re.compile(r"\.reg \.pred (\w+(?:, ?\w+)*)")


def _instructions(template: str) -> list[str] | None:
    """The template's instructions, whitespace collapsed; None where it has labels, a predicate
    guard (``@p``) or anything but one optional ``{ ... }`` scope."""
    text = re.sub(r"\s+", " ", template).strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    if any(c in text for c in "{}@") or re.search(r"(?:^|;)\s*\w+:", text):
        return None
    return [s.strip() for s in text.split(";") if s.strip()]


def ptx_statement(template: str, outputs: list[tuple[str, str]], inputs: list[tuple[str, str]],
                  names: dict[str, int] | None = None) -> str | None:
    """C++ doing what an ``asm`` statement of inline PTX does, on one line, or None where an
    instruction is not one of :data:`INSTRUCTIONS` (the ``asm`` is then left to the lockdown).

    Args:
        template: the statement's template, its string literals joined and decoded.
        outputs, inputs: ``(constraint, C++ expression)`` of each operand, outputs first (``%0``...).
        names: operand index of each ``[name]`` given to an operand (``%[name]``).

    Returns:
        A compound statement (``{ ... }``): each input evaluated once, in order, into a local; the
        prelude's ``__sg_ptx_*`` calls; an output assigned where an instruction writes one.
    """
    instructions = _instructions(template)
    if not instructions:
        return None
    translation = _Translation(outputs, inputs, names or {})
    if not all(translation.add(ins) for ins in instructions):
        return None
    return translation.statement()


class _Translation:
    """The C++ of one ``asm`` statement, built one instruction at a time (:meth:`add`): the
    predicates declared (``.reg .pred``), the mbarrier wait each predicate holds, and the body."""

    def __init__(self, outputs: list[tuple[str, str]], inputs: list[tuple[str, str]], names: dict[str, int]) -> None:
        self.outputs, self.inputs, self.names = outputs, inputs, names
        self.count = len(outputs) + len(inputs)
        self.preds: set[str] = set()
        self.waits: dict[str, tuple[str, str]] = {}  # predicate -> (mbarrier, parity)
        self.body: list[str] = []

    def index(self, op: str) -> int | None:
        """The operand index ``op`` (``%3``, ``%[name]``) refers to; None for none."""
        if op.startswith("%["):
            return self.names.get(op[2:-1])
        return int(op[1:]) if op.startswith("%") and int(op[1:]) < self.count else None

    def value(self, op: str | None) -> str | None:
        """An input operand read (its local), or an integer as written; None for anything else."""
        if op is None or op == "_":
            return None
        if not op.startswith("%"):
            return f"{int(op)}ull" if re.fullmatch(r"-?\d+", op) else None
        k = self.index(op)
        return None if k is None or k < len(self.outputs) else f"__sg_o{k}"

    def target(self, op: str) -> str | None:
        """An operand written: an output's expression, or "" for ``_`` (a sink); None for none."""
        if op == "_":
            return ""
        k = self.index(op)
        return None if k is None or k >= len(self.outputs) else f"({self.outputs[k][1]})"

    def add(self, ins: str) -> bool:
        """Translate one instruction (whitespace collapsed); False where it is not supported."""
        regs = _REG.fullmatch(ins)
        if regs:
            self.preds |= {p.strip() for p in regs.group(1).split(",")}
            return True
        selp = _SELP.fullmatch(ins)
        if selp:
            return self._selp(selp)
        for name, pattern in INSTRUCTIONS.items():
            m = pattern.fullmatch(ins)
            if m:
                return _TRANSLATE[name](self, m, [self.value(g) for g in m.groups()])
        return False

    def statement(self) -> str | None:
        """The compound statement: the inputs' locals, then the body; None where a wait's
        predicate is read by no ``selp`` (what it found would be lost)."""
        if self.waits and not any("__sg_ptx_mbarrier_wait_parity" in b for b in self.body):
            return None
        locals_ = [f"unsigned long long __sg_o{len(self.outputs) + k} = (unsigned long long)({expr});"
                   for k, (_, expr) in enumerate(self.inputs)]
        return "{ " + " ".join(locals_ + self.body) + " }"

    def _selp(self, m: re.Match[str]) -> bool:
        """``selp`` of a wait's predicate into an output: the output gets the wait's result."""
        out, pred = self.target(m.group(1)), m.group(2)
        if not out or pred not in self.waits:
            return False
        bar, parity = self.waits[pred]
        self.body.append(f"{out} = __sg_ptx_mbarrier_wait_parity({bar}, {parity});")
        return True

    def _prefetch(self, m: re.Match[str], ops: list[str | None]) -> bool:
        """The L2 prefetch: nothing to do, once its operands are readable."""
        return None not in ops

    def _fence(self, m: re.Match[str], ops: list[str | None]) -> bool:
        """``fence.proxy.async``: a fence."""
        self.body.append("__sg_ptx_fence();")
        return True

    def _init(self, m: re.Match[str], ops: list[str | None]) -> bool:
        """``mbarrier.init [bar], count``."""
        if None in ops:
            return False
        self.body.append(f"__sg_ptx_mbarrier_init({ops[0]}, {ops[1]});")
        return True

    def _inval(self, m: re.Match[str], ops: list[str | None]) -> bool:
        """``mbarrier.inval [bar]``."""
        if None in ops:
            return False
        self.body.append(f"__sg_ptx_mbarrier_inval({ops[0]});")
        return True

    def _arrive(self, m: re.Match[str], ops: list[str | None]) -> bool:
        """``mbarrier.arrive state, [bar](, count)``: ``count`` arrivals (1 when not given)."""
        return self._arrival(m, ops, expect_tx=False)

    def _arrive_expect_tx(self, m: re.Match[str], ops: list[str | None]) -> bool:
        """``mbarrier.arrive.expect_tx state, [bar], tx``: one arrival expecting ``tx`` bytes."""
        return self._arrival(m, ops, expect_tx=True)

    def _arrival(self, m: re.Match[str], ops: list[str | None], *, expect_tx: bool) -> bool:
        """An arrival on the mbarrier ``[bar]``, its phase state into ``state`` unless that is ``_``."""
        state = self.target(m.group(1))
        bar = ops[1]
        third = ops[2] if len(ops) > 2 and m.group(3) is not None else None
        if state is None or bar is None or (m.group(3) is not None and third is None):
            return False
        arrivals, tx = ("1ull", third) if expect_tx else (third or "1ull", "0ull")
        call = f"__sg_ptx_mbarrier_arrive({bar}, {arrivals}, {tx})"
        self.body.append(f"{state} = {call};" if state else f"{call};")
        return True

    def _try_wait(self, m: re.Match[str], ops: list[str | None]) -> bool:
        """``mbarrier.try_wait.parity p, [bar], parity``: recorded for the ``selp`` that reads ``p``."""
        pred, bar, parity = m.group(1), ops[1], ops[2]
        if pred not in self.preds or bar is None or parity is None:
            return False
        self.waits[pred] = (bar, parity)
        return True

    def _bulk_copy(self, m: re.Match[str], ops: list[str | None]) -> bool:
        """The bulk copy ``[dst], [src], size, [bar]``: copied now, by the issuing thread, 16 bytes a
        step (one instruction: one step of the schedule), then its bytes completed on the mbarrier."""
        if None in ops:
            return False
        dst, src, size, bar = ops
        self.body.append(f"{{ __sg_ptx_chunk *__sg_d = (__sg_ptx_chunk *)__cvta_shared_to_generic((size_t){dst}); "
                         f"const __sg_ptx_chunk *__sg_s = (const __sg_ptx_chunk *)(size_t){src}; "
                         f"unsigned long long __sg_m = __sg_ptx_steps_mark(); "  # one instruction: one step
                         f"for (unsigned long long __sg_k = 0; __sg_k < ({size}) / 16; ++__sg_k) "
                         f"__sg_d[__sg_k] = __sg_s[__sg_k]; __sg_ptx_steps_one_since(__sg_m); }} "
                         f"__sg_ptx_complete_tx({bar}, {size});")
        return True


#: How each of :data:`INSTRUCTIONS` is translated (its match and its operands read, None where one
#: is not readable); False where its operands are not supported.
_TRANSLATE: dict[str, Callable[[_Translation, re.Match[str], list[str | None]], bool]] = {
    "cp.async.bulk.prefetch.L2.global": _Translation._prefetch,
    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes": _Translation._bulk_copy,
    "mbarrier.init": _Translation._init,
    "mbarrier.inval": _Translation._inval,
    "mbarrier.arrive.expect_tx": _Translation._arrive_expect_tx,
    "mbarrier.arrive": _Translation._arrive,
    "mbarrier.try_wait.parity": _Translation._try_wait,
    "fence.proxy.async": _Translation._fence,
}
