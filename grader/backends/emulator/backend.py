"""The CPU emulator backend: CUDA kernels compiled by the host C++ compiler, run on the CPU.

Staged like the GPU backend: :meth:`EmulatorBackend.compile` rewrites the source
(:mod:`.rewrite`) and compiles it, in the sandbox (:mod:`.sandbox`), with the force-included
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
import os
import re
import shlex
import shutil
import struct
import subprocess
import threading
import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ClassVar, Sequence, Union

import numpy as np

from grader.backends.base import Backend, DeviceArray, Dim3, Finding, Module
from grader.backends.emulator.build import (GLUE_FILENAME, LINK_FLAGS, RUNTIME_DIR, Toolchain, check_nvcc_first_stage,
                                            cut_note, kernel_glue, kill_group, limit_note, read_output, run_compile,
                                            start_compiler, strip_workdir, tool_identity)
from grader.backends.emulator.executor import ARENA_BYTES, Arena, Executor, ExecutorDied, probe_seccomp
from grader.backends.emulator.macros import DEFAULT_TARGET_ARCH, nvcc_arch_flags
from grader.backends.emulator.rewrite import find_definitions, rewrite_source
from grader.backends.emulator.sandbox import Sandbox, executor_limits
from grader.errors import CompileError, KernelError, LaunchError
from grader.kernels import KernelSpec
from grader.kinds import WARNING_KINDS  # findings that do not fail a launch by themselves
from grader.results import CHECK_KINDS  # kinds the checks report (they come with Finding objects)

if TYPE_CHECKING:
    from grader.profile import MemoryProfile

__all__ = ["EmulatorBackend", "EmulatorArray", "EmulatorModule", "Finding", "SCHEDULES", "OUTPUT_CAP",
           "DEFAULT_SHARED_FILL", "SAMPLE_MODES", "SAMPLE_DRAWN", "INTERLEAVE", "sampled_blocks"]

#: Thread orders within a block (the numbers are the runtime's).
SCHEDULES = {"ascending": 0, "descending": 1, "random": 2}
#: With checks on, the thread orders in which a thread of a checked block may also switch to another
#: before each plain load or store of shared or global memory, and the chance of a switch there, out of
#: 65536 (the runtime's ``interleave``): the random order, one access in eight.
INTERLEAVE = {"random": 8192}
#: Which blocks a checking launch runs and checks (:attr:`EmulatorBackend.sample`; the numbers are the
#: runtime's): None, every block, checked; ``only``, only the sampled blocks, checked (the others are
#: skipped: blocks that do not depend on one another); ``all``, every block, only the sampled ones
#: checked (blocks that wait on others, as a decoupled look-back does).
SAMPLE_MODES = {None: 0, "only": 1, "all": 2}
#: Blocks a sampling launch draws from its seed besides its first and last (:func:`sampled_blocks`).
SAMPLE_DRAWN = 2
#: The most blocks the runtime takes in a sample (sg_host.h, SG_MAX_SAMPLE).
_MAX_SAMPLE = 16
#: Device printf output kept between two :meth:`EmulatorBackend.take_output` calls, in bytes.
OUTPUT_CAP = 64 * 1024

_ABI_VERSION = 5
#: The head of a launch request (see executor.cpp's handle_launch).
_LAUNCH_HEAD = struct.Struct(f"<3I3IQQiiQiiIIii{_MAX_SAMPLE}QiiI")
#: What shared memory no thread has written reads by default: the 32-bit word 0xA5A5A5A5
#: (-1515870811 as an int32, about -2.9e-16 as a float): not 0 (the identity of a sum) and not a
#: value a scan plausibly produces.
DEFAULT_SHARED_FILL = 0xA5A5A5A5


def sampled_blocks(nblocks: int, seed: int, drawn: int = SAMPLE_DRAWN) -> tuple[int, ...]:
    """The blocks a sampling launch checks: its first and its last, and ``drawn`` others drawn from
    ``seed`` (the case's seed: the private one for a hidden case) and the grid's size, so a case's three
    thread orders check the same blocks and a replay with the same seed checks them again.

    Args:
        nblocks: blocks in the launch's grid (>= 1).
        seed: the seed the blocks are drawn from.
        drawn: blocks drawn besides the first and the last (at most 14).

    Returns:
        Distinct linear block indices in ``[0, nblocks)``, ascending; all of them for a grid of at most
        ``drawn + 2`` blocks.

    Raises:
        ValueError: ``nblocks`` < 1, or ``drawn`` outside 0..14.
    """
    import random

    if nblocks < 1 or not 0 <= drawn <= _MAX_SAMPLE - 2:
        raise ValueError(f"cannot sample {drawn} + 2 of {nblocks} blocks")
    inner = range(1, nblocks - 1)
    picked = random.Random(f"scangrade sample {seed} {nblocks}").sample(inner, min(drawn, len(inner)))
    return tuple(sorted({0, nblocks - 1, *picked}))


class _LaunchResult(ctypes.Structure):
    """``sg_result`` (sg_host.h), as the executor sends it back."""

    _fields_ = [("status", ctypes.c_int), ("has_ids", ctypes.c_int), ("block", ctypes.c_uint * 3),
                ("thread", ctypes.c_uint * 3), ("kind", ctypes.c_char * 32), ("message", ctypes.c_char * 2048),
                ("nfindings", ctypes.c_int)]


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
    """A compiled emulated translation unit, loaded in its own sandboxed executor process.

    Attributes:
        path: the shared object (unique per compile).
        filename: the student's file name.
        kernels: the contract's kernels by name.
        sum_shifts: the source lines whose shifts have a ``+`` or ``-`` in their amount, and how
            (``RewriteResult.sum_shifts``): an undefined shift there gets operator-precedence advice.
    """

    def __init__(self, *, path: Path, filename: str, kernels: Sequence[KernelSpec],
                 start: Callable[[Path], Executor], sandbox: Sandbox,
                 sum_shifts: dict[tuple[str, int], tuple[str, str]] | None = None) -> None:
        self.path = path
        self.filename = filename
        self.sum_shifts = dict(sum_shifts or {})
        self.kernels = {k.name: k for k in kernels}
        self._start = start
        self._sandbox = sandbox
        self._executor: Executor | None = None
        self._defined: dict[str, int] = {}

    def load(self) -> Executor:
        """The running executor, started (the module loaded, its static constructors run) if needed.

        Raises:
            ExecutorDied: the executor could not start or load the module.
        """
        if self._executor is None or not self._executor.alive:
            self._executor = None
            executor = self._start(self.path)
            if executor.hello.abi != _ABI_VERSION:
                executor.stop()
                raise ExecutorDied("crash", "the emulator runtime's ABI version does not match this grader")
            self._defined = {name: defined for name, (defined, _) in executor.hello.kernels.items()}
            self._executor = executor
        return self._executor

    def launch(self, request: bytes) -> tuple[bytes, str, str, bool]:
        """Run a launch request in the executor (starting it if needed); see :meth:`Executor.launch`."""
        executor = self.load()
        try:
            return executor.launch(request)
        except ExecutorDied:
            self._executor = None
            raise

    @property
    def pid(self) -> int | None:
        """The process running the module (bubblewrap's, when sandboxed), or None when stopped."""
        return self._executor.pid if self._executor is not None and self._executor.alive else None

    def has_kernel(self, name: str) -> bool:
        """Whether the module defines ``name`` with the contract's signature."""
        return name in self.kernels and self._defined.get(name) == 1

    def stop(self) -> None:
        """Stop the executor; the next launch starts a new one. Idempotent."""
        if self._executor is not None:
            self._executor.stop()
            self._executor = None

    def profile(self, *, on: bool, max_blocks: int = 1) -> str:
        """Take the runtime's profile totals since the last call, then set the profile on or off
        (see :meth:`Executor.profile`); starts the executor if needed.

        Raises:
            ExecutorDied: the executor could not start or died.
        """
        executor = self.load()
        try:
            return executor.profile(on=on, max_blocks=max_blocks)
        except ExecutorDied:
            self._executor = None
            raise

    def resolve(self, offsets: Sequence[int]) -> dict[int, tuple[str, int] | None]:
        """Source (file, line) of code addresses of this module (offsets from its load base)."""
        return _addr2line(self.path, offsets, self._sandbox, filename=self.filename)


class _Block:
    """One device allocation: back to the arena when the last array viewing it is gone."""

    def __init__(self, arena: Arena, address: int) -> None:
        self.arena = arena
        weakref.finalize(self, arena.release, address)


class EmulatorBackend(Backend):
    """Runs CUDA kernels on the CPU: the host C++ compiler plus a fiber-based runtime.

    Args:
        workers: OS threads a launch spreads its blocks over; 0 means ``os.cpu_count()``.
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
            :mod:`.sandbox`.
        runtime_flags: compiler flags of the runtime object after the default ones (see
            :class:`.build.Toolchain`; the GPU path's checks use :data:`.build.QUICK_RUNTIME_FLAGS`).
        device_memory: the most bytes of device memory live at once (the address space reserved for
            it is mapped at the first launch); default :data:`.executor.ARENA_BYTES`. A grading passes
            what its cases need (:func:`grader.execute.device_memory_bytes`), so that the grader runs
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
        sandbox: the :class:`.sandbox.Sandbox` compiles and executors run in.
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

    def __init__(self, *, workers: int = 0, cxx: str | None = None, cache_dir: Path | None = None,
                 compile_timeout_s: float = 60.0, checks: bool = False, schedule: str = "ascending",
                 schedule_seed: int = 0, nvcc_check: bool | None = None, sandbox: str = "auto",
                 runtime_flags: Sequence[str] = (), device_memory: int | None = None,
                 target_arch: int = DEFAULT_TARGET_ARCH) -> None:
        if workers < 0:
            raise ValueError(f"workers must be >= 0 (got {workers})")
        self.device_memory = int(device_memory or ARENA_BYTES)
        self.workers = workers or os.cpu_count() or 1
        self.sandbox = Sandbox(sandbox)
        self.toolchain = Toolchain(cxx=cxx, cache_dir=cache_dir, timeout_s=compile_timeout_s, sandbox=self.sandbox,
                                   runtime_flags=runtime_flags, target_arch=target_arch)
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

    def take_output(self) -> str:
        """What device ``printf`` wrote since the last call (at most 64 KiB, then an ``[output cut]`` note)."""
        with self._lock:
            text = "".join(self._output)
            if self._output_cut:
                text += "\n[output cut: device printf wrote more than 64 KiB]\n"
            self._output, self._output_len, self._output_cut = [], 0, False
        return text

    def take_warnings(self) -> list[Finding]:
        """The warning findings (kinds in :data:`grader.kinds.WARNING_KINDS`: ``uninitialized-read``...)
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
                compiles: else that compiler's first error, see :meth:`_compile_as_written`); the file does not
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
                self._compile_as_written(source, filename=filename, workdir=workdir)  # its own error first
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
        if so is None:  # not compiled (and checked by nvcc) before: compile it
            token = uuid.uuid4().hex[:12]
            src = workdir / f"{stem}.emu-{token}.cpp"
            so = workdir / f"{stem}.emu-{token}.so"
            src.write_text(text, encoding="utf-8")
            nvcc = (self._start_nvcc(source, workdir / f"{stem}.nvcc-{token}.cu", filename=filename)
                    if self.nvcc_check else None)
            try:
                tc.compile_module(source=src, output=so, filename=filename, workdir=workdir)
            except BaseException:
                if nvcc is not None:
                    kill_group(nvcc[0])
                raise
            if nvcc is not None:
                self._finish_nvcc(nvcc, filename=filename, workdir=workdir)
            so = cache.put(key, ".so", so) or so
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
                raise CompileError("\n".join(f"{filename}: {_missing_message(k, source)}" for k in missing))
            self._modules.add(module)
        return module

    def _activate(self, module: EmulatorModule) -> None:
        """Make ``module`` the one whose executor may run (call with ``self._lock`` held): every
        other module's executor is stopped first, so a backend (a part's worker, both dtypes' modules
        and the profile's) never has two executors alive, and a submission never holds more than one
        executor's memory (:data:`.sandbox.MODULE_MEMORY` of its own, plus the device memory they
        share). A stopped module starts a new executor at its next launch (its static constructors
        run again; its ``__device__`` globals start afresh)."""
        if self._active is module:
            return
        for other in list(self._modules):
            if other is not module:
                other.stop()
        self._active = module

    def _compile_as_written(self, source: str, *, filename: str, workdir: Path) -> None:
        """The rewrite refused ``source``: compile it as written, with ``nvcc -ptx`` where the nvcc
        check is on, else with the host compiler for errors only (:meth:`.build.Toolchain.syntax_command`),
        in the compile sandbox. Returns when it compiles (the refusal stands) or no compiler could
        decide (it did not run, or timed out).

        Raises:
            CompileError: the compiler's error: ``"<filename> does not compile (<compiler>): <its first
                error line>"`` with the command and the log (the scratch folder's path removed, the
                student's file name for the scratch copy's); or nvcc's first stage made a directive
                (:func:`.build.check_nvcc_first_stage`).
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

    def _nvcc_arch(self) -> tuple[str, ...]:
        """nvcc's option compiling for :attr:`target_arch`, so that its cross-check reads the
        ``#if __CUDA_ARCH__`` branches the emulator compiles (none where this nvcc cannot)."""
        return nvcc_arch_flags(str(self.nvcc), self.target_arch) if self.nvcc else ()

    def _start_nvcc(self, source: str, path: Path, *, filename: str) -> tuple[subprocess.Popen, list[str]] | None:
        """Start ``nvcc -ptx`` on the same source text, in the compile sandbox (in parallel with the
        host compiler), once its first stage's output passed :func:`.build.check_nvcc_first_stage`.

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

    def _finish_nvcc(self, started: tuple[subprocess.Popen, list[str]], *, filename: str, workdir: Path) -> None:
        """Wait for the ``nvcc -ptx`` of :meth:`_start_nvcc`, reading at most
        :data:`.build.OUTPUT_BYTES` of its output (it is stopped there).

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
        block = _Block(arena, address)
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
        array = _own(array)
        self._labels[array.address] = (name, int(inner_offset), int(count), array.dtype.itemsize)

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
            KernelError: the kernel failed; ``kind`` is a row of :data:`grader.kinds.KINDS` and the
                message names the file and line where known and the block and thread ids. Findings
                of a kind in :data:`grader.kinds.WARNING_KINDS` alone do not fail a launch: they are
                kept for :meth:`take_warnings`.
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
        slots: list[tuple[int, int]] = []  # (0 pointer / 1 int, value)
        for n, (param, arg) in enumerate(zip(spec.params, args), start=1):
            where = f"launch of {kernel}: argument {n} `{param.name}` ({param.ctype})"
            if param.kind == "ptr":
                if not isinstance(arg, EmulatorArray):
                    raise LaunchError(f"{where} must be a device array of the emulator backend "
                                      f"(got {type(arg).__name__})")
                slots.append((0, arg.address))
            elif param.kind == "int":
                if isinstance(arg, bool) or not isinstance(arg, (int, np.integer)):
                    raise LaunchError(f"{where} must be an int (got {type(arg).__name__})")
                if not -2**31 <= int(arg) < 2**31:
                    raise LaunchError(f"{where} = {int(arg)} does not fit a 32-bit int")
                slots.append((1, int(arg)))
            else:
                raise LaunchError(f"{where}: parameter kind {param.kind!r} is not supported by the emulator")
        allocs = self._device_memory().live() if self.checks or id(module) in self._profiling else []
        name = kernel.encode()
        if self.sample not in SAMPLE_MODES:
            raise LaunchError(f"launch of {kernel}: unknown sample mode {self.sample!r}")
        sample = sampled_blocks(grid.x * grid.y * grid.z, self.schedule_seed) if self.sample else ()
        request = b"".join([
            _LAUNCH_HEAD.pack(grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes,
                              self.limits.max_shared_bytes, self.workers, SCHEDULES[self.schedule], self.schedule_seed,
                              int(self.checks), int(self.detect_deadlock), int(self.shared_fill) & 0xFFFFFFFF,
                              INTERLEAVE.get(self.schedule, 0) if self.checks else 0, SAMPLE_MODES[self.sample],
                              len(sample), *sample, *([0] * (_MAX_SAMPLE - len(sample))),
                              len(allocs), len(slots), len(name)),
            name, *(self._alloc_entry(b, n) for b, n in allocs), *(struct.pack("<iq", k, v) for k, v in slots)])
        with self._lock:
            self._activate(module)
            try:
                raw, findings_text, output, cut = module.launch(request)
            except ExecutorDied as exc:
                err = KernelError(f"{kernel}: {exc}", kind=exc.kind)
                err.findings = []
                raise err from None
            self._add_output(output, cut)
        res = _LaunchResult.from_buffer_copy(raw)
        status = res.status
        findings = _parse_findings(module, findings_text) if res.nfindings else []
        warnings = [f for f in findings if f.kind in WARNING_KINDS]
        if status == _SG_OK and len(warnings) == len(findings):
            if warnings:
                with self._lock:
                    self._warnings.extend(warnings)
            return
        findings = [f for f in findings if f.kind not in WARNING_KINDS] + warnings  # the fatal ones first
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
            text += _more_findings(findings[1 if text.startswith(f"{kernel}: {first.message}") else 0:])
            err = KernelError(text, kind=kind)
            err.findings = findings
            err.completed = status == _SG_OK  # only collected findings (a race): every thread ran to its end
            raise err
        err = KernelError(f"{kernel}: {message}", kind=kind)
        err.findings = []
        raise err

    # -- profile --------------------------------------------------------------------------------
    def start_profile(self, module: Module, *, blocks: int = 1) -> None:
        """Count bank conflicts and global sectors in the next launches of ``module``, in blocks
        ``0 .. blocks - 1`` of each launch (0: every block); see :mod:`grader.profile`. Totals from
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
        from grader.profile import parse_profile

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
        """Facts for the report: backend, compiler, target GPU, workers, schedule, checks, sandbox."""
        schedule = self.schedule + (f" (seed {self.schedule_seed})" if self.schedule == "random" else "")
        checks = "off" if not self.checks else "on" if not self.sample else f"on (sampled blocks: {self.sample})"
        return {"backend": self.name, "compiler": self.toolchain.version_line,
                "target": f"sm_{self.target_arch} (__CUDA_ARCH__ {self.target_arch * 10})", "workers": str(self.workers),
                "schedule": schedule, "checks": checks,
                "nvcc check": "on" if self.nvcc_check else "off",
                "sandbox": self.sandbox.describe(seccomp_problem=self._seccomp_problem)}

    def close(self) -> None:
        """Stop every module's executor (freeing its fiber stacks and arenas). Idempotent; a module
        launched again afterwards starts a new executor."""
        with self._lock:
            for m in list(self._modules):
                m.stop()
            self._active = None


#: Findings a launch error's text lists after the first one (the rest are counted: "and N more").
_FINDINGS_LISTED = 8


def _more_findings(rest: list[Finding]) -> str:
    """``"\\nN more distinct findings: kind at file:line; ..."`` for the findings after the one a launch
    error leads with: all N of them up to :data:`_FINDINGS_LISTED`, then ``"and M more"``; ``""`` for none."""
    if not rest:
        return ""
    listed = "; ".join(f"{f.kind} at {f.file}:{f.line}" if f.file else f"{f.kind} at an unknown line"
                       for f in rest[:_FINDINGS_LISTED])
    more = f"; and {len(rest) - _FINDINGS_LISTED} more" if len(rest) > _FINDINGS_LISTED else ""
    return f"\n{len(rest)} more distinct finding{'s' if len(rest) > 1 else ''}: {listed}{more}"


def _first_error(log: str) -> str:
    """A compiler log's first error line (gcc's ``f.cu:4:5: error: ...``, nvcc's ``f.cu(4): error: ...``),
    else its first line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"(?:^|:\s*)(?:fatal )?error(?: #[\w-]+)?:", line)]
    return (errors or lines or [""])[0]


