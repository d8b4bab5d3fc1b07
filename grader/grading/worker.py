"""The child process that grades one part: ``python -m grader.grading.worker JOB.json``.

Student code never runs in the grader's own process: the runner starts this worker for each
part, with deadlines. The job (a :class:`grader.grading.protocol.Job`) carries the config the runner
validated, the part, the source file, the backend and the event file; the worker reports what it
does as the events of :mod:`grader.grading.protocol` (their order is described there), each flushed to
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

import dataclasses
import functools
import json
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

from grader.assignment.parts import SOLUTIONS
from grader.grading.profiling import profile_after_hidden
from grader.grading.protocol import (CaseDone, CaseStart, Compiled, CompileFailed, CompilerNotes, Device, DeviceUpdate, Done,
                             EventWriter, GpuWait, HiddenStart, Job, LocatingFault, PerformanceScored, Profiled,
                             ProfileStart, ProtocolError, RooflineTaken, Timed, TimingStart, WorkerError)

#: The smallest copy (bytes read + written) whose bandwidth the report records and checks.
COPY_BANDWIDTH_MIN_BYTES = 128 * 2**20
#: On a GPU, how long the first checked case may wait, before its deadline starts, for the emulator's
#: compiles of the part (one per dtype, each under the toolchain's 60 s limit).
EMULATOR_COMPILES_S = 120.0
#: What checks a checked case, for the report's ``checker`` line (``n``: ``emulator.checks_max_n``;
#: ``drawn``: the blocks a sampling launch draws besides its first and last).
EMULATOR_CHECKER = ("the emulator's checks (races, bounds, barriers, memory order, unwritten shared memory; three "
                    "thread orders, the random one switching threads at memory accesses too) on cases up to n = {n}, "
                    "and above it on the first, the last and {drawn} seeded blocks of each launch (where the part's "
                    "blocks are independent, the first {accesses:,} accesses of each)")
#: After the emulator's checks find one of these in a case, the GPU runs none of the part's later
#: cases (they run on the emulator, as the emulator backend runs them): a kernel that deadlocked or
#: diverged at a barrier would hang there until its deadline, and one that faulted loses the context.
GPU_STOPPERS = frozenset({"deadlock", "barrier-divergence"})


def _die_with_runner() -> None:
    """End this worker (SIGKILL) when the thread of the runner that started it ends, however it ends
    (Ctrl-C, a kill, a crash), so no student code runs on after the grader: the executors go with
    the worker (bubblewrap's ``--die-with-parent``, or their own ``PR_SET_PDEATHSIG``). Where the
    runner is already gone (its pid, from ``SCANGRADE_RUNNER_PID``, is no longer the parent), exit
    at once. Linux only; elsewhere nothing happens."""
    from grader.host.lifetime import die_with_parent

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
    from grader.core.errors import BackendUnavailable, CompileError, ScangradeError
    from grader.grading.case.cases import case_list, case_runs, device_memory_bytes
    from grader.grading.case.run import CHECK_SCHEDULES, SAMPLED_CHECKER, run_case, with_compiler_notes
    from grader.assignment.parts import DTYPES, PARTS, compile_part, part_header, part_source
    from grader.source.directives import check_includes
    from grader.grading.intake import read_source
    from grader.host.resources import resource_failure

    cfg = job.config  # the config the runner validated, its settings included
    from grader.backends.emulator.cache import CacheLimits, set_cache_limits
    set_cache_limits(CacheLimits(**cfg.compile_cache.model_dump()))  # this grading's compile cache bounds
    part = PARTS[job.part]
    pc = cfg.parts[part.key]
    kind = backend_kind(job.backend)  # its traits
    # on a GPU, nvcc from now on, beside the CUDA context's start
    cubins = _cubins_ahead(kind, job, cfg, part)
    # on a GPU, the emulator's checks, the checker of every machine, from now on: beside the CUDA
    # context's start and the compile
    beside = _emulator_beside(kind, job, cfg, part)
    gpu_checks = kind.has_sanitizer and job.checks  # the GPU path: the emulator's checks decide checked cases
    gpu = None
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
                # compute-sanitizer: an audit a TA asks for (sanitizer_audit), or the fallback where the
                # emulator cannot build the part (gpu.fallback below)
                gpu = _GpuPath(backend, job, cfg, part, modules, all_cases, Path(work), argv[0], beside,
                               events) if gpu_checks else None
                if gpu is not None:
                    events.emit(DeviceUpdate({"checker": gpu.describe()}))
                    gpu.prime()  # an audit: every checked case under compute-sanitizer now, before any deadline runs
                elif job.checks:  # the backend checks as it runs each case
                    events.emit(DeviceUpdate({"checker": _emulator_checker(cfg)}))

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
                    sampled = job.checks and not checked  # the checks on sampled blocks (execute.run_case)
                    known = tuple(f for r in results for f in r.findings)
                    if gpu is not None:
                        gpu.before(case, checked)  # what may take long and is not the kernel's: no deadline yet
                        events.emit(CaseStart(case.name))
                        result = gpu.decided(case, checked, known=known, ahead=ahead)  # the emulator's checks
                        if result is None:  # they passed it: the GPU verifies its output
                            events.emit(GpuWait(case.name))  # the wait for the GPU is not the case's time
                            with backend.gpu_shared():  # another part may be timing
                                events.emit(CaseStart(case.name))
                                result = gpu.run(case, checked, known=known, ahead=ahead)
                    else:
                        with backend.gpu_shared():
                            events.emit(CaseStart(case.name))
                            if job.checks:
                                backend.checks = checked  # large sizes: plain runs, but a deadlock is found at once
                                backend.detect_deadlock = True
                            result = run_case(backend, modules[case.dtype], cfg=cfg, part=part, case=case,
                                              schedules=CHECK_SCHEDULES if job.checks else (), sampled=sampled,
                                              checker=("emulator checks" if checked else
                                                       SAMPLED_CHECKER if sampled else None),
                                              known=known, ahead=ahead)
                    if any(f.kind == "mismatch" for f in result.findings):
                        if case.dtype not in notes:
                            events.emit(CompilerNotes(case.name))  # the compiler's time is not the case's
                        result = with_compiler_notes(result, compiler_notes(case.dtype), results)
                    results.append(result)
                    events.emit(CaseDone(result))
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
            lost = getattr(backend, "broken", False)
            if gpu is not None:
                gpu.close()
            if not lost:
                backend.close()
        events.emit(Done())
    lock = getattr(backend, "gpu_lock", None)
    _trace_cpu(job.part, lock.seconds if lock is not None else {})
    if lost:  # a GPU fault lost the context: not through PyCUDA's clean-up of it (it prints warnings)
        os._exit(0)
    return 0


def _trace_cpu(part: str, lock_seconds: dict) -> None:
    """Where ``SCANGRADE_CASE_TIMES`` names a folder (bench/throughput.py): this worker's CPU seconds
    (all its threads; and its children that ended: executors, compilers) there, and the seconds it
    waited for its GPU's lock and held it alone (``lock_seconds``, :attr:`grader.host.gpu_lock.GpuLock.seconds`),
    for the bench."""
    folder = os.environ.get("SCANGRADE_CASE_TIMES")
    if not folder:
        return
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / f"{part}-cpu-{os.getpid()}.json").write_text(json.dumps(
        {"part": part, "self_s": me.ru_utime + me.ru_stime, "children_s": kids.ru_utime + kids.ru_stime,
         "self_sys_s": me.ru_stime, "children_sys_s": kids.ru_stime, "main_thread_s": time.thread_time(),
         "minor_faults": me.ru_minflt + kids.ru_minflt, "vol_switches": me.ru_nvcsw, "invol_switches": me.ru_nivcsw,
         **lock_seconds}))


def _cubins_ahead(kind, job, cfg, part) -> dict:
    """Where the backend compiles ahead (the GPU's ``compile_ahead``: nvcc needs no CUDA context):
    the part's file for each dtype, then, for a timed part, the reference solution it is timed
    against, compiled from now on in the background: ``{(tag, part key, dtype): (translation unit,
    Future of the cubin)}`` (tag ``submission`` or ``reference``, as the worker's ``build`` names
    them). Empty on other backends, and where the file cannot be read or its ``#include`` lines are
    refused: the worker's own compile then reports it."""
    import importlib

    from grader.source.directives import check_includes
    from grader.core.errors import ScangradeError
    from grader.grading.intake import read_source
    from grader.assignment.parts import PARTS, part_source

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
    check) and of its timed sizes, drawn in the background from now (:class:`grader.grading.case.inputs.DrawAhead`):
    the host work is done while compute-sanitizer checks the small cases. None on the emulator (its
    cases are checked as they run: nothing to overlap)."""
    from grader.grading.case.inputs import DrawAhead
    from grader.assignment.parts import DTYPES

    if not kind.times_kernels:
        return None
    pc = cfg.parts[part.key]
    items = [(c.n, c.seed, DTYPES[c.dtype], c.fractional) for c in cases[job.start:]
             if c.visibility != "hidden" and c.n > cfg.emulator.checks_max_n]
    if pc.timing is not None and not job.earlier_failed:
        items += [(n, cfg.seed, DTYPES[pc.dtypes[0]], False) for n in pc.timing.all_sizes]
    return DrawAhead(cfg, part, items) if items else None


#: A larger size is not timed where its run would take this long (ms) or more, projected from a timed
#: size whose median is at or beyond the config's ``zero_at`` times the reference's (no points) in
#: proportion to n: a one-thread scan's 2^28 runs take seconds each, for a time that earns nothing.
#: The report says why.
TOO_SLOW_MS = 500.0


def _time_part(events, backend, cfg, part, pc, modules, results, build, *, earlier_failed: bool = False,
               ahead=None):
    """The timing phase of a part (GPU only), after the visible cases and before the hidden ones:
    ``timed`` events, and the :class:`~grader.core.performance.Performance` they earn (returned; the caller
    reports it once the hidden cases have run, see :func:`performance_after_hidden`).
    ``earlier_failed``: a case before this worker's first failed (it hung), so nothing is timed."""
    from grader.backends import backend_kind
    from grader.core.errors import CompileError
    from grader.tools.bench_cub import cached_cub, time_cub_ms
    from grader.grading.case.inputs import case_input
    from grader.grading.case.timing import score_performance, time_case
    from grader.assignment.parts import DTYPES, PARTS
    from grader.core.performance import Performance
    from grader.core.results import CaseResult, CaseStatus

    tc = pc.timing
    kind = backend_kind(backend.name)
    if not kind.times_kernels:
        if kind.counts_profile and not earlier_failed and all(r.status == "pass" for r in results):
            _roofline_part(events, backend, cfg, part, modules, build)
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
    cub = cached_cub(backend.describe().get("compute_capability", "")) is not None
    timed, skipped = [], []
    hopeless = None  # the last timed size already at zero_at times the reference's or beyond
    for n in tc.all_sizes:  # the analysis sizes too: in the report, not in the score
        projected_ms = hopeless.timing.median_ms * n / hopeless.n if hopeless is not None else 0.0
        if projected_ms >= TOO_SLOW_MS:
            t = hopeless.timing
            result = CaseResult(name=f"timed n={n} {dtype}", n=n, dtype=dtype, seed=cfg.seed, status=CaseStatus.NOT_RUN,
                                points=0.0, max_points=0.0, message=(
                                    f"not timed: at n={hopeless.n} a run took {t.median_ms / 1e3:.2f} s, "
                                    f"{t.ratio:.0f} times the reference's, so a run of this size would take about "
                                    f"{projected_ms / 1e3:.1f} s of the GPU, for a time that earns no points"))
            timed.append(result)
            skipped.append(n)
            events.emit(Timed(result))
            continue
        events.emit(CaseStart(f"timed n={n} {dtype}"))
        result = time_case(backend, modules[dtype], cfg=cfg, part=part, n=n, dtype_name=dtype, reference=reference,
                           ahead=ahead)
        if result.timing is not None and cub:  # CUB beside it, for the plot, where its library is built
            x, _ = case_input(cfg, part, n, cfg.seed, DTYPES[dtype])
            result = dataclasses.replace(result, timing=dataclasses.replace(
                result.timing, cub_ms=time_cub_ms(backend, cfg, x, DTYPES[dtype])))
        timed.append(result)
        events.emit(Timed(result))
        t = result.timing
        if t is not None and t.ratio is not None and t.ratio >= tc.zero_at:
            hopeless = result
    gpu = backend.describe().get("device", "")
    performance = score_performance(tc, [c for c in timed if c.n in tc.sizes and c.status != CaseStatus.NOT_RUN],
                                    gpu=gpu)
    if skipped:
        performance = dataclasses.replace(performance, message=(
            f"{performance.message}; n={', '.join(map(str, skipped))} not timed (at n={hopeless.n} a run took "
            f"{hopeless.timing.median_ms / 1e3:.2f} s, {hopeless.timing.ratio:.0f} times the reference's)"))
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


def _roofline_part(events, backend, cfg, part, modules, build) -> None:
    """On the CPU emulator, a timed part's roofline (:func:`grader.grading.profiling.roofline_phase`):
    ``profile-start``, then ``roofline`` with the estimate, on the cases' emulator with its checks
    off, after the visible cases and before any hidden one. Worth no points; a reference solution
    that does not compile leaves the estimate without its comparison."""
    from grader.core.errors import CompileError
    from grader.assignment.parts import PARTS
    from grader.grading.profiling import roofline_phase

    tc = cfg.parts[part.key].timing
    dtype = cfg.parts[part.key].dtypes[0]
    events.emit(ProfileStart(counts="roofline"))
    reference = None
    ref_spec = PARTS[tc.reference]
    ref_file = SOLUTIONS / ref_spec.filename
    if ref_file.is_file():
        try:
            reference = (ref_spec, build(ref_spec, ref_file.read_text(), dtype, "reference"))
        except CompileError:
            reference = None
    saved = getattr(backend, "checks", None)
    if saved is not None:
        backend.checks = False  # counted once, plainly: the cases did the checking
    try:
        events.emit(RooflineTaken(roofline_phase(backend, cfg=cfg, part=part, module=modules[dtype],
                                                 reference=reference)))
    finally:
        if saved is not None:
            backend.checks = saved


def performance_after_hidden(performance, hidden: list):
    """The performance a part earns once its hidden cases have run: ``performance`` as scored from
    the timed cases, or no points when a hidden case did not pass (performance is scored only when
    every case passes). None stays None; a part that was not scored keeps its reason."""
    from grader.core.performance import Performance

    if performance is None or performance.ratio is None or all(c.status == "pass" for c in hidden):
        return performance
    return Performance(0.0, performance.max_points, None, "no performance points: a hidden case did not pass "
                                                          "(performance is scored only when every case passes)")


def _profile_part(events, backend, cfg, part, source, results, work: Path, *, earlier_failed: bool):
    """The memory-access profile of a part (bank conflicts, sectors per request), counted by the
    CPU emulator on any machine, in an emulator of its own (:func:`grader.grading.profiling.profile_phase`),
    after the visible cases and before any hidden one: ``profile-start`` when it runs, and the
    :class:`~grader.core.performance.Profile` (returned: reported, after the hidden cases, as a ``profile``
    event scored by :func:`grader.grading.profiling.profile_after_hidden`). On the emulator, the cases'
    executors are stopped first (they start again at the next launch), so the part still has one
    executor alive at a time."""
    from grader.backends import backend_kind
    from grader.grading.profiling import profile_phase

    if not earlier_failed and all(r.status == "pass" for r in results):
        events.emit(ProfileStart())
        if backend_kind(backend.name).counts_profile:
            backend.close()
    return profile_phase(cfg=cfg, part=part, source=source, results=results, workdir=work, solutions=SOLUTIONS,
                         earlier_failed=earlier_failed)


class _GpuPath:
    """How a GPU worker with checks on grades each case: the emulator's checks decide (one checker on
    every machine), the GPU verifies the output of every case they pass, and compute-sanitizer is an
    audit (``sanitizer_audit``) or the fallback where the emulator cannot build the part.

    - Every case waits, within its deadline, for the emulator's checks of it (:class:`_EmulatorBeside`,
      run in the background from the worker's start): of the whole case up to
      ``emulator.checks_max_n``, of a sample of each launch's blocks above it. A case they fail (a
      finding of a checker's kind, a deadlock included, or a fault) is graded from them and is not
      run on the GPU: no hang, no fault, no new worker.
    - Once the kernel deadlocked or diverged at a barrier under the checks, faulted on the GPU (the
      context is lost), or an earlier worker's case hung (``job.earlier_hung``), the cases the GPU
      would run go to the emulator instead: a checked case takes its checked run, a larger one a
      plain run of every block for its output (a deadlock found at once), with a message that says why.
    """

    def __init__(self, backend, job, cfg, part, modules, cases, work: Path, job_path: str,
                 beside: "_EmulatorBeside | None", events) -> None:
        self.backend, self.job, self.cfg, self.part, self.modules = backend, job, cfg, part, modules
        self.cases, self.work, self.job_path, self.beside, self.events = cases, work, job_path, beside, events
        self.sanitizer = (_GpuChecks(backend, job, cfg, part, modules, cases, work, job_path)
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
        what = (_emulator_checker(self.cfg) + ", run beside the GPU on this machine's "
                "cores: they decide those cases, and the GPU runs every case they pass to verify its output")
        if self.sanitizer is not None:
            what += "; " + self.sanitizer.describe_audit()
        return what

    def prime(self) -> None:
        """The audit: compute-sanitizer over the checked cases now, before any case's deadline runs."""
        if self.sanitizer is not None and self.sanitizer.sanitizer:
            self.sanitizer.prime()

    def before(self, case, checked: bool) -> None:
        """What a case needs before its deadline starts: the emulator's compiles of the part (the first
        case waits for them: a case above ``emulator.checks_max_n`` for its checks on sampled blocks),
        and compute-sanitizer's findings on it where it runs (the audit, or the fallback where the
        emulator cannot build the part)."""
        self._found = None
        if not checked:
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
            self.sanitizer = _GpuChecks(self.backend, self.job, self.cfg, self.part, self.modules, self.cases,
                                        self.work, self.job_path)
        self.events.emit(DeviceUpdate({"checker": f"{self.sanitizer.describe()}: the emulator's checks cannot run this "
                                                  f"part ({why.splitlines()[0] if why else 'no reason given'})"}))
        if self.sanitizer.sanitizer:
            self.sanitizer.prime()

    def decided(self, case, checked: bool, *, known: tuple, ahead):
        """The result of ``case`` where it is decided without the GPU, its deadline running: a failure
        of the emulator's checks (waiting for them), or a run on the emulator (see the class's
        docstring); None where the GPU is to run it (:meth:`run`)."""
        from grader.core.kinds import FAULT_KINDS

        index = self.cases.index(case)
        self._own = own = None  # the emulator's checked run of the case (above checks_max_n: of its sampled blocks)
        if not self.fallback and self.beside is not None:
            self._own = own = self.beside.result(index)
            if own is not None and _decided_by_checks(own):
                if own.kind in GPU_STOPPERS or own.kind in FAULT_KINDS:
                    self.elsewhere = (f"the kernel failed at {case.name} under the emulator's checks ({own.kind}), and "
                                      "on a GPU it would hang or fault")
                return self._decided(own)
        if self.elsewhere is not None:
            if checked and own is not None and own.status != "error":
                return own  # its checked run on the emulator: it passed, or its output is wrong
            return self._on_emulator(case, known=known, ahead=ahead)  # above checks_max_n: the output
        return None

    def run(self, case, checked: bool, *, known: tuple, ahead):
        """The result of ``case`` run on the GPU, which :meth:`decided` left to it (its deadline runs);
        ``known``: the part's earlier findings, a hint for an unchecked case's wrong output."""
        from dataclasses import replace

        from grader.grading.case.run import run_case

        index = self.cases.index(case)
        own = self._own
        found = self._found
        checker = None  # the output only: an unchecked case, or a fallback with no compute-sanitizer here
        if checked and not self.fallback:
            checker = "emulator checks"
        elif checked and self.sanitizer.sanitizer:
            checker = "compute-sanitizer"
        elif own is not None:
            checker = own.checker  # the checks on its sampled blocks found nothing
        if found is not None:
            result = run_case(self.backend, self.modules[case.dtype], cfg=self.cfg, part=self.part, case=case,
                              checked=found, checker="compute-sanitizer" if found.findings else checker, ahead=ahead)
        else:
            result = run_case(self.backend, self.modules[case.dtype], cfg=self.cfg, part=self.part, case=case,
                              checker=checker, known=() if checked else known, ahead=ahead)
        if getattr(self.backend, "broken", False):  # a GPU fault lost the context
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
        from grader.assignment.parts import compile_part

        note = f"run on the emulator, not the GPU: {self.elsewhere}"
        try:
            if self._emulator is None:
                self._emulator = _checking_emulator(self.cfg, self.part)
            if case.dtype not in self._emulator_modules:
                self._emulator_modules[case.dtype] = compile_part(
                    self._emulator, self.part, read_source(Path(self.job.source)), pc=self.cfg.parts[self.part.key],
                    dtype=case.dtype, workdir=self.work / f"emulator-rest-{case.dtype}")
        except Exception as exc:  # noqa: BLE001 - the emulator cannot run it: the case is not run
            from grader.grading.case.cases import not_run
            done = not_run(self.cfg, self.part.key, f"not run: {note}, and the emulator cannot run it ({exc})",
                           kind="error")
            return next(c for c in done if c.name == case.name)
        self._emulator.checks = False  # as the emulator backend runs a case it does not check
        self._emulator.detect_deadlock = True
        result = run_case(self._emulator, self._emulator_modules[case.dtype], cfg=self.cfg, part=self.part,
                          case=case, known=known, ahead=ahead)
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


class _GpuChecks:
    """compute-sanitizer (:mod:`grader.grading.sanitizer`) on every case up to ``emulator.checks_max_n`` of
    this worker, run once for all of them before the first: the audit a TA asks for
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
        limit = f"cases up to n = {self.cfg.emulator.checks_max_n}"
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
        return 0 <= index < len(self.cases) and self.cases[index].n <= self.cfg.emulator.checks_max_n

    @property
    def _saved_path(self) -> Path:
        """What compute-sanitizer found in this part so far, kept beside the job by each worker for the
        next (a worker started after a hang does not check the same cases again)."""
        return Path(self.job_path).parent / "sanitizer-checks.json"

    def _saved(self) -> dict:
        import json

        from grader.grading.sanitizer_report import CaseChecks
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


class _EmulatorBeside:
    """On the GPU path: the emulator's checks of the part's cases (from the job's ``start``), the
    checker that decides them, run in a background thread from the worker's start on, beside its
    CUDA context and its compile, keeping each case's checked run (a
    :class:`~grader.core.results.CaseResult`) for :meth:`result`: whole up to ``emulator.checks_max_n``,
    of sampled blocks above it (:func:`grader.grading.case.run.run_case`'s ``sampled``, without its plain run:
    the GPU judges the output). Where the emulator cannot build or run the part (:attr:`unavailable`
    says why), compute-sanitizer stands in on the cases up to ``emulator.checks_max_n`` (:class:`_GpuPath`)."""

    def __init__(self, job, cfg, part, cases, source: str) -> None:
        self.job, self.cfg, self.part, self.cases = job, cfg, part, cases
        self._results: dict[int, object] = {}
        todo = list(range(job.start, len(cases)))
        self._ready = {i: threading.Event() for i in todo}
        self._compiled = threading.Event()
        self.unavailable: str | None = None  # why the emulator cannot check this part
        self._emulator = None
        self._work = Path(tempfile.mkdtemp(prefix="scangrade-emulator-checks-"))
        self._started = time.time()
        self._thread = threading.Thread(target=self._run, args=(todo, source), name="scangrade-emulator-checks",
                                        daemon=True)
        self._thread.start()

    def _run(self, todo: list[int], source: str) -> None:
        from grader.core.errors import ScangradeError
        from grader.grading.case.run import CHECK_SCHEDULES, SAMPLED_CHECKER, run_case
        from grader.assignment.parts import compile_part

        try:
            self._emulator = _checking_emulator(self.cfg, self.part)
            pc = self.cfg.parts[self.part.key]
            modules = _at_once({d: functools.partial(compile_part, self._emulator, self.part, source, pc=pc, dtype=d,
                                                     workdir=self._work / d)
                                for d in sorted({self.cases[i].dtype for i in todo})})
            # A compile loads its module in an executor started by the compile's own thread, which has
            # ended: the executor dies with that thread (bubblewrap's --die-with-parent and its own
            # PR_SET_PDEATHSIG are per thread), at any moment, a launch under way included. Stopped
            # here, the next launch starts one from this thread.
            self._emulator.close()
            self._compiled.set()
            compiled = time.time()
            for i in todo:
                case = self.cases[i]
                sampled = case.n > self.cfg.emulator.checks_max_n
                self._results[i] = run_case(self._emulator, modules[case.dtype], cfg=self.cfg, part=self.part,
                                            case=case, schedules=CHECK_SCHEDULES, sampled=sampled, plain=False,
                                            checker=SAMPLED_CHECKER if sampled else "emulator checks")
                self._ready[i].set()
            trace = os.environ.get("SCANGRADE_CASE_TIMES")  # bench: when the compiles and the cases were done
            if trace:
                Path(trace).mkdir(parents=True, exist_ok=True)
                (Path(trace) / f"{self.part.key}-emulator-checks-{os.getpid()}.json").write_text(json.dumps(
                    {"started": self._started, "compiled": compiled, "done": time.time(), "cases": len(todo),
                     "thread_cpu_s": time.thread_time()}))
        except ScangradeError as exc:  # the emulator cannot build or run it: compute-sanitizer stands in
            self.unavailable = str(exc) or type(exc).__name__
        except Exception as exc:  # noqa: BLE001 - closed under it (the worker ends), or a grader bug: say so
            self.unavailable = f"the emulator's checks stopped: {type(exc).__name__}: {exc}"
        finally:
            self._compiled.set()
            for event in self._ready.values():
                event.set()

    def compiled(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the part's emulator compiles (or their failure); whether they ended."""
        return self._compiled.wait(timeout)

    def result(self, index: int):
        """The emulator's checked run of case ``index`` (a CaseResult), waiting for it: the case's
        deadline, which includes the emulator's time on it, bounds the wait (a kernel that hangs on
        the emulator hangs here, and the runner stops it as a hang). None for a case it does not
        check, or when it could not run it."""
        ready = self._ready.get(index)
        if ready is None:
            return None
        ready.wait()
        return self._results.get(index)

    def close(self) -> None:
        """Stop the emulator's executors (a run still going ends with an error) and remove its files."""
        import shutil

        if self._emulator is not None:
            self._emulator.close()
        shutil.rmtree(self._work, ignore_errors=True)


def _emulator_checker(cfg) -> str:
    """The report's ``checker`` line for the emulator's checks under ``cfg``."""
    from grader.backends.emulator.launch import SAMPLE_DRAWN
    from grader.grading.case.run import SAMPLED_BLOCK_CHECKS

    return EMULATOR_CHECKER.format(n=cfg.emulator.checks_max_n, drawn=SAMPLE_DRAWN, accesses=SAMPLED_BLOCK_CHECKS)


def _at_once(calls: dict) -> dict:
    """``{key: call()}``, the calls made at once, each in a daemon thread of its own (a worker that
    ends does not wait for them); the first error raised, in ``calls``' order, is raised again."""
    from grader.host.lifetime import daemon_futures

    return {key: future.result() for key, future in daemon_futures(calls, len(calls)).items()}


def _checking_emulator(cfg, part):
    """An emulator backend with its checks on (the config's workers and sandbox), for the GPU path:
    its runtime built quickly (:data:`grader.backends.emulator.build.QUICK_RUNTIME_FLAGS`), its
    device memory what every case of ``part`` needs (the checks run each one: whole up to
    ``emulator.checks_max_n``, on sampled blocks above it, over buffers of the case's full size),
    compiling for the config's ``target_arch`` (not the GPU this worker runs on: the checks see what
    the course's GPU compiles)."""
    from grader.backends.emulator import EmulatorBackend
    from grader.backends.emulator.build import QUICK_RUNTIME_FLAGS
    from grader.grading.case.cases import case_runs, device_memory_bytes

    return EmulatorBackend(workers=cfg.emulator.workers, checks=True, sandbox=cfg.emulator.sandbox, nvcc_check=False,
                           runtime_flags=QUICK_RUNTIME_FLAGS, target_arch=cfg.target_arch,
                           device_memory=device_memory_bytes(case_runs(cfg, part.key, max_n=None)))


def _emulator_beside(kind, job, cfg, part) -> "_EmulatorBeside | None":
    """The emulator's checks beside the GPU (:class:`_EmulatorBeside`), started now, where this worker
    grades on a GPU with the checks on and the source is readable; else None."""
    from grader.grading.case.cases import case_list
    from grader.grading.intake import read_source

    if not (kind.has_sanitizer and job.checks):
        return None
    try:
        source = read_source(Path(job.source))
    except OSError:
        return None  # the worker reports it
    return _EmulatorBeside(job, cfg, part, case_list(cfg, part.key), source)


def _compiler_notes(backend, cfg, source: str, filename: str, workdir: Path) -> list[str]:
    """The host compiler's notes on ``source`` (:meth:`grader.backends.emulator.build.Toolchain.compiler_notes`),
    with the emulator's toolchain, or on a GPU one made for it; ``[]`` where no host compiler runs."""
    from grader.backends.emulator.build import Toolchain
    from grader.backends.emulator.sandbox import Sandbox
    from grader.core.errors import ScangradeError

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
    """``python -m grader.grading.worker JOB.json``: a job file the worker cannot use is one line on
    stderr and exit status 2 (the runner reports the part as a grader error with that line)."""
    try:
        return _profiled(argv)
    except ProtocolError as exc:
        print(f"scangrade worker: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(_cli(sys.argv[1:]))
