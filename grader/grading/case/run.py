"""Running one correctness case (:func:`run_case`): the part's launch plan under each thread order
of the emulator's checks, on sampled blocks above ``emulator.checks_max_n``, again with a second
shared-memory fill where the output may depend on unwritten shared memory; what a checker or the
kernel's errors found, told in cause order, becomes the case's result."""

from __future__ import annotations

import dataclasses
import time
from typing import NamedTuple

import numpy as np

from grader.backends.base import Backend, Module
from grader.assignment.config import Config
from grader.core.errors import KernelError, LaunchError
from grader.assignment.parts import DTYPES, PartSpec
from grader.assignment.plans import GUARD, Guarded, Plan, Run, prepare
from grader.core.kinds import WARNING_KINDS, in_cause_order, verdict_of
from grader.core.results import CaseFinding, CaseResult, CaseStatus, FailureKind, Mismatch
from grader.grading.case.cases import CaseSpec
from grader.grading.case.checks import check_run, error_bound, explain_tile_hint
from grader.grading.case.inputs import DrawAhead, case_input


#: Thread orders a checking run of the emulator tries, in turn: ascending order hides races (the
#: random one also switches threads at memory accesses: grader.backends.emulator.backend.INTERLEAVE).
CHECK_SCHEDULES = ("ascending", "descending", "random")
#: The ``checker`` of a case above ``emulator.checks_max_n`` whose checks ran on sampled blocks
#: (:func:`run_case`'s ``sampled``); ``emulator checks`` for a case checked whole.
SAMPLED_CHECKER = "emulator checks (sampled blocks)"
#: Where a part's blocks are independent, the accesses of each sampled block the checks see; the rest
#: of the block runs unchecked (the runtime's ``SG_SAMPLED_BLOCK_CHECKS``, in ``sg_host.h``). Every
#: access is checked at the sizes up to ``checks_max_n``; without a bound, a block that does the whole
#: launch's work (one thread scanning everything) would be checked access by access at every size.
SAMPLED_BLOCK_CHECKS = 1 << 20
#: The 32-bit patterns shared memory holds before a correctness case (on the emulator, every block's
#: shared memory at its start; on a GPU, every multiprocessor's, written by a kernel just before):
#: the first for every run, the second for the run again that tells whether the output depends on
#: shared memory no thread wrote. Neither is an identity of a sum (0), and they differ in every bit.
SHARED_FILLS = (0x7F7F7F7F, 0x80808080)


def _set_shared_fill(backend: Backend, pattern: int) -> bool:
    """Make the next launches find ``pattern`` in unwritten shared memory; False where the backend
    cannot (then a case is not run again with a second fill)."""
    if hasattr(backend, "shared_fill"):  # the emulator: each block's arena is filled at its start; a GPU:
        backend.shared_fill = pattern    # every multiprocessor's, before each launch (poison_shared)
        return True
    return False


def _warning_lines(findings) -> tuple[str, ...]:
    """One line per warning finding, deduplicated by kind and line, in the order found."""
    seen, out = set(), []
    for f in findings:
        key = (f.kind, f.file, f.line)
        if key not in seen:
            seen.add(key)
            out.append(f"{f.kind}: {f.message}")
    return tuple(out)


#: How a ``stale-read`` finding of the emulator ends where it gave the load the older value
#: (runtime/rt_checks.inc, report_chain); one that could not give it explains no output.
STALE_GIVEN = ": the emulator gave it the older value"


def _stale_given(findings) -> list:
    """The ``stale-read`` findings among ``findings`` whose older value the emulator gave the load."""
    return [f for f in findings if f.kind == "stale-read" and f.message.rstrip(". ").endswith(STALE_GIVEN)]


