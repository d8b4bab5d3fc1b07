"""The CPU emulator backend: CUDA kernels compiled by the host C++ compiler, run on the CPU.

Staged like the GPU backend: :meth:`EmulatorBackend.compile` rewrites the source
(:mod:`.rewrite`) and compiles it, in the sandbox (:mod:`grader.toolchain.sandbox`), with the force-included
prelude into a shared object linked with the emulator runtime; an executor process (:mod:`.executor`)
loads it, sandboxed, so student code never runs in the grader's process. :meth:`Backend.launch`
validates the launch (shared with the GPU backend) and the executor runs every block of the grid
on ``workers`` OS threads, each CUDA thread a fiber. Device memory (:class:`EmulatorArray`) is
shared memory mapped at the same address in the grader and in the executor.

Faults of emulated threads (an unmapped address, a stack overflow, an integer division by zero)
end the launch with a KernelError naming the block and thread. A crash elsewhere, a system call the
sandbox forbids or a resource limit ends the executor: a KernelError of kind ``crash``,
``sandbox-violation`` or ``resource-limit``, and the next launch starts a new executor. A wild
write that lands in device memory is not detected (the grader's guard zones and the checks are).

Warp intrinsics are a rendezvous of the lanes named in the mask; atomics, volatile accesses,
fences and ``__nanosleep`` are yield points, and several blocks are resident per worker, so
spin-waits on other threads or blocks (a decoupled look-back) make progress. With ``checks=True``
every memory access is checked (races, bounds, alignment, uninitialised shared memory, barrier
divergence, deadlock); findings come as :class:`Finding` objects on the KernelError. With
``sample`` set, only the accesses of a sample of each launch's blocks are (:func:`sampled_blocks`:
a case too large to check whole), and a launch may run those blocks alone.

What it does not do: timing (emulated kernels run orders of magnitude slower than on a GPU and
say nothing about GPU speed; the address patterns, bank conflicts and sectors per request, are
counted by :meth:`EmulatorBackend.start_profile`), and memory-model effects weaker than sequential
consistency (memory is sequentially consistent; the checks report the message-passing pattern that
a missing ``__threadfence()`` breaks: docs/emulator.md, "Memory order between blocks").
"""

from __future__ import annotations

import ctypes
import gc
import re
import shutil
import struct
import threading
import uuid
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Sequence, Union

import numpy as np

from grader.backends.base import Backend, DeviceArray, Dim3, Finding, Module, RunMode
from grader.backends.emulator.build import LINK_FLAGS, EmulatorToolchain, kernel_glue
from grader.backends.emulator.cross_check import CrossChecks, missing_message
from grader.backends.emulator.device_globals import globals_path
from grader.backends.emulator.executor import ARENA_BYTES, Arena, Executor, ExecutorDied, probe_seccomp
from grader.backends.emulator.launch import (INTERLEAVE, LAUNCH_HEAD, MAX_SAMPLE, SAMPLE_DRAWN, SAMPLE_MODES, SCHEDULES,
                                             SG_OK, LaunchResult, argument_slots, launch_failure, parse_findings,
                                             sampled_blocks)
from grader.backends.emulator.macros import DEFAULT_TARGET_ARCH
from grader.backends.emulator.module import Allocation, EmulatorArray, EmulatorModule, as_emulator_array
from grader.backends.emulator.rewrite import rewrite_source
from grader.core.errors import CompileError, KernelError, LaunchError
from grader.core.kernels import KernelSpec
from grader.core.kinds import WARNING_KINDS  # findings that do not fail a launch by themselves
from grader.toolchain.compiler_process import kill_group
from grader.toolchain.compilers import tool_identity
from grader.toolchain.sandbox import Sandbox, executor_limits

if TYPE_CHECKING:
    from grader.core.access_profile import MemoryProfile

__all__ = ["EmulatorBackend", "OUTPUT_CAP", "DEFAULT_SHARED_FILL", "DEVICE_KEYS"]

