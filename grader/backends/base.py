"""The backend protocol: what the grader asks of a GPU (PyCUDA) or of the CPU emulator.

Staged like CUDA itself: source -> :meth:`Backend.compile` -> :class:`Module` -> launch a kernel
by name with an explicit, validated launch configuration. Device memory is a
:class:`DeviceArray`: a typed 1-D buffer that can be sliced without copying (for guard zones).

Launch validation (:func:`validate_launch`) is shared, so a bad launch fails with the same
message on both backends.

What a backend can do beyond running kernels is declared on :class:`Backend`, each with a default
for a backend without it, so the grader asks the protocol and never the object's attributes: a
checker that checks launches as they run (:attr:`Backend.checks_accesses`, :meth:`Backend.take_warnings`),
thread orders (:attr:`Backend.schedules`, :meth:`Backend.set_schedule`), how the next launches run
(:class:`RunMode`, given to :meth:`Backend.set_run_mode` before each run: the checks, sampled
blocks, deadlock detection, the fill of unwritten shared memory), a lost context
(:attr:`Backend.broken`), a GPU lock (:meth:`Backend.gpu_lock_seconds`) and a host toolchain
(:attr:`Backend.toolchain`).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ClassVar, Sequence, Union

import numpy as np

from grader.core.errors import LaunchError
from grader.core.kernels import KernelSpec

#: A launch dimension as CUDA takes it: an int or a tuple of up to three ints.
DimLike = Union[int, Sequence[int]]


@dataclass(frozen=True)
class Dim3:
    """A CUDA ``dim3``: three positive extents."""

    x: int = 1
    y: int = 1
    z: int = 1

    @classmethod
    def of(cls, value: DimLike, *, what: str) -> "Dim3":
        """Build a Dim3 from an int or a tuple of up to 3 ints.

        Raises:
            LaunchError: ``"<what> must be an int or a tuple of up to 3 ints (got ...)"``.
        """
        if isinstance(value, Dim3):
            return value
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            parts = [int(value)]
        elif (isinstance(value, (tuple, list)) and 1 <= len(value) <= 3
              and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value)):
            parts = [int(v) for v in value]
        else:
            raise LaunchError(f"{what} must be an int or a tuple of up to 3 ints (got {value!r})")
        while len(parts) < 3:
            parts.append(1)
        return cls(*parts)

    @property
    def count(self) -> int:
        """x * y * z."""
        return self.x * self.y * self.z

    def __str__(self) -> str:
        return f"({self.x}, {self.y}, {self.z})"


@dataclass(frozen=True)
class LaunchLimits:
    """Hardware limits a launch must respect (CUDA compute capability 7.0 and later).

    Attributes:
        max_threads_per_block: threads in one block (1024).
        max_block: per-dimension block extents (1024, 1024, 64).
        max_grid: per-dimension grid extents (2^31 - 1, 65535, 65535).
        max_shared_bytes: static + dynamic shared memory per block without opt-in (48 KiB).
    """

    max_threads_per_block: int = 1024
    max_block: tuple[int, int, int] = (1024, 1024, 64)
    max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    max_shared_bytes: int = 48 * 1024


DEFAULT_LIMITS = LaunchLimits()


def validate_launch(*, kernel: str, grid: DimLike, block: DimLike, shared_bytes: int,
                    limits: LaunchLimits = DEFAULT_LIMITS) -> tuple[Dim3, Dim3]:
    """Check a launch configuration against GPU limits before either backend runs it.

    Args:
        kernel: kernel name, for messages.
        grid, block: an int or a tuple of up to 3 ints.
        shared_bytes: dynamic shared memory in bytes.

    Returns:
        ``(grid, block)`` as :class:`Dim3`.

    Raises:
        LaunchError: naming the kernel, the limit and the value.
    """
    g = Dim3.of(grid, what=f"launch of {kernel}: grid")
    b = Dim3.of(block, what=f"launch of {kernel}: block")
    for label, dim, maxima in (("grid", g, limits.max_grid), ("block", b, limits.max_block)):
        for axis, value, top in zip("xyz", (dim.x, dim.y, dim.z), maxima):
            if value < 1:
                raise LaunchError(f"launch of {kernel}: {label}.{axis} must be at least 1 (got {value})")
            if value > top:
                raise LaunchError(f"launch of {kernel}: {label}.{axis} = {value} exceeds the limit {top}")
    if b.count > limits.max_threads_per_block:
        raise LaunchError(f"launch of {kernel}: {b.count} threads per block exceeds the limit "
                          f"of {limits.max_threads_per_block}")
    if not isinstance(shared_bytes, (int, np.integer)) or shared_bytes < 0:
        raise LaunchError(f"launch of {kernel}: shared memory must be a non-negative int of bytes "
                          f"(got {shared_bytes!r})")
    if shared_bytes > limits.max_shared_bytes:
        raise LaunchError(f"launch of {kernel}: {shared_bytes} bytes of dynamic shared memory "
                          f"exceeds the limit of {limits.max_shared_bytes} bytes")
    return g, b

@dataclass(frozen=True)
class Finding:
    """One diagnosis of a checker: the emulator's checks (or its barrier divergence / deadlock
    detection), or NVIDIA compute-sanitizer on a GPU (:mod:`grader.grading.sanitizer`), in the same kinds
    and message form.

    Attributes:
        kind: a row of :data:`grader.core.kinds.KINDS`: a checker's kind (:data:`grader.core.kinds.CHECK_KINDS`)
            or a warning's (:data:`grader.core.kinds.WARNING_KINDS`), or ``undefined-shift`` (the
            emulator's shift check); ``tests/core/test_kinds.py`` checks every kind given.
        message: one line for a student: what, where (file:line), which block and thread.
        file, line: where it happened (the access, the barrier, the polling loop); ``None`` if unknown.
        other_file, other_line: for a race, the other access; for a divergence, the other barrier.
        block, thread: ids ``(x, y, z)`` of the thread that made the access.
        other_block, other_thread: ids of the other thread, where relevant. For a race, the other
            access is the one the checker saw first (the emulator's order; one a GPU may run either way).
        access: for a race, its kind in the emulator's order: ``read-after-write`` (the first access
            wrote, this one reads), ``write-after-read`` or ``write-after-write``; else None.
        address: for a race, the element both threads accessed, in words (``temp[37] (inside shared
            array temp, 256 elements)``, ``out[1025] (inside out, 5000 elements)``); else None.
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
    access: str | None = None
    address: str | None = None



