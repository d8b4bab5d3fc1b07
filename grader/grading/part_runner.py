"""One part graded in its workers (:func:`grade_part`): a worker per run of the part's cases, its
events folded into what the part reported (:class:`_Reported`), a new worker after a case that hung
(:class:`_Workers`), and a worker that ended without its last word told in words
(:func:`_how_it_stopped`), the part graded anew where it died of something not the submission's;
a part that never ran (:func:`ungraded_part`)."""

from __future__ import annotations

import dataclasses
import itertools
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from grader.assignment.config import Config
from grader.assignment.parts import PARTS, PartSpec
from grader.backends import backend_kind
from grader.core.results import (PART_CASES_BYTES, TO_REGRADE, CaseResult, CaseStatus, FailureKind, PartResult,
                                 PartStatus, Performance, Profile, Roofline, clean_case, clean_part_message)
from grader.grading import protocol
from grader.grading.deadlines import case_budget_s, timed_case_n
from grader.grading.case.cases import CheckMode, case_list, not_run
from grader.grading.intake import Absent
from grader.grading.worker_process import WorkerSlot, run_worker, signal_name, tail

#: After this many cases in a row ran past their deadlines (each costs its deadline and a new
#: worker), a part's remaining cases are not run.
MAX_HANGS_IN_A_ROW = 3


def _lost_in_a_row(lost: list[str], names: list[str]) -> bool:
    """Whether the last :data:`MAX_HANGS_IN_A_ROW` cases that hung are consecutive in the case order."""
    if len(lost) < MAX_HANGS_IN_A_ROW:
        return False
    last = [names.index(h) for h in lost[-MAX_HANGS_IN_A_ROW:]]
    return all(b == a + 1 for a, b in zip(last, last[1:]))


def _in_a_row_message(what: str) -> str:
    return f"the kernel {what} in {MAX_HANGS_IN_A_ROW} cases in a row: the part's other cases were not run"


def _in_a_row_rest(what: str) -> str:
    return f"not run: the kernel {what} in the {MAX_HANGS_IN_A_ROW} cases before, in a row"


def _hung_message(hung: list[str]) -> str:
    """The part's message when cases were stopped at their deadline (see :mod:`grader.grading.deadlines`;
    ``timeouts.case_s`` at most)."""
    return (f"case{'s' if len(hung) > 1 else ''} {', '.join(hung)} ran past {'their' if len(hung) > 1 else 'its'} "
            "deadline (a few seconds plus 20 times the reference solution's time; timeouts.case_s at most): the "
            "kernel may never finish there — check loop conditions, and that every thread reaches every "
            "__syncthreads(); the cases after each were graded in a new worker")


def _case_budgets(cfg: Config, key: str, specs: list, *, backend: str, checks: bool) -> Callable[[str], float]:
    """``budget(case name)``: the seconds a case of part ``key`` may run on an idle machine
    (:func:`grader.grading.deadlines.case_budget_s`), for its correctness cases (``specs``) and timed cases."""
    by_name = {c.name: c for c in specs}
    # on a GPU a checked case waits, within its deadline, for the emulator's checks of it (the checker)
    emulator_checks = backend_kind(backend).has_sanitizer and checks

    def budget(name: str) -> float:
        spec = by_name.get(name)
        if spec is not None:
            return case_budget_s(backend=backend, part=key, dtype=spec.dtype, n=spec.n, check=spec.check,
                                 case_s=cfg.timeouts.case_s, gpu_emulator_checks=emulator_checks)
        if timed_case_n(name) is None:
            return cfg.timeouts.case_s
        n, dtype = timed_case_n(name)
        return case_budget_s(backend=backend, part=key, dtype=dtype, n=n, check=CheckMode.PLAIN, timed=True,
                             case_s=cfg.timeouts.case_s)
    return budget


def _report_order(cases: tuple[CaseResult, ...]) -> tuple[CaseResult, ...]:
    """Cases as reports list them: the visible ones, then the hidden ones, then the timed ones, each
    group in the order it ran (the worker times a part between its visible and its hidden cases)."""
    return tuple(sorted(cases, key=lambda c: (c.timing is not None or c.name.startswith("timed "),
                                              c.visibility == "hidden")))


