"""Grading a submission: each part in a child process, with a deadline, results gathered as they come.

Parts graded at once (on a GPU machine) get a worker each; parts graded in turn (a batch's job, the
emulator) one worker, which serves them one after the other
(:class:`grader.grading.worker_process.WorkerSlot`). A part that does not compile, crashes, hangs or
corrupts memory costs that part only: its child process is killed at the deadline
(``timeouts.part_s``), the case it was on is reported as timed out or crashed, the rest as not run,
and grading goes on with the next part, in a new worker. A case that hangs (``timeouts.case_s``)
costs that case only: a new child process grades the cases after it, within the part's ``part_s``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from grader import __version__
from grader.assignment.config import Config
from grader.assignment.parts import PARTS
from grader.backends import Selection, backend_kind
from grader.core.errors import GradingStopped, UsageError
from grader.core.results import PartResult, PartStatus, SubmissionResult
from grader.grading import protocol
from grader.grading.analysis import with_analysis
from grader.grading.intake import Intake, resolve_submission
from grader.grading.part_runner import grade_part, ungraded_part
from grader.grading.worker_process import WorkerSlot


def grading_sandbox(cfg: Config, *, official: bool, allow_unsandboxed: bool = False) -> Config:
    """``cfg`` with the emulator's sandbox policy this command grades under (docs/security.md):

    - ``allow_unsandboxed`` (``batch --allow-unsandboxed``): ``auto`` (``off`` where the config
      says off), whatever the config says;
    - else a policy the config file sets (``emulator.sandbox``) holds for every command;
    - else ``required`` for ``official`` grading (``batch``, the Gradescope autograder's
      ``grade --require-sandbox``), ``auto`` for the rest (``grade``, ``check`` on a laptop).
    """
    if allow_unsandboxed:
        policy = "off" if cfg.emulator.sandbox_explicit and cfg.emulator.sandbox == "off" else "auto"
    elif cfg.emulator.sandbox_explicit:
        policy = cfg.emulator.sandbox
    else:
        policy = "required" if official else "auto"
    return cfg.override(emulator={"sandbox": policy})


def check_sandbox(cfg: Config, backend: str, *, command: str) -> None:
    """Refuse, before grading anything, where student code must be compiled and run in the OS
    sandbox (``emulator.sandbox`` resolved to ``required``) and bubblewrap is unusable here: the
    emulator's compiles and executor, and on a GPU nvcc (which runs in the same compile sandbox, and
    without it can read any file the grader's user can, were a directive to get past the filters).

    Raises:
        UsageError: the message says why bubblewrap does not work and the ways to go on.
    """
    if cfg.emulator.sandbox != "required":
        return
    from grader.toolchain.sandbox import probe_bubblewrap
    bwrap, why = probe_bubblewrap()
    if bwrap is None:
        how = ("pass --allow-unsandboxed" if command == "batch" else "set emulator.sandbox: auto in the config")
        if not backend_kind(backend).uses_gpus:
            raise UsageError(f"{command} grades on the emulator only inside its OS sandbox (bubblewrap), and {why}. "
                             f"Install bubblewrap, or, to grade with resource limits and the seccomp filter only, "
                             f"{how} (docs/security.md)")
        raise UsageError(f"{command} compiles with nvcc only inside the OS sandbox (bubblewrap), as it grades on the "
                         f"emulator, and {why}. Install bubblewrap, or, to compile with resource limits only, {how} "
                         f"(docs/security.md)")


class _AnyOf:
    """Set when any of its events is (None counts as never set): what a part's workers watch."""

    def __init__(self, *events: threading.Event | None) -> None:
        self.events = [e for e in events if e is not None]

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)


def default_part_jobs(backend: str, parts: int) -> int:
    """How many parts of one submission are graded at once: on a GPU machine with 4 cores or more,
    all of them (their compiles, checks and host work overlap; timed runs still have the GPU alone,
    :mod:`grader.host.gpu_lock`); on the emulator one at a time (each part's kernels already run on
    every core)."""
    from grader.host.resources import usable_cpus

    if backend_kind(backend).uses_gpus and usable_cpus() >= 4:
        return max(1, parts)
    return 1


#: What :func:`warm_emulator` started building in this process: ``(runtime flags, cache folder, sandbox)``.
_WARMED: set[tuple] = set()
_WARMED_LOCK = threading.Lock()


