"""Which sizes of a part give wrong values: the part's pattern against powers of two and its tile.

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
from grader.core.results import FailureKind, PartResult

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
    recorded = part.block_size and (part.items_per_thread or not spec or not spec.items_per_thread)
    tile = spec.tile(part.block_size, part.items_per_thread) if spec and spec.tile and recorded else None
    somewhere = _passing_somewhere(part)
    for rule in RULES:
        if (rule.tiled and tile is None) or (rule.hierarchical and not spec.hierarchical):
            continue
        if all(rule.fails(n, tile) for n in failing) and not any(rule.fails(n, tile) for n in passing) \
                and not any(rule.fails(n, tile) for n in somewhere):
            return rule.says(failing, passing, tile)
    return None