def _phases(events: list[protocol.Event], started: float, ended: float) -> dict[str, float]:
    """Wall seconds per phase of a part, from the times the worker stamped on its events."""
    first: dict[str, float] = {}
    for ev in events:
        if ev.t is not None:
            first.setdefault(ev.name, ev.t)
    marks = [("startup", started), ("compile", first.get("device")), ("checks", first.get("compiled")),
             ("cases", first.get("case-start")), ("timing", first.get("timing-start")),
             ("hidden", first.get("hidden-start")), ("profile", first.get("profile-start"))]
    marks = sorted(((name, t) for name, t in marks if t is not None), key=lambda m: m[1])  # in the order they ran
    phases = {name: round(max(0.0, (marks[i + 1][1] if i + 1 < len(marks) else ended) - t), 3)
              for i, (name, t) in enumerate(marks)}
    if not phases.get("checks", 1.0):
        del phases["checks"]  # nothing ran between the compile and the first case (the emulator checks in it)
    phases["total"] = round(ended - started, 3)
    return phases


def _pending_profile(cfg: Config, key: str, message: str) -> Profile | None:
    """The Profile of a profiled part that was not profiled (0 of its points), else None."""
    pconf = cfg.parts[key].profile
    return Profile(0.0, pconf.points, message) if pconf else None


def _pending_performance(cfg: Config, key: str, message: str) -> Performance | None:
    """The Performance of a timed part that was not timed (0 of its points), else None."""
    timing = cfg.parts[key].timing
    return Performance(0.0, timing.points, None, message) if timing else None


def ungraded_part(cfg: Config, key: str, *, status: str, message: str, file: str | None = None,
                  to_regrade: bool = False) -> PartResult:
    """The result of part ``key`` when it never ran (the submission was refused, ran out of time, or
    the grader failed on it): every case not run with ``message``, and its performance and profile
    at 0 of their points, so its points possible are those of a graded part (every row of a
    gradebook has the same maximum).

    Args:
        cfg: the validated configuration (its part ``key`` gives the cases and points).
        status: the part's :class:`~grader.core.results.PartStatus` (``error``, ``timeout``...), also
            the cases' failure kind.
        message: why it never ran, for the student (``"not graded: ..."``).
        file: where the part's file was (default: the part's file name).
        to_regrade: the grader failed on it (:attr:`~grader.core.results.PartResult.to_regrade`).
    """
    spec = PARTS[key]
    return PartResult(key=key, number=spec.number, title=spec.title, file=file or spec.filename, status=status,
                      message=clean_part_message(message), cases=not_run(cfg, key, "not run: " + message, kind=status),
                      performance=_pending_performance(cfg, key, "not timed: " + message),
                      profile=_pending_profile(cfg, key, "not profiled: " + message), to_regrade=to_regrade,
                      **_launch(cfg, key))


def _launch(cfg: Config, key: str) -> dict[str, int | None]:
    """A part's launch shape for its :class:`~grader.core.results.PartResult`: ``block_size`` and
    ``items_per_thread`` as configured."""
    pc = cfg.parts[key]
    return {"block_size": pc.block_size, "items_per_thread": pc.items_per_thread}