def _fill_changed(first: np.ndarray, second: np.ndarray, dtype: np.dtype, *, tol: np.ndarray | None) -> np.ndarray:
    """Indices where two runs of a case, with unwritten shared memory filled with the two
    :data:`SHARED_FILLS`, give outputs that differ beyond rounding (``first``, ``second``: the
    outputs' 32-bit words, shape (n,); ``tol``: the case's :func:`grader.grading.case.checks.error_bound`).

    Integers must be equal bit for bit. A float32 output may differ in its last bits from one run
    to the next without any unwritten memory: a decoupled look-back sums its predecessors in the
    order their status words became visible, and float addition is not associative. So floats of
    a fractional input count as changed only beyond the case's error bound (None: exact inputs,
    where every order gives the same bits); a fill of about 3.4e38 that reaches the output changes
    it far beyond that."""
    if np.dtype(dtype).kind != "f" or tol is None:
        return np.flatnonzero(first != second)
    a = first.view(np.float32).astype(np.float64)
    b = second.view(np.float32).astype(np.float64)
    return np.flatnonzero((first != second) & ~(np.abs(a - b) <= 2 * tol))


def _output_bits(run: Run, plan: Plan, n: int) -> np.ndarray:
    return run.backend.to_host(plan.out.full)[GUARD:GUARD + n].view(np.uint32).copy()


def run_case(backend: Backend, module: Module, *, cfg: Config, part: PartSpec, case: CaseSpec,
             schedules: tuple[str, ...] = (), checked=None, checker: str | None = None,
             known: tuple[CaseFinding, ...] = (), ahead: DrawAhead | None = None, sampled: bool = False,
             plain: bool = True) -> CaseResult:
    """Run and check one correctness case; failures of the kernel become a failing CaseResult.

    Args:
        schedules: on a backend with ``set_schedule`` (the emulator), run the case under each of
            these thread orders in turn (the random one seeded by the case's seed); the first
            order that fails is reported. Empty: the backend's current order only.
        sampled: on the emulator, a case too large to check whole (n above
            ``emulator.checks_max_n``): the checks run on the first, the last and
            ``backend.sample_drawn`` blocks drawn from the case's seed of each launch, under
            ``schedules``, and a finding fails the case as it does a smaller one. Where the part's
            blocks are independent (:attr:`grader.assignment.parts.PartSpec.independent_blocks`) only those
            blocks run there, and where they find nothing a plain run of every block (the
            backend's checks as they are) judges the output (``plain``; False: not run, the GPU
            path's checks, whose output the GPU judges); elsewhere every block runs in each order,
            the checks in the sampled ones only, and each output is judged.
        checked: on a GPU, what compute-sanitizer found in this case (a
            :class:`grader.grading.sanitizer.CaseChecks`: its audit, or its fallback where the emulator
            cannot run the part), or a failing CaseResult of the emulator's checks: a finding fails
            the case (the kernel is not run again), as the emulator's checks fail a case whatever
            its output.
        checker: what checked the case beyond its output, for the result (``compute-sanitizer``,
            ``emulator checks``); None: the output only.
        known: the findings of the part's earlier cases: a case whose checks did not run (None
            ``checker``) takes a hint from them where one explains its wrong output (a race found at
            a smaller size, for an output wrong only in its last tile).
        ahead: inputs drawn ahead (:class:`grader.grading.case.inputs.DrawAhead`); the case's is taken
            from it where drawn.

    Every finding: a kernel whose checks found something that did not stop it (a race) still has
    its buffers checked (guard zones, input, output, Part 5's ticket); one that was stopped (an
    out-of-bounds access, a divergence, a fault) has its guard zones and input checked. The case
    lists what was found, each kind once, in cause order (:func:`grader.core.kinds.in_cause_order`),
    and takes the first's kind; its message tells the first in full.

    Fresh state: each run of the case's launch plan (each thread order's, the plain run's, a run
    again with the second fill) starts from the module's ``__device__`` variables as loaded
    (:meth:`grader.backends.base.Backend.fresh_globals`), and the emulator's clocks count the
    thread's own work (docs/emulator.md, "Clocks"): the run whose output is judged behaves as the
    checked runs did, whatever the kernel counts or times (docs/security.md, "The checked run and
    the graded run").

    Unwritten shared memory: before the case, shared memory holds :data:`SHARED_FILLS`'s first
    pattern (both backends). When the output is wrong (and the checks found nothing in the kernel),
    or the emulator saw a read of shared memory no thread wrote, the case runs again with the
    second pattern: if the output changes, it depends on unwritten shared memory and the case fails
    as ``uninitialized-read``; if it does not, such a read is a warning of a passing case (its
    values never reach the output).

    Raises nothing for problems of the submission; only grader bugs propagate.
    """
    pc = cfg.parts[part.key]
    points = pc.points_per_case
    t0 = time.perf_counter()
    warnings: list[str] = []

    def result(status: CaseStatus, message: str = "", mismatch: Mismatch | None = None,
               kind: str | None = None, findings: tuple[CaseFinding, ...] = ()) -> CaseResult:
        return CaseResult(name=case.name, n=case.n, dtype=case.dtype, seed=case.seed, status=status,
                          points=points if status == CaseStatus.PASS else 0.0, max_points=points, message=message,
                          mismatch=mismatch, elapsed_ms=(time.perf_counter() - t0) * 1e3, visibility=case.visibility,
                          kind=kind, warnings=tuple(dict.fromkeys(warnings)), checker=checker, findings=findings)

    try:
        return _run_case(backend, module, cfg=cfg, part=part, case=case, schedules=schedules, checked=checked,
                         result=result, warnings=warnings, known=known if checker is None else (), ahead=ahead,
                         sampled=sampled, plain=plain)
    except KernelError as exc:  # a GPU fault reported by a copy after the launches (pycuda_backend._copy)
        return result(verdict_of(exc.kind), f"the kernel failed ({exc.kind}): {exc}", kind=exc.kind)
    finally:
        if getattr(backend, "poison_shared", None) is not None:
            backend.shared_fill = None  # no fill before the launches of timing


