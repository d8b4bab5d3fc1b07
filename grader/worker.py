"""The child process that grades one part: ``python -m grader.worker JOB.json``.

Student code never runs in the grader's own process: the runner starts this worker for each
part, with deadlines. The job (a :class:`grader.protocol.Job`) carries the config the runner
validated, the part, the source file, the backend and the event file; the worker reports what it
does as the events of :mod:`grader.protocol` (their order is described there), each flushed to
the event file as it happens, so a crash or a kill loses nothing already reported.

Every visible case runs first (every dtype); then, on a GPU, the timing of a timed part whose
visible cases all passed; then a profiled part's memory-access profile (bank conflicts and sectors
per request, counted by a CPU emulator of its own, the part compiled afresh); then the hidden
cases, and nothing a student sees runs after a hidden case: the performance and the profile are
reported after them only to take their points away when a hidden case failed. A
worker started after a case that hung (the job's ``start``) grades the cases after it, and
``earlier_failed`` says a case before them did not pass (so the part is not timed).
"""

from __future__ import annotations

import functools
import json
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

from grader.parts import SOLUTIONS
from grader.profile_phase import profile_after_hidden
from grader.protocol import (CaseDone, CaseStart, Compiled, CompileFailed, CompilerNotes, Device, DeviceUpdate, Done,
                             EventWriter, HiddenStart, Job, LocatingFault, PerformanceScored, Profiled, ProfileStart,
                             ProtocolError, Restart, Timed, TimingStart, WorkerError)

#: The smallest copy (bytes read + written) whose bandwidth the report records and checks.
COPY_BANDWIDTH_MIN_BYTES = 128 * 2**20
#: On a GPU, how long the first checked case may wait for the emulator's compiles of the part (one
#: per dtype, each under the toolchain's 60 s limit) on top of its own budget on the emulator.
EMULATOR_COMPILES_S = 120.0


def _die_with_runner() -> None:
    """End this worker (SIGKILL) when the thread of the runner that started it ends, however it ends
    (Ctrl-C, a kill, a crash), so no student code runs on after the grader: the executors go with
    the worker (bubblewrap's ``--die-with-parent``, or their own ``PR_SET_PDEATHSIG``). Where the
    runner is already gone (its pid, from ``SCANGRADE_RUNNER_PID``, is no longer the parent), exit
    at once. Linux only; elsewhere nothing happens."""
    from grader.lifetime import die_with_parent

    if not die_with_parent():
        return
    runner = os.environ.get("SCANGRADE_RUNNER_PID")
    if runner and runner.isdigit() and os.getppid() != int(runner):
        os._exit(3)


