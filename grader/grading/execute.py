"""Running one case of one part on a backend: inputs, launch plans, checks and GPU timing.

The grader owns the host side: it draws the input, allocates every device buffer with guard
zones filled with a poison value, launches the part's kernels following the part's launch plan
(see :mod:`grader.assignment.plans`), reads everything back, and checks, in order: writes outside any buffer
(guard zones), changes to the input, then the output against the sequential reference scan.

Timing (GPU backends): the same plan is replayed ``timing.runs`` times after warm-up, with the
outputs poisoned and the L2 emptied before every run, and the output re-verified after the last
run, so a kernel that skips work once the answer is in the buffer fails.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import math
import os
import secrets
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from grader.backends.base import Backend, Module
from grader.assignment.config import Config, PartConfig, TimingConfig
from grader.core.errors import KernelError, LaunchError
from grader.assignment.parts import DTYPES, PARTS, PartSpec
from grader.assignment.plans import GUARD, POISON_BITS, Guarded, Plan, Run, prepare, tiles
from grader.core.kinds import WARNING_KINDS, in_cause_order, verdict_of
from grader.core.performance import Performance, Timing, linear_fraction
from grader.core.results import CaseFinding, CaseResult, CaseStatus, FailureKind, Mismatch
from reference.scan import default_threads, exclusive_scan, inclusive_scan, scan_int32_threaded


@dataclass(frozen=True)
class CaseSpec:
    """One case to run: a size, a dtype, a seed, whether students may see its details, and, for
    float32, how its input is drawn (``fractional``: see :func:`make_input`)."""

    name: str
    n: int
    dtype: str
    seed: int
    visibility: str = "visible"
    fractional: bool = False


#: What the name of a visible float32 case adds after the dtype: its input is drawn exact (multiples
#: of :data:`FLOAT_STEP`, every sum exact, the output compared exactly) or fractional (uniform in
#: [0, 1), the output within :func:`error_bound`). The handout explains both words.
FLOAT_DRAWS = {False: "exact", True: "fractional"}


def case_name(n: int, dtype: str, *, fractional: bool = False) -> str:
    """A visible case's name: ``n=513 int32``, ``n=513 float32 exact``, ``n=1000 float32 fractional``."""
    return f"n={n} {dtype}" + (f" {FLOAT_DRAWS[fractional]}" if np.dtype(DTYPES[dtype]).kind == "f" else "")


def case_list(cfg: Config, key: str) -> list[CaseSpec]:
    """Every correctness case of a part, in the order they run: the visible cases of every dtype
    (per dtype, the configured sizes, with n = 1 and, for a one-block part, its largest n always
    included; for float32 these draw exact inputs, then each of the part's ``fractional_sizes``
    draws fractional ones), then the hidden cases of every dtype (exact). A kernel can keep state
    from one launch to the next (a ``__device__`` global), so no visible case may run after a hidden
    one."""
    pc, spec = cfg.parts[key], PARTS[key]
    sizes = list(pc.sizes)
    if 1 not in sizes:
        sizes.insert(0, 1)
    limit = spec.limit(pc.block_size)
    if limit is not None and limit not in sizes:
        sizes.append(limit)
    visible = []
    for dtype in pc.dtypes:
        visible += [CaseSpec(case_name(n, dtype), n, dtype, cfg.seed) for n in sizes]
        if np.dtype(DTYPES[dtype]).kind == "f":
            visible += [CaseSpec(case_name(n, dtype, fractional=True), n, dtype, cfg.seed, fractional=True)
                        for n in pc.fractional_sizes]
    hidden = [CaseSpec(f"hidden #{i + 1} {dtype}", n, dtype, cfg.hidden_seed, "hidden")
              for dtype in pc.dtypes for i, n in enumerate(pc.hidden_sizes)]
    return visible + hidden


def sizes_up_to(cfg: Config, max_n: int) -> Config:
    """``cfg`` with every part's sizes and hidden sizes above ``max_n`` left out (``scangrade
    check``'s quick check: ``check.quick_max_n``). A part left with no size keeps n = 1, which
    :func:`case_list` grades anyway; timed sizes (a GPU's, quick there) stay."""
    parts = {}
    for key, pc in cfg.parts.items():
        sizes = tuple(n for n in pc.sizes if n <= max_n) or (1,)
        parts[key] = {"sizes": sizes, "hidden_sizes": tuple(n for n in pc.hidden_sizes if n <= max_n)}
    return cfg.override(parts=parts)


#: The runs of a case whose buffers can be live at once: :func:`run_case` keeps one run's buffers
#: while the next (the second shared-memory fill, the next thread order) allocates its own.
RUNS_LIVE = 2
#: What an allocator may add to each allocation (alignment, a gap after it), in bytes: counted.
_PER_ALLOCATION = 4096
#: Device memory beyond the runs' own, in bytes.
_SLACK = 16 * 2**20


class SizedRun(NamedTuple):
    """One run of a part's launch plan to size device memory for: the part, its config, n, dtype."""

    part: PartSpec
    pc: PartConfig
    n: int
    dtype: str


def case_runs(cfg: Config, key: str, *, max_n: int | None = None) -> list[SizedRun]:
    """A :class:`SizedRun` per case of part ``key`` (:func:`case_list`: visible, hidden, every
    dtype), only those up to ``max_n`` where given (the cases a GPU's checks run)."""
    pc, spec = cfg.parts[key], PARTS[key]
    return [SizedRun(spec, pc, c.n, c.dtype) for c in case_list(cfg, key) if max_n is None or c.n <= max_n]


def device_memory_bytes(runs: list[SizedRun]) -> int:
    """The device memory, in bytes, that grading ``runs`` needs at once: :data:`RUNS_LIVE` runs of
    the largest (every buffer of its plan with its guard zones, as
    :func:`grader.assignment.plans.plan_allocations` finds them, plus an allocator's rounding), and 16 MiB.
    What the CPU emulator reserves (its device memory is address space of the grader's own
    process, which an address-space limit caps), computed from the config alone."""
    from grader.assignment.plans import plan_allocations

    largest = max((sum(b + _PER_ALLOCATION for b in plan_allocations(r.part, r.pc, r.n, DTYPES[r.dtype]))
                   for r in runs), default=0)
    return RUNS_LIVE * largest + _SLACK


def not_run(cfg: Config, key: str, message: str, *, kind: str,
            done: tuple[CaseResult, ...] = ()) -> tuple[CaseResult, ...]:
    """``done``, then every case of :func:`case_list` not among them (by name) as a ``not-run``
    result worth no points, with ``message`` (why it did not run, for the student) and ``kind``
    (the part's failure: ``compile-error``, ``missing``, ``timeout``...)."""
    points = cfg.parts[key].points_per_case
    names = {c.name for c in done}
    return done + tuple(CaseResult(name=c.name, n=c.n, dtype=c.dtype, seed=c.seed, status=CaseStatus.NOT_RUN,
                                   points=0.0, max_points=points, message=message, visibility=c.visibility, kind=kind)
                        for c in case_list(cfg, key) if c.name not in names)


def _draw_key(dtype: np.dtype, fractional: bool) -> int:
    """The last word of an input's seed: 0 int32, 1 float32 exact, 2 float32 fractional."""
    return 0 if np.dtype(dtype).kind != "f" else 2 if fractional else 1


def case_rng(seed: int, part: PartSpec, n: int, dtype: np.dtype, fractional: bool = False) -> np.random.Generator:
    """The generator of one case's input: a function of the seed, the part, n, the dtype and the
    draw only, so any single case can be replayed with ``--seed``."""
    return np.random.default_rng([seed, part.number, n, _draw_key(dtype, fractional)])


