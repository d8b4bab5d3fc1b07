"""The CPU emulator backend: CUDA kernels compiled by the host C++ compiler, run on the CPU.

Staged like the GPU backend: :meth:`EmulatorBackend.compile` rewrites the source
(:mod:`.rewrite`), compiles it with the force-included prelude into a shared object linked with
the emulator runtime, and loads it with ctypes; :meth:`Backend.launch` validates the launch (shared
with the GPU backend) and runs every block of the grid on ``workers`` OS threads, each CUDA thread a
fiber. Device memory is host memory (:class:`EmulatorArray`).

Faults of emulated threads (an unmapped address, a stack overflow, an integer division by zero)
end the launch with a KernelError naming the block and thread, not the process. A wild write that
lands in mapped memory is not detected, so run emulated code in a child process, as the grader does.

Warp intrinsics are a rendezvous of the lanes named in the mask; atomics, volatile accesses,
fences and ``__nanosleep`` are yield points, and several blocks are resident per worker, so
spin-waits on other threads or blocks (a decoupled look-back) make progress. With ``checks=True``
every memory access is checked (races, bounds, alignment, uninitialised shared memory, barrier
divergence, deadlock); findings come as :class:`Finding` objects on the KernelError.

What it does not do: timing (emulated kernels run orders of magnitude slower than on a GPU and
say nothing about GPU performance), and memory-model effects weaker than sequential consistency.
"""

from __future__ import annotations

import ctypes
import os
import re
import shlex
import shutil
import subprocess
import threading
import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Sequence, Union

import numpy as np

from grader.backends.base import Backend, DeviceArray, Dim3, KernelSpec, Module
from grader.backends.emulator.build import GLUE_FILENAME, RUNTIME_DIR, Toolchain, kernel_glue
from grader.backends.emulator.rewrite import find_definitions, rewrite_source
from grader.errors import CompileError, KernelError, LaunchError

__all__ = ["EmulatorBackend", "EmulatorArray", "EmulatorModule", "Finding", "KERNEL_ERROR_KINDS", "SCHEDULES",
           "OUTPUT_CAP"]

#: The ``kind`` of every KernelError the emulator raises.
KERNEL_ERROR_KINDS = {
    "assert": "a device assert() failed",
    "trap": "__trap() or __brkpt() was called",
    "shared-memory-limit": "static + dynamic shared memory of a block exceed the limit (48 KiB)",
    "unsupported": "the kernel used a feature the emulator does not emulate (e.g. pre-Volta __shfl without _sync)",
    "race": "checks: two threads accessed the same memory, at least one writing, with no barrier between",
    "out-of-bounds": "checks: an access outside every device allocation, the block's shared memory and locals",
    "misaligned": "checks: an access at an address that is not a multiple of its size",
    "uninitialized-read": "checks: a read of shared memory that no thread of the block has written",
    "barrier-divergence": "threads of a block wait at different barriers, some exited while others wait (checks), "
                          "or a warp intrinsic's mask is wrong (caller or source lane not in it)",
    "deadlock": "checks: every thread polls (spin-waits) and nothing it reads changes",
    "illegal-address": "a thread accessed an unmapped address (a wild or null pointer), or shared memory "
                       "past the 48 KiB arena",
    "stack-overflow": "a thread overflowed its 64 KiB stack (a large local array or deep recursion)",
    "division-by-zero": "a thread divided an integer by zero (or INT_MIN by -1)",
    "illegal-instruction": "a thread executed an illegal instruction (undefined behaviour)",
    "internal": "the emulator itself failed (out of memory for fiber stacks...)",
}

#: Thread orders within a block (the numbers are the runtime's).
SCHEDULES = {"ascending": 0, "descending": 1, "random": 2}
#: Device printf output kept between two :meth:`EmulatorBackend.take_output` calls, in bytes.
OUTPUT_CAP = 64 * 1024
#: Kinds reported by the checks (they come with :class:`Finding` objects).
CHECK_KINDS = ("race", "out-of-bounds", "misaligned", "uninitialized-read", "barrier-divergence", "deadlock")

_ALIGNMENT = 256
_ABI_VERSION = 2