#: How long the GPU may idle (the host between two runs: spot checks, resets), in ms, before a timed
#: run is preceded by a clock warm-up (:class:`ClockWarmup`).
CLOCK_IDLE_MS = 1.0
#: A run at least this long (ms) may have kept few multiprocessors busy (a one-thread kernel), after
#: which the clocks are low too.
CLOCK_LONG_RUN_MS = 1.0
#: The warm-up: every multiprocessor busy this long (ms) before the timed run's L2 flush.
CLOCK_WARMUP_MS = 1.0


class ClockWarmup:
    """When a timing's runs are each preceded by a clock warm-up (every multiprocessor busy for
    :data:`CLOCK_WARMUP_MS`, outside the timed window): before its first run (compiles and copies came
    before), and before every run once the GPU idled :data:`CLOCK_IDLE_MS` between two runs or ran
    one for :data:`CLOCK_LONG_RUN_MS` or more: from then on, until the timing ends.

    Why: a GPU lowers its clocks when idle or lightly loaded (a one-thread kernel) and raises them
    over about a millisecond of load (the driver's dynamic clocking: the CUDA programming guide
    leaves clocks to it, and the grader never sets them). Without the warm-up, a short kernel timed
    after a long one-thread kernel, or after tens of ms of host work, runs at lowered clocks, several
    times slower; warmed only after each long run, the run after the warmed one was slow again.
    docs/timing.md gives the measurements.
    """

    def __init__(self) -> None:
        self.started = False
        self.always = False

    def due(self, idle_ms: float, last_run_ms: float) -> bool:
        """Whether the next run is warmed up, given the ms the GPU idled since the last run ended
        and that run's time in ms (both ignored before the first run)."""
        if self.started and (idle_ms >= CLOCK_IDLE_MS or last_run_ms >= CLOCK_LONG_RUN_MS):
            self.always = True
        first, self.started = not self.started, True
        return first or self.always