#: float32 inputs of the exact draw are multiples of FLOAT_STEP in [-FLOAT_BOUND, FLOAT_BOUND] (quarters
#: in [-4, 4]). A power of two: every sum of them is a multiple of it, exact in float32 while below
#: 2^24 steps (2^22 = 4194304); a random walk of 2^28 of them (mean 0, 2.4 a step) stays within about
#: 40000·4 = 160000 steps w.h.p., so every order of addition gives the same, exact result
#: (:func:`sums_are_exact` checks each draw).
FLOAT_STEP = 0.25
FLOAT_BOUND = 4
#: float32's unit roundoff, 2^-24: one rounding of a sum s is within u·|s|.
UNIT_ROUNDOFF = 2.0 ** -24


#: Inputs longer than this are drawn, and int32 ones scanned, in chunks of this many elements by
#: threads (the chunking, not the thread count, fixes the values).
CHUNK = 1 << 22


def make_input(cfg: Config, part: PartSpec, n: int, seed: int, dtype: np.dtype, *,
               fractional: bool = False) -> np.ndarray:
    """The input of one case: int32 uniform in [inputs.low, inputs.high]; float32 exact (the
    default): multiples of :data:`FLOAT_STEP` uniform in [-FLOAT_BOUND, FLOAT_BOUND], whose every
    partial sum is exact, so the output is compared exactly; float32 ``fractional``: uniform in
    [0, 1) (24 significant bits: an output truncated to an integer, or summed in lower precision,
    fails), compared within :func:`error_bound`.

    Up to :data:`CHUNK` elements come from :func:`case_rng`; longer inputs are drawn by threads in
    chunks of :data:`CHUNK`, chunk i from the i-th child (``SeedSequence.spawn``) of the same seed
    (2^28 int32 elements: 0.44 s instead of 1.33 s on this machine's 2 cores). Either way the values
    depend on the seed, the part, n and the dtype only.

    Returns:
        A new 1-D array of n elements of ``dtype`` (int32 or float32).
    """
    dtype = np.dtype(dtype)

    def draw(rng: np.random.Generator, count: int) -> np.ndarray:
        if dtype.kind == "f" and fractional:
            return rng.random(count, dtype=np.float32)
        if dtype.kind == "f":
            steps = round(FLOAT_BOUND / FLOAT_STEP)
            return (rng.integers(-steps, steps, size=count, endpoint=True, dtype=np.int32) * FLOAT_STEP).astype(
                np.float32)
        return rng.integers(cfg.inputs.low, cfg.inputs.high, size=count, endpoint=True, dtype=np.int32)

    if n <= CHUNK:
        return draw(case_rng(seed, part, n, dtype, fractional), n)
    out = np.empty(n, dtype=dtype)
    children = np.random.SeedSequence([seed, part.number, n, _draw_key(dtype, fractional)]).spawn(tiles(n, CHUNK))

    def fill(i: int) -> None:
        start = i * CHUNK
        out[start:start + CHUNK] = draw(np.random.default_rng(children[i]), min(CHUNK, n - start))
    with ThreadPoolExecutor(default_threads()) as pool:
        list(pool.map(fill, range(len(children))))
    return out


def reference_output(part: PartSpec, x: np.ndarray) -> np.ndarray:
    """The reference scan the part asks for (int32 exact, float32 as float64); int32 inputs longer
    than :data:`CHUNK` are scanned by threads, with the same bits (see
    :func:`reference.scan.scan_int32_threaded`)."""
    if x.dtype == np.int32 and x.size > CHUNK:
        return scan_int32_threaded(x, inclusive=part.inclusive, chunk=CHUNK, threads=default_threads())
    return inclusive_scan(x) if part.inclusive else exclusive_scan(x)


#: The environment variable naming a folder of inputs shared by the workers of one ``batch`` on a GPU
#: (:func:`shared_input`): the whole class is graded on the same inputs, drawn once.
INPUT_CACHE_ENV = "SCANGRADE_INPUT_CACHE"
#: The smallest input kept in that folder (smaller ones cost less to draw than to read back).
INPUT_CACHE_MIN = 1 << 20