def _ids(t: tuple[int, int, int] | None) -> str:
    return "(?)" if t is None else f"({t[0]}, {t[1]}, {t[2]})"


_RUNTIME_FILES = ("prelude.h", "sg_abi.h")


def _addr2line(path: Path, offsets: Sequence[int], sandbox: Sandbox, *,
               filename: str = "") -> dict[int, tuple[str, int] | None]:
    """(file, line) of each code offset of a shared object: the innermost frame in the student's
    code (frames in the emulator's prelude and in system headers are skipped), named as the
    ``#line`` markers name it (``filename``: the student's file, also for a module from the compile
    cache, whose debug information holds the folder it was first compiled in). addr2line runs in
    the sandbox: the shared object is a file the student shaped."""
    out: dict[int, tuple[str, int] | None] = {o: None for o in offsets}
    tool = shutil.which("addr2line")
    if not tool or not offsets:
        return out
    cmd = sandbox.command([tool, "-e", str(path), "-i", "-a", *(hex(o) for o in offsets)], read_only=[path])
    try:
        proc = subprocess.run(cmd.argv, env=cmd.env, cwd=cmd.cwd, capture_output=True, text=True, errors="replace",
                              timeout=30, stdin=subprocess.DEVNULL)
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

    def shown(f: str) -> str:  # the name the #line markers gave, not the folder it was compiled in
        if f.startswith(folder):
            return f[len(folder):]
        return filename if filename and f.endswith(os.sep + filename) else f  # a module from the compile cache
    for o in offsets:
        cands = [(shown(f), n) for f, n in frames.get(o, [])]
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


