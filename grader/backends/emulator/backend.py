"""The CPU emulator backend: CUDA kernels compiled by the host C++ compiler, run on the CPU.

Staged like the GPU backend: :meth:`EmulatorBackend.compile` rewrites the source
(:mod:`.rewrite`), compiles it with the force-included prelude into a shared object linked with
the emulator runtime, and loads it with ctypes; :meth:`Backend.launch` validates the launch (shared
with the GPU backend) and runs every block of the grid on ``workers`` OS threads, each CUDA thread a
fiber. Device memory is host memory (:class:`EmulatorArray`).

Faults of emulated threads (an unmapped address, a stack overflow, an integer division by zero)
end the launch with a KernelError naming the block and thread, not the process. A wild write that
lands in mapped memory is not detected, so run emulated code in a child process, as the grader does.

What it does not do: timing (emulated kernels run orders of magnitude slower than on a GPU and
say nothing about GPU performance), warp-level primitives (``__shfl_*_sync``, ``__ballot_sync``,
``__syncwarp``: a KernelError of kind ``"unsupported"``), race/bounds/barrier-divergence checking,
schedules other than ascending thread ids, and progress for spin-waits on other threads (such a
kernel runs until the grader's timeout).
"""

from __future__ import annotations

import ctypes
import os
import re
import threading
import uuid
from pathlib import Path
from typing import ClassVar, Sequence, Union

import numpy as np

from grader.backends.base import Backend, DeviceArray, Dim3, KernelSpec, Module
from grader.backends.emulator.build import GLUE_FILENAME, Toolchain, kernel_glue
from grader.backends.emulator.rewrite import find_definitions, rewrite_source
from grader.errors import CompileError, KernelError, LaunchError

__all__ = ["EmulatorBackend", "EmulatorArray", "EmulatorModule", "KERNEL_ERROR_KINDS"]

#: The ``kind`` of every KernelError the emulator raises.
KERNEL_ERROR_KINDS = {
    "assert": "a device assert() failed",
    "trap": "__trap() or __brkpt() was called",
    "shared-memory-limit": "static + dynamic shared memory of a block exceed the limit (48 KiB)",
    "unsupported": "the kernel used a feature the emulator does not emulate (warp-level primitives)",
    "illegal-address": "a thread accessed an unmapped address (a wild or null pointer), or shared memory "
                       "past the 48 KiB arena",
    "stack-overflow": "a thread overflowed its 64 KiB stack (a large local array or deep recursion)",
    "division-by-zero": "a thread divided an integer by zero (or INT_MIN by -1)",
    "illegal-instruction": "a thread executed an illegal instruction (undefined behaviour)",
    "internal": "the emulator itself failed (out of memory for fiber stacks...)",
}

_ALIGNMENT = 256
_ABI_VERSION = 1


class _LaunchConfig(ctypes.Structure):
    _fields_ = [("kernel", ctypes.c_char_p), ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("dyn_shared", ctypes.c_uint64), ("shared_limit", ctypes.c_uint64),
                ("workers", ctypes.c_int), ("schedule", ctypes.c_int)]


class _LaunchResult(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("has_ids", ctypes.c_int), ("block", ctypes.c_uint * 3),
                ("thread", ctypes.c_uint * 3), ("kind", ctypes.c_char * 32), ("message", ctypes.c_char * 2048)]


_SG_OK, _SG_KERNEL_ERROR, _SG_LAUNCH_ERROR = 0, 1, 2


class EmulatorArray(DeviceArray):
    """A device buffer of the emulator: ``count`` elements of ``dtype`` in host memory.

    The first element is 256-byte aligned. :meth:`view` shares memory with its parent.

    Attributes:
        count: number of elements.
        dtype: numpy dtype of the elements.
    """

    def __init__(self, array: np.ndarray, owner: object) -> None:
        self._array = array  # 1-D, contiguous, the elements
        self._owner = owner  # keeps the underlying allocation alive
        self.count = int(array.shape[0])
        self.dtype = array.dtype

    @property
    def address(self) -> int:
        """Address of element 0 in this process, as an int."""
        return int(self._array.ctypes.data)

    @property
    def host(self) -> np.ndarray:
        """The elements as a numpy array sharing this buffer's memory (shape ``(count,)``)."""
        return self._array

    def view(self, offset: int, count: int) -> "EmulatorArray":
        """Elements ``[offset, offset + count)`` of this buffer, sharing its memory.

        Raises:
            ValueError: the range is not inside the buffer.
        """
        if not (0 <= offset and 0 <= count and offset + count <= self.count):
            raise ValueError(f"view [{offset}, {offset + count}) is outside a buffer of {self.count} elements")
        return EmulatorArray(self._array[offset:offset + count], self._owner)

    def __repr__(self) -> str:
        return f"EmulatorArray(count={self.count}, dtype={self.dtype}, address={self.address:#x})"