def shared_input(cfg: Config, part: PartSpec, n: int, seed: int, dtype: np.dtype, *,
                 fractional: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(input, reference output)`` of one case (:func:`make_input`, :func:`reference_output`), read
    from the folder :data:`INPUT_CACHE_ENV` names where another worker of the batch drew it (mapped
    copy-on-write: a worker's writes stay its own), else drawn and left there for the others (written
    to a temporary name, then renamed: a reader sees a whole file or none; a lock file per input makes
    the others wait for the one drawing it). Without that folder, or
    for inputs under :data:`INPUT_CACHE_MIN` elements, drawn now. Only the GPU path sets the folder:
    there no student code runs on the host, so nothing but the grader can write it."""
    dtype = np.dtype(dtype)
    folder = os.environ.get(INPUT_CACHE_ENV)
    if not folder or n < INPUT_CACHE_MIN:
        x = make_input(cfg, part, n, seed, dtype, fractional=fractional)
        return x, reference_output(part, x)
    key = hashlib.sha256(repr((seed, part.number, part.inclusive, n, dtype.str, cfg.inputs.low, cfg.inputs.high,
                               CHUNK, _draw_key(dtype, fractional), FLOAT_STEP, FLOAT_BOUND)).encode()).hexdigest()[:32]
    paths = [Path(folder) / f"{key}-{what}.npy" for what in ("in", "out")]
    found = _cached_input(paths, n, dtype)
    if found is not None:
        return found
    try:  # one worker draws it; the others wait for it, rather than each drawing (and writing) the same
        lock = os.open(Path(folder) / f"{key}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        lock = None
    try:
        if lock is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
            found = _cached_input(paths, n, dtype)  # drawn while this one waited
            if found is not None:
                return found
        x = make_input(cfg, part, n, seed, dtype, fractional=fractional)
        expected = reference_output(part, x)
        try:
            for path, array in zip(paths, (x, expected)):
                tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
                with open(tmp, "wb") as f:
                    np.save(f, array)
                os.replace(tmp, path)
        except OSError:
            pass  # a full disk: the others draw their own
        return x, expected
    finally:
        if lock is not None:
            os.close(lock)  # releases the lock


def _cached_input(paths: list[Path], n: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray] | None:
    """The input and reference output saved at ``paths`` (mapped copy-on-write), or None where they
    are not there whole (absent, unreadable, cut short, or of another shape)."""
    try:
        if all(p.is_file() for p in paths):
            x, expected = (np.load(p, mmap_mode="c") for p in paths)
            if x.shape == (n,) and x.dtype == dtype and expected.shape == (n,):
                return x, expected
    except (OSError, ValueError):
        pass
    return None


class DrawAhead:
    """Cases' inputs and reference outputs (:func:`make_input`, :func:`reference_output`) drawn in a
    background thread before the cases ask for them: a GPU worker draws its large cases and its
    timed sizes (2^28 elements: about a second of host work) while compute-sanitizer checks the
    small ones, instead of after. The values are the same as drawn on demand (a function of the
    seed, the part, n, the dtype and the draw); an input drawn ahead is handed out once, then forgotten.

    Args:
        cfg: the configuration the inputs are drawn under.
        part: the part whose cases they are.
        items: ``(n, seed, dtype, fractional)`` of each input (see :func:`make_input`), in the order
            to draw them.

    Memory: every input drawn and not yet taken (2 GiB for a 2^28 int32 input and its scan).
    """

    def __init__(self, cfg: Config, part: PartSpec, items: list[tuple[int, int, np.dtype, bool]]) -> None:
        self.cfg, self.part = cfg, part
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="scangrade-draw-ahead")
        self._ahead = {(n, seed, np.dtype(d).str, f): self._pool.submit(self._draw, n, seed, np.dtype(d), f)
                       for n, seed, d, f in items}
        self._pool.shutdown(wait=False)

    def _draw(self, n: int, seed: int, dtype: np.dtype, fractional: bool) -> tuple[np.ndarray, np.ndarray]:
        return shared_input(self.cfg, self.part, n, seed, dtype, fractional=fractional)

    def take(self, n: int, seed: int, dtype: np.dtype, fractional: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """``(input, reference output)`` of one case: the one drawn ahead (waiting for it if it is
        being drawn), else drawn now."""
        future = self._ahead.pop((n, seed, np.dtype(dtype).str, fractional), None)
        if future is not None:
            return future.result()
        return self._draw(n, seed, np.dtype(dtype), fractional)


def case_input(cfg: Config, part: PartSpec, n: int, seed: int, dtype: np.dtype,
               ahead: DrawAhead | None = None, *, fractional: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(input, reference output)`` of one case: from ``ahead`` where given, else drawn now."""
    if ahead is not None and ahead.part is part:
        return ahead.take(n, seed, dtype, fractional)
    return shared_input(cfg, part, n, seed, dtype, fractional=fractional)


#: The sequential CPU scan (the report's "times faster than the CPU") is timed on at most this many
#: elements and scaled linearly to n (it is memory-bound).
CPU_TIMED_MAX = 1 << 24


def cpu_scan_ms(part: PartSpec, x: np.ndarray) -> float:
    """The sequential reference scan's time for ``x`` in ms: the median of three runs (one above 2^20
    elements), on the first :data:`CPU_TIMED_MAX` elements scaled by n / CPU_TIMED_MAX when x is longer."""
    head = x[:CPU_TIMED_MAX]
    times = []
    for _ in range(3 if head.size <= 1 << 20 else 1):
        c0 = time.perf_counter()
        inclusive_scan(head) if part.inclusive else exclusive_scan(head)
        times.append((time.perf_counter() - c0) * 1e3)
    return float(np.median(times)) * x.size / max(1, head.size)


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


#: :func:`sums_are_exact`'s answers for the arrays it was last asked about (each case's input is
#: checked at every run of the case, up to seven at 16M elements): ``id(source)`` -> (weak
#: references to both arrays, the answer).
_EXACT_SEEN: dict[int, tuple] = {}


def sums_are_exact(source: np.ndarray, expected: np.ndarray, *, inclusive: bool) -> bool:
    """Whether every sum a float32 scan of ``source`` can form is exact in float32, so that every
    order of addition gives the reference's value: every input a multiple of :data:`FLOAT_STEP`
    and every sum of a contiguous run of them (the difference of two prefix sums, which
    ``expected``, the float64 reference scan of ``source``, holds) below 2^24 steps. A float64
    reference of such inputs is exact too. Shapes: both (n,); ``inclusive``: which scan ``expected`` is."""
    if source.dtype.kind != "f" or source.size == 0:
        return source.dtype.kind == "f"
    seen = _EXACT_SEEN.get(id(source))
    if seen is not None and seen[0]() is source and seen[1]() is expected and seen[2] == inclusive:
        return seen[3]
    exact = _sums_are_exact(source, expected, inclusive=inclusive)
    if len(_EXACT_SEEN) >= 8:
        _EXACT_SEEN.clear()
    try:
        _EXACT_SEEN[id(source)] = (weakref.ref(source), weakref.ref(expected), inclusive, exact)
    except TypeError:  # an array type without weak references: not remembered
        pass
    return exact


def _sums_are_exact(source: np.ndarray, expected: np.ndarray, *, inclusive: bool) -> bool:
    steps = source / np.float32(FLOAT_STEP)
    if not np.array_equal(steps, np.rint(steps)):
        return False
    total = float(expected[-1]) + (0.0 if inclusive else float(source[-1]))
    top = max(float(expected.max()), total, 0.0)
    bottom = min(float(expected.min()), total, 0.0)
    return top - bottom < 2.0 ** 24 * FLOAT_STEP


def error_bound(expected: np.ndarray, *, source: np.ndarray, inclusive: bool, depth: int) -> np.ndarray | None:
    """Per-element absolute error allowed in a float32 output; None: compared exactly (int32, and
    float32 whose every sum is exact: :func:`sums_are_exact`).

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

    Returns:
        float64 array of shape (n,), or None.
    """
    if expected.dtype.kind != "f" or sums_are_exact(source, expected, inclusive=inclusive):
        return None
    k = (depth + 1) * UNIT_ROUNDOFF
    prefix = np.cumsum(np.abs(source), dtype=np.float64)
    if not inclusive and prefix.size:
        prefix = np.concatenate([np.zeros(1), prefix[:-1]])
    return prefix * (k / (1 - k)) if k < 1 else np.full(prefix.shape, np.inf)


def _wrong(got: np.ndarray, expected: np.ndarray, tol: np.ndarray | None) -> np.ndarray:
    if tol is None:
        return np.flatnonzero(got != expected)
    diff = np.abs(got.astype(np.float64) - expected)
    return np.flatnonzero(~(diff <= tol))  # NaN counts as wrong


def diagnose(got: np.ndarray, expected: np.ndarray, *, source: np.ndarray, inclusive: bool, tile: int | None,
             depth: int | None = None, buffer: str = "out", hierarchical: bool = False) -> Mismatch | None:
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

    Returns:
        A :class:`Mismatch` with the first wrong index, got/expected, the count of wrong
        elements, the first wrong tile's start (None without tiles) and, when recognisable, a
        hint. Each hint fires only where it is the one reading of the output: the other kind of
        scan is named only where it differs from a copy of the input and from the input shifted
        by one (not at n = 1, where the inclusive scan is the input); where the first wrong
        element sits in tile terms (:func:`_tile_hint`) only when there is more than one tile.
    """
    n = got.size
    tol = error_bound(expected, source=source, inclusive=inclusive, depth=max(n - 1, 0) if depth is None else depth)
    wrong = _wrong(got, expected, tol)
    if wrong.size == 0:
        return None
    i = int(wrong[0])
    hint = None
    other = exclusive_scan(source) if inclusive else inclusive_scan(source)
    poisoned = got.view(np.uint32) == POISON_BITS

    def same(reference: np.ndarray) -> bool:  # within this scan's bound: the other readings add as many
        return _wrong(got, reference, tol).size == 0
    copy = source.astype(np.float64 if source.dtype.kind == "f" else source.dtype)
    shifted = np.concatenate([np.zeros(1, copy.dtype), copy[:-1]])
    if n >= 2 and same(other) and not same(copy) and not same(shifted):
        hint = ("this is the exclusive scan; this part asks for the inclusive scan (out[i] includes in[i])"
                if inclusive else
                "this is the inclusive scan; this part asks for the exclusive scan (out[0] = 0, "
                "out[i] = in[0] + ... + in[i-1])")
    elif poisoned[i]:
        unwritten = int(np.count_nonzero(poisoned))
        hint = (f"nothing was written to {buffer}: every element still holds the grader's poison value"
                if unwritten == n else
                f"{buffer}[{i}] was never written ({unwritten} element(s) still hold the grader's poison value)")
    elif n == 1 and not inclusive and same(copy):
        hint = "out[0] = in[0], but an exclusive scan starts with out[0] = 0 (the sum of no elements)"
    elif n == 1 and inclusive and same(shifted):
        hint = "out[0] = 0, but an inclusive scan starts with out[0] = in[0]"
    elif tile and n > tile:
        hint = _tile_hint(got, expected, source, wrong, tol, tile=tile, inclusive=inclusive, hierarchical=hierarchical)
    return Mismatch(buffer=buffer, index=i, got=got[i].item(), expected=expected[i].item(), wrong=int(wrong.size),
                    first_wrong_tile=(i // tile) * tile if tile else None, hint=hint,
                    allowed=None if tol is None else float(tol[i]))


#: How the hint of a wrong last, partial tile starts (:func:`_tile_hint`).
PARTIAL_TILE = "only the last, partial tile is wrong"
#: How the hint of a wrong last tile of exactly one tile's elements starts (n a multiple of the tile).
FULL_LAST_TILE = "only the last, full tile is wrong"
#: How the hint of a first wrong element in the first of several tiles starts.
FIRST_TILE = "the first tile is already wrong"
#: How the hint of a tile whose every element is off by one amount (its offset) starts.
TILE_OFFSET = "every element of tile"
#: The hints that say where the first wrong element sits in tile terms (:func:`_tile_hint`), each
#: ``HEAD: ADVICE``; where a finding explains the output, the advice gives way to it (:func:`_explained`).
TILE_HINTS = (PARTIAL_TILE, FULL_LAST_TILE, FIRST_TILE, TILE_OFFSET)
#: Kinds of finding that explain a wrong tile better than a tile hint's advice: where the case (or,
#: for an unchecked case, a smaller one of the part) has one, the hint names it instead.
EXPLAIN_TILE_HINT = ("race", "uninitialized-read", "out-of-bounds")


def _tile_hint(got: np.ndarray, expected: np.ndarray, source: np.ndarray, wrong: np.ndarray, tol: np.ndarray | None, *,
               tile: int, inclusive: bool, hierarchical: bool) -> str | None:
    """Where the first wrong element of an output of more than one tile sits, in tile terms, as a
    hint ``HEAD: ADVICE`` (None for a first wrong element inside a middle tile whose errors vary):

    - every element of its tile j is off by one amount (:func:`_offset_hint`): the scan within
      the tiles is right and the offset added to tile j is wrong;
    - in the last tile, partial: check the bounds for n (:data:`PARTIAL_TILE`);
    - in the last tile, full (n a multiple of the tile): check what the last block does when its
      tile is full (:data:`FULL_LAST_TILE`);
    - in the first tile, which needs no other tile's sum: check the scan within a tile
      (:data:`FIRST_TILE`).

    ``wrong``: the wrong indices (ascending); ``tol``: the output's :func:`error_bound` or None."""
    n = got.size
    count, j, last = tiles(n, tile), int(wrong[0]) // tile, (n - 1) // tile
    offset = _offset_hint(got, expected, source, wrong, tol, tile=tile, inclusive=inclusive, hierarchical=hierarchical)
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


def _explained(told: list, mm: Mismatch | None, n: int, tile: int | None, known: tuple[CaseFinding, ...]):
    """``told`` and ``mm`` with a tile hint (:data:`TILE_HINTS`) that a finding explains: its advice
    replaced by that finding, one of the case's own, else (for a case whose checks did not run) one
    of ``known``, the findings of the part's earlier cases. A hint no finding explains is kept."""
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


def check_run(run: Run, plan: Plan, d_in: Guarded, x: np.ndarray, expected: np.ndarray, *, part: PartSpec,
              pc: PartConfig, cfg: Config, completed: bool = True, output: bool = True) -> _Verdict:
    """Read every buffer of a run whose launches are done back and check it, as a case is checked:
    guard zones, the input ``x`` (``d_in``), then, where the launches ``completed`` (no finding
    stopped a kernel) and ``output`` holds (not for a run of sampled blocks only, where the other
    blocks wrote nothing), the output against ``expected`` (the reference scan of ``x``; float32
    exactly, or within :func:`error_bound` for a fractional input) and the part's own checks (:attr:`grader.assignment.plans.Plan.checks`: Part 5's ticket
    counter). Every problem found is a finding.

    Returns:
        a ``_Verdict`` (findings, mismatch; its ``status`` and ``message`` sum them up), a named tuple.
    """
    n = x.size
    found: list[CaseFinding] = []
    wholes = {id(g): run.backend.to_host(g.full) for g in run.buffers}
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
                  hierarchical=part.hierarchical)
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
    multiples of :data:`FLOAT_STEP`), or within the element's error bound (:func:`error_bound`)."""
    if mm.allowed is None:
        return (f"compared exactly: the inputs are multiples of {FLOAT_STEP:g}, so every sum is exact in float32 "
                "whatever the order of additions")
    return (f"allowed error {mm.allowed:.3g}: float32 rounding of the sum of |in| up to there, "
            "for this part's longest chain of additions")


