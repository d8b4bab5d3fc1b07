"""The assignment's parts: each part's file, kernel contract, size limits and launch plan.

The grader owns every host-side step. Students write only kernels; the grader prepends a
*part header* (:func:`part_header`) that defines ``scan_t`` and ``BLOCK_SIZE`` as compile-time
constants and declares the contract's kernels ``extern "C"``, so a kernel whose signature differs
from the contract is not found (and is reported as such) instead of being launched with the wrong
arguments.

Launch plans (dynamic shared memory in bytes, ``S = sizeof(scan_t)``, ``B = BLOCK_SIZE``):

- Part 1 ``naive_scan``: grid 1, block B, ``2*B*S`` bytes (room for a double buffer).
- Part 2 ``blelloch_scan``: grid 1, block B, ``2*B*S`` bytes (two elements per thread).
- Part 4 ``scan_tiles``: grid ``ceil(n / (2*B))``, block B, ``2*B*S`` bytes; then, when more than
  one tile, the tile sums are scanned the same way (recursively) and ``add_tile_offsets`` runs with
  grid ``ceil(n / (2*B))``, block B, no dynamic shared memory: block ``b`` adds
  ``tile_offsets[b]`` to the ``2*B`` elements of tile ``b``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from grader.backends.base import KernelSpec, Param

#: The C type of ``scan_t`` for each supported numpy dtype.
C_TYPES = {np.dtype(np.int32): "int"}


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
    """

    key: str
    number: int
    title: str
    filename: str
    kernels: tuple[KernelSpec, ...]
    inclusive: bool
    max_n: Callable[[int], int] | None

    def limit(self, block_size: int) -> int | None:
        """The largest admissible n for this BLOCK_SIZE, or None when any n is allowed."""
        return None if self.max_n is None else self.max_n(block_size)


PARTS: dict[str, PartSpec] = {
    p.key: p
    for p in (
        PartSpec("part1_naive", 1, "naive inclusive scan of one block (Hillis-Steele)", "part1_naive.cu",
                 (KernelSpec("naive_scan", _scan_params()),), True, lambda b: b),
        PartSpec("part2_blelloch", 2, "work-efficient exclusive scan of one block (Blelloch)",
                 "part2_blelloch.cu", (KernelSpec("blelloch_scan", _scan_params()),), False, lambda b: 2 * b),
        PartSpec("part4_any_size", 4, "exclusive scan of any length (hierarchical)", "part4_any_size.cu",
                 (KernelSpec("scan_tiles", (Param("in", "const scan_t*", "ptr"), Param("out", "scan_t*", "ptr"),
                                            Param("tile_sums", "scan_t*", "ptr"), Param("n", "int", "int"))),
                  KernelSpec("add_tile_offsets", (Param("out", "scan_t*", "ptr"),
                                                  Param("tile_offsets", "const scan_t*", "ptr"),
                                                  Param("n", "int", "int")))),
                 False, None),
    )
}


def part_header(part: PartSpec, *, block_size: int, dtype: np.dtype) -> str:
    """The text the grader puts before a student's file, ending in ``#line 1 "<filename>"``.

    Raises:
        KeyError: ``dtype`` has no C type here.
    """
    lines = [
        '#line 1 "<scangrade part header>"',
        f"#define BLOCK_SIZE {block_size}",
        f"typedef {C_TYPES[np.dtype(dtype)]} scan_t;",
        'extern "C" {',
        *(k.declaration() + ";" for k in part.kernels),
        "}",
        f'#line 1 "{part.filename}"',
    ]
    return "\n".join(lines) + "\n"
