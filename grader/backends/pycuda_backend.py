"""The GPU backend: nvcc compiles each part to a cubin for the current device, PyCUDA loads and runs it.

The compile is the grader's own (:func:`compile_cubin`), not PyCUDA's ``SourceModule``, so that nvcc
runs in the emulator's compile sandbox (:mod:`grader.toolchain.sandbox`): bubblewrap where
it works (no view of the grader's files, its config, other submissions or ``/proc`` of the grader),
resource limits (address space, CPU, file size) and a wall-clock limit, in the part's fresh scratch
folder. It runs the command ``SourceModule`` would (``nvcc --cubin -arch sm_XY``) and the cubin is
loaded with ``pycuda.driver.module_from_buffer``. A cubin is kept in the grader's compile cache
(:class:`grader.toolchain.cache.CompileCache`, keyed by the source, the flags and nvcc's
identity; only the grader writes it), so a part compiled before is not compiled again.

The part header declares the contract's kernels ``extern "C"``, so kernels are found by their plain
names; a kernel defined with another signature has C++ linkage, is not found, and is reported as
not matching the contract.
"""

from __future__ import annotations

import gc
import os
import shlex
import shutil
import time
from pathlib import Path
from typing import Hashable, Sequence, Union

import numpy as np

from grader.backends.base import CLOCK_WARMUP_MS, Backend, ClockWarmup, DeviceArray, Dim3, Module, RunMode
from grader.backends.pycuda_ptx import CHECK_PTX, FILL_PTX, HOLD_CLOCKS_PTX
from grader.core.errors import BackendUnavailable, CompileError, KernelError, LaunchError
from grader.core.kernels import KernelSpec


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


#: CUDA errors of a launch: (text in the driver's message, kind, what it means in plain words).
_FAULTS = (
    ("illegal memory access", "illegal-address", "an illegal memory access (a read or write of memory that is not "
                                                 "allocated: usually an index past the end of an array, or a wild "
                                                 "pointer)"),
    # CUDA_ERROR_INVALID_ADDRESS_SPACE: what a store far past an output buffer gives.
    ("not supported on global/shared address space", "illegal-address",
     "an access outside the memory it may reach (an address far past an array, or a wild pointer)"),
    ("misaligned address", "misaligned", "a misaligned access (an address that is not a multiple of the size read "
                                         "or written)"),
    ("illegal instruction", "illegal-instruction", "an illegal instruction (often undefined behaviour, or __trap())"),
    ("assert", "assert", "a device assert() failed"),
    ("hardware stack error", "stack-overflow", "a thread overflowed its stack (a large local array or deep "
                                               "recursion)"),
    ("launch timed out", "timeout", "the kernel ran too long and the driver stopped it"),
    ("too many resources", "launch-refused", "the launch needs more registers or shared memory than a block may "
                                             "have"),
    ("unspecified launch failure", "launch-failure", "the kernel stopped with an unspecified launch failure (an "
                                                     "access outside memory, or __trap())"),
)


class PyCudaArray(DeviceArray):
    """A typed view of a ``cuda.mem_alloc`` allocation (or of a :class:`_Block` of the worker's pool)."""

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


#: The smallest and the largest buffer (bytes, rounded up to :data:`POOL_GRAIN`) a worker's pool keeps
#: for the next case when it is freed (:func:`pool_device_memory`): the driver suballocates smaller ones
#: without a call to its resource manager, and a larger one (a 2^28 timing's input) is needed once a size.
POOL_MIN_BYTES = 2 * 2**20
POOL_MAX_BYTES = 256 * 2**20
#: The pool's rounding of a buffer's size: the GPU's large-page size, so sizes a few elements apart (n =
#: 2^20 - 1, 2^20, 2^20 + 1, and their guard zones) share the same blocks.
POOL_GRAIN = 2 * 2**20
#: The share of the GPU's memory one context's scratch (:class:`_Scratch`: the L2 flush buffer and the
#: pool's free blocks) may hold while unused: sixteen workers a GPU then keep at most a quarter of it.
SCRATCH_SHARE = 64