class EmulatorModule(Module):
    """A compiled, loaded emulated translation unit.

    Attributes:
        path: the shared object (unique per compile; never loaded twice).
        filename: the student's file name.
        kernels: the contract's kernels by name.
    """

    def __init__(self, *, lib: ctypes.CDLL, path: Path, filename: str, kernels: Sequence[KernelSpec]) -> None:
        self._lib = lib
        self.path = path
        self.filename = filename
        self.kernels = {k.name: k for k in kernels}
        lib.sg_abi_version.restype = ctypes.c_int
        lib.sg_kernel_defined.argtypes = [ctypes.c_char_p]
        lib.sg_kernel_defined.restype = ctypes.c_int
        lib.sg_launch.argtypes = [ctypes.POINTER(_LaunchConfig), ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                                  ctypes.POINTER(_LaunchResult)]
        lib.sg_launch.restype = ctypes.c_int
        lib.sg_trim.restype = None
        if lib.sg_abi_version() != _ABI_VERSION:
            raise CompileError(f"{filename}: the emulator runtime's ABI version does not match this grader")

    def has_kernel(self, name: str) -> bool:
        """Whether the module defines ``name`` with the contract's signature."""
        return name in self.kernels and self._lib.sg_kernel_defined(name.encode()) == 1

    def trim(self) -> None:
        """Free the fiber stacks and shared-memory arenas kept for the next launch."""
        self._lib.sg_trim()


