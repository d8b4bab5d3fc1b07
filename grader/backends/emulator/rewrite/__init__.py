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

The package's modules, by job: :mod:`.tokens` (tokens, ``#line`` locations, bracket matching),
:mod:`.edits` (the result and the edit bookkeeping), :mod:`.shifts` (shift operators and their left
operands), :mod:`.macro_shifts` (macros whose shifts stay built-in), :mod:`.shared`
(``__shared__`` declarations), :mod:`.asm` (inline PTX), :mod:`.rewriter` (the pass that drives
them, and the entry points).

Public API: :func:`rewrite_source`, :func:`find_definitions`, :func:`find_shifts`,
:class:`RewriteResult`, and the ``SHIFT_*`` flags the prelude's helpers take.
"""

from grader.backends.emulator.rewrite.edits import RewriteResult
from grader.backends.emulator.rewrite.rewriter import find_definitions, rewrite_source
from grader.backends.emulator.rewrite.shifts import SHIFT_COMPOUND, SHIFT_MINUS, SHIFT_PLUS, find_shifts

__all__ = ["rewrite_source", "RewriteResult", "find_definitions", "find_shifts", "SHIFT_PLUS", "SHIFT_MINUS",
           "SHIFT_COMPOUND"]