#: Compiler notes a wrong-values finding shows (the first ones, in source order).
NOTES_SHOWN = 3


def with_compiler_notes(result: CaseResult, notes: list[str], earlier: list[CaseResult]) -> CaseResult:
    """``result`` with what the compiler warns about in the student's own lines that can make values
    wrong (``notes``, from :meth:`grader.backends.emulator.build.Toolchain.compiler_notes` for this
    case's dtype) added to its wrong-values (``mismatch``) finding, and to its message where that
    finding comes first; where the part's cases of every other dtype that ran (``earlier``) passed,
    the note says so: ``int32 passes, float32 fails; the compiler warns: part5_single_pass.cu:42
    converts float to int``. ``result`` as it is without notes or a mismatch."""
    if not notes or not any(f.kind == FailureKind.MISMATCH for f in result.findings):
        return result
    others = [c for c in earlier if c.dtype != result.dtype and c.status != CaseStatus.NOT_RUN]
    head = ""
    if others and all(c.status == CaseStatus.PASS for c in others):
        head = f"{', '.join(sorted({c.dtype for c in others}))} passes, {result.dtype} fails; "
    more = f" (and {len(notes) - NOTES_SHOWN} more)" if len(notes) > NOTES_SHOWN else ""
    note = f" — {head}the compiler warns: {'; '.join(notes[:NOTES_SHOWN])}{more}"
    findings = tuple(dataclasses.replace(f, message=f.message + note) if f.kind == FailureKind.MISMATCH else f
                     for f in result.findings)
    message = result.message + note if result.findings[0].kind == FailureKind.MISMATCH else result.message
    return dataclasses.replace(result, message=message, findings=findings)


#: Characters of a source line a finding keeps (:func:`with_source_lines`).
CODE_CHARS = 160


def with_source_lines(result: CaseResult, source: str, filename: str) -> CaseResult:
    """``result`` with each finding's line of the student's file quoted: ``code`` for its ``line``
    and ``other_code`` for its ``other_line``, where ``file`` (``other_file``) is ``filename`` (the
    part's file, whose text is ``source``), stripped and cut to :data:`CODE_CHARS` characters;
    ``result`` as it is where no finding has such a line."""
    lines = source.splitlines()

    def quoted(file: str | None, line: int | None) -> str | None:
        if file != filename or line is None or not 1 <= line <= len(lines):
            return None
        text = lines[line - 1].strip()
        return text if len(text) <= CODE_CHARS else text[:CODE_CHARS - 1] + "…"
    findings = tuple(dataclasses.replace(f, code=quoted(f.file, f.line), other_code=quoted(f.other_file, f.other_line))
                     for f in result.findings)
    return result if findings == result.findings else dataclasses.replace(result, findings=findings)


