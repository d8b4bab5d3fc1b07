"""The operating-system sandbox of everything that reads or runs a submission: bubblewrap, resource
limits and the policy (the config key is the emulator's, ``emulator.sandbox``; the GPU backend's nvcc
runs under the same).

Under the emulator a submission becomes native code, so everything that runs what a student wrote
runs in a sandbox the operating system enforces:

- the compile of the student's translation unit (the host compiler, the link, ``nvcc -ptx``; on a GPU,
  ``nvcc --cubin``): a compiler reads and embeds whatever files it is pointed at
  (``asm(".incbin ...")``) and can be made to burn memory and CPU;
- the emulator's executor (``grader/backends/emulator/runtime/executor.cpp``), the process that loads
  the compiled module and runs its kernels; it adds a seccomp filter of its own before the module's first instruction runs;
- ``addr2line`` on the compiled module (it parses a file the student shaped).

With bubblewrap (``bwrap``) each runs in fresh namespaces (no network, its own pids, IPC, hostname
and user namespace, no capabilities) and sees a read-only ``/usr`` and ``/lib*``, the few files it
needs, read-only, and, for a compile, the part's scratch folder read-write and a small private
``/tmp``: not the grader, its config, other submissions, the reference solutions or any result.
Every command also runs under resource limits (address space, file size, open files, CPU time;
no core dumps), set by the executor binary itself (``executor limit ... -- COMMAND``: a
:class:`grader.toolchain.compilers.Toolchain`'s limiter).

The policy (config key ``emulator.sandbox``): ``auto`` uses bubblewrap when it works here (probed
once per process with ``bwrap ... true``), else runs the same commands without it (limits and the
executor's seccomp filter still apply); ``required`` makes the emulator unavailable without a
working bubblewrap; ``off`` uses neither bubblewrap nor seccomp (for debugging the emulator), only
the separate process and its limits.

Public API: :data:`POLICIES`, :class:`Limits`, :class:`Command`, :class:`Sandbox`,
:func:`probe_bubblewrap`, :func:`executor_limits`, :func:`compile_limits`.
"""

from __future__ import annotations

import functools
import math
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from grader.core.errors import BackendUnavailable

__all__ = ["POLICIES", "Limits", "Command", "Sandbox", "probe_bubblewrap", "executor_limits", "compile_limits",
           "MODULE_MEMORY", "FILE_SIZE", "INSTALL_HINT"]

#: Values of the config key ``emulator.sandbox``.
POLICIES = ("auto", "required", "off")
#: What to do where bubblewrap is missing.
INSTALL_HINT = "apt install bubblewrap (or your distribution's bubblewrap package)"

#: Memory a module may use for itself (heap, static data, its threads), beyond device memory and
#: the runtime's fiber stacks, in bytes.
MODULE_MEMORY = 4 * 2**30
#: Address space of the fiber stacks of one runtime worker (kResident blocks x kMaxThreads threads
#: x 64 KiB, mapped with MAP_NORESERVE: mostly never touched), in bytes.
STACKS_PER_WORKER = 4 * 1024 * 64 * 2**10
#: Largest file any sandboxed command may write (the compiler's outputs included), in bytes.
FILE_SIZE = 64 * 2**20
#: CPU seconds of one executor (all its threads together): a backstop only; the grader's
#: timeouts stop a part long before, and the executor dies with the grader's process.
EXECUTOR_CPU_S = 4 * 3600
#: Memory of one compiler process (cc1plus on template-heavy code needs well under 1 GiB), in bytes.
COMPILE_MEMORY = 4 * 2**30
#: Size of the private /tmp of a sandboxed compile, in bytes.
COMPILE_TMP = 256 * 2**20