def main(argv: list[str]) -> int:
    """Run the job described by ``argv[0]``; returns the exit status (0 also when cases fail)."""
    _die_with_runner()
    job = _read_job(argv[0])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    from grader.backends import backend_kind, create_backend
    from grader.errors import BackendUnavailable, CompileError, ScangradeError
    from grader.execute import CHECK_SCHEDULES, case_list, case_runs, device_memory_bytes, run_case, with_compiler_notes
    from grader.parts import DTYPES, PARTS, compile_part, part_header, part_source
    from grader.directives import check_includes
    from grader.intake import read_source
    from grader.resources import resource_failure

    cfg = job.config  # the config the runner validated, its settings included
    part = PARTS[job.part]
    pc = cfg.parts[part.key]
    kind = backend_kind(job.backend)  # its traits
    # on a GPU, nvcc from now on, beside the CUDA context's start
    cubins = _cubins_ahead(kind, job, cfg, part)
    # on a GPU, the emulator's checks, so that the verdict is the emulator's, from now on: beside the
    # CUDA context's start, the compile and compute-sanitizer
    beside = _emulator_beside(kind, job, cfg, part)
    with EventWriter(job.events) as events:
        try:
            backend = create_backend(job.backend, emulator_workers=cfg.emulator.workers,
                                     checks=job.checks, emulator_sandbox=cfg.emulator.sandbox,
                                     device_memory=device_memory_bytes(case_runs(cfg, part.key)),
                                     target_arch=cfg.target_arch)
        except ScangradeError as exc:
            events.emit(WorkerError(str(exc)))
            if beside is not None:
                beside.close()
            return 0
        try:
            events.emit(Device(backend.describe()))
            source = read_source(Path(job.source))  # BOM dropped; non-UTF-8 read losslessly
            with tempfile.TemporaryDirectory(prefix="scangrade-build-") as work:
                modules = {}

                def build(spec, text: str, dtype: str, tag: str):
                    """``spec``'s file ``text`` compiled for ``dtype`` on the backend, in a folder of its
                    own; or the cubin compiled ahead of the same text, loaded."""
                    spec_pc = cfg.parts.get(spec.key, pc)
                    whole, cubin = cubins.get((tag, spec.key, dtype), (None, None))
                    if cubin is not None and whole == part_source(spec, text, pc=spec_pc, dtype=dtype):
                        try:
                            return backend.load_cubin(cubin.result(), filename=spec.filename, kernels=spec.kernels)
                        except BackendUnavailable:  # the device could not be read there: compile here
                            pass
                    return compile_part(backend, spec, text, pc=spec_pc, dtype=dtype,
                                        workdir=Path(work) / f"{tag}-{spec.key}-{dtype}")
                try:
                    check_includes(source, filename=part.filename)
                    for dtype in pc.dtypes:
                        modules[dtype] = build(part, source, dtype, "submission")
                except CompileError as exc:
                    events.emit(CompileFailed(str(exc)))
                    return 0
                events.emit(Compiled())
                results = []
                all_cases = case_list(cfg, part.key)
                ahead = _draw_ahead(kind, job, cfg, part, all_cases)
                checker = (_GpuChecks(backend, job, cfg, part, modules, all_cases, Path(work), argv[0])
                           if kind.has_sanitizer and job.checks else None)
                if checker is not None:
                    checker.beside = beside
                    events.emit(DeviceUpdate({"checker": checker.describe()}))
                    checker.prime()  # every checked case under compute-sanitizer now, before any case's deadline runs
                elif job.checks:  # the backend checks as it runs each case
                    events.emit(DeviceUpdate({"checker": "the emulator's checks (races, bounds, barriers, unwritten "
                                                         "shared memory; three thread orders) on cases up to n = "
                                                         f"{cfg.emulator.checks_max_n}"}))

                notes: dict[str, list[str]] = {}

                def compiler_notes(dtype: str) -> list[str]:
                    """What the host compiler warns about in the student's lines (conversions,
                    dropped results), for ``dtype``'s header; computed once, at its first mismatch."""
                    if dtype not in notes:
                        folder = Path(work) / f"notes-{dtype}"
                        folder.mkdir()
                        header = part_header(part, block_size=pc.block_size, dtype=DTYPES[dtype],
                                             items_per_thread=pc.items_per_thread)
                        notes[dtype] = _compiler_notes(backend, cfg, header + source, part.filename, folder)
                    return notes[dtype]

                def run(case) -> None:
                    checked = job.checks and case.n <= cfg.emulator.checks_max_n
                    # compute-sanitizer's findings before the case's deadline starts (it may run now)
                    found = checker.checks(all_cases.index(case)) if checker and checker.sanitizer and checked else None
                    with backend.gpu_shared():  # taken before the deadline starts: another part may be timing
                        run_one(case, checked, found)

                def run_one(case, checked: bool, found) -> None:
                    events.emit(CaseStart(case.name))
                    if job.checks and not kind.has_sanitizer:
                        backend.checks = checked  # large sizes: plain runs, but a deadlock is still found at once
                        backend.detect_deadlock = True
                    if checker is not None and checked:
                        result = run_case(backend, modules[case.dtype], cfg=cfg, part=part, case=case,
                                          checked=found if checker.sanitizer else checker.checks(all_cases.index(case)),
                                          checker=checker.name, ahead=ahead)
                    else:
                        result = run_case(backend, modules[case.dtype], cfg=cfg, part=part, case=case,
                                          schedules=CHECK_SCHEDULES if checked else (),
                                          checker="emulator checks" if checked else None,
                                          known=tuple(f for r in results for f in r.findings), ahead=ahead)
                    if getattr(backend, "broken", False) and checker is not None and checker.sanitizer:
                        events.emit(LocatingFault(case.name))  # memcheck's run is not the case's time
                        result = checker.locate_fault(result, all_cases.index(case))
                    if any(f.kind == "mismatch" for f in result.findings):
                        if case.dtype not in notes:
                            events.emit(CompilerNotes(case.name))  # the compiler's time is not the case's
                        result = with_compiler_notes(result, compiler_notes(case.dtype), results)
                    results.append(result)
                    events.emit(CaseDone(result))
                    if getattr(backend, "broken", False):  # a GPU fault lost the context: a new worker goes on
                        events.emit(Restart(case.name))
                        events.close()
                        os._exit(0)  # not through PyCUDA's clean-up of a lost context (it prints warnings)
                # Every visible case, and the timing, before any hidden case: a kernel can keep state
                # across launches (a __device__ global), so nothing a student sees may run after one.
                # A worker started after a case that hung (job "start") grades the cases after it.
                cases = case_list(cfg, part.key)[job.start:]
                for case in (c for c in cases if c.visibility != "hidden"):
                    run(case)
                performance = None
                if pc.timing is not None:
                    performance = _time_part(events, backend, cfg, part, pc, modules, results, build,
                                             earlier_failed=job.earlier_failed, ahead=ahead)
                profile = None
                if pc.profile is not None:  # its counts and messages too: before any hidden case
                    profile = _profile_part(events, backend, cfg, part, source, results, Path(work),
                                            earlier_failed=job.earlier_failed)
                hidden = [c for c in cases if c.visibility == "hidden"]
                if hidden:
                    events.emit(HiddenStart())
                for case in hidden:
                    run(case)
                hidden_results = [r for r in results if r.visibility == "hidden"]
                if performance is not None:
                    performance = performance_after_hidden(performance, hidden_results)
                    events.emit(PerformanceScored(performance))
                if profile is not None:
                    events.emit(Profiled(profile_after_hidden(profile, hidden_results)))
        except Exception as exc:  # the machine ran short (ulimit -v): the part's error, in one line
            line = resource_failure(exc, sizes=f"the sizes of {part.key} in the config", hidden=bool(pc.hidden_sizes))
            if line is None:
                raise
            events.emit(WorkerError(line))
            return 0
        finally:
            if beside is not None:
                beside.close()
            backend.close()
        events.emit(Done())
    return 0