#: The values of :attr:`RunMode.sample`: None, every block run and checked; ``only``, the sampled
#: blocks alone run; ``all``, every block runs and the sampled ones are checked.
SAMPLE_CHOICES = (None, "only", "all")


@dataclass(frozen=True)
class RunMode:
    """How a backend runs the launches after :meth:`Backend.set_run_mode`: a value the grader gives
    before each run of a case (:class:`grader.grading.case.run.CaseRun`) and before a phase's
    launches, never fields set by hand. What a backend cannot do it ignores: a GPU runs unchecked
    (its checker is compute-sanitizer, a run of its own) and finds no deadlock.

    Attributes:
        checks: the backend's own checks of every access and barrier (races, bounds, barrier
            divergence, unwritten shared memory) where it has them (:attr:`Backend.checks_accesses`).
        sample: with ``checks``, which blocks of each launch run and are checked (a value of
            :data:`SAMPLE_CHOICES`), the blocks drawn from the thread order's seed
            (:meth:`Backend.set_schedule`).
        detect_deadlock: a deadlock (every thread polls, nothing changes) ends the launch as a
            ``deadlock`` KernelError at once; False: it waits, like a hung GPU, for the deadline.
        shared_fill: the 32-bit word shared memory that no thread wrote holds before each launch
            (each block's at its start on the emulator; each multiprocessor's, written just before
            the launch, on a GPU); None: the backend's own (the emulator's fixed pattern; on a GPU,
            whatever the memory held).

    Raises:
        ValueError: ``sample`` is not one of :data:`SAMPLE_CHOICES`.
    """

    checks: bool = False
    sample: str | None = None
    detect_deadlock: bool = False
    shared_fill: int | None = None

    def __post_init__(self) -> None:
        if self.sample not in SAMPLE_CHOICES:
            raise ValueError(f"sample must be one of {SAMPLE_CHOICES} (got {self.sample!r})")


class DeviceArray(abc.ABC):
    """A typed 1-D buffer in device memory (GPU memory, or host memory under the emulator).

    Attributes:
        count: number of elements.
        dtype: numpy dtype of the elements.
    """

    count: int
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        """Size in bytes."""
        return self.count * self.dtype.itemsize

    @property
    @abc.abstractmethod
    def address(self) -> int:
        """The device address of element 0, as an int."""

    @abc.abstractmethod
    def view(self, offset: int, count: int) -> "DeviceArray":
        """Elements ``[offset, offset + count)`` of this buffer, sharing its memory."""


class Module(abc.ABC):
    """A compiled submission part: kernels looked up by name."""

    @abc.abstractmethod
    def has_kernel(self, name: str) -> bool:
        """Whether the module defines ``name`` with the contract's signature."""