#: Thread orders a checking run of the emulator tries, in turn: ascending order hides races (the
#: random one also switches threads at memory accesses: grader.backends.emulator.backend.INTERLEAVE).
CHECK_SCHEDULES = ("ascending", "descending", "random")
#: The ``checker`` of a case above ``emulator.checks_max_n`` whose checks ran on sampled blocks
#: (:func:`run_case`'s ``sampled``); ``emulator checks`` for a case checked whole.
SAMPLED_CHECKER = "emulator checks (sampled blocks)"
#: Where a part's blocks are independent, the accesses of each sampled block the checks see; the rest
#: of the block runs unchecked (the runtime's ``SG_SAMPLED_BLOCK_CHECKS``, in ``sg_host.h``). Every
#: access is checked at the sizes up to ``checks_max_n``; without a bound, a block that does the whole
#: launch's work (one thread scanning everything) would be checked access by access at every size.
SAMPLED_BLOCK_CHECKS = 1 << 20
#: The 32-bit patterns shared memory holds before a correctness case (on the emulator, every block's
#: shared memory at its start; on a GPU, every multiprocessor's, written by a kernel just before):
#: the first for every run, the second for the run again that tells whether the output depends on
#: shared memory no thread wrote. Neither is an identity of a sum (0), and they differ in every bit.
SHARED_FILLS = (0x7F7F7F7F, 0x80808080)


def _set_shared_fill(backend: Backend, pattern: int) -> bool:
    """Make the next launches find ``pattern`` in unwritten shared memory; False where the backend
    cannot (then a case is not run again with a second fill)."""
    if hasattr(backend, "shared_fill"):  # the emulator: each block's arena is filled at its start; a GPU:
        backend.shared_fill = pattern    # every multiprocessor's, before each launch (poison_shared)
        return True
    return False


def _warning_lines(findings) -> tuple[str, ...]:
    """One line per warning finding, deduplicated by kind and line, in the order found."""
    seen, out = set(), []
    for f in findings:
        key = (f.kind, f.file, f.line)
        if key not in seen:
            seen.add(key)
            out.append(f"{f.kind}: {f.message}")
    return tuple(out)


def _fill_changed(first: np.ndarray, second: np.ndarray, dtype: np.dtype, *, tol: np.ndarray | None) -> np.ndarray:
    """Indices where two runs of a case, with unwritten shared memory filled with the two
    :data:`SHARED_FILLS`, give outputs that differ beyond rounding (``first``, ``second``: the
    outputs' 32-bit words, shape (n,); ``tol``: the case's :func:`error_bound`).

    Integers must be equal bit for bit. A float32 output may differ in its last bits from one run
    to the next without any unwritten memory: a decoupled look-back sums its predecessors in the
    order their status words became visible, and float addition is not associative. So floats of
    a fractional input count as changed only beyond the case's error bound (None: exact inputs,
    where every order gives the same bits); a fill of about 3.4e38 that reaches the output changes
    it far beyond that."""
    if np.dtype(dtype).kind != "f" or tol is None:
        return np.flatnonzero(first != second)
    a = first.view(np.float32).astype(np.float64)
    b = second.view(np.float32).astype(np.float64)
    return np.flatnonzero((first != second) & ~(np.abs(a - b) <= 2 * tol))


