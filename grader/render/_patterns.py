"""Which sizes of a part give wrong values: the part's pattern against powers of two and its tile;
and, in one case, where across the array and its tiles the wrong values lie (:func:`wrong_places`).

One case's message says where its first wrong element sits (:func:`grader.grading.case.checks.diagnose`); a
part's cases together say which sizes fail. :func:`size_pattern` reads the sizes whose cases all
passed and the sizes with a wrong-values case (kind ``mismatch``), and names the first rule of
:data:`RULES` that tells the two apart exactly, each way: a rule fires only where every failing size
follows it and no passing size does, nor any size whose cases of one dtype all passed (a rule must
hold for every case it summarises). Sizes that failed otherwise (a race, a crash, a timeout) are
neither: their values say nothing sure. It needs two sizes of each, else it says nothing.

Only the cases it is given count: the renderers give it :func:`grader.render._common.student_view`
of a part, whose hidden cases have no size (n = 0) and are left out, so a student's pattern is of
the visible sizes only, and the course staff's report (``--show-hidden``) counts every size.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from grader.assignment.parts import PARTS, tile_levels
from grader.render._common import is_timed_case, ran
from grader.core.results import FailureKind, Mismatch, PartResult

#: Sizes of each kind (passing, failing with wrong values) a pattern needs: fewer tell no rule.
MIN_SIZES = 2


class Rule(NamedTuple):
    """One way sizes can split into those that give wrong values and those that pass.

    Attributes:
        fails: ``fails(n, tile)``: True where the rule says n gives wrong values.
        says: ``says(failing, passing, tile)``: the sentence for a part whose sizes split so
            (sorted lists of n).
        tiled: whether it needs the part's tile (Parts 4 and 5); hierarchical: whether it needs
            Part 4's levels of tile sums (:func:`grader.assignment.parts.tile_levels`).
    """

    fails: Callable[[int, int | None], bool]
    says: Callable[[list[int], list[int], int | None], str]
    tiled: bool = False
    hierarchical: bool = False


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _full_at_some_level(n: int, tile: int) -> bool:
    return any(count % tile == 0 for count in tile_levels(n, tile))


def _full_above(failing: list[int], tile: int) -> str:
    """An example failing n whose full last tile is at a level above the first, in words, or ""."""
    for n in failing:
        counts = tile_levels(n, tile)
        level = next((k for k, c in enumerate(counts) if c % tile == 0), 0)
        if level:
            return (f" (n = {n}: {counts[level]} tile sums at level {level + 1}, "
                    f"{counts[level] // tile} full tile{'s' if counts[level] > tile else ''})")
    return ""


#: The rules, most telling first: :func:`size_pattern` names the first that splits the sizes.
RULES = (
    Rule(lambda n, _: not _power_of_two(n),
         lambda f, p, t: "the passing sizes are exactly the powers of two: every n that is not one gives wrong "
                         "values (look for a bound, a loop or a padding that assumes a power of two)"),
    Rule(lambda n, t: n % t == 0,
         lambda f, p, t: f"every failing n is a multiple of the {t}-element tile, and no passing n is (look at what "
                         "the last block does when its tile is full)", tiled=True),
    Rule(lambda n, t: _full_at_some_level(n, t),
         lambda f, p, t: f"every failing n has a full last tile at some level of the hierarchy: n, or its tile sums "
                         f"(ceil(n / {t}), and so on up), a multiple of {t}{_full_above(f, t)}; no passing n has one "
                         "(look at what the last block does when its tile is full)", tiled=True, hierarchical=True),
    Rule(lambda n, t: n > t and n % t != 0,
         lambda f, p, t: f"every failing n has a partial last tile (above one tile, not a multiple of {t}), and no "
                         "passing n has one (look at the bounds of the last tile)", tiled=True),
    Rule(lambda n, t: n > t,
         lambda f, p, t: f"every n above one tile ({t} elements) fails, and every n up to one tile passes (look at "
                         "what joins the tiles: the tile sums and the offsets added back)", tiled=True),
    Rule(lambda n, t: len(tile_levels(n, t)) > 2,
         lambda f, p, t: f"every n that needs three or more levels of tile sums (n above {t}² = {t * t}) fails, and "
                         "every n with one or two passes", tiled=True, hierarchical=True),
)


def _graded_cases(part: PartResult):
    """The part's correctness cases of known size that ran (no timed run, no student's view of a hidden case)."""
    return [c for c in part.cases if not is_timed_case(c) and ran(c) and c.n > 0]


def split_sizes(part: PartResult) -> tuple[list[int], list[int]]:
    """The part's sizes that gave wrong values and those that passed: ``(failing, passing)``, each
    sorted, each n once. A size fails where any of its correctness cases (any dtype) failed with
    kind ``mismatch``; it passes where every one passed. Timed runs, cases not run and cases of
    unknown size (a student's view of a hidden case) are left out."""
    wrong: set[int] = set()
    other: set[int] = set()
    sizes: set[int] = set()
    for c in _graded_cases(part):
        sizes.add(c.n)
        if c.status == "fail" and c.kind == FailureKind.MISMATCH:
            wrong.add(c.n)
        elif c.status != "pass":
            other.add(c.n)
    return sorted(wrong), sorted(sizes - wrong - other)


def _passing_somewhere(part: PartResult) -> set[int]:
    """The sizes whose cases of some dtype all passed (``float32 n = 33`` passes while ``int32 n = 33``
    gives wrong values): a rule that says such an n gives wrong values contradicts the part's own
    PASS line, so it is not said."""
    by: dict[tuple[int, str], bool] = {}
    for c in _graded_cases(part):
        by[c.n, c.dtype] = by.get((c.n, c.dtype), True) and c.status == "pass"
    return {n for (n, _), passed in by.items() if passed}


def part_tile(part: PartResult) -> int | None:
    """The part's tile in elements (Part 4's 2 * BLOCK_SIZE, Part 5's BLOCK_SIZE * ITEMS_PER_THREAD),
    or None: a one-block part, a part this grader does not define, or a result that does not record
    the part's block size (and Part 5's items a thread)."""
    spec = PARTS.get(part.key)
    recorded = part.block_size and (part.items_per_thread or not spec or not spec.items_per_thread)
    return spec.tile(part.block_size, part.items_per_thread) if spec and spec.tile and recorded else None


def _ordinal(k: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``512th``."""
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def _runs(ks: list[int]) -> str:
    """Ascending numbers as runs: ``1, 3 to 7, 9``."""
    runs: list[list[int]] = []
    for k in ks:
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    return ", ".join(str(a) if a == b else f"{a} to {b}" for a, b in runs)


def wrong_places(mm: Mismatch, n: int, tile: int | None) -> list[str]:
    """Where a case's wrong elements lie, in sentences from its :class:`~grader.core.results.Mismatch`
    (its ``bins``, ``offsets`` and ``stride``): how many of n, their spacing, which tiles hold
    them (where the bins are the tiles) and where in their tiles. [] for a mismatch recorded before
    these were (no bins).

    Args:
        mm: the case's mismatch; n: its size; tile: the part's tile (:func:`part_tile`), or None.
    """
    if not mm.bins or not mm.bin_width:
        return []
    last = mm.index if mm.last is None else mm.last
    lines = [f"{mm.wrong:,} of {n:,} elements wrong ({100 * mm.wrong / max(n, 1):.3g} %), "
             + (f"at index {mm.index:,}" if mm.wrong == 1 else f"from index {mm.index:,} to {last:,}")]
    if mm.stride == 1:
        lines.append(f"every element from {mm.index:,} to {last:,} is wrong, and no other")
    elif mm.stride:
        lines.append(f"every {_ordinal(mm.stride)} element from {mm.index:,} on ({mm.index:,}, "
                     f"{mm.index + mm.stride:,}, ...) is wrong, and no other")
    count = -(-n // tile) if tile else 0
    if count > 1:
        wrong_tiles = ([k for k, c in enumerate(mm.bins) if c] if mm.bin_width == tile
                       else list(range(mm.index // tile, last // tile + 1)))  # the first and last wrong, between
        if mm.bin_width != tile and len(wrong_tiles) > 1:
            which = f"tiles {wrong_tiles[0]} to {wrong_tiles[-1]} (of {count}; not every one need be wrong)"
        elif wrong_tiles == [count - 1]:
            which = f"only the last tile (tile {count - 1} of {count}: elements {(count - 1) * tile:,} to {n - 1:,})"
        elif wrong_tiles == [0]:
            which = f"only the first tile (tile 0 of {count})"
        elif len(wrong_tiles) == count:
            which = f"every tile ({count} of {count})"
        elif wrong_tiles == list(range(wrong_tiles[0], count)):
            which = f"every tile from tile {wrong_tiles[0]} on ({len(wrong_tiles)} of {count})"
        else:
            which = f"tiles {_runs(wrong_tiles)} ({len(wrong_tiles)} of {count})"
        lines.append(f"the wrong elements are in {which}; a tile is {tile:,} elements")
    if mm.offsets and mm.offset_width and tile:
        held = [k for k, c in enumerate(mm.offsets) if c]
        w = mm.offset_width
        if len(held) == len(mm.offsets):
            lines.append("within their tiles they lie everywhere, from the first element to the last")
        elif held:
            lo, hi = held[0] * w, min((held[-1] + 1) * w, tile) - 1
            lines.append(f"within their tiles they lie at elements {lo:,} to {hi:,} of the {tile:,}"
                         + (" (the start of the tile)" if hi < tile // 2 and lo == 0 else
                            " (the end of the tile)" if hi == tile - 1 and lo >= tile // 2 else ""))
    return lines


def size_pattern(part: PartResult) -> str | None:
    """The sentence naming the first rule of :data:`RULES` that splits the part's failing sizes from
    its passing ones exactly (:func:`split_sizes`), or None: fewer than :data:`MIN_SIZES` of
    either, or no rule fits. Rules of a tile need the part's tile (its block size, and Part 5's
    items a thread, recorded in the result: not in one saved before they were), those of the
    hierarchy Part 4."""
    failing, passing = split_sizes(part)
    if len(failing) < MIN_SIZES or len(passing) < MIN_SIZES:
        return None
    spec = PARTS.get(part.key)
    tile = part_tile(part)
    somewhere = _passing_somewhere(part)
    for rule in RULES:
        if (rule.tiled and tile is None) or (rule.hierarchical and not spec.hierarchical):
            continue
        if all(rule.fails(n, tile) for n in failing) and not any(rule.fails(n, tile) for n in passing) \
                and not any(rule.fails(n, tile) for n in somewhere):
            return rule.says(failing, passing, tile)
    return None
