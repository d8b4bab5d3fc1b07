"""How a GPU worker with the checks on grades each case (:class:`GpuPath`): the emulator's checks
beside the GPU decide, the GPU verifies the output of every case they pass, and compute-sanitizer
(:class:`SanitizerChecks`) is an audit or the fallback where the emulator cannot build the part."""

from __future__ import annotations

import os
from pathlib import Path

from grader.grading.case.cases import CheckMode, checked_sizes
from grader.grading.protocol import DeviceUpdate, LocatingFault
from grader.grading.worker.beside import BackgroundEmulatorChecks, checking_emulator, emulator_checker_line

#: On a GPU, how long the first checked case may wait, before its deadline starts, for the emulator's
#: compiles of the part (one per dtype, each under the toolchain's 60 s limit).
EMULATOR_COMPILES_S = 120.0
#: After the emulator's checks find one of these in a case, the GPU runs none of the part's later
#: cases (they run on the emulator, as the emulator backend runs them): a kernel that deadlocked or
#: diverged at a barrier would hang there until its deadline, and one that faulted loses the context.
GPU_STOPPERS = frozenset({"deadlock", "barrier-divergence"})


class GpuPath:
    """How a GPU worker with checks on grades each case: the emulator's checks decide (one checker on
    every machine), the GPU verifies the output of every case they pass, and compute-sanitizer is an
    audit (``sanitizer_audit``) or the fallback where the emulator cannot build the part.

    - Every case waits, within its deadline, for the emulator's checks of it (:class:`BackgroundEmulatorChecks`,
      run in the background from the worker's start): of the whole case for a checked case, of a
      sample of each launch's blocks for a sampled one (the case's
      :class:`~grader.grading.case.cases.CheckMode`). A case they fail (a
      finding of a checker's kind, a deadlock included, or a fault) is graded from them and is not
      run on the GPU: no hang, no fault, no new worker.
    - Once the kernel deadlocked or diverged at a barrier under the checks, faulted on the GPU (the
      context is lost), or an earlier worker's case hung (``job.earlier_hung``), the cases the GPU
      would run go to the emulator instead: a checked case takes its checked run, a larger one a
      plain run of every block for its output (a deadlock found at once), with a message that says why.
    """

    def __init__(self, backend, job, cfg, part, modules, cases, work: Path, job_path: str,
                 beside: BackgroundEmulatorChecks | None, events) -> None:
        self.backend, self.job, self.cfg, self.part, self.modules = backend, job, cfg, part, modules
        self.cases, self.work, self.job_path, self.beside, self.events = cases, work, job_path, beside, events
        self.sanitizer = (SanitizerChecks(backend, job, cfg, part, modules, cases, work, job_path)
                          if cfg.sanitizer_audit else None)
        self.fallback = False  # compute-sanitizer stands in for the emulator, which cannot build the part
        self.elsewhere = ("a case before these hung (ran past its deadline), so the GPU runs no more of this part"
                          if job.earlier_hung else None)  # why the GPU runs no more cases, once it does not
        self._found = None  # compute-sanitizer's findings on the case about to start
        self._own = None  # the emulator's checked run of the case being graded
        self._emulator = None
        self._emulator_modules: dict = {}

    def describe(self) -> str:
        """The report's ``checker`` line."""
        what = (emulator_checker_line(self.cfg) + ", run beside the GPU on this machine's "
                "cores: they decide those cases, and the GPU runs every case they pass to verify its output")
        if self.sanitizer is not None:
            what += "; " + self.sanitizer.describe_audit()
        return what

    def prime(self) -> None:
        """The audit: compute-sanitizer over the checked cases now, before any case's deadline runs."""
        if self.sanitizer is not None and self.sanitizer.sanitizer:
            self.sanitizer.prime()

    def before(self, case) -> None:
        """What a case needs before its deadline starts: the emulator's compiles of the part (the first
        case waits for them: a sampled case for its checks on sampled blocks), and compute-sanitizer's
        findings on a checked one where it runs (the audit, or the fallback where the emulator cannot
        build the part)."""
        self._found = None
        if case.check is not CheckMode.CHECKED:
            if self.beside is not None and not self.fallback:
                self.beside.compiled(EMULATOR_COMPILES_S)
            return
        if self.beside is None or not self.beside.compiled(EMULATOR_COMPILES_S):
            self._fall_back("the emulator's checks did not start here")
        elif self.beside.unavailable:
            self._fall_back(self.beside.unavailable)
        if self.sanitizer is not None and self.sanitizer.sanitizer:
            self._found = self.sanitizer.checks(self.cases.index(case))

    def _fall_back(self, why: str) -> None:
        if self.fallback:
            return
        self.fallback = True
        if self.sanitizer is None:
            self.sanitizer = SanitizerChecks(self.backend, self.job, self.cfg, self.part, self.modules, self.cases,
                                        self.work, self.job_path)
        self.events.emit(DeviceUpdate({"checker": f"{self.sanitizer.describe()}: the emulator's checks cannot run this "
                                                  f"part ({why.splitlines()[0] if why else 'no reason given'})"}))
        if self.sanitizer.sanitizer:
            self.sanitizer.prime()

    def decided(self, case, *, known: tuple, ahead):
        """The result of ``case`` where it is decided without the GPU, its deadline running: a failure
        of the emulator's checks (waiting for them), or a run on the emulator (see the class's
        docstring); None where the GPU is to run it (:meth:`run`)."""
        from grader.core.kinds import FAULT_KINDS

        index = self.cases.index(case)
        self._own = own = None  # the emulator's checked run of the case (a sampled case's: of its sampled blocks)
        if not self.fallback and self.beside is not None:
            self._own = own = self.beside.result(index)
            if own is not None and _decided_by_checks(own):
                if own.kind in GPU_STOPPERS or own.kind in FAULT_KINDS:
                    self.elsewhere = (f"the kernel failed at {case.name} under the emulator's checks ({own.kind}), and "
                                      "on a GPU it would hang or fault")
                return self._decided(own)
        if self.elsewhere is not None:
            if case.check is CheckMode.CHECKED and own is not None and own.status != "error":
                return own  # its checked run on the emulator: it passed, or its output is wrong
            return self._on_emulator(case, known=known, ahead=ahead)  # a sampled case: the output
        return None

    def run(self, case, *, known: tuple, ahead):
        """The result of ``case`` run on the GPU, which :meth:`decided` left to it (its deadline runs);
        ``known``: the part's earlier findings, a hint for an unchecked case's wrong output."""
        from dataclasses import replace

        from grader.grading.case.run import run_case

        index = self.cases.index(case)
        own = self._own
        found = self._found
        checked = case.check is CheckMode.CHECKED
        checker = None  # the output only: an unchecked case, or a fallback with no compute-sanitizer here
        if checked and not self.fallback:
            checker = "emulator checks"
        elif checked and self.sanitizer.sanitizer:
            checker = "compute-sanitizer"
        elif own is not None:
            checker = own.checker  # the checks on its sampled blocks found nothing
        if found is not None and found.findings:
            checker = "compute-sanitizer"
        # the GPU judges the output (the checks ran beside it, or compute-sanitizer's)
        result = run_case(self.backend, self.modules[case.dtype], cfg=self.cfg, part=self.part, case=case,
                          mode=CheckMode.PLAIN, checker=checker, sanitizer=found, known=() if checked else known,
                          ahead=ahead)
        if self.backend.broken:  # a GPU fault lost the context
            self.elsewhere = f"the kernel faulted on the GPU at {case.name}, which lost its context"
            if self.sanitizer is not None and self.sanitizer.sanitizer:
                self.events.emit(LocatingFault(case.name))  # memcheck's run is not the case's time
                result = self.sanitizer.locate_fault(result, index)
        return result if own is None or result.status != "pass" else replace(result, warnings=own.warnings)

    def _decided(self, own):
        """``own``, the emulator's failing checked run, as the case's result on the GPU path (with what
        the audit found in it, where compute-sanitizer ran)."""
        from dataclasses import replace

        extra = ""
        found = self._found.findings if self._found is not None else ()
        if found:
            extra = "\ncompute-sanitizer (audit) reports: " + "; ".join(
                f"{f.kind} at {f.file}:{f.line}" if f.line else f.kind for f in found[:5])
        return replace(own, checker=own.checker or "emulator checks",
                       message=own.message + " — found by the emulator's checks, which decide on every machine "
                                             "(not run on the GPU)" + extra)

    def _on_emulator(self, case, *, known: tuple, ahead):
        """``case`` run on the emulator as the emulator backend runs it (see :attr:`elsewhere`), its
        message saying why."""
        from dataclasses import replace

        from grader.grading.case.run import run_case
        from grader.grading.intake import read_source
        from grader.grading.compile import compile_part

        note = f"run on the emulator, not the GPU: {self.elsewhere}"
        try:
            if self._emulator is None:
                self._emulator = checking_emulator(self.cfg, self.part)
            if case.dtype not in self._emulator_modules:
                self._emulator_modules[case.dtype] = compile_part(
                    self._emulator, self.part, read_source(Path(self.job.source)), pc=self.cfg.parts[self.part.key],
                    dtype=case.dtype, workdir=self.work / f"emulator-rest-{case.dtype}")
        except Exception as exc:  # noqa: BLE001 - the emulator cannot run it: the case is not run
            from grader.grading.case.cases import not_run
            done = not_run(self.cfg, self.part.key, f"not run: {note}, and the emulator cannot run it ({exc})",
                           kind="error")
            return next(c for c in done if c.name == case.name)
        # as the emulator backend runs a case it does not check, a deadlock found at once
        result = run_case(self._emulator, self._emulator_modules[case.dtype], cfg=self.cfg, part=self.part,
                          case=case, mode=CheckMode.PLAIN, known=known, ahead=ahead)
        return replace(result, message=f"{result.message} ({note})" if result.message else note)

    def close(self) -> None:
        if self._emulator is not None:
            self._emulator.close()