class _Alloc(ctypes.Structure):
    _fields_ = [("base", ctypes.c_uint64), ("size", ctypes.c_uint64)]


class _LaunchConfig(ctypes.Structure):
    _fields_ = [("kernel", ctypes.c_char_p), ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("dyn_shared", ctypes.c_uint64), ("shared_limit", ctypes.c_uint64),
                ("workers", ctypes.c_int), ("schedule", ctypes.c_int), ("seed", ctypes.c_uint64),
                ("checks", ctypes.c_int), ("detect_deadlock", ctypes.c_int),
                ("allocs", ctypes.POINTER(_Alloc)), ("nallocs", ctypes.c_int)]


class _LaunchResult(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("has_ids", ctypes.c_int), ("block", ctypes.c_uint * 3),
                ("thread", ctypes.c_uint * 3), ("kind", ctypes.c_char * 32), ("message", ctypes.c_char * 2048),
                ("nfindings", ctypes.c_int)]


@dataclass(frozen=True)
class Finding:
    """One diagnosis of the emulator's checks (or a barrier divergence / deadlock).

    Attributes:
        kind: one of ``race``, ``out-of-bounds``, ``misaligned``, ``uninitialized-read``,
            ``barrier-divergence``, ``deadlock``.
        message: one line for a student: what, where (file:line), which block and thread.
        file, line: where it happened (the access, the barrier, the polling loop); ``None`` if unknown.
        other_file, other_line: for a race, the other access; for a divergence, the other barrier.
        block, thread: ids ``(x, y, z)`` of the thread that made the access.
        other_block, other_thread: ids of the other thread, where relevant.
    """

    kind: str
    message: str
    file: str | None = None
    line: int | None = None
    other_line: int | None = None
    other_file: str | None = None
    block: tuple[int, int, int] | None = None
    thread: tuple[int, int, int] | None = None
    other_block: tuple[int, int, int] | None = None
    other_thread: tuple[int, int, int] | None = None


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
        lib.sg_take_output.argtypes = [ctypes.c_char_p, ctypes.c_long]
        lib.sg_take_output.restype = ctypes.c_long
        lib.sg_findings.argtypes = [ctypes.c_char_p, ctypes.c_long]
        lib.sg_findings.restype = ctypes.c_long
        if lib.sg_abi_version() != _ABI_VERSION:
            raise CompileError(f"{filename}: the emulator runtime's ABI version does not match this grader")

    def has_kernel(self, name: str) -> bool:
        """Whether the module defines ``name`` with the contract's signature."""
        return name in self.kernels and self._lib.sg_kernel_defined(name.encode()) == 1

    def trim(self) -> None:
        """Free the fiber stacks and shared-memory arenas kept for the next launch."""
        self._lib.sg_trim()

    def take_output(self) -> tuple[str, bool]:
        """Device printf output since the last call, and whether it was cut at the cap."""
        buf = ctypes.create_string_buffer(OUTPUT_CAP + 1)
        n = self._lib.sg_take_output(buf, len(buf))
        cut = n < 0
        n = -1 - n if cut else n
        return buf.raw[:n].decode(errors="replace"), cut

    def findings_text(self) -> str:
        """The runtime's findings of the last launch (tab-separated lines)."""
        size = self._lib.sg_findings(None, 0) if False else 1 << 20
        buf = ctypes.create_string_buffer(size)
        n = self._lib.sg_findings(buf, size)
        return buf.raw[:min(n, size - 1)].decode(errors="replace")

    def resolve(self, offsets: Sequence[int]) -> dict[int, tuple[str, int] | None]:
        """Source (file, line) of code addresses of this module (offsets from its load base)."""
        return _addr2line(self.path, offsets)