class Backend(abc.ABC):
    """What the grader needs from an execution engine.

    Subclasses implement the underscored methods; :meth:`launch` validates first, so both
    backends refuse the same bad launches with the same message.
    """

    #: Its name in :data:`grader.backends.BACKENDS`, the table of its traits.
    name: ClassVar[str]

    limits: LaunchLimits = DEFAULT_LIMITS

    #: Set by the worker once a hidden case ran: memory the part freed may still hold the private
    #: inputs, so nothing of this backend's may serve another part (on a GPU, its CUDA context is not
    #: kept: :func:`grader.backends.pycuda.contexts.keep_context`).
    ran_hidden: bool = False

    #: Whether it checks each launch's accesses as it runs them (the emulator): :attr:`RunMode.checks`
    #: and :attr:`RunMode.sample` mean something there, and with the checks on it sees every read of
    #: shared memory that no thread wrote (:meth:`take_warnings`). False: a run's output is all it
    #: tells (a GPU; compute-sanitizer is a run of its own).
    checks_accesses: ClassVar[bool] = False
    #: The thread orders it can run a block's threads in (:meth:`set_schedule`); empty: one order,
    #: the hardware's.
    schedules: ClassVar[tuple[str, ...]] = ()
    #: Blocks a sampling launch (:attr:`RunMode.sample`) checks besides its first and last.
    sample_drawn: ClassVar[int] = 0
    #: Whether a fault lost its device context (a GPU's): nothing more may run on it, and it is not
    #: closed the ordinary way (the worker ends instead).
    broken: bool = False
    #: The host C++ toolchain its modules are compiled with (the emulator's
    #: :class:`grader.backends.emulator.build.EmulatorToolchain`), whose compiler also gives the notes on a
    #: wrong output; None where it has none (a GPU's compiles are nvcc's).
    toolchain = None

    def set_run_mode(self, mode: RunMode) -> None:
        """Run the next launches as ``mode`` says, until the next call. The default does nothing: a
        backend that neither checks nor fills shared memory."""

    def set_schedule(self, name: str, seed: int = 0) -> None:
        """Run each block's threads in the order ``name`` (one of :attr:`schedules`; a random one
        seeded by ``seed``) from the next launch.

        Raises:
            ValueError: ``name`` is not one of :attr:`schedules` (the default has none).
        """
        raise ValueError(f"the {self.name} backend has no thread order {name!r}"
                         + (f": choose one of {', '.join(self.schedules)}" if self.schedules else ""))

    @property
    def thread_order(self) -> tuple[str, int] | None:
        """The thread order the next launch runs in and its seed (see :meth:`set_schedule`); None
        where there is no choice of order."""
        return None

    def take_warnings(self) -> list[Finding]:
        """The warning findings (kinds of :data:`grader.core.kinds.WARNING_KINDS`: an
        ``uninitialized-read``...) of the launches that succeeded since the last call, once each;
        clears them. None here: a backend without checks of its own (a launch that raises carries
        its findings on the KernelError instead)."""
        return []

    def gpu_lock_seconds(self) -> dict[str, float]:
        """The seconds this process waited for its GPU's lock and held it alone
        (:attr:`grader.host.gpu_lock.GpuLock.seconds`), for the bench; empty without a lock."""
        return {}

    @abc.abstractmethod
    def compile(self, *, source: str, filename: str, kernels: Sequence[KernelSpec],
                workdir: Path) -> Module:
        """Compile one translation unit.

        Args:
            source: the full CUDA C++ text to compile (the grader's part header, then a
                ``#line 1 "<filename>"`` marker and the student's file).
            filename: the student's file name, for messages.
            kernels: the ``__global__`` functions to make launchable by name; all are declared
                ``extern "C"`` in the part header.
            workdir: a private scratch folder for build products.

        Raises:
            CompileError: with the compiler's command line and diagnostics.
        """

    @abc.abstractmethod
    def alloc(self, count: int, dtype: np.dtype) -> DeviceArray:
        """An uninitialised device buffer of ``count`` elements of ``dtype``."""

    def label(self, array: DeviceArray, name: str, inner_offset: int, count: int) -> None:
        """Name a buffer allocated with guard zones, for bounds messages.

        ``array`` (as returned by :meth:`alloc`) holds the buffer ``name`` in its elements
        ``[inner_offset, inner_offset + count)``; the elements around them are guard zones, which a
        backend that checks bounds reports as outside the buffer (``name[-1]``, ``name[count]``).
        The default does nothing (backends without bounds checks, e.g. PyCUDA).

        Raises:
            ValueError: the inner range does not fit ``array``.
        """
        if inner_offset < 0 or count < 0 or inner_offset + count > array.count:
            raise ValueError(f"label {name!r}: elements [{inner_offset}, {inner_offset + count}) do not fit a "
                             f"buffer of {array.count} elements")

    @abc.abstractmethod
    def to_device(self, host: np.ndarray, dest: DeviceArray) -> None:
        """Copy a contiguous 1-D host array into ``dest`` (same count and dtype)."""

    @abc.abstractmethod
    def to_host(self, src: DeviceArray) -> np.ndarray:
        """A new host copy of ``src`` (1-D, ``src.count`` elements of ``src.dtype``)."""

    def read(self, src: DeviceArray) -> np.ndarray:
        """``src``'s elements to look at now, not to keep: a new host copy (:meth:`to_host`) here; a
        backend whose buffers are host memory may give a read-only view instead, valid until the
        buffer is next written (a check of a run's buffers reads each once, after its launches)."""
        return self.to_host(src)

    def memset32(self, dest: DeviceArray, value: int) -> None:
        """Fill ``dest`` (whose size is a multiple of 4 bytes) with the 32-bit pattern ``value``.

        Backends with a device memset override this; the default copies a host array.
        """
        if dest.nbytes % 4:
            raise ValueError(f"memset32 of a buffer of {dest.nbytes} bytes (not a multiple of 4)")
        self.to_device(np.full(dest.nbytes // 4, value & 0xFFFFFFFF, dtype=np.uint32).view(dest.dtype), dest)

    def digest(self, words: DeviceArray, salt: int) -> int:
        """A 64-bit digest of a buffer's 32-bit words: the sum, modulo 2^64, of SplitMix64's finaliser
        of ``salt ^ (word << 32) ^ i`` over every word i (S. Vigna's ``splitmix64``; G. L. Steele, D.
        Lea and C. H. Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014). Equal
        digests under one secret ``salt`` mean equal contents but with chance 2^-64, whatever wrote
        them; the order of the sum does not matter, so a device computes it in parallel. Here on the
        host (a buffer read back); a backend whose memory is a device's computes it there.

        Args:
            words: a buffer of 4-byte elements (int32 or float32), its bits read as uint32.
            salt: 64 bits, secret to the kernel.
        """
        w = self.to_host(words).view(np.uint32).astype(np.uint64)
        x = (w << np.uint64(32)) ^ np.arange(w.size, dtype=np.uint64) ^ np.uint64(salt & (2 ** 64 - 1))
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
        return int(x.sum(dtype=np.uint64))

    def scan_check(self, out: DeviceArray, source: DeviceArray, *, inclusive: bool) -> int:
        """The first index at which ``out`` breaks the prefix sum of ``source`` (same length and dtype,
        int32 or float32), or -1: ``out[0]`` is ``source[0]`` (inclusive) or 0 (exclusive), and each
        ``out[i]`` is ``out[i-1]`` plus ``source[i]`` (inclusive) or ``source[i-1]``. int32 adds in
        32-bit wrap-around arithmetic; float32 adds exactly (in float64, which holds the sum of any
        two float32 values whose exponents differ by at most 29) and compares as numbers (-0 = 0, a
        NaN breaks it). By induction that is ``out`` equal to the exact scan everywhere, and the
        first break is the first wrong element; for float32 that is the reference only where every
        sum is exact (:func:`grader.grading.case.inputs.sums_are_exact`). Nothing but the two
        buffers is read. Here on the host; a backend whose memory is a device's checks there and
        reads back one index.
        """
        got = self.to_host(out)
        src = self.to_host(source)
        if got.size == 0:
            return -1
        if got.dtype.kind == "f":
            got, src = got.astype(np.float64), src.astype(np.float64)
        else:
            got, src = got.view(np.uint32), src.view(np.uint32)
        step = src if inclusive else np.concatenate([np.zeros(1, src.dtype), src[:-1]])
        want = np.empty_like(got)
        want[0] = step[0]
        np.add(got[:-1], step[1:], out=want[1:])
        bad = np.flatnonzero(~(got == want))
        return int(bad[0]) if bad.size else -1

    def time_ms(self, work, *, before, warmup: int, runs: int, flush_bytes: int) -> list[float]:
        """Time ``work()`` (which launches kernels) ``runs`` times after ``warmup`` untimed runs.

        Before every run ``before()`` is called (to poison outputs, zero status words), then
        ``flush_bytes`` are written to empty the L2 cache, queued just before the start event so
        that host launch latency is not counted.

        Returns:
            The times of the timed runs in milliseconds (CUDA events), in order.

        Raises:
            NotImplementedError: the backend cannot time (the emulator); see its ``times_kernels``
                (:data:`grader.backends.BACKENDS`).
            KernelError: a launch failed.
        """
        return self.time_interleaved_ms([("the kernel", work, before)], warmup=warmup, runs=runs,
                                        flush_bytes=flush_bytes)[0]

    def time_interleaved_ms(self, jobs: Sequence[tuple[str, Callable[[], None], Callable[[], None] | None]], *,
                            warmup: int, runs: int, flush_bytes: int,
                            after: Callable[[int, int], None] | None = None) -> list[list[float]]:
        """Time several works like :meth:`time_ms`, interleaved: each run times every job once, in
        turn, in reverse order on every other run (A B, B A, ...), so that clock changes, thermal
        drift or another process's load fall on all of them alike (a submission and the reference
        it is compared with). Where the GPU may have lowered its clocks before a run (it idled, or
        ran one long kernel: :class:`ClockWarmup`), every multiprocessor is kept busy for
        :data:`CLOCK_WARMUP_MS` first, outside the timed window, so that a run is not timed while
        the clocks climb back (the reference after a one-thread submission, otherwise).

        Args:
            jobs: ``(what, work, before)`` per job; ``what`` names it in errors ("the submission's
                kernel failed on the GPU while timed: ...").
            after: called as ``after(job, run)`` (indices into ``jobs`` and into the warm-up runs
                then the timed ones) once each job's run has ended, outside its timed window: what
                checks the output of a run (:func:`grader.grading.case.timing.time_case`); an exception it raises
                ends the timing and is raised again.

        Returns:
            Per job, the times of its timed runs in milliseconds, in order.

        Raises:
            NotImplementedError: the backend cannot time (the emulator: it runs kernels on the CPU,
                so its times say nothing about a GPU); see its ``times_kernels`` (:data:`grader.backends.BACKENDS`).
            KernelError: a launch failed.
        """
        raise NotImplementedError(f"the {self.name} backend does not time kernels")

    def gpu_shared(self):
        """A context manager around untimed device work that must not overlap another process's
        timed window (:mod:`grader.host.gpu_lock`); nothing on a backend that does not time."""
        import contextlib
        return contextlib.nullcontext()

    def gpu_alone(self):
        """A context manager around work that must have the GPU to itself (:mod:`grader.host.gpu_lock`,
        exclusive; re-entrant): one timed size's windows together, so other workers wait for it
        once; nothing on a backend that does not time."""
        import contextlib
        return contextlib.nullcontext()

    def time_copy_ms(self, src: DeviceArray, dst: DeviceArray, *, warmup: int, runs: int,
                     flush_bytes: int) -> list[float]:
        """Time a device-to-device copy of ``src`` into ``dst`` like :meth:`time_ms`; milliseconds per run."""
        raise NotImplementedError(f"the {self.name} backend does not time copies")

    def launch(self, module: Module, kernel: str, *, grid: DimLike, block: DimLike,
               shared_bytes: int, args: Sequence[Union[DeviceArray, int]]) -> None:
        """Launch ``kernel`` of ``module`` and wait for it to finish.

        Args:
            grid, block: an int or a tuple of up to 3 ints.
            shared_bytes: dynamic shared memory in bytes (``extern __shared__``).
            args: one per parameter: a DeviceArray for a pointer, a Python int for an ``int``.

        Raises:
            LaunchError: the launch configuration or the arguments are invalid.
            KernelError: the kernel failed while running.
        """
        g, b = validate_launch(kernel=kernel, grid=grid, block=block,
                               shared_bytes=shared_bytes, limits=self.limits)
        self._launch(module, kernel, grid=g, block=b, shared_bytes=int(shared_bytes), args=args)

    @abc.abstractmethod
    def _launch(self, module: Module, kernel: str, *, grid: Dim3, block: Dim3, shared_bytes: int,
                args: Sequence[Union[DeviceArray, int]]) -> None:
        """Backend-specific launch of an already validated configuration; blocks until done."""

    def fresh_globals(self, module: Module) -> None:
        """Make ``module``'s next launch find its ``__device__`` variables as they were when it was
        loaded: before each run a correctness case grades (:meth:`grader.grading.case.run.CaseRun.launch`),
        so that the run whose output is judged sees the same launch count as the case's checked run
        (docs/security.md, "The checked run and the graded run"). A backend whose modules keep state
        between launches overrides this; the default has none to reset.

        Raises:
            KernelError: the module could not be reset (its process died).
        """

    def describe(self) -> dict[str, str]:
        """Facts for the report: device name, versions. Override to add more."""
        return {"backend": self.name}

    def close(self) -> None:
        """Release the device (context, worker threads). Idempotent."""
