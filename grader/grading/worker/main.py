"""The worker's flow (:func:`main`): the job read, the part compiled (a job that only compiles ends
there), its visible cases, then the phases between them and the hidden cases (timing, roofline,
profile), then the hidden cases, each step reported as an event; and its command line (:func:`cli`,
``python -m grader.grading.worker``)."""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from grader.assignment.parts import SOLUTIONS
from grader.grading.profiling import profile_after_hidden
from grader.grading.protocol import (SERVE_ARG, CaseDone, CaseStart, Compiled, CompileFailed, CompilerNotes, Device,
                                     DeviceUpdate, Done, EventWriter, GpuWait, HiddenStart, Job, PerformanceScored,
                                     Profiled, ProfileStart, ProtocolError, WorkerError)
from grader.grading.worker.ahead import cubins_ahead, draw_ahead
from grader.grading.worker.beside import emulator_checker_line, emulator_runtime_flags, start_background_checks
from grader.grading.worker.gpu_path import GpuPath
from grader.grading.worker.timing_phase import performance_after_hidden, time_part


def _die_with_runner() -> None:
    """End this worker (SIGKILL) when the thread of the runner that started it ends, however it ends
    (Ctrl-C, a kill, a crash), so no student code runs on after the grader: the executors go with
    the worker (bubblewrap's ``--die-with-parent``, or their own ``PR_SET_PDEATHSIG``). Where the
    runner is already gone (its pid, from ``SCANGRADE_RUNNER_PID``, is no longer the parent), exit
    at once. The runner ties the worker before exec already
    (:func:`grader.host.parent_death.tied_to_this_process`); this covers a worker started otherwise
    (by hand, by a test). Linux only; elsewhere nothing happens."""
    from grader.host.parent_death import die_with_parent

    if not die_with_parent():
        return
    runner = os.environ.get("SCANGRADE_RUNNER_PID")
    if runner and runner.isdigit() and os.getppid() != int(runner):
        os._exit(3)


#: The grading (:attr:`grader.grading.protocol.Job.grading`) of the last job this process ran; None before the first.
_last_grading: str | None = None


def _begin_grading(job: Job) -> None:
    """Before ``job``: where it is of another grading than the last job of this process (a batch's next
    submission, in a worker that serves one job after another), clear what the last one left on the
    GPU (:func:`grader.backends.pycuda.contexts.start_grading`); set the grading's token, by which
    the compile cache counts its quota (:data:`grader.toolchain.cache.CACHE_OWNER_ENV`; the
    job is the only place a worker gets it from)."""
    global _last_grading
    from grader.toolchain.cache import CACHE_OWNER_ENV

    if _last_grading is not None and job.grading != _last_grading and "grader.backends.pycuda" in sys.modules:
        from grader.backends.pycuda import start_grading

        start_grading()
    _last_grading = job.grading
    if job.grading:
        os.environ[CACHE_OWNER_ENV] = job.grading
    else:
        os.environ.pop(CACHE_OWNER_ENV, None)