class _WordedFinding(NamedTuple):
    """A finding and its wording: the text a case's message gives it when it comes first."""

    finding: CaseFinding
    text: str


def _ids(t: tuple[int, int, int]) -> str:
    return f"({t[0]}, {t[1]}, {t[2]})"


def _failed(kinds_found: list[_WordedFinding], result, mismatch: Mismatch | None, suffix: str = "") -> CaseResult:
    """The failing result of a case: its findings in cause order, the first's text as the message."""
    told = in_cause_order(kinds_found, kind=lambda t: t.finding.kind)
    first = told[0].finding
    return result(verdict_of(first.kind), told[0].text + suffix, mismatch, first.kind,
                  tuple(t.finding for t in told))


def _checker_findings(found: list) -> list[_WordedFinding]:
    """A checker's findings of a case (``grader.backends.base.Finding``: compute-sanitizer's, or the
    emulator's that it cannot make), each told."""
    told = []
    for f in found:
        text = f"the kernel failed ({f.kind}): {f.message}"
        if f.block is not None and f.thread is not None:
            text += f" (block {_ids(f.block)}, thread {_ids(f.thread)})"
        told.append(_WordedFinding(CaseFinding.of(f), text))
    return told


def _kernel_findings(exc: KernelError, where: str) -> list[_WordedFinding]:
    """What stopped or was found in a kernel: the error's findings that are not warnings (from a
    checker), or the error itself. The error's own kind is told as the error's text (it lists the
    other findings' lines), the others as their message with the thread."""
    head = f"the kernel failed ({exc.kind}){where}: "
    found = [f for f in getattr(exc, "findings", None) or () if f.kind not in WARNING_KINDS]
    if not found:
        return [_WordedFinding(CaseFinding(exc.kind, str(exc)), head + str(exc))]
    told = []
    for f in found:
        text = f"the kernel failed ({f.kind}){where}: {f.message}"
        if f.block is not None and f.thread is not None:
            text += f" (block {_ids(f.block)}, thread {_ids(f.thread)})"
        if f.kind == exc.kind and not any(t.finding.kind == exc.kind for t in told):
            text = head + str(exc)
        told.append(_WordedFinding(CaseFinding.of(f), text))
    return told


class _Launched(NamedTuple):
    """One run of a case's launch plan: its buffers, and the KernelErrors its launches raised (a
    launch that raised with its kernel completed, as for a race, lets the next one run)."""

    run: Run
    plan: Plan
    d_in: Guarded
    errors: list[KernelError]

    @property
    def completed(self) -> bool:
        """Whether every launch of the plan ran to its end (no finding or fault stopped a kernel)."""
        return all(getattr(e, "completed", False) for e in self.errors)


