"""The checks of a compile beside the emulator's own: ``nvcc -ptx`` on the same source (so that code
that would not build for a GPU is a CompileError), the source compiled as written when the rewrite
refuses it (its own error comes first), and the message for a contract kernel that is missing.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import uuid
from pathlib import Path

from grader.backends.emulator.build import GLUE_FILENAME, RUNTIME_DIR, EmulatorToolchain
from grader.backends.emulator.macros import nvcc_arch_flags
from grader.backends.emulator.rewrite import find_definitions
from grader.core.errors import CompileError
from grader.core.kernels import KernelSpec
from grader.toolchain.compiler_process import (cut_note, limit_note, read_output, run_compile, start_compiler,
                                               strip_workdir)
from grader.toolchain.compilers import check_nvcc_first_stage

__all__ = ["CrossChecks", "missing_message"]


class CrossChecks:
    """The cross-checks of :class:`grader.backends.emulator.backend.EmulatorBackend`'s compile.

    Args:
        toolchain: the backend's toolchain (its sandbox, its timeout, its ``target_arch``).
        nvcc: nvcc's path, or None where there is none.
        nvcc_check: whether each compile is also nvcc's (``nvcc -ptx``); needs ``nvcc``.
    """

    def __init__(self, toolchain: EmulatorToolchain, *, nvcc: str | None, nvcc_check: bool) -> None:
        self.toolchain, self.nvcc, self.nvcc_check = toolchain, nvcc, nvcc_check

    def compile_as_written(self, source: str, *, filename: str, workdir: Path) -> None:
        """The rewrite refused ``source``: compile it as written, with ``nvcc -ptx`` where the nvcc
        check is on, else with the host compiler for errors only
        (:meth:`.build.EmulatorToolchain.syntax_command`),
        in the compile sandbox. Returns when it compiles (the refusal stands) or no compiler could
        decide (it did not run, or timed out).

        Raises:
            CompileError: the compiler's error: ``"<filename> does not compile (<compiler>): <its first
                error line>"`` with the command and the log (the scratch folder's path removed, the
                student's file name for the scratch copy's); or nvcc's first stage made a directive
                (:func:`grader.toolchain.compilers.check_nvcc_first_stage`).
        """
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(filename).stem) or "module"
        path = workdir / f"{stem}.written-{uuid.uuid4().hex[:12]}.cu"
        path.write_text(source, encoding="utf-8")
        tc = self.toolchain
        compilers = [("the C++ compiler", lambda: tc.sandboxed(tc.syntax_command(path, workdir), workdir=workdir,
                                                               read_only=[RUNTIME_DIR], tools=[tc.path]),
                      f"{filename} does not compile (host C++ compiler under the CPU emulator)")]
        if self.nvcc_check:
            compilers.insert(0, ("nvcc", lambda: tc.sandboxed([str(self.nvcc), "-ptx", *self._nvcc_arch(), "-x", "cu",
                                                               str(path), "-o",
                                                               os.devnull], workdir=workdir, tools=[str(self.nvcc)]),
                                 f"{filename} does not compile (nvcc -ptx)"))
        try:
            if self.nvcc_check:
                check_nvcc_first_stage(str(self.nvcc), path, [*self._nvcc_arch(), "-x", "cu"], toolchain=tc,
                                       filename=filename,
                                       named=str(path))
            for tool, command, failed in compilers:
                try:
                    run_compile(command(), filename=filename, workdir=workdir, timeout_s=tc.timeout_s, tool=tool,
                                failed=failed)
                    return
                except CompileError as exc:
                    if not exc.log:
                        continue  # it could not run or timed out: not the student's error
                    log = re.sub(r"[^\s\"']*\.written-[0-9a-f]{12}\.cu", filename, exc.log)
                    cut = cut_note(tool) in str(exc).split("\n", 1)[0]
                    note = f"; {cut_note(tool)}" if cut else limit_note(log, tc.timeout_s)
                    raise CompileError(f"{failed}: {_first_error(log)}{note}", command=exc.command, log=log) from None
        finally:
            path.unlink(missing_ok=True)

    def _nvcc_arch(self) -> tuple[str, ...]:
        """nvcc's option compiling for the toolchain's ``target_arch``, so that its cross-check reads the
        ``#if __CUDA_ARCH__`` branches the emulator compiles (none where this nvcc cannot)."""
        return nvcc_arch_flags(str(self.nvcc), self.toolchain.target_arch) if self.nvcc else ()

    def start_nvcc(self, source: str, path: Path, *, filename: str) -> tuple[subprocess.Popen, list[str]] | None:
        """Start ``nvcc -ptx`` on the same source text, in the compile sandbox (in parallel with the
        host compiler), once its first stage's output passed :func:`grader.toolchain.compilers.check_nvcc_first_stage`.

        Raises:
            CompileError: the first stage's output holds a directive a macro made.
        """
        path.write_text(source, encoding="utf-8")
        check_nvcc_first_stage(str(self.nvcc), path, [*self._nvcc_arch(), "-x", "cu"], toolchain=self.toolchain,
                               filename=filename, named=str(path))
        cmd = self.toolchain.sandboxed([str(self.nvcc), "-ptx", *self._nvcc_arch(), "-x", "cu", str(path), "-o",
                                        os.devnull],
                                       workdir=path.parent, tools=[str(self.nvcc)])
        try:
            return start_compiler(cmd), cmd.shown
        except OSError:
            return None  # nvcc does not run here: the emulator alone decides

    def finish_nvcc(self, started: tuple[subprocess.Popen, list[str]], *, filename: str, workdir: Path) -> None:
        """Wait for the ``nvcc -ptx`` of :meth:`start_nvcc`, reading at most
        :data:`grader.toolchain.compiler_process.OUTPUT_BYTES` of its output (it is stopped there).

        Raises:
            CompileError: nvcc failed or was stopped for its output (not when it timed out: a slow
                nvcc is not the student's fault).
        """
        proc, cmd = started
        try:
            log, cut = read_output(proc, timeout_s=self.toolchain.timeout_s)
        except subprocess.TimeoutExpired:
            return  # a slow nvcc is not the student's fault
        if proc.returncode == 0 and not cut:
            return
        log = re.sub(r"\S*\.nvcc-[0-9a-f]{12}\.cu", filename, strip_workdir(log.strip(), workdir))
        raise CompileError(f"{filename} compiles under the CPU emulator but not with nvcc, so it would not build "
                           "for a GPU (nvcc -ptx)" + (f"; {cut_note('nvcc')}" if cut else ""),
                           command=shlex.join(cmd), log=log)


def _first_error(log: str) -> str:
    """A compiler log's first error line (gcc's ``f.cu:4:5: error: ...``, nvcc's ``f.cu(4): error: ...``),
    else its first line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"(?:^|:\s*)(?:fatal )?error(?: #[\w-]+)?:", line)]
    return (errors or lines or [""])[0]


def missing_message(spec: KernelSpec, source: str) -> str:
    """Why the contract kernel ``spec`` is missing from the compiled ``source``: not defined, or
    defined with other parameter types (naming where)."""
    message = (f"the kernel `{spec.name}` is not defined with the contract's signature "
               f"`{spec.declaration()}`")
    found = [d for d in find_definitions(source, spec.name) if d[0] not in (GLUE_FILENAME,)
             and not d[0].startswith("<scangrade")]
    if found:
        file, line, params = found[0]
        message += (f"; {file}:{line} defines `{spec.name}({params})` with other parameter types, which makes it "
                    "a different C++ function: use exactly the contract's parameter types")
    else:
        message += "; define it with exactly this signature"
    return message