class _Block:
    """A pooled allocation of ``nbytes`` (a multiple of :data:`POOL_GRAIN`): when the last array viewing
    it goes, it goes back to ``scratch`` (:meth:`_Scratch.give`) instead of to the driver."""

    __slots__ = ("allocation", "nbytes", "scratch")

    def __init__(self, allocation, nbytes: int, scratch: "_Scratch") -> None:
        self.allocation, self.nbytes, self.scratch = allocation, nbytes, scratch

    def __int__(self) -> int:
        return int(self.allocation)

    def free(self) -> None:
        """Give the memory back to the driver now (not to the pool)."""
        self.scratch = None
        self.allocation.free()

    def __del__(self) -> None:
        if self.scratch is not None:
            self.scratch.give(self.allocation, self.nbytes)


class _Scratch:
    """What a CUDA context of the grader's reuses from one case, one timing and one part to the next:
    the L2 flush buffer of the timed runs, the 8-byte cell the device checks read back, the grader's
    own PTX modules (loaded once, not once a part), and the pool's free blocks (:func:`pool_device_memory`).
    Each allocation and free of a large buffer, and each module loaded, is a call to the driver's
    resource manager, whose lock is one for every GPU of the machine: a timed window that makes one
    may wait there for the other GPUs' workers. The scratch lives and goes with its context
    (:func:`keep_context`): a context dropped after a hidden case drops it too.

    Memory it holds while unused stays under the GPU's memory / :data:`SCRATCH_SHARE`; an allocation
    the driver refuses for lack of memory frees every unused block and is tried once more
    (:meth:`alloc`)."""

    def __init__(self, cuda, total_bytes: int) -> None:
        self._cuda = cuda
        self.budget = total_bytes // SCRATCH_SHARE
        self.free_blocks: dict[int, list] = {}  # size -> allocations not in use
        self.held = 0  # bytes of free_blocks
        self.flush = None  # (allocation, bytes): kept where it fits the budget
        self.cell = None  # 8 bytes on the device
        self.fill = None  # poison_shared's module and kernel
        self.hold = None  # _hold_clocks's module, kernel and grid
        self.checks = None  # CHECK_PTX's module and kernels
        self.closed = False
        self.leaves_state = False  # a student's module here uses local memory or the device heap (start_grading)

    def alloc(self, nbytes: int):
        """A new allocation of ``nbytes`` from the driver; where the GPU is out of memory, once more after
        freeing the unused blocks and the flush buffer.

        Raises:
            pycuda.driver.MemoryError: the GPU cannot hold it even then.
        """
        try:
            return self._cuda.mem_alloc(nbytes)
        except self._cuda.MemoryError:
            self.drop_unused()
            return self._cuda.mem_alloc(nbytes)

    def take(self, nbytes: int):
        """A free block of exactly ``nbytes``, or None."""
        blocks = self.free_blocks.get(nbytes)
        if not blocks:
            return None
        self.held -= nbytes
        return blocks.pop()

    def give(self, allocation, nbytes: int) -> None:
        """Keep ``allocation`` (``nbytes``, no longer viewed) for the next :meth:`take`, where the budget
        allows; else it goes to the driver as it did before (its own finalizer)."""
        flush = self.flush[1] if self.flush is not None else 0
        if self.closed or self.held + nbytes + flush > self.budget:
            return
        self.free_blocks.setdefault(nbytes, []).append(allocation)
        self.held += nbytes

    def flush_buffer(self, nbytes: int):
        """``(allocation, kept)``: a buffer of ``nbytes`` for the L2 flush, the context's own where it
        fits the budget (``kept``), else a new one the caller frees."""
        if self.flush is not None and self.flush[1] == nbytes:
            return self.flush[0], True
        if self.flush is not None:
            self.flush[0].free()
            self.flush = None
        if nbytes + self.held > self.budget:
            return self.alloc(nbytes), False
        self.flush = (self.alloc(nbytes), nbytes)
        return self.flush[0], True

    def drop_unused(self) -> None:
        """Free the blocks not in use and the flush buffer now."""
        for blocks in self.free_blocks.values():
            for allocation in blocks:
                allocation.free()
        self.free_blocks.clear()
        self.held = 0
        if self.flush is not None:
            self.flush[0].free()
            self.flush = None

    def clear(self) -> None:
        """Before another submission's kernels run in this context (:func:`start_grading`): zero the free
        blocks, the flush buffer and the cell (so no buffer the grader hands out, and no memory the
        next kernels could reach, holds what the last submission's cases left there), and drop the
        grader's own modules (loaded again when used: nothing the last kernels wrote in them stays)."""
        cuda = self._cuda
        kept = [(a, size) for size, blocks in self.free_blocks.items() for a in blocks]
        kept += [self.flush] if self.flush is not None else []
        kept += [(self.cell, 8)] if self.cell is not None else []
        for allocation, nbytes in kept:
            cuda.memset_d8(allocation, 0, nbytes)
        cuda.Context.synchronize()
        self.fill = self.checks = self.hold = None

    def close(self) -> None:
        """Before the context goes: free what is unused; blocks still in use go to the driver when freed."""
        self.drop_unused()
        if self.cell is not None:
            self.cell.free()
            self.cell = None
        self.fill = self.checks = self.hold = None
        self.closed = True


