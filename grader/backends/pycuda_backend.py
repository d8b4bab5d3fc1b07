"""The GPU backend: nvcc compiles each part to a cubin for the current device, PyCUDA loads and runs it.

The compile is the grader's own (:func:`compile_cubin`), not PyCUDA's ``SourceModule``, so that nvcc
runs in the emulator's compile sandbox (:mod:`grader.backends.emulator.sandbox`): bubblewrap where
it works (no view of the grader's files, its config, other submissions or ``/proc`` of the grader),
resource limits (address space, CPU, file size) and a wall-clock limit, in the part's fresh scratch
folder. It runs the command ``SourceModule`` would (``nvcc --cubin -arch sm_XY``) and the cubin is
loaded with ``pycuda.driver.module_from_buffer``; nothing is cached between parts.

The part header declares the contract's kernels ``extern "C"``, so kernels are found by their plain
names; a kernel defined with another signature has C++ linkage, is not found, and is reported as
not matching the contract.
"""

from __future__ import annotations

import gc
import shlex
import shutil
from pathlib import Path
from typing import Sequence, Union

import numpy as np

from grader.backends.base import Backend, DeviceArray, Dim3, Module
from grader.errors import BackendUnavailable, CompileError, KernelError, LaunchError
from grader.kernels import KernelSpec


def compile_cubin(source: str, *, filename: str, workdir: Path, arch: str, toolchain, nvcc: str | None = None,
                  options: Sequence[str] = ("-lineinfo",)) -> bytes:
    """Compile ``source`` to a cubin with ``nvcc --cubin -arch <arch>``, in the compile sandbox.

    The source is written to ``workdir / filename`` (``workdir``: a fresh folder holding nothing
    private; the only folder the compile may write) and compiled there as
    ``toolchain.sandboxed(...)`` runs it: under bubblewrap where the sandbox has it, with the compile
    limits (address space, CPU seconds, file size), and killed with its process group after
    ``toolchain.timeout_s`` seconds. Needs no GPU.

    Args:
        source: the whole translation unit (part header and the student's text).
        filename: the student's file name (``part1_naive.cu``), used for the file and the messages.
        workdir: the scratch folder.
        arch: the target, e.g. ``"sm_90"``.
        toolchain: a :class:`grader.backends.emulator.build.Toolchain` (its sandbox, limits and
            timeout; its executor binary sets the limits).
        nvcc: the nvcc executable (default: ``nvcc`` on the PATH).
        options: further nvcc options.

    Returns:
        The cubin's bytes.

    Raises:
        CompileError: nvcc is missing, fails (with its log, the scratch folder's path removed), hits a
            limit, or does not finish in time.
    """
    from grader.backends.emulator.build import run_compile

    nvcc = nvcc or shutil.which("nvcc")
    if not nvcc:
        raise CompileError(f"{filename} cannot be compiled: nvcc is not on the PATH (install the CUDA toolkit)")
    workdir = Path(workdir)
    (workdir / filename).write_text(source, encoding="utf-8")
    output = Path(filename).stem + ".cubin"
    argv = [nvcc, "--cubin", "-arch", arch, *options, filename, "-o", output]
    cmd = toolchain.sandboxed(argv, workdir=workdir, tools=[nvcc])
    failed = f"{filename} does not compile with nvcc"
    log = run_compile(cmd, filename=filename, workdir=workdir, timeout_s=toolchain.timeout_s, tool="nvcc",
                      failed=failed)
    cubin = workdir / output
    if not cubin.is_file():
        raise CompileError(failed + " (it wrote no cubin)", command=shlex.join(cmd.shown), log=log)
    return cubin.read_bytes()


class PyCudaArray(DeviceArray):
    """A typed view of a ``cuda.mem_alloc`` allocation."""

    def __init__(self, allocation, base: int, count: int, dtype: np.dtype) -> None:
        self._allocation, self._base = allocation, base  # keeps the allocation alive
        self.count, self.dtype = count, np.dtype(dtype)

    @property
    def address(self) -> int:
        return self._base

    def view(self, offset: int, count: int) -> "PyCudaArray":
        if offset < 0 or count < 0 or offset + count > self.count:
            raise ValueError(f"view [{offset}, {offset + count}) outside a buffer of {self.count} elements")
        return PyCudaArray(self._allocation, self._base + offset * self.dtype.itemsize, count, self.dtype)