def warm_emulator(cfg: Config, *, counts_profile: bool) -> None:
    """Start building the emulator's executor and the runtime the grading's emulators use
    (:func:`grader.grading.worker.beside.emulator_runtime_flags`: on the emulator its cases' own,
    on a GPU the quick one of its checks and profile), each in a background thread of its own,
    while the parts' workers start (cached: seconds of one core each, once per machine and grader
    version). A part then does not wait for them after its own compile: the executor sets the
    compile sandbox's limits, and the runtime is linked into every module. Started once per process,
    flags, cache folder and sandbox policy (:func:`grader.api.prepare` starts it before the backend's
    probe, where a GPU is likely; :func:`grade` again, a no-op then). Errors are left for the parts
    to report (their own builds try again)."""
    from grader.grading.worker.beside import emulator_runtime_flags
    from grader.host.folders import default_cache_dir

    flags = emulator_runtime_flags(counts_profile=counts_profile)
    with _WARMED_LOCK:  # once per process and cache folder: a batch grades many submissions
        key = (flags, str(default_cache_dir()), cfg.emulator.sandbox)
        if key in _WARMED:
            return
        _WARMED.add(key)

    def build(what: str) -> None:
        try:
            from grader.backends.emulator.build import EmulatorToolchain
            from grader.toolchain.sandbox import Sandbox
            toolchain = EmulatorToolchain(sandbox=Sandbox(cfg.emulator.sandbox), runtime_flags=flags)
            toolchain.executor_binary() if what == "executor" else toolchain.runtime_object()
        except Exception:  # noqa: BLE001 - the parts' compiles say what is wrong
            pass
    for what in ("runtime", "executor"):
        threading.Thread(target=build, args=(what,), name=f"scangrade-warm-{what}", daemon=True).start()


def _sanitizer_pool(stack: contextlib.ExitStack, selection: Selection, *, cfg: Config, checks: bool,
                    env: dict[str, str] | None, graded: bool, sources: list):
    """The submission's :class:`grader.grading.sanitizer_pool.SanitizerPool`, started now (closed and removed
    by ``stack``), where its parts will run compute-sanitizer: a GPU backend with the checks on and
    the audit asked for (``sanitizer_audit``), compute-sanitizer installed, and a part file to grade;
    else None (and where it cannot start, or where a worker falls back on compute-sanitizer because
    the emulator cannot build its part: each part's worker then starts its own children)."""
    if not (checks and cfg.sanitizer_audit and graded and selection.kind.has_sanitizer
            and any(isinstance(s, Path) for s in sources)):
        return None
    from grader.grading.sanitizer import find_sanitizer
    from grader.grading.sanitizer_pool import SanitizerPool

    sanitizer = find_sanitizer()
    if sanitizer is None:
        return None
    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="scangrade-sanitizer-")))
    try:
        return stack.enter_context(SanitizerPool(sanitizer, folder, env=env))
    except OSError:
        return None


