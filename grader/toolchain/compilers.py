"""The host C++ compiler and nvcc as the grader runs them on a submission.

A :class:`Toolchain` runs each compiler command in the compile sandbox (:mod:`.sandbox`: bubblewrap
where it works, always the compile limits, set by a limiter program: ``PROGRAM limit <limits> --
COMMAND``), reads its output through :mod:`.compiler_process`, keeps what it compiled in the compile
cache (:mod:`.cache`), and builds the host programs a backend needs once per cache folder
(:meth:`Toolchain.build_cached`: atomically, several processes at once). :func:`check_nvcc_first_stage`
judges what nvcc's second stage will read before it runs.

Public API: :class:`Toolchain`, :func:`compiler_identity`, :func:`tool_identity`,
:func:`check_nvcc_first_stage`.
"""

from __future__ import annotations

import abc
import fcntl
import functools
import glob
import os
import shlex
import shutil
import subprocess
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

from grader.core.errors import BackendUnavailable, CompileError
from grader.host.folders import default_cache_dir
from grader.host.parent_death import tied_to_this_process
from grader.toolchain.cache import CompileCache
from grader.toolchain.compiler_process import run_compile
from grader.toolchain.sandbox import COMPILE_TMP, Command, Sandbox, compile_limits

__all__ = ["Toolchain", "compiler_identity", "tool_identity", "check_nvcc_first_stage", "BuildSteps"]

#: How :meth:`Toolchain.build_cached` builds a file: given the temporary path to build, the steps,
#: each a list of compiler commands run at once, the steps in order.
BuildSteps = Callable[[str], list[list[list[str]]]]