def _cubins_ahead(kind, job, cfg, part) -> dict:
    """Where the backend compiles ahead (the GPU's ``compile_ahead``: nvcc needs no CUDA context):
    the part's file for each dtype, then, for a timed part, the reference solution it is timed
    against, compiled from now on in the background: ``{(tag, part key, dtype): (translation unit,
    Future of the cubin)}`` (tag ``submission`` or ``reference``, as the worker's ``build`` names
    them). Empty on other backends, and where the file cannot be read or its ``#include`` lines are
    refused: the worker's own compile then reports it."""
    import importlib

    from grader.directives import check_includes
    from grader.errors import ScangradeError
    from grader.intake import read_source
    from grader.parts import PARTS, part_source

    ahead = getattr(importlib.import_module(kind.module), "compile_ahead", None)
    if ahead is None:
        return {}
    pc = cfg.parts[part.key]
    try:
        source = read_source(Path(job.source))
        check_includes(source, filename=part.filename)
    except (OSError, ScangradeError):
        return {}
    builds = [(("submission", part.key, d), part_source(part, source, pc=pc, dtype=d), part.filename)
              for d in pc.dtypes]
    if pc.timing is not None and kind.times_kernels and not job.earlier_failed:
        ref = PARTS[pc.timing.reference]
        ref_file = SOLUTIONS / ref.filename
        if ref_file.is_file():
            builds.append((("reference", ref.key, pc.dtypes[0]),
                           part_source(ref, ref_file.read_text(), pc=cfg.parts.get(ref.key, pc), dtype=pc.dtypes[0]),
                           ref.filename))
    futures = ahead(builds, sandbox=cfg.emulator.sandbox)
    return {tag: (text, futures[tag]) for tag, text, _ in builds}


def _draw_ahead(kind, job, cfg, part, cases):
    """On a GPU, the inputs of this worker's large visible cases (those compute-sanitizer does not
    check) and of its timed sizes, drawn in the background from now (:class:`grader.execute.DrawAhead`):
    the host work is done while compute-sanitizer checks the small cases. None on the emulator (its
    cases are checked as they run: nothing to overlap)."""
    from grader.execute import DrawAhead
    from grader.parts import DTYPES

    if not kind.times_kernels:
        return None
    pc = cfg.parts[part.key]
    items = [(c.n, c.seed, DTYPES[c.dtype]) for c in cases[job.start:]
             if c.visibility != "hidden" and c.n > cfg.emulator.checks_max_n]
    if pc.timing is not None and not job.earlier_failed:
        items += [(n, cfg.seed, DTYPES[pc.dtypes[0]]) for n in pc.timing.sizes]
    return DrawAhead(cfg, part, items) if items else None