def grade(submission: Path | Intake, *, cfg: Config, selection: Selection, seed: int | None = None,
          parts: list[str] | None = None, checks: bool = True,
          on_event: Callable[[str, protocol.Event], None] | None = None,
          env: dict[str, str] | None = None, stop: threading.Event | None = None,
          part_jobs: int | None = None, worker: WorkerSlot | None = None,
          compile_first: bool = False) -> SubmissionResult:
    """Grade a submission folder (or one part's file) against the configured cases.

    Args:
        submission: folder or ``.cu`` file (:func:`grader.grading.intake.resolve_submission` finds its part
            files), or an :class:`~grader.grading.intake.Intake` (a batch's copy of one: its notes say why a
            part is not graded, and each part's ``file`` is where it was in the submission; a
            refused one has every part an error saying why, worth its points possible).
        cfg: the validated configuration.
        selection: the backend chosen (see :func:`grader.backends.select_backend`).
        seed: overrides the config's seed.
        parts: part keys to grade (default: every part in the config).
        checks: the emulator's checks (races, out-of-bounds accesses, barrier divergence), on every
            machine, each case as its :class:`~grader.grading.case.cases.CheckMode` says (whole, in
            three thread orders; or on sampled blocks). On by default, so every path that grades
            gives the same grade; False only to go faster (``--no-checks``). On a GPU the checks run
            beside it (compute-sanitizer, an audit: :mod:`grader.grading.sanitizer`).
        on_event: called with the name and the typed event (:mod:`grader.grading.protocol`) of each event a
            worker reports (for progress display).
        env: extra environment for the part workers (e.g. ``CUDA_VISIBLE_DEVICES``); they also get
            a token of this grading (``SCANGRADE_CACHE_OWNER``), by which the compile cache counts
            one submission's quota (:class:`grader.toolchain.cache.CompileCache`).
        stop: set from another thread to stop grading: the running workers' sessions are ended and
            :class:`~grader.core.errors.GradingStopped` raised (``scangrade batch`` on Ctrl-C).
        part_jobs: parts graded at once (default :func:`default_part_jobs`); the result is the
            same whatever it is, only the wall time changes.
        worker: with ``part_jobs`` 1, where the worker that grades the parts waits before and after
            them (a batch's job: the worker its last submission left waiting grades this one's, and
            waits for its next; :class:`~grader.grading.worker_process.WorkerSlot`); None: a worker
            of this submission's own, ended after its last part.
        compile_first: compile every part first, each in its worker as its grading compiles it
            (:attr:`grader.grading.protocol.Job.compile_only`), and where one does not compile, run
            no case: the result is then each part that does not compile (``compile-error``), each
            missing or misnamed one (``missing``), and each other part not graded (``error``,
            saying which parts do not compile). Where every part compiles, the parts are graded as
            usual (their compiles come from the compile cache). PrairieLearn's
            ``prairielearn.compile_error: not-gradable`` (docs/prairielearn.md).

    Raises:
        UsageError: the submission path is unusable, or a requested part is not configured.
        GradingStopped: ``stop`` was set; no result exists for this submission.
    """
    wanted = parts or list(cfg.parts)
    for key in wanted:
        if key not in cfg.parts:
            raise UsageError(f"part {key!r} is not in {cfg.path}; configured parts: " + ", ".join(cfg.parts))
    intake = submission if isinstance(submission, Intake) else None
    files = intake.files(wanted) if intake else resolve_submission(submission, wanted)
    if seed is not None:
        cfg = cfg.override(seed=seed)
    from grader.toolchain.cache import CACHE_OWNER_ENV
    env = {**(env or {}), CACHE_OWNER_ENV: uuid.uuid4().hex}  # its workers' compiles share one cache quota
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    keys = [key for key in files if key in cfg.parts]
    profiled = any(cfg.parts[k].profile for k in keys)
    if keys and (selection.kind.counts_profile or checks or profiled):  # a part will run the emulator
        warm_emulator(cfg, counts_profile=selection.kind.counts_profile)
    grading = _SubmissionParts(cfg, selection, intake=intake, files=files, checks=checks, on_event=on_event, env=env,
                               stop=stop, worker=worker)
    with contextlib.ExitStack() as stack:
        grading.pool = _sanitizer_pool(stack, selection, cfg=cfg, checks=checks, env=env,
                                       graded=intake is None or not intake.refused, sources=[files[k] for k in keys])
        jobs = part_jobs if part_jobs is not None else default_part_jobs(selection.name, len(keys))
        if jobs <= 1 and grading.worker is None:  # in turn: one worker of its own grades them all (the emulator)
            grading.worker = WorkerSlot()
            stack.callback(grading.worker.close)
        graded = grading.stopped_at_compile(keys, jobs) if compile_first else None
        if graded is None:
            graded = grading.all(keys, jobs)
    return _submission_result(str(intake.path if intake else submission), graded, cfg=cfg, selection=selection,
                              started=started, t0=grading.t0)


def _submission_result(submission: str, graded: list, *, cfg: Config, selection: Selection, started: str,
                       t0: float) -> SubmissionResult:
    """The result of a submission whose parts gave ``graded`` (``(part result, device facts)`` each),
    grading since ``t0`` (``time.perf_counter()``), started at ``started`` (ISO 8601)."""
    results = [res for res, _ in graded]
    device: dict[str, str] = {}
    for _, dev in graded:
        device = {**device, **dev}
    timed = any(c.timing for p in results for c in p.cases)
    return SubmissionResult(submission=submission, backend=selection.name, backend_reason=selection.reason,
                            device=device, config=cfg.path, seed=cfg.seed, block_size=cfg.block_size,
                            parts=with_analysis(results, device, cfg), scangrade_version=__version__,
                            started_at=started, elapsed_s=round(time.perf_counter() - t0, 3), timed=timed,
                            timing_note=_timing_note(cfg, selection, timed=timed),
                            backend_times_kernels=selection.kind.times_kernels,
                            backend_uses_gpus=selection.kind.uses_gpus)