class PyCudaModule(Module):
    """A loaded cubin and the contract kernels found in it.

    Attributes:
        cubin: the module's bytes (compute-sanitizer's replay loads them again, :mod:`grader.grading.sanitizer`).
    """

    def __init__(self, module, functions: dict, specs: dict[str, KernelSpec], cubin: bytes = b"") -> None:
        self.module, self.functions, self.specs, self.cubin = module, functions, specs, cubin
        self.stateful = device_globals_bytes(cubin) != 0  # it has __device__ variables (fresh_globals)
        self.dirty = False  # launched since it was loaded or reloaded

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
        from grader.backends.emulator.build import EmulatorToolchain
        from grader.toolchain.sandbox import Sandbox
        self._toolchain = EmulatorToolchain(sandbox=Sandbox(sandbox))
        try:
            import pycuda.driver as cuda
        except ImportError as exc:
            raise BackendUnavailable(f"PyCUDA is not installed ({exc}); pip install -e '.[gpu]'") from None
        self._cuda = cuda
        try:
            _init_driver(cuda)
            self._device = cuda.Device(device)
            kept = _KEPT.pop(device, None)
            if kept is not None:
                self._context, self._scratch = kept
            else:
                self._context = self._device.make_context()
                self._scratch = _Scratch(cuda, self._device.total_memory())
            self._ordinal = device
        except cuda.Error as exc:
            raise BackendUnavailable(f"cannot create a CUDA context on device {device}: {exc}") from None
        from grader.host.gpu_lock import gpu_lock_for
        self.gpu_lock = gpu_lock_for(self._device.pci_bus_id())

    #: The GPU's readers-writer lock (:mod:`grader.host.gpu_lock`): timed windows take it exclusive.
    gpu_lock = None

    def gpu_lock_seconds(self) -> dict[str, float]:
        """See :meth:`Backend.gpu_lock_seconds` (:attr:`grader.host.gpu_lock.GpuLock.seconds`)."""
        return self.gpu_lock.seconds if self.gpu_lock is not None else {}

    def gpu_shared(self):
        """A context in which untimed GPU work (a case, a sanitizer run) shares the GPU with other
        workers' but never overlaps a timed window (:mod:`grader.host.gpu_lock`)."""
        import contextlib
        return self.gpu_lock.shared() if self.gpu_lock is not None else contextlib.nullcontext()

    def gpu_alone(self):
        """See :meth:`Backend.gpu_alone` (:meth:`grader.host.gpu_lock.GpuLock.exclusive`)."""
        import contextlib
        return self.gpu_lock.exclusive() if self.gpu_lock is not None else contextlib.nullcontext()

    def compile(self, *, source: str, filename: str, kernels: Sequence[KernelSpec], workdir: Path) -> Module:
        major, minor = self._device.compute_capability()
        cubin = compile_cubin(source, filename=filename, workdir=workdir, arch=f"sm_{major}{minor}",
                              toolchain=self._toolchain)
        return self.load_cubin(cubin, filename=filename, kernels=kernels)

    def load_cubin(self, cubin: bytes, *, filename: str, kernels: Sequence[KernelSpec]) -> "PyCudaModule":
        """Load a cubin built by :func:`compile_cubin` and find the contract's ``kernels`` in it.

        Raises:
            CompileError: the module does not load on this GPU, or a kernel is missing.
        """
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
        if not self._scratch.leaves_state:
            self._scratch.leaves_state = _leaves_state(self._cuda, cubin, functions.values())
        return PyCudaModule(module, functions, {k.name: k for k in kernels}, cubin)

    def fresh_globals(self, module: Module) -> None:
        """See :meth:`Backend.fresh_globals`: a module with ``__device__`` variables that ran since it
        was loaded is loaded again from its cubin (``cuModuleLoadData`` initialises every variable of
        ``.nv.global`` and ``.nv.global.init``, as the first load did), its kernels found again, and the
        old module unloaded once the GPU is idle. A reload rather than writing each variable back
        (``get_global``): it needs no symbol names (a ``static __device__`` one has a mangled local
        name) and misses none. A module without such variables is left as it is.

        Raises:
            KernelError: the module no longer loads (the context is broken).
        """
        assert isinstance(module, PyCudaModule)
        if not (module.stateful and module.dirty and module.cubin):
            return
        cuda = self._cuda
        try:
            cuda.Context.synchronize()  # no launch of the old module still running
            fresh = cuda.module_from_buffer(module.cubin)
            functions = {name: fresh.get_function(name) for name in module.functions}
        except cuda.Error as exc:
            raise self._fault("(reloading the module)", exc) from None
        module.module, module.functions, module.dirty = fresh, functions, False

    def alloc(self, count: int, dtype: np.dtype) -> DeviceArray:
        """See :meth:`Backend.alloc`; in a worker that pools (:func:`pool_device_memory`), a buffer of
        :data:`POOL_MIN_BYTES` to :data:`POOL_MAX_BYTES` may be one an earlier case of this context freed."""
        dtype = np.dtype(dtype)
        nbytes = max(1, count * dtype.itemsize)
        if not _POOL or not POOL_MIN_BYTES <= nbytes <= POOL_MAX_BYTES:
            allocation = self._scratch.alloc(nbytes)
            return PyCudaArray(allocation, int(allocation), count, dtype)
        size = -(-nbytes // POOL_GRAIN) * POOL_GRAIN
        allocation = self._scratch.take(size) or self._scratch.alloc(size)
        return PyCudaArray(_Block(allocation, size, self._scratch), int(allocation), count, dtype)

    def to_device(self, host: np.ndarray, dest: DeviceArray) -> None:
        host = np.ascontiguousarray(host, dtype=dest.dtype)
        if host.size != dest.count:
            raise ValueError(f"copy of {host.size} elements into a buffer of {dest.count}")
        self._copy(self._cuda.memcpy_htod, dest.address, host)

    def to_host(self, src: DeviceArray) -> np.ndarray:
        out = np.empty(src.count, dtype=src.dtype)
        self._copy(self._cuda.memcpy_dtoh, out, src.address)
        return out

    def _copy(self, copy, *args) -> None:
        """A synchronous copy or memset. A kernel's fault can surface here rather than at its launch
        (a store far past a buffer is reported by the next copy).

        Raises:
            KernelError: the CUDA error, as :meth:`_fault` words it (:attr:`broken` set where the
                context may be lost).
        """
        try:
            copy(*args)
        except self._cuda.Error as exc:
            raise self._fault("the kernel", exc) from None

    _deferred = False  # while timing: launches are queued, not synchronised one by one

    def memset32(self, dest: DeviceArray, value: int) -> None:
        count = dest.nbytes // 4
        if dest.nbytes % 4:
            raise ValueError(f"memset32 of a buffer of {dest.nbytes} bytes (not a multiple of 4)")
        if self._deferred:
            self._cuda.memset_d32_async(dest.address, value & 0xFFFFFFFF, count)
        else:
            self._copy(self._cuda.memset_d32, dest.address, value & 0xFFFFFFFF, count)

    def time_interleaved_ms(self, jobs, *, warmup: int, runs: int, flush_bytes: int,
                            after=None) -> list[list[float]]:
        """See :meth:`Backend.time_interleaved_ms`; the GPU is this process's alone meanwhile
        (:mod:`grader.host.gpu_lock`, exclusive)."""
        import contextlib
        with self.gpu_lock.exclusive() if self.gpu_lock is not None else contextlib.nullcontext():
            return self._time_interleaved_ms(jobs, warmup=warmup, runs=runs, flush_bytes=flush_bytes, after=after)

    def _time_interleaved_ms(self, jobs, *, warmup: int, runs: int, flush_bytes: int,
                             after=None) -> list[list[float]]:
        cuda = self._cuda
        flush, kept = self._scratch.flush_buffer(flush_bytes) if flush_bytes else (None, True)
        start, end = cuda.Event(), cuda.Event()
        times: list[list[float]] = [[] for _ in jobs]
        self._deferred = True
        collecting = gc.isenabled()
        gc.disable()  # a collection between two launches of a multi-launch part would be timed
        what = jobs[0][0]
        clocks, ended, last_ms = ClockWarmup(), 0.0, 0.0  # when the last run ended (perf_counter s), and its time
        try:
            for i in range(warmup + runs):
                order = range(len(jobs)) if i % 2 == 0 else range(len(jobs) - 1, -1, -1)
                for j in order:
                    what, work, before = jobs[j]
                    if before is not None:
                        before()
                    if clocks.due((time.perf_counter() - ended) * 1e3, last_ms):
                        self._hold_clocks(CLOCK_WARMUP_MS)
                    if flush is not None:  # empty the L2; queued so the GPU is busy when start is recorded
                        cuda.memset_d32_async(flush, i, flush_bytes // 4)
                    start.record()
                    work()
                    end.record()
                    end.synchronize()
                    ended, last_ms = time.perf_counter(), end.time_since(start)
                    if i >= warmup:
                        times[j].append(last_ms)
                    if after is not None:
                        after(j, i)
        except cuda.Error as exc:
            raise KernelError(f"{what} failed on the GPU while timed: {exc}", kind="launch-failure") from None
        finally:
            self._deferred = False
            if collecting:
                gc.enable()
            if not kept:
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
            if self.shared_fill is not None and not self._deferred:
                self.poison_shared(self.shared_fill)  # before every launch of a correctness case
            module.dirty = True
            module.functions[kernel](*values, block=(block.x, block.y, block.z), grid=(grid.x, grid.y, grid.z),
                                     shared=shared_bytes)
            if not self._deferred:
                cuda.Context.synchronize()
        except cuda.Error as exc:
            raise self._fault(kernel, exc) from None

    def _fault(self, kernel: str, exc: Exception) -> KernelError:
        """A CUDA error of a launch as a KernelError of the kinds in :data:`grader.core.kinds.KINDS`, in
        plain words; a fault that loses the context sets :attr:`broken`."""
        text = str(exc)
        low = text.lower()
        for needle, kind, words in _FAULTS:
            if needle in low:
                break
        else:
            kind, words = "cuda-error", f"the CUDA driver reported an error ({text})"
        from grader.core.kinds import FAULT_KINDS
        if kind in FAULT_KINDS or kind in ("timeout", "cuda-error"):
            self.broken = True  # an error the driver does not explain may have lost the context too
        return KernelError(f"{kernel} stopped on the GPU: {words}", kind=kind)

    #: When set (a 32-bit pattern: :attr:`RunMode.shared_fill`, given by :meth:`set_run_mode`), every
    #: launch outside timing first fills every multiprocessor's shared memory with it
    #: (:meth:`poison_shared`), as the emulator fills each block's at its start. A fault that loses
    #: the context sets :attr:`Backend.broken` (:meth:`_fault`).
    shared_fill: int | None = None

    def set_run_mode(self, mode: RunMode) -> None:
        """See :meth:`Backend.set_run_mode`: the fill of shared memory alone (a GPU has no checks of
        its own and finds no deadlock: a deadlocked kernel hangs until the case's deadline)."""
        self.shared_fill = mode.shared_fill

    def free(self, *arrays: DeviceArray) -> None:
        """Free device buffers now (the compute-sanitizer replay's spacers); views of them become invalid."""
        for a in arrays:
            allocation = getattr(a, "_allocation", None)
            if allocation is not None:
                allocation.free()

    def synchronize(self) -> None:
        """Wait for the device to finish.

        Raises:
            KernelError: a kernel failed (see :meth:`_fault`).
        """
        try:
            self._cuda.Context.synchronize()
        except self._cuda.Error as exc:
            raise self._fault("the kernel", exc) from None

    def poison_shared(self, pattern: int) -> None:
        """Fill the shared memory of every multiprocessor with the 32-bit ``pattern``: a kernel of as
        many blocks as the GPU holds at once, each with the most dynamic shared memory a block may
        have, writes it. Shared memory is not cleared between the kernels of one context (a kernel
        launched next reads the pattern where it reads shared memory it did not write), so a kernel whose output depends on unwritten shared memory reads the pattern, as
        on the emulator, instead of whatever the last kernel left (often zeros, which hide a
        missing identity padding)."""
        cuda = self._cuda
        if self._scratch.fill is None:
            module = cuda.module_from_buffer(FILL_PTX.encode())
            fill = module.get_function("scangrade_fill_shared")
            dev = self._device
            most = dev.get_attribute(cuda.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            fill.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, most)
            blocks = dev.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT) * max(
                1, dev.get_attribute(cuda.device_attribute.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR) // most)
            self._scratch.fill = (module, fill, most, blocks)
        _, fill, most, blocks = self._scratch.fill
        fill(np.uint32(pattern & 0xFFFFFFFF), np.uint32(most // 4), block=(1024, 1, 1), grid=(blocks, 1, 1),
             shared=most)
        cuda.Context.synchronize()

    def _hold_clocks(self, ms: float) -> None:
        """Queue :data:`~grader.backends.pycuda_ptx.HOLD_CLOCKS_PTX` on every multiprocessor (as many
        blocks of 256 threads as the GPU has multiprocessors, four times) for ``ms`` milliseconds;
        returns at once (the clock warm-up of :meth:`time_interleaved_ms`)."""
        cuda = self._cuda
        if self._scratch.hold is None:
            module = cuda.module_from_buffer(HOLD_CLOCKS_PTX.encode())
            sms = self._device.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
            self._scratch.hold = (module, module.get_function("scangrade_hold_clocks"), 4 * sms)
        _, hold, blocks = self._scratch.hold
        hold(np.uint64(int(ms * 1e6)), block=(256, 1, 1), grid=(blocks, 1, 1))

    def _check_kernels(self):
        """``(scan_check, digest, blocks)``: :data:`CHECK_PTX`'s kernels, loaded once, and a grid
        of 8 blocks per multiprocessor."""
        if self._scratch.checks is None:
            cuda = self._cuda
            module = cuda.module_from_buffer(CHECK_PTX.encode())
            blocks = 8 * self._device.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
            self._scratch.checks = (module, module.get_function("scangrade_scan_check"),
                                    module.get_function("scangrade_digest"), blocks)
        return self._scratch.checks[1:]

    def _word(self, kernel, initial: int, *args) -> int:
        """Run one of :data:`CHECK_PTX`'s kernels, whose last parameter is a 64-bit word set to
        ``initial`` before, and return that word after.

        Raises:
            KernelError: the device failed (an earlier kernel's fault can surface here).
        """
        cuda = self._cuda
        *_, blocks = self._check_kernels()
        word = np.array([initial & (2 ** 64 - 1)], dtype=np.uint64)
        try:
            if self._scratch.cell is None:
                self._scratch.cell = cuda.mem_alloc(8)
            cell = self._scratch.cell
            cuda.memcpy_htod(cell, word)
            kernel(*args, cell, block=(256, 1, 1), grid=(blocks, 1, 1))
            cuda.memcpy_dtoh(word, cell)
        except cuda.Error as exc:
            raise self._fault("the grader's check", exc) from None
        return int(word[0])

    def scan_check(self, out: DeviceArray, source: DeviceArray, *, inclusive: bool) -> int:
        """See :meth:`Backend.scan_check`; on the device, reading back one 64-bit index."""
        if out.count != source.count or out.dtype.itemsize != 4 or source.dtype.itemsize != 4:
            raise ValueError(f"scan_check of {out.count} elements against {source.count}")
        scan_check, _, _ = self._check_kernels()
        first = self._word(scan_check, 2 ** 64 - 1, np.uintp(out.address), np.uintp(source.address),
                           np.uint64(out.count), np.uint32(bool(inclusive)), np.uint32(out.dtype.kind == "f"))
        return -1 if first == 2 ** 64 - 1 else first

    def digest(self, words: DeviceArray, salt: int) -> int:
        """See :meth:`Backend.digest`; on the device, reading back one 64-bit word."""
        if words.dtype.itemsize != 4:
            raise ValueError(f"digest of {words.dtype} elements (4-byte elements only)")
        _, digest, _ = self._check_kernels()
        return self._word(digest, 0, np.uintp(words.address), np.uint64(words.count),
                          np.uint64(salt & (2 ** 64 - 1)))

    def describe(self) -> dict[str, str]:
        import pycuda
        cuda = self._cuda
        major, minor = self._device.compute_capability()
        return {"backend": self.name, "device": self._device.name(), "compute_capability": f"{major}.{minor}",
                **self._peak_attributes(),
                "driver_api": f"{cuda.get_driver_version() // 1000}.{cuda.get_driver_version() % 1000 // 10}",
                "cuda": ".".join(map(str, cuda.get_version())), "pycuda": pycuda.VERSION_TEXT,
                "sandbox": "nvcc: " + ("bubblewrap + rlimits" if self._toolchain.sandbox.isolated
                                       else f"rlimits only ({self._toolchain.sandbox.why_not})")}

    def _peak_attributes(self) -> dict[str, str]:
        """The attributes the GPU's peaks come from (:data:`grader.grading.analysis.PEAK_KEYS`), as strings:
        SMs, SM clock and memory clock (MHz; the driver gives kHz) and the memory bus width (bits);
        empty where the driver does not report one (CUDA 13 keeps them as driver attributes)."""
        attr = self._cuda.device_attribute
        try:
            return {"sm_count": str(self._device.get_attribute(attr.MULTIPROCESSOR_COUNT)),
                    "clock_mhz": f"{self._device.get_attribute(attr.CLOCK_RATE) / 1e3:g}",
                    "memory_clock_mhz": f"{self._device.get_attribute(attr.MEMORY_CLOCK_RATE) / 1e3:g}",
                    "memory_bus_bits": str(self._device.get_attribute(attr.GLOBAL_MEMORY_BUS_WIDTH))}
        except (AttributeError, self._cuda.Error):
            return {}

    def close(self) -> None:
        if self.gpu_lock is not None:
            self.gpu_lock.close()
        ctx, self._context = getattr(self, "_context", None), None
        if ctx is not None and _KEEP and not self.broken and not self.ran_hidden:
            _KEPT[self._ordinal] = (ctx, self._scratch)  # current still: the next job's backend takes it
        elif ctx is not None:
            if not self.broken:
                self._scratch.close()
            ctx.pop()
            ctx.detach()


#: Whether a closed backend keeps its context for the next one of this process (:func:`keep_context`).
_KEEP = False
#: The contexts kept, by device ordinal: current on the thread that made them.
_KEPT: dict = {}


def keep_context() -> None:
    """From now on, a closed backend leaves its CUDA context current, and the next backend made in
    this process on that device takes it, instead of making its own: a worker that grades a
    submission's parts one after the other (:func:`grader.grading.worker.main.serve`) makes one
    context, not one per part (the driver makes contexts one at a time: docs/throughput.md). A
    context a fault lost (:attr:`PyCudaBackend.broken`) is not kept, nor one in which a hidden case
    ran (:attr:`~grader.backends.base.Backend.ran_hidden`: a new context keeps the next part from
    memory that held the private inputs, as a new process's did)."""
    global _KEEP
    _KEEP = True


#: Whether buffers of this process's backends come from their context's pool (:func:`pool_device_memory`).
_POOL = False


def pool_device_memory() -> None:
    """From now on, a buffer of :data:`POOL_MIN_BYTES` to :data:`POOL_MAX_BYTES` that a case frees is kept
    by its context (:class:`_Scratch`) for the next case of the same size, not given back to the driver:
    a worker's cases allocate the same sizes over and over, and each large allocation and free takes
    the driver's resource-manager lock, one for every GPU of the machine. Only a grading worker pools;
    compute-sanitizer's replay (:mod:`grader.grading.sanitizer_child`) lays its buffers out between
    gaps it frees, which a reused block would not keep. A block is reused only in its own context, so
    a context dropped after a hidden case (:func:`keep_context`) takes its pool with it."""
    global _POOL
    _POOL = True


def device_globals_bytes(cubin: bytes) -> int:
    """Bytes of a cubin's ``__device__`` variables: the sizes of its ELF sections named ``.nv.global``
    or ``.nv.global.init`` (zero-initialised and initialised device data; ``__constant__`` data is in
    ``.nv.constant*``, which kernels cannot write), read from the ELF64 section headers (the System V
    gABI, "Sections": ``e_shoff``, ``e_shentsize``, ``e_shnum``, ``e_shstrndx``; ``sh_name``,
    ``sh_size``). -1 where the bytes are not such an ELF (then the module counts as having some)."""
    import struct
    try:
        if cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:  # ELFCLASS64, little-endian
            return -1
        shoff, = struct.unpack_from("<Q", cubin, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
        headers = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
        names_at = headers[shstrndx][4]  # sh_offset of the section-name string table
        total = 0
        for name_off, _type, _flags, _addr, _offset, size in headers:
            end = cubin.index(b"\0", names_at + name_off)
            if cubin[names_at + name_off:end] in (b".nv.global", b".nv.global.init"):
                total += size
        return total
    except (struct.error, IndexError, ValueError):
        return -1


def _leaves_state(cuda, cubin: bytes, functions) -> bool:
    """Whether a student's module leaves memory behind that the grader cannot clear: a kernel with local
    memory (its stack, spilled registers, arrays), which the context keeps from launch to launch, or
    a call to the device heap (``malloc``), whose blocks the next kernels' ``malloc`` may return."""
    if b"\0malloc\0" in cubin:
        return True
    return any(f.get_attribute(cuda.function_attribute.LOCAL_SIZE_BYTES) for f in functions)


def start_grading() -> None:
    """Before a worker that kept its context (:func:`keep_context`) runs another submission's jobs (a
    batch's next submission, :func:`grader.grading.worker.main.serve`): each kept context is cleared
    (:meth:`_Scratch.clear`), or, where a module of the last submission used local memory or the
    device heap, which no call clears, dropped (the next backend makes a new one, as a new process
    would). Memory the grader freed to the driver may hold the last submission's cases' data
    when the driver hands it out again; every buffer the grader hands a kernel is poisoned or
    written first (:class:`grader.assignment.plans.Run`), so a kernel reaches the rest only by an
    out-of-bounds access (docs/security.md)."""
    for ordinal, (ctx, scratch) in list(_KEPT.items()):
        if not scratch.leaves_state:
            try:
                scratch.clear()
                continue
            except Exception:  # noqa: BLE001 - any driver error: the context is not to be trusted, dropped
                pass
        del _KEPT[ordinal]
        scratch.close()
        ctx.pop()
        ctx.detach()


def release_kept_contexts() -> None:
    """Pop and detach every context kept (:func:`keep_context`): before the process exits, as PyCUDA
    aborts a process that ends with a context still current."""
    while _KEPT:
        _, (ctx, scratch) = _KEPT.popitem()
        scratch.close()
        ctx.pop()
        ctx.detach()


def kept_context_works() -> bool:
    """Whether every context kept (:func:`keep_context`) still runs work: its stream synchronizes
    without an error (a fault the grader did not see would show here). True where none is kept."""
    for ctx, _ in list(_KEPT.values()):
        try:
            ctx.synchronize()
        except Exception:  # noqa: BLE001 - any driver error: the context is not to be trusted
            return False
    return True


def create(*, workers: int = 0, checks: bool = False, sandbox: str = "auto", device_memory: int = 0,
           target_arch: int | None = None) -> PyCudaBackend:
    """The GPU backend as :meth:`grader.backends.BackendKind.create` makes it (``workers``,
    ``checks``, ``device_memory`` and ``target_arch`` are the emulator's: the GPU's checks are
    compute-sanitizer's, :mod:`grader.grading.sanitizer`, and it compiles for the GPU it runs on)."""
    return PyCudaBackend(sandbox=sandbox)


#: The hardware work queues a context of the grader's gets (``CUDA_DEVICE_MAX_CONNECTIONS``, where
#: the environment does not set it). The grader's launches and copies go to the default stream only,
#: so one queue loses nothing, and the driver makes and tears down a context with one queue faster
#: than with its default eight; every part's worker makes its own context, one at a time in the
#: driver (figures: docs/throughput.md, ``CUDA_DEVICE_MAX_CONNECTIONS=1``).
CONNECTIONS = "1"


def _init_driver(cuda) -> None:
    """``cuInit``, with :data:`CONNECTIONS` set first (the driver reads it when it starts)."""
    os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", CONNECTIONS)
    cuda.init()


def device_arch(device: int = 0) -> str:
    """The nvcc target of CUDA device ``device`` (``"sm_90"`` on an H100), read without a context
    (``cuInit`` and the device's attributes only).

    Raises:
        BackendUnavailable: PyCUDA is not installed, or the driver cannot see the device.
    """
    try:
        import pycuda.driver as cuda
    except ImportError as exc:
        raise BackendUnavailable(f"PyCUDA is not installed ({exc}); pip install -e '.[gpu]'") from None
    try:
        _init_driver(cuda)
        major, minor = cuda.Device(device).compute_capability()
    except cuda.Error as exc:
        raise BackendUnavailable(f"cannot read CUDA device {device}: {exc}") from None
    return f"sm_{major}{minor}"


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
