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
    names = names or {}
    count = len(outputs) + len(inputs)

    def index(op: str) -> int | None:
        if op.startswith("%["):
            return names.get(op[2:-1])
        return int(op[1:]) if op.startswith("%") and int(op[1:]) < count else None

    def value(op: str | None) -> str | None:
        """An input operand read (its local), or an integer as written; None for anything else."""
        if op is None or op == "_":
            return None
        if not op.startswith("%"):
            return f"{int(op)}ull" if re.fullmatch(r"-?\d+", op) else None
        k = index(op)
        return None if k is None or k < len(outputs) else f"__sg_o{k}"

    def target(op: str) -> str | None:
        """An operand written: an output's expression, or None for ``_`` (a sink)."""
        if op == "_":
            return ""
        k = index(op)
        return None if k is None or k >= len(outputs) else f"({outputs[k][1]})"

    preds: set[str] = set()
    waits: dict[str, tuple[str, str]] = {}  # predicate -> (mbarrier, parity)
    body: list[str] = []
    for ins in instructions:
        regs = _REG.fullmatch(ins)
        if regs:
            preds |= {p.strip() for p in regs.group(1).split(",")}
            continue
        selp = _SELP.fullmatch(ins)
        if selp:
            out, pred = target(selp.group(1)), selp.group(2)
            if not out or pred not in waits:
                return None
            body.append(f"{out} = __sg_ptx_mbarrier_wait_parity({waits[pred][0]}, {waits[pred][1]});")
            continue
        for name, pattern in INSTRUCTIONS.items():
            m = pattern.fullmatch(ins)
            if m:
                break
        else:
            return None
        ops = [value(g) for g in m.groups()]
        if name == "cp.async.bulk.prefetch.L2.global":
            if None in ops:
                return None
        elif name == "fence.proxy.async":
            body.append("__sg_ptx_fence();")
        elif name == "mbarrier.init":
            if None in ops:
                return None
            body.append(f"__sg_ptx_mbarrier_init({ops[0]}, {ops[1]});")
        elif name == "mbarrier.inval":
            if None in ops:
                return None
            body.append(f"__sg_ptx_mbarrier_inval({ops[0]});")
        elif name in ("mbarrier.arrive", "mbarrier.arrive.expect_tx"):
            state = target(m.group(1))
            bar = ops[1]
            third = ops[2] if len(ops) > 2 and m.group(3) is not None else None
            if state is None or bar is None or (m.group(3) is not None and third is None):
                return None
            count, tx = ("1ull", third) if name.endswith("expect_tx") else (third or "1ull", "0ull")
            call = f"__sg_ptx_mbarrier_arrive({bar}, {count}, {tx})"
            body.append(f"{state} = {call};" if state else f"{call};")
        elif name == "mbarrier.try_wait.parity":
            pred, bar, parity = m.group(1), ops[1], ops[2]
            if pred not in preds or bar is None or parity is None:
                return None
            waits[pred] = (bar, parity)
        else:  # the bulk copy
            dst, src, size, bar = ops
            if None in ops:
                return None
            body.append(f"{{ __sg_ptx_chunk *__sg_d = (__sg_ptx_chunk *)__cvta_shared_to_generic((size_t){dst}); "
                        f"const __sg_ptx_chunk *__sg_s = (const __sg_ptx_chunk *)(size_t){src}; "
                        f"unsigned long long __sg_m = __sg_ptx_steps_mark(); "  # one instruction: one step
                        f"for (unsigned long long __sg_k = 0; __sg_k < ({size}) / 16; ++__sg_k) "
                        f"__sg_d[__sg_k] = __sg_s[__sg_k]; __sg_ptx_steps_one_since(__sg_m); }} "
                        f"__sg_ptx_complete_tx({bar}, {size});")
    if waits and not any("__sg_ptx_mbarrier_wait_parity" in b for b in body):
        return None  # a wait whose predicate no selp reads: what it found would be lost
    locals_ = [f"unsigned long long __sg_o{len(outputs) + k} = (unsigned long long)({expr});"
               for k, (_, expr) in enumerate(inputs)]
    return "{ " + " ".join(locals_ + body) + " }"
