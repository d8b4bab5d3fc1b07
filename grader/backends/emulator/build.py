"""The emulator's build: its toolchain (:class:`EmulatorToolchain`), the cached runtime and executor,
the sandboxed module compile, the kernel glue.

The runtime (``runtime/``: a folder a level, ``grid/``, ``block/``, ``warp/``, ``memory/``,
``checks/``..., each ``.cpp`` a translation unit) is compiled once per (runtime sources: every file of
``runtime/`` but the executor's, flags, compiler identity), in several compiles at once
(:meth:`EmulatorToolchain.runtime_steps`), into
``<cache_dir>/emulator/runtime-<hash>.o`` and linked into every module; the
executor (``runtime/executor.cpp``, the sandboxed process that loads a module, see
:mod:`.executor`, and the limiter of every sandboxed compile) likewise into ``executor-<hash>-seccomp``
(or ``-plain`` where libseccomp's header is missing). Several processes may build them at once
(:meth:`grader.toolchain.compilers.Toolchain.build_cached`).

The student's translation unit is compiled and linked in the sandbox (:mod:`grader.toolchain.sandbox`):
under bubblewrap when it works, always under resource limits, seeing the part's scratch folder, the
runtime's sources and object and the system's read-only folders only. Its ``__device__`` variables
are read from the link's map (:mod:`.device_globals`).

Public API: :class:`EmulatorToolchain`, :func:`kernel_glue`, :func:`compiler_notes`, :data:`RUNTIME_DIR`.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path
from typing import Sequence

from grader.backends.emulator.device_globals import globals_path, module_globals, write_globals
from grader.backends.emulator.lockdown import audit_object, explain_refusal, lockdown_header, runtime_names
from grader.backends.emulator.macros import DEFAULT_TARGET_ARCH, TARGET_ARCHS, host_macro_flags, nvcc_defines
from grader.core.errors import BackendUnavailable, CompileError
from grader.core.kernels import KernelSpec
from grader.toolchain.compiler_process import run_compile
from grader.toolchain.compilers import BuildSteps, Toolchain
from grader.toolchain.sandbox import Command, Sandbox

__all__ = ["EmulatorToolchain", "kernel_glue", "compiler_notes", "RUNTIME_DIR", "RUNTIME_FLAGS",
           "QUICK_RUNTIME_FLAGS", "RUNTIME_UNITS", "RUNTIME_INCLUDES", "EXPECTED_NAMES", "expected_names",
           "write_expected_names", "PRELUDE", "STUB_INCLUDE_DIR", "GLUE_FILENAME"]

#: The names the runtime object is expected to define for other objects (:func:`.lockdown.runtime_names`
#: of it as g++ builds it), one per line: what a module's compile poisons (:meth:`EmulatorToolchain.lockdown_names`)
#: while the runtime is not built yet, so that on a new machine the two compile at once. A test
#: checks the file against the runtime built here; :func:`write_expected_names` writes it.
EXPECTED_NAMES = Path(__file__).resolve().parent / "runtime_names.txt"
#: The runtime sources: prelude.h, sg_abi.h, sg_host.h, the level folders (grid/, block/, warp/...),
#: runtime.cpp (every unit in one) and the stub CUDA headers.
RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"
#: Force-included before every emulated file.
PRELUDE = RUNTIME_DIR / "prelude.h"
#: Stub ``cuda.h``, ``cuda_runtime.h``, ``device_launch_parameters.h``: first on the include path.
STUB_INCLUDE_DIR = RUNTIME_DIR / "include"
#: The file name diagnostics show for the registration lines appended after the student's text.
GLUE_FILENAME = "<scangrade emulator glue>"
#: The executor's source (a host program, built once and cached like the runtime object).
EXECUTOR_SOURCE = RUNTIME_DIR / "executor.cpp"
#: Force-included after the prelude by :meth:`EmulatorToolchain.syntax_command`: ``__shared__`` as an empty
#: word (the prelude makes any ``__shared__`` left after the rewrite an error).
PLAIN_SHARED = "#undef __shared__\n#define __shared__\n"
#: Flags for the executor.
EXECUTOR_FLAGS = ("-std=c++17", "-O1", "-pthread")
#: Where libseccomp's header is looked for (its presence selects the seccomp build of the executor).
SECCOMP_HEADERS = (Path("/usr/include/seccomp.h"), Path("/usr/local/include/seccomp.h"))

#: Flags for the runtime object (compiled once, optimised).
RUNTIME_FLAGS = ("-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-pthread")
#: Added to :data:`RUNTIME_FLAGS` for the runtime of the GPU path's emulator checks and profile
#: (``EmulatorToolchain(runtime_flags=...)``; :func:`grader.grading.worker.beside.emulator_runtime_flags`):
#: on a new machine every part's first case waits for this build, which -O1 makes shorter at the
#: cost of slower checked runs; the CPU emulator keeps -O2 (figures: docs/throughput.md, "Figures
#: behind the code's constants").
QUICK_RUNTIME_FLAGS = ("-O1",)
#: The runtime's translation units: the ``.cpp`` files of its level folders (``grid/``, ``block/``,
#: ``warp/``...); ``runtime.cpp`` #includes them all (the plain compile, one translation unit).
RUNTIME_UNITS = tuple(sorted(RUNTIME_DIR.glob("*/*.cpp")))
#: The include path of the runtime's compiles: its headers are named from the runtime's folder
#: (``#include "grid/launch.h"``).
RUNTIME_INCLUDES = ("-I", str(RUNTIME_DIR))
#: Flags for the emulated translation unit (the student's file). ``-fsanitize=thread`` makes every
#: load and store call a ``__tsan_*`` hook, which the runtime defines (no sanitizer runtime is
#: linked): volatile accesses become yield points, and with checks on every access is checked.
#: ``-fsanitize=shift-exponent`` calls ``__ubsan_handle_shift_out_of_bounds`` (also the runtime's)
#: before a shift by the type's width or more, which x86 and a GPU compute differently.
#: ``-ftrivial-auto-var-init=pattern``: an uninitialised local reads the same pattern every run, not
#: what an earlier block left on a reused fiber stack.
MODULE_FLAGS = ("-std=c++17", "-O1", "-g", "-fPIC", "-fvisibility=hidden", "-fno-strict-aliasing",
                "-fstack-clash-protection", "-fsanitize=thread", "-fsanitize=shift-exponent",
                "-ftrivial-auto-var-init=pattern",
                "--param", "tsan-distinguish-volatile=1",
                "--param", "tsan-instrument-func-entry-exit=0",
                "-Wno-unknown-pragmas")
#: Warnings :meth:`EmulatorToolchain.compiler_notes` asks for: conversions that can change a value, and
#: results dropped.
NOTE_FLAGS = ("-Wconversion", "-Wfloat-conversion", "-Wunused-value", "-Wunused-result")
_WARNING = re.compile(r"^(?P<file>[^\n]+?):(?P<line>\d+):\d+: warning: (?P<text>.*) \[(?P<flag>-W[\w-]+)\]$", re.M)
_QUOTED = "[\u2018'](?P<{0}>[^\u2019']+)[\u2019'](?: \\{{aka [\u2018'](?P<{0}_aka>[^\u2019']+)[\u2019']\\}})?"
_CONVERSION = re.compile(r"conversion (?:from|to) " + _QUOTED.format("src") + r"(?: to " + _QUOTED.format("dst") + ")?")
_FLOATING = re.compile(r"\b(?:float|double|half|__half)\b")


def compiler_notes(log: str, filename: str) -> list[str]:
    """The warnings of a compiler log (gcc's ``file:line:col: warning: ... [-Wflag]``) on ``filename``'s
    lines that :meth:`EmulatorToolchain.compiler_notes` reports, as its one-line notes."""
    notes: list[str] = []
    for m in _WARNING.finditer(log):
        if m.group("file") != filename:
            continue
        flag, text, note = m.group("flag"), m.group("text"), None
        if flag in ("-Wunused-value", "-Wunused-result"):
            note = "computes a value and drops it"
        elif flag in ("-Wfloat-conversion", "-Wconversion") and (c := _CONVERSION.search(text)) and c.group("dst"):
            src, dst = c.group("src_aka") or c.group("src"), c.group("dst_aka") or c.group("dst")
            if _FLOATING.search(src) and not _FLOATING.search(dst):
                note = f"converts {src} to {dst}"
            elif not _FLOATING.search(dst) or (flag == "-Wfloat-conversion" and _FLOATING.search(src)):
                note = f"narrows {src} to {dst}"  # an integer made floating is not narrowed
        line = f"{filename}:{m.group('line')} {note}" if note else None
        if line and line not in notes:
            notes.append(line)
    return notes


#: Link flags: every symbol must resolve inside the module (plus libc/libstdc++/libm/pthread); no
#: -fsanitize here, so libtsan is not linked.
LINK_FLAGS = ("-shared", "-Wl,-z,defs", "-pthread")


class EmulatorToolchain(Toolchain):
    """The host C++ compiler as the emulator builds with it: the cached runtime object and executor
    (the executor also sets every sandboxed compile's limits: :meth:`limiter`), and the module
    compile.

    Args:
        cxx, cache_dir, timeout_s, sandbox: as :class:`grader.toolchain.compilers.Toolchain` takes them
            (``cache_dir``: the runtime object and the executor are cached in its ``emulator/``).
        runtime_flags: compiler flags after :data:`RUNTIME_FLAGS` for the runtime object (part of
            its cache key): :data:`QUICK_RUNTIME_FLAGS` for the GPU path's checks.
        target_arch: the GPU the student's code is compiled for (the config's ``target_arch``: 90
            is sm_90, an H100): its compiles predefine what nvcc's device pass for it does
            (:mod:`.macros`).

    Raises:
        BackendUnavailable: the compiler is missing or does not run.
        ValueError: ``target_arch`` is not one of :data:`.macros.TARGET_ARCHS`.
    """

    def __init__(self, *, cxx: str | None = None, cache_dir: Path | None = None, timeout_s: float = 60.0,
                 sandbox: Sandbox | None = None, runtime_flags: Sequence[str] = (),
                 target_arch: int = DEFAULT_TARGET_ARCH) -> None:
        if target_arch not in TARGET_ARCHS:
            raise ValueError(f"target_arch {target_arch!r} is not one of {', '.join(map(str, TARGET_ARCHS))}")
        self.target_arch = int(target_arch)
        super().__init__(cxx=cxx, cache_dir=cache_dir, timeout_s=timeout_s, sandbox=sandbox)
        self.runtime_flags = tuple(runtime_flags)
        self._runtime: Path | None = None
        self._runtime_key: str | None = None
        self._runtime_names: tuple[Path, frozenset[str]] | None = None
        self._executor: tuple[Path, str | None] | None = None
        self._jobs: int | None = None

    @property
    def builds(self) -> Path:
        """Where the runtime object and the executor are cached: ``<cache_dir>/emulator``."""
        return self.cache_dir / "emulator"

    def limiter(self) -> Path:
        """The executor program (:meth:`executor_binary`): its ``limit`` mode sets a sandboxed command's
        limits."""
        return self.executor_binary()[0]

    def runtime_key(self, extra_flags: Sequence[str] = ()) -> str:
        """Hash of the runtime sources, the runtime flags and the compiler identity (hex, 20 chars)."""
        if not extra_flags and self._runtime_key:
            return self._runtime_key
        h = hashlib.sha256()
        for f in sorted(p for p in RUNTIME_DIR.rglob("*") if p.is_file() and p != EXECUTOR_SOURCE):
            h.update(f.relative_to(RUNTIME_DIR).as_posix().encode() + b"\0")
            h.update(f.read_bytes() + b"\0")
        h.update("\0".join((*RUNTIME_FLAGS, *self.runtime_flags, *extra_flags)).encode() + b"\0")
        h.update(self.path.encode() + b"\0" + " ".join(self.argv[1:]).encode() + b"\0" + self.version.encode())
        if not extra_flags:
            self._runtime_key = h.hexdigest()[:20]
        return h.hexdigest()[:20]

    def runtime_object(self, extra_flags: Sequence[str] = ()) -> Path:
        """The runtime object file, compiled on first use and cached.

        Built into ``<cache_dir>/emulator/`` (atomically: a temporary file renamed into place), or
        into a private temporary folder when the cache directory cannot be written.

        Raises:
            BackendUnavailable: the runtime does not compile with this compiler (a broken
                toolchain, not the student's fault); the message carries the compiler's output.
        """
        if self._runtime is not None and not extra_flags and self._runtime.exists():
            return self._runtime
        name = f"runtime-{self.runtime_key(extra_flags)}.o"
        flags = (*RUNTIME_FLAGS, *self.runtime_flags, *extra_flags)
        def build() -> Path:
            return self.build_cached(self.builds / name, lambda tmp: self.runtime_steps(flags, tmp),
                                     what="the emulator runtime")
        try:
            target = build()
        except BackendUnavailable:
            if self.runtime_jobs() < 2:
                raise
            self._jobs = 1  # the units do not build or join here after all: one plain compile
            target = build()
        if not extra_flags:
            self._runtime = target
        return target

    def runtime_jobs(self) -> int:
        """How many compiles build the runtime at once (:meth:`runtime_steps`): the usable CPUs, at most
        as many as :data:`RUNTIME_UNITS`; 1 (one plain compile) where ``objcopy`` is not on the PATH."""
        from grader.host.resources import usable_cpus

        if self._jobs is None:
            self._jobs = max(1, min(len(RUNTIME_UNITS), usable_cpus())) if shutil.which("objcopy") else 1
        return self._jobs

    def runtime_steps(self, flags: Sequence[str], output: str) -> list[list[list[str]]]:
        """The steps that build the runtime object ``output`` with ``flags``: each a list of compiler
        commands run at once, the steps in order.

        The runtime's compile (seconds of a core) is what every part's first check waits for on a new
        machine. With several jobs (:meth:`runtime_jobs`) the :data:`RUNTIME_UNITS` are dealt out to
        the jobs, the largest first, each to the job with the fewest bytes so far; each job is one
        compile at once with the others: its first unit, the rest ``-include``d (one translation
        unit a job, so that no job parses the headers twice). A relocatable link (``-r``) joins the
        objects into one, and ``objcopy`` makes local the names the units share (the namespace
        ``sg::rt``: nothing else of the runtime is in ``sg``, so every mangled name that names it
        contains ``2sg2rt``), so that the object names for other
        objects what one plain compile's does (the runtime keeps its state unnamed, as
        :mod:`.lockdown` relies on). GCC compiles them with ``-fno-gnu-unique``: a "unique" symbol
        (GCC's default for an inline variable) cannot be made local. Else one plain ``-c`` of
        ``runtime.cpp``, which #includes every unit."""
        jobs = self.runtime_jobs()
        if jobs < 2:
            return [[[*self.argv, *flags, *RUNTIME_INCLUDES, "-c", str(RUNTIME_DIR / "runtime.cpp"), "-o", output]]]
        unique = [] if "clang" in self.version else ["-fno-gnu-unique"]
        shares: list[list[Path]] = [[] for _ in range(jobs)]
        for unit in sorted(RUNTIME_UNITS, key=lambda u: (-u.stat().st_size, u)):
            min(shares, key=lambda s: sum(u.stat().st_size for u in s)).append(unit)
        objects = [f"{output}.{job}.o" for job in range(jobs)]
        return [[[*self.argv, *flags, *unique, *RUNTIME_INCLUDES, *(a for u in share[1:] for a in ("-include", str(u))),
                  "-c", str(share[0]), "-o", obj] for share, obj in zip(shares, objects)],
                [[*self.argv, "-r", "-nostdlib", *objects, "-o", output]],
                [["objcopy", "--wildcard", "--localize-symbol=*2sg2rt*", output]]]

    def executor_binary(self) -> tuple[Path, str | None]:
        """The executor program, built on first use and cached: ``(path, seccomp problem)``.

        The seccomp build is used where libseccomp's header is installed; the problem is None
        then, else why the executor has no seccomp filter (what to install).

        Raises:
            BackendUnavailable: the executor does not build with this compiler.
        """
        if self._executor is not None and self._executor[0].exists():
            return self._executor
        digest = hashlib.sha256()
        for f in (EXECUTOR_SOURCE, RUNTIME_DIR / "sg_host.h"):
            digest.update(f.read_bytes() + b"\0")
        digest.update("\0".join(EXECUTOR_FLAGS).encode() + b"\0" + self.path.encode() + b"\0"
                      + self.version.encode())
        key = digest.hexdigest()[:20]

        def command(defines: Sequence[str], libs: Sequence[str]) -> BuildSteps:
            return lambda tmp: [[[*self.argv, *EXECUTOR_FLAGS, *defines, "-I", str(RUNTIME_DIR), str(EXECUTOR_SOURCE),
                                  "-o", tmp, *libs]]]
        if any(header.exists() for header in SECCOMP_HEADERS):
            try:
                path = self.build_cached(self.builds / f"executor-{key}-seccomp",
                                         command(["-DSG_SECCOMP"], ["-lseccomp"]),
                                         what="the emulator's executor (with libseccomp)")
                self._executor = (path, None)
                return self._executor
            except BackendUnavailable as exc:
                problem = f"libseccomp could not be linked ({str(exc).strip().splitlines()[-1].strip()})"
        else:
            problem = "libseccomp-dev was not installed when the executor was built"
        path = self.build_cached(self.builds / f"executor-{key}-plain", command([], []),
                                 what="the emulator's executor")
        self._executor = (path, problem)
        return self._executor

    def module_command(self, source: Path, output: Path, lockdown: Path | None = None) -> list[str]:
        """The compiler command line compiling one emulated module to an object (``output`` + ``.o``):
        the prelude force-included, then ``lockdown`` (:func:`.lockdown.lockdown_header`) when given."""
        flags = MODULE_FLAGS
        m = re.findall(r"\b(\d+)\.\d+", self.version_line)
        if "clang" not in self.version_line and m and int(m[-1]) < 12:  # GCC < 12: no -ftrivial-auto-var-init
            flags = tuple(f for f in flags if not f.startswith("-ftrivial-auto-var-init"))
        extra = ["-include", str(lockdown)] if lockdown is not None else []
        return [*self.argv, *flags, *self.predefined(flags), "-include", str(PRELUDE), *extra,
                "-I", str(STUB_INCLUDE_DIR), "-x", "c++", "-c", str(source), "-o", str(output) + ".o"]

    def predefined(self, flags: Sequence[str]) -> list[str]:
        """The options that make a compile with ``flags`` predefine what nvcc's device pass for
        :attr:`target_arch` does (:mod:`.macros`): the host compiler's macros as that pass has them
        (``-U__OPTIMIZE__``...), then nvcc's (``-D__CUDA_ARCH__=900 -D__NVCC__=1``...), read from the
        nvcc on the PATH where there is one."""
        nvcc = shutil.which("nvcc")
        return [*host_macro_flags(tuple(self.argv), tuple(flags)),
                *(f"-D{name}={value}" for name, value in nvcc_defines(self.target_arch, nvcc))]

    def built_runtime(self) -> Path | None:
        """The runtime object where it is built already (this process, or the cache), else None;
        builds nothing."""
        if self._runtime is None or not self._runtime.exists():
            target = self.builds / f"runtime-{self.runtime_key()}.o"
            self._runtime = target if target.exists() else None
        return self._runtime

    def lockdown_names(self) -> frozenset[str]:
        """The names a module's compile poisons (:meth:`lockdown_text`): the runtime object's
        (:meth:`runtime_names`) where it is built; before that the names it is expected to define
        (:data:`EXPECTED_NAMES`), so that the module compiles while the runtime builds.
        :meth:`compile_module` compiles again with the object's own names where it defines one
        that was not expected (another compiler)."""
        if self.built_runtime() is None:
            expected = expected_names()
            if expected:
                return expected
        return self.runtime_names()

    def runtime_names(self) -> frozenset[str]:
        """The names the runtime object defines for other objects (:func:`.lockdown.runtime_names`), read
        once per runtime object."""
        runtime = self.runtime_object()
        if self._runtime_names is None or self._runtime_names[0] != runtime:
            self._runtime_names = (runtime, runtime_names(runtime))
        return self._runtime_names[1]

    def lockdown_text(self) -> str:
        """The header :meth:`compile_module` force-includes after the prelude
        (:func:`.lockdown.lockdown_header` of :meth:`lockdown_names`); part of a compiled module's cache key."""
        return lockdown_header(self.lockdown_names())

    def syntax_command(self, source: Path, workdir: Path) -> list[str]:
        """The compiler command line checking ``source``, CUDA as the student wrote it (not
        rewritten), for errors only (``-fsyntax-only``): the prelude and the stub headers as
        :meth:`module_command` has them, then :data:`PLAIN_SHARED` (written into ``workdir``), which
        makes ``__shared__`` an empty word, so a declaration the rewrite refuses still parses."""
        shim = workdir / "scangrade-plain-shared.h"
        shim.write_text(PLAIN_SHARED, encoding="utf-8")
        flags = ("-std=c++17", "-fsyntax-only", "-Wno-unknown-pragmas")
        return [*self.argv, *flags, *self.predefined(flags), "-include", str(PRELUDE),
                "-include", str(shim), "-I", str(STUB_INCLUDE_DIR), "-x", "c++", str(source)]

    def compiler_notes(self, source: str, *, filename: str, workdir: Path) -> list[str]:
        """What the host compiler warns about in the student's own lines that can make values
        wrong: implicit conversions from a floating type to an integer (``-Wfloat-conversion``),
        integer narrowing (``-Wconversion``; not an integer made floating), and results computed
        and dropped (``-Wunused-value``, ``-Wunused-result``): ``source`` as written (the part
        header, then the student's file), checked for syntax only in the compile sandbox.

        Returns:
            One line each, ``"part5_single_pass.cu:42 converts float to int"``, in source order,
            each line once; ``[]`` when the compiler could not run, timed out or found errors (the
            compile reports those).
        """
        path = workdir / "scangrade-notes.cu"
        path.write_text(source, encoding="utf-8")
        cmd = [*self.syntax_command(path, workdir), *NOTE_FLAGS]
        try:
            log = run_compile(self.sandboxed(cmd, workdir=workdir, read_only=[RUNTIME_DIR], tools=[self.path]),
                              filename=filename, workdir=workdir, timeout_s=self.timeout_s, tool="the C++ compiler",
                              failed=f"{filename} does not compile")
        except CompileError:
            return []
        finally:
            path.unlink(missing_ok=True)
        return compiler_notes(log, filename)

    def link_command(self, output: Path, runtime: Path) -> list[str]:
        """The command line linking the module object and the runtime into a shared object; the
        linker's map goes to ``<output>.map`` (:func:`.device_globals.module_globals` reads it)."""
        return [*self.argv, str(output) + ".o", str(runtime), "-o", str(output), *LINK_FLAGS,
                f"-Wl,-Map,{output}.map"]

    def compile_module(self, *, source: Path, output: Path, filename: str, workdir: Path) -> None:
        """Compile and link ``source`` into the shared object ``output``, in the sandbox, so that it
        cannot switch the runtime's checks off (:mod:`.lockdown`): the compile force-includes the
        lockdown header after the prelude, and the object is audited before the link.

        Raises:
            CompileError: ``"<filename> does not compile"`` with the command and the compiler's
                diagnostics (the workdir path stripped), or a timeout message; ``"not allowed: ..."``
                (with the same log) where the lockdown refused a name, an attribute or inline
                assembly, or the object binds a name of the runtime.
        """
        lockdown = workdir / "scangrade-lockdown.h"

        def compile_with(names: frozenset[str]) -> None:
            lockdown.write_text(lockdown_header(names), encoding="utf-8")
            try:
                self._run(self.sandboxed(self.module_command(source, output, lockdown), workdir=workdir,
                                         read_only=[RUNTIME_DIR], tools=[self.path]),
                          filename=filename, workdir=workdir)
            except CompileError as exc:
                refusal = explain_refusal(exc.log or "")
                if refusal is None:
                    raise
                raise CompileError(refusal, command=exc.command, log=exc.log) from None

        poisoned = self.lockdown_names()  # the expected names where the runtime is still building
        compile_with(poisoned)
        runtime = self.runtime_object()  # built by now, or waited for
        names = self.runtime_names()
        if not names <= poisoned:  # this compiler's runtime defines a name not expected: poison it too
            compile_with(names)
        audit_object(Path(str(output) + ".o"), names, filename=filename)
        self._run(self.sandboxed(self.link_command(output, runtime), workdir=workdir, read_only=[RUNTIME_DIR, runtime],
                                 tools=[self.path]), filename=filename, workdir=workdir)
        link_map = Path(f"{output}.map")
        try:
            ranges = module_globals(link_map.read_text(encoding="utf-8", errors="replace"), Path(f"{output}.o").name)
        except OSError:
            ranges = None  # no map (another linker): the module's globals are made fresh by a new executor
        finally:
            link_map.unlink(missing_ok=True)
        if ranges is not None:
            write_globals(globals_path(output), ranges)

    def _run(self, cmd: Command, *, filename: str, workdir: Path) -> None:
        run_compile(cmd, filename=filename, workdir=workdir, timeout_s=self.timeout_s, tool="the C++ compiler",
                    failed=f"{filename} does not compile (host C++ compiler under the CPU emulator)")


def expected_names(path: Path = EXPECTED_NAMES) -> frozenset[str]:
    """The names in ``path`` (:data:`EXPECTED_NAMES`: one per line, ``#`` comments); empty where the
    file is missing."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return frozenset()
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def write_expected_names(toolchain: "EmulatorToolchain | None" = None, path: Path = EXPECTED_NAMES) -> frozenset[str]:
    """Write ``path`` from the runtime object ``toolchain`` builds (default: the host's g++ or ``$CXX``);
    returns the names. Run after changing which names the runtime defines::

        python -c "from grader.backends.emulator.build import write_expected_names; write_expected_names()"
    """
    names = (toolchain or EmulatorToolchain()).runtime_names()
    path.write_text("# The names the emulator runtime defines for other objects (grader/backends/emulator/build.py,\n"
                    "# EXPECTED_NAMES): written by write_expected_names(), checked by tests/backends/test_integrity_checks.py.\n"
                    + "".join(f"{n}\n" for n in sorted(names)), encoding="utf-8")
    return names


def kernel_glue(kernels: Sequence[KernelSpec]) -> str:
    """Registration lines appended after the student's text, one per contract kernel.

    Each kernel is reached through a weak reference to its C symbol, so a kernel the student did
    not define with the contract's signature (and so with ``extern "C"`` linkage) registers as a
    null pointer instead of failing the link.
    """
    lines = [f'#line 1 "{GLUE_FILENAME}"', '#pragma push_macro("weakref")', "#undef weakref"]  # see lockdown.py
    for n, k in enumerate(kernels):
        params = ", ".join(p.ctype for p in k.params)
        lines.append(f'static void __sg_k{n}({params}) __attribute__((weakref("{k.name}")));')
        lines.append(f'static const int __sg_r{n} = __sg_register("{k.name}", &__sg_k{n});')
    lines.append('#pragma pop_macro("weakref")')
    return "\n".join(lines) + "\n"
