"""Launch plans: each part's device buffers and kernel launches for one input, keyed by part.

A plan allocates every buffer a part's kernels take (each with poisoned guard zones, see
:class:`Run`) and returns the launches as a replayable :class:`Plan`, so a correctness case runs
it once and a timed case replays it. Besides the launches, a plan holds what is the part's own
around them: its resets (what every run must redo first, outside a timed window) and its checks
after the launches (Part 5's ticket counter). :data:`PLANS` holds one plan function per part key
of :data:`grader.assignment.parts.PARTS` (whose :class:`~grader.assignment.parts.PartSpec` holds the part's other rules:
its contract, its size limit, its tile); :func:`prepare` looks it up.

The plans (dynamic shared memory in bytes, ``S = sizeof(scan_t)``, ``B = BLOCK_SIZE``,
``I = ITEMS_PER_THREAD``):

- Part 1 ``naive_scan``: grid 1, block B, ``2*B*S`` bytes (room for a double buffer).
- Part 2 ``blelloch_scan``: grid 1, block B, ``2*B*S`` bytes (two elements per thread).
- Part 3 ``blelloch_scan_cf``: grid 1, block B, ``(2*B + (2*B >> 5) + (2*B >> 10))*S`` bytes
  (two elements per thread plus the conflict-free padding, LOG_NUM_BANKS = 5).
- Part 4 ``scan_tiles``: grid ``ceil(n / (2*B))``, block B, ``2*B*S`` bytes; then, when more than
  one tile, the tile sums are scanned the same way (recursively) and ``add_tile_offsets`` runs with
  grid ``ceil(n / (2*B))``, block B, no dynamic shared memory: block ``b`` adds
  ``tile_offsets[b]`` to the ``2*B`` elements of tile ``b``.
- Part 5 ``scan_single_pass``: grid ``ceil(n / (B*I))``, block B, ``B*I*S`` bytes; ``tile_status``
  (one 64-bit word per tile) and ``*tile_counter`` are zeroed by the grader before every run (its
  resets), and ``*tile_counter`` must end equal to the grid (its check: one ticket per block).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import secrets

import numpy as np

from grader.backends import BACKENDS
from grader.backends.base import Backend, DeviceArray, Module
from grader.assignment.config import PartConfig
from grader.core.errors import LaunchError
from grader.assignment.parts import PartSpec
from grader.core.results import CaseFinding, FailureKind

#: Elements of poison on each side of every device buffer.
GUARD = 256
#: The 32-bit pattern every output and guard word holds before a launch (memset as a 32-bit word):
#: -1086374081 as int32, -0.7470588 as float32. Chosen so that no scan of the cases' inputs yields it
#: and any arithmetic on it changes its bits (an unwritten or ``+=``-ed word shows), and so that it
#: is no NaN, no denormal and neither of ``grader.grading.case.run.SHARED_FILLS``; the reasoning in
#: full is in docs/throughput.md, "Figures behind the code's constants".
POISON_BITS = 0xBF3F3F3F
#: The fewest elements of a buffer verified where it lives, on a backend that checks on the device
#: (the trait ``checks_on_device``): its digest taken when its input is copied in (:class:`Guarded`)
#: and its output checked there (:func:`grader.grading.case.checks.check_run`); smaller ones cost less to
#: read back than a kernel's launch.
DEVICE_CHECK_MIN = 1 << 16
def checks_on_device(backend: Backend) -> bool:
    """Whether ``backend``'s row of :data:`grader.backends.BACKENDS` has the trait
    ``checks_on_device`` (an unknown name: False)."""
    kind = BACKENDS.get(getattr(backend, "name", ""))
    return bool(kind and kind.checks_on_device)


#: The secret salt of this process's digests (:meth:`grader.backends.base.Backend.digest`).
DIGEST_SALT = secrets.randbits(64)


@dataclass
class Guarded:
    """A device buffer with a poisoned guard zone of :data:`GUARD` elements on each side.

    Attributes:
        name: the contract's name of the buffer (``out``, ``tile_sums (level 1)``), for messages.
        full: the whole allocation, guard zones included (``count + 2*GUARD`` elements).
        inner: the buffer the kernel gets: elements ``[GUARD, GUARD + count)`` of ``full``.
        count: elements inside the guard zones, which hold :data:`POISON_BITS` before the launches.
        output: whether the kernel writes it (poisoned again before every timed run).
        digest: the digest of what was copied in (:meth:`grader.backends.base.Backend.digest`,
            salt :data:`DIGEST_SALT`), taken where the backend checks on the device, ``count`` is
            at least :data:`DEVICE_CHECK_MIN` and the run has guard zones (not compute-sanitizer's
            replays); None otherwise. An input is then checked unchanged
            by its digest, not read back.
    """

    name: str
    full: DeviceArray
    inner: DeviceArray
    count: int
    output: bool
    digest: int | None = None


@dataclass
class Run:
    """The buffers of one run of a module on a backend, in allocation order.

    Attributes:
        dtype: ``scan_t`` (int32 or float32), the default dtype of :meth:`buffer`.
        guard: elements of guard zone on each side of every buffer (:data:`GUARD`; 0 for buffers of
            exactly their size, as compute-sanitizer's memcheck needs: see :mod:`grader.grading.sanitizer`).
    """

    backend: Backend
    module: Module
    dtype: np.dtype
    buffers: list[Guarded] = field(default_factory=list)
    guard: int = GUARD

    def buffer(self, name: str, count: int, init: np.ndarray | None = None, *, dtype: np.dtype | None = None,
               output: bool = True) -> Guarded:
        """Allocate a guarded buffer of ``count`` elements of ``dtype`` (default: the run's), fill it
        and its guard zones with :data:`POISON_BITS` on the device, then copy ``init`` (``count``
        elements) into it when given."""
        dtype = np.dtype(dtype or self.dtype)
        full = self.backend.alloc(count + 2 * self.guard, dtype)
        self.backend.label(full, name, self.guard, count)  # the guard zones are outside the buffer (checks)
        if full.nbytes:
            self.backend.memset32(full, POISON_BITS)  # on the device: no host copy of a 1 GiB buffer
        inner = full.view(self.guard, count)
        digest = None
        if init is not None:
            self.backend.to_device(np.ascontiguousarray(init, dtype=dtype), inner)
            if count >= DEVICE_CHECK_MIN and dtype.itemsize == 4 and self.guard and checks_on_device(self.backend):
                digest = self.backend.digest(inner, DIGEST_SALT)
        g = Guarded(name, full, inner, count, output, digest)
        self.buffers.append(g)
        return g


#: A check of a run once its launches are done: ``check(read)`` with ``read(buffer)`` the buffer's
#: elements as they are now (guard zones left out); a finding, or None when the rule holds.
Check = Callable[[Callable[[Guarded], np.ndarray]], "CaseFinding | None"]


@dataclass
class Plan:
    """A part's launches for one input, with every buffer allocated: replayable for timing.

    Attributes:
        out: the buffer checked against the reference scan.
        launches: run in order by :meth:`launch`; each blocks until its kernel is done.
        resets: what every run must redo before its launches besides poisoning the outputs (Part 5
            zeroes its status words and ticket counter): :meth:`run` does, and a timed run does it
            before its timed window, with the poisoning.
        checks: the part's own rules about its buffers after the launches (Part 5's ticket
            counter), checked with the output (:func:`grader.grading.case.checks.check_run`).
    """

    out: Guarded
    launches: list[Callable[[], None]]
    resets: list[Callable[[], None]] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    def reset(self) -> None:
        """Redo what every run needs before its launches (:attr:`resets`)."""
        for reset in self.resets:
            reset()

    def launch(self) -> None:
        """Launch every kernel of the plan, in order: what a timed run times.

        Raises:
            LaunchError, KernelError: from :meth:`grader.backends.base.Backend.launch`.
        """
        for launch in self.launches:
            launch()

    def run(self) -> None:
        """One whole run: :meth:`reset`, then :meth:`launch`.

        Raises:
            LaunchError, KernelError: from :meth:`grader.backends.base.Backend.launch`.
        """
        self.reset()
        self.launch()


#: A part's plan: ``(run, part, part config, input buffer, n) -> Plan``.
PlanFunction = Callable[[Run, PartSpec, PartConfig, Guarded, int], Plan]


def tiles(n: int, tile: int) -> int:
    """Tiles of ``tile`` elements that cover ``n`` elements: ``ceil(n / tile)``."""
    return (n + tile - 1) // tile


def _launcher(run: Run, kernel: str, *, grid: int, block: int, shared_bytes: int, args: list) -> Callable[[], None]:
    return lambda: run.backend.launch(run.module, kernel, grid=grid, block=block, shared_bytes=shared_bytes,
                                      args=args)


def _one_block(kernel: str, shared_elements: Callable[[int], int]) -> PlanFunction:
    """Parts 1-3: one launch of ``kernel`` with grid 1, block B and ``shared_elements(B)`` elements
    of dynamic shared memory, on ``(in, out, n)``."""
    def plan(run: Run, part: PartSpec, pc: PartConfig, d_in: Guarded, n: int) -> Plan:
        b = pc.block_size
        out = run.buffer("out", n)
        return Plan(out, [_launcher(run, kernel, grid=1, block=b, shared_bytes=shared_elements(b) * run.dtype.itemsize,
                                    args=[d_in.inner, out.inner, n])])
    return plan


def _hierarchical(run: Run, part: PartSpec, pc: PartConfig, d_in: Guarded, n: int) -> Plan:
    """Part 4: scan the tiles, scan the tile sums the same way, add the offsets back."""
    launches: list[Callable[[], None]] = []
    out = _hierarchy(run, pc.block_size, part.tile_of(pc), d_in, n, 0, launches)
    return Plan(out, launches)


def _hierarchy(run: Run, b: int, tile: int, d_in: Guarded, n: int, level: int, launches: list) -> Guarded:
    """One level of Part 4's plan (recursively, the levels above it); returns the level's output."""
    count = tiles(n, tile)
    suffix = "" if level == 0 else f" (level {level})"
    out = run.buffer("out" + suffix, n)
    sums = run.buffer("tile_sums" + suffix, count)
    launches.append(_launcher(run, "scan_tiles", grid=count, block=b, shared_bytes=tile * run.dtype.itemsize,
                              args=[d_in.inner, out.inner, sums.inner, n]))
    if count > 1:
        offsets = _hierarchy(run, b, tile, sums, count, level + 1, launches)
        launches.append(_launcher(run, "add_tile_offsets", grid=count, block=b, shared_bytes=0,
                                  args=[out.inner, offsets.inner, n]))
    return out


def _single_pass(run: Run, part: PartSpec, pc: PartConfig, d_in: Guarded, n: int) -> Plan:
    """Part 5: one launch over every tile, its status words and ticket counter zeroed before it (its
    resets), one ticket per block after it (its check)."""
    b = pc.block_size
    tile = part.tile_of(pc)
    count = tiles(n, tile)
    out = run.buffer("out", n)
    status = run.buffer("tile_status", count, np.zeros(count, np.uint64), dtype=np.dtype(np.uint64), output=False)
    counter = run.buffer("tile_counter", 1, np.zeros(1, np.uint32), dtype=np.dtype(np.uint32), output=False)
    resets = [lambda: run.backend.memset32(status.inner, 0), lambda: run.backend.memset32(counter.inner, 0)]
    launch = _launcher(run, "scan_single_pass", grid=count, block=b, shared_bytes=tile * run.dtype.itemsize,
                       args=[d_in.inner, out.inner, n, status.inner, counter.inner])
    return Plan(out, [launch], resets, checks=[lambda read: _ticket_finding(read(counter)[0], count)])


def _ticket_finding(counter: int, tiles: int) -> CaseFinding | None:
    """Part 5's ticket rule: every block takes one ticket, so ``*tile_counter`` (zeroed before the
    launch) ends equal to gridDim.x. A ``ticket`` finding when it does not, None when it does."""
    if int(counter) == tiles:
        return None
    return CaseFinding(FailureKind.TICKET, (
        f"*tile_counter is {int(counter)} after the launch, expected {tiles} (one ticket per block, "
        f"gridDim.x = {tiles} tiles): take each block's tile index from a ticket, "
        "t = atomicAdd(tile_counter, 1), shared through shared memory, not from blockIdx.x. CUDA does "
        "not promise that blocks start in blockIdx order, and the look-back makes a tile wait for the "
        "tiles before it: with blockIdx.x a block can wait on a tile whose block never gets a "
        "multiprocessor, and the GPU hangs; a ticket is only taken by a running block, so tile t's "
        "predecessors are always running"))


#: The plan of each part, by part key (the keys of :data:`grader.assignment.parts.PARTS`).
PLANS: dict[str, PlanFunction] = {
    "part1_naive": _one_block("naive_scan", lambda b: 2 * b),
    "part2_blelloch": _one_block("blelloch_scan", lambda b: 2 * b),
    "part3_conflict_free": _one_block("blelloch_scan_cf", lambda b: 2 * b + (2 * b >> 5) + (2 * b >> 10)),
    "part4_any_size": _hierarchical,
    "part5_single_pass": _single_pass,
}


def prepare(run: Run, part: PartSpec, pc: PartConfig, d_in: Guarded, n: int) -> Plan:
    """Allocate ``part``'s buffers in ``run`` and build its launches on the input ``d_in`` of n elements.

    Raises:
        LaunchError: ``part`` has no plan in :data:`PLANS`.
    """
    plan = PLANS.get(part.key)
    if plan is None:
        raise LaunchError(f"no launch plan for part {part.key}")
    return plan(run, part, pc, d_in, n)


@dataclass
class _Measured:
    """What :class:`_Measuring` hands out for a buffer: its size only."""

    count: int
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize

    def view(self, offset: int, count: int) -> "_Measured":
        return _Measured(count, self.dtype)


class LaunchConfig(NamedTuple):
    """One kernel launch of a plan: the kernel's name, its grid and block (threads), and its dynamic
    shared memory in bytes."""

    kernel: str
    grid: int
    block: int
    shared_bytes: int


class _Measuring:
    """A stand-in backend that records the size of every allocation and every launch, and does
    nothing else."""

    def __init__(self) -> None:
        self.allocations: list[int] = []
        self.launches: list[LaunchConfig] = []

    def launch(self, module, kernel: str, *, grid: int, block: int, shared_bytes: int, args) -> None:
        self.launches.append(LaunchConfig(kernel, int(grid), int(block), int(shared_bytes)))

    def alloc(self, count: int, dtype: np.dtype) -> _Measured:
        buffer = _Measured(int(count), np.dtype(dtype))
        self.allocations.append(buffer.nbytes)
        return buffer

    def label(self, *args) -> None:
        pass

    def memset32(self, *args) -> None:
        pass

    def to_device(self, *args) -> None:
        pass


def plan_allocations(part: PartSpec, pc: PartConfig, n: int, dtype: np.dtype) -> list[int]:
    """Bytes of every device allocation one run of ``part``'s plan makes for an input of ``n``
    elements of ``dtype``, the input's included, each with its guard zones, in allocation order:
    found by running the plan function of :data:`PLANS` against a backend that only records sizes,
    so the sizes follow the plans (Part 4's levels, Part 5's status words) as they are.

    Raises:
        LaunchError: ``part`` has no plan in :data:`PLANS`.
    """
    return _measured(part, pc, n, dtype).allocations


def plan_launches(part: PartSpec, pc: PartConfig, n: int, dtype: np.dtype) -> list[LaunchConfig]:
    """The launches one run of ``part``'s plan makes for an input of ``n`` elements of ``dtype``, in
    order, as :class:`LaunchConfig`: found as :func:`plan_allocations` finds the sizes (Part 4 has
    more levels at 2^28 than at 2^16), without a device.

    Raises:
        LaunchError: ``part`` has no plan in :data:`PLANS`.
    """
    measuring = _measured(part, pc, n, dtype)
    return measuring.launches


def _measured(part: PartSpec, pc: PartConfig, n: int, dtype: np.dtype) -> _Measuring:
    """``part``'s plan at ``n`` built and launched against :class:`_Measuring`."""
    measuring = _Measuring()
    run = Run(measuring, None, np.dtype(dtype))  # type: ignore[arg-type]  # the plan only allocates
    plan = prepare(run, part, pc, run.buffer("in", n, output=False), n)
    for launch in plan.launches:
        launch()
    return measuring