#: Device printf output kept between two :meth:`EmulatorBackend.take_output` calls, in bytes.
OUTPUT_CAP = 64 * 1024
#: What shared memory no thread has written reads by default: the 32-bit word 0xA5A5A5A5
#: (-1515870811 as an int32, about -2.9e-16 as a float): not 0 (the identity of a sum) and not a
#: value a scan plausibly produces.
DEFAULT_SHARED_FILL = 0xA5A5A5A5
#: What :meth:`EmulatorBackend.describe` says, the result's ``device`` on the emulator: its keys in
#: order, each with what its value says (docs/results.md, "Top level", ``device``, lists these keys:
#: ``tests/project/test_table_docs.py``).
DEVICE_KEYS = (
    ("backend", "the backend's name, ``emulator``"),
    ("compiler", "the host C++ compiler's version line"),
    ("target", "the GPU it compiles for, the config's ``target_arch``: ``sm_90 (__CUDA_ARCH__ 900)``"),
    ("workers", "the OS threads a launch spreads its blocks over"),
    ("schedule", "the order of a block's threads in each round, a random one with its seed"),
    ("checks", "the memory and barrier checks: ``off``, ``on``, or ``on (sampled blocks: N)``"),
    ("nvcc check", "whether each part is also compiled by ``nvcc -ptx``: ``on`` or ``off``"),
    ("sandbox", "what contains the executor: ``bubblewrap + seccomp``, or what is missing and why"),
)


