"""The GPU backend (:class:`PyCudaBackend`): a part's cubin run on CUDA device 0 through PyCUDA, in a
context it owns (or takes from the last backend of its worker: :mod:`grader.backends.pycuda.contexts`).

The part header declares the contract's kernels ``extern "C"``, so kernels are found by their plain
names; a kernel defined with another signature has C++ linkage, is not found, and is reported as
not matching the contract.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence, Union

import numpy as np

from grader.backends.base import Backend, DeviceArray, Dim3, Module, RunMode
from grader.backends.pycuda.contexts import drop, offer, pools, take_kept
from grader.backends.pycuda.compile import compile_cubin
from grader.backends.pycuda.device import device_facts, init_driver
from grader.backends.pycuda.faults import kernel_fault
from grader.backends.pycuda.memory import POOL_GRAIN, POOL_MAX_BYTES, POOL_MIN_BYTES, PoolBlock, PyCudaArray, Scratch
from grader.backends.pycuda.module import PyCudaModule, leaves_state, load_module
from grader.backends.pycuda.ptx import check_kernels, fill_kernel
from grader.backends.pycuda.timing import time_interleaved_ms
from grader.core.errors import BackendUnavailable, KernelError, LaunchError
from grader.core.kernels import KernelSpec

__all__ = ["PyCudaBackend"]


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
            init_driver(cuda)
            self._device = cuda.Device(device)
            kept = take_kept(device)
            if kept is not None:
                self._context, self._scratch = kept
            else:
                self._context = self._device.make_context()
                self._scratch = Scratch(cuda, self._device.total_memory())
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

    def load_cubin(self, cubin: bytes, *, filename: str, kernels: Sequence[KernelSpec]) -> PyCudaModule:
        """Load a cubin built by :func:`grader.backends.pycuda.compile.compile_cubin` and find the
        contract's ``kernels`` in it (:func:`grader.backends.pycuda.module.load_module`); the context's
        scratch notes a module that leaves memory no call clears
        (:func:`~grader.backends.pycuda.module.leaves_state`).

        Raises:
            CompileError: the module does not load on this GPU, or a kernel is missing.
        """
        module = load_module(self._cuda, cubin, filename=filename, kernels=kernels)
        if not self._scratch.leaves_state:
            self._scratch.leaves_state = leaves_state(self._cuda, module)
        return module

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
        """See :meth:`Backend.alloc`; in a worker that pools
        (:func:`grader.backends.pycuda.contexts.pool_device_memory`), a buffer of
        :data:`~grader.backends.pycuda.memory.POOL_MIN_BYTES` to
        :data:`~grader.backends.pycuda.memory.POOL_MAX_BYTES` may be one an earlier case of this context
        freed."""
        dtype = np.dtype(dtype)
        nbytes = max(1, count * dtype.itemsize)
        if not pools() or not POOL_MIN_BYTES <= nbytes <= POOL_MAX_BYTES:
            allocation = self._scratch.alloc(nbytes)
            return PyCudaArray(allocation, int(allocation), count, dtype)
        size = -(-nbytes // POOL_GRAIN) * POOL_GRAIN
        allocation = self._scratch.take(size) or self._scratch.alloc(size)
        return PyCudaArray(PoolBlock(allocation, size, self._scratch), int(allocation), count, dtype)

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
        """See :meth:`Backend.time_interleaved_ms` (:func:`grader.backends.pycuda.timing.time_interleaved_ms`);
        the GPU is this process's alone meanwhile (:mod:`grader.host.gpu_lock`, exclusive), and launches
        and memsets are queued, not synchronised one by one."""
        with self.gpu_alone():
            self._deferred = True
            try:
                return time_interleaved_ms(self._cuda, self._scratch, self._device, jobs, warmup=warmup, runs=runs,
                                           flush_bytes=flush_bytes, after=after)
            finally:
                self._deferred = False

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
        """A CUDA error of a launch as a KernelError in plain words
        (:func:`grader.backends.pycuda.faults.kernel_fault`); a fault that loses the context sets
        :attr:`broken`."""
        error, lost = kernel_fault(kernel, exc)
        if lost:
            self.broken = True
        return error

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
        launched next reads the pattern where it reads shared memory it did not write), so a kernel
        whose output depends on unwritten shared memory reads the pattern, as on the emulator, instead
        of whatever the last kernel left (often zeros, which hide a missing identity padding). The
        kernel is :func:`grader.backends.pycuda.ptx.fill_kernel`'s."""
        fill, most, blocks = fill_kernel(self._cuda, self._device, self._scratch)
        fill(np.uint32(pattern & 0xFFFFFFFF), np.uint32(most // 4), block=(1024, 1, 1), grid=(blocks, 1, 1),
             shared=most)
        self._cuda.Context.synchronize()

    def _word(self, kernel, initial: int, *args) -> int:
        """Run one of :data:`grader.backends.pycuda.ptx.CHECK_PTX`'s kernels, whose last parameter is a
        64-bit word set to ``initial`` before, and return that word after.

        Raises:
            KernelError: the device failed (an earlier kernel's fault can surface here).
        """
        cuda = self._cuda
        *_, blocks = check_kernels(cuda, self._device, self._scratch)
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
        scan_check, _, _ = check_kernels(self._cuda, self._device, self._scratch)
        first = self._word(scan_check, 2 ** 64 - 1, np.uintp(out.address), np.uintp(source.address),
                           np.uint64(out.count), np.uint32(bool(inclusive)), np.uint32(out.dtype.kind == "f"))
        return -1 if first == 2 ** 64 - 1 else first

    def digest(self, words: DeviceArray, salt: int) -> int:
        """See :meth:`Backend.digest`; on the device, reading back one 64-bit word."""
        if words.dtype.itemsize != 4:
            raise ValueError(f"digest of {words.dtype} elements (4-byte elements only)")
        _, digest, _ = check_kernels(self._cuda, self._device, self._scratch)
        return self._word(digest, 0, np.uintp(words.address), np.uint64(words.count),
                          np.uint64(salt & (2 ** 64 - 1)))

    def describe(self) -> dict[str, str]:
        """Facts for the report, the keys of :data:`grader.backends.pycuda.device.DEVICE_KEYS` in its order."""
        return device_facts(self._cuda, self._device, backend=self.name, sandbox=self._toolchain.sandbox)

    def close(self) -> None:
        if self.gpu_lock is not None:
            self.gpu_lock.close()
        ctx, self._context = getattr(self, "_context", None), None
        if ctx is None:
            return
        if self.broken or self.ran_hidden or not offer(self._ordinal, ctx, self._scratch):
            drop(ctx, self._scratch, lost=self.broken)  # else current still: the next backend takes it

