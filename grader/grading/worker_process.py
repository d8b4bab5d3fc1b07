"""A part's worker process (:mod:`grader.grading.worker`): started in a session of its own, watched
against the part's and each case's deadlines while its events are read (:func:`run_worker`), and
killed with every process of its session when it ends or is stopped (:func:`kill_session`)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from grader.assignment.config import Config
from grader.core.errors import GradingStopped
from grader.grading import protocol
from grader.grading.deadlines import describe_budget, load_factor
from grader.host.parent_death import tied_to_this_process

#: Bytes of a worker's own stdout/stderr kept for messages.
TAIL_BYTES = 4000
_PROJECT_ROOT = Path(__file__).resolve().parents[2]


def tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    text = data[-TAIL_BYTES:].decode("utf-8", errors="replace").strip()
    return ("…" + text) if len(data) > TAIL_BYTES else text


def signal_name(code: int) -> str:
    try:
        sig = signal.Signals(-code)
        return f"{sig.name}: {signal.strsignal(sig) or ''}".rstrip(": ")
    except ValueError:
        return f"signal {-code}"


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


def _exit_fd(pid: int) -> int | None:
    """A file descriptor that becomes readable when process ``pid`` ends (Linux's pidfd), or None
    where there is none (then :func:`_exited_within` polls)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _exited_within(proc: subprocess.Popen, exit_fd: int | None, timeout: float, ready_fd: int | None = None) -> bool:
    """Whether ``proc`` ended within ``timeout`` seconds (reaped if so). With ``exit_fd`` the thread
    sleeps until the end, a byte on ``ready_fd`` (a serving worker's job done) or the timeout: a
    batch's runner threads, dozens in one process, then do not poll (``Popen.wait(timeout)`` checks
    many times a second, each thread taking the GIL)."""
    if exit_fd is not None:
        select.select([exit_fd] + ([ready_fd] if ready_fd is not None else []), [], [], timeout)
        return proc.poll() is not None
    try:
        proc.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        return False


#: The environment variable naming the runner's pid to its worker (see grader.grading.worker.main).
RUNNER_PID_ENV = "SCANGRADE_RUNNER_PID"


class WorkerSlot:
    """A worker that grades one part after another (``python -m grader.grading.worker --serve``:
    :func:`grader.grading.worker.main.serve`), for a runner thread grading a submission's parts in
    turn, and in a batch the submissions of one job after one another: a part's job goes to the
    worker the part before left waiting, where its environment is the same (the grading's token
    comes in the job: :attr:`grader.grading.protocol.Job.grading`), instead of to a new process, so a submission costs one worker's start
    (Python, the imports, on a GPU a CUDA context) instead of one a part, and a batch's job one in
    all. A worker that ended, hung, was stopped or did not say it is ready is not kept
    (:func:`run_worker` ends its session as before).

    Used by one thread at a time: a worker dies with the thread that started it
    (``PR_SET_PDEATHSIG``; a batch's threads live as long as the batch). :meth:`close` ends the
    worker left waiting.
    """

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.env: dict[str, str] | None = None
        self.ready_fd: int | None = None

    def take(self, env: dict[str, str], job_path: Path, tmpdir: Path) -> tuple[subprocess.Popen, int] | None:
        """The waiting worker, handed ``job_path`` to run in ``tmpdir``, and its ready pipe; None where
        none waits with ``env`` or it is gone (then it is ended: start a new one)."""
        proc, fd, same = self.proc, self.ready_fd, env == self.env
        self.proc, self.ready_fd, self.env = None, None, None
        if proc is None:
            return None
        if same and proc.poll() is None:
            try:
                proc.stdin.write(f"{os.fspath(job_path)}\t{os.fspath(tmpdir)}\n".encode())
                proc.stdin.flush()
                return proc, fd
            except (OSError, ValueError):
                pass
        _end_serving(proc, fd)
        return None

    def keep(self, proc: subprocess.Popen, ready_fd: int, env: dict[str, str]) -> None:
        """Keep ``proc``, which said it is ready for another job, for the next part."""
        self.close()
        self.proc, self.ready_fd, self.env = proc, ready_fd, env

    def close(self) -> None:
        """End the worker left waiting, if any (its stdin closed; its session killed)."""
        proc, fd = self.proc, self.ready_fd
        self.proc, self.ready_fd, self.env = None, None, None
        if proc is not None:
            _end_serving(proc, fd)


def _end_serving(proc: subprocess.Popen, ready_fd: int | None) -> None:
    """End a serving worker and close the runner's ends of its pipes."""
    kill_session(proc.pid)
    proc.wait()
    try:
        proc.stdin.close()
    except OSError:  # a write it never read (it is gone): nothing to flush to
        pass
    if ready_fd is not None:
        os.close(ready_fd)


def _start(env: dict[str, str], job_path: Path, tmpdir: Path, out_f, err_f,
           slot: WorkerSlot | None) -> tuple[subprocess.Popen, int | None]:
    """A worker for ``job_path``: the one ``slot`` keeps waiting, else a new one (a serving one, with
    its ready pipe, where there is a slot)."""
    if slot is None:
        return subprocess.Popen([sys.executable, "-m", "grader.grading.worker", str(job_path)], cwd=tmpdir,
                                stdout=out_f, stderr=err_f, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True, preexec_fn=tied_to_this_process()), None
    taken = slot.take(env, job_path, tmpdir)
    if taken is not None:
        return taken
    ready_r, ready_w = os.pipe()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "grader.grading.worker", protocol.SERVE_ARG, str(ready_w),
                                 str(job_path)], cwd=tmpdir, stdout=out_f, stderr=err_f, stdin=subprocess.PIPE,
                                env=env, start_new_session=True, pass_fds=(ready_w,),
                                preexec_fn=tied_to_this_process())
    except BaseException:
        os.close(ready_r)
        raise
    finally:
        os.close(ready_w)
    return proc, ready_r