def _time_part(events, backend, cfg, part, pc, modules, results, build, *, earlier_failed: bool = False,
               ahead=None):
    """The timing phase of a part (GPU only), after the visible cases and before the hidden ones:
    ``timed`` events, and the :class:`~grader.results.Performance` they earn (returned; the caller
    reports it once the hidden cases have run, see :func:`performance_after_hidden`).
    ``earlier_failed``: a case before this worker's first failed (it hung), so nothing is timed."""
    from grader.backends import backend_kind
    from grader.errors import CompileError
    from grader.execute import score_performance, time_case
    from grader.parts import PARTS
    from grader.results import Performance

    tc = pc.timing
    if not backend_kind(backend.name).times_kernels:
        return Performance(0.0, tc.points, None, f"not timed: the {backend.name} backend cannot time kernels; "
                                                 "performance points need a run on a GPU")
    if earlier_failed or any(r.status != "pass" for r in results):
        return Performance(0.0, tc.points, None, "not timed: performance is scored only when every case passes")
    events.emit(TimingStart())
    ref_spec = PARTS[tc.reference]
    ref_file = SOLUTIONS / ref_spec.filename
    dtype = pc.dtypes[0]
    reference = None
    if ref_file.is_file():
        try:
            reference = (ref_spec, build(ref_spec, ref_file.read_text(), dtype, "reference"))
        except CompileError as exc:  # the course's own reference must compile; say so plainly
            return Performance(0.0, tc.points, None, f"not scored: the reference solution does not compile: {exc}")
    timed = []
    for n in tc.sizes:
        events.emit(CaseStart(f"timed n={n} {dtype}"))
        result = time_case(backend, modules[dtype], cfg=cfg, part=part, n=n, dtype_name=dtype, reference=reference,
                           ahead=ahead)
        timed.append(result)
        events.emit(Timed(result))
    gpu = backend.describe().get("device", "")
    performance = score_performance(tc, timed, gpu=gpu)
    # Copy bandwidth is only meaningful for a copy large enough to leave launch latency behind.
    copies = [c.timing.gbps / c.timing.copy_fraction for c in timed
              if c.timing and c.timing.copy_fraction and c.n * 8 >= COPY_BANDWIDTH_MIN_BYTES]
    if copies:
        copy_gbps = max(copies)
        name = gpu
        expected = cfg.timing.expected_copy_gbps.get(name)
        info = {"copy_gbps": f"{copy_gbps:.0f}"}
        if expected and copy_gbps < 0.5 * expected:
            info["warnings"] = (f"device-to-device copy reached {copy_gbps:.0f} GB/s, far below the "
                                f"{expected:.0f} GB/s a {name} should give: the GPU may be shared or throttled, "
                                "so these timings are suspect")
        events.emit(DeviceUpdate(info))
    return performance


def performance_after_hidden(performance, hidden: list):
    """The performance a part earns once its hidden cases have run: ``performance`` as scored from
    the timed cases, or no points when a hidden case did not pass (performance is scored only when
    every case passes). None stays None; a part that was not scored keeps its reason."""
    from grader.results import Performance

    if performance is None or performance.ratio is None or all(c.status == "pass" for c in hidden):
        return performance
    return Performance(0.0, performance.max_points, None, "no performance points: a hidden case did not pass "
                                                          "(performance is scored only when every case passes)")


def _profile_part(events, backend, cfg, part, source, results, work: Path, *, earlier_failed: bool):
    """The memory-access profile of a part (bank conflicts, sectors per request), counted by the
    CPU emulator on any machine, in an emulator of its own (:func:`grader.profile_phase.profile_phase`),
    after the visible cases and before any hidden one: ``profile-start`` when it runs, and the
    :class:`~grader.results.Profile` (returned: reported, after the hidden cases, as a ``profile``
    event scored by :func:`grader.profile_phase.profile_after_hidden`). On the emulator, the cases'
    executors are stopped first (they start again at the next launch), so the part still has one
    executor alive at a time."""
    from grader.backends import backend_kind
    from grader.profile_phase import profile_phase

    if not earlier_failed and all(r.status == "pass" for r in results):
        events.emit(ProfileStart())
        if backend_kind(backend.name).counts_profile:
            backend.close()
    return profile_phase(cfg=cfg, part=part, source=source, results=results, workdir=work, solutions=SOLUTIONS,
                         earlier_failed=earlier_failed)