def _output_bits(run: Run, plan: Plan, n: int) -> np.ndarray:
    return run.backend.to_host(plan.out.full)[GUARD:GUARD + n].view(np.uint32).copy()


def run_case(backend: Backend, module: Module, *, cfg: Config, part: PartSpec, case: CaseSpec,
             schedules: tuple[str, ...] = (), checked=None, checker: str | None = None,
             known: tuple[CaseFinding, ...] = (), ahead: DrawAhead | None = None, sampled: bool = False,
             plain: bool = True) -> CaseResult:
    """Run and check one correctness case; failures of the kernel become a failing CaseResult.

    Args:
        schedules: on a backend with ``set_schedule`` (the emulator), run the case under each of
            these thread orders in turn (the random one seeded by the case's seed); the first
            order that fails is reported. Empty: the backend's current order only.
        sampled: on the emulator, a case too large to check whole (n above
            ``emulator.checks_max_n``): the checks run on the first, the last and
            ``backend.sample_drawn`` blocks drawn from the case's seed of each launch, under
            ``schedules``, and a finding fails the case as it does a smaller one. Where the part's
            blocks are independent (:attr:`grader.assignment.parts.PartSpec.independent_blocks`) only those
            blocks run there, and where they find nothing a plain run of every block (the
            backend's checks as they are) judges the output (``plain``; False: not run, the GPU
            path's checks, whose output the GPU judges); elsewhere every block runs in each order,
            the checks in the sampled ones only, and each output is judged.
        checked: on a GPU, what compute-sanitizer found in this case (a
            :class:`grader.grading.sanitizer.CaseChecks`: its audit, or its fallback where the emulator
            cannot run the part), or a failing CaseResult of the emulator's checks: a finding fails
            the case (the kernel is not run again), as the emulator's checks fail a case whatever
            its output.
        checker: what checked the case beyond its output, for the result (``compute-sanitizer``,
            ``emulator checks``); None: the output only.
        known: the findings of the part's earlier cases: a case whose checks did not run (None
            ``checker``) takes a hint from them where one explains its wrong output (a race found at
            a smaller size, for an output wrong only in its last tile).
        ahead: inputs drawn ahead (:class:`DrawAhead`); the case's is taken from it where drawn.

    Every finding: a kernel whose checks found something that did not stop it (a race) still has
    its buffers checked (guard zones, input, output, Part 5's ticket); one that was stopped (an
    out-of-bounds access, a divergence, a fault) has its guard zones and input checked. The case
    lists what was found, each kind once, in cause order (:func:`grader.core.kinds.in_cause_order`),
    and takes the first's kind; its message tells the first in full.

    Unwritten shared memory: before the case, shared memory holds :data:`SHARED_FILLS`'s first
    pattern (both backends). When the output is wrong (and the checks found nothing in the kernel),
    or the emulator saw a read of shared memory no thread wrote, the case runs again with the
    second pattern: if the output changes, it depends on unwritten shared memory and the case fails
    as ``uninitialized-read``; if it does not, such a read is a warning of a passing case (its
    values never reach the output).

    Raises nothing for problems of the submission; only grader bugs propagate.
    """
    pc = cfg.parts[part.key]
    points = pc.points_per_case
    t0 = time.perf_counter()
    warnings: list[str] = []

    def result(status: CaseStatus, message: str = "", mismatch: Mismatch | None = None,
               kind: str | None = None, findings: tuple[CaseFinding, ...] = ()) -> CaseResult:
        return CaseResult(name=case.name, n=case.n, dtype=case.dtype, seed=case.seed, status=status,
                          points=points if status == CaseStatus.PASS else 0.0, max_points=points, message=message,
                          mismatch=mismatch, elapsed_ms=(time.perf_counter() - t0) * 1e3, visibility=case.visibility,
                          kind=kind, warnings=tuple(dict.fromkeys(warnings)), checker=checker, findings=findings)

    try:
        return _run_case(backend, module, cfg=cfg, part=part, case=case, schedules=schedules, checked=checked,
                         result=result, warnings=warnings, known=known if checker is None else (), ahead=ahead,
                         sampled=sampled, plain=plain)
    except KernelError as exc:  # a GPU fault reported by a copy after the launches (pycuda_backend._copy)
        return result(verdict_of(exc.kind), f"the kernel failed ({exc.kind}): {exc}", kind=exc.kind)
    finally:
        if getattr(backend, "poison_shared", None) is not None:
            backend.shared_fill = None  # no fill before the launches of timing


#: Compiler notes a wrong-values finding shows (the first ones, in source order).
NOTES_SHOWN = 3


def with_compiler_notes(result: CaseResult, notes: list[str], earlier: list[CaseResult]) -> CaseResult:
    """``result`` with what the compiler warns about in the student's own lines that can make values
    wrong (``notes``, from :meth:`grader.backends.emulator.build.Toolchain.compiler_notes` for this
    case's dtype) added to its wrong-values (``mismatch``) finding, and to its message where that
    finding comes first; where the part's cases of every other dtype that ran (``earlier``) passed,
    the note says so: ``int32 passes, float32 fails; the compiler warns: part5_single_pass.cu:42
    converts float to int``. ``result`` as it is without notes or a mismatch."""
    if not notes or not any(f.kind == FailureKind.MISMATCH for f in result.findings):
        return result
    others = [c for c in earlier if c.dtype != result.dtype and c.status != CaseStatus.NOT_RUN]
    head = ""
    if others and all(c.status == CaseStatus.PASS for c in others):
        head = f"{', '.join(sorted({c.dtype for c in others}))} passes, {result.dtype} fails; "
    more = f" (and {len(notes) - NOTES_SHOWN} more)" if len(notes) > NOTES_SHOWN else ""
    note = f" — {head}the compiler warns: {'; '.join(notes[:NOTES_SHOWN])}{more}"
    findings = tuple(dataclasses.replace(f, message=f.message + note) if f.kind == FailureKind.MISMATCH else f
                     for f in result.findings)
    message = result.message + note if result.findings[0].kind == FailureKind.MISMATCH else result.message
    return dataclasses.replace(result, message=message, findings=findings)


class _Told(NamedTuple):
    """A finding, and the text a case's message gives it when it comes first."""

    finding: CaseFinding
    text: str


def _ids(t: tuple[int, int, int]) -> str:
    return f"({t[0]}, {t[1]}, {t[2]})"


def _failed(kinds_found: list[_Told], result, mismatch: Mismatch | None, suffix: str = "") -> CaseResult:
    """The failing result of a case: its findings in cause order, the first's text as the message."""
    told = in_cause_order(kinds_found, kind=lambda t: t.finding.kind)
    first = told[0].finding
    return result(verdict_of(first.kind), told[0].text + suffix, mismatch, first.kind,
                  tuple(t.finding for t in told))


def _checker_findings(found: list) -> list[_Told]:
    """A checker's findings of a case (``grader.backends.base.Finding``: compute-sanitizer's, or the
    emulator's that it cannot make), each told."""
    told = []
    for f in found:
        text = f"the kernel failed ({f.kind}): {f.message}"
        if f.block is not None and f.thread is not None:
            text += f" (block {_ids(f.block)}, thread {_ids(f.thread)})"
        told.append(_Told(CaseFinding(f.kind, f.message, f.file, f.line, f.block, f.thread), text))
    return told