def run_worker(job_path: Path, events: protocol.EventReader, *, cfg: Config, tmpdir: Path,
                on_event: Callable[[str, protocol.Event], None] | None,
                extra_env: dict[str, str] | None = None,
                deadline: float | None = None, backend: str = "",
                budget: Callable[[str], float] | None = None,
                stop: threading.Event | None = None,
                slot: WorkerSlot | None = None) -> tuple[int | None, str | None, bool]:
    """Start the worker and watch it: ``(return code, why it was stopped or None, whether a case ran
    past its deadline)``. ``deadline`` (``time.monotonic()``) is when the part's ``timeouts.part_s``
    runs out, shared by the workers of one part; by default part_s from this worker's start.
    ``budget(case name)``: the seconds a case may run on an idle machine
    (:func:`grader.grading.deadlines.case_budget_s`; default ``timeouts.case_s``), scaled by
    :func:`grader.grading.deadlines.load_factor` while it runs, never past ``timeouts.case_s``.
    ``slot``: where the worker the part before left waiting is, and where this one waits when its
    job ends cleanly (:class:`WorkerSlot`; return code 0 then); None: a worker for this job alone.

    Raises:
        GradingStopped: ``stop`` was set; the worker's session is ended first (within about 0.1 s).
    """
    env = {**os.environ, **(extra_env or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PROJECT_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env[RUNNER_PID_ENV] = str(os.getpid())  # the worker ends itself if this process is gone
    with open(tmpdir / "stdout.txt", "wb") as out_f, open(tmpdir / "stderr.txt", "wb") as err_f:
        proc, ready_fd = _start(env, job_path, tmpdir, out_f, err_f, slot)
        stopped = None
        case_hung = False
        ready = False
        allowed = cfg.timeouts.case_s
        exit_fd = _exit_fd(proc.pid)
        try:
            start = case_start = time.monotonic()
            watch = ready_fd  # None once the worker closed it (it ends)
            said_last = None  # when a serving worker reported the job's end
            while True:
                finished = _exited_within(proc, exit_fd, 0.1, watch)
                said = _read_ready(watch) if watch is not None and not finished else None
                ready = said is True
                if said is None:
                    watch = None
                for ev in events.poll():
                    if isinstance(ev, (protocol.CaseStart, protocol.Compiled)):
                        case_start = time.monotonic()
                    if isinstance(ev, protocol.CaseStart):
                        allowed = budget(ev.case) if budget is not None else cfg.timeouts.case_s
                    if isinstance(ev, _LAST_WORDS) and watch is not None:
                        said_last = time.monotonic()
                    if on_event:
                        on_event(ev.name, ev)
                if finished or ready:
                    break
                if said_last is not None and time.monotonic() - said_last > READY_GRACE_S:
                    break  # it said its last word but is not ready: ended below, not kept
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
            if exit_fd is not None:
                os.close(exit_fd)
            if ready:  # it waits for the next part's job
                slot.keep(proc, ready_fd, env)
            elif ready_fd is not None:
                _end_serving(proc, ready_fd)  # the worker, and anything it started or left behind
            else:
                kill_session(proc.pid)  # the worker, and anything it started (compilers, executors) or left behind
                proc.wait()
    return (0 if ready else proc.returncode), stopped, case_hung


#: The events that end a job (a worker sends none after them).
_LAST_WORDS = (protocol.Done, protocol.WorkerError, protocol.CompileFailed)

#: Seconds a serving worker has, after its job's last event, to say it is ready for the next one
#: (it collects the job's garbage and checks its CUDA context first; well under a second): past them
#: it is ended, and the next part gets a new worker.
READY_GRACE_S = 10.0


def _read_ready(fd: int) -> bool | None:
    """Whether the serving worker wrote its ready byte on ``fd`` (read if so; the call does not
    wait); None where the pipe is closed (the worker ended)."""
    readable, _, _ = select.select([fd], [], [], 0)
    if not readable:
        return False
    return True if os.read(fd, 1) == b"r" else None
