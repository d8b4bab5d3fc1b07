"""The assignment's parts: each part's file, kernel contract, size limit and launch geometry.

The grader owns every host-side step. Students write only kernels; the grader prepends a
*part header* (:func:`part_header`) that defines ``scan_t``, ``BLOCK_SIZE`` (and, for Part 5,
``ITEMS_PER_THREAD``) as compile-time constants and declares the contract's kernels
``extern "C"``, so a kernel whose signature differs from the contract is not found (and is
reported as such) instead of being launched with the wrong arguments.

Each part's launch plan (grid, block, dynamic shared memory and the buffers the grader allocates
for its kernels) is in :mod:`grader.assignment.plans`, keyed by the part's key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

import numpy as np

from grader.core.kernels import KernelSpec, Param


class Geometry(Protocol):
    """What a part's rules read of its config (:class:`grader.assignment.config.PartConfig` is one):
    named here so that this module needs nothing of the config, which needs the parts."""

    block_size: int
    items_per_thread: int | None

#: The C type of ``scan_t`` for each supported numpy dtype.
C_TYPES = {np.dtype(np.int32): "int", np.dtype(np.float32): "float"}
#: dtype names as config and reports spell them.
DTYPES = {"int32": np.dtype(np.int32), "float32": np.dtype(np.float32)}
#: Where the reference solutions live, one file per part named as the part's (absent from a student
#: release).
SOLUTIONS = Path(__file__).resolve().parents[2] / "reference" / "solutions"


def _scan_params() -> tuple[Param, ...]:
    return (Param("in", "const scan_t*", "ptr"), Param("out", "scan_t*", "ptr"), Param("n", "int", "int"))


@dataclass(frozen=True)
class PartSpec:
    """One part of the assignment.

    Attributes:
        key: the config key and id (``part1_naive``).
        number: the part's number in the handout.
        title: a short human title.
        filename: the student's file (``part1_naive.cu``).
        kernels: the contract's kernels.
        inclusive: True for an inclusive scan, False for exclusive.
        max_n: the largest n the contract admits, as a function of BLOCK_SIZE (None: unbounded).
        items_per_thread: whether the part takes ITEMS_PER_THREAD from the config.
        tile: elements per tile of a part that scans tiles, one per block, as a function of
            BLOCK_SIZE and ITEMS_PER_THREAD (Part 4: 2*BLOCK_SIZE, Part 5:
            BLOCK_SIZE*ITEMS_PER_THREAD); None for a part of one block (Parts 1-3). Its plan
            (:data:`grader.assignment.plans.PLANS`) launches one block per tile, and a wrong output names
            the first wrong tile.
        adds: the additions the part's algorithm performs on n elements, ``adds(n, block_size,
            items_per_thread)`` (:func:`hillis_steele_adds`, :func:`blelloch_adds`,
            :func:`hierarchical_adds`, :func:`single_pass_adds`): the count of the analysis table's
            GFLOPS (:mod:`grader.grading.analysis`); adds_formula: the same in words, for the reports.
        independent_blocks: whether each block of its launches does its work without waiting on
            another block (Parts 1-4: a block scans its own tile). Above ``emulator.checks_max_n``
            the checks run on a sample of each launch's blocks (the first, the last and a few drawn
            from the case's seed): where this holds, only the sampled blocks run there, so the
            checks cost the same at every n; where it does not (Part 5: a block spin-waits on the
            status of the tiles before it, a decoupled look-back), every block runs and only the
            sampled ones are checked.
        challenge: whether this is the assignment's challenge part (Part 5; at most one part is,
            :data:`CHALLENGE_PART`): the class report lists its timing first and names it so, and
            Gradescope's leaderboard ranks students by its largest timed run.
        reference: the part's reference function, ``reference(x)`` for an input x of shape (n,)
            (int32 or float32): the expected output, shape (n,), int32 for int32 (wrapping as the
            GPU's adds do) and float64 for float32. None (Parts 1-5): the prefix sum, inclusive or
            exclusive as :attr:`inclusive` says (:func:`grader.grading.case.inputs.reference_output`,
            threaded for long int32 inputs). A part with its own reference is compared exactly, in
            float32 too (the error bound of :func:`grader.grading.case.checks.error_bound` is a prefix
            sum's), and its wrong outputs get none of the hints that read an output as a prefix sum.
        inputs: how the part's inputs are drawn, ``inputs(rng, count, dtype)``: ``count`` elements
            of ``dtype`` (int32 or float32) from the numpy Generator ``rng``, which is a function of
            the case's seed, part, n and dtype only (long inputs are drawn in chunks, one call per
            chunk). None (Parts 1-5): :func:`grader.grading.case.inputs.make_input`'s draws (int32
            from the config's ``inputs:`` range; float32 exact or fractional).
    """

    key: str
    number: int
    title: str
    filename: str
    kernels: tuple[KernelSpec, ...]
    inclusive: bool
    max_n: Callable[[int], int] | None
    items_per_thread: bool = False
    tile: Callable[[int, int | None], int] | None = None
    independent_blocks: bool = True
    adds: Callable[[int, int, int | None], int] | None = None
    adds_formula: str = ""
    challenge: bool = False
    reference: Callable[[np.ndarray], np.ndarray] | None = None
    inputs: Callable[[np.random.Generator, int, np.dtype], np.ndarray] | None = None

    @property
    def prefix_sum(self) -> bool:
        """Whether the part's reference is the prefix sum (no :attr:`reference` of its own), which
        float32's error bound and the grader's hints on a wrong output assume."""
        return self.reference is None

    @property
    def any_length(self) -> bool:
        """Whether the contract admits any n (no :attr:`max_n`: Parts 4 and 5), so the part's
        reference solution scans the sizes of a bandwidth benchmark (:mod:`grader.tools.bench`)."""
        return self.max_n is None

    def limit(self, block_size: int) -> int | None:
        """The largest admissible n for this BLOCK_SIZE, or None when any n is allowed."""
        return None if self.max_n is None else self.max_n(block_size)

    def tile_of(self, pc: Geometry) -> int | None:
        """Elements per tile under ``pc`` (its ``block_size`` and ``items_per_thread``), or None for a
        part of one block (see :attr:`tile`)."""
        return None if self.tile is None else self.tile(pc.block_size, pc.items_per_thread)

    def addition_depth(self, pc: Geometry, n: int) -> int:
        """The most float additions any algorithm within this part's contract can chain between
        one input element and one output element of an n-element scan: what the error bound of a
        float32 output allows for (:func:`grader.grading.case.checks.error_bound`). The safe maximum for the
        contract, whatever the student's algorithm inside it:

        - one block (Parts 1-3): n - 1 (a sequential loop in one thread);
        - tiles scanned independently, then their sums scanned again by the same kernels (Part 4):
          a tile (at most tile - 1 additions, sequential inside it) plus one addition of its offset,
          at each of the hierarchy's levels;
        - one pass with a look-back (Part 5): a tile, plus the sums of every tile before it added
          one by one (a serial look-back), plus the offset.

        Never more than n. Returns a non-negative int."""
        tile = self.tile_of(pc)
        if tile is None or n <= 1:
            return max(n - 1, 0)
        if self.hierarchical:
            return min(n, len(tile_levels(n, tile)) * tile)
        return min(n, tile + -(-n // tile))

    @property
    def hierarchical(self) -> bool:
        """Whether the part scans its tiles independently and then their sums again, level by level,
        with the same kernels (Part 4: :func:`tile_levels`); False for one block and for a single
        pass (Part 5, whose tiles take their offsets from a look-back)."""
        return self.tile is not None and self.independent_blocks

    def add_count(self, n: int, pc: Geometry) -> int | None:
        """The additions of :attr:`adds` on n elements under ``pc`` (its ``block_size`` and
        ``items_per_thread``), or None for a part without a formula."""
        return None if self.adds is None else self.adds(n, pc.block_size, pc.items_per_thread)

    @property
    def label(self) -> str:
        """``Part 2`` — how the handout names it."""
        return f"Part {self.number}"


def _log2_ceil(n: int) -> int:
    return max(0, (n - 1).bit_length())


def hillis_steele_adds(n: int) -> int:
    """Additions of the Hillis-Steele inclusive scan of n elements (Hillis and Steele, "Data
    parallel algorithms", CACM 1986; GPU Gems 3, ch. 39.2.1): at step d = 0 .. ceil(log2 n) - 1
    every element i >= 2^d adds the element 2^d before it, n - 2^d adds, so n·log2 n - (n - 1)
    for n a power of two: O(n log n) against the sequential scan's n - 1."""
    return sum(n - (1 << d) for d in range(_log2_ceil(n)))


def blelloch_adds(tile: int) -> int:
    """Additions of the Blelloch (work-efficient) scan of one tile of ``tile`` elements, a power of
    two (Blelloch, "Prefix sums and their applications", 1990; GPU Gems 3, ch. 39.2.2): tile - 1 in
    the up-sweep (reduce) and tile - 1 in the down-sweep, 2·(tile - 1). A block scans its whole
    tile whatever n is (the padding holds zeros), so a partial tile costs as much as a full one."""
    return 2 * (tile - 1) if tile > 1 else 0


def tile_levels(n: int, tile: int) -> tuple[int, ...]:
    """The element counts a hierarchical scan (Part 4) scans at each of its levels: n, then its
    ceil(n / tile) tile sums, and so on, ending with the first level that fits in one tile
    (n = 262143, tile 512: ``(262143, 512)``, two levels; n = 512: ``(512,)``). Each level's tile
    count is the next level's element count; the last level is one tile."""
    counts = [n]
    while counts[-1] > tile:
        counts.append(-(-counts[-1] // tile))
    return tuple(counts)


def hierarchical_adds(n: int, tile: int) -> int:
    """Additions of the hierarchical (scan-then-propagate) scan of n elements in tiles of ``tile``:
    each of the t = ceil(n / tile) tiles a Blelloch scan (:func:`blelloch_adds`); with more than one
    tile, the t tile sums scanned the same way (recursively, each level ``tile`` times smaller) and
    the offsets added to all n elements. For the course's example (tile 1024, n = 16,000,000):
    2·1023·15625 + 2·1023·16 + 2·1023 + 15625 + 16,000,000."""
    count = -(-n // tile)
    adds = count * blelloch_adds(tile)
    return adds + (hierarchical_adds(count, tile) + n if count > 1 else 0)


def single_pass_adds(n: int, block_size: int, items: int) -> int:
    """Additions of the single-pass scan with decoupled look-back (Merrill and Garland, "Single-pass
    parallel prefix scan with decoupled look-back", NVIDIA 2016) of n elements in tiles of
    T = block_size·items: per tile, each thread's items - 1 adds reducing its items, a Blelloch
    scan of the block's partials (:func:`blelloch_adds` of block_size), block_size adds of the
    tile's exclusive prefix to each thread's, T adds applying them to the items, and one add in
    the look-back (the tile's inclusive prefix); 2·T + 2·block_size - 1 per tile (a look-back
    that reads several predecessors adds a few more)."""
    tile = block_size * items
    per_tile = block_size * (items - 1) + blelloch_adds(block_size) + block_size + tile + 1
    return -(-n // tile) * per_tile


PARTS: dict[str, PartSpec] = {
    p.key: p
    for p in (
        PartSpec("part1_naive", 1, "naive inclusive scan of one block (Hillis-Steele)", "part1_naive.cu",
                 (KernelSpec("naive_scan", _scan_params()),), True, lambda b: b,
                 adds=lambda n, b, _: hillis_steele_adds(n),
                 adds_formula="Hillis-Steele: sum over d < ceil(log2 n) of (n - 2^d) adds, n·log2 n - (n - 1) "
                              "for n a power of two"),
        PartSpec("part2_blelloch", 2, "work-efficient exclusive scan of one block (Blelloch)",
                 "part2_blelloch.cu", (KernelSpec("blelloch_scan", _scan_params()),), False, lambda b: 2 * b,
                 adds=lambda n, b, _: blelloch_adds(2 * b),
                 adds_formula="Blelloch: 2·(T - 1) adds on the block's tile of T = 2·BLOCK_SIZE elements "
                              "(up-sweep and down-sweep T - 1 each)"),
        PartSpec("part3_conflict_free", 3, "Blelloch scan without shared-memory bank conflicts",
                 "part3_conflict_free.cu", (KernelSpec("blelloch_scan_cf", _scan_params()),), False,
                 lambda b: 2 * b, adds=lambda n, b, _: blelloch_adds(2 * b),
                 adds_formula="Blelloch: 2·(T - 1) adds on the block's tile of T = 2·BLOCK_SIZE elements "
                              "(padding changes addresses, not adds)"),
        PartSpec("part4_any_size", 4, "exclusive scan of any length (hierarchical)", "part4_any_size.cu",
                 (KernelSpec("scan_tiles", (Param("in", "const scan_t*", "ptr"), Param("out", "scan_t*", "ptr"),
                                            Param("tile_sums", "scan_t*", "ptr"), Param("n", "int", "int"))),
                  KernelSpec("add_tile_offsets", (Param("out", "scan_t*", "ptr"),
                                                  Param("tile_offsets", "const scan_t*", "ptr"),
                                                  Param("n", "int", "int")))),
                 False, None, tile=lambda b, _: 2 * b, adds=lambda n, b, _: hierarchical_adds(n, 2 * b),
                 adds_formula="hierarchical Blelloch: 2·(T - 1) adds per tile of T = 2·BLOCK_SIZE, the tile "
                              "sums' levels scanned alike, and one add per element per level for the offsets"),
        PartSpec("part5_single_pass", 5, "single-pass exclusive scan with decoupled look-back (challenge)",
                 "part5_single_pass.cu",
                 (KernelSpec("scan_single_pass", (Param("in", "const scan_t*", "ptr"), Param("out", "scan_t*", "ptr"),
                                                  Param("n", "int", "int"),
                                                  Param("tile_status", "unsigned long long*", "ptr"),
                                                  Param("tile_counter", "unsigned int*", "ptr"))),),
                 False, None, items_per_thread=True, tile=lambda b, items: b * items, independent_blocks=False,
                 challenge=True,
                 adds=lambda n, b, items: single_pass_adds(n, b, items),
                 adds_formula="single pass: 2·T + 2·BLOCK_SIZE - 1 adds per tile of T = BLOCK_SIZE·ITEMS_PER_THREAD "
                              "(each thread's serial reduce and apply, a Blelloch scan of the block's partials, "
                              "one look-back add)"),
    )
}


#: The key of the challenge part (:attr:`PartSpec.challenge`), or None when no part is one.
CHALLENGE_PART: str | None = next((p.key for p in PARTS.values() if p.challenge), None)


def part_header(part: PartSpec, *, block_size: int, dtype: np.dtype, items_per_thread: int | None = None) -> str:
    """The text the grader puts before a student's file, ending in ``#line 1 "<filename>"``.

    Raises:
        KeyError: ``dtype`` has no C type here.
        ValueError: the part needs ITEMS_PER_THREAD and none was given.
    """
    lines = ['#line 1 "<scangrade part header>"', f"#define BLOCK_SIZE {block_size}"]
    if part.items_per_thread:
        if items_per_thread is None:
            raise ValueError(f"{part.key} needs items_per_thread")
        lines.append(f"#define ITEMS_PER_THREAD {items_per_thread}")
    lines += [
        f"typedef {C_TYPES[np.dtype(dtype)]} scan_t;",
        'extern "C" {',
        *(k.declaration() + ";" for k in part.kernels),
        "}",
        f'#line 1 "{part.filename}"',
    ]
    return "\n".join(lines) + "\n"


def part_source(part: PartSpec, source: str, *, pc: Geometry, dtype: str) -> str:
    """The whole translation unit :func:`grader.grading.compile.compile_part` compiles:
    :func:`part_header` (BLOCK_SIZE and ITEMS_PER_THREAD from ``pc``, ``scan_t`` from ``dtype``,
    ``int32`` or ``float32``) before the file's text ``source``."""
    header = part_header(part, block_size=pc.block_size, dtype=DTYPES[dtype], items_per_thread=pc.items_per_thread)
    return header + source
