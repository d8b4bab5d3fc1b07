"""Judging one run of a case: its buffers read back and checked (:func:`check_run`: guard zones, the
input, the output against the reference scan, the part's own checks); float32's error bound
(:func:`error_bound`); and what a wrong output's message says of it (:func:`diagnose` and its tile
hints)."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from grader.assignment.config import Config, PartConfig
from grader.assignment.parts import PartSpec
from grader.assignment.plans import (DEVICE_CHECK_MIN, DIGEST_SALT, GUARD, POISON_BITS, Guarded, Plan, Run,
                                     checks_on_device, tiles)
from grader.core.kinds import in_cause_order
from grader.core.results import MISMATCH_BINS, OFFSET_BINS, CaseFinding, CaseStatus, FailureKind, Mismatch
from grader.grading.case.inputs import FLOAT_STEP, UNIT_ROUNDOFF, reference_output, sums_are_exact
from reference.scan import exclusive_scan, inclusive_scan


def _guard_problem(g: Guarded, whole: np.ndarray) -> str | None:
    """A message when a guard zone changed: the kernel wrote outside the buffer."""
    words = whole.itemsize // 4  # 32-bit words per element
    bits = whole.view(np.uint32)
    before = np.flatnonzero(bits[:GUARD * words] != POISON_BITS)
    after = np.flatnonzero(bits[(GUARD + g.count) * words:] != POISON_BITS)
    if before.size:
        i = int(before[0]) // words - GUARD
        return f"{g.name}[{i}] ({-i} before the start of {g.name}, {g.count} elements) was written"
    if after.size:
        i = int(after[0]) // words
        return f"{g.name}[{g.count + i}] ({i + 1} past the end of {g.name}, {g.count} elements) was written"
    return None


def error_bound(expected: np.ndarray, *, source: np.ndarray, inclusive: bool, depth: int,
                prefix_sum: bool = True) -> np.ndarray | None:
    """Per-element absolute error allowed in a float32 output; None: compared exactly (int32,
    float32 whose every sum is exact: :func:`grader.grading.case.inputs.sums_are_exact`, and the
    output of a part with its own reference, ``prefix_sum`` False, whose rounding this bound
    does not describe).

    Otherwise element i may differ from the float64 reference by ``γ(depth + 1) · A[i]``, where
    ``A[i]`` is the sum of |in[j]| over the elements it adds (j <= i inclusive, j < i exclusive) and
    ``γ(k) = k·u / (1 - k·u)``, u = 2^-24: any order of summation whose additions chain at most
    ``depth`` deep (:meth:`grader.assignment.parts.PartSpec.addition_depth`), plus the output's own rounding
    (N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 4.2). One bound
    per element from its own prefix of |in|, not one scale for the whole array, so a wrong tile is
    seen wherever it is.

    Args:
        expected: the reference scan (float64 for float32), shape (n,).
        source: the input, shape (n,).
        inclusive: whether ``expected`` is the inclusive scan.
        depth: the part's addition depth at this n.
        prefix_sum: whether ``expected`` is the prefix sum
            (:attr:`grader.assignment.parts.PartSpec.prefix_sum`).

    Returns:
        float64 array of shape (n,), or None.
    """
    if not prefix_sum or expected.dtype.kind != "f" or sums_are_exact(source, expected, inclusive=inclusive):
        return None
    k = (depth + 1) * UNIT_ROUNDOFF
    prefix = np.abs(source, dtype=np.float64)  # converted first: numpy's cumsum converting as it goes is 5x slower
    np.cumsum(prefix, out=prefix)
    if not inclusive and prefix.size:
        prefix = np.concatenate([np.zeros(1), prefix[:-1]])
    return prefix * (k / (1 - k)) if k < 1 else np.full(prefix.shape, np.inf)


def _wrong(got: np.ndarray, expected: np.ndarray, tol: np.ndarray | None) -> np.ndarray:
    if tol is None:
        return np.flatnonzero(got != expected)
    diff = np.abs(got.astype(np.float64) - expected)
    return np.flatnonzero(~(diff <= tol))  # NaN counts as wrong


def diagnose(got: np.ndarray, expected: np.ndarray, *, source: np.ndarray, inclusive: bool, tile: int | None,
             depth: int | None = None, buffer: str = "out", hierarchical: bool = False,
             prefix_sum: bool = True) -> Mismatch | None:
    """Compare an output with the reference; None when equal (float32: exactly, or within
    :func:`error_bound` where its inputs' sums are not exact).

    Args:
        got: 1-D output of n elements (int32 or float32).
        expected: the reference (int32, or float64 for float32 outputs).
        source: the input, to recognise the other kind of scan.
        inclusive: whether the part asks for an inclusive scan.
        tile: elements per tile of the part (Part 4: 2*BLOCK_SIZE; Part 5:
            BLOCK_SIZE*ITEMS_PER_THREAD), to name the first wrong tile; None for a one-block part
            (Parts 1-3), which names no tile.
        depth: the part's addition depth at n (:meth:`grader.assignment.parts.PartSpec.addition_depth`), for
            the error bound of float32 outputs; None: n - 1, the most any scan chains.
        hierarchical: whether the tiles' offsets come from scanning their sums again (Part 4:
            :attr:`grader.assignment.parts.PartSpec.hierarchical`), for the words of a wrong offset's hint;
            False: the sum of the tiles before (Part 5's look-back).
        prefix_sum: whether ``expected`` is the prefix sum (:attr:`grader.assignment.parts.PartSpec.prefix_sum`);
            False: compared exactly, and without the hints that read the output as a prefix sum
            (the other kind of scan, n = 1's, a tile's offset); the poison and tile-position hints stay.

    Returns:
        A :class:`Mismatch` with the first wrong index, got/expected, the count of wrong
        elements, the first wrong tile's start (None without tiles) and, when recognisable, a
        hint. Each hint fires only where it is the one reading of the output: the other kind of
        scan is named only where it differs from a copy of the input and from the input shifted
        by one (not at n = 1, where the inclusive scan is the input); where the first wrong
        element sits in tile terms (:func:`_tile_hint`) only when there is more than one tile.
    """
    n = got.size
    tol = error_bound(expected, source=source, inclusive=inclusive, depth=max(n - 1, 0) if depth is None else depth,
                      prefix_sum=prefix_sum)
    wrong = _wrong(got, expected, tol)
    if wrong.size == 0:
        return None
    i = int(wrong[0])
    hint = None
    poisoned = got.view(np.uint32) == POISON_BITS

    def same(reference: np.ndarray) -> bool:  # within this scan's bound: the other readings add as many
        return _wrong(got, reference, tol).size == 0
    copy = source.astype(np.float64 if source.dtype.kind == "f" else source.dtype)
    shifted = np.concatenate([np.zeros(1, copy.dtype), copy[:-1]])
    if prefix_sum and n >= 2 and same(exclusive_scan(source) if inclusive else inclusive_scan(source)) \
            and not same(copy) and not same(shifted):
        hint = ("this is the exclusive scan; this part asks for the inclusive scan (out[i] includes in[i])"
                if inclusive else
                "this is the inclusive scan; this part asks for the exclusive scan (out[0] = 0, "
                "out[i] = in[0] + ... + in[i-1])")
    elif poisoned[i]:
        unwritten = int(np.count_nonzero(poisoned))
        hint = (f"nothing was written to {buffer}: every element still holds the grader's poison value"
                if unwritten == n else
                f"{buffer}[{i}] was never written ({unwritten} element(s) still hold the grader's poison value)")
    elif prefix_sum and n == 1 and not inclusive and same(copy):
        hint = "out[0] = in[0], but an exclusive scan starts with out[0] = 0 (the sum of no elements)"
    elif prefix_sum and n == 1 and inclusive and same(shifted):
        hint = "out[0] = 0, but an inclusive scan starts with out[0] = in[0]"
    elif tile and n > tile:
        hint = _tile_hint(got, expected, source, wrong, tol, tile=tile, inclusive=inclusive, hierarchical=hierarchical,
                          prefix_sum=prefix_sum)
    return Mismatch(buffer=buffer, index=i, got=got[i].item(), expected=expected[i].item(), wrong=int(wrong.size),
                    first_wrong_tile=(i // tile) * tile if tile else None, hint=hint,
                    allowed=None if tol is None else float(tol[i]), **wrong_places(wrong, n, tile))


def wrong_places(wrong: np.ndarray, n: int, tile: int | None) -> dict:
    """Where the wrong elements lie, bounded in size: the :class:`~grader.core.results.Mismatch`
    fields ``last``, ``bins``, ``bin_width``, ``offsets``, ``offset_width`` and ``stride`` (see there).

    Args:
        wrong: the wrong elements' indices, ascending (at least one).
        n: the array's length; tile: the part's tile (elements), None for a one-block part.
    """
    tiles = -(-n // tile) if tile else 0
    width = tile if tile and tiles <= MISMATCH_BINS else max(1, -(-n // MISMATCH_BINS))
    places: dict = {"last": int(wrong[-1]), "bin_width": width,
                    "bins": tuple(int(c) for c in np.bincount(wrong // width, minlength=-(-n // width)))}
    if tile and n > tile:
        step = max(1, -(-tile // OFFSET_BINS))
        places |= {"offset_width": step,
                   "offsets": tuple(int(c) for c in np.bincount((wrong % tile) // step, minlength=-(-tile // step)))}
    gaps = np.diff(wrong)
    if wrong.size >= 3 and (gaps == gaps[0]).all():
        places["stride"] = int(gaps[0])
    return places


#: How the hint of a wrong last, partial tile starts (:func:`_tile_hint`).
PARTIAL_TILE = "only the last, partial tile is wrong"
#: How the hint of a wrong last tile of exactly one tile's elements starts (n a multiple of the tile).
FULL_LAST_TILE = "only the last, full tile is wrong"
#: How the hint of a first wrong element in the first of several tiles starts.
FIRST_TILE = "the first tile is already wrong"
#: How the hint of a tile whose every element is off by one amount (its offset) starts.
TILE_OFFSET = "every element of tile"
#: The hints that say where the first wrong element sits in tile terms (:func:`_tile_hint`), each
#: ``HEAD: ADVICE``; where a finding explains the output, the advice gives way to it (:func:`explain_tile_hint`).
TILE_HINTS = (PARTIAL_TILE, FULL_LAST_TILE, FIRST_TILE, TILE_OFFSET)
#: Kinds of finding that explain a wrong tile better than a tile hint's advice: where the case (or,
#: for an unchecked case, a smaller one of the part) has one, the hint names it instead.
EXPLAIN_TILE_HINT = ("race", "uninitialized-read", "out-of-bounds")


def _tile_hint(got: np.ndarray, expected: np.ndarray, source: np.ndarray, wrong: np.ndarray, tol: np.ndarray | None, *,
               tile: int, inclusive: bool, hierarchical: bool, prefix_sum: bool = True) -> str | None:
    """Where the first wrong element of an output of more than one tile sits, in tile terms, as a
    hint ``HEAD: ADVICE`` (None for a first wrong element inside a middle tile whose errors vary):

    - every element of its tile j is off by one amount (:func:`_offset_hint`): the scan within
      the tiles is right and the offset added to tile j is wrong;
    - in the last tile, partial: check the bounds for n (:data:`PARTIAL_TILE`);
    - in the last tile, full (n a multiple of the tile): check what the last block does when its
      tile is full (:data:`FULL_LAST_TILE`);
    - in the first tile, which needs no other tile's sum: check the scan within a tile
      (:data:`FIRST_TILE`).

    ``wrong``: the wrong indices (ascending); ``tol``: the output's :func:`error_bound` or None;
    ``prefix_sum`` False: no offset hint (an offset is a prefix sum's)."""
    n = got.size
    count, j, last = tiles(n, tile), int(wrong[0]) // tile, (n - 1) // tile
    offset = prefix_sum and _offset_hint(got, expected, source, wrong, tol, tile=tile, inclusive=inclusive,
                                         hierarchical=hierarchical)
    if offset:
        return offset
    if j == last and n % tile:
        return _partial_tile_hint(n, tile)
    if j == last:
        return (f"{FULL_LAST_TILE} (tile {j}, elements {j * tile} to {n - 1}; a tile is {tile} elements): check what "
                f"the last block does when n = {n} is a multiple of {tile}, so that its tile is full")
    if j == 0:
        return (f"{FIRST_TILE} (tile 0 of {count}, from element {int(wrong[0])}): no other tile's sum belongs in it, "
                "so look first at the scan within a tile")
    return None


def _offset_hint(got: np.ndarray, expected: np.ndarray, source: np.ndarray, wrong: np.ndarray, tol: np.ndarray | None,
                 *, tile: int, inclusive: bool, hierarchical: bool) -> str | None:
    """The hint for a first wrong tile whose every element (at least two) is off by the same amount
    (within the output's error bound ``tol``, twice over): each tile was scanned right, and what
    was added to it, its offset, is wrong. Part 4 (``hierarchical``) takes its offsets from the
    scan of the tile sums at the level above, which the hint shapes in tiles (a full last tile
    there is the likeliest slip); Part 5 from the sum of the tiles before. Says how many wrong
    tiles are alike, and when every offset the output implies is 0 (none added). None where the
    first wrong tile's errors vary."""
    n, count = got.size, tiles(got.size, tile)
    j = int(wrong[0]) // tile
    first = slice(j * tile, min(n, (j + 1) * tile))
    if not _alike(_differences(got[first], expected[first]), None if tol is None else tol[first])[0]:
        return None  # the usual case, told from one tile without the whole array's differences
    starts = np.arange(0, n, tile)
    diff = _differences(got, expected)
    constant, slack = _alike(diff, tol, tile)
    bad = np.flatnonzero(np.bincount(wrong // tile, minlength=count))  # the wrong tiles, ascending
    offsets = expected[starts].astype(diff.dtype) - (source[starts].astype(diff.dtype) if inclusive else 0)
    implied = offsets[bad] + diff[starts[bad]]  # what was added to each wrong tile (int32: modulo 2^32)
    if diff.dtype.kind == "i":
        implied = _int32_range(implied)
    alike = bool(constant[bad].all())
    zero = alike and bool(np.all(np.abs(implied) <= slack[bad]))
    many = alike and bad.size > 1
    amount = _amount(diff[starts[j]], rounded=tol is not None)
    head = (f"{TILE_OFFSET} {j} of {count} is off by the same amount, {amount}"
            + (f", and every wrong tile after it ({bad.size - 1}) is likewise off by one amount throughout"
               if many else ""))
    them = "they are" if many else "it is"
    if hierarchical:
        shape = (f"fill exactly {count // tile} full tile{'s' if count > tile else ''}" if count % tile == 0 else
                 f"make one partial tile ({count} of {tile})" if count < tile else
                 f"make {tiles(count, tile)} tiles, the last partial ({count % tile} of {tile})")
        source_of = f"it comes from the scan of the {count} tile sums at the second level, where they {shape}"
    else:
        source_of = "it is the sum of the tiles before"
    return (f"{head}: {them} scanned right, but the offset added to {'each' if many else 'it'} is wrong; {source_of}"
            + ("; every such offset is 0, as if none was added" if zero else ""))


def _differences(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """``got - expected``, float64 for floats (NaN and inf never compare as one amount), int64
    modulo 2^32 into int32's range for ints (int32 sums wrap: an offset is one amount modulo 2^32),
    in place on one copy (16M elements: one 128 MB array)."""
    if got.dtype.kind == "f":
        diff = got.astype(np.float64)
        diff -= expected
        return diff
    diff = got.astype(np.int64)
    diff -= expected
    return _int32_range(diff)


def _int32_range(a: np.ndarray) -> np.ndarray:
    """An int64 array taken modulo 2^32 into int32's range, in place (and returned)."""
    a += 2 ** 31
    a %= 2 ** 32
    a -= 2 ** 31
    return a


def _alike(diff: np.ndarray, tol: np.ndarray | None, tile: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per tile of ``tile`` elements (None: ``diff`` is one tile), whether its differences are one
    amount (at least two elements, spread within twice the tile's largest bound ``tol``), and that
    slack: two arrays of one element per tile."""
    starts = np.arange(0, diff.size, tile or max(diff.size, 1))
    spread = np.maximum.reduceat(diff, starts) - np.minimum.reduceat(diff, starts)
    slack = np.zeros(starts.size) if tol is None else 2 * np.maximum.reduceat(tol, starts)
    sizes = np.diff(np.append(starts, diff.size))
    return (spread <= slack) & (sizes >= 2), slack


def _amount(x: np.generic, *, rounded: bool) -> str:
    """A difference of outputs as a message writes it: an int whole, a float to float32's digits,
    or, where the output is compared within an error bound (``rounded``), about 4 digits."""
    if x.dtype.kind == "i":
        return str(x.item())
    return f"about {x.item():.4g}" if rounded else f"{x.item():.9g}"


def _partial_tile_hint(n: int, tile: int) -> str:
    """The hint for an output wrong only in its last, partial tile: check the bounds."""
    last = n // tile
    return (f"{PARTIAL_TILE} (tile {last}, elements {last * tile} to {n - 1}; a tile is {tile} elements): check the "
            f"bounds for n = {n}, which is not a multiple of {tile}")


def explain_tile_hint(told: list, mm: Mismatch | None, n: int, tile: int | None,
                      known: tuple[CaseFinding, ...]) -> tuple[list, Mismatch | None]:
    """``told`` and ``mm`` with a tile hint (:data:`TILE_HINTS`) that a finding explains: its advice
    replaced by that finding, one of the case's own, else (for a case whose checks did not run) one
    of ``known``, the findings of the part's earlier cases. A hint no finding explains is kept.

    Args:
        told: a case's findings, each with the text its message gives it (named tuples with
            ``finding`` and ``text``: :class:`grader.grading.case.run._WordedFinding`); the mismatch's
            finding gets the new hint too.
        mm: the case's first mismatch, or None (returned as they are).
        n: the case's size; tile: the part's tile in elements, or None (no tile hints).
        known: the findings of the part's earlier cases.

    Returns:
        ``(told, mm)``: new ones where the hint changed, else the same objects.
    """
    if mm is None or not tile or not (mm.hint or "").startswith(TILE_HINTS):
        return told, mm
    own = [t.finding for t in told if t.finding.kind in EXPLAIN_TILE_HINT]
    earlier = [f for f in known if f.kind in EXPLAIN_TILE_HINT and f.line]
    if own:
        f = own[0]
        cause = f"the {f.kind} above" + (f" ({f.file}:{f.line})" if f.line else "")
    elif earlier:
        f = earlier[0]
        cause = f"the {f.kind} at {f.file}:{f.line}, found in a smaller case of this part, probably"
    else:
        return told, mm
    hint = f"{mm.hint.partition(': ')[0]}, which {cause} explains"
    fix = lambda text: text.replace(mm.hint, hint)  # noqa: E731
    told = [t._replace(finding=dataclasses.replace(t.finding, message=fix(t.finding.message)), text=fix(t.text))
            if t.finding.kind == FailureKind.MISMATCH else t for t in told]
    return told, dataclasses.replace(mm, hint=hint)


class _Verdict(NamedTuple):
    """What :func:`check_run` found: the grader's own findings (a write into a guard zone, a modified
    input, a wrong output, Part 5's ticket), in the order checked, and the first mismatch of a wrong
    output (None when the output is right or was not checked)."""

    findings: list[CaseFinding]
    mismatch: Mismatch | None

    @property
    def status(self) -> CaseStatus:
        """``pass`` when nothing was found, else ``fail``."""
        return CaseStatus.FAIL if self.findings else CaseStatus.PASS

    @property
    def message(self) -> str:
        """The message of the first finding in cause order, or ``""``."""
        return in_cause_order(self.findings)[0].message if self.findings else ""


def device_checkable(run: Run, plan: Plan, d_in: Guarded, x: np.ndarray, *, part: PartSpec,
                     expected: np.ndarray | None = None) -> bool:
    """Whether a run's output can be checked where it ran (:meth:`grader.backends.base.Backend.scan_check`):
    a backend that checks on the device, a prefix sum of the whole input (the part's ``prefix_sum``,
    no reference of its own) in int32, or in float32 where every sum of the input is exact
    (``expected``, its reference scan, tells: :func:`grader.grading.case.inputs.sums_are_exact`), and an
    input that holds a digest (large enough: :class:`grader.assignment.plans.Guarded`)."""
    if x.dtype == np.float32:
        exact = expected is not None and sums_are_exact(x, expected, inclusive=part.inclusive)
    else:
        exact = x.dtype == np.int32
    return (exact and d_in.digest is not None and plan.out.count == x.size and plan.out.inner.dtype == x.dtype
            and part.prefix_sum and part.reference is None and run.guard > 0 and checks_on_device(run.backend))


def _passes_on_device(run: Run, plan: Plan, d_in: Guarded, x: np.ndarray, *, part: PartSpec,
                      expected: np.ndarray | None) -> bool:
    """Whether a run passes every check of :func:`check_run`, verified where it ran: on a backend that
    checks on the device, for a prefix sum :func:`device_checkable` admits, the guard zones of large
    buffers and small buffers whole read back, the input's digest taken again, the part's own checks,
    and the output checked against the input (:meth:`grader.backends.base.Backend.scan_check`,
    exact). False where any of them fails or does not apply: :func:`check_run` then reads everything
    back and says what is wrong, as it does on every other backend."""
    backend = run.backend
    if not device_checkable(run, plan, d_in, x, part=part, expected=expected):
        return False
    small: dict[int, np.ndarray] = {}
    poison = np.uint32(POISON_BITS)
    for g in run.buffers:
        if g.count >= DEVICE_CHECK_MIN:
            zones = (g.full.view(0, run.guard), g.full.view(run.guard + g.count, run.guard))
            if any((backend.to_host(z).view(np.uint32) != poison).any() for z in zones):
                return False
        else:
            whole = backend.to_host(g.full)
            if _guard_problem(g, whole) is not None:
                return False
            small[id(g)] = whole[run.guard:run.guard + g.count]
    if backend.digest(d_in.inner, DIGEST_SALT) != d_in.digest:
        return False
    read = lambda g: small[id(g)] if id(g) in small else backend.to_host(g.inner)  # noqa: E731
    if any(check(read) is not None for check in plan.checks):
        return False
    return backend.scan_check(plan.out.inner, d_in.inner, inclusive=part.inclusive) < 0


def check_run(run: Run, plan: Plan, d_in: Guarded, x: np.ndarray, expected: np.ndarray | None, *, part: PartSpec,
              pc: PartConfig, cfg: Config, completed: bool = True, output: bool = True) -> _Verdict:
    """Read every buffer of a run whose launches are done back and check it, as a case is checked:
    guard zones, the input ``x`` (``d_in``), then, where the launches ``completed`` (no finding
    stopped a kernel) and ``output`` holds (not for a run of sampled blocks only, where the other
    blocks wrote nothing), the output against ``expected`` (the reference scan of ``x``; float32
    exactly, or within :func:`error_bound` for a fractional input) and the part's own checks (:attr:`grader.assignment.plans.Plan.checks`: Part 5's ticket
    counter). Every problem found is a finding. ``expected`` None: the reference scan is computed
    here where it is needed. On a backend that checks on the device, a large run of a prefix sum that passes
    is verified there and not read back (:func:`_passes_on_device`).

    Returns:
        a ``_Verdict`` (findings, mismatch; its ``status`` and ``message`` sum them up), a named tuple.
    """
    n = x.size
    if completed and output and _passes_on_device(run, plan, d_in, x, part=part, expected=expected):
        return _Verdict([], None)
    if expected is None:
        expected = reference_output(part, x)
    found: list[CaseFinding] = []
    wholes = {id(g): run.backend.read(g.full) for g in run.buffers}
    problem = next(filter(None, (_guard_problem(g, wholes[id(g)]) for g in run.buffers)), None)
    if problem:
        found.append(CaseFinding(FailureKind.OUT_OF_BOUNDS, f"out-of-bounds write: {problem}"))
    inner_in = wholes[id(d_in)][GUARD:GUARD + n]
    changed = np.flatnonzero(inner_in.view(np.uint32) != x.view(np.uint32))
    if changed.size:
        j = int(changed[0])
        found.append(CaseFinding(FailureKind.INPUT_MODIFIED, (
            f"the input was modified: in[{j}] = {inner_in[j]}, was {x[j]} ({changed.size} element(s) changed); "
            "the contract's input is read-only")))
    if not completed or not output:
        return _Verdict(found, None)
    for check in plan.checks:  # the part's own rules (Part 5's ticket)
        finding = check(lambda g: wholes[id(g)][GUARD:GUARD + g.count])
        if finding is not None:
            found.append(finding)
    got = wholes[id(plan.out)][GUARD:GUARD + n]
    tile = part.tile_of(pc)
    mm = diagnose(got, expected, source=x, inclusive=part.inclusive, tile=tile, depth=part.addition_depth(pc, n),
                  hierarchical=part.hierarchical, prefix_sum=part.prefix_sum)
    if mm is None:
        return _Verdict(found, None)
    msg = f"out[{mm.index}] = {mm.got}, expected {mm.expected}; {mm.wrong} of {n} elements wrong"
    if expected.dtype.kind == "f":
        msg = f"out[{mm.index}] = {mm.got:.9g}, expected {mm.expected:.9g} ({float_rule(mm)}); {mm.wrong} of {n} elements wrong"
    if tile and n > tile:
        msg += (f"; the first wrong element is in tile {mm.index // tile} of {tiles(n, tile)} (elements from "
                f"{mm.first_wrong_tile}), element {mm.index - mm.first_wrong_tile} of it")
    if mm.hint:
        msg += f" — {mm.hint}"
    found.append(CaseFinding(FailureKind.MISMATCH, msg))
    return _Verdict(found, mm)


def float_rule(mm: Mismatch) -> str:
    """How a float32 output was compared, for a wrong-values message: exactly (the inputs are
    multiples of :data:`grader.grading.case.inputs.FLOAT_STEP`), or within the element's error bound
    (:func:`error_bound`)."""
    if mm.allowed is None:
        return (f"compared exactly: the inputs are multiples of {FLOAT_STEP:g}, so every sum is exact in float32 "
                "whatever the order of additions")
    return (f"allowed error {mm.allowed:.3g}: float32 rounding of the sum of |in| up to there, "
            "for this part's longest chain of additions")