class PyCudaModule(Module):
    """A compiled ``SourceModule`` and the contract kernels found in it."""

    def __init__(self, module, functions: dict, specs: dict[str, KernelSpec]) -> None:
        self.module, self.functions, self.specs = module, functions, specs

    def has_kernel(self, name: str) -> bool:
        return name in self.functions


class PyCudaBackend(Backend):
    """Runs kernels on CUDA device 0 through PyCUDA; owns one context for its lifetime.

    Args:
        device: the CUDA device's ordinal.
        sandbox: the compile sandbox's policy (config key ``emulator.sandbox``: ``auto``,
            ``required``, ``off``), shared with the emulator.

    Raises:
        BackendUnavailable: PyCUDA is missing, no context can be created, or the compile sandbox
            cannot be set up (``required`` without bubblewrap, no host C++ compiler).
    """

    name = "pycuda"

    def __init__(self, device: int = 0, *, sandbox: str = "auto") -> None:
        from grader.backends.emulator.build import Toolchain
        from grader.backends.emulator.sandbox import Sandbox
        self._toolchain = Toolchain(sandbox=Sandbox(sandbox))
        try:
            import pycuda.driver as cuda
        except ImportError as exc:
            raise BackendUnavailable(f"PyCUDA is not installed ({exc}); pip install -e '.[gpu]'") from None
        self._cuda = cuda
        try:
            cuda.init()
            self._device = cuda.Device(device)
            self._context = self._device.make_context()
        except cuda.Error as exc:
            raise BackendUnavailable(f"cannot create a CUDA context on device {device}: {exc}") from None

    def compile(self, *, source: str, filename: str, kernels: Sequence[KernelSpec], workdir: Path) -> Module:
        major, minor = self._device.compute_capability()
        cubin = compile_cubin(source, filename=filename, workdir=workdir, arch=f"sm_{major}{minor}",
                              toolchain=self._toolchain)
        try:
            module = self._cuda.module_from_buffer(cubin)
        except self._cuda.Error as exc:
            raise CompileError(f"{filename}: the compiled module does not load on this GPU ({exc})") from None
        functions = {}
        for spec in kernels:
            try:
                functions[spec.name] = module.get_function(spec.name)
            except self._cuda.Error:
                raise CompileError(f"{filename}: the kernel `{spec.name}` is not defined with the contract's "
                                   f"signature `{spec.declaration()}`") from None
        return PyCudaModule(module, functions, {k.name: k for k in kernels})

    def alloc(self, count: int, dtype: np.dtype) -> DeviceArray:
        dtype = np.dtype(dtype)
        allocation = self._cuda.mem_alloc(max(1, count * dtype.itemsize))
        return PyCudaArray(allocation, int(allocation), count, dtype)

    def to_device(self, host: np.ndarray, dest: DeviceArray) -> None:
        host = np.ascontiguousarray(host, dtype=dest.dtype)
        if host.size != dest.count:
            raise ValueError(f"copy of {host.size} elements into a buffer of {dest.count}")
        self._cuda.memcpy_htod(dest.address, host)

    def to_host(self, src: DeviceArray) -> np.ndarray:
        out = np.empty(src.count, dtype=src.dtype)
        self._cuda.memcpy_dtoh(out, src.address)
        return out

    supports_timing = True
    _deferred = False  # while timing: launches are queued, not synchronised one by one

    def memset32(self, dest: DeviceArray, value: int) -> None:
        count = dest.nbytes // 4
        if dest.nbytes % 4:
            raise ValueError(f"memset32 of a buffer of {dest.nbytes} bytes (not a multiple of 4)")
        if self._deferred:
            self._cuda.memset_d32_async(dest.address, value & 0xFFFFFFFF, count)
        else:
            self._cuda.memset_d32(dest.address, value & 0xFFFFFFFF, count)

    def time_interleaved_ms(self, jobs, *, warmup: int, runs: int, flush_bytes: int) -> list[list[float]]:
        cuda = self._cuda
        flush = cuda.mem_alloc(flush_bytes) if flush_bytes else None
        start, end = cuda.Event(), cuda.Event()
        times: list[list[float]] = [[] for _ in jobs]
        self._deferred = True
        collecting = gc.isenabled()
        gc.disable()  # a collection between two launches of a multi-launch part would be timed
        what = jobs[0][0]
        try:
            for i in range(warmup + runs):
                order = range(len(jobs)) if i % 2 == 0 else range(len(jobs) - 1, -1, -1)
                for j in order:
                    what, work, before = jobs[j]
                    if before is not None:
                        before()
                    if flush is not None:  # empty the L2; queued so the GPU is busy when start is recorded
                        cuda.memset_d32_async(flush, i, flush_bytes // 4)
                    start.record()
                    work()
                    end.record()
                    end.synchronize()
                    if i >= warmup:
                        times[j].append(end.time_since(start))
        except cuda.Error as exc:
            raise KernelError(f"{what} failed on the GPU while timed: {exc}", kind="launch-failure") from None
        finally:
            self._deferred = False
            if collecting:
                gc.enable()
            if flush is not None:
                flush.free()
        return times

    def time_copy_ms(self, src: DeviceArray, dst: DeviceArray, *, warmup: int, runs: int,
                     flush_bytes: int) -> list[float]:
        nbytes = min(src.nbytes, dst.nbytes)
        copy = lambda: self._cuda.memcpy_dtod_async(dst.address, src.address, nbytes)  # noqa: E731
        return self.time_interleaved_ms([("a device-to-device copy", copy, None)], warmup=warmup, runs=runs,
                                        flush_bytes=flush_bytes)[0]

    def _launch(self, module: Module, kernel: str, *, grid: Dim3, block: Dim3, shared_bytes: int,
                args: Sequence[Union[DeviceArray, int]]) -> None:
        assert isinstance(module, PyCudaModule)
        spec = module.specs.get(kernel)
        if spec is None or kernel not in module.functions:
            raise LaunchError(f"no kernel named {kernel} in this module")
        if len(args) != len(spec.params):
            raise LaunchError(f"launch of {kernel}: {len(args)} arguments for {len(spec.params)} parameters")
        values = []
        for p, a in zip(spec.params, args):
            if p.kind == "ptr":
                if not isinstance(a, DeviceArray):
                    raise LaunchError(f"launch of {kernel}: parameter {p.name} needs a device buffer (got {a!r})")
                values.append(np.uintp(a.address))
            else:
                values.append(np.int32(a))
        cuda = self._cuda
        try:
            module.functions[kernel](*values, block=(block.x, block.y, block.z), grid=(grid.x, grid.y, grid.z),
                                     shared=shared_bytes)
            if not self._deferred:
                cuda.Context.synchronize()
        except cuda.LaunchError as exc:
            raise KernelError(f"{kernel} failed on the GPU: {exc}", kind="launch-failure") from None
        except cuda.Error as exc:
            text = str(exc)
            kind = "illegal-address" if "illegal address" in text else (
                "assert" if "assert" in text else "cuda-error")
            raise KernelError(f"{kernel} failed on the GPU: {text}", kind=kind) from None

    def describe(self) -> dict[str, str]:
        import pycuda
        cuda = self._cuda
        major, minor = self._device.compute_capability()
        return {"backend": self.name, "device": self._device.name(), "compute_capability": f"{major}.{minor}",
                "driver_api": f"{cuda.get_driver_version() // 1000}.{cuda.get_driver_version() % 1000 // 10}",
                "cuda": ".".join(map(str, cuda.get_version())), "pycuda": pycuda.VERSION_TEXT,
                "sandbox": "nvcc: " + ("bubblewrap + rlimits" if self._toolchain.sandbox.isolated
                                       else f"rlimits only ({self._toolchain.sandbox.why_not})")}

    def close(self) -> None:
        ctx, self._context = getattr(self, "_context", None), None
        if ctx is not None:
            ctx.pop()
            ctx.detach()