@dataclasses.dataclass
class _Reported:
    """What a part's workers reported, folded event by event (:meth:`add`): the device facts, the
    cases' results, the performance and the profile, across workers; and of the worker now read,
    what it was doing when it stopped and how it ended.

    Attributes:
        current: the case started and not reported (the one running when the worker stopped).
        waiting: on a GPU, the case the emulator's checks passed, waiting for the GPU.
        timing: the timing phase started.
        compiled: the part compiled; profiling: what the profile that ran last counts (``profile`` or
            ``roofline``, :data:`protocol.PROFILE_LABELS`; no case or hidden case since), or None.
        end: the worker's last word: a :class:`protocol.WorkerError`, :class:`protocol.CompileFailed`
            or :class:`protocol.Done`; None when it stopped without one.
    """

    device: dict[str, str] = dataclasses.field(default_factory=dict)
    cases: list[CaseResult] = dataclasses.field(default_factory=list)
    performance: Performance | None = None
    profile: Profile | None = None
    roofline: Roofline | None = None
    current: str | None = None
    waiting: str | None = None
    timing: bool = False
    compiled: bool = False
    profiling: str | None = None
    end: protocol.Event | None = None

    def next_worker(self) -> None:
        """Forget what the last worker was doing; keep what the part's workers reported."""
        self.current, self.waiting, self.timing, self.compiled, self.profiling, self.end = (None, None, False, False,
                                                                                            None, None)

    def add(self, ev: protocol.Event) -> None:
        """Fold one event in (none after the worker's last word)."""
        if isinstance(ev, (protocol.Device, protocol.DeviceUpdate)):
            self.device = {**self.device, **ev.info}
        elif isinstance(ev, (protocol.WorkerError, protocol.CompileFailed, protocol.Done)):
            self.end = ev
        elif isinstance(ev, protocol.Compiled):
            self.compiled = True
        elif isinstance(ev, protocol.CaseStart):
            self.current, self.waiting = ev.case, None
        elif isinstance(ev, protocol.GpuWait):
            self.current, self.waiting = None, ev.case
        elif isinstance(ev, protocol.TimingStart):
            self.timing = True
        elif isinstance(ev, (protocol.CaseDone, protocol.Timed)):
            self.cases.append(ev.result)
            self.current = None
        elif isinstance(ev, protocol.PerformanceScored):
            self.performance = ev.result
        elif isinstance(ev, protocol.Profiled):
            self.profile = ev.result
        elif isinstance(ev, protocol.RooflineTaken):
            self.roofline = ev.result
        if isinstance(ev, (protocol.ProfileStart, protocol.HiddenStart, protocol.CaseDone)):
            self.profiling = ev.counts if isinstance(ev, protocol.ProfileStart) else None

    def stage(self) -> str:
        """What the worker was doing, for a message (``case n=5 int32``, ``compiling``...)."""
        if self.current:
            return f"case {self.current}"
        if self.waiting:
            return f"the wait for the GPU before case {self.waiting} (the emulator's checks had passed it)"
        if self.profiling:
            return protocol.PROFILE_LABELS[self.profiling]
        if self.timing:
            return "the timing, between two timed sizes"
        return ("the preparation of the cases (the emulator's compile of the checks, or compute-sanitizer's audit)"
                if self.compiled else "compiling")

    def passed(self) -> PartStatus:
        """``pass`` when every case reported passed, else ``fail``."""
        return PartStatus.PASS if all(c.status == CaseStatus.PASS for c in self.cases) else PartStatus.FAIL


@dataclasses.dataclass
class _Workers:
    """A part's workers: where the next one starts in the part's case list (``start``), and the
    cases that cost one, which it starts after: those that hung (past their deadline). A GPU fault
    costs none: the worker grades the part's later cases on the emulator
    (:class:`grader.grading.worker.gpu_path.GpuPath`). A new worker starts while the part's time (``deadline``,
    ``time.monotonic()``) lasts."""

    names: list[str]
    deadline: float
    start: int = 0
    hung: list[str] = dataclasses.field(default_factory=list)

    @property
    def attempt(self) -> int:
        """How many workers ran before the next one."""
        return len(self.hung)

    def after_hang(self, case: str) -> str:
        """What follows ``case``, which ran past its deadline: ``retry`` (a new worker grades the
        cases after it, while the part's time lasts), ``in a row`` (the last
        :data:`MAX_HANGS_IN_A_ROW` cases in a row hung: a kernel that hangs at every n, the rest is
        not run) or ``stop``."""
        self.hung.append(case)
        after = self.names.index(case) + 1
        in_a_row = _lost_in_a_row(self.hung, self.names)
        if after < len(self.names) and time.monotonic() < self.deadline and not in_a_row:
            self.start = after
            return "retry"
        return "in a row" if in_a_row and after < len(self.names) else "stop"


def _how_it_stopped(stopped: str | None, returncode: int | None, reported: _Reported,
                    tmpdir: Path) -> tuple[PartStatus, str]:
    """The part's status and message when its worker ended without its last word: stopped at a
    deadline (``stopped`` says which; the kernel's last output, its stdout, follows), else the
    worker died (:func:`_worker_died`): the grader's ``error``."""
    if not stopped:
        return PartStatus.ERROR, _worker_died(returncode, reported.stage(), tail(tmpdir / "stderr.txt"))
    why = f"{stopped} during {reported.stage()}"
    if reported.current:
        why += (": the kernel may never finish — check loop conditions, and that every thread reaches "
                "every __syncthreads()")
    out_tail = tail(tmpdir / "stdout.txt")
    if out_tail:
        why += f"\nlast output of the kernel:\n{out_tail}"
    return PartStatus.TIMEOUT, why