_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/alternatives")


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed command (hard = soft; 0 leaves one unchanged).

    Attributes:
        address_space: RLIMIT_AS, bytes of virtual memory.
        file_size: RLIMIT_FSIZE, bytes of the largest file it may write.
        open_files: RLIMIT_NOFILE, open descriptors.
        cpu_s: RLIMIT_CPU, CPU seconds.
        threads: the executor only (0 elsewhere): the OS threads a launch may use, the executor's
            own included; it starts them before its seccomp filter, which then refuses every new
            thread or process, so a module never has more.
    """

    address_space: int
    file_size: int
    open_files: int
    cpu_s: int
    threads: int = 0

    def options(self) -> list[str]:
        """The executor's options setting these limits (``--as B --fsize B --nofile N --cpu S``, and
        ``--threads N`` when set)."""
        return ["--as", str(self.address_space), "--fsize", str(self.file_size), "--nofile", str(self.open_files),
                "--cpu", str(self.cpu_s), *(["--threads", str(self.threads)] if self.threads else [])]


def executor_limits(*, arena_bytes: int, workers: int) -> Limits:
    """Limits of an executor: its device-memory mapping (``arena_bytes``, shared with the grader and
    capped there), the fiber stacks of ``workers`` OS threads, and :data:`MODULE_MEMORY` of its own; at
    most ``workers`` threads (capped at 64, the runtime's most), all started before the module loads."""
    return Limits(address_space=arena_bytes + max(workers, 1) * STACKS_PER_WORKER + MODULE_MEMORY,
                  file_size=FILE_SIZE, open_files=64, cpu_s=EXECUTOR_CPU_S, threads=min(max(workers, 1), 64))


def compile_limits(timeout_s: float) -> Limits:
    """Limits of one compiler run; the CPU limit backs up the wall-clock ``timeout_s``."""
    return Limits(address_space=COMPILE_MEMORY, file_size=FILE_SIZE, open_files=256,
                  cpu_s=int(math.ceil(timeout_s)) + 5)


@dataclass(frozen=True)
class Command:
    """A command ready for :class:`subprocess.Popen`: ``Popen(c.argv, env=c.env, cwd=c.cwd)``.

    Attributes:
        argv: the full command line (bubblewrap's, when sandboxed).
        env: the environment for Popen (minimal; bubblewrap sets the same inside).
        cwd: the working folder for Popen, or None.
        shown: the command line as a student should see it (without the sandbox's wrapping).
    """

    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    shown: list[str]


def _base_env() -> dict[str, str]:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp"}
    for key in ("LANG", "LC_ALL", "LC_MESSAGES", "LC_CTYPE"):
        if os.environ.get(key):
            env[key] = os.environ[key]
    return env


def _system_binds() -> list[str]:
    """Read-only /usr, the /lib* and /bin links or folders, the loader cache, tool alternatives."""
    args = ["--ro-bind", "/usr", "/usr"]
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for f in _SYSTEM_FILES:
        args += ["--ro-bind-try", f, f]
    return args


def _bwrap_prefix(bwrap: str) -> list[str]:
    return [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--clearenv", *_system_binds(), "--proc", "/proc", "--dev", "/dev"]


@functools.lru_cache(maxsize=None)
def probe_bubblewrap() -> tuple[str | None, str]:
    """Whether bubblewrap works here: ``(path of bwrap, "")`` or ``(None, why not)``.

    Runs ``bwrap <the sandbox's options> true`` once per process (a few milliseconds): bubblewrap
    may be installed yet unable to create namespaces (a container that forbids user namespaces).
    """
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return None, f"bubblewrap not found: {INSTALL_HINT}"
    true = shutil.which("true") or "/bin/true"
    try:
        proc = subprocess.run([*_bwrap_prefix(bwrap), "--remount-ro", "/", true], capture_output=True, text=True,
                              timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bubblewrap does not run here ({exc})"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return None, f"bubblewrap does not work here ({last})"
    return bwrap, ""


def _outside_usr(path: str | os.PathLike) -> str | None:
    """The installation prefix of a tool outside /usr (``/opt/gcc-13`` for ``/opt/gcc-13/bin/g++``)."""
    resolved = Path(path).resolve()
    if resolved.is_relative_to("/usr") or any(resolved.is_relative_to(d) for d in _SYSTEM_DIRS):
        return None
    return str(resolved.parent.parent)


class Sandbox:
    """How the emulator runs commands that involve student code: under bubblewrap, or directly.

    Args:
        policy: ``"auto"``, ``"required"`` or ``"off"`` (see the module docstring).

    Attributes:
        policy: as given.
        bwrap: the bubblewrap executable in use, or None.
        why_not: why bubblewrap is not used ("" when it is).
        seccomp: whether the executor installs its seccomp filter (``policy != "off"``).

    Raises:
        ValueError: an unknown policy.
        BackendUnavailable: ``required`` and bubblewrap does not work here (the message says what
            to install).
    """

    def __init__(self, policy: str = "auto") -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown emulator sandbox policy {policy!r}: choose one of {', '.join(POLICIES)}")
        self.policy = policy
        self.seccomp = policy != "off"
        if policy == "off":
            self.bwrap, self.why_not = None, "emulator.sandbox is off"
        else:
            self.bwrap, self.why_not = probe_bubblewrap()
        if policy == "required" and self.bwrap is None:
            raise BackendUnavailable(f"the emulator's sandbox is required (emulator.sandbox: required) but "
                                     f"{self.why_not}; or set emulator.sandbox to auto to run without it")

    @property
    def isolated(self) -> bool:
        """Whether commands run under bubblewrap."""
        return self.bwrap is not None

    def command(self, argv: Sequence[str], *, read_only: Iterable[str | os.PathLike] = (),
                writable: Iterable[str | os.PathLike] = (), cwd: str | os.PathLike | None = None,
                tools: Iterable[str | os.PathLike] = (), tmp_bytes: int = 0,
                limits: Limits | None = None, limiter: str | os.PathLike | None = None) -> Command:
        """Wrap ``argv`` for this sandbox.

        Args:
            argv: the command (its first word found on the sandbox's PATH, or an absolute path).
            read_only: files or folders visible read-only, at the same paths.
            writable: folders visible read-write, at the same paths (the part's scratch folder).
            cwd: the working folder (one of the above).
            tools: executables run by the command; one installed outside /usr brings its
                installation prefix into the sandbox, read-only.
            tmp_bytes: size of a private, empty /tmp (0: none; the root is read-only either way).
            limits, limiter: run ``argv`` under ``limiter limit <limits> -- argv`` (the executor
                binary, which must then be in ``read_only``).

        Returns:
            A :class:`Command`; its ``shown`` is ``argv`` itself.
        """
        inner = list(argv)
        if limits is not None and limiter is not None:
            inner = [str(limiter), "limit", *limits.options(), "--", *inner]
        env = _base_env()
        if self.bwrap is None:
            return Command(inner, env, str(cwd) if cwd is not None else None, list(argv))
        args = _bwrap_prefix(self.bwrap)
        for key, value in env.items():
            args += ["--setenv", key, value]
        if tmp_bytes:
            args += ["--size", str(int(tmp_bytes)), "--tmpfs", "/tmp"]  # before binds that live under /tmp
        extra = [p for p in (_outside_usr(t) for t in tools) if p]
        for path in [*read_only, *extra]:
            p = str(Path(path).resolve())
            args += ["--ro-bind", p, p]
        for path in writable:
            p = str(Path(path).resolve())
            args += ["--bind", p, p]
        if cwd is not None:
            args += ["--chdir", str(Path(cwd).resolve())]
        args += ["--remount-ro", "/dev", "--remount-ro", "/", *inner]
        return Command(args, env, None, list(argv))

    def describe(self, *, seccomp_problem: str | None) -> str:
        """One line for reports: ``bubblewrap + seccomp``, ``rlimits + seccomp only (bubblewrap not
        found: apt install bubblewrap)``...; ``seccomp_problem`` is why the executor's seccomp filter
        is not in force, or None when it is."""
        if self.policy == "off":
            return "off (emulator.sandbox: off): a separate process with resource limits only"
        if self.bwrap is not None:
            return "bubblewrap + seccomp" if seccomp_problem is None else f"bubblewrap only ({seccomp_problem})"
        if seccomp_problem is None:
            return f"rlimits + seccomp only ({self.why_not})"
        return f"rlimits only ({self.why_not}; {seccomp_problem})"