class EmulatorBackend(Backend):
    """Runs CUDA kernels on the CPU: the host C++ compiler plus a fiber-based runtime.

    Args:
        workers: OS threads a launch spreads its blocks over; 0 means the CPUs this process may use
            (:func:`grader.host.resources.usable_cpus`).
        cxx: the host C++ compiler command; default ``$CXX`` or ``"c++"``.
        cache_dir: where the compiled runtime object and the executor are cached; default
            ``$XDG_CACHE_HOME/scangrade`` or ``~/.cache/scangrade``.
        compile_timeout_s: wall-clock limit of one compiler run, and of loading a module (its
            static constructors), in seconds.
        checks: check every memory access and barrier (races, out-of-bounds and misaligned
            accesses, uninitialised shared memory, barrier divergence, deadlock); slower.
        schedule: the order of the threads of a block in each round: ``"ascending"``,
            ``"descending"`` or ``"random"`` (seeded by ``schedule_seed``). The next resident block
            to run is always chosen at random, seeded by ``schedule_seed``.
        schedule_seed: seed of the random choices.
        nvcc_check: also compile each part with ``nvcc -ptx`` so code that would not build for a
            GPU is a CompileError; default: when ``nvcc`` is on the PATH.
        sandbox: ``"auto"`` (bubblewrap when it works here), ``"required"`` or ``"off"``; see
            :mod:`grader.toolchain.sandbox`.
        runtime_flags: compiler flags of the runtime object after the default ones (see
            :class:`.build.EmulatorToolchain`; the GPU path's checks use
            :data:`.build.QUICK_RUNTIME_FLAGS`).
        device_memory: the most bytes of device memory live at once (the address space reserved for
            it is mapped at the first launch); default :data:`.executor.ARENA_BYTES`. A grading passes
            what its cases need (:func:`grader.grading.case.cases.device_memory_bytes`), so that the grader runs
            under an address-space limit (``ulimit -v``).
        target_arch: the GPU the course targets (the config's ``target_arch``; 90: sm_90, an H100):
            student code is compiled with the macros nvcc's device pass for it predefines
            (``__CUDA_ARCH__`` 900...; :mod:`.macros`), and nvcc's cross-check compiles for it.

    Attributes:
        device_memory: the most bytes of device memory live at once (``device_memory`` above).
        target_arch: the GPU student code is compiled for (``target_arch`` above).
        detect_deadlock: a deadlock (every thread polls, nothing changes) is a KernelError of kind
            ``"deadlock"``; default ``checks``. Off, a deadlocked launch waits like a hung GPU
            (for the grader's timeout).
        sandbox: the :class:`grader.toolchain.sandbox.Sandbox` compiles and executors run in.
        shared_fill: the 32-bit word every block's ``__shared__`` arrays (static and the dynamic
            ``extern __shared__`` part) are filled with at block start, repeated from the arena's
            start (so an aligned ``int`` or ``float`` element reads exactly this word), sent with
            each launch; default :data:`DEFAULT_SHARED_FILL` (``0xA5A5A5A5``). What a read of shared
            memory no thread wrote sees: a grader that got an ``uninitialized-read`` warning runs the
            case again under another fill, and the output decides. The red zones between arrays
            keep their own poison; uninitialised locals keep their fixed pattern.
        sample: with ``checks``, which blocks of each launch run and are checked (a key of
            :data:`SAMPLE_MODES`): None (default), all of them; ``only``, the blocks of
            :func:`sampled_blocks` (seeded by ``schedule_seed``) and no others; ``all``, every block,
            with the checks in the sampled ones only. What checks a case too large to check whole.

    Raises:
        BackendUnavailable: no working C++ compiler, the executor does not build, or the sandbox is
            ``required`` and bubblewrap does not work here.
        ValueError: an unknown sandbox policy or schedule, negative ``workers``, or a ``target_arch``
            not in :data:`.macros.TARGET_ARCHS`.
    """

    name: ClassVar[str] = "emulator"
    #: Blocks a sampling launch draws besides its first and last (:func:`sampled_blocks`).
    sample_drawn: ClassVar[int] = SAMPLE_DRAWN
    #: See :attr:`Backend.checks_accesses`: its checks see every access, and every read of shared
    #: memory no thread wrote (an ``uninitialized-read`` warning, :meth:`take_warnings`).
    checks_accesses: ClassVar[bool] = True
    #: See :attr:`Backend.schedules`: the runtime's thread orders (:data:`.launch.SCHEDULES`).
    schedules: ClassVar[tuple[str, ...]] = tuple(SCHEDULES)

    def __init__(self, *, workers: int = 0, cxx: str | None = None, cache_dir: Path | None = None,
                 compile_timeout_s: float = 60.0, checks: bool = False, schedule: str = "ascending",
                 schedule_seed: int = 0, nvcc_check: bool | None = None, sandbox: str = "auto",
                 runtime_flags: Sequence[str] = (), device_memory: int | None = None,
                 target_arch: int = DEFAULT_TARGET_ARCH) -> None:
        if workers < 0:
            raise ValueError(f"workers must be >= 0 (got {workers})")
        self.device_memory = int(device_memory or ARENA_BYTES)
        from grader.host.resources import usable_cpus
        self.workers = workers or usable_cpus()
        self.sandbox = Sandbox(sandbox)
        self.toolchain = EmulatorToolchain(cxx=cxx, cache_dir=cache_dir, timeout_s=compile_timeout_s,
                                           sandbox=self.sandbox, runtime_flags=runtime_flags, target_arch=target_arch)
        self.target_arch = self.toolchain.target_arch
        executor, problem = self.toolchain.executor_binary()
        if self.sandbox.seccomp and problem is None:
            problem = probe_seccomp(executor, self.sandbox)
        self._seccomp_problem = problem if self.sandbox.seccomp else None
        self._seccomp = self.sandbox.seccomp and problem is None
        self.checks = bool(checks)
        self.detect_deadlock = bool(checks)
        self.sample: str | None = None
        self.shared_fill = DEFAULT_SHARED_FILL
        self._warnings: list[Finding] = []  # warning findings of successful launches (take_warnings)
        self.schedule, self.schedule_seed = "ascending", 0
        self.set_schedule(schedule, schedule_seed)
        self.nvcc = shutil.which("nvcc")
        self.nvcc_check = bool(self.nvcc) if nvcc_check is None else bool(nvcc_check and self.nvcc)
        self.cross_checks = CrossChecks(self.toolchain, nvcc=self.nvcc, nvcc_check=self.nvcc_check)
        self._active: EmulatorModule | None = None  # the one module whose executor may be alive
        self._modules: weakref.WeakSet[EmulatorModule] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._arena: Arena | None = None  # device memory, mapped on first use
        self._labels: dict[int, tuple[str, int, int, int]] = {}  # base -> (name, inner offset, count, itemsize)
        self._arena_lock = threading.Lock()
        self._output: list[str] = []
        self._output_len = 0
        self._output_cut = False
        self._profiling: set[int] = set()  # ids of the modules whose launches are profiled

    def set_schedule(self, name: str, seed: int = 0) -> None:
        """Use the thread order ``name`` (``ascending``, ``descending``, ``random``) from the next launch.

        Raises:
            ValueError: an unknown schedule name.
        """
        if name not in SCHEDULES:
            raise ValueError(f"unknown schedule {name!r}: choose one of {', '.join(SCHEDULES)}")
        self.schedule, self.schedule_seed = name, int(seed) & (2**64 - 1)

    @property
    def thread_order(self) -> tuple[str, int]:
        """See :attr:`Backend.thread_order`: :attr:`schedule` and :attr:`schedule_seed`."""
        return self.schedule, self.schedule_seed

    def set_run_mode(self, mode: RunMode) -> None:
        """See :meth:`Backend.set_run_mode`: :attr:`checks`, :attr:`sample`, :attr:`detect_deadlock`
        and :attr:`shared_fill` (:data:`DEFAULT_SHARED_FILL` for the mode's None) from ``mode``."""
        self.checks, self.sample, self.detect_deadlock = mode.checks, mode.sample, mode.detect_deadlock
        self.shared_fill = DEFAULT_SHARED_FILL if mode.shared_fill is None else mode.shared_fill

    def take_output(self) -> str:
        """What device ``printf`` wrote since the last call (at most 64 KiB, then an ``[output cut]`` note)."""
        with self._lock:
            text = "".join(self._output)
            if self._output_cut:
                text += "\n[output cut: device printf wrote more than 64 KiB]\n"
            self._output, self._output_len, self._output_cut = [], 0, False
        return text

    def take_warnings(self) -> list[Finding]:
        """The warning findings (kinds in :data:`grader.core.kinds.WARNING_KINDS`: ``uninitialized-read``...)
        of the launches that succeeded since the last call, one per kind, file and line (the first
        seen), in the order found; clears them. A launch that raises carries its warnings on the
        KernelError's ``findings`` instead."""
        with self._lock:
            taken, self._warnings = self._warnings, []
        seen: set[tuple[str, str | None, int | None]] = set()
        unique: list[Finding] = []
        for f in taken:
            if (f.kind, f.file, f.line) not in seen:
                seen.add((f.kind, f.file, f.line))
                unique.append(f)
        return unique

    def _add_output(self, text: str, cut: bool) -> None:
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
                (``"not supported by the emulator: <what> (<file>:<line>)"``, when the file as written
                compiles: else that compiler's first error, see
                :meth:`.cross_check.CrossChecks.compile_as_written`); the file does not
                compile (``"<filename> does not compile ..."`` with ``command`` and ``log``); the
                compiler timed out; or a contract kernel is missing
                (``"the kernel `k` is not defined with the contract's signature `...`"``).
            BackendUnavailable: the emulator runtime itself does not build with this compiler.
        """
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            rewrite = rewrite_source(source, filename=filename)
            rewritten = rewrite.text
        except CompileError as exc:
            if str(exc).startswith("not supported by the emulator"):
                self.cross_checks.compile_as_written(source, filename=filename, workdir=workdir)  # its own error first
            raise
        if not rewritten.endswith("\n"):
            rewritten += "\n"
        text = rewritten + kernel_glue(kernels)
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(filename).stem) or "module"
        tc = self.toolchain
        cache = tc.compiled
        key = cache.key("emulator module", text, filename, source if self.nvcc_check else "",
                        tool_identity(self.nvcc) if self.nvcc_check else "", tc.path, tc.version, *tc.argv[1:],
                        *tc.module_command(Path("m.cpp"), Path("m.so")), *LINK_FLAGS, tc.runtime_key(),
                        tc.lockdown_text())
        so = cache.get(key, ".so")
        if so is not None and not globals_path(so).exists():
            so = None  # kept without the ranges of its __device__ variables (fresh_globals): compiled again
        if so is None:  # not compiled (and checked by nvcc) before: compile it
            token = uuid.uuid4().hex[:12]
            src = workdir / f"{stem}.emu-{token}.cpp"
            so = workdir / f"{stem}.emu-{token}.so"
            src.write_text(text, encoding="utf-8")
            nvcc = (self.cross_checks.start_nvcc(source, workdir / f"{stem}.nvcc-{token}.cu", filename=filename)
                    if self.nvcc_check else None)
            try:
                tc.compile_module(source=src, output=so, filename=filename, workdir=workdir)
            except BaseException:
                if nvcc is not None:
                    kill_group(nvcc[0])
                raise
            if nvcc is not None:
                self.cross_checks.finish_nvcc(nvcc, filename=filename, workdir=workdir)
            built = so
            so = cache.put(key, ".so", so) or so
            if so != built and globals_path(built).exists():  # beside the cached module, where the module looks
                cache.put(key, ".so.globals", globals_path(built))
        module = EmulatorModule(path=so, filename=filename, kernels=kernels, start=self._start_executor,
                                sandbox=self.sandbox, sum_shifts=rewrite.sum_shifts)
        with self._lock:
            self._activate(module)
            try:
                module.load()
            except ExecutorDied as exc:
                raise CompileError(f"{filename} compiles, but loading it failed: {exc}") from None
            missing = [k for k in kernels if not module.has_kernel(k.name)]
            if missing:
                module.stop()
                raise CompileError("\n".join(f"{filename}: {missing_message(k, source)}" for k in missing))
            self._modules.add(module)
        return module

    def _activate(self, module: EmulatorModule) -> None:
        """Make ``module`` the one whose executor may run (call with ``self._lock`` held): every
        other module's executor is stopped first, so a backend (a part's worker, both dtypes' modules
        and the profile's) never has two executors alive, and a submission never holds more than one
        executor's memory (:data:`grader.toolchain.sandbox.MODULE_MEMORY` of its own, plus the device memory they
        share). A stopped module starts a new executor at its next launch (its static constructors
        run again; its ``__device__`` globals start afresh)."""
        if self._active is module:
            return
        for other in list(self._modules):
            if other is not module:
                other.stop()
        self._active = module

    def _start_executor(self, module: Path) -> Executor:
        """A new executor process with ``module`` loaded (see :class:`.executor.Executor`)."""
        binary, _ = self.toolchain.executor_binary()
        arena = self._device_memory()
        return Executor(binary=binary, module=module, arena=arena, sandbox=self.sandbox,
                        seccomp=self._seccomp, limits=executor_limits(arena_bytes=arena.span, workers=self.workers),
                        load_timeout_s=self.toolchain.timeout_s)

    def _device_memory(self) -> Arena:
        with self._arena_lock:  # not self._lock: a launch holding it may restart an executor
            if self._arena is None:
                self._arena = Arena(self.device_memory)
            return self._arena

    # -- memory ---------------------------------------------------------------------------------
    def alloc(self, count: int, dtype: np.dtype) -> EmulatorArray:
        """An uninitialised buffer of ``count`` elements of ``dtype``, 256-byte aligned, in device
        memory shared with the executors (freed when the last array viewing it is gone).

        Raises:
            ValueError: ``count`` is negative.
            MemoryError: more than :attr:`device_memory` bytes would be live.
            ResourceLimit: its address space could not be mapped (``ulimit -v``).
        """
        dtype = np.dtype(dtype)
        count = int(count)
        if count < 0:
            raise ValueError(f"cannot allocate {count} elements")
        nbytes = count * dtype.itemsize
        arena = self._device_memory()
        try:
            address = arena.alloc(nbytes)
        except MemoryError:
            # Buffers whose last reference is a cycle (a KernelError's traceback holds the frame that
            # holds its run's buffers) go back only when the collector runs: run it, then try again.
            gc.collect()
            address = arena.alloc(nbytes)
        self._labels.pop(address, None)  # a label of a freed buffer at the same address
        block = Allocation(arena, address)
        memory = (ctypes.c_char * max(nbytes, 1)).from_address(address)
        memory._block = block  # numpy views keep the block alive through their base
        elements = np.frombuffer(memory, dtype=dtype, count=count)
        return EmulatorArray(elements, block)

    def label(self, array: DeviceArray, name: str, inner_offset: int, count: int) -> None:
        """Name the buffer inside ``array`` (see :meth:`Backend.label`): with checks on, an access
        to ``array`` outside elements ``[inner_offset, inner_offset + count)`` (its guard zones) is
        an ``out-of-bounds`` KernelError naming ``name`` and the element (``name[-1]``).

        Raises:
            ValueError: ``array`` is not an emulator buffer, or the range does not fit it.
        """
        super().label(array, name, inner_offset, count)
        array = as_emulator_array(array)
        self._labels[array.address] = (name, int(inner_offset), int(count), array.dtype.itemsize)

    def to_device(self, host: np.ndarray, dest: DeviceArray) -> None:
        """Copy a 1-D host array into ``dest``.

        Raises:
            ValueError: ``dest`` is not an emulator buffer, or count or dtype differ.
        """
        dest = as_emulator_array(dest)
        host = np.asarray(host)
        if host.ndim != 1 or host.shape[0] != dest.count or host.dtype != dest.dtype:
            raise ValueError(f"to_device: a 1-D array of {dest.count} {dest.dtype} is needed "
                             f"(got shape {host.shape}, dtype {host.dtype})")
        np.copyto(dest.host, host)

    def to_host(self, src: DeviceArray) -> np.ndarray:
        """A new host copy of ``src`` (shape ``(src.count,)``, dtype ``src.dtype``)."""
        return as_emulator_array(src).host.copy()

    def read(self, src: DeviceArray) -> np.ndarray:
        """A read-only view of ``src``'s elements in the emulator's memory (no copy), valid until the
        buffer is next written; see :meth:`Backend.read`."""
        view = as_emulator_array(src).host.view()
        view.flags.writeable = False
        return view

    def memset32(self, dest: DeviceArray, value: int) -> None:
        """Fill ``dest`` with the 32-bit pattern ``value`` in place: one pass over the buffer's own
        memory, not a host array of the same size copied in (a 16M-element case's poison was two).

        Raises:
            ValueError: ``dest``'s size is not a multiple of 4 bytes, or it is not an emulator buffer.
        """
        dest = as_emulator_array(dest)
        if dest.nbytes % 4:
            raise ValueError(f"memset32 of a buffer of {dest.nbytes} bytes (not a multiple of 4)")
        dest.host.view(np.uint32).fill(value & 0xFFFFFFFF)

    # -- launch ---------------------------------------------------------------------------------
    def _launch(self, module: Module, kernel: str, *, grid: Dim3, block: Dim3, shared_bytes: int,
                args: Sequence[Union[DeviceArray, int]]) -> None:
        """Run every block of the grid; return when all finished.

        Raises:
            LaunchError: unknown kernel, or arguments that do not match the kernel's parameters
                (count, or a pointer parameter not given an emulator buffer, or an ``int``
                parameter not given an int in the 32-bit range), naming the kernel and parameter.
            KernelError: the kernel failed; ``kind`` is a row of :data:`grader.core.kinds.KINDS` and the
                message names the file and line where known and the block and thread ids. Findings
                of a kind in :data:`grader.core.kinds.WARNING_KINDS` alone do not fail a launch: they are
                kept for :meth:`take_warnings`.
        """
        if not isinstance(module, EmulatorModule):
            raise LaunchError(f"launch of {kernel}: the module was not compiled by the emulator backend")
        spec = module.kernels.get(kernel)
        if spec is None or not module.has_kernel(kernel):
            known = ", ".join(sorted(module.kernels)) or "none"
            raise LaunchError(f"launch of {kernel}: the module has no kernel `{kernel}` (its kernels: {known})")
        slots = argument_slots(kernel, spec, args)
        request = self._launch_request(module, kernel, grid=grid, block=block, shared_bytes=shared_bytes,
                                       slots=slots)
        raw, findings_text = self._run_launch(module, kernel, request)
        res = LaunchResult.from_buffer_copy(raw)
        findings = parse_findings(module, findings_text) if res.nfindings else []
        warnings = [f for f in findings if f.kind in WARNING_KINDS]
        if res.status == SG_OK and len(warnings) == len(findings):
            if warnings:
                with self._lock:
                    self._warnings.extend(warnings)
            return
        raise launch_failure(kernel, module, res, findings)

    def _launch_request(self, module: EmulatorModule, kernel: str, *, grid: Dim3, block: Dim3, shared_bytes: int,
                        slots: list[tuple[int, int]]) -> bytes:
        """The request the executor runs (executor.cpp's handle_launch): the head (grid, block,
        limits, thread order, checks, shared fill, sampled blocks), the kernel's name, the live
        allocations (for the checks and the profile) and the arguments.

        Raises:
            LaunchError: :attr:`sample` is not a key of :data:`SAMPLE_MODES`.
        """
        allocs = self._device_memory().live() if self.checks or id(module) in self._profiling else []
        name = kernel.encode()
        if self.sample not in SAMPLE_MODES:
            raise LaunchError(f"launch of {kernel}: unknown sample mode {self.sample!r}")
        sample = sampled_blocks(grid.x * grid.y * grid.z, self.schedule_seed) if self.sample else ()
        return b"".join([
            LAUNCH_HEAD.pack(grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes,
                              self.limits.max_shared_bytes, self.workers, SCHEDULES[self.schedule], self.schedule_seed,
                              int(self.checks), int(self.detect_deadlock), int(self.shared_fill) & 0xFFFFFFFF,
                              INTERLEAVE.get(self.schedule, 0) if self.checks else 0, SAMPLE_MODES[self.sample],
                              len(sample), *sample, *([0] * (MAX_SAMPLE - len(sample))),
                              len(allocs), len(slots), len(name)),
            name, *(self._alloc_entry(b, n) for b, n in allocs), *(struct.pack("<iq", k, v) for k, v in slots)])

    def _run_launch(self, module: EmulatorModule, kernel: str, request: bytes) -> tuple[bytes, str]:
        """Run ``request`` in ``module``'s executor (the only one alive); keep its printf output.
        Returns the raw result and the findings' text.

        Raises:
            KernelError: the executor died (its kind: ``crash``, ``sandbox-violation``...).
        """
        with self._lock:
            self._activate(module)
            try:
                raw, findings_text, output, cut = module.launch(request)
            except ExecutorDied as exc:
                err = KernelError(f"{kernel}: {exc}", kind=exc.kind)
                err.findings = []
                raise err from None
            self._add_output(output, cut)
        return raw, findings_text

    def fresh_globals(self, module: Module) -> None:
        """See :meth:`Backend.fresh_globals`: the executor copies back the module's writable data as
        loaded (:meth:`EmulatorModule.fresh_globals`), or a new executor loads it afresh.

        Raises:
            LaunchError: ``module`` was not compiled by this backend.
            KernelError: the executor died while restoring (kind ``crash``...).
        """
        if not isinstance(module, EmulatorModule):
            raise LaunchError("fresh_globals: not a module of the CPU emulator")
        with self._lock:
            try:
                module.fresh_globals()
            except ExecutorDied as exc:
                err = KernelError(f"resetting the module's __device__ variables: {exc}", kind=exc.kind)
                err.findings = []
                raise err from None

    # -- profile --------------------------------------------------------------------------------
    def start_profile(self, module: Module, *, blocks: int = 1) -> None:
        """Count bank conflicts and global sectors in the next launches of ``module``, in blocks
        ``0 .. blocks - 1`` of each launch (0: every block); see :mod:`grader.core.access_profile`. Totals from
        earlier launches are dropped.

        Raises:
            LaunchError: ``module`` was not compiled by this backend.
            KernelError: the module's executor could not start (kind ``crash``...).
        """
        mod = self._profile_module(module)
        self._profiling.add(id(mod))
        self._profile_call(mod, on=True, blocks=blocks)

    def take_profile(self, module: Module, *, blocks: int = 1) -> "MemoryProfile":
        """The profile of ``module``'s launches since :meth:`start_profile`, with source lines
        resolved; the profile is off afterwards.

        Raises:
            LaunchError: ``module`` was not compiled by this backend.
            KernelError: the module's executor died.
        """
        from grader.core.access_profile import parse_profile

        mod = self._profile_module(module)
        self._profiling.discard(id(mod))
        text = self._profile_call(mod, on=False, blocks=0)
        return parse_profile(text, mod.resolve, blocks=blocks)

    def _profile_module(self, module: Module) -> EmulatorModule:
        if not isinstance(module, EmulatorModule):
            raise LaunchError("profile: the module was not compiled by the emulator backend")
        return module

    def _profile_call(self, module: EmulatorModule, *, on: bool, blocks: int) -> str:
        with self._lock:
            self._activate(module)
            try:
                return module.profile(on=on, max_blocks=blocks)
            except ExecutorDied as exc:
                err = KernelError(f"profile: {exc}", kind=exc.kind)
                err.findings = []
                raise err from None

    def _alloc_entry(self, base: int, nbytes: int) -> bytes:
        """One row of the checks' allocation table: base, bytes, inner range, element bytes, name."""
        name, lo, count, elem = self._labels.get(base, ("", 0, 0, 0))
        return struct.pack("<QQQQI32s", base, nbytes, lo, count, elem, name.encode()[:31])

    def describe(self) -> dict[str, str]:
        """Facts for the report, the keys of :data:`DEVICE_KEYS` in its order."""
        schedule = self.schedule + (f" (seed {self.schedule_seed})" if self.schedule == "random" else "")
        checks = "off" if not self.checks else "on" if not self.sample else f"on (sampled blocks: {self.sample})"
        facts = {"backend": self.name, "compiler": self.toolchain.version_line,
                 "target": f"sm_{self.target_arch} (__CUDA_ARCH__ {self.target_arch * 10})", "workers": str(self.workers),
                 "schedule": schedule, "checks": checks,
                 "nvcc check": "on" if self.nvcc_check else "off",
                 "sandbox": self.sandbox.describe(seccomp_problem=self._seccomp_problem)}
        return {key: facts[key] for key, _ in DEVICE_KEYS}

    def close(self) -> None:
        """Stop every module's executor (freeing its fiber stacks and arenas). Idempotent; a module
        launched again afterwards starts a new executor."""
        with self._lock:
            for m in list(self._modules):
                m.stop()
            self._active = None