#: What a part's message adds where its worker died in a fresh worker too.
REGRADE_NOTE = ("the grader failed here, not the submission (a worker dies of something the submission did not "
                "do: killed from outside, out of memory, a crashed driver; the submission's code runs in a process "
                f"of its own, whose crash is the case's); it died in a fresh worker too: {TO_REGRADE}")


def _worker_died(returncode: int | None, stage: str, stderr: str) -> str:
    """Why a worker ended without its last word though the grader did not stop it: killed by a
    signal (from outside: the submission's code runs in the emulator's executor, and a GPU kernel
    cannot signal its process), or exited on its own (:func:`_worker_failure`)."""
    if returncode is not None and returncode < 0:
        return f"the grader's worker was killed ({signal_name(returncode)}) during {stage}"
    return _worker_failure(returncode, stage, stderr)


def _worker_failure(returncode: int | None, stage: str, stderr: str) -> str:
    """The part's message when its worker exited on its own without its last word, from its last
    words on stderr (``stderr``): one line, never a Python traceback (its last line, the error
    itself, stands for it); where that line says the worker could not get memory (an address-space
    limit, ``ulimit -v``, too small to import numpy or start a thread), what to raise it to."""
    from grader.host.resources import limit_advice, looks_like_memory_failure

    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    short = next((line for line in reversed(lines[-8:]) if looks_like_memory_failure(line)), None)
    if short is not None:
        return f"the grader's worker ran out of memory during {stage} ({short[:300]}): {limit_advice(0)}"
    why = f"the grader's worker stopped unexpectedly (exit status {returncode}) during {stage}"
    if any(line.startswith("Traceback (most recent call last)") for line in lines):
        return f"{why}: {last[:500]} (a bug of the grader: please report it)"
    return f"{why}:\n{stderr}" if stderr else why


def _stopped_case(name: str, specs: list, *, cfg: Config, key: str, status: PartStatus, why: str) -> CaseResult:
    """The result of case ``name``, which was running when its worker stopped: ``status``, with the
    first line of ``why``."""
    spec = next((c for c in specs if c.name == name), None)
    return CaseResult(name=name, n=spec.n if spec else 0, dtype=spec.dtype if spec else "",
                      seed=spec.seed if spec else cfg.seed, status=CaseStatus(status), points=0.0,
                      max_points=cfg.parts[key].points_per_case if spec else 0.0, message=why.splitlines()[0],
                      visibility=spec.visibility if spec else "visible", kind=FailureKind(status))


def grade_part(part: PartSpec, source: Path | Absent | None, *, cfg: Config, backend: str, checks: bool = True,
               on_event: Callable[[str, protocol.Event], None] | None = None,
               env: dict[str, str] | None = None,
               stop: threading.Event | None = None,
               sanitizer_pool: Path | None = None,
               slot: WorkerSlot | None = None, compile_only: bool = False) -> tuple[PartResult, dict[str, str]]:
    """Grade one part in a child process (``checks``: the emulator's checking mode and thread orders,
    on each case as its :class:`~grader.grading.case.cases.CheckMode` says, whole or on sampled
    blocks; the default, as every official grade uses them;
    ``sanitizer_pool``: the folder of the submission's :class:`grader.grading.sanitizer_pool.SanitizerPool`;
    ``slot``: the worker the part graded before in this thread left waiting, which grades this one
    and waits after it, :class:`grader.grading.worker_process.WorkerSlot`; ``compile_only``: only
    compile the part's file, as its grading does (:attr:`grader.grading.protocol.Job.compile_only`):
    a part that compiles is then ``pass`` with no case, one that does not is its ``compile-error``).

    A worker's events are folded into what the part reported (:class:`_Reported`); a worker that
    ends without its last word is told in words (:func:`_how_it_stopped`); a case that hung or a
    GPU fault that lost the context starts a new worker after it (:class:`_Workers`). A worker that
    dies though the grader did not stop it (killed from outside, out of memory: never the
    submission's doing, whose code runs in the emulator's executor or as a GPU kernel, whose
    crash is a case's result) costs the submission nothing: the whole part is graded again in a
    fresh worker with the part's whole time, once; where that one dies too, the part is ``error``
    and :attr:`~grader.core.results.PartResult.to_regrade`.

    Returns:
        ``(part result, device facts reported by the child)``. Never raises for problems of the
        submission; they are in the result.

    Raises:
        GradingStopped: ``stop`` was set while the part ran (its workers are ended).
    """
    return _PartGrading(part, source, cfg=cfg, backend=backend, checks=checks, on_event=on_event, env=env, stop=stop,
                        sanitizer_pool=sanitizer_pool, slot=slot, compile_only=compile_only).grade()