class EmulatorBackend(Backend):
    """Runs CUDA kernels on the CPU: the host C++ compiler plus a fiber-based runtime.

    Args:
        workers: OS threads a launch spreads its blocks over; 0 means ``os.cpu_count()``.
        cxx: the host C++ compiler command; default ``$CXX`` or ``"c++"``.
        cache_dir: where the compiled runtime object is cached; default
            ``$XDG_CACHE_HOME/scangrade`` or ``~/.cache/scangrade``.
        compile_timeout_s: wall-clock limit of one compiler run, in seconds.
        checks: check every memory access and barrier (races, out-of-bounds and misaligned
            accesses, uninitialised shared memory, barrier divergence, deadlock); slower.
        schedule: the order of the threads of a block in each round: ``"ascending"``,
            ``"descending"`` or ``"random"`` (seeded by ``schedule_seed``). The next resident block
            to run is always chosen at random, seeded by ``schedule_seed``.
        schedule_seed: seed of the random choices.
        nvcc_check: also compile each part with ``nvcc -ptx`` so code that would not build for a
            GPU is a CompileError; default: when ``nvcc`` is on the PATH.

    Attributes:
        detect_deadlock: a deadlock (every thread polls, nothing changes) is a KernelError of kind
            ``"deadlock"``; default ``checks``. Off, a deadlocked launch waits like a hung GPU
            (for the grader's timeout).

    Raises:
        BackendUnavailable: no working C++ compiler.
    """

    name: ClassVar[str] = "emulator"

    def __init__(self, *, workers: int = 0, cxx: str | None = None, cache_dir: Path | None = None,
                 compile_timeout_s: float = 60.0, checks: bool = False, schedule: str = "ascending",
                 schedule_seed: int = 0, nvcc_check: bool | None = None) -> None:
        if workers < 0:
            raise ValueError(f"workers must be >= 0 (got {workers})")
        self.workers = workers or os.cpu_count() or 1
        self.toolchain = Toolchain(cxx=cxx, cache_dir=cache_dir, timeout_s=compile_timeout_s)
        self.checks = bool(checks)
        self.detect_deadlock = bool(checks)
        self.schedule, self.schedule_seed = "ascending", 0
        self.set_schedule(schedule, schedule_seed)
        self.nvcc = shutil.which("nvcc")
        self.nvcc_check = bool(self.nvcc) if nvcc_check is None else bool(nvcc_check and self.nvcc)
        self._active: EmulatorModule | None = None  # the module whose worker pools are warm
        self._modules: list[EmulatorModule] = []
        self._lock = threading.Lock()
        self._allocs: dict[int, tuple[int, int]] = {}  # id -> (base, size) of live device buffers
        self._output: list[str] = []
        self._output_len = 0
        self._output_cut = False

    def set_schedule(self, name: str, seed: int = 0) -> None:
        """Use the thread order ``name`` (``ascending``, ``descending``, ``random``) from the next launch.

        Raises:
            ValueError: an unknown schedule name.
        """
        if name not in SCHEDULES:
            raise ValueError(f"unknown schedule {name!r}: choose one of {', '.join(SCHEDULES)}")
        self.schedule, self.schedule_seed = name, int(seed) & (2**64 - 1)

    def take_output(self) -> str:
        """What device ``printf`` wrote since the last call (at most 64 KiB, then an ``[output cut]`` note)."""
        with self._lock:
            self._collect_output()
            text = "".join(self._output)
            if self._output_cut:
                text += "\n[output cut: device printf wrote more than 64 KiB]\n"
            self._output, self._output_len, self._output_cut = [], 0, False
        return text

    def _collect_output(self) -> None:
        if self._active is None:
            return
        text, cut = self._active.take_output()
        room = OUTPUT_CAP - self._output_len
        if len(text) > room:
            text, cut = text[:max(room, 0)], True
        self._output.append(text)
        self._output_len += len(text)
        self._output_cut |= cut

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
        nvcc = self._start_nvcc(source, workdir / f"{stem}.nvcc-{token}.cu") if self.nvcc_check else None
        try:
            self.toolchain.compile_module(source=src, output=so, filename=filename, workdir=workdir)
        except BaseException:
            if nvcc is not None:
                nvcc[0].kill()
                nvcc[0].wait()
            raise
        if nvcc is not None:
            self._finish_nvcc(nvcc, filename=filename, workdir=workdir)
        lib = ctypes.CDLL(str(so.resolve()), mode=os.RTLD_LOCAL)
        module = EmulatorModule(lib=lib, path=so, filename=filename, kernels=kernels)
        missing = [k for k in kernels if not module.has_kernel(k.name)]
        if missing:
            raise CompileError("\n".join(f"{filename}: {_missing_message(k, source)}" for k in missing))
        with self._lock:
            self._modules.append(module)
        return module

    def _start_nvcc(self, source: str, path: Path) -> tuple[subprocess.Popen, list[str]] | None:
        """Start ``nvcc -ptx`` on the same source text (in parallel with the host compiler)."""
        path.write_text(source, encoding="utf-8")
        cmd = [str(self.nvcc), "-ptx", "-x", "cu", str(path), "-o", os.devnull]
        try:
            return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    cwd=path.parent), cmd
        except OSError:
            return None  # nvcc does not run here: the emulator alone decides

    def _finish_nvcc(self, started: tuple[subprocess.Popen, list[str]], *, filename: str, workdir: Path) -> None:
        proc, cmd = started
        try:
            out, _ = proc.communicate(timeout=self.toolchain.timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return  # a slow nvcc is not the student's fault
        if proc.returncode == 0:
            return
        log = out.strip()
        for prefix in {str(workdir.resolve()), str(workdir)}:
            log = log.replace(prefix + os.sep, "").replace(prefix, ".")
        log = re.sub(r"\S*\.nvcc-[0-9a-f]{12}\.cu", filename, log)
        raise CompileError(f"{filename} compiles under the CPU emulator but not with nvcc, so it would not build "
                           "for a GPU (nvcc -ptx)", command=shlex.join(cmd), log=log)

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
        key = id(raw)
        self._allocs[key] = (int(raw.ctypes.data) + shift, nbytes)
        weakref.finalize(raw, self._allocs.pop, key, None)
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
        allocs = list(self._allocs.values()) if self.checks else []
        table = (_Alloc * max(1, len(allocs)))(*(_Alloc(b, n) for b, n in allocs))
        cfg = _LaunchConfig(kernel.encode(), (ctypes.c_uint * 3)(grid.x, grid.y, grid.z),
                            (ctypes.c_uint * 3)(block.x, block.y, block.z), shared_bytes,
                            self.limits.max_shared_bytes, self.workers, SCHEDULES[self.schedule],
                            self.schedule_seed, int(self.checks), int(self.detect_deadlock), table, len(allocs))
        res = _LaunchResult()
        with self._lock:
            if self._active is not None and self._active is not module:
                self._collect_output()
                self._active.trim()  # keep one module's fiber pools warm, not all of them
            self._active = module
            status = module._lib.sg_launch(ctypes.byref(cfg), argv, len(slots), ctypes.byref(res))
            findings = _parse_findings(module, module.findings_text()) if res.nfindings else []
            self._collect_output()
        if status == _SG_OK and not findings:
            return
        kind = res.kind.decode(errors="replace")
        message = _substitute(res.message.decode(errors="replace"), module, findings)
        if status == _SG_LAUNCH_ERROR:
            raise LaunchError(f"launch of {kernel}: {message}")
        if findings:
            first = findings[0]
            if status == _SG_OK or kind in CHECK_KINDS:
                fatal = [f for f in findings if f.kind == kind and status != _SG_OK][:1]
                ordered = fatal + [f for f in findings if f not in fatal]
                first = ordered[0]
                text = f"{kernel}: {first.message}"
                if first.block is not None:
                    text += f" (block {_ids(first.block)}, thread {_ids(first.thread)})"
                findings, kind = ordered, first.kind
            else:
                text = f"{kernel}: {message}"
            rest = len(findings) - (1 if text.startswith(f"{kernel}: {first.message}") else 0)
            if rest > 0:
                others = "; ".join(f"{f.kind} at {f.file}:{f.line}" for f in findings[1:4] if f.file)
                text += f"\n{rest} more distinct finding{'s' if rest > 1 else ''}" + (f": {others}" if others else "")
            err = KernelError(text, kind=kind)
            err.findings = findings
            raise err
        err = KernelError(f"{kernel}: {message}", kind=kind)
        err.findings = []
        raise err

    def describe(self) -> dict[str, str]:
        """Facts for the report: backend, compiler, workers, schedule."""
        schedule = self.schedule + (f" (seed {self.schedule_seed})" if self.schedule == "random" else "")
        return {"backend": self.name, "compiler": self.toolchain.version_line, "workers": str(self.workers),
                "schedule": schedule, "checks": "on" if self.checks else "off",
                "nvcc check": "on" if self.nvcc_check else "off"}

    def close(self) -> None:
        """Free every loaded module's fiber stacks and arenas. Idempotent; modules stay loaded."""
        with self._lock:
            for m in self._modules:
                m.trim()
            self._active = None


def _ids(t: tuple[int, int, int] | None) -> str:
    return "(?)" if t is None else f"({t[0]}, {t[1]}, {t[2]})"


_RUNTIME_FILES = ("prelude.h", "sg_abi.h")


def _addr2line(path: Path, offsets: Sequence[int]) -> dict[int, tuple[str, int] | None]:
    """(file, line) of each code offset of a shared object: the innermost frame in the student's
    code (frames in the emulator's prelude and in system headers are skipped)."""
    out: dict[int, tuple[str, int] | None] = {o: None for o in offsets}
    tool = shutil.which("addr2line")
    if not tool or not offsets:
        return out
    try:
        proc = subprocess.run([tool, "-e", str(path), "-i", "-a", *(hex(o) for o in offsets)],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return out
    current: int | None = None
    frames: dict[int, list[tuple[str, int]]] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("0x"):
            current = int(line, 16)
            frames[current] = []
            continue
        m = re.match(r"(.*):(\d+)(?: \(discriminator \d+\))?$", line.strip())
        if current is not None and m:
            frames[current].append((m.group(1), int(m.group(2))))
    folder = str(Path(path).parent.resolve()) + os.sep
    for o in offsets:
        cands = [(f[len(folder):] if f.startswith(folder) else f, n) for f, n in frames.get(o, [])]
        good = [c for c in cands if not c[0].endswith(_RUNTIME_FILES) and not c[0].startswith("/usr/")
                and c[1] > 0 and not c[0].startswith(str(RUNTIME_DIR))]
        if good:
            out[o] = good[0]
    return out


def _split_loc(loc: str, resolved: dict[int, tuple[str, int] | None]) -> tuple[str | None, int | None]:
    if not loc:
        return None, None
    if loc.startswith("@"):
        r = resolved.get(int(loc[1:], 16))
        return (r[0], r[1]) if r else (None, None)
    file, _, line = loc.rpartition(":")
    return (file, int(line)) if line.isdigit() else (loc, None)


def _triple(text: str) -> tuple[int, int, int]:
    x, y, z = (int(v) for v in text.split(","))
    return (x, y, z)


def _parse_findings(module: EmulatorModule, text: str) -> list[Finding]:
    rows = [line.split("\t", 9) for line in text.splitlines() if line.count("\t") >= 9]
    offsets = sorted({int(loc[1:], 16) for r in rows for loc in (r[1], r[2]) if loc.startswith("@")})
    resolved = module.resolve(offsets)
    findings: list[Finding] = []
    seen: set[tuple] = set()
    for kind, loc, other, block, thread, oblock, othread, has_other, _linear, message in rows:
        file, line = _split_loc(loc, resolved)
        ofile, oline = _split_loc(other, resolved)
        where = f"{file}:{line}" if file else "an unknown line"
        owhere = f"{ofile}:{oline}" if ofile else "an unknown line"
        message = message.replace("{L}", where).replace("{O}", owhere)
        key = (kind, file, line, ofile, oline)
        if key in seen:
            continue  # distinct code addresses of one source line
        seen.add(key)
        relevant = has_other == "1"
        findings.append(Finding(kind=kind, message=message, file=file, line=line,
                                other_line=oline if relevant else None, other_file=ofile if relevant else None,
                                block=_triple(block), thread=_triple(thread),
                                other_block=_triple(oblock) if relevant else None,
                                other_thread=_triple(othread) if relevant else None))
    return findings


def _substitute(message: str, module: EmulatorModule, findings: list[Finding]) -> str:
    """A fatal error's message with the first matching finding's locations filled in."""
    if "{L}" not in message and "{O}" not in message:
        return message
    for f in findings:
        if f.message and message.startswith(f.message[:20]):
            return f.message + message[message.rfind(" (block"):] if " (block" in message else f.message
    return message.replace("{L}", "an unknown line").replace("{O}", "an unknown line")


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