def _run_case(backend, module, *, cfg, part, case, schedules, checked, result, warnings, known, ahead,
              sampled, plain) -> CaseResult:
    pc = cfg.parts[part.key]
    dtype = DTYPES[case.dtype]
    if isinstance(checked, CaseResult):  # the emulator's checks, standing in for compute-sanitizer
        return result(checked.status, checked.message, checked.mismatch, checked.kind, checked.findings)
    found = [f for f in getattr(checked, "findings", ())]
    if found:  # compute-sanitizer's findings (the audit, or its fallback where the emulator cannot run the part)
        told = in_cause_order(_checker_findings(found), kind=lambda t: t.finding.kind)
        first = told[0].finding
        others = [f for f in found if (f.kind, f.message) != (first.kind, first.message)]
        message = told[0].text + "".join(f"\nalso: {f.kind} at {f.file}:{f.line}" for f in others[:5])
        return result(verdict_of(first.kind), message + " — found by compute-sanitizer", kind=first.kind,
                      findings=tuple(t.finding for t in told))
    x, expected = case_input(cfg, part, case.n, case.seed, dtype, ahead, fractional=case.fractional)
    take_warnings = getattr(backend, "take_warnings", None)
    given: list = []  # the stale-read warnings whose older value the emulator gave a load (_stale_given)

    def launch(fill: int, where: str) -> _Launched | CaseResult:
        _set_shared_fill(backend, fill)
        run = Run(backend, module, dtype)
        d_in = run.buffer("in", case.n, x, output=False)
        errors: list[KernelError] = []
        try:
            plan = prepare(run, part, pc, d_in, case.n)
            # Every run starts from the module's __device__ variables as loaded: the run whose output
            # is judged then sees the launch numbers its checked run saw (docs/security.md).
            backend.fresh_globals(module)
            plan.reset()
            for step in plan.launches:
                try:
                    step()
                except KernelError as exc:
                    kept = [f for f in getattr(exc, "findings", None) or () if f.kind in WARNING_KINDS]
                    warnings.extend(_warning_lines(kept))
                    given.extend(_stale_given(kept))
                    if verdict_of(exc.kind) != CaseStatus.FAIL:  # a crash, an error: nothing to check
                        return result(verdict_of(exc.kind), f"the kernel failed ({exc.kind}){where}: {exc}",
                                      kind=exc.kind)
                    errors.append(exc)
                    if not getattr(exc, "completed", False):
                        break
        except LaunchError as exc:
            return result(CaseStatus.ERROR, f"launch refused: {exc}", kind=FailureKind.LAUNCH_REFUSED)
        finally:
            if take_warnings is not None:
                kept = take_warnings()
                warnings.extend(_warning_lines(kept))
                given.extend(_stale_given(kept))
        return _Launched(run, plan, d_in, errors)

    def orders(schedules: tuple[str, ...], *, output: bool, note: str = "") -> _Found | CaseResult:
        """The runs of the case in each of ``schedules`` in turn (the backend's current order where
        empty, or where the backend has no orders), up to the first that finds something; ``output``:
        whether a run's output and the part's own checks are judged (not in a run of sampled blocks
        only); ``note``: what a finding's text says of how the case was checked."""
        set_schedule = getattr(backend, "set_schedule", None) if schedules else None
        sees_reads = take_warnings is not None and getattr(backend, "checks", False) is True
        for schedule in (schedules if set_schedule else [None]):
            order = f"emulator thread order: {schedule}" if schedule and schedule != schedules[0] else ""
            where = f" ({'; '.join(filter(None, (note, order)))})" if note or order else ""
            if set_schedule:
                set_schedule(schedule, seed=case.seed)
            before, given_before = len(warnings), len(given)
            launched = launch(SHARED_FILLS[0], where)
            if isinstance(launched, CaseResult):
                return launched
            if getattr(backend, "sample", None) == "only" and any(e.kind == "deadlock" for e in launched.errors):
                # The sampled blocks wait on blocks that were not run: every block runs from now on.
                del launched
                backend.sample = "all"
                launched = launch(SHARED_FILLS[0], where)
                if isinstance(launched, CaseResult):
                    return launched
            kernel = [t for exc in launched.errors for t in _kernel_findings(exc, where)]
            own, mm = check_run(launched.run, launched.plan, launched.d_in, x, expected, part=part, pc=pc, cfg=cfg,
                                completed=launched.completed, output=output)
            told = kernel + [_WordedFinding(f, f.message) for f in own]
            unwritten = [w for w in warnings[before:] if w.startswith("uninitialized-read")]
            stale = given[given_before:]
            if mm is not None and stale and not kernel:
                # The emulator gave a load an older value the PTX memory model allows (a stale-read
                # warning), and the output is wrong: that read is the likeliest cause.
                f = stale[0]
                text = f"{f.message}; with that value the output is wrong{where}"
                if f.block is not None and f.thread is not None:
                    text += f" (block {_ids(f.block)}, thread {_ids(f.thread)})"
                told.append(_WordedFinding(CaseFinding.of(f), text))
            elif (mm is not None and not kernel) or (unwritten and not told):
                first = _output_bits(launched.run, launched.plan, case.n)
                del launched
                again = launch(SHARED_FILLS[1], where)
                if isinstance(again, CaseResult):
                    return again
                second = _output_bits(again.run, again.plan, case.n)
                _set_shared_fill(backend, SHARED_FILLS[0])
                tol = error_bound(expected, source=x, inclusive=part.inclusive, depth=part.addition_depth(pc, case.n),
                                  prefix_sum=part.prefix_sum)
                differ = _fill_changed(first, second, dtype, tol=tol)
                if differ.size and not sees_reads:
                    # Without the emulator's view of every read (a GPU, or the emulator above checks_max_n:
                    # both the same way), the fill is the cause only if the first fill gives the first
                    # output again: a kernel whose output changes from run to run anyway (state kept
                    # between launches, a race) is not blamed on unwritten memory.
                    del again
                    same = launch(SHARED_FILLS[0], where)
                    if isinstance(same, CaseResult):
                        return same
                    if _fill_changed(first, _output_bits(same.run, same.plan, case.n), dtype, tol=tol).size:
                        differ = differ[:0]
                # The emulator's checks see every read of shared memory: where they saw none of unwritten
                # memory, an output that changed comes from something else (blocks' timing, a race).
                if differ.size and (unwritten or not sees_reads):
                    i = int(differ[0])
                    note_ = unwritten[0].split(": ", 1)[1] if unwritten else (
                        "the kernel reads shared memory that no thread of its block wrote")
                    text = (f"the output depends on shared memory no thread wrote: with unwritten shared memory "
                            f"filled with two different patterns, out[{i}] differs ({differ.size} of {case.n} "
                            f"elements); {note_}. Pad the unused slots with the scan's identity (0) before using them")
                    told.append(_WordedFinding(CaseFinding("uninitialized-read", text), text))
            if told:
                suffix = ""
                if order and not kernel:  # a kernel's finding names the order itself
                    suffix = (f"{where} — it passed in {schedules[0]} order, so the result depends on the order "
                              "threads run in: a race (a missing __syncthreads() or __syncwarp()?)")
                return _Found(told, mm, suffix)
        return _Found([], None, "")

    if not sampled:
        found_ = orders(schedules, output=True)
    else:
        # Above emulator.checks_max_n: the checks on a sample of each launch's blocks, in the same
        # orders; where the part's blocks are independent, only those blocks run, so the output of
        # these runs is not judged: where they find nothing, a plain run of every block (``plain``)
        # gives it. Where they find something, the case fails on it, as a smaller case does.
        mode = "only" if part.independent_blocks else "all"
        note = (f"checks on the first, the last and {backend.sample_drawn} seeded blocks of each launch"
                f"{f' (up to {SAMPLED_BLOCK_CHECKS:,} accesses of each)' if mode == 'only' else ' (every block run)'}"
                f", as n is above emulator.checks_max_n = "
                f"{cfg.emulator.checks_max_n}")
        # Where every block runs (the blocks of a look-back wait on each other), in the first order
        # only: three orders over every block of a large launch would cost three whole checked runs,
        # and each order is checked over every block at every size up to checks_max_n.
        with _sampling(backend, mode):
            found_ = orders(schedules if mode == "only" else schedules[:1], output=mode == "all", note=note)
        if plain and mode == "only" and not isinstance(found_, CaseResult) and not found_.told:
            found_ = orders((), output=True)
    if isinstance(found_, CaseResult):
        return found_
    if found_.told:
        told, mm = explain_tile_hint(found_.told, found_.mismatch, case.n, part.tile_of(pc), known)
        return _failed(told, result, mm, found_.suffix)
    return result(CaseStatus.PASS)


class _Found(NamedTuple):
    """What the runs of a case in its orders found (:func:`_run_case`): the findings, each told, the
    first mismatch, and what the message adds after the first finding's text (the order that failed)."""

    told: list
    mismatch: Mismatch | None
    suffix: str


class _sampling:
    """``with _sampling(backend, mode)``: the backend's checks on, on a sample of each launch's blocks
    (``mode``: ``only`` or ``all``, see :attr:`grader.backends.emulator.EmulatorBackend.sample`), with
    deadlocks found at once; its checks, sample, deadlock detection and thread order as they were after."""

    def __init__(self, backend, mode: str) -> None:
        self.backend, self.mode = backend, mode

    def __enter__(self) -> None:
        b = self.backend
        self.saved = (b.checks, b.sample, b.detect_deadlock, b.schedule, b.schedule_seed)
        b.checks, b.sample, b.detect_deadlock = True, self.mode, True

    def __exit__(self, *exc) -> None:
        b = self.backend
        b.checks, b.sample, b.detect_deadlock, schedule, seed = self.saved
        b.set_schedule(schedule, seed)