class _PartGrading:
    """One part graded in its workers (:func:`grade_part`, whose arguments these are): the workers
    started in turn (:meth:`run_worker`), their events folded into what the part reported
    (:attr:`reported`), and the part's result where a worker ended (:meth:`ended`) or stopped
    (:meth:`stopped`)."""

    def __init__(self, part: PartSpec, source: Path | Absent | None, *, cfg: Config, backend: str, checks: bool,
                 on_event, env: dict[str, str] | None, stop: threading.Event | None, sanitizer_pool: Path | None,
                 slot: WorkerSlot | None, compile_only: bool) -> None:
        self.part, self.source, self.cfg, self.backend, self.checks = part, source, cfg, backend, checks
        self.on_event, self.env, self.stop, self.sanitizer_pool = on_event, env, stop, sanitizer_pool
        self.slot, self.compile_only = slot, compile_only
        self.phases: dict[str, float] = {}
        self.pending = _pending_performance(cfg, part.key, "not timed: the part did not finish")
        self.reported = self._fresh_report()

    def _fresh_report(self) -> _Reported:
        """What a part reports before any worker said anything."""
        return _Reported(performance=self.pending,
                         profile=_pending_profile(self.cfg, self.part.key, "not profiled: the part did not finish"))

    def result(self, status: str, message: str, cases: tuple[CaseResult, ...], performance: Performance | None = None,
               to_regrade: bool = False) -> tuple[PartResult, dict[str, str]]:
        """The part's result, and the device facts its workers reported."""
        part, reported = self.part, self.reported
        budget = [PART_CASES_BYTES]  # all the part's case messages together
        return PartResult(key=part.key, number=part.number, title=part.title,
                          file=str(self.source) if self.source else part.filename, status=status,
                          message=clean_part_message(message),
                          cases=tuple(clean_case(c, budget) for c in _report_order(cases)),
                          performance=performance, phases_s=self.phases, profile=reported.profile,
                          roofline=reported.roofline, to_regrade=to_regrade,
                          **_launch(self.cfg, part.key)), reported.device

    def grade(self) -> tuple[PartResult, dict[str, str]]:
        """See :func:`grade_part`."""
        cfg, part, source = self.cfg, self.part, self.source
        if not isinstance(source, Path):  # None, or an Absent saying why (misnamed, a link, too large)
            msg = source.message if isinstance(source, Absent) else ""
            msg = msg or f"{part.filename} is missing from the submission"
            status = PartStatus(source.status if isinstance(source, Absent) else PartStatus.MISSING)
            return self.result(status, msg, not_run(cfg, part.key, "not run: " + msg, kind=status), self.pending)
        with tempfile.TemporaryDirectory(prefix="scangrade-part-") as tmp:
            self.tmpdir = Path(tmp)
            self.specs = case_list(cfg, part.key, checks=self.checks)
            self.names = [c.name for c in self.specs]
            started = time.time()
            workers = _Workers(self.names, deadline=time.monotonic() + cfg.timeouts.part_s)
            items: list[protocol.Event] = []
            budget = _case_budgets(cfg, part.key, self.specs, backend=self.backend, checks=self.checks)
            regraded = False  # a worker died of something the submission did not do: the part graded anew, once
            for run in itertools.count():
                events, (returncode, stopped, case_hung) = self.run_worker(run, workers, budget)
                items += events.items
                self.phases.clear()
                self.phases.update(_phases(items, started, time.time()))
                done = self.ended(events, workers)
                if done is not None:
                    return done
                status, why = _how_it_stopped(stopped, returncode, self.reported, self.tmpdir)
                if status == PartStatus.ERROR and not regraded:  # the grader's failure: the whole part anew
                    regraded = True
                    self.reported = self._fresh_report()
                    workers = _Workers(self.names, deadline=time.monotonic() + cfg.timeouts.part_s)
                    items, started = [], time.time()
                    continue
                done = self.stopped(status, why, workers, case_hung=case_hung)
                if done is not None:
                    return done
        raise AssertionError("unreachable: the loop returns")  # pragma: no cover

    def run_worker(self, run: int, workers: _Workers, budget: Callable[[str], float]):
        """The ``run``-th worker of the part, from the case ``workers`` says: its events, and how
        it ended (:func:`grader.grading.worker_process.run_worker`'s return).

        Raises:
            GradingStopped: ``stop`` was set while it ran.
        """
        from grader.toolchain.cache import CACHE_OWNER_ENV  # the grading's token (runner.grade)

        # The worker takes the token from its job, not its environment: a batch's job keeps its worker
        # for its next submission (WorkerSlot), whose environment is the same but for it.
        grading = (self.env or {}).get(CACHE_OWNER_ENV, "")
        env = {k: v for k, v in (self.env or {}).items() if k != CACHE_OWNER_ENV}
        events = protocol.EventReader(self.tmpdir / f"events-{run}.jsonl")
        job_path = self.tmpdir / f"job-{run}.json"
        job = protocol.Job.for_part(self.cfg, part=self.part.key, source=self.source, backend=self.backend,
                                    events=events.path, checks=self.checks, start=workers.start,
                                    earlier_failed=workers.attempt > 0, earlier_hung=bool(workers.hung),
                                    sanitizer_pool=self.sanitizer_pool, grading=grading, compile_only=self.compile_only)
        job_path.write_text(job.to_json())
        ended = run_worker(job_path, events, cfg=self.cfg, tmpdir=self.tmpdir, on_event=self.on_event, extra_env=env,
                           deadline=workers.deadline, backend=self.backend, budget=budget, stop=self.stop,
                           slot=self.slot)
        return events, ended

    def ended(self, events: protocol.EventReader, workers: _Workers):
        """``events`` folded into what the part reported; the part's result where the worker said its
        last word (an error, a compile error, done), else None."""
        reported = self.reported
        reported.next_worker()
        for ev in events.items:
            reported.add(ev)
            if reported.end is not None:
                break
        cases, part = reported.cases, self.part
        if isinstance(reported.end, (protocol.WorkerError, protocol.CompileFailed)):
            failed = isinstance(reported.end, protocol.WorkerError)
            status = PartStatus.ERROR if failed else PartStatus.COMPILE_ERROR
            rest = ("not run: " + reported.end.message if status == PartStatus.ERROR
                    else f"not run: {part.filename} does not compile")
            return self.result(status, reported.end.message,
                               not_run(self.cfg, part.key, rest, kind=status, done=tuple(cases)), self.pending)
        if isinstance(reported.end, protocol.Done):
            if workers.hung:
                return self.result(PartStatus.TIMEOUT, _hung_message(workers.hung), tuple(cases), reported.performance)
            return self.result(reported.passed(), "", tuple(cases), reported.performance)
        return None

    def stopped(self, status: PartStatus, why: str, workers: _Workers, *, case_hung: bool):
        """The part's result where its worker stopped without its last word (``status``, ``why``:
        :func:`_how_it_stopped`), the case it was running told so; None where a new worker grades
        the cases after one that hung (:meth:`_Workers.after_hang`)."""
        reported, cfg, key = self.reported, self.cfg, self.part.key
        cases = reported.cases
        to_regrade = status == PartStatus.ERROR
        if to_regrade:
            why = f"{why}\n{REGRADE_NOTE}"
        if reported.current is not None:
            cases.append(_stopped_case(reported.current, self.specs, cfg=cfg, key=key, status=status, why=why))
        rest = f"not run: an earlier step ended in {status}"
        if case_hung and reported.current in self.names:
            after = workers.after_hang(reported.current)
            if after == "retry":
                return None
            if after == "in a row":
                rest = _in_a_row_rest("hung")
                why += "\n" + _in_a_row_message("hung")
        if workers.hung:
            why = _hung_message(workers.hung) + "\n" + why
        return self.result(status, why, not_run(cfg, key, rest, kind=status, done=tuple(cases)), reported.performance,
                           to_regrade=to_regrade)