class EmulatorBackend(Backend):
    """Runs CUDA kernels on the CPU: the host C++ compiler plus a fiber-based runtime.

    Args:
        workers: OS threads a launch spreads its blocks over; 0 means ``os.cpu_count()``.
        cxx: the host C++ compiler command; default ``$CXX`` or ``"c++"``.
        cache_dir: where the compiled runtime object is cached; default
            ``$XDG_CACHE_HOME/scangrade`` or ``~/.cache/scangrade``.
        compile_timeout_s: wall-clock limit of one compiler run, in seconds.

    Raises:
        BackendUnavailable: no working C++ compiler.
    """

    name: ClassVar[str] = "emulator"

    def __init__(self, *, workers: int = 0, cxx: str | None = None, cache_dir: Path | None = None,
                 compile_timeout_s: float = 60.0) -> None:
        if workers < 0:
            raise ValueError(f"workers must be >= 0 (got {workers})")
        self.workers = workers or os.cpu_count() or 1
        self.toolchain = Toolchain(cxx=cxx, cache_dir=cache_dir, timeout_s=compile_timeout_s)
        self._active: EmulatorModule | None = None  # the module whose worker pools are warm
        self._modules: list[EmulatorModule] = []
        self._lock = threading.Lock()

    # -- compile --------------------------------------------------------------------------------
    def compile(self, *, source: str, filename: str, kernels: Sequence[KernelSpec], workdir: Path) -> Module:
        """Rewrite, compile and load one translation unit; make ``kernels`` launchable by name.

        Args:
            source: the part header (with its ``#line`` markers) followed by the student's file.
            filename: the student's file name, for messages.
            kernels: the contract's kernels (declared ``extern "C"`` by the part header).
            workdir: a private scratch folder; the generated ``.cpp`` and ``.so`` go there.

        Returns:
            An :class:`EmulatorModule`.

        Raises:
            CompileError: a construct the emulator does not support
                (``"not supported by the emulator: <what> (<file>:<line>)"``); the file does not
                compile (``"<filename> does not compile ..."`` with ``command`` and ``log``); the
                compiler timed out; or a contract kernel is missing
                (``"the kernel `k` is not defined with the contract's signature `...`"``).
            BackendUnavailable: the emulator runtime itself does not build with this compiler.
        """
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        rewritten = rewrite_source(source, filename=filename).text
        if not rewritten.endswith("\n"):
            rewritten += "\n"
        text = rewritten + kernel_glue(kernels)
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(filename).stem) or "module"
        token = uuid.uuid4().hex[:12]
        src = workdir / f"{stem}.emu-{token}.cpp"
        so = workdir / f"{stem}.emu-{token}.so"
        src.write_text(text, encoding="utf-8")
        self.toolchain.compile_module(source=src, output=so, filename=filename, workdir=workdir)
        lib = ctypes.CDLL(str(so.resolve()), mode=os.RTLD_LOCAL)
        module = EmulatorModule(lib=lib, path=so, filename=filename, kernels=kernels)
        missing = [k for k in kernels if not module.has_kernel(k.name)]
        if missing:
            raise CompileError("\n".join(f"{filename}: {_missing_message(k, source)}" for k in missing))
        with self._lock:
            self._modules.append(module)
        return module

    # -- memory ---------------------------------------------------------------------------------
    def alloc(self, count: int, dtype: np.dtype) -> EmulatorArray:
        """An uninitialised buffer of ``count`` elements of ``dtype``, 256-byte aligned.

        Raises:
            ValueError: ``count`` is negative.
        """
        dtype = np.dtype(dtype)
        count = int(count)
        if count < 0:
            raise ValueError(f"cannot allocate {count} elements")
        nbytes = count * dtype.itemsize
        raw = np.empty(nbytes + _ALIGNMENT, dtype=np.uint8)
        shift = (-raw.ctypes.data) % _ALIGNMENT
        elements = raw[shift:shift + nbytes].view(dtype)
        return EmulatorArray(elements, raw)

    def to_device(self, host: np.ndarray, dest: DeviceArray) -> None:
        """Copy a 1-D host array into ``dest``.

        Raises:
            ValueError: ``dest`` is not an emulator buffer, or count or dtype differ.
        """
        dest = _own(dest)
        host = np.asarray(host)
        if host.ndim != 1 or host.shape[0] != dest.count or host.dtype != dest.dtype:
            raise ValueError(f"to_device: a 1-D array of {dest.count} {dest.dtype} is needed "
                             f"(got shape {host.shape}, dtype {host.dtype})")
        np.copyto(dest.host, host)

    def to_host(self, src: DeviceArray) -> np.ndarray:
        """A new host copy of ``src`` (shape ``(src.count,)``, dtype ``src.dtype``)."""
        return _own(src).host.copy()

    # -- launch ---------------------------------------------------------------------------------
    def _launch(self, module: Module, kernel: str, *, grid: Dim3, block: Dim3, shared_bytes: int,
                args: Sequence[Union[DeviceArray, int]]) -> None:
        """Run every block of the grid; return when all finished.

        Raises:
            LaunchError: unknown kernel, or arguments that do not match the kernel's parameters
                (count, or a pointer parameter not given an emulator buffer, or an ``int``
                parameter not given an int in the 32-bit range), naming the kernel and parameter.
            KernelError: the kernel failed; ``kind`` is one of :data:`KERNEL_ERROR_KINDS` and the
                message names the file and line where known and the block and thread ids.
        """
        if not isinstance(module, EmulatorModule):
            raise LaunchError(f"launch of {kernel}: the module was not compiled by the emulator backend")
        spec = module.kernels.get(kernel)
        if spec is None or not module.has_kernel(kernel):
            known = ", ".join(sorted(module.kernels)) or "none"
            raise LaunchError(f"launch of {kernel}: the module has no kernel `{kernel}` (its kernels: {known})")
        if len(args) != len(spec.params):
            names = ", ".join(p.name for p in spec.params)
            raise LaunchError(f"launch of {kernel}: the kernel takes {len(spec.params)} arguments ({names}), "
                              f"got {len(args)}")
        slots: list[object] = []
        for n, (param, arg) in enumerate(zip(spec.params, args), start=1):
            where = f"launch of {kernel}: argument {n} `{param.name}` ({param.ctype})"
            if param.kind == "ptr":
                if not isinstance(arg, EmulatorArray):
                    raise LaunchError(f"{where} must be a device array of the emulator backend "
                                      f"(got {type(arg).__name__})")
                slots.append(ctypes.c_void_p(arg.address))
            elif param.kind == "int":
                if isinstance(arg, bool) or not isinstance(arg, (int, np.integer)):
                    raise LaunchError(f"{where} must be an int (got {type(arg).__name__})")
                if not -2**31 <= int(arg) < 2**31:
                    raise LaunchError(f"{where} = {int(arg)} does not fit a 32-bit int")
                slots.append(ctypes.c_int(int(arg)))
            else:
                raise LaunchError(f"{where}: parameter kind {param.kind!r} is not supported by the emulator")
        argv = (ctypes.c_void_p * max(1, len(slots)))(
            *(ctypes.cast(ctypes.pointer(s), ctypes.c_void_p) for s in slots))
        cfg = _LaunchConfig(kernel.encode(), (ctypes.c_uint * 3)(grid.x, grid.y, grid.z),
                            (ctypes.c_uint * 3)(block.x, block.y, block.z), shared_bytes,
                            self.limits.max_shared_bytes, self.workers, 0)
        res = _LaunchResult()
        with self._lock:
            if self._active is not None and self._active is not module:
                self._active.trim()  # keep one module's fiber pools warm, not all of them
            self._active = module
            status = module._lib.sg_launch(ctypes.byref(cfg), argv, len(slots), ctypes.byref(res))
        if status == _SG_OK:
            return
        kind = res.kind.decode(errors="replace")
        message = res.message.decode(errors="replace")
        if status == _SG_LAUNCH_ERROR:
            raise LaunchError(f"launch of {kernel}: {message}")
        raise KernelError(f"{kernel}: {message}", kind=kind)

    def describe(self) -> dict[str, str]:
        """Facts for the report: backend, compiler, workers, schedule."""
        return {"backend": self.name, "compiler": self.toolchain.version_line, "workers": str(self.workers),
                "schedule": "ascending thread ids"}

    def close(self) -> None:
        """Free every loaded module's fiber stacks and arenas. Idempotent; modules stay loaded."""
        with self._lock:
            for m in self._modules:
                m.trim()
            self._active = None


def _own(array: DeviceArray) -> EmulatorArray:
    if not isinstance(array, EmulatorArray):
        raise ValueError(f"expected a buffer of the emulator backend, got {type(array).__name__}")
    return array


def _missing_message(spec: KernelSpec, source: str) -> str:
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
