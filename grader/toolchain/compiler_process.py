"""Running one compiler process for the grader: started in its own process group, its output read up
to a cap (a flood of diagnostics is stopped there), within a timeout, and its failure turned into a
CompileError that says why (the first errors, a sandbox limit, the cap, the timeout).
"""

from __future__ import annotations

import os
import selectors
import shlex
import signal
import subprocess
import time
from pathlib import Path

from grader.toolchain.sandbox import COMPILE_MEMORY, FILE_SIZE, Command
from grader.core.errors import CompileError
from grader.host.parent_death import tied_to_this_process

__all__ = ["OUTPUT_BYTES", "start_compiler", "read_output", "cut_note", "run_compile", "strip_workdir", "limit_note",
           "kill_group"]

#: Bytes of a compiler's output read from its pipe: past them the compiler is stopped (88 KB of nested
#: macros can make g++ print gigabytes of notes until its timeout). Far more than the first errors
#: and than what a result keeps (:attr:`grader.core.errors.CompileError.LOG_LIMIT`).
OUTPUT_BYTES = 256 * 1024


def start_compiler(cmd: Command) -> subprocess.Popen:
    """Start a compiler command made by :meth:`.compilers.Toolchain.sandboxed` in its own process group, its
    stderr and stdout on one pipe (bytes), no stdin; read it with :func:`read_output`. It dies with
    the thread that starts it (:func:`grader.host.parent_death.tied_to_this_process`, as bubblewrap's
    ``--die-with-parent`` does in the sandbox): read it from that thread.

    Raises:
        OSError: the command could not start.
    """
    return subprocess.Popen(cmd.argv, env=cmd.env, cwd=cmd.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, process_group=0, preexec_fn=tied_to_this_process())


def read_output(proc: subprocess.Popen, *, timeout_s: float, cap: int = OUTPUT_BYTES) -> tuple[str, bool]:
    """The output of a process started by :func:`start_compiler`, read until it ends, at most ``cap``
    bytes: ``(text decoded as UTF-8 with replacement, whether it was cut)``.

    Once ``cap`` bytes are read the process and its process group are killed (:func:`kill_group`)
    and the rest is never read, so a flood of diagnostics costs the grader ``cap`` bytes and the
    compiler no more time. The process is reaped before returning.

    Raises:
        subprocess.TimeoutExpired: it did not end within ``timeout_s`` seconds (it and its group
            are killed first).
    """
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    size = 0
    cut = False
    fd = proc.stdout.fileno()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                kill_group(proc)
                raise subprocess.TimeoutExpired(proc.args, timeout_s)
            if not selector.select(left):
                continue
            data = os.read(fd, 65536)
            if not data:
                break
            chunks.append(data[:cap - size])
            size += len(data)
            if size >= cap:
                cut = True
                kill_group(proc)
                break
    proc.stdout.close()
    try:
        proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
    except subprocess.TimeoutExpired:  # it closed its output but goes on
        kill_group(proc)
        raise
    return b"".join(chunks).decode("utf-8", errors="replace"), cut


def cut_note(tool: str, cap: int = OUTPUT_BYTES) -> str:
    """The line saying a compiler's output was cut at ``cap`` bytes and the compiler stopped."""
    return (f"{tool} printed more than {cap // 1024} KiB of diagnostics and was stopped there: "
            f"the first errors are below, fix them first")


def run_compile(cmd: Command, *, filename: str, workdir: Path, timeout_s: float, tool: str, failed: str) -> str:
    """Run a compiler command made by :meth:`.compilers.Toolchain.sandboxed` in its own process group, within
    ``timeout_s`` seconds, reading at most :data:`OUTPUT_BYTES` of its output: the emulator's host
    compile and the GPU backend's nvcc alike.

    Args:
        cmd: the sandboxed command.
        filename: the student's file, for the messages.
        workdir: the scratch folder, whose path is removed from the compiler's log.
        timeout_s: seconds allowed (the compiler and everything it started are killed after them).
        tool: the compiler as messages name it (``"nvcc"``).
        failed: the message's opening when the compiler fails (``"part1_naive.cu does not compile"``).

    Returns:
        The compiler's output (stderr and stdout as written), the scratch folder's path removed.

    Raises:
        CompileError: the compiler could not start, did not finish in time, printed more than
            :data:`OUTPUT_BYTES` (stopped then; the message says the log is cut), or failed (with
            its log, and a note when a sandbox limit stopped it).
    """
    command = shlex.join(cmd.shown)
    try:
        proc = start_compiler(cmd)
    except OSError as exc:
        raise CompileError(f"{filename} does not compile: {tool} could not run ({exc})", command=command) from None
    try:
        log, cut = read_output(proc, timeout_s=timeout_s)
    except subprocess.TimeoutExpired:
        raise CompileError(f"{filename} does not compile: {tool} did not finish within {timeout_s:g} s",
                           command=command) from None
    log = strip_workdir(log.strip(), workdir)
    if cut:
        raise CompileError(f"{failed}; {cut_note(tool)}", command=command, log=log)
    if proc.returncode != 0:
        raise CompileError(failed + limit_note(log, timeout_s), command=command, log=log)
    return log


def strip_workdir(log: str, workdir: Path) -> str:
    """``log`` with the scratch folder's path removed (``./`` for the folder itself)."""
    for prefix in {str(workdir.resolve()), str(workdir)}:
        log = log.replace(prefix + os.sep, "").replace(prefix, ".")
    return log


#: Compiler messages that mean a sandbox limit stopped it.
_LIMIT_SIGNS = ("virtual memory exhausted", "out of memory", "Cannot allocate memory", "Killed signal",
                "CPU time limit exceeded", "File size limit exceeded", "No space left on device")


def limit_note(log: str, timeout_s: float) -> str:
    """``"; it hit the sandbox's limits (...)"`` when a compiler log shows one, else ``""``."""
    if not any(s in log for s in _LIMIT_SIGNS):
        return ""
    return (f"; it hit the sandbox's limits for a compile ({COMPILE_MEMORY // 2**30} GiB of memory, "
            f"{int(timeout_s)} s, {FILE_SIZE // 2**20} MiB per file): simplify heavy templates or macros")


def kill_group(proc: subprocess.Popen) -> None:
    """Kill a process started with ``process_group=0`` and everything in its process group, and reap it.

    (A group, not a session of its own: the worker's session holds every process a part starts, so
    the runner can stop them all when it stops the worker; see :func:`grader.grading.worker_process.kill_session`.)"""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.communicate()