class _GpuChecks:
    """The checks of the GPU path: compute-sanitizer (:mod:`grader.sanitizer`) on every case up to
    ``emulator.checks_max_n`` of this worker, run once for all of them before the first; where it
    is not installed, the emulator's checks on those cases instead (the part compiled for the
    emulator too). Either way a finding fails the case, as on the emulator."""

    def __init__(self, backend, job, cfg, part, modules, cases, work: Path, job_path: str) -> None:
        from grader.sanitizer import find_sanitizer, sanitizer_version

        self.backend, self.job, self.cfg, self.part, self.modules = backend, job, cfg, part, modules
        self.cases, self.work, self.job_path = cases, work, job_path
        self.sanitizer = find_sanitizer()
        self.version = sanitizer_version(self.sanitizer) if self.sanitizer else ""
        self.name = "compute-sanitizer" if self.sanitizer else "emulator checks"
        self.pool = Path(job.sanitizer_pool) if job.sanitizer_pool else None  # the submission's children
        # a timed part's timing and large cases wait for its checks: it goes first to the pool's children
        self._priority = 1 if cfg.parts[part.key].timing is not None else 0
        self._found = None
        self._emulator = None
        self._emulator_modules: dict = {}
        self.beside: _EmulatorBeside | None = None  # set by the worker: the emulator's checks of the same cases

    def describe(self) -> str:
        limit = f"cases up to n = {self.cfg.emulator.checks_max_n}"
        if self.sanitizer:
            return (f"compute-sanitizer {self.version.removeprefix('Version ')} (memcheck, racecheck, synccheck) on "
                    f"{limit}, and the emulator's checks of the same cases (races on global memory and memory "
                    "order, which it cannot see; what it missed; the emulator's verdict leads)")
        return (f"the emulator's checks on {limit} (compute-sanitizer is not installed here: install the CUDA "
                "toolkit's compute-sanitizer for NVIDIA's own)")

    def _cubins(self) -> dict:
        cubins = {}
        for dtype, module in self.modules.items():
            path = self.work / f"checked-{dtype}.cubin"
            path.write_bytes(module.cubin)
            cubins[dtype] = path
        return cubins

    def checks(self, index: int):
        """What the checker found in case ``index`` of the part's case list: a
        :class:`grader.sanitizer.CaseChecks`, or, without compute-sanitizer, the emulator's failing
        CaseResult (None when the emulator's checks found nothing). Call it before the case starts
        (its deadline): compute-sanitizer may run here."""
        if not self.sanitizer:
            return self._emulator_checks(index)
        from dataclasses import replace

        from grader.sanitizer import CaseChecks
        if self._found is None:
            self._found = self._saved()
        if index not in self._found and index >= self.job.start and self._checked(index):
            self._check_from(index)
        found = self._found.get(index)
        beside = self.beside.of(index) if self.beside is not None else []
        if beside:
            found = replace(found or CaseChecks([], complete=False, tools=[]), emulator=beside)
        return found

    def _checked(self, index: int) -> bool:
        return 0 <= index < len(self.cases) and self.cases[index].n <= self.cfg.emulator.checks_max_n

    @property
    def _saved_path(self) -> Path:
        """What compute-sanitizer found in this part so far, kept beside the job by each worker for the
        next (a worker started after a hang does not check the same cases again)."""
        return Path(self.job_path).parent / "sanitizer-checks.json"

    def _saved(self) -> dict:
        import json

        from grader.sanitizer import CaseChecks
        try:
            data = json.loads(self._saved_path.read_text(encoding="utf-8"))
            return {int(i): CaseChecks.from_json(c) for i, c in data.items()}
        except (OSError, ValueError, KeyError, TypeError):
            return {}

    def _check_from(self, first: int) -> None:
        """compute-sanitizer over the checked cases from ``first`` on not checked yet, up to the first
        one a tool goes silent on (the plain run then shows whether it hangs: its deadline decides)."""
        import json

        from grader.deadlines import sanitizer_budget_s
        from grader.sanitizer import check_cases

        todo = [(i, c.dtype) for i, c in enumerate(self.cases)
                if i >= first and self._checked(i) and i not in self._found]
        if not todo:
            return

        def limit(i: int) -> float:
            c = self.cases[i]
            return sanitizer_budget_s(part=self.part.key, dtype=c.dtype, n=c.n, case_s=self.cfg.timeouts.case_s)
        # The children take the GPU's lock shared around each case's launches (grader.gpu_lock), so
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
        """Check the cases of this worker now, before any case's deadline runs: compute-sanitizer
        over the checked cases (its children are stopped by its own silence limit), or the part
        compiled for the emulator's checks where it is not installed."""
        if self.sanitizer:
            self.checks(self.job.start)
        elif any(self._checked(i) for i in range(self.job.start, len(self.cases))):
            self._emulator_modules_for({c.dtype for c in self.cases[self.job.start:]})

    def _emulator_modules_for(self, dtypes) -> None:
        """The emulator backend with checks on, and the part compiled by it for each of ``dtypes``."""
        from grader.intake import read_source
        from grader.parts import compile_part

        if self._emulator is None:
            self._emulator = _checking_emulator(self.cfg, self.part)
        pc = self.cfg.parts[self.part.key]
        for dtype in sorted(set(dtypes) - set(self._emulator_modules)):
            self._emulator_modules[dtype] = compile_part(self._emulator, self.part, read_source(Path(self.job.source)),
                                                         pc=pc, dtype=dtype, workdir=self.work / f"emulator-checks-{dtype}")

    def _emulator_checks(self, index: int):
        case = self.cases[index]
        self._emulator_modules_for({case.dtype})
        return _emulator_check(self._emulator, self._emulator_modules[case.dtype], self.cfg, self.part, case)

    def locate_fault(self, result, index: int):
        """A case whose kernel faulted on the GPU (its context is lost), with the line where memcheck
        finds the fault added to its message (compute-sanitizer on this one case)."""
        if not self.sanitizer:
            return result
        from dataclasses import replace

        from grader.sanitizer import check_cases

        try:
            found = check_cases(sanitizer=self.sanitizer, job=Path(self.job_path), cubins=self._cubins(),
                                cases=[(index, self.cases[index].dtype)], workdir=self.work,
                                case_timeout_s=min(self.cfg.timeouts.case_s, 60), tools=("memcheck",),
                                pool=self.pool).get(index)
        except OSError:
            return result
        if found and found.findings:
            from grader.kinds import CHECK_KINDS

            f = found.findings[0]
            # The kind memcheck gives the bug (an out-of-bounds write far past an array) is the kind the
            # emulator's checks give it: one verdict and one kind on every machine, the fault in the words.
            kind = f.kind if f.kind in CHECK_KINDS else result.kind
            return replace(result, kind=kind, message=f"{result.message}\nmemcheck finds it: {f.message}",
                           checker=self.name)
        return result


