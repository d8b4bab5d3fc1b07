"""The one exception hierarchy of scangrade.

Every error the grader raises on purpose derives from :class:`ScangradeError`. Its ``str()`` says
what went wrong, where (file, key, line, kernel), and what to do about it, so the CLI can print it
as is — never a traceback.
"""

from __future__ import annotations


class ScangradeError(Exception):
    """Base class of every error scangrade raises on purpose.

    Attributes:
        exit_status: the ``scangrade`` command's exit status when this error ends it (2: a usage or
            configuration error; a subclass may say 1, a failed result).
    """

    exit_status: int = 2
    #: The word the CLI prints before the message (``scangrade: error: ...``).
    label: str = "error"


class ConfigError(ScangradeError):
    """A configuration file is unreadable or invalid.

    Attributes:
        path: the configuration file.
        key: the dotted key at fault (``parts.part1_naive.sizes[3]``), or ``None``.
        line: 1-based line in the file where known, else ``None``.
    """

    def __init__(self, message: str, *, path: str | None = None, key: str | None = None,
                 line: int | None = None) -> None:
        self.path, self.key, self.line, self.detail = path, key, line, message
        where = path or "config"
        if line is not None:
            where += f", line {line}"
        if key:
            where += f", key '{key}'"
        super().__init__(f"{where}: {message}")


class UsageError(ScangradeError):
    """The command line or a path given on it cannot be used (exit status 2)."""


class BackendUnavailable(ScangradeError):
    """The requested backend cannot run on this machine (no GPU, no PyCUDA, no C++ compiler)."""


class ResourceLimit(BackendUnavailable):
    """The machine's resource limits (an address-space limit, ``ulimit -v``) leave too little for the
    grader: the message is one line saying what ran short and what to do (:mod:`grader.host.resources`).
    Not the submission's fault: the part it stops is an ``error``, never a compile error."""


class CompileError(ScangradeError):
    """A submission's source did not compile.

    Attributes:
        command: the compiler command line, as a string.
        log: the compiler's diagnostics (stderr and stdout), with paths as the student knows them, cut
            after :attr:`LOG_LIMIT` characters (a flood of errors stays readable and small).
    """

    #: Characters of compiler diagnostics kept (the first errors; a flood of them is cut).
    LOG_LIMIT = 16_000

    def __init__(self, message: str, *, command: str = "", log: str = "") -> None:
        if len(log) > self.LOG_LIMIT:
            kept = log[:self.LOG_LIMIT].rsplit("\n", 1)[0]
            cut = log.count("\n", len(kept)) + 1
            log = f"{kept}\n... ({cut} more line(s) of compiler output cut: fix the first errors first)"
        self.command, self.log = command, log
        super().__init__(message if not log else f"{message}\n{log}")


#: How a :class:`CompileError` of the emulator starts where the file uses a feature the emulator lacks
#: (a construct its rewrite cannot express, inline PTX it cannot run) and the file as written compiles
#: (``grader.backends.emulator.backend.EmulatorBackend.compile``): the grader's gap, not the student's
#: error; a GPU grades such a part (:func:`is_emulator_gap`).
EMULATOR_GAP = "not supported by the emulator"


def is_emulator_gap(exc: BaseException) -> bool:
    """Whether ``exc`` is the emulator's refusal of a feature it lacks (:data:`EMULATOR_GAP`), not an
    error of the student's code."""
    return isinstance(exc, CompileError) and str(exc).startswith(EMULATOR_GAP)


class LaunchError(ScangradeError):
    """A kernel launch was refused before running: bad grid/block/shared-memory configuration,
    an unknown kernel, or arguments that do not match the kernel's parameters."""


class KernelError(ScangradeError):
    """A kernel failed while running: trap, deadlock, barrier divergence, illegal address.

    Attributes:
        kind: a short machine-readable tag (``"deadlock"``, ``"trap"``, ``"illegal-address"``...).
        findings: a checker's findings (``grader.backends.base.Finding``), the error's own first;
            empty where the backend has none.
        completed: every thread of the kernel ran to its end: what failed it was found on the way
            and did not stop it (a race), so its output can be checked too.
    """

    def __init__(self, message: str, *, kind: str = "kernel-error") -> None:
        self.kind = kind
        self.findings: list = []
        self.completed = False
        super().__init__(message)


class SubmissionError(ScangradeError):
    """A submission is unusable as given: missing part file, unreadable file."""


class Interrupted(ScangradeError):
    """The user stopped a command (Ctrl-C) and it ended cleanly: its ``str()`` says what was
    written and how to go on (exit status 130, as a shell reports SIGINT)."""

    exit_status = 130
    label = "interrupted"


class GradingStopped(Exception):
    """Grading was stopped from outside (the ``stop`` event of :func:`grader.grading.runner.grade` was set,
    e.g. by Ctrl-C in ``scangrade batch``): the workers are ended and nothing graded so far is a
    result. Not a :class:`ScangradeError`: it is never shown to a user as is."""