def main(argv: list[str]) -> int:
    """Run the job described by ``argv[0]``; returns the exit status (0 also when cases fail)."""
    _die_with_runner()
    usage = _usage()  # a worker that serves several jobs counts each one's own CPU
    job = _read_job(argv[0])
    _begin_grading(job)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    from grader.assignment.parts import PARTS
    from grader.backends import backend_kind, create_backend
    from grader.toolchain.cache import CacheLimits, set_cache_limits
    from grader.core.errors import ScangradeError
    from grader.backends.pycuda import pool_device_memory
    from grader.grading.case.cases import case_runs, device_memory_bytes
    from grader.host.resources import resource_failure

    cfg = job.config  # the config the runner validated, its settings included
    set_cache_limits(CacheLimits(**cfg.compile_cache.model_dump()))  # this grading's compile cache bounds
    part = PARTS[job.part]
    pc = cfg.parts[part.key]
    kind = backend_kind(job.backend)  # its traits
    pool_device_memory()  # on a GPU, a case's large buffers are the last case's, not the driver's anew
    # on a GPU, nvcc from now on, beside the CUDA context's start
    cubins = cubins_ahead(kind, job, cfg, part)
    # on a GPU, the emulator's checks, the checker of every machine, from now on: beside the CUDA
    # context's start and the compile (not for a job that only compiles)
    background = None if job.compile_only else start_background_checks(kind, job, cfg, part)
    grader = None
    with EventWriter(job.events) as events:
        try:
            backend = create_backend(job.backend, emulator_workers=cfg.emulator.workers,
                                     checks=job.checks, emulator_sandbox=cfg.emulator.sandbox,
                                     device_memory=device_memory_bytes(case_runs(cfg, part.key)),
                                     target_arch=cfg.target_arch)
        except ScangradeError as exc:
            events.emit(WorkerError(str(exc)))
            if background is not None:
                background.close()
            return 0
        try:
            events.emit(Device(backend.describe()))
            with tempfile.TemporaryDirectory(prefix="scangrade-build-") as work:
                grader = _PartGrader(job, argv[0], backend, events, cubins, background, Path(work))
                if not grader.compile():
                    return 0
                if not job.compile_only:
                    grader.prepare()
                    grader.grade()
        except Exception as exc:  # the machine ran short (ulimit -v): the part's error, in one line
            line = resource_failure(exc, sizes=f"the sizes of {part.key} in the config", hidden=bool(pc.hidden_sizes))
            if line is None:
                raise
            events.emit(WorkerError(line))
            return 0
        finally:
            if background is not None:
                background.close()
            lost = backend.broken
            if grader is not None and grader.gpu is not None:
                grader.gpu.close()
            if grader is not None and grader.ran_hidden:
                backend.ran_hidden = True
            if not lost:
                backend.close()
        events.emit(Done())
    _trace_cpu(job.part, backend.gpu_lock_seconds(), usage)
    if lost:  # a GPU fault lost the context: not through PyCUDA's clean-up of it (it prints warnings)
        os._exit(0)
    return 0