class _EmulatorBeside:
    """On the GPU path with compute-sanitizer: the emulator's checks of the part's checked cases
    (from the job's ``start``), run in a background thread from the worker's start on, beside its
    CUDA context, its compile and compute-sanitizer, keeping per case what the GPU path takes from
    them (:func:`taken_from_emulator`)."""

    def __init__(self, job, cfg, part, cases, source: str) -> None:
        self.job, self.cfg, self.part, self.cases = job, cfg, part, cases
        self._found: dict[int, list] = {}
        todo = [i for i in range(job.start, len(cases)) if cases[i].n <= cfg.emulator.checks_max_n]
        self._ready = {i: threading.Event() for i in todo}
        self._compiled = threading.Event()
        self._lost = False  # the background run overran a case's budget: nothing more from it
        self._emulator = None
        self._work = Path(tempfile.mkdtemp(prefix="scangrade-emulator-checks-"))
        self._started = time.time()
        self._thread = threading.Thread(target=self._run, args=(todo, source), name="scangrade-emulator-checks",
                                        daemon=True)
        self._thread.start()

    def _run(self, todo: list[int], source: str) -> None:
        from grader.errors import ScangradeError
        from grader.parts import compile_part

        try:
            self._emulator = _checking_emulator(self.cfg, self.part)
            pc = self.cfg.parts[self.part.key]
            modules = _at_once({d: functools.partial(compile_part, self._emulator, self.part, source, pc=pc, dtype=d,
                                                     workdir=self._work / d)
                                for d in sorted({self.cases[i].dtype for i in todo})})
            self._compiled.set()
            compiled = time.time()
            for i in todo:
                case = self.cases[i]
                failed = _emulator_check(self._emulator, modules[case.dtype], self.cfg, self.part, case)
                self._found[i] = taken_from_emulator(failed.findings, failed.kind) if failed is not None else []
                self._ready[i].set()
            trace = os.environ.get("SCANGRADE_CASE_TIMES")  # bench: when the compiles and the cases were done
            if trace:
                Path(trace).mkdir(parents=True, exist_ok=True)
                (Path(trace) / f"{self.part.key}-emulator-checks-{os.getpid()}.json").write_text(json.dumps(
                    {"started": self._started, "compiled": compiled, "done": time.time(), "cases": len(todo)}))
        except ScangradeError:  # the emulator cannot build or run it: the GPU's own checks decide
            pass
        except Exception:  # noqa: BLE001 - closed under it (the worker ends): nothing more to add
            pass
        finally:
            self._compiled.set()
            for event in self._ready.values():
                event.set()

    def of(self, index: int) -> list:
        """The emulator's findings on case ``index`` that the GPU path takes, waiting for
        the background run up to the case's budget on the emulator (before the part's emulator
        compiles are done: plus :data:`EMULATOR_COMPILES_S`). A run that overruns it adds nothing
        to this case or any later one."""
        from grader.deadlines import case_budget_s

        ready = self._ready.get(index)
        if ready is None or self._lost:
            return []
        case = self.cases[index]
        budget = case_budget_s(backend="emulator", part=self.part.key, dtype=case.dtype, n=case.n, checked=True,
                               case_s=self.cfg.timeouts.case_s)
        if not self._compiled.wait(EMULATOR_COMPILES_S) or not ready.wait(budget):
            self._lost = True
            return []
        return self._found.get(index, [])

    def close(self) -> None:
        """Stop the emulator's executors (a run still going ends with an error) and remove its files."""
        import shutil

        if self._emulator is not None:
            self._emulator.close()
        shutil.rmtree(self._work, ignore_errors=True)