@functools.lru_cache(maxsize=None)
def compiler_identity(cxx: str) -> tuple[str, str]:
    """(resolved path, ``cxx --version`` output) of the C++ compiler command ``cxx``.

    Raises:
        BackendUnavailable: the compiler is missing or does not run.
    """
    argv = shlex.split(cxx)
    exe = shutil.which(argv[0]) if argv else None
    if not exe:
        raise BackendUnavailable(f"the emulator needs a C++ compiler: `{cxx}` was not found "
                                 "(install g++ or clang++, or set $CXX)")
    try:
        proc = subprocess.run([exe, *argv[1:], "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BackendUnavailable(f"the emulator's C++ compiler `{cxx}` does not run: {exc}") from None
    if proc.returncode != 0:
        raise BackendUnavailable(f"the emulator's C++ compiler `{cxx}` does not run: {proc.stderr.strip()}")
    return str(Path(exe).resolve()), proc.stdout.strip()


@functools.lru_cache(maxsize=None)
def tool_identity(exe: str) -> str:
    """A compiler's resolved path and ``--version`` output, for :class:`.cache.CompileCache` keys ("" where it
    does not run: no key then matches a later working one)."""
    try:
        proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return f"{Path(exe).resolve()}\n{proc.stdout.strip()}"


class Toolchain(abc.ABC):
    """The host C++ compiler, the sandbox its commands (and nvcc's) run in, and the caches of what
    they build.

    A subclass names the program that sets a sandboxed command's limits (:meth:`limiter`): the
    emulator's (:class:`grader.backends.emulator.build.EmulatorToolchain`) builds its executor for it,
    and the GPU backend compiles with that one too.

    Args:
        cxx: compiler command (may include arguments, e.g. ``"ccache g++"``); default ``$CXX`` or
            ``"c++"``.
        cache_dir: where built programs and compiled modules are cached; default
            :func:`grader.host.folders.default_cache_dir`.
        timeout_s: wall-clock limit of one compiler run, in seconds.
        sandbox: how a command that reads student code runs (default ``Sandbox("auto")``).

    Raises:
        BackendUnavailable: the compiler is missing or does not run.
    """

    def __init__(self, *, cxx: str | None = None, cache_dir: Path | None = None, timeout_s: float = 60.0,
                 sandbox: Sandbox | None = None) -> None:
        self.cxx = cxx or os.environ.get("CXX") or "c++"
        self.argv = shlex.split(self.cxx)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.timeout_s = timeout_s
        self.sandbox = sandbox if sandbox is not None else Sandbox("auto")
        self.path, self.version = compiler_identity(self.cxx)

    @property
    def version_line(self) -> str:
        """First line of ``cxx --version`` (e.g. ``c++ (Debian 12.2.0-14) 12.2.0``)."""
        return self.version.splitlines()[0] if self.version else self.cxx

    @property
    def compiled(self) -> CompileCache:
        """The cache of compiled modules (:class:`.cache.CompileCache`, ``<cache_dir>/compiled``)."""
        return CompileCache(self.cache_dir / "compiled")

    @abc.abstractmethod
    def limiter(self) -> Path:
        """The program that runs a sandboxed command under its limits (``PROGRAM limit <limits> --
        COMMAND``), built where it is not yet.

        Raises:
            BackendUnavailable: it does not build with this compiler.
        """

    def sandboxed(self, cmd: Sequence[str], *, workdir: Path, read_only: Sequence[Path] = (),
                  tools: Sequence[str | Path] = ()) -> Command:
        """``cmd`` as it runs in the compile sandbox: the scratch folder ``workdir`` read-write (and the
        working folder), ``read_only`` visible, a private /tmp, and :func:`.sandbox.compile_limits`
        set by :meth:`limiter`."""
        limiter = self.limiter()
        return self.sandbox.command(cmd, read_only=[*read_only, limiter], writable=[workdir], cwd=workdir,
                                    tools=tools, tmp_bytes=COMPILE_TMP, limits=compile_limits(self.timeout_s),
                                    limiter=limiter)

    def build_cached(self, target: Path, command: BuildSteps, *, what: str) -> Path:
        """``target`` (a file of the cache folder), built by the steps ``command(temporary path)`` (files
        they leave beside the temporary path are removed) unless present. One process builds it at a
        time (``.<name>.lock`` beside it): the others wait for its file instead of building it again (a
        runtime takes seconds of a core). Where the cache folder cannot be written it is built into a
        private temporary folder of this process, whose path is returned.

        Raises:
            BackendUnavailable: a step failed or timed out (``what``, this compiler and its output
                named): a broken toolchain, not a student's fault.
        """
        if target.exists():
            return target
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            lock = os.open(target.parent / f".{target.name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return self._build(target, command, what=what)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if target.exists():
                return target
            return self._build(target, command, what=what)
        finally:
            os.close(lock)

    def _build(self, target: Path, command: BuildSteps, *, what: str) -> Path:
        name = target.name
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{name}-", suffix=".tmp", dir=target.parent)
        except OSError:
            # An unwritable cache (read-only home): build into a private folder for this process.
            private = Path(tempfile.mkdtemp(prefix="scangrade-emulator-"))
            target = private / name
            fd, tmp = tempfile.mkstemp(prefix=f".{name}-", suffix=".tmp", dir=private)
        os.close(fd)
        try:
            for step in command(tmp):
                with ThreadPoolExecutor(len(step)) as pool:
                    # each compiler dies with its pool thread (which waits for it), so with the grader
                    procs = list(pool.map(lambda argv: subprocess.run(argv, capture_output=True, text=True,
                                                                      timeout=max(self.timeout_s, 120.0),
                                                                      preexec_fn=tied_to_this_process()), step))
                for proc in procs:
                    if proc.returncode != 0:
                        raise BackendUnavailable(f"{what} does not compile with `{self.cxx}` ({self.version_line}):"
                                                 f"\n{proc.stderr}")
            os.replace(tmp, target)
        except subprocess.TimeoutExpired:
            raise BackendUnavailable(f"compiling {what} with `{self.cxx}` timed out") from None
        finally:
            for leftover in glob.glob(glob.escape(tmp) + "*"):
                os.unlink(leftover)
        return target


def check_nvcc_first_stage(nvcc: str, source: Path, options: Sequence[str], *, toolchain: Toolchain,
                           filename: str, named: str | None = None) -> None:
    """Judge what nvcc's second stage will read: run its first stage on ``source`` (``nvcc -E`` with the
    compile's ``options``: the same host preprocessor command with the same macros, as
    ``nvcc --dryrun`` shows), in the compile sandbox and within the compile timeout, and check its output
    with :func:`grader.source.directives.check_preprocessed` before the real compile runs.

    cicc preprocesses the first stage's output again, so a line a macro made into a directive
    (``#define H #`` then ``H include "FILE"``) would run there. A first stage that fails or times out is
    left to the compile, which stops at the same point (nvcc starts its second stage only after a first
    stage that succeeded).

    Args:
        nvcc: the nvcc executable.
        source: the file nvcc compiles (in the scratch folder, which the sandbox can write).
        options: the compile's options before the file (``["--cubin", "-arch", "sm_90", "-lineinfo"]``,
            ``["-x", "cu"]``).
        toolchain: the :class:`Toolchain` whose sandbox and timeout the compile uses.
        filename: the student's file, for the message.
        named: how the compile's command line names ``source`` (default its name, in its folder).

    Raises:
        CompileError: ``"<filename>:<line>: `...` is not allowed: ..."`` (see ``check_preprocessed``).
    """
    from grader.source.directives import check_preprocessed

    output = source.with_name(f"{source.name}.first-stage-{uuid.uuid4().hex[:12]}.ii")
    cmd = toolchain.sandboxed([nvcc, "-E", *options, named or source.name, "-o", output.name],
                              workdir=source.parent, tools=[nvcc])
    try:
        run_compile(cmd, filename=filename, workdir=source.parent, timeout_s=toolchain.timeout_s, tool="nvcc",
                    failed=f"{filename} does not preprocess with nvcc")
        text = output.read_text(encoding="utf-8", errors="replace")
    except (CompileError, OSError):
        return  # the compile meets the same failure and reports it
    finally:
        output.unlink(missing_ok=True)
    check_preprocessed(text, filename=filename, compiled_name=source.name)