def _kernel_findings(exc: KernelError, where: str) -> list[_Told]:
    """What stopped or was found in a kernel: the error's findings that are not warnings (from a
    checker), or the error itself. The error's own kind is told as the error's text (it lists the
    other findings' lines), the others as their message with the thread."""
    head = f"the kernel failed ({exc.kind}){where}: "
    found = [f for f in getattr(exc, "findings", None) or () if f.kind not in WARNING_KINDS]
    if not found:
        return [_Told(CaseFinding(exc.kind, str(exc)), head + str(exc))]
    told = []
    for f in found:
        text = f"the kernel failed ({f.kind}){where}: {f.message}"
        if f.block is not None and f.thread is not None:
            text += f" (block {_ids(f.block)}, thread {_ids(f.thread)})"
        if f.kind == exc.kind and not any(t.finding.kind == exc.kind for t in told):
            text = head + str(exc)
        told.append(_Told(CaseFinding(f.kind, f.message, f.file, f.line, f.block, f.thread), text))
    return told


class _Launched(NamedTuple):
    """One run of a case's launch plan: its buffers, and the KernelErrors its launches raised (a
    launch that raised with its kernel completed, as for a race, lets the next one run)."""

    run: Run
    plan: Plan
    d_in: Guarded
    errors: list[KernelError]

    @property
    def completed(self) -> bool:
        """Whether every launch of the plan ran to its end (no finding or fault stopped a kernel)."""
        return all(getattr(e, "completed", False) for e in self.errors)


def _run_case(backend, module, *, cfg, part, case, schedules, checked, result, warnings, known, ahead,
              sampled, plain) -> CaseResult:
    pc = cfg.parts[part.key]
    dtype = DTYPES[case.dtype]
    if isinstance(checked, CaseResult):  # the emulator's checks, standing in for compute-sanitizer
        return result(checked.status, checked.message, checked.mismatch, checked.kind, checked.findings)
    found = [f for f in getattr(checked, "findings", ())]
    if found:  # compute-sanitizer's findings (the audit, or its fallback where the emulator cannot run the part)
        told = in_cause_order(_checker_findings(found), kind=lambda t: t.finding.kind)
        first = told[0].finding
        others = [f for f in found if (f.kind, f.message) != (first.kind, first.message)]
        message = told[0].text + "".join(f"\nalso: {f.kind} at {f.file}:{f.line}" for f in others[:5])
        return result(verdict_of(first.kind), message + " — found by compute-sanitizer", kind=first.kind,
                      findings=tuple(t.finding for t in told))
    x, expected = case_input(cfg, part, case.n, case.seed, dtype, ahead, fractional=case.fractional)
    take_warnings = getattr(backend, "take_warnings", None)

    def launch(fill: int, where: str) -> _Launched | CaseResult:
        _set_shared_fill(backend, fill)
        run = Run(backend, module, dtype)
        d_in = run.buffer("in", case.n, x, output=False)
        errors: list[KernelError] = []
        try:
            plan = prepare(run, part, pc, d_in, case.n)
            plan.reset()
            for step in plan.launches:
                try:
                    step()
                except KernelError as exc:
                    warnings.extend(_warning_lines(f for f in getattr(exc, "findings", None) or ()
                                                   if f.kind in WARNING_KINDS))
                    if verdict_of(exc.kind) != CaseStatus.FAIL:  # a crash, an error: nothing to check
                        return result(verdict_of(exc.kind), f"the kernel failed ({exc.kind}){where}: {exc}",
                                      kind=exc.kind)
                    errors.append(exc)
                    if not getattr(exc, "completed", False):
                        break
        except LaunchError as exc:
            return result(CaseStatus.ERROR, f"launch refused: {exc}", kind=FailureKind.LAUNCH_REFUSED)
        finally:
            if take_warnings is not None:
                warnings.extend(_warning_lines(take_warnings()))
        return _Launched(run, plan, d_in, errors)

    def orders(schedules: tuple[str, ...], *, output: bool, note: str = "") -> _Found | CaseResult:
        """The runs of the case in each of ``schedules`` in turn (the backend's current order where
        empty, or where the backend has no orders), up to the first that finds something; ``output``:
        whether a run's output and the part's own checks are judged (not in a run of sampled blocks
        only); ``note``: what a finding's text says of how the case was checked."""
        set_schedule = getattr(backend, "set_schedule", None) if schedules else None
        sees_reads = take_warnings is not None and getattr(backend, "checks", False) is True
        for schedule in (schedules if set_schedule else [None]):
            order = f"emulator thread order: {schedule}" if schedule and schedule != schedules[0] else ""
            where = f" ({'; '.join(filter(None, (note, order)))})" if note or order else ""
            if set_schedule:
                set_schedule(schedule, seed=case.seed)
            before = len(warnings)
            launched = launch(SHARED_FILLS[0], where)
            if isinstance(launched, CaseResult):
                return launched
            if getattr(backend, "sample", None) == "only" and any(e.kind == "deadlock" for e in launched.errors):
                # The sampled blocks wait on blocks that were not run: every block runs from now on.
                del launched
                backend.sample = "all"
                launched = launch(SHARED_FILLS[0], where)
                if isinstance(launched, CaseResult):
                    return launched
            kernel = [t for exc in launched.errors for t in _kernel_findings(exc, where)]
            own, mm = check_run(launched.run, launched.plan, launched.d_in, x, expected, part=part, pc=pc, cfg=cfg,
                                completed=launched.completed, output=output)
            told = kernel + [_Told(f, f.message) for f in own]
            unwritten = [w for w in warnings[before:] if w.startswith("uninitialized-read")]
            if (mm is not None and not kernel) or (unwritten and not told):
                first = _output_bits(launched.run, launched.plan, case.n)
                del launched
                again = launch(SHARED_FILLS[1], where)
                if isinstance(again, CaseResult):
                    return again
                second = _output_bits(again.run, again.plan, case.n)
                _set_shared_fill(backend, SHARED_FILLS[0])
                tol = error_bound(expected, source=x, inclusive=part.inclusive, depth=part.addition_depth(pc, case.n))
                differ = _fill_changed(first, second, dtype, tol=tol)
                if differ.size and not sees_reads:
                    # Without the emulator's view of every read (a GPU, or the emulator above checks_max_n:
                    # both the same way), the fill is the cause only if the first fill gives the first
                    # output again: a kernel whose output changes from run to run anyway (state kept
                    # between launches, a race) is not blamed on unwritten memory.
                    del again
                    same = launch(SHARED_FILLS[0], where)
                    if isinstance(same, CaseResult):
                        return same
                    if _fill_changed(first, _output_bits(same.run, same.plan, case.n), dtype, tol=tol).size:
                        differ = differ[:0]
                # The emulator's checks see every read of shared memory: where they saw none of unwritten
                # memory, an output that changed comes from something else (blocks' timing, a race).
                if differ.size and (unwritten or not sees_reads):
                    i = int(differ[0])
                    note_ = unwritten[0].split(": ", 1)[1] if unwritten else (
                        "the kernel reads shared memory that no thread of its block wrote")
                    text = (f"the output depends on shared memory no thread wrote: with unwritten shared memory "
                            f"filled with two different patterns, out[{i}] differs ({differ.size} of {case.n} "
                            f"elements); {note_}. Pad the unused slots with the scan's identity (0) before using them")
                    told.append(_Told(CaseFinding("uninitialized-read", text), text))
            if told:
                suffix = ""
                if order and not kernel:  # a kernel's finding names the order itself
                    suffix = (f"{where} — it passed in {schedules[0]} order, so the result depends on the order "
                              "threads run in: a race (a missing __syncthreads() or __syncwarp()?)")
                return _Found(told, mm, suffix)
        return _Found([], None, "")

    if not sampled:
        found_ = orders(schedules, output=True)
    else:
        # Above emulator.checks_max_n: the checks on a sample of each launch's blocks, in the same
        # orders; where the part's blocks are independent, only those blocks run, so the output of
        # these runs is not judged: where they find nothing, a plain run of every block (``plain``)
        # gives it. Where they find something, the case fails on it, as a smaller case does.
        mode = "only" if part.independent_blocks else "all"
        note = (f"checks on the first, the last and {backend.sample_drawn} seeded blocks of each launch"
                f"{f' (up to {SAMPLED_BLOCK_CHECKS:,} accesses of each)' if mode == 'only' else ' (every block run)'}"
                f", as n is above emulator.checks_max_n = "
                f"{cfg.emulator.checks_max_n}")
        # Where every block runs (the blocks of a look-back wait on each other), in the first order
        # only: the three orders over every block of a 16M launch were most of a Part 5's grading
        # time, and each order is checked over every block at every size up to checks_max_n.
        with _sampling(backend, mode):
            found_ = orders(schedules if mode == "only" else schedules[:1], output=mode == "all", note=note)
        if plain and mode == "only" and not isinstance(found_, CaseResult) and not found_.told:
            found_ = orders((), output=True)
    if isinstance(found_, CaseResult):
        return found_
    if found_.told:
        told, mm = _explained(found_.told, found_.mismatch, case.n, part.tile_of(pc), known)
        return _failed(told, result, mm, found_.suffix)
    return result(CaseStatus.PASS)


