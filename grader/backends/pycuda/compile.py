"""The GPU backend's compile: nvcc turns a part into a cubin for the current device, in the compile
sandbox, kept in the compile cache (:func:`compile_cubin`); a worker's compiles started ahead, beside
its CUDA context's start (:func:`compile_ahead`).

The compile is the grader's own, not PyCUDA's ``SourceModule``, so that nvcc runs in the emulator's
compile sandbox (:mod:`grader.toolchain.sandbox`): bubblewrap where it works (no view of the
grader's files, its config, other submissions or ``/proc`` of the grader), resource limits (address
space, CPU, file size) and a wall-clock limit, in the part's fresh scratch folder. It runs the
command ``SourceModule`` would (``nvcc --cubin -arch sm_XY``), and the cubin is loaded with
``pycuda.driver.module_from_buffer`` (:func:`grader.backends.pycuda.module.load_module`). A cubin is
kept in the grader's compile cache (:class:`grader.toolchain.cache.CompileCache`, keyed by the
source, the flags and nvcc's identity; only the grader writes it), so a part compiled before is not
compiled again.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Hashable, Sequence

from grader.backends.pycuda.device import device_arch
from grader.core.errors import CompileError

__all__ = ["compile_ahead", "compile_cubin"]


def compile_cubin(source: str, *, filename: str, workdir: Path, arch: str, toolchain, nvcc: str | None = None,
                  options: Sequence[str] = ("-lineinfo",)) -> bytes:
    """Compile ``source`` to a cubin with ``nvcc --cubin -arch <arch>``, in the compile sandbox.

    The source is written to ``workdir / filename`` (``workdir``: a fresh folder holding nothing
    private; the only folder the compile may write) and compiled there as
    ``toolchain.sandboxed(...)`` runs it, after its first stage's output passed
    :func:`grader.toolchain.compilers.check_nvcc_first_stage` (nvcc preprocesses that output
    again, so a directive a macro made would run there): under bubblewrap where the sandbox has it,
    with the compile limits (address space, CPU seconds, file size), and killed with its process group after
    ``toolchain.timeout_s`` seconds; or, where the same source was compiled with the same flags and
    nvcc before, the cubin kept then (``toolchain.compiled``). Needs no GPU.

    Args:
        source: the whole translation unit (part header and the student's text).
        filename: the student's file name (``part1_naive.cu``), used for the file and the messages.
        workdir: the scratch folder.
        arch: the target, e.g. ``"sm_90"``.
        toolchain: a :class:`grader.toolchain.compilers.Toolchain` (its sandbox, limits and
            timeout; its limiter sets the limits: the emulator's executor binary).
        nvcc: the nvcc executable (default: ``nvcc`` on the PATH).
        options: further nvcc options.

    Returns:
        The cubin's bytes.

    Raises:
        CompileError: nvcc is missing, fails (with its log, the scratch folder's path removed), hits a
            limit, or does not finish in time; or its first stage's output holds a directive a macro
            made (``"<filename>:<line>: `# include ...` is not allowed: ..."``).
    """
    from grader.toolchain.compiler_process import run_compile
    from grader.toolchain.compilers import check_nvcc_first_stage, tool_identity

    nvcc = nvcc or shutil.which("nvcc")
    if not nvcc:
        raise CompileError(f"{filename} cannot be compiled: nvcc is not on the PATH (install the CUDA toolkit)")
    cache = toolchain.compiled
    key = cache.key("cubin, first stage checked", source, filename, arch, *options, tool_identity(nvcc))
    cached = cache.get(key, ".cubin")
    if cached is not None:
        try:
            return cached.read_bytes()
        except OSError:
            pass
    workdir = Path(workdir)
    (workdir / filename).write_text(source, encoding="utf-8")
    check_nvcc_first_stage(nvcc, workdir / filename, ["--cubin", "-arch", arch, *options], toolchain=toolchain,
                           filename=filename)
    output = Path(filename).stem + ".cubin"
    argv = [nvcc, "--cubin", "-arch", arch, *options, filename, "-o", output]
    cmd = toolchain.sandboxed(argv, workdir=workdir, tools=[nvcc])
    failed = f"{filename} does not compile with nvcc"
    log = run_compile(cmd, filename=filename, workdir=workdir, timeout_s=toolchain.timeout_s, tool="nvcc",
                      failed=failed)
    cubin = workdir / output
    if not cubin.is_file():
        raise CompileError(failed + " (it wrote no cubin)", command=shlex.join(cmd.shown), log=log)
    cache.put(key, ".cubin", cubin)
    return cubin.read_bytes()



def compile_ahead(builds: Sequence[tuple[Hashable, str, str]], *, sandbox: str = "auto", threads: int = 2) -> dict:
    """Start compiling cubins now, in background threads, beside the CUDA context's start: each of
    ``builds`` (``(tag, whole translation unit, file name)``) by :func:`compile_cubin` for device 0,
    in a scratch folder of its own, in the order given (``threads`` at a time). A worker's compile
    then waits for its cubin instead of running nvcc after its context is up: a cold compile and a
    context's start take about as long, so each part saves one of them.

    Returns:
        ``{tag: Future}``; a future's result is the cubin's bytes, or it raises what
        :func:`compile_cubin` raises (CompileError), or BackendUnavailable where the device could
        not be read (the caller then compiles as usual, and reports the backend's own error).
        A compile still running when the process exits is abandoned (daemon threads).
    """
    import functools
    import tempfile
    import threading

    from grader.backends.emulator.build import EmulatorToolchain
    from grader.toolchain.sandbox import Sandbox
    from grader.host.parent_death import daemon_futures

    made: list = []  # [arch, toolchain], made once by the first build
    lock = threading.Lock()

    def one(source: str, filename: str) -> bytes:
        with lock:  # the first to get here reads the device and sets the sandbox up; the rest reuse them
            if not made:
                made.extend((device_arch(), EmulatorToolchain(sandbox=Sandbox(sandbox))))
        arch, toolchain = made
        with tempfile.TemporaryDirectory(prefix="scangrade-cubin-") as work:
            return compile_cubin(source, filename=filename, workdir=Path(work), arch=arch, toolchain=toolchain)

    # daemon threads: a worker that ends early (its backend could not start) does not wait for nvcc
    return daemon_futures({tag: functools.partial(one, source, filename) for tag, source, filename in builds}, threads)
