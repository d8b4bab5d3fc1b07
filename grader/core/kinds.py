"""Failure kinds: one table, from which everything else about a kind is derived.

A case that does not pass has a ``kind`` (:attr:`grader.core.results.CaseResult.kind`): the grader's
own (``mismatch``, ``input-modified``...), a finding of a checker (the emulator's checks or NVIDIA
compute-sanitizer: ``race``, ``out-of-bounds``, ``barrier-divergence``...), a fault of the kernel
(``illegal-address``, ``trap``...) or of the process running it (``crash``). :data:`KINDS` says,
for each, the case status it gives (its verdict), the group the class report lists it under, and a
line for people. Both backends report the same kinds, so one file gets the same verdict and the
same kind on a GPU and on the emulator.

Adding a kind means adding a row here (and raising it where it is found); tests/core/test_kinds.py checks
every kind the grader can report against this table: the emulator runtime's own table of the kinds
it reports (``runtime/sg_kinds.h``), its executor's, the GPU backend's, and every ``kind="..."``
given in the grader's code.

A kind not in the table that reaches the grader anyway is a bug of the grader, not of the
submission. In production it is graded gracefully (an ``error`` case: "could not be graded"); where
the environment variable :data:`STRICT_ENV` is ``1`` (the test suite sets it, tests/conftest.py, and
the part workers it starts inherit it) :func:`verdict_of` and :func:`cause_rank` raise
:class:`UnknownKind` instead, so a test sees the missing row instead of an ``error`` verdict.

Warnings are findings that cannot change the output by themselves (a read of shared memory nobody
wrote, when the output does not depend on it; a shift the GPU clamps): they are reported with the
case, which still passes on its output.

A case that fails for several reasons lists every finding, each kind once, in cause order
(:data:`CAUSES`, :func:`in_cause_order`): a broken contract first (no ticket, a modified input), then
races, out-of-bounds accesses, divergence, undefined behaviour, faults, and wrong values last, so the
first is the most likely cause: a race or an out-of-bounds write explains a wrong value, never the
other way round.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")

__all__ = ["Kind", "KINDS", "STRICT_ENV", "UnknownKind", "CAUSES", "CHECK_KINDS", "CRASH_KINDS", "WARNING_KINDS", "FAULT_KINDS", "verdict_of",
           "group_of", "GROUPS", "cause_rank", "in_cause_order"]

#: The causes a finding can be, in the order a case lists them: the first is the most likely cause
#: of what follows it (a race explains a wrong value; a wrong value explains nothing). ``stop``: the
#: run itself could not finish (a timeout, a crash, a refused launch), which never comes with others.
CAUSES = ("stop", "contract", "race", "out-of-bounds", "divergence", "undefined", "fault", "value")


@dataclass(frozen=True)
class Kind:
    """One failure kind.

    Attributes:
        name: the kind's string, as results carry it (``race``).
        verdict: the status of a case that fails this way: ``fail``, ``crash``, ``error``,
            ``timeout`` or ``not-run`` (a :class:`grader.core.results.CaseStatus` value).
        group: the class report's group for it (``wrong-result`` gathers ``mismatch`` and ``ticket``).
        description: what it means, in one line.
        check: found by a checker (the emulator's checks, or compute-sanitizer on a GPU).
        fault: a fault of the kernel that stops it on a GPU (the context is lost).
        warning: may also be reported as a warning, which does not fail a case by itself.
        cause: where a finding of this kind stands in a case's list of findings (one of
            :data:`CAUSES`).
    """

    name: str
    verdict: str
    group: str
    description: str
    check: bool = False
    fault: bool = False
    warning: bool = False
    cause: str = "stop"


def _k(name: str, verdict: str, description: str, *, group: str | None = None, cause: str = "stop",
       **flags: bool) -> Kind:
    return Kind(name, verdict, group or name, description, cause=cause, **flags)


#: Every kind, in the order the class report lists its groups on a tie.
KINDS: dict[str, Kind] = {k.name: k for k in (
    _k("compile-error", "not-run", "the file does not compile"),
    _k("missing", "not-run", "the file is missing from the submission"),
    _k("timeout", "timeout", "a case ran past its deadline (a hang, or far too slow)"),
    _k("crash", "crash", "the process running the part crashed"),
    _k("sandbox-violation", "crash", "the module made a system call the sandbox forbids (fork, exec, sockets...)"),
    _k("resource-limit", "crash", "the module exceeded a limit of the sandbox (CPU time, file size)"),
    _k("mismatch", "fail", "an output differs from the sequential reference scan", group="wrong-result",
       cause="value"),
    _k("ticket", "fail", "Part 5's tile counter does not count one ticket per block", group="wrong-result",
       cause="contract"),
    _k("wrong-after-timing", "fail", "the output was wrong after the timed runs (work skipped on a repeated "
       "launch?)", cause="value"),
    _k("faster-than-copy", "fail", "timed faster than a device-to-device copy of the same bytes, which no scan "
       "can be (work skipped on timed launches?)", cause="value"),
    _k("out-of-bounds", "fail", "a read or write outside a buffer or a __shared__ array", check=True,
       cause="out-of-bounds"),
    _k("race", "fail", "two threads accessed the same memory, one writing, with no barrier between them",
       check=True, cause="race"),
    _k("stale-read", "fail", "a GPU may give a load its word's older value (the PTX memory model allows it there), "
       "and with it the output is wrong (a warning where it is still right)", check=True, warning=True,
       cause="race"),
    _k("barrier-divergence", "fail", "threads of a block waited at different barriers, or a warp mask is wrong",
       check=True, cause="divergence"),
    _k("deadlock", "fail", "every thread spin-waits and nothing changes", check=True, cause="divergence"),
    _k("early-exit", "fail", "threads exited while others of the block wait at a __syncthreads() (allowed since "
       "Volta: a warning)", warning=True, cause="divergence"),
    _k("warp-convergence", "fail", "__activemask() returned lanes that depend on where a GPU reconverges the warp "
       "(unspecified in CUDA: a warning)", warning=True, cause="divergence"),
    _k("uninitialized-read", "fail", "the output depends on shared memory no thread had written", check=True,
       warning=True, cause="undefined"),
    _k("misaligned", "fail", "an access at an address not a multiple of its size", check=True, fault=True,
       cause="out-of-bounds"),
    _k("shift-clamped", "fail", "a shift by the width of its type or more, which a GPU clamps (0, or -1)",
       warning=True, cause="undefined"),
    _k("undefined-shift", "fail", "a shift by the width of its type or more, undefined in C++", cause="undefined"),
    _k("illegal-address", "fail", "the kernel accessed memory that is not allocated (a wild or null pointer)",
       fault=True, cause="out-of-bounds"),
    _k("illegal-instruction", "fail", "the kernel executed an illegal instruction", fault=True, cause="fault"),
    _k("launch-failure", "fail", "the kernel stopped on the GPU (an unspecified launch failure)", fault=True,
       cause="fault"),
    _k("assert", "fail", "a device assert() failed", fault=True, cause="fault"),
    _k("trap", "fail", "__trap() or __brkpt() was called", fault=True, cause="fault"),
    _k("stack-overflow", "fail", "a thread overflowed its stack (a large local array or deep recursion)",
       fault=True, cause="fault"),
    _k("division-by-zero", "fail", "a thread divided an integer by zero", cause="undefined"),
    _k("input-modified", "fail", "the kernel wrote to its read-only input", cause="contract"),
    _k("shared-memory-limit", "error", "static and dynamic shared memory of a block exceed the limit"),
    _k("launch-refused", "error", "the launch configuration was refused (block size, shared memory, parameters)"),
    _k("unsupported", "error", "the kernel used a feature the emulator does not emulate"),
    _k("cuda-error", "error", "the CUDA driver reported an error"),
    _k("internal", "error", "the emulator itself failed"),
    _k("error", "error", "the grader could not run the part"),
)}

#: Kinds found by a checker (emulator checks, compute-sanitizer).
CHECK_KINDS = frozenset(k.name for k in KINDS.values() if k.check)
#: Kinds of the process running the case dying: the next case runs in a new process.
CRASH_KINDS = frozenset(k.name for k in KINDS.values() if k.verdict == "crash")
#: Kinds that can be reported as warnings (they do not fail a case by themselves).
WARNING_KINDS = frozenset(k.name for k in KINDS.values() if k.warning)
#: GPU faults: the CUDA context is lost, so the part's next case runs in a new worker.
FAULT_KINDS = frozenset(k.name for k in KINDS.values() if k.fault)
#: The class report's groups, in order, with the description of their first kind.
GROUPS: dict[str, str] = {}
for _kind in KINDS.values():
    GROUPS.setdefault(_kind.group, _kind.description)
GROUPS["wrong-result"] = "an output differs from the sequential reference scan"


#: The environment variable that makes a kind not in :data:`KINDS` an :class:`UnknownKind` error
#: (``1``) rather than an ``error`` verdict; the test suite sets it.
STRICT_ENV = "SCANGRADE_STRICT_KINDS"


class UnknownKind(Exception):
    """A failure kind that is no row of :data:`KINDS` reached the grader while :data:`STRICT_ENV` is
    ``1``: a bug of the grader (a kind raised without its row), never of the submission. Not a
    :class:`grader.core.errors.ScangradeError`, which the grader turns into a graded result."""


def _row(kind: str | None) -> Kind | None:
    """The row of ``kind``, or None for a kind not in :data:`KINDS` (:class:`UnknownKind` when strict)."""
    k = KINDS.get(kind or "")
    if k is None and os.environ.get(STRICT_ENV) == "1":
        raise UnknownKind(f"failure kind {kind!r} is not a row of grader.core.kinds.KINDS: add its row (verdict, "
                          f"group, description, cause), docs/architecture.md, 'How to add... a failure kind'")
    return k


def cause_rank(kind: str) -> int:
    """Where a finding of ``kind`` stands in a case's list (its cause's index in :data:`CAUSES`; a kind
    not in :data:`KINDS` counts as a fault).

    Raises:
        UnknownKind: ``kind`` is not in :data:`KINDS` and :data:`STRICT_ENV` is ``1``.
    """
    k = _row(kind)
    return CAUSES.index(k.cause if k else "fault")


def in_cause_order(findings: Iterable[T], kind: Callable[[T], str] = lambda f: f.kind) -> list[T]:
    """``findings`` in cause order (see :data:`CAUSES`), the first of each kind only; findings of one
    cause keep the order they came in (a stable sort)."""
    seen: set[str] = set()
    unique = []
    for f in findings:
        if kind(f) not in seen:
            seen.add(kind(f))
            unique.append(f)
    return sorted(unique, key=lambda f: cause_rank(kind(f)))


def verdict_of(kind: str | None) -> str:
    """The case status a failure of ``kind`` gives (``error`` for a kind not in :data:`KINDS`).

    Raises:
        UnknownKind: ``kind`` is not in :data:`KINDS` and :data:`STRICT_ENV` is ``1``.
    """
    k = _row(kind)
    return k.verdict if k else "error"


def group_of(kind: str) -> str:
    """The class report's group of ``kind`` (``kernel-error:<kind>`` for one not in :data:`KINDS`, even
    when strict: the class report reads stored results, which may come from another version)."""
    k = KINDS.get(kind)
    return k.group if k else f"kernel-error:{kind}"