def _decided_by_checks(result) -> bool:
    """Whether the emulator's checked run ``result`` decides its case on the GPU path: it failed with a
    finding of a checker's kind (a deadlock included) or a fault, which a GPU run could only repeat
    (or hang on)."""
    from grader.core.kinds import CHECK_KINDS, FAULT_KINDS

    return result.status != "pass" and any(f.kind in CHECK_KINDS or f.kind in FAULT_KINDS for f in result.findings)


class SanitizerChecks:
    """compute-sanitizer (:mod:`grader.grading.sanitizer`) on every checked case
    (:attr:`~grader.grading.case.cases.CheckMode.CHECKED`) of this worker, run once for all of them before the first: the audit a TA asks for
    (``sanitizer_audit``), or the fallback where the emulator cannot build the part. A finding fails
    the case, as the emulator's checks do. Where it is not installed (``sanitizer`` None) it checks
    nothing, and says so."""

    def __init__(self, backend, job, cfg, part, modules, cases, work: Path, job_path: str) -> None:
        from grader.grading.sanitizer import find_sanitizer, sanitizer_version

        self.backend, self.job, self.cfg, self.part, self.modules = backend, job, cfg, part, modules
        self.cases, self.work, self.job_path = cases, work, job_path
        self.sanitizer = find_sanitizer()
        self.version = sanitizer_version(self.sanitizer) if self.sanitizer else ""
        self.pool = Path(job.sanitizer_pool) if job.sanitizer_pool else None  # the submission's children
        # a timed part's timing and large cases wait for its checks: it goes first to the pool's children
        self._priority = 1 if cfg.parts[part.key].timing is not None else 0
        self._found = None

    def describe(self) -> str:
        """What checks the cases where compute-sanitizer stands in for the emulator's checks."""
        limit = checked_sizes(self.cfg)
        if self.sanitizer:
            return (f"compute-sanitizer {self.version.removeprefix('Version ')} (memcheck, racecheck, synccheck) on "
                    f"{limit}")
        return (f"nothing but each case's output on {limit} (compute-sanitizer is not installed here: install the "
                "CUDA toolkit's compute-sanitizer)")

    def describe_audit(self) -> str:
        """The audit's part of the report's ``checker`` line."""
        if self.sanitizer:
            return (f"and, as an audit (sanitizer_audit), compute-sanitizer {self.version.removeprefix('Version ')} "
                    "(memcheck, racecheck, synccheck) on the same cases: a finding of its own fails a case too")
        return "the audit asked for (sanitizer_audit) cannot run: compute-sanitizer is not installed here"

    def _cubins(self) -> dict:
        cubins = {}
        for dtype, module in self.modules.items():
            path = self.work / f"checked-{dtype}.cubin"
            path.write_bytes(module.cubin)
            cubins[dtype] = path
        return cubins

    def checks(self, index: int):
        """What compute-sanitizer found in case ``index`` of the part's case list: a
        :class:`grader.grading.sanitizer.CaseChecks`, or None. Call it before the case starts (its
        deadline): compute-sanitizer may run here. Only where it is installed."""
        if self._found is None:
            self._found = self._saved()
        if index not in self._found and index >= self.job.start and self._checked(index):
            self._check_from(index)
        return self._found.get(index)

    def _checked(self, index: int) -> bool:
        return 0 <= index < len(self.cases) and self.cases[index].check is CheckMode.CHECKED

    @property
    def _saved_path(self) -> Path:
        """What compute-sanitizer found in this part so far, kept beside the job by each worker for the
        next (a worker started after a hang does not check the same cases again)."""
        return Path(self.job_path).parent / "sanitizer-checks.json"

    def _saved(self) -> dict:
        import json

        from grader.grading.sanitizer import CaseChecks
        try:
            data = json.loads(self._saved_path.read_text(encoding="utf-8"))
            return {int(i): CaseChecks.from_json(c) for i, c in data.items()}
        except (OSError, ValueError, KeyError, TypeError):
            return {}

    def _check_from(self, first: int) -> None:
        """compute-sanitizer over the checked cases from ``first`` on not checked yet, up to the first
        one a tool goes silent on (the plain run then shows whether it hangs: its deadline decides)."""
        import json

        from grader.grading.deadlines import sanitizer_budget_s
        from grader.grading.sanitizer import check_cases

        todo = [(i, c.dtype) for i, c in enumerate(self.cases)
                if i >= first and self._checked(i) and i not in self._found]
        if not todo:
            return

        def limit(i: int) -> float:
            c = self.cases[i]
            return sanitizer_budget_s(part=self.part.key, dtype=c.dtype, n=c.n, case_s=self.cfg.timeouts.case_s)
        # The children take the GPU's lock shared around each case's launches (grader.host.gpu_lock), so
        # another worker's timed window waits for one case, not for the whole run.
        self._found.update(check_cases(sanitizer=self.sanitizer, job=Path(self.job_path), cubins=self._cubins(),
                                       cases=todo, workdir=self.work, case_timeout_s=limit,
                                       first_output_s=min(self.cfg.timeouts.case_s, 60), stop_at_silence=True,
                                       pool=self.pool, priority=self._priority))
        try:
            self._saved_path.write_text(json.dumps({i: c.to_json() for i, c in self._found.items()}),
                                        encoding="utf-8")
        except OSError:
            pass
        folder = os.environ.get("SCANGRADE_CASE_TIMES")  # bench/case_times.py: the sanitizer's time per case
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            (Path(folder) / f"{self.part.key}-sanitizer-{os.getpid()}.json").write_text(json.dumps(
                [[self.cases[i].dtype, self.cases[i].n, c.seconds] for i, c in self._found.items() if c.seconds]))

    def prime(self) -> None:
        """Check the cases of this worker now, before any case's deadline runs: compute-sanitizer over
        the checked cases (its children are stopped by its own silence limit). Only where it is
        installed."""
        self.checks(self.job.start)

    def locate_fault(self, result, index: int):
        """A case whose kernel faulted on the GPU (its context is lost), with the line where memcheck
        finds the fault added to its message (compute-sanitizer on this one case)."""
        if not self.sanitizer:
            return result
        from dataclasses import replace

        from grader.grading.sanitizer import check_cases

        try:
            found = check_cases(sanitizer=self.sanitizer, job=Path(self.job_path), cubins=self._cubins(),
                                cases=[(index, self.cases[index].dtype)], workdir=self.work,
                                case_timeout_s=min(self.cfg.timeouts.case_s, 60), tools=("memcheck",),
                                pool=self.pool).get(index)
        except OSError:
            return result
        if found and found.findings:
            from grader.core.kinds import CHECK_KINDS

            f = found.findings[0]
            # The kind memcheck gives the bug (an out-of-bounds write far past an array) is the kind the
            # emulator's checks give it: one verdict and one kind on every machine, the fault in the words.
            kind = f.kind if f.kind in CHECK_KINDS else result.kind
            return replace(result, kind=kind, message=f"{result.message}\nmemcheck finds it: {f.message}",
                           checker="compute-sanitizer")
        return result