class _PartGrader:
    """One worker's part, graded in order (:meth:`compile`, :meth:`prepare`, then :meth:`grade`): its file compiled
    for each dtype, then every visible case, the timing, the profile, and the hidden cases, each
    case run on the GPU path (:class:`~grader.grading.worker.gpu_path.GpuPath`, a GPU with the
    checks on) or as the backend runs it (the emulator checking as it runs, or a GPU without checks).
    ``work``: the worker's build folder."""

    def __init__(self, job: Job, job_path: str, backend, events, cubins: dict, background, work: Path) -> None:
        from grader.assignment.parts import PARTS
        from grader.backends import backend_kind
        from grader.grading.intake import read_source

        self.job, self.job_path, self.backend, self.events = job, job_path, backend, events
        self.cubins, self.background, self.work = cubins, background, work
        self.cfg = job.config
        self.part = PARTS[job.part]
        self.pc = self.cfg.parts[self.part.key]
        self.kind = backend_kind(job.backend)
        self.source = read_source(Path(job.source))  # BOM dropped; non-UTF-8 read losslessly
        self.modules: dict = {}
        self.results: list = []
        self.notes: dict[str, list[str]] = {}
        self.gpu: GpuPath | None = None
        self.ahead = None
        #: Whether a hidden case started (its backend then serves no other part).
        self.ran_hidden = False

    def build(self, spec, text: str, dtype: str, tag: str):
        """``spec``'s file ``text`` compiled for ``dtype`` on the backend, in a folder of its own; or
        the cubin compiled ahead of the same text, loaded."""
        from grader.assignment.parts import part_source
        from grader.grading.compile import compile_part
        from grader.core.errors import BackendUnavailable

        spec_pc = self.cfg.parts.get(spec.key, self.pc)
        whole, cubin = self.cubins.get((tag, spec.key, dtype), (None, None))
        if cubin is not None and whole == part_source(spec, text, pc=spec_pc, dtype=dtype):
            try:
                return self.backend.load_cubin(cubin.result(), filename=spec.filename, kernels=spec.kernels)
            except BackendUnavailable:  # the device could not be read there: compile here
                pass
        return compile_part(self.backend, spec, text, pc=spec_pc, dtype=dtype,
                            workdir=self.work / f"{tag}-{spec.key}-{dtype}")

    def compile(self) -> bool:
        """The part's file compiled for each dtype (``compiled`` reported); False where it does not
        compile (``compile-failed`` reported, or a pending gap of the emulator)."""
        from grader.core.errors import CompileError, is_emulator_gap
        from grader.source.directives import check_includes

        part = self.part
        try:
            check_includes(self.source, filename=part.filename)
            for dtype in self.pc.dtypes:
                self.modules[dtype] = self.build(part, self.source, dtype, "submission")
        except CompileError as exc:
            if is_emulator_gap(exc):  # the grader's gap: pending, for a run on a GPU (never a compile error)
                self.events.emit(WorkerError(f"pending: {str(exc).splitlines()[0]}"))
            else:
                self.events.emit(CompileFailed(str(exc)))
            return False
        self.events.emit(Compiled())
        return True

    def prepare(self) -> None:
        """What runs between the compile and the cases: the inputs drawn ahead, the checker named,
        compute-sanitizer's audit."""
        job, cfg, part = self.job, self.cfg, self.part
        all_cases = list(job.cases)
        self.ahead = draw_ahead(self.kind, job, cfg, part, all_cases)
        if self.background is not None:
            self.background.ahead = self.ahead  # the large inputs, drawn once for the GPU and the checks
        # compute-sanitizer: an audit a TA asks for (sanitizer_audit), or the fallback where the
        # emulator cannot build the part (gpu.fallback)
        if self.kind.has_sanitizer and job.checks:  # the GPU path: the emulator's checks decide checked cases
            self.gpu = GpuPath(self.backend, job, cfg, part, self.modules, all_cases, self.work, self.job_path,
                               self.background, self.events)
            self.events.emit(DeviceUpdate({"checker": self.gpu.describe()}))
            self.gpu.prime()  # an audit: every checked case under compute-sanitizer now, before any deadline runs
        elif job.checks:  # the backend checks as it runs each case
            self.events.emit(DeviceUpdate({"checker": emulator_checker_line(cfg)}))

    def grade(self) -> None:
        """Every visible case, and the timing, before any hidden case: a kernel can keep state across
        launches (a __device__ global), so nothing a student sees may run after one. A worker started
        after a case that hung (job ``start``) grades the cases after it."""
        cfg, part, pc, events = self.cfg, self.part, self.pc, self.events
        cases = self.job.cases[self.job.start:]
        for case in (c for c in cases if c.visibility != "hidden"):
            self.run(case)
        performance = None
        if pc.timing is not None:
            performance = time_part(events, self.backend, cfg, part, pc, self.modules, self.results, self.build,
                                    earlier_failed=self.job.earlier_failed, ahead=self.ahead)
        profile = None
        if pc.profile is not None:  # its counts and messages too: before any hidden case
            profile = _profile_part(events, self.backend, cfg, part, self.source, self.results, self.work,
                                    earlier_failed=self.job.earlier_failed)
        hidden = [c for c in cases if c.visibility == "hidden"]
        if hidden:
            self.ran_hidden = True
            events.emit(HiddenStart())
        for case in hidden:
            self.run(case)
        hidden_results = [r for r in self.results if r.visibility == "hidden"]
        if performance is not None:
            performance = performance_after_hidden(performance, hidden_results)
            events.emit(PerformanceScored(performance))
        if profile is not None:
            events.emit(Profiled(profile_after_hidden(profile, hidden_results)))

    def run(self, case) -> None:
        """Grade ``case`` (``case-start`` ... ``case-done``), the compiler's notes added to a wrong output,
        its findings' lines of the part's file quoted (:func:`grader.grading.case.run.with_source_lines`)."""
        from grader.grading.case.run import with_compiler_notes, with_source_lines

        known = tuple(f for r in self.results for f in r.findings)
        if self.gpu is not None:
            result = self._on_gpu_path(case, known)
        else:
            result = self._on_backend(case, known)
        if any(f.kind == "mismatch" for f in result.findings):
            if case.dtype not in self.notes:
                self.events.emit(CompilerNotes(case.name))  # the compiler's time is not the case's
            result = with_compiler_notes(result, self.compiler_notes(case.dtype), self.results)
        result = with_source_lines(result, self.source, self.part.filename)
        self.results.append(result)
        self.events.emit(CaseDone(result))

    def _on_gpu_path(self, case, known: tuple):
        """``case`` decided by the emulator's checks, or, where they passed it, run on the GPU."""
        gpu, events = self.gpu, self.events
        gpu.before(case)  # what may take long and is not the kernel's: no deadline yet
        events.emit(CaseStart(case.name))
        result = gpu.decided(case, known=known, ahead=self.ahead)  # the emulator's checks
        if result is None:  # they passed it: the GPU verifies its output
            events.emit(GpuWait(case.name))  # the wait for the GPU is not the case's time
            with self.backend.gpu_shared():  # another part may be timing
                events.emit(CaseStart(case.name))
                result = gpu.run(case, known=known, ahead=self.ahead)
        return result

    def _on_backend(self, case, known: tuple):
        """``case`` run as the backend runs it, as its :class:`~grader.grading.case.cases.CheckMode`
        says: on the emulator, checked as it runs (whole, or on sampled blocks then a plain run, a
        deadlock found at once); with the checks off, its output alone (on the emulator a deadlock
        then waits for the deadline, as on a GPU)."""
        from grader.grading.case.run import run_case

        with self.backend.gpu_shared():
            self.events.emit(CaseStart(case.name))
            return run_case(self.backend, self.modules[case.dtype], cfg=self.cfg, part=self.part, case=case,
                            known=known, ahead=self.ahead, find_deadlocks=self.job.checks)

    def compiler_notes(self, dtype: str) -> list[str]:
        """What the host compiler warns about in the student's lines (conversions, dropped results),
        for ``dtype``'s header; computed once, at its first mismatch."""
        from grader.assignment.parts import DTYPES, part_header

        if dtype not in self.notes:
            folder = self.work / f"notes-{dtype}"
            folder.mkdir()
            pc = self.pc
            header = part_header(self.part, block_size=pc.block_size, dtype=DTYPES[dtype],
                                 items_per_thread=pc.items_per_thread)
            self.notes[dtype] = _compiler_notes(self.backend, self.cfg, header + self.source, self.part.filename,
                                                folder)
        return self.notes[dtype]