class _SubmissionParts:
    """The parts of one submission, each graded in its workers (:func:`grader.grading.part_runner.grade_part`)
    within what is left of ``timeouts.submission_s`` (counted from this object's creation), one at a
    time or several at once (:meth:`all`); ``pool``: the submission's sanitizer pool, or None. An
    interrupt of one part's thread (``halt``) stops the others; ``stop`` stops them all from outside.
    ``worker``: where the worker of parts graded in turn waits before and after them (see :func:`grade`)."""

    def __init__(self, cfg: Config, selection: Selection, *, intake: Intake | None, files: dict, checks: bool,
                 on_event: Callable[[str, protocol.Event], None] | None, env: dict[str, str],
                 stop: threading.Event | None, worker: WorkerSlot | None = None) -> None:
        self.cfg, self.selection, self.intake, self.files, self.checks = cfg, selection, intake, files, checks
        self.on_event, self.env, self.stop, self.worker = on_event, env, stop, worker
        self.where = intake.sources if intake else {}
        self.t0 = time.perf_counter()
        self.pool = None
        self._lock = threading.Lock()
        self.halt = threading.Event()  # set by an interrupt of this thread: the parts graded in others stop too

    def _events(self, name: str, ev: protocol.Event) -> None:
        with self._lock:  # parts graded at once report from several threads
            self.on_event(name, ev)

    def all(self, keys: list[str], part_jobs: int, *,
            compile_only: bool = False) -> list[tuple[PartResult, dict[str, str]]]:
        """``(part result, device facts)`` of each part in ``keys``, ``part_jobs`` of them at once (one
        at a time in ``worker``, which :func:`grade` sets for that); ``compile_only``: see :meth:`one`."""
        if part_jobs <= 1:  # in turn, in one worker (the emulator; a batch's job keeps its own)
            return [self.one(key, self.worker, compile_only=compile_only) for key in keys]
        with ThreadPoolExecutor(max_workers=part_jobs) as threads:
            futures = [threads.submit(self.one, key, compile_only=compile_only) for key in keys]
            try:
                return [f.result() for f in futures]
            except BaseException:
                self.halt.set()  # the other threads stop their workers within a poll
                raise

    def stopped_at_compile(self, keys: list[str], part_jobs: int) -> list[tuple[PartResult, dict[str, str]]] | None:
        """Every part in ``keys`` compiled, no case run (:meth:`all` with ``compile_only``): where a
        part does not compile, what :func:`grade` reports with ``compile_first`` (each part as its
        compile left it, each that compiled not graded, saying which do not); else None (grade them)."""
        compiled = self.all(keys, part_jobs, compile_only=True)
        broken = [res for res, _ in compiled if res.status == PartStatus.COMPILE_ERROR]
        if not broken:
            return None
        names = ", ".join(f"Part {res.number} ({Path(res.file).name})" for res in broken)
        why = (f"not graded: {names} {'does' if len(broken) == 1 else 'do'} not compile, and this grading runs "
               "no case until every part compiles")
        return [(ungraded_part(self.cfg, res.key, status=PartStatus.ERROR, message=why, file=res.file), dev)
                if res.status == PartStatus.PASS else (res, dev) for res, dev in compiled]

    def one(self, key: str, slot: WorkerSlot | None = None, *,
            compile_only: bool = False) -> tuple[PartResult, dict[str, str]]:
        """Part ``key`` graded (in ``slot``'s worker, :class:`grader.grading.worker_process.WorkerSlot`,
        where there is one), or not graded where the submission was refused at intake or used up its
        time; ``compile_only``: its file only compiled (``pass`` with no case where it compiles:
        :func:`grader.grading.part_runner.grade_part`).

        Raises:
            GradingStopped: ``stop`` or ``halt`` was set.
        """
        cfg, intake = self.cfg, self.intake
        if self.halt.is_set() or (self.stop is not None and self.stop.is_set()):
            raise GradingStopped("grading was stopped")
        if intake is not None and intake.refused:  # the whole submission was refused at intake
            return ungraded_part(cfg, key, status=PartStatus.ERROR, message=f"not graded: {intake.refused}"), {}
        source = self.files[key]
        left = cfg.timeouts.submission_s - (time.perf_counter() - self.t0)
        if left <= 0:
            msg = f"not graded: the submission used up its {cfg.timeouts.submission_s:g} s (timeouts.submission_s)"
            return ungraded_part(cfg, key, status=PartStatus.TIMEOUT, message=msg,
                                 file=self.where.get(key) or (str(source) if source else None)), {}
        part_cfg = cfg.override(timeouts={"part_s": min(cfg.timeouts.part_s, left)})
        res, dev = grade_part(PARTS[key], source, cfg=part_cfg, backend=self.selection.name, checks=self.checks,
                              on_event=self._events if self.on_event else None, env=self.env,
                              stop=_AnyOf(self.stop, self.halt),
                              sanitizer_pool=self.pool.folder if self.pool else None, slot=slot,
                              compile_only=compile_only)
        return (dataclasses.replace(res, file=self.where[key]) if key in self.where else res), dev


def _timing_note(cfg: Config, selection: Selection, *, timed: bool) -> str:
    """The report's line on how the parts were timed (``timed``: a case was), or why they were not."""
    if timed:
        return ("timed on the GPU: CUDA events, L2 emptied before each run, median of "
                f"{cfg.timing.runs} to {cfg.timing.runs * 3 // 2} runs after {cfg.timing.warmup} to "
                f"{cfg.timing.warmup * 3 // 2} warm-ups (drawn each time), the output checked after runs drawn at "
                "random")
    if not selection.kind.times_kernels:
        return "not timed: the emulator runs kernels on the CPU, so its times say nothing about a GPU"
    return "not timed: no part of this run is timed"
