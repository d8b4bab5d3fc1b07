"""Grading a submission: one child process per part, with a deadline, results gathered as they come.

A part that does not compile, crashes, hangs or corrupts memory costs that part only: its child
process is killed at the deadline (``timeouts.part_s``), the case it was on is reported as timed
out or crashed, the rest as not run, and grading goes on with the next part. A case that hangs
(``timeouts.case_s``) costs that case only: a new child process grades the cases after it, within
the part's ``part_s``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from grader import __version__
from grader.grading import protocol
from grader.grading.analysis import with_analysis
from grader.backends import Selection, backend_kind
from grader.assignment.config import Config
from grader.grading.deadlines import case_budget_s, describe_budget, load_factor, timed_case_n
from grader.core.errors import GradingStopped, UsageError
from grader.assignment.parts import PARTS, PartSpec
from grader.grading.case.cases import case_list, not_run
from grader.grading.intake import Absent, Intake, resolve_submission
from grader.core.performance import Performance, Profile, Roofline
from grader.core.results import (PART_CASES_BYTES, CaseResult, CaseStatus, FailureKind, PartResult, PartStatus,
                                 SubmissionResult, clean_case, clean_part_message)

#: Bytes of a worker's own stdout/stderr kept for messages.
_TAIL_BYTES = 4000
_PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _report_order(cases: tuple[CaseResult, ...]) -> tuple[CaseResult, ...]:
    """Cases as reports list them: the visible ones, then the hidden ones, then the timed ones, each
    group in the order it ran (the worker times a part between its visible and its hidden cases)."""
    return tuple(sorted(cases, key=lambda c: (c.timing is not None or c.name.startswith("timed "),
                                              c.visibility == "hidden")))


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    text = data[-_TAIL_BYTES:].decode("utf-8", errors="replace").strip()
    return ("…" + text) if len(data) > _TAIL_BYTES else text


def _signal_name(code: int) -> str:
    try:
        sig = signal.Signals(-code)
        return f"{sig.name}: {signal.strsignal(sig) or ''}".rstrip(": ")
    except ValueError:
        return f"signal {-code}"


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


def _session_members(sid: int) -> list[int]:
    """Processes (not zombies) of session ``sid``, from /proc; empty where there is no /proc."""
    found = []
    try:
        entries = os.scandir("/proc")
    except OSError:
        return found
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    stat = f.read().decode(errors="replace")
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp session ...
            if len(fields) > 3 and fields[0] not in ("Z", "X") and fields[3] == str(sid):
                found.append(int(entry.name))
    return found


def kill_session(sid: int) -> None:
    """SIGKILL every process of the session the worker leads (``sid``: the worker's pid, started with
    ``start_new_session=True``): its process group, and the groups compilers run in
    (``process_group=0``), which leave the group but not the session. Orphans keep their session when
    their parent dies, so a compiler still running when its worker is stopped goes too. A process
    that calls ``setsid()`` itself escapes this; under the emulator's sandbox the seccomp filter
    refuses it, and bubblewrap's ``--die-with-parent`` ends what runs inside."""
    try:
        os.killpg(sid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for _ in range(3):  # a process may fork while we look: look again
        members = [pid for pid in _session_members(sid) if pid != os.getpid()]
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)


#: The environment variable naming the runner's pid to its worker (see grader.grading.worker).
RUNNER_PID_ENV = "SCANGRADE_RUNNER_PID"