#: A third (or further) code location in a finding's message: ``{@<hex offset>}``, resolved like
#: the finding's own two (``{L}``, ``{O}``).
_CODE_AT = re.compile(r"\{@([0-9a-f]+)\}")


def _parse_findings(module: EmulatorModule, text: str) -> list[Finding]:
    rows = [line.split("\t", 9) for line in text.splitlines() if line.count("\t") >= 9]
    offsets = sorted({int(loc[1:], 16) for r in rows for loc in (r[1], r[2]) if loc.startswith("@")}
                     | {int(h, 16) for r in rows for h in _CODE_AT.findall(r[9])})
    resolved = module.resolve(offsets)

    def code_at(m: re.Match[str]) -> str:
        file, line = _split_loc("@" + m.group(1), resolved)
        return f"{file}:{line}" if file else "an unknown line"
    findings: list[Finding] = []
    seen: set[tuple] = set()
    for kind, loc, other, block, thread, oblock, othread, has_other, _linear, message in rows:
        file, line = _split_loc(loc, resolved)
        ofile, oline = _split_loc(other, resolved)
        where = f"{file}:{line}" if file else "an unknown line"
        owhere = f"{ofile}:{oline}" if ofile else "an unknown line"
        message = message.replace("{L}", where).replace("{O}", owhere)
        message = _CODE_AT.sub(code_at, message)
        if kind == "undefined-shift" and (file, line) in module.sum_shifts:
            op, sign = module.sum_shifts[file, line]
            message += (f"; check the operator precedence: `{sign}` binds tighter than `{op}`"
                        + (" (GPU Gems' CONFLICT_FREE_OFFSET needs parentheses)" if op == ">>" and sign == "+" else ""))
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
    """A fatal error's message with the first matching finding's locations filled in (or its advice,
    which :func:`_parse_findings` may add to a finding: the error's message is the runtime's)."""
    if "{L}" not in message and "{O}" not in message:
        head = message[:message.rfind(" (block")] if " (block" in message else message
        grown = next((f for f in findings if head and f.message != head and f.message.startswith(head)), None)
        return message if grown is None else grown.message + message[len(head):]
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
