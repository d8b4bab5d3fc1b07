"""Running one correctness case (:class:`CaseRun`, :func:`run_case`): the part's launch plan under
each thread order of the emulator's checks, on sampled blocks for a sampled case (the case's
:class:`~grader.grading.case.cases.CheckMode`), again with a second shared-memory fill where the
output may depend on unwritten shared memory; what a checker or the kernel's errors found, told in
cause order, becomes the case's result."""

from __future__ import annotations

import dataclasses
import time
from typing import NamedTuple

import numpy as np

from grader.backends.base import Backend, Module, RunMode
from grader.assignment.config import Config
from grader.core.errors import KernelError, LaunchError
from grader.assignment.parts import DTYPES, PartSpec
from grader.assignment.plans import GUARD, Guarded, Plan, Run, prepare
from grader.core.kinds import WARNING_KINDS, in_cause_order, verdict_of
from grader.core.results import CaseFinding, CaseResult, CaseStatus, FailureKind, Mismatch
from grader.grading.case.cases import CaseSpec, CheckMode
from grader.grading.case.checks import check_run, error_bound, explain_tile_hint
from grader.grading.case.inputs import DrawAhead, case_input
from grader.grading.sanitizer_report import CaseChecks


#: Thread orders a checking run of the emulator tries, in turn: ascending order hides races (the
#: random one also switches threads at memory accesses: grader.backends.emulator.backend.INTERLEAVE).
CHECK_SCHEDULES = ("ascending", "descending", "random")
#: Where a part's blocks are independent, the accesses of each sampled block the checks see; the rest
#: of the block runs unchecked (the runtime's ``SG_SAMPLED_BLOCK_CHECKS``, in ``sg_host.h``). Every
#: access of a checked case is checked; without a bound, a block that does the whole launch's work
#: (one thread scanning everything) would be checked access by access at every size.
SAMPLED_BLOCK_CHECKS = 1 << 20
#: The 32-bit patterns shared memory holds before a correctness case (on the emulator, every block's
#: shared memory at its start; on a GPU, every multiprocessor's, written by a kernel just before):
#: the first for every run, the second for the run again that tells whether the output depends on
#: shared memory no thread wrote. Neither is an identity of a sum (0), and they differ in every bit.
SHARED_FILLS = (0x7F7F7F7F, 0x80808080)


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
#: (runtime/checks/races.cpp, report_chain); one that could not give it explains no output.
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
             mode: CheckMode | None = None, schedules: tuple[str, ...] | None = None, checker: str | None = None,
             sanitizer: CaseChecks | None = None, known: tuple[CaseFinding, ...] = (), ahead: DrawAhead | None = None,
             plain_run: bool = True, find_deadlocks: bool = True) -> CaseResult:
    """Run and check one correctness case (a :class:`CaseRun`); failures of the kernel become a
    failing CaseResult. The keywords after ``case`` are :class:`CaseRun`'s; ``sanitizer``:
    :meth:`CaseRun.result`'s.

    Raises nothing for problems of the submission; only grader bugs propagate.
    """
    return CaseRun(backend, module, cfg=cfg, part=part, case=case, mode=mode, schedules=schedules, checker=checker,
                   known=known, ahead=ahead, plain_run=plain_run, find_deadlocks=find_deadlocks).result(sanitizer)


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
        return all(e.completed for e in self.errors)


class _Found(NamedTuple):
    """What the runs of a case in its orders found (:meth:`CaseRun.orders`): the findings, each told,
    the first mismatch, and what the message adds after the first finding's text (the order that
    failed)."""

    told: list
    mismatch: Mismatch | None
    suffix: str