def _run_worker(job_path: Path, events: protocol.EventReader, *, cfg: Config, tmpdir: Path,
                on_event: Callable[[str, protocol.Event], None] | None,
                extra_env: dict[str, str] | None = None,
                deadline: float | None = None, backend: str = "",
                budget: Callable[[str], float] | None = None,
                stop: threading.Event | None = None) -> tuple[int | None, str | None, bool]:
    """Start the worker and watch it: ``(return code, why it was stopped or None, whether a case ran
    past its deadline)``. ``deadline`` (``time.monotonic()``) is when the part's ``timeouts.part_s``
    runs out, shared by the workers of one part; by default part_s from this worker's start.
    ``budget(case name)``: the seconds a case may run on an idle machine
    (:func:`grader.grading.deadlines.case_budget_s`; default ``timeouts.case_s``), scaled by
    :func:`grader.grading.deadlines.load_factor` while it runs, never past ``timeouts.case_s``.

    Raises:
        GradingStopped: ``stop`` was set; the worker's session is ended first (within about 0.1 s).
    """
    env = {**os.environ, **(extra_env or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PROJECT_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env[RUNNER_PID_ENV] = str(os.getpid())  # the worker ends itself if this process is gone
    with open(tmpdir / "stdout.txt", "wb") as out_f, open(tmpdir / "stderr.txt", "wb") as err_f:
        proc = subprocess.Popen([sys.executable, "-m", "grader.grading.worker", str(job_path)], cwd=tmpdir,
                                stdout=out_f, stderr=err_f, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
        stopped = None
        case_hung = False
        allowed = cfg.timeouts.case_s
        try:
            start = case_start = time.monotonic()
            while True:
                try:
                    proc.wait(timeout=0.1)
                    finished = True
                except subprocess.TimeoutExpired:
                    finished = False
                for ev in events.poll():
                    if isinstance(ev, (protocol.CaseStart, protocol.Compiled)):
                        case_start = time.monotonic()
                    if isinstance(ev, protocol.CaseStart):
                        allowed = budget(ev.case) if budget is not None else cfg.timeouts.case_s
                    if on_event:
                        on_event(ev.name, ev)
                if finished:
                    break
                if stop is not None and stop.is_set():
                    raise GradingStopped("grading was stopped")
                now = time.monotonic()
                running_case = bool(events.items) and isinstance(events.items[-1], protocol.CaseStart)
                if now > (deadline if deadline is not None else start + cfg.timeouts.part_s):
                    stopped = f"timed out after {cfg.timeouts.part_s:g} s (timeouts.part_s)"
                elif running_case and now - case_start > min(cfg.timeouts.case_s, allowed * load_factor()):
                    stopped = (f"timed out after {now - case_start:.1f} s "
                               f"({describe_budget(allowed, cfg.timeouts.case_s, backend)})")
                    case_hung = True
                if stopped:
                    break
        finally:  # also when the grader is interrupted (Ctrl-C): no worker outlives its runner
            kill_session(proc.pid)  # the worker, and anything it started (compilers, executors) or left behind
            proc.wait()
    return proc.returncode, stopped, case_hung


def _pending_profile(cfg: Config, key: str, message: str) -> Profile | None:
    """The Profile of a profiled part that was not profiled (0 of its points), else None."""
    pconf = cfg.parts[key].profile
    return Profile(0.0, pconf.points, message) if pconf else None


def _pending_performance(cfg: Config, key: str, message: str) -> Performance | None:
    """The Performance of a timed part that was not timed (0 of its points), else None."""
    timing = cfg.parts[key].timing
    return Performance(0.0, timing.points, None, message) if timing else None


def ungraded_part(cfg: Config, key: str, *, status: str, message: str, file: str | None = None) -> PartResult:
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
    """
    spec = PARTS[key]
    return PartResult(key=key, number=spec.number, title=spec.title, file=file or spec.filename, status=status,
                      message=clean_part_message(message), cases=not_run(cfg, key, "not run: " + message, kind=status),
                      performance=_pending_performance(cfg, key, "not timed: " + message),
                      profile=_pending_profile(cfg, key, "not profiled: " + message), **_launch(cfg, key))


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
    (:class:`grader.grading.worker._GpuPath`). A new worker starts while the part's time (``deadline``,
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
    deadline (``stopped`` says which), killed by a signal (a crash), or exited on its own (the
    grader's error, with its stderr); the kernel's last output (stdout) after a timeout or a crash."""
    stage = reported.stage()
    if stopped:
        why = f"{stopped} during {stage}"
        if reported.current:
            why += (": the kernel may never finish — check loop conditions, and that every thread reaches "
                    "every __syncthreads()")
        status = PartStatus.TIMEOUT
    elif returncode is not None and returncode < 0:
        why = f"the process running this part crashed ({_signal_name(returncode)}) during {stage}"
        if returncode == -signal.SIGSEGV:
            why += " — often a read or write outside an array"
        status = PartStatus.CRASH
    else:
        why = _worker_failure(returncode, stage, _tail(tmpdir / "stderr.txt"))
        status = PartStatus.ERROR
    out_tail = _tail(tmpdir / "stdout.txt")
    if out_tail and status != PartStatus.ERROR:
        why += f"\nlast output of the kernel:\n{out_tail}"
    return status, why


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
               sanitizer_pool: Path | None = None) -> tuple[PartResult, dict[str, str]]:
    """Grade one part in a child process (``checks``: the emulator's checking mode and thread orders,
    on cases up to ``emulator.checks_max_n`` and on sampled blocks above it; the default, as every
    official grade uses them;
    ``sanitizer_pool``: the folder of the submission's :class:`grader.grading.sanitizer_pool.SanitizerPool`).

    A worker's events are folded into what the part reported (:class:`_Reported`); a worker that
    ends without its last word is told in words (:func:`_how_it_stopped`); a case that hung or a
    GPU fault that lost the context starts a new worker after it (:class:`_Workers`).

    Returns:
        ``(part result, device facts reported by the child)``. Never raises for problems of the
        submission; they are in the result.

    Raises:
        GradingStopped: ``stop`` was set while the part ran (its workers are ended).
    """
    phases: dict[str, float] = {}
    reported = _Reported(performance=_pending_performance(cfg, part.key, "not timed: the part did not finish"),
                         profile=_pending_profile(cfg, part.key, "not profiled: the part did not finish"))
    pending = reported.performance

    def part_result(status: str, message: str, cases: tuple[CaseResult, ...],
                    performance: Performance | None = None) -> tuple[PartResult, dict[str, str]]:
        budget = [PART_CASES_BYTES]  # all the part's case messages together
        return PartResult(key=part.key, number=part.number, title=part.title,
                          file=str(source) if source else part.filename, status=status,
                          message=clean_part_message(message),
                          cases=tuple(clean_case(c, budget) for c in _report_order(cases)),
                          performance=performance, phases_s=phases, profile=reported.profile,
                          roofline=reported.roofline,
                          **_launch(cfg, part.key)), reported.device

    if not isinstance(source, Path):  # None, or an Absent saying why (misnamed, a link, too large)
        msg = getattr(source, "message", "") or f"{part.filename} is missing from the submission"
        status = PartStatus(getattr(source, "status", PartStatus.MISSING))
        return part_result(status, msg, not_run(cfg, part.key, "not run: " + msg, kind=status), pending)

    with tempfile.TemporaryDirectory(prefix="scangrade-part-") as tmp:
        tmpdir = Path(tmp)
        specs = case_list(cfg, part.key)
        names = [c.name for c in specs]
        started = time.time()
        workers = _Workers(names, deadline=time.monotonic() + cfg.timeouts.part_s)
        items: list[protocol.Event] = []
        budget = _case_budgets(cfg, part.key, specs, backend=backend, checks=checks)
        while True:
            events = protocol.EventReader(tmpdir / f"events-{workers.attempt}.jsonl")
            job_path = tmpdir / f"job-{workers.attempt}.json"
            job_path.write_text(protocol.Job.for_part(cfg, part=part.key, source=source, backend=backend,
                                                      events=events.path, checks=checks, start=workers.start,
                                                      earlier_failed=workers.attempt > 0,
                                                      earlier_hung=bool(workers.hung),
                                                      sanitizer_pool=sanitizer_pool).to_json())
            returncode, stopped, case_hung = _run_worker(job_path, events, cfg=cfg, tmpdir=tmpdir,
                                                         on_event=on_event, extra_env=env, deadline=workers.deadline,
                                                         backend=backend, budget=budget, stop=stop)
            items += events.items
            phases.clear()
            phases.update(_phases(items, started, time.time()))
            reported.next_worker()
            for ev in events.items:
                reported.add(ev)
                if reported.end is not None:
                    break
            cases = reported.cases
            if isinstance(reported.end, (protocol.WorkerError, protocol.CompileFailed)):
                status = PartStatus.ERROR if isinstance(reported.end, protocol.WorkerError) else PartStatus.COMPILE_ERROR
                rest = ("not run: " + reported.end.message if status == PartStatus.ERROR
                        else f"not run: {part.filename} does not compile")
                return part_result(status, reported.end.message,
                                   not_run(cfg, part.key, rest, kind=status, done=tuple(cases)), pending)
            if isinstance(reported.end, protocol.Done):
                if workers.hung:
                    return part_result(PartStatus.TIMEOUT, _hung_message(workers.hung), tuple(cases),
                                       reported.performance)
                return part_result(reported.passed(), "", tuple(cases), reported.performance)
            status, why = _how_it_stopped(stopped, returncode, reported, tmpdir)
            if reported.current is not None:
                cases.append(_stopped_case(reported.current, specs, cfg=cfg, key=part.key, status=status, why=why))
            rest = f"not run: an earlier step ended in {status}"
            if case_hung and reported.current in names:
                after = workers.after_hang(reported.current)
                if after == "retry":
                    continue
                if after == "in a row":
                    rest = _in_a_row_rest("hung")
                    why += "\n" + _in_a_row_message("hung")
            if workers.hung:
                why = _hung_message(workers.hung) + "\n" + why
            return part_result(status, why, not_run(cfg, part.key, rest, kind=status, done=tuple(cases)),
                               reported.performance)


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
    from grader.backends.emulator.sandbox import probe_bubblewrap
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
        timed = spec is None
        if spec is not None:
            n, dtype = spec.n, spec.dtype
        elif timed_case_n(name) is not None:
            n, dtype = timed_case_n(name)
        else:
            return cfg.timeouts.case_s
        return case_budget_s(backend=backend, part=key, dtype=dtype, n=n, timed=timed,
                             checked=checks and n <= cfg.emulator.checks_max_n, case_s=cfg.timeouts.case_s,
                             gpu_emulator_checks=emulator_checks, sampled=checks and n > cfg.emulator.checks_max_n)
    return budget


class _Either:
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
    if backend_kind(backend).uses_gpus and (os.cpu_count() or 1) >= 4:
        return max(1, parts)
    return 1


def _warm_emulator(cfg: Config, *, checks: bool, profile: bool) -> None:
    """Build the emulator's executor, and its runtimes (cached: a few seconds of one core each, once
    per machine and grader version): the quick one of the GPU path's ``checks``
    (:data:`grader.backends.emulator.build.QUICK_RUNTIME_FLAGS`), the optimised one of the
    ``profile`` phase; each in a background thread of its own, so the GPU path's emulator checks
    and profile phase do not wait for them to be built after the parts' compiles. Errors are left
    for those to report."""
    from grader.backends.emulator.build import QUICK_RUNTIME_FLAGS

    def build(what: str) -> None:
        try:
            from grader.backends.emulator.build import Toolchain
            from grader.backends.emulator.sandbox import Sandbox
            toolchain = Toolchain(sandbox=Sandbox(cfg.emulator.sandbox),
                                  runtime_flags=QUICK_RUNTIME_FLAGS if what == "quick-runtime" else ())
            toolchain.executor_binary() if what == "executor" else toolchain.runtime_object()
        except Exception:  # noqa: BLE001 - the emulator's checks and the profile phase say what is wrong
            pass
    for what in ("quick-runtime",) * checks + ("runtime",) * profile + ("executor",):
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
          part_jobs: int | None = None) -> SubmissionResult:
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
        checks: check for races, out-of-bounds accesses and barrier divergence with the emulator's
            checks, on every machine, and run every case up to ``emulator.checks_max_n`` under
            ascending, descending and random thread orders (larger cases: the checks on the first,
            the last and a few seeded blocks of each launch, in the same orders, then, where the
            part's blocks are independent, a plain run of every block for the output). On by default,
            so every path that grades (check, grade, batch, Gradescope, the pytest plugin) gives the
            same grade; False only to go faster (``--no-checks``). On a GPU the checks run beside
            it (compute-sanitizer, an audit: :mod:`grader.grading.sanitizer`).
        on_event: called with the name and the typed event (:mod:`grader.grading.protocol`) of each event a
            worker reports (for progress display).
        env: extra environment for the part workers (e.g. ``CUDA_VISIBLE_DEVICES``); they also get
            a token of this grading (``SCANGRADE_CACHE_OWNER``), by which the compile cache counts
            one submission's quota (:class:`grader.backends.emulator.build.CompileCache`).
        stop: set from another thread to stop grading: the running workers' sessions are ended and
            :class:`~grader.core.errors.GradingStopped` raised (``scangrade batch`` on Ctrl-C).
        part_jobs: parts graded at once (default :func:`default_part_jobs`); the result is the
            same whatever it is, only the wall time changes.

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
    where = intake.sources if intake else {}
    if seed is not None:
        cfg = cfg.override(seed=seed)
    from grader.backends.emulator.cache import CACHE_OWNER_ENV
    env = {**(env or {}), CACHE_OWNER_ENV: uuid.uuid4().hex}  # its workers' compiles share one cache quota
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    keys = [key for key in files if key in cfg.parts]
    if part_jobs is None:
        part_jobs = default_part_jobs(selection.name, len(keys))
    profiled = any(cfg.parts[k].profile for k in keys)
    if not selection.kind.counts_profile and keys and (checks or profiled):
        # the checks' and the profile's emulator runtimes build while the parts start
        _warm_emulator(cfg, checks=checks, profile=profiled)
    lock = threading.Lock()
    halt = threading.Event()  # set by an interrupt of this thread: the parts graded in others stop too

    def events(name: str, ev: protocol.Event) -> None:
        with lock:  # parts graded at once report from several threads
            on_event(name, ev)

    def one(key: str) -> tuple[PartResult, dict[str, str]]:
        if halt.is_set() or (stop is not None and stop.is_set()):
            raise GradingStopped("grading was stopped")
        if intake is not None and intake.refused:  # the whole submission was refused at intake
            return ungraded_part(cfg, key, status=PartStatus.ERROR, message=f"not graded: {intake.refused}"), {}
        source = files[key]
        left = cfg.timeouts.submission_s - (time.perf_counter() - t0)
        if left <= 0:
            msg = f"not graded: the submission used up its {cfg.timeouts.submission_s:g} s (timeouts.submission_s)"
            return ungraded_part(cfg, key, status=PartStatus.TIMEOUT, message=msg,
                                 file=where.get(key) or (str(source) if source else None)), {}
        part_cfg = cfg.override(timeouts={"part_s": min(cfg.timeouts.part_s, left)})
        res, dev = grade_part(PARTS[key], source, cfg=part_cfg, backend=selection.name, checks=checks,
                              on_event=events if on_event else None, env=env, stop=_Either(stop, halt),
                              sanitizer_pool=pool.folder if pool else None)
        return (dataclasses.replace(res, file=where[key]) if key in where else res), dev

    with contextlib.ExitStack() as stack:
        pool = _sanitizer_pool(stack, selection, cfg=cfg, checks=checks, env=env,
                               graded=intake is None or not intake.refused, sources=[files[k] for k in keys])
        if part_jobs <= 1:
            graded = [one(key) for key in keys]
        else:
            with ThreadPoolExecutor(max_workers=part_jobs) as threads:
                futures = [threads.submit(one, key) for key in keys]
                try:
                    graded = [f.result() for f in futures]
                except BaseException:
                    halt.set()  # the other threads stop their workers within a poll
                    raise
    results = [res for res, _ in graded]
    device: dict[str, str] = {}
    for _, dev in graded:
        device = {**device, **dev}
    timed = any(c.timing for p in results for c in p.cases)
    note = ("timed on the GPU: CUDA events, L2 emptied before each run, median of "
            f"{cfg.timing.runs} to {cfg.timing.runs * 3 // 2} runs after {cfg.timing.warmup} to "
            f"{cfg.timing.warmup * 3 // 2} warm-ups (drawn each time), the output checked after runs drawn at random"
            if timed else
            "not timed: the emulator runs kernels on the CPU, so its times say nothing about a GPU"
            if not selection.kind.times_kernels else "not timed: no part of this run is timed")
    return SubmissionResult(submission=str(intake.path if intake else submission), backend=selection.name, backend_reason=selection.reason,
                            device=device, config=cfg.path, seed=cfg.seed, block_size=cfg.block_size,
                            parts=with_analysis(results, device, cfg), scangrade_version=__version__, started_at=started,
                            elapsed_s=round(time.perf_counter() - t0, 3), timed=timed, timing_note=note)