def _at_once(calls: dict) -> dict:
    """``{key: call()}``, the calls made at once, each in a daemon thread of its own (a worker that
    ends does not wait for them); the first error raised, in ``calls``' order, is raised again."""
    from grader.lifetime import daemon_futures

    return {key: future.result() for key, future in daemon_futures(calls, len(calls)).items()}


def _checking_emulator(cfg, part):
    """An emulator backend with its checks on (the config's workers and sandbox), for the GPU path:
    its runtime built quickly (:data:`grader.backends.emulator.build.QUICK_RUNTIME_FLAGS`), its
    device memory what ``part``'s checked cases need, compiling for the config's ``target_arch`` (not
    the GPU this worker runs on: the checks see what the course's GPU compiles)."""
    from grader.backends.emulator import EmulatorBackend
    from grader.backends.emulator.build import QUICK_RUNTIME_FLAGS
    from grader.execute import case_runs, device_memory_bytes

    return EmulatorBackend(workers=cfg.emulator.workers, checks=True, sandbox=cfg.emulator.sandbox, nvcc_check=False,
                           runtime_flags=QUICK_RUNTIME_FLAGS, target_arch=cfg.target_arch,
                           device_memory=device_memory_bytes(case_runs(cfg, part.key, max_n=cfg.emulator.checks_max_n)))


def _emulator_check(emulator, module, cfg, part, case):
    """Case ``case`` under the emulator's checks (three thread orders): its failing CaseResult where
    a check found something, else None."""
    from grader.execute import CHECK_SCHEDULES, run_case
    from grader.kinds import CHECK_KINDS

    result = run_case(emulator, module, cfg=cfg, part=part, case=case, schedules=CHECK_SCHEDULES,
                      checker="emulator checks")
    return result if result.status != "pass" and any(f.kind in CHECK_KINDS for f in result.findings) else None


def _emulator_beside(kind, job, cfg, part) -> "_EmulatorBeside | None":
    """The emulator's checks beside compute-sanitizer (:class:`_EmulatorBeside`), started
    now, where this worker will run compute-sanitizer (a GPU backend, checks on, the tool
    installed, the source readable); else None."""
    from grader.execute import case_list
    from grader.intake import read_source
    from grader.sanitizer import find_sanitizer

    if not (kind.has_sanitizer and job.checks and find_sanitizer()):
        return None
    try:
        source = read_source(Path(job.source))
    except OSError:
        return None  # the worker reports it
    return _EmulatorBeside(job, cfg, part, case_list(cfg, part.key), source)