def _usage() -> dict[str, float]:
    """This process's CPU use so far (its threads, and its children that ended), for :func:`_trace_cpu`."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"self_s": me.ru_utime + me.ru_stime, "children_s": kids.ru_utime + kids.ru_stime,
            "self_sys_s": me.ru_stime, "children_sys_s": kids.ru_stime, "main_thread_s": time.thread_time(),
            "minor_faults": me.ru_minflt + kids.ru_minflt, "vol_switches": me.ru_nvcsw,
            "invol_switches": me.ru_nivcsw}


def _trace_cpu(part: str, lock_seconds: dict, since: dict[str, float]) -> None:
    """Where ``SCANGRADE_CASE_TIMES`` names a folder (bench/throughput.py): this job's CPU seconds
    (all the worker's threads; and its children that ended: executors, compilers), counted from
    ``since`` (:func:`_usage` at the job's start), there, and the seconds it waited for its GPU's lock
    and held it alone (``lock_seconds``, :attr:`grader.host.gpu_lock.GpuLock.seconds`), for the bench."""
    folder = os.environ.get("SCANGRADE_CASE_TIMES")
    if not folder:
        return
    now = _usage()
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / f"{part}-cpu-{os.getpid()}-{time.monotonic_ns()}.json").write_text(json.dumps(
        {"part": part, **{k: now[k] - since.get(k, 0) for k in now}, **lock_seconds}))


def _profile_part(events, backend, cfg, part, source, results, work: Path, *, earlier_failed: bool):
    """The memory-access profile of a part (bank conflicts, sectors per request), counted by the
    CPU emulator on any machine, in an emulator of its own (:func:`grader.grading.profiling.profile_phase`),
    after the visible cases and before any hidden one: ``profile-start`` when it runs, and the
    :class:`~grader.core.results.Profile` (returned: reported, after the hidden cases, as a ``profile``
    event scored by :func:`grader.grading.profiling.profile_after_hidden`). On the emulator, the cases'
    executors are stopped first (they start again at the next launch), so the part still has one
    executor alive at a time."""
    from grader.backends import backend_kind
    from grader.grading.profiling import profile_phase

    counts = backend_kind(backend.name).counts_profile  # the emulator: its cases ran there
    if not earlier_failed and all(r.status == "pass" for r in results):
        events.emit(ProfileStart())
        if counts:
            backend.close()
    return profile_phase(cfg=cfg, part=part, source=source, results=results, workdir=work, solutions=SOLUTIONS,
                         earlier_failed=earlier_failed, runtime_flags=emulator_runtime_flags(counts_profile=counts))


def _compiler_notes(backend, cfg, source: str, filename: str, workdir: Path) -> list[str]:
    """The host compiler's notes on ``source``
    (:meth:`grader.backends.emulator.build.EmulatorToolchain.compiler_notes`), with the emulator's
    toolchain, or on a GPU one made for it; ``[]`` where no host compiler runs."""
    from grader.backends.emulator.build import EmulatorToolchain
    from grader.core.errors import ScangradeError
    from grader.toolchain.sandbox import Sandbox

    try:
        toolchain = backend.toolchain or EmulatorToolchain(sandbox=Sandbox(cfg.emulator.sandbox or "auto"),
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


def cli(argv: list[str]) -> int:
    """``python -m grader.grading.worker JOB.json``: a job file the worker cannot use is one line on
    stderr and exit status 2 (the runner reports the part as a grader error with that line).
    ``python -m grader.grading.worker --serve FD JOB.json``: that job, then the jobs of the
    submission's later parts (in a batch, and of the job's next submissions), one after the other,
    in this process (:func:`serve`)."""
    if argv[:1] == [SERVE_ARG]:
        return serve(int(argv[1]), argv[2])
    return _one_job(argv)


def _one_job(argv: list[str]) -> int:
    try:
        return _profiled(argv)
    except ProtocolError as exc:
        print(f"scangrade worker: {exc}", file=sys.stderr)
        return 2



def serve(ready_fd: int, first_job: str) -> int:
    """Grade jobs one after the other in this process, for a runner grading a submission's parts in
    turn, and in a batch the next submissions' (:class:`grader.grading.worker_process.WorkerSlot`;
    a job of another grading first clears what the last one left: :func:`_begin_grading`):
    ``first_job``, in the folder and with the stdout and stderr the worker was started with, then
    each job the runner sends, one line on
    stdin, ``JOB.json<TAB>FOLDER``: the worker moves to that folder and takes its ``stdout.txt`` and
    ``stderr.txt`` as stdout and stderr (the kernel's output and the worker's last words stay the
    part's). After a job that ended cleanly it writes one byte to ``ready_fd`` and waits for the
    next line; the Python interpreter, the imports and, on a GPU, the CUDA context
    (:func:`grader.backends.pycuda.contexts.keep_context`) serve the next job. A job after which the
    worker cannot be trusted (a GPU fault that lost the context: :func:`main` exits there; a context
    that no longer synchronizes) or an error ends the process, as a worker of one job ends.

    Returns:
        the exit status: 0 when stdin closes (the runner needs no more parts), else the last job's.
    """
    import ctypes
    import gc

    from grader.backends.pycuda import keep_context, kept_context_works, release_kept_contexts

    keep_context()
    libc = ctypes.CDLL(None)
    job_path = first_job
    while True:
        status = _one_job([job_path])
        gc.collect()  # the job's arrays, modules and device buffers go now, not in the next part
        sys.stdout.flush()
        sys.stderr.flush()
        libc.fflush(None)  # a kernel's printf still buffered in C's stdout: the part's, not the next one's
        if not kept_context_works():  # not through PyCUDA's clean-up of it (it aborts), as main() does
            os._exit(status)
        line = ""
        if status == 0:
            os.write(ready_fd, b"r")
            line = sys.stdin.buffer.readline().decode()
        if not line.endswith("\n"):  # an error, or the runner needs no more parts
            release_kept_contexts()
            return status
        job_path, folder = line[:-1].split("\t", 1)
        os.chdir(folder)
        for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(out, fd)
            os.close(out)
