"""What a compile of the emulator produces: :class:`EmulatorModule` (a shared object, run by its own
sandboxed executor process) and :class:`EmulatorArray` (a device buffer, in memory shared with the
executors), and how a module's code addresses are mapped back to the student's lines.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import weakref
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from grader.backends.base import DeviceArray, Module
from grader.backends.emulator.build import RUNTIME_DIR
from grader.backends.emulator.device_globals import globals_path, read_globals
from grader.backends.emulator.executor import Arena, Executor, ExecutorDied
from grader.toolchain.sandbox import Sandbox
from grader.core.kernels import KernelSpec
from grader.host.parent_death import tied_to_this_process

#: The runtime ABI this grader speaks (the executor's hello must name it; sg_host.h).
_ABI_VERSION = 5


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
        # The module's own writable data (device_globals.module_globals), as the executor snapshots it at load;
        # None: unknown (no link map), so fresh_globals starts a new executor instead.
        self._globals = read_globals(globals_path(path))
        self._restorable = False  # the running executor holds a snapshot of them
        self._dirty = False       # a launch ran since the module was loaded or its globals restored

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
            try:
                self._restorable = self._globals is not None and executor.snapshot_globals(self._globals) == ""
            except ExecutorDied:  # died taking the snapshot: load afresh without one (fresh_globals restarts)
                self._globals = None
                return self.load()
            self._dirty = False
            self._executor = executor
        return self._executor

    def fresh_globals(self) -> None:
        """Make the next launch find the module's ``__device__`` variables (every static of the
        student's translation unit) as they were when it was loaded, static constructors run: the
        executor copies its snapshot back, or, where it has none, the next launch starts a new
        executor (which loads the module afresh). Nothing to do before the first launch.

        Why: each run a case grades must behave as its checked run (docs/security.md, "The checked
        run and the graded run"); a kernel that counts its launches in a ``__device__`` variable would
        otherwise see a later launch number in the run whose output is judged than in the checked one.

        Raises:
            ExecutorDied: the executor died while restoring.
        """
        if not self._dirty or self._executor is None:
            return
        if self._restorable and self._executor.alive:
            try:
                if self._executor.restore_globals() == "":
                    self._dirty = False
                    return
            except ExecutorDied:
                self._executor = None
                raise
        self.stop()

    def launch(self, request: bytes) -> tuple[bytes, str, str, bool]:
        """Run a launch request in the executor (starting it if needed); see :meth:`Executor.launch`."""
        executor = self.load()
        self._dirty = True
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


class Allocation:
    """One device allocation (an :class:`EmulatorArray`'s owner): back to the arena when the last array
    viewing it is gone."""

    def __init__(self, arena: Arena, address: int) -> None:
        self.arena = arena
        weakref.finalize(self, arena.release, address)


def as_emulator_array(array: DeviceArray) -> EmulatorArray:
    """``array`` as an emulator buffer.

    Raises:
        ValueError: it belongs to another backend.
    """
    if not isinstance(array, EmulatorArray):
        raise ValueError(f"expected a buffer of the emulator backend, got {type(array).__name__}")
    return array


#: The runtime's headers: frames in them are not the student's line.
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
                              timeout=30, stdin=subprocess.DEVNULL, preexec_fn=tied_to_this_process())
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