class _Found(NamedTuple):
    """What the runs of a case in its orders found (:func:`_run_case`): the findings, each told, the
    first mismatch, and what the message adds after the first finding's text (the order that failed)."""

    told: list
    mismatch: Mismatch | None
    suffix: str


class _sampling:
    """``with _sampling(backend, mode)``: the backend's checks on, on a sample of each launch's blocks
    (``mode``: ``only`` or ``all``, see :attr:`grader.backends.emulator.EmulatorBackend.sample`), with
    deadlocks found at once; its checks, sample, deadlock detection and thread order as they were after."""

    def __init__(self, backend, mode: str) -> None:
        self.backend, self.mode = backend, mode

    def __enter__(self) -> None:
        b = self.backend
        self.saved = (b.checks, b.sample, b.detect_deadlock, b.schedule, b.schedule_seed)
        b.checks, b.sample, b.detect_deadlock = True, self.mode, True

    def __exit__(self, *exc) -> None:
        b = self.backend
        b.checks, b.sample, b.detect_deadlock, schedule, seed = self.saved
        b.set_schedule(schedule, seed)


def _median_spread(times: list[float]) -> tuple[float, float]:
    a = np.asarray(times)
    med = float(np.median(a))
    return med, float((np.percentile(a, 90) - np.percentile(a, 10)) / med) if med > 0 else 0.0


#: Runs of the submission's kernel, drawn at random among the warm-up and timed ones, after which
#: the grader reads part of its output back (:func:`_spot_check`), besides the whole check after the
#: last: a kernel that counts its launches cannot tell which runs are checked.
CHECKED_RUNS = 3
#: The spot check of one run: this many chunks of ``out`` at random offsets, and its first and last
#: chunk, of :data:`SPOT_CHUNK` elements each (microseconds of copies, outside the timed window).
SPOT_CHUNKS = 6
SPOT_CHUNK = 1024
#: A median faster than a device-to-device copy of the same bytes by more than the runs' spread
#: (the kernel's and the copy's, each 90th less 10th percentile over the median), and at least by
#: this fraction, fails the timed case: a scan reads and writes every element, as the copy does.
COPY_NOISE_MIN = 0.05
#: ... where the copy moves at least this many bytes (read and written): below it the copy's time is
#: its launch and the copy engine's start, which a small kernel can beat without skipping anything.
COPY_FLOOR_MIN_BYTES = 64 << 20


#: A submission whose one untimed run before its timing takes this long (s) is timed from
#: :data:`SLOW_RUNS` runs after one warm-up, not the config's: a one-thread scan of 2^28 elements
#: takes seconds a run, and forty of them minutes, for a time that earns no points either way.
SLOW_RUN_S = 0.1
SLOW_RUNS = 3


def _probe_s(backend: Backend, before: Callable[[], None], launch: Callable[[], None]) -> float:
    """Wall seconds of one untimed run of a timed plan (``before`` then ``launch``, which returns
    when its kernels are done), beside other workers' untimed GPU work."""
    with backend.gpu_shared():
        before()
        t0 = time.perf_counter()
        launch()
        return time.perf_counter() - t0


class _TimedRunWrong(Exception):
    """A spot check after a timed run found a wrong output (:func:`_spot_check`)."""