def taken_from_emulator(findings, kind: str | None = None) -> list:
    """What the GPU path takes from the emulator's checks of a case (``findings``, the emulator's
    failing ``grader.results.CaseFinding`` list, ``kind`` its case's kind), as
    ``grader.backends.base.Finding``, so that a kernel gets the same verdict on a GPU as on the
    emulator: every finding of a checker's kind (:data:`grader.kinds.CHECK_KINDS`) but a deadlock,
    the one of ``kind`` first (on the GPU path it leads the case's findings, as on the emulator).

    compute-sanitizer cannot make some of them, and misses others:

    - races on global memory, between blocks or within one, memory order included (a flag read
      before the value behind it was published: Merrill & Garland 2016, section 4): racecheck
      watches shared memory only;
    - out-of-bounds accesses: past a ``__shared__`` array but inside the block's shared memory,
      memcheck cannot see them (another array's memory, or the dynamic part behind a static array,
      is valid memory to it); and on an NVIDIA H100 it passed a read of ``in[n]`` at n = 128 and 256
      that the emulator's exact bounds fail (tests/kernels/part1_le_n_guard.cu);
    - races in shared memory that racecheck did not report (tests/kernels/part2_missing_sync.cu on
      an H100, at 26 of its 32 cases), and an output that depends on unwritten shared memory where
      the GPU's memory happened to hold the right values;
    - where both report a case, the kinds may differ: a read of ``temp[-1]`` is a race to racecheck
      and out of bounds to the emulator (tests/kernels/part2_reads_minus_one.cu), which the
      emulator's kind settles.

    Not a deadlock the emulator finds (every thread spin-waits, nothing changes): on a GPU that
    case hangs to its deadline (``timeout``). Taking it made compute-sanitizer's child go silent on
    every such case in turn (part1_hang.cu was not graded within 250 s on an H100; 81 s without).
    """
    from grader.backends.base import Finding
    from grader.kinds import CHECK_KINDS

    out = [Finding(f.kind, f.message, f.file, f.line, block=f.block, thread=f.thread)
           for f in findings if f.kind in CHECK_KINDS and f.kind != "deadlock"]
    return sorted(out, key=lambda f: f.kind != kind)


def _compiler_notes(backend, cfg, source: str, filename: str, workdir: Path) -> list[str]:
    """The host compiler's notes on ``source`` (:meth:`grader.backends.emulator.build.Toolchain.compiler_notes`),
    with the emulator's toolchain, or on a GPU one made for it; ``[]`` where no host compiler runs."""
    from grader.backends.emulator.build import Toolchain
    from grader.backends.emulator.sandbox import Sandbox
    from grader.errors import ScangradeError

    try:
        toolchain = getattr(backend, "toolchain", None) or Toolchain(sandbox=Sandbox(cfg.emulator.sandbox or "auto"),
                                                                     target_arch=cfg.target_arch)
        return toolchain.compiler_notes(source, filename=filename, workdir=workdir)
    except (ScangradeError, OSError, ValueError):
        return []


def _read_job(path: str) -> Job:
    """The job in the file at ``path``.

    Raises:
        ProtocolError: the file cannot be read, or is not a job (the message names the file).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"{path}: cannot read the job ({exc})") from None
    return Job.from_json(text, where=path)


def _profiled(argv: list[str]) -> int:
    """:func:`main` under cProfile when ``SCANGRADE_PROFILE`` names a folder: ``<part>-<pid>.prof``
    there, for ``bench/profile_summary.py`` (see docs/throughput.md); plain :func:`main` otherwise."""
    folder = os.environ.get("SCANGRADE_PROFILE")
    if not folder:
        return main(argv)
    import cProfile

    profile = cProfile.Profile()
    try:
        return profile.runcall(main, argv)
    finally:
        try:
            part = _read_job(argv[0]).part
        except ProtocolError:
            part = "part"
        Path(folder).mkdir(parents=True, exist_ok=True)
        profile.dump_stats(str(Path(folder) / f"{part}-{os.getpid()}.prof"))


def _cli(argv: list[str]) -> int:
    """``python -m grader.worker JOB.json``: a job file the worker cannot use is one line on
    stderr and exit status 2 (the runner reports the part as a grader error with that line)."""
    try:
        return _profiled(argv)
    except ProtocolError as exc:
        print(f"scangrade worker: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(_cli(sys.argv[1:]))
