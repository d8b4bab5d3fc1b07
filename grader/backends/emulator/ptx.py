"""The inline PTX the emulator runs: Hopper's bulk copy into shared memory and its mbarrier; the
memory model's ld, st, atom, red, fence and membar with their semantics and scope; special registers.

The emulator compiles student code with the macros of the course's GPU (:mod:`.macros`; an H100,
``__CUDA_ARCH__`` 900), so a file's ``#if __CUDA_ARCH__ >= 900`` branch is the one it runs, as on
that GPU. Such a branch may hold inline PTX, which the host compiler cannot run (and which the
lockdown refuses: an ``asm`` can bind a name of the runtime, :mod:`.lockdown`). The rewrite hands
each ``asm`` statement's template and operands to :func:`ptx_statement`; where every instruction
is one of :data:`INSTRUCTIONS`, the statement becomes C++ calling the prelude's ``__sg_ptx_*``
functions (``runtime/prelude.h``), and the lockdown never sees an ``asm``. Any other ``asm``
statement is "not supported by the emulator" (``rewrite/asm.py``): a GPU grades that part.

The memory model (PTX ISA, "Memory Consistency Model"; "Special Registers"): an ``ld`` / ``st`` /
``atom`` / ``red`` with ordered semantics (.relaxed, .acquire, .release, .acq_rel) becomes a GCC
``__atomic`` builtin with that order, after ``__sg_scope`` (.cta, .gpu, .sys; the module's
-fsanitize=thread hooks carry the order, not the scope); .volatile a volatile access; a weak one a
plain access. ``fence.sc`` and ``membar`` are the runtime's fence yield point with the scope's code
(``__sg_yield_at``, as ``__threadfence*()``: its site names a deadlock's poll); ``fence.acq_rel`` is
``__atomic_thread_fence(__ATOMIC_ACQ_REL)`` after ``__sg_scope``, so the runtime's fence hook
receives the weaker order and the scope. A special register is read from the thread's context.

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
#: The memory model's qualifiers: semantics (none: weak), scope, state space (none: generic), a cache
#: operator or eviction hint (no effect here), the type, an address ``[op]`` or ``[op+offset]``.
_MSEM = r"(?:\.(weak|volatile|relaxed|acquire|release|acq_rel))?"
_MSCOPE = r"(?:\.(cta|cluster|gpu|sys))?"
_SPACE = r"(?:\.(global|shared(?:::cta)?))?"
_CACHE = r"(?:\.(?:nc|ca|cg|cs|lu|wb|wt)|\.L[12]::\w+)*"
_TYPE = r"\.([bsu](?:8|16|32|64)|f32|f64)"
_ADDR = rf"\[{_OP}(?: ?\+ ?(-?\d+))?\]"
#: The special registers a ``mov`` reads, and the prelude's expression for each.
_SPECIAL = {
    "laneid": "__sg_ptx_laneid()", "warpid": "__sg_ptx_warpid()",
    "lanemask_eq": "__sg_ptx_lanemask_eq()", "lanemask_lt": "__sg_ptx_lanemask_lt()",
    "lanemask_le": "__sg_ptx_lanemask_le()", "lanemask_gt": "__sg_ptx_lanemask_gt()",
    "lanemask_ge": "__sg_ptx_lanemask_ge()",
    "clock64": "__sg_clock64()", "clock": "(unsigned)__sg_clock64()", "globaltimer": "__sg_globaltimer()",
    "smid": "0u",
    **{f"{reg}.{d}": f"{var}.{d}" for reg, var in (("tid", "threadIdx"), ("ntid", "blockDim"), ("ctaid", "blockIdx"),
                                                    ("nctaid", "gridDim")) for d in "xyz"},
}
#: The conversion of an input operand to its register's type, by constraint ("r", "l", "n": as it is).
_CONVERT = {"f": "(float)", "d": "(double)", "h": "(unsigned short)"}
#: GCC's memory order of each PTX semantics; a weak access and a .volatile one are none (the prelude's codes).
_ORDERS = {None: "__SG_PTX_WEAK", "weak": "__SG_PTX_WEAK", "volatile": "__SG_PTX_VOLATILE",
           "relaxed": "__ATOMIC_RELAXED", "acquire": "__ATOMIC_ACQUIRE", "release": "__ATOMIC_RELEASE",
           "acq_rel": "__ATOMIC_ACQ_REL"}
#: The runtime's scope of each PTX scope (a cluster is a group of blocks of one GPU: taken as .gpu).
_SCOPES = {"cta": "__SG_SCOPE_BLOCK", "cluster": "__SG_SCOPE_DEVICE", "gpu": "__SG_SCOPE_DEVICE",
           "gl": "__SG_SCOPE_DEVICE", "sys": "__SG_SCOPE_SYSTEM", None: "__SG_SCOPE_DEVICE"}
#: The C++ type of each PTX type.
_CTYPES = {"b8": "unsigned char", "u8": "unsigned char", "s8": "signed char", "b16": "unsigned short",
           "u16": "unsigned short", "s16": "short", "b32": "unsigned int", "u32": "unsigned int", "s32": "int",
           "b64": "unsigned long long", "u64": "unsigned long long", "s64": "long long", "f32": "float",
           "f64": "double"}
#: The semantics each instruction takes (PTX ISA): which ones, and whether it then needs a scope.
_LD_SEMS, _ST_SEMS = {None, "weak", "volatile", "relaxed", "acquire"}, {None, "weak", "volatile", "relaxed", "release"}
_ATOM_SEMS, _RED_SEMS = {None, "relaxed", "acquire", "release", "acq_rel"}, {None, "relaxed", "release"}
#: The types each atom / red operation takes.
_ATOM_TYPES = {"add": {"u32", "s32", "u64", "f32", "f64"}, "exch": {"b32", "b64", "u32", "s32", "u64", "s64"},
               "cas": {"b32", "b64", "u32", "s32", "u64", "s64"}, "inc": {"u32"}, "dec": {"u32"},
               **{op: {"b32", "b64"} for op in ("and", "or", "xor")},
               **{op: {"u32", "s32", "u64", "s64"} for op in ("min", "max")}}
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
    # The memory model's instructions (PTX ISA, "Memory Consistency Model"; "Data Movement and
    # Conversion Instructions: ld, st"; "Parallel Synchronization and Communication Instructions:
    # fence/membar, atom, red"). Groups: semantics, scope, state space, type / operation.
    "ld": re.compile(rf"ld{_MSEM}{_MSCOPE}{_SPACE}{_CACHE}{_TYPE} {_OP}, {_ADDR}"),
    "st": re.compile(rf"st{_MSEM}{_MSCOPE}{_SPACE}{_CACHE}{_TYPE} {_ADDR}, {_OP}"),
    "atom": re.compile(rf"atom{_MSEM}{_MSCOPE}{_SPACE}\.(add|exch|cas|or|and|xor|min|max|inc|dec){_TYPE} "
                       rf"{_OP}, {_ADDR}, {_OP}(?:, {_OP})?"),
    "red": re.compile(rf"red{_MSEM}{_MSCOPE}{_SPACE}\.(add|or|and|xor|min|max|inc|dec){_TYPE} {_ADDR}, {_OP}"),
    "fence": re.compile(r"fence(?:\.(sc|acq_rel))?\.(cta|cluster|gpu|sys)"),
    "membar": re.compile(r"membar\.(cta|gl|sys)"),
    # A special register read (PTX ISA, "Special Registers").
    "mov": re.compile(rf"mov\.[bsu](32|64) {_OP}, %({'|'.join(map(re.escape, _SPECIAL))})"),
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
                  names: dict[str, int] | None = None, *, extended: bool = True) -> str | None:
    """C++ doing what an ``asm`` statement of inline PTX does, on one line, or None where an
    instruction is not one of :data:`INSTRUCTIONS` (the ``asm`` is then left to the lockdown).

    Args:
        template: the statement's template, its string literals joined and decoded.
        outputs, inputs: ``(constraint, C++ expression)`` of each operand, outputs first (``%0``...).
        names: operand index of each ``[name]`` given to an operand (``%[name]``).
        extended: whether the statement has operand sections (``asm("..." : ...)``): its template
            then writes ``%`` as ``%%`` (``%%laneid``), as GCC's and nvcc's extended asm do.

    Returns:
        A compound statement (``{ ... }``): each input evaluated once, in order, into a local; the
        prelude's ``__sg_ptx_*`` calls; an output assigned where an instruction writes one.
    """
    instructions = _instructions(template.replace("%%", "%") if extended else template)
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
        locals_ = [f"unsigned long long __sg_o{len(self.outputs) + k} = __sg_ptx_reg({_CONVERT.get(c, '')}({expr}));"
                   for k, (c, expr) in enumerate(self.inputs)]
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


    def _address(self, space: str | None, base: str, offset: str | None) -> str:
        """The generic address of ``[base+offset]`` in a state space (.shared: a shared-window address)."""
        at = f"({base} + (unsigned long long)({int(offset or 0)}ll))" if offset else base
        return f"__sg_ptx_shared({at})" if space and space.startswith("shared") else at

    @staticmethod
    def _ordered(sem: str | None, scope: str | None, allowed: set) -> bool:
        """Whether an ld / st's semantics and scope go together (PTX ISA): a scope exactly with
        .relaxed, .acquire or .release."""
        return sem in allowed and (scope is not None) == (sem in ("relaxed", "acquire", "release"))

    def _ld(self, m: re.Match[str], ops: list[str | None]) -> bool:
        """``ld{.sem}{.scope}{.space}.type d, [a]``: ordered (an __atomic load after __sg_scope),
        .volatile, or weak (a plain load)."""
        sem, scope, space, ptype = m.group(1, 2, 3, 4)
        out, base = self.target(m.group(5)), ops[5]
        if not out or base is None or not self._ordered(sem, scope, _LD_SEMS):
            return False
        addr = self._address(space, base, m.group(7))
        self.body.append(f"__sg_ptx_out({out}, __sg_ptx_ld<{_CTYPES[ptype]}, {_ORDERS[sem]}, {_SCOPES[scope]}>({addr}));")
        return True

    def _st(self, m: re.Match[str], ops: list[str | None]) -> bool:
        """``st{.sem}{.scope}{.space}.type [a], b``, as :meth:`_ld`."""
        sem, scope, space, ptype = m.group(1, 2, 3, 4)
        base, value = ops[4], ops[6]
        if base is None or value is None or not self._ordered(sem, scope, _ST_SEMS):
            return False
        addr = self._address(space, base, m.group(6))
        self.body.append(f"__sg_ptx_st<{_CTYPES[ptype]}, {_ORDERS[sem]}, {_SCOPES[scope]}>({addr}, {value});")
        return True

    def _atom(self, m: re.Match[str], ops: list[str | None]) -> bool:
        """``atom{.sem}{.scope}{.space}.op.type d, [a], b(, c)``: no semantics is .relaxed, no scope .gpu."""
        sem, scope, space, op, ptype = m.group(1, 2, 3, 4, 5)
        out, base, b, c = self.target(m.group(6)), ops[6], ops[8], ops[9]
        if out is None or base is None or b is None or (op == "cas") != (m.group(10) is not None) \
                or (op == "cas" and c is None) or sem not in _ATOM_SEMS or ptype not in _ATOM_TYPES[op]:
            return False
        call = self._atomic(sem, scope, space, op, ptype, self._address(space, base, m.group(8)), b, c or "0ull")
        self.body.append(f"__sg_ptx_out({out}, {call});" if out else f"{call};")
        return True

    def _red(self, m: re.Match[str], ops: list[str | None]) -> bool:
        """``red{.sem}{.scope}{.space}.op.type [a], b``: an atom whose old value is not kept."""
        sem, scope, space, op, ptype = m.group(1, 2, 3, 4, 5)
        base, b = ops[5], ops[7]
        if base is None or b is None or sem not in _RED_SEMS or ptype not in _ATOM_TYPES[op]:
            return False
        self.body.append(self._atomic(sem, scope, space, op, ptype, self._address(space, base, m.group(7)), b,
                                      "0ull") + ";")
        return True

    @staticmethod
    def _atomic(sem: str | None, scope: str | None, space: str | None, op: str, ptype: str, addr: str, b: str,
                c: str) -> str:
        """The prelude's call doing an atom or red (its old value, a register)."""
        order = _ORDERS[sem or "relaxed"]
        return f"__sg_ptx_atom<{_CTYPES[ptype]}, __SG_A_{op.upper()}, {order}, {_SCOPES[scope]}>({addr}, {b}, {c})"

    def _memory_fence(self, m: re.Match[str], ops: list[str | None]) -> bool:
        """``fence{.sc,.acq_rel}.scope`` (no semantics: .acq_rel) and ``membar.{cta,gl,sys}`` (fence.sc):
        fence.sc is the runtime's fence yield point with its scope (as ``__threadfence()`` is);
        fence.acq_rel is ``__atomic_thread_fence(__ATOMIC_ACQ_REL)`` after ``__sg_scope``, which the
        runtime's fence hook receives with its order."""
        sem, scope = ("sc", m.group(1)) if m.re is INSTRUCTIONS["membar"] else (m.group(1) or "acq_rel", m.group(2))
        scope = _SCOPES[scope]
        self.body.append(f"__sg_ptx_fence_sc({scope});" if sem == "sc" else f"__sg_ptx_fence_acq_rel<{scope}>();")
        return True

    def _special(self, m: re.Match[str], ops: list[str | None]) -> bool:
        """``mov.{b,s,u}{32,64} d, %sreg``: a special register's value (32 bits: its low ones)."""
        out = self.target(m.group(2))
        if not out:
            return False
        value = f"(unsigned long long)({_SPECIAL[m.group(3)]})"
        if m.group(1) == "32":
            value = f"(unsigned long long)(unsigned)({_SPECIAL[m.group(3)]})"
        self.body.append(f"__sg_ptx_out({out}, {value});")
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
    "ld": _Translation._ld,
    "st": _Translation._st,
    "atom": _Translation._atom,
    "red": _Translation._red,
    "fence": _Translation._memory_fence,
    "membar": _Translation._memory_fence,
    "mov": _Translation._special,
}
