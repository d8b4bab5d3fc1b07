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


def _exited_within(proc: subprocess.Popen, exit_fd: int | None, timeout: float) -> bool:
    """Whether ``proc`` ended within ``timeout`` seconds (reaped if so). With ``exit_fd`` the thread
    sleeps until the end or the timeout: a batch's runner threads, dozens in one process, then do not
    poll (``Popen.wait(timeout)`` checks many times a second, each thread taking the GIL)."""
    if exit_fd is not None:
        select.select([exit_fd], [], [], timeout)
        return proc.poll() is not None
    try:
        proc.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        return False


#: The environment variable naming the runner's pid to its worker (see grader.grading.worker.main).
RUNNER_PID_ENV = "SCANGRADE_RUNNER_PID"


def run_worker(job_path: Path, events: protocol.EventReader, *, cfg: Config, tmpdir: Path,
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
        exit_fd = _exit_fd(proc.pid)
        try:
            start = case_start = time.monotonic()
            while True:
                finished = _exited_within(proc, exit_fd, 0.1)
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
            if exit_fd is not None:
                os.close(exit_fd)
    return proc.returncode, stopped, case_hung