class CaseRun:
    """One correctness case run on a backend and judged, step by step: :meth:`launch` (one run of the
    part's launch plan), :meth:`orders` (a run in each thread order, up to the first that finds
    something), :meth:`unwritten_shared` (a run again with a second fill of shared memory where the
    output may depend on memory no thread wrote) and :meth:`sampled` (the checks on sampled blocks);
    :meth:`result` runs them as the case's :class:`~grader.grading.case.cases.CheckMode` says.

    Args:
        backend, module: where the case runs, and the part compiled there for the case's dtype.
        cfg, part, case: the config, the part and the case (its input drawn from its seed).
        mode: how this run checks the case: the case's own :attr:`CaseSpec.check` (None), or
            ``plain`` where the checks ran elsewhere (a GPU's run of a case the emulator's checks
            passed; the emulator standing in for a GPU). A backend without checks of its own
            (:attr:`grader.backends.base.Backend.checks_accesses`) runs every case plainly.
        schedules: the thread orders of a checked or sampled case (the random one seeded by the
            case's seed), on a backend that has them (:attr:`Backend.schedules`); the first order
            that fails is reported. None: :data:`CHECK_SCHEDULES`. A plain case runs in the
            backend's current order.
        checker: what checked the case beyond its output, for the result (``compute-sanitizer``);
            None: the mode's own (:attr:`CheckMode.checker`).
        known: the findings of the part's earlier cases: a case whose checks did not run (no
            ``checker``) takes a hint from them where one explains its wrong output (a race found
            at a smaller size, for an output wrong only in its last tile).
        ahead: inputs drawn ahead (:class:`grader.grading.case.inputs.DrawAhead`); the case's is
            taken from it where drawn.
        plain_run: a sampled case whose checks found nothing in its sampled blocks is judged by a
            plain run of every block; False: not run (the GPU path's checks, whose output the GPU
            judges).
        find_deadlocks: a plain run's deadlock ends it at once (``deadlock``); False: it waits, like
            a hung GPU, for the case's deadline (a grading with the checks off).

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
    """

    def __init__(self, backend: Backend, module: Module, *, cfg: Config, part: PartSpec, case: CaseSpec,
                 mode: CheckMode | None = None, schedules: tuple[str, ...] | None = None, checker: str | None = None,
                 known: tuple[CaseFinding, ...] = (), ahead: DrawAhead | None = None, plain_run: bool = True,
                 find_deadlocks: bool = True) -> None:
        self.backend, self.module, self.cfg, self.part, self.case = backend, module, cfg, part, case
        # a backend without checks of its own (Backend.checks_accesses) runs every case plainly
        self.mode = (case.check if mode is None else mode) if backend.checks_accesses else CheckMode.PLAIN
        self.schedules = CHECK_SCHEDULES if schedules is None else schedules
        self.checker = checker or self.mode.checker
        self.known = known if self.checker is None else ()
        self.ahead, self.plain_run, self.find_deadlocks = ahead, plain_run, find_deadlocks
        self.pc = cfg.parts[part.key]
        self.dtype = DTYPES[case.dtype]
        self.warnings: list[str] = []  # the runs' warning lines, in the order found
        self.given: list = []  # the stale-read warnings whose older value the emulator gave a load (_stale_given)
        self.run_mode = RunMode()  # the mode of the runs under way (each run's fill set by launch)
        self.x = self.expected = None  # the case's input and reference output, once drawn
        self.t0 = time.perf_counter()

    def result(self, sanitizer: CaseChecks | None = None) -> CaseResult:
        """The case's result: where compute-sanitizer found something in it (``sanitizer``, the
        audit's or its fallback's findings on a GPU), those, the kernel not run again; else the runs
        its mode asks for, judged. The backend runs as :class:`~grader.backends.base.RunMode`'s
        default afterwards (no fill of shared memory before the launches of timing)."""
        try:
            if sanitizer is not None and sanitizer.findings:
                return self._sanitizer_failed(list(sanitizer.findings))
            self.x, self.expected = case_input(self.cfg, self.part, self.case.n, self.case.seed, self.dtype,
                                               self.ahead, fractional=self.case.fractional)
            if self.mode is CheckMode.SAMPLED:
                found = self.sampled()
            elif self.mode is CheckMode.CHECKED:
                found = self.orders(self.schedules, self._mode(checks=True), output=True)
            else:
                found = self.orders((), self._mode(checks=False), output=True)
            if isinstance(found, CaseResult):
                return found
            if found.told:
                told, mm = explain_tile_hint(found.told, found.mismatch, self.case.n, self.part.tile_of(self.pc),
                                             self.known)
                return self._failed(told, mm, found.suffix)
            return self._result(CaseStatus.PASS)
        except KernelError as exc:  # a GPU fault reported by a copy after the launches (PyCudaBackend._copy)
            return self._result(verdict_of(exc.kind), f"the kernel failed ({exc.kind}): {exc}", kind=exc.kind)
        finally:
            self.backend.set_run_mode(RunMode())

    def _mode(self, *, checks: bool, sample: str | None = None) -> RunMode:
        """The runs' :class:`~grader.backends.base.RunMode` (its fill set by :meth:`launch`): a deadlock
        found at once in a checked run, and in a plain one where :attr:`find_deadlocks` says so."""
        return RunMode(checks=checks, sample=sample, detect_deadlock=checks or self.find_deadlocks)

    def _result(self, status: CaseStatus, message: str = "", mismatch: Mismatch | None = None,
                kind: str | None = None, findings: tuple[CaseFinding, ...] = ()) -> CaseResult:
        points = self.pc.points_per_case
        case = self.case
        return CaseResult(name=case.name, n=case.n, dtype=case.dtype, seed=case.seed, status=status,
                          points=points if status == CaseStatus.PASS else 0.0, max_points=points, message=message,
                          mismatch=mismatch, elapsed_ms=(time.perf_counter() - self.t0) * 1e3,
                          visibility=case.visibility, kind=kind, warnings=tuple(dict.fromkeys(self.warnings)),
                          checker=self.checker, findings=findings)

    def _failed(self, found: list[_WordedFinding], mismatch: Mismatch | None, suffix: str = "") -> CaseResult:
        """The failing result: its findings in cause order, the first's text as the message."""
        told = in_cause_order(found, kind=lambda t: t.finding.kind)
        first = told[0].finding
        return self._result(verdict_of(first.kind), told[0].text + suffix, mismatch, first.kind,
                            tuple(t.finding for t in told))

    def _sanitizer_failed(self, found: list) -> CaseResult:
        """The failing result of compute-sanitizer's findings (the audit, or its fallback where the
        emulator cannot run the part), the others named after the first."""
        told = in_cause_order(_checker_findings(found), kind=lambda t: t.finding.kind)
        first = told[0].finding
        others = [f for f in found if (f.kind, f.message) != (first.kind, first.message)]
        message = told[0].text + "".join(f"\nalso: {f.kind} at {f.file}:{f.line}" for f in others[:5])
        return self._result(verdict_of(first.kind), message + " — found by compute-sanitizer", kind=first.kind,
                            findings=tuple(t.finding for t in told))

    def _keep_warnings(self, found) -> None:
        """Keep the warning findings among ``found``: their lines, and the stale reads given."""
        kept = [f for f in found if f.kind in WARNING_KINDS]
        self.warnings.extend(_warning_lines(kept))
        self.given.extend(_stale_given(kept))

    def launch(self, fill: int, where: str) -> _Launched | CaseResult:
        """One run of the part's launch plan, unwritten shared memory holding ``fill``: its buffers
        and the KernelErrors of its launches (those of a checker's kind; the run goes on after one
        whose kernel completed), or the case's result where it cannot be judged (a crash, an error,
        a launch refused). ``where``: what a message adds after ``the kernel failed (kind)``."""
        backend, case = self.backend, self.case
        backend.set_run_mode(dataclasses.replace(self.run_mode, shared_fill=fill))
        run = Run(backend, self.module, self.dtype)
        d_in = run.buffer("in", case.n, self.x, output=False)
        errors: list[KernelError] = []
        try:
            plan = prepare(run, self.part, self.pc, d_in, case.n)
            # Every run starts from the module's __device__ variables as loaded: the run whose output
            # is judged then sees the launch numbers its checked run saw (docs/security.md).
            backend.fresh_globals(self.module)
            plan.reset()
            for step in plan.launches:
                try:
                    step()
                except KernelError as exc:
                    self._keep_warnings(exc.findings)
                    if verdict_of(exc.kind) != CaseStatus.FAIL:  # a crash, an error: nothing to check
                        return self._result(verdict_of(exc.kind), f"the kernel failed ({exc.kind}){where}: {exc}",
                                            kind=exc.kind)
                    errors.append(exc)
                    if not exc.completed:
                        break
        except LaunchError as exc:
            return self._result(CaseStatus.ERROR, f"launch refused: {exc}", kind=FailureKind.LAUNCH_REFUSED)
        finally:
            self._keep_warnings(backend.take_warnings())
        return _Launched(run, plan, d_in, errors)

    def orders(self, schedules: tuple[str, ...], run_mode: RunMode, *, output: bool,
               note: str = "") -> _Found | CaseResult:
        """The runs of the case in ``run_mode``, in each of ``schedules`` in turn (the backend's
        current order where empty, or where the backend has no orders), up to the first that finds
        something; ``output``: whether a run's output and the part's own checks are judged (not in a
        run of sampled blocks only); ``note``: what a finding's text says of how the case was checked."""
        self.run_mode = run_mode
        for schedule in (schedules if schedules and self.backend.schedules else (None,)):
            order = f"emulator thread order: {schedule}" if schedule and schedule != schedules[0] else ""
            where = f" ({'; '.join(filter(None, (note, order)))})" if note or order else ""
            if schedule is not None:
                self.backend.set_schedule(schedule, seed=self.case.seed)
            judged = self.judged_run(where, output=output)
            if isinstance(judged, CaseResult):
                return judged
            told, mm, in_kernel = judged
            if told:
                suffix = ""
                if order and not in_kernel:  # a kernel's finding names the order itself
                    suffix = (f"{where} — it passed in {schedules[0]} order, so the result depends on the order "
                              "threads run in: a race (a missing __syncthreads() or __syncwarp()?)")
                return _Found(told, mm, suffix)
        return _Found([], None, "")

    def judged_run(self, where: str, *,
                   output: bool) -> tuple[list[_WordedFinding], Mismatch | None, bool] | CaseResult:
        """One run of the case (:meth:`launch`) and what it found: the kernel's findings, then its
        buffers' (:func:`grader.grading.case.checks.check_run`), then a stale read or unwritten shared
        memory that explains a wrong output (:meth:`unwritten_shared`); the first mismatch; and whether
        the kernel's own findings are among them. A case's result where it cannot be judged."""
        before, given_before = len(self.warnings), len(self.given)
        launched = self.launch(SHARED_FILLS[0], where)
        if isinstance(launched, CaseResult):
            return launched
        if self.run_mode.sample == "only" and any(e.kind == "deadlock" for e in launched.errors):
            # The sampled blocks wait on blocks that were not run: every block runs from now on.
            del launched
            self.run_mode = dataclasses.replace(self.run_mode, sample="all")
            launched = self.launch(SHARED_FILLS[0], where)
            if isinstance(launched, CaseResult):
                return launched
        kernel = [t for exc in launched.errors for t in _kernel_findings(exc, where)]
        own, mm = check_run(launched.run, launched.plan, launched.d_in, self.x, self.expected, part=self.part,
                            pc=self.pc, cfg=self.cfg, completed=launched.completed, output=output)
        told = kernel + [_WordedFinding(f, f.message) for f in own]
        unwritten = [w for w in self.warnings[before:] if w.startswith("uninitialized-read")]
        stale = self.given[given_before:]
        if mm is not None and stale and not kernel:
            # The emulator gave a load an older value the PTX memory model allows (a stale-read
            # warning), and the output is wrong: that read is the likeliest cause.
            f = stale[0]
            text = f"{f.message}; with that value the output is wrong{where}"
            if f.block is not None and f.thread is not None:
                text += f" (block {_ids(f.block)}, thread {_ids(f.thread)})"
            told.append(_WordedFinding(CaseFinding.of(f), text))
        elif (mm is not None and not kernel) or (unwritten and not told):
            first = _output_bits(launched.run, launched.plan, self.case.n)
            del launched
            found = self.unwritten_shared(first, unwritten, where)
            if isinstance(found, CaseResult):
                return found
            told += found
        return told, mm, bool(kernel)

    def unwritten_shared(self, first: np.ndarray, unwritten: list[str],
                         where: str) -> list[_WordedFinding] | CaseResult:
        """Whether the output depends on shared memory no thread wrote: the case run again with the
        second of :data:`SHARED_FILLS` (``first``: the first run's output bits; ``unwritten``: the
        ``uninitialized-read`` warnings of that run). An output that changes fails the case as
        ``uninitialized-read`` (one finding); one that does not leaves such a read a warning of a
        passing case (no finding). Without a view of every read (:attr:`sees_reads`), the fill is
        the cause only if the first fill gives the first output again: a kernel whose output changes
        from run to run anyway (state kept between launches, a race) is not blamed on it."""
        case = self.case
        again = self.launch(SHARED_FILLS[1], where)
        if isinstance(again, CaseResult):
            return again
        second = _output_bits(again.run, again.plan, case.n)
        tol = error_bound(self.expected, source=self.x, inclusive=self.part.inclusive,
                          depth=self.part.addition_depth(self.pc, case.n), prefix_sum=self.part.prefix_sum)
        differ = _fill_changed(first, second, self.dtype, tol=tol)
        if differ.size and not self.sees_reads:
            del again
            same = self.launch(SHARED_FILLS[0], where)
            if isinstance(same, CaseResult):
                return same
            if _fill_changed(first, _output_bits(same.run, same.plan, case.n), self.dtype, tol=tol).size:
                differ = differ[:0]
        # The emulator's checks see every read of shared memory: where they saw none of unwritten
        # memory, an output that changed comes from something else (blocks' timing, a race).
        if not (differ.size and (unwritten or not self.sees_reads)):
            return []
        i = int(differ[0])
        note = (unwritten[0].split(": ", 1)[1] if unwritten
                else "the kernel reads shared memory that no thread of its block wrote")
        text = (f"the output depends on shared memory no thread wrote: with unwritten shared memory "
                f"filled with two different patterns, out[{i}] differs ({differ.size} of {case.n} "
                f"elements); {note}. Pad the unused slots with the scan's identity (0) before using them")
        return [_WordedFinding(CaseFinding("uninitialized-read", text), text)]

    @property
    def sees_reads(self) -> bool:
        """Whether the runs under way see every read of shared memory (the emulator with its checks on)."""
        return self.backend.checks_accesses and self.run_mode.checks

    def sampled(self) -> _Found | CaseResult:
        """A sampled case: the checks on a sample of each launch's blocks, in the case's orders. Where
        the part's blocks are independent only those blocks run, so these runs' output is not judged:
        where they find nothing, a plain run of every block (:attr:`plain_run`) gives it. Where every
        block runs (the blocks of a look-back wait on each other), in the first order only: three
        orders over every block of a large launch would cost three whole checked runs, and each order
        is checked over every block of every checked case. A finding fails the case, as it does a
        checked one. The backend's thread order is as it was after the sampled runs."""
        sample = "only" if self.part.independent_blocks else "all"
        note = (f"checks on the first, the last and {self.backend.sample_drawn} seeded blocks of each launch"
                f"{f' (up to {SAMPLED_BLOCK_CHECKS:,} accesses of each)' if sample == 'only' else ' (every block run)'}"
                f", as {self.case.check_reason}")
        saved = self.backend.thread_order
        try:
            found = self.orders(self.schedules if sample == "only" else self.schedules[:1],
                                self._mode(checks=True, sample=sample), output=sample == "all", note=note)
        finally:
            if saved is not None:
                self.backend.set_schedule(*saved)
        if self.plain_run and sample == "only" and not isinstance(found, CaseResult) and not found.told:
            found = self.orders((), self._mode(checks=False), output=True)
        return found


#: Compiler notes a wrong-values finding shows (the first ones, in source order).
NOTES_SHOWN = 3


def with_compiler_notes(result: CaseResult, notes: list[str], earlier: list[CaseResult]) -> CaseResult:
    """``result`` with what the compiler warns about in the student's own lines that can make values
    wrong (``notes``, from :meth:`grader.backends.emulator.build.EmulatorToolchain.compiler_notes` for this
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
    found = [f for f in exc.findings if f.kind not in WARNING_KINDS]
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