def _timed_schedule(cfg: Config, part: PartSpec, n: int, *,
                    slow: bool = False) -> tuple[int, int, frozenset[int], np.random.Generator]:
    """``(warm-up runs, timed runs, checked runs, rng)`` of one timed size: the config's counts, each
    plus up to half again (``slow``: one warm-up and :data:`SLOW_RUNS` runs), and
    :data:`CHECKED_RUNS` run indices (over warm-up then timed runs), drawn from the config's seed
    (the private one, where a private config sets it) mixed with fresh entropy, so that neither the
    counts nor the checked runs can be known ahead, even from a public config; ``rng`` draws the
    spot checks' offsets (:func:`_spot_check`) on."""
    rng = np.random.default_rng([cfg.seed, part.number, n, secrets.randbits(63)])
    if slow:
        warmup, runs = 1, SLOW_RUNS
    else:
        warmup = cfg.timing.warmup + int(rng.integers(0, cfg.timing.warmup // 2 + 1))
        runs = cfg.timing.runs + int(rng.integers(0, cfg.timing.runs // 2 + 1))
    checked = rng.choice(warmup + runs, size=min(CHECKED_RUNS, warmup + runs), replace=False)
    return warmup, runs, frozenset(int(i) for i in checked), rng


def _spot_check(backend: Backend, out: Guarded, expected: np.ndarray, rng: np.random.Generator) -> str | None:
    """Part of ``out`` read back and compared with ``expected``: its first and last
    :data:`SPOT_CHUNK` elements and :data:`SPOT_CHUNKS` chunks at offsets drawn from ``rng``. A
    message naming the first wrong element, or None."""
    n = out.count
    starts = {0, max(0, n - SPOT_CHUNK)} | {int(s) for s in rng.integers(0, max(1, n - SPOT_CHUNK + 1), SPOT_CHUNKS)}
    for start in sorted(starts):
        count = min(SPOT_CHUNK, n - start)
        got = backend.to_host(out.inner.view(start, count))
        bad = np.flatnonzero(got != expected[start:start + count])
        if bad.size:
            k = start + int(bad[0])
            poisoned = got[bad[0]:bad[0] + 1].view(np.uint32)[0] == POISON_BITS if got.itemsize == 4 else False
            return (f"out[{k}] = {got[bad[0]]}, expected {expected[k]}"
                    + (" (the poison the grader wrote before the run: the launch wrote nothing there)" if poisoned else ""))
    return None


def _timed_plan(backend: Backend, module: Module, *, part: PartSpec, pc: PartConfig, x: np.ndarray,
                dtype: np.dtype, d_in: Guarded | None = None) -> tuple[Run, Plan, Guarded, Callable[[], None]]:
    """``module``'s launches on ``x`` (uploaded, or already on the device as ``d_in``), ready to time:
    ``(run, plan, d_in, before)``, where ``before()`` poisons the outputs and does the plan's resets
    (Part 5's status words), outside the timed window; the window holds :meth:`Plan.launch` only."""
    run = Run(backend, module, dtype)
    if d_in is None:
        d_in = run.buffer("in", x.size, x, output=False)
    else:
        run.buffers.append(d_in)
    plan = prepare(run, part, pc, d_in, x.size)
    outputs = [g for g in run.buffers if g.output]

    def before() -> None:
        for g in outputs:
            backend.memset32(g.inner, POISON_BITS)
        plan.reset()
    return run, plan, d_in, before


def time_case(backend: Backend, module: Module, *, cfg: Config, part: PartSpec, n: int, dtype_name: str,
              reference: tuple[PartSpec, Module] | None, ahead: DrawAhead | None = None) -> CaseResult:
    """Time one size on a GPU: the submission and the reference solution interleaved on the same
    input (see :meth:`Backend.time_interleaved_ms`), then a device-to-device copy and the
    sequential CPU scan; the submission's output is re-verified after the timed runs.

    Device memory: the input, both outputs (and Part 4's tile sums) and the L2 flush buffer at once
    (3.5 GiB at 2^28 int32 elements). ``ahead``: inputs drawn ahead (:class:`DrawAhead`).

    Returns:
        A CaseResult named ``timed n=<n> <dtype>`` worth no correctness points, with :class:`Timing`.
    """
    pc = cfg.parts[part.key]
    dtype = DTYPES[dtype_name]
    t0 = time.perf_counter()
    name = f"timed n={n} {dtype_name}"

    def result(status: CaseStatus, message: str = "", timing: Timing | None = None,
               mismatch: Mismatch | None = None, kind: str | None = None) -> CaseResult:
        return CaseResult(name=name, n=n, dtype=dtype_name, seed=cfg.seed, status=status, points=0.0,
                          max_points=0.0, message=message, mismatch=mismatch,
                          elapsed_ms=(time.perf_counter() - t0) * 1e3, timing=timing, kind=kind)

    x, expected = case_input(cfg, part, n, cfg.seed, dtype, ahead)
    try:
        run, plan, d_in, before = _timed_plan(backend, module, part=part, pc=pc, x=x, dtype=dtype)
        jobs = [("the submission's kernel", plan.launch, before)]
        if reference is not None:  # the same input on the device; the reference never writes it
            ref_part, ref_module = reference
            _, ref_plan, _, ref_before = _timed_plan(backend, ref_module, part=ref_part,
                                                     pc=cfg.parts.get(ref_part.key, pc), x=x, dtype=dtype, d_in=d_in)
            jobs.append(("the reference solution's kernel", ref_plan.launch, ref_before))
        slow = _probe_s(backend, before, plan.launch)  # far too slow for points: a few runs tell its time
        warmup, runs, checked, spots = _timed_schedule(cfg, part, n, slow=slow >= SLOW_RUN_S)
        out = plan.out

        def after(job: int, i: int) -> None:
            if job == 0 and i in checked:
                wrong = _spot_check(backend, out, expected, spots)
                if wrong is not None:
                    raise _TimedRunWrong(f"run {i + 1} of {warmup + runs} ({warmup} warm-up): {wrong}")
        all_times = backend.time_interleaved_ms(jobs, warmup=warmup, runs=runs, flush_bytes=cfg.timing.flush_bytes,
                                                after=after)
    except _TimedRunWrong as exc:
        return result(CaseStatus.FAIL, f"wrong output after a timed run: {exc}. The grader poisons the output before "
                                       "every run and reads part of it back after runs it draws at random (their "
                                       "number and the runs checked change every time), so every launch must "
                                       "compute the whole scan", kind=FailureKind.WRONG_AFTER_TIMING)
    except LaunchError as exc:
        return result(CaseStatus.ERROR, f"launch refused: {exc}", kind=FailureKind.LAUNCH_REFUSED)
    except KernelError as exc:
        return result(CaseStatus.ERROR, f"the kernel failed while timed ({exc.kind}): {exc}", kind=exc.kind)
    times = all_times[0]
    ref_ms = float(np.median(all_times[1])) if reference is not None else None
    verdict = check_run(run, plan, d_in, x, expected, part=part, pc=pc, cfg=cfg)
    if verdict.findings:
        return result(CaseStatus.FAIL, "wrong output after the timed runs (the grader poisons the output before every "
                                       "run, so every launch must compute the whole scan): " + verdict.message,
                      mismatch=verdict.mismatch, kind=FailureKind.WRONG_AFTER_TIMING)
    median, spread = _median_spread(times)
    launches = len(plan.launches)
    del run, plan, d_in, jobs
    src = backend.alloc(n, dtype)
    dst = backend.alloc(n, dtype)
    copy_ms, copy_spread = _median_spread(backend.time_copy_ms(src, dst, warmup=cfg.timing.warmup,
                                                               runs=cfg.timing.runs, flush_bytes=cfg.timing.flush_bytes))
    del src, dst
    noise = max(COPY_NOISE_MIN, spread + copy_spread)
    if 2 * n * dtype.itemsize >= COPY_FLOOR_MIN_BYTES and median < copy_ms * (1 - noise):
        return result(CaseStatus.FAIL, (
            f"timed at {median:.4f} ms, faster than a device-to-device copy of the same bytes ({copy_ms:.4f} ms) by "
            f"{100 * (1 - median / copy_ms):.0f} %, beyond the runs' noise ({100 * noise:.0f} %): a scan reads and "
            "writes every element, as the copy does, so no scan can beat it. These times are not of the whole scan "
            "(is work skipped on some launches?)"), kind=FailureKind.FASTER_THAN_COPY)
    nbytes = 2 * n * dtype.itemsize
    gbps = nbytes / (median * 1e-3) / 1e9
    copy_gbps = nbytes / (copy_ms * 1e-3) / 1e9
    cpu_ms = cpu_scan_ms(part, x)
    timing = Timing(median_ms=median, spread=spread, runs=len(times), gbps=gbps, copy_fraction=gbps / copy_gbps,
                    reference_ms=ref_ms, ratio=median / ref_ms if ref_ms else None,
                    cpu_speedup=cpu_ms / median, cpu_ms=cpu_ms, copy_ms=copy_ms, launches=launches)
    note = (f"one run took {slow:.2f} s, so it was timed from {len(times)} runs after one warm-up"
            if slow >= SLOW_RUN_S else "")
    return result(CaseStatus.PASS, note, timing)


def score_performance(tc: TimingConfig, timed: list[CaseResult], *, gpu: str = "") -> Performance:
    """Performance points from timed cases: the geometric mean of time / reference time, weighted
    by log2(n), mapped linearly from all points at ``full_at`` to none at ``zero_at``.

    Where no reference solution was timed, the config's ``absolute_ms`` for this ``gpu`` (its
    name as the driver reports it) sets the bar instead. Performance points are given only when
    every timed case produced the right output.
    """
    if not timed:
        return Performance(0.0, tc.points, None, "not timed")
    if any(c.status != "pass" for c in timed):
        return Performance(0.0, tc.points, None, "no performance points: a timed case failed (see its message)")
    bars = tc.absolute_ms.get(gpu, {})
    ratios, against = [], "reference time"
    for c in timed:
        if c.timing is not None and c.timing.ratio is not None:
            ratios.append(c.timing.ratio)
        elif c.timing is not None and c.n in bars:
            ratios.append(c.timing.median_ms / bars[c.n])
            against = f"the configured time for {gpu}"
        else:
            return Performance(0.0, tc.points, None, "not scored: no reference solution on this machine to compare "
                                                     f"with, and no timing.absolute_ms for {gpu or 'this GPU'}")
    weights = [math.log2(max(c.n, 2)) for c in timed]
    geo = math.exp(sum(w * math.log(r) for w, r in zip(weights, ratios)) / sum(weights))
    frac = linear_fraction(geo, full_at=tc.full_at, zero_at=tc.zero_at)
    sizes = ", ".join(str(c.n) for c in timed)
    return Performance(round(tc.points * frac, 2), tc.points, geo,
                       f"time / {against} = {geo:.2f} (geometric mean over n = {sizes}, weighted by log2 n); "
                       f"all points at or below {tc.full_at:g}, none at or above {tc.zero_at:g}")
