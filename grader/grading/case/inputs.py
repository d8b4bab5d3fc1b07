"""The input of each case and its reference output: drawn from the case's seed (:func:`make_input`,
:func:`reference_output`), shared by the workers of a GPU batch (:func:`shared_input`) or drawn
ahead in the background (:class:`DrawAhead`); and whether a float32 input's every sum is exact
(:func:`sums_are_exact`), which decides how its output is compared."""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from grader.assignment.config import Config
from grader.assignment.parts import PartSpec
from grader.assignment.plans import tiles
from reference.scan import default_threads, exclusive_scan, inclusive_scan, scan_int32_threaded


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
    fails), compared within :func:`grader.grading.case.checks.error_bound`.

    A part with its own draw (:attr:`grader.assignment.parts.PartSpec.inputs`) draws with it instead,
    from the same generators.

    Up to :data:`CHUNK` elements come from :func:`case_rng`; longer inputs are drawn by threads in
    chunks of :data:`CHUNK`, chunk i from the i-th child (``SeedSequence.spawn``) of the same seed
    (faster on several cores). Either way the values
    depend on the seed, the part, n and the dtype only.

    Returns:
        A new 1-D array of n elements of ``dtype`` (int32 or float32).
    """
    dtype = np.dtype(dtype)

    def draw(rng: np.random.Generator, count: int) -> np.ndarray:
        if part.inputs is not None:
            return np.asarray(part.inputs(rng, count, dtype), dtype=dtype)
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
    """The reference output of the part for the input ``x``, shape (n,): the part's own function
    where it has one (:attr:`grader.assignment.parts.PartSpec.reference`), else the prefix sum it asks
    for (int32 exact, float32 as float64; int32 inputs longer than :data:`CHUNK` scanned by threads,
    with the same bits: see :func:`reference.scan.scan_int32_threaded`)."""
    if part.reference is not None:
        return part.reference(x)
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
        takers: how many times each item is taken before it is forgotten (parallel to ``items``;
            default once each): a large case's input is taken by the GPU's run and by the emulator's
            checks beside it (:class:`grader.grading.worker.beside.BackgroundEmulatorChecks`).

    Memory: every input drawn and not yet taken as often as said (2 GiB for a 2^28 int32 input and
    its scan).
    """

    def __init__(self, cfg: Config, part: PartSpec, items: list[tuple[int, int, np.dtype, bool]],
                 takers: list[int] | None = None) -> None:
        self.cfg, self.part = cfg, part
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="scangrade-draw-ahead")
        self._lock = threading.Lock()  # takers in several threads
        self._ahead: dict[tuple, list] = {}
        for (n, seed, d, f), left in zip(items, takers or [1] * len(items)):
            key = (n, seed, np.dtype(d).str, f)
            if key in self._ahead:  # a timed size that is a case's size too: one draw, taken by both
                self._ahead[key][1] += left
            else:
                self._ahead[key] = [self._pool.submit(self._draw, n, seed, np.dtype(d), f), left]
        self._pool.shutdown(wait=False)

    def _draw(self, n: int, seed: int, dtype: np.dtype, fractional: bool) -> tuple[np.ndarray, np.ndarray]:
        return shared_input(self.cfg, self.part, n, seed, dtype, fractional=fractional)

    def take(self, n: int, seed: int, dtype: np.dtype, fractional: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """``(input, reference output)`` of one case: the one drawn ahead (waiting for it if it is
        being drawn), else drawn now."""
        key = (n, seed, np.dtype(dtype).str, fractional)
        with self._lock:
            entry = self._ahead.get(key)
            if entry is not None:
                entry[1] -= 1
                if entry[1] <= 0:
                    del self._ahead[key]
        if entry is not None:
            return entry[0].result()
        return self._draw(n, seed, np.dtype(dtype), fractional)


def case_input(cfg: Config, part: PartSpec, n: int, seed: int, dtype: np.dtype,
               ahead: DrawAhead | None = None, *, fractional: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(input, reference output)`` of one case: from ``ahead`` where given, else drawn now."""
    if ahead is not None and ahead.part is part:
        return ahead.take(n, seed, dtype, fractional)
    return shared_input(cfg, part, n, seed, dtype, fractional=fractional)


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


#: Elements :func:`_sums_are_exact` tests at a time: two buffers this size stay in the cache, where
#: temporaries of the input's size (64 MiB at 16M elements) would fault fresh pages in at every call.
_EXACT_CHUNK = 1 << 16


def _sums_are_exact(source: np.ndarray, expected: np.ndarray, *, inclusive: bool) -> bool:
    step = np.float32(FLOAT_STEP)
    steps = np.empty(min(source.size, _EXACT_CHUNK), dtype=np.float32)
    rounded = np.empty_like(steps)
    for lo in range(0, source.size, _EXACT_CHUNK):
        part = source[lo:lo + _EXACT_CHUNK]
        some, near = steps[:part.size], rounded[:part.size]
        np.divide(part, step, out=some)
        np.rint(some, out=near)
        if not np.array_equal(some, near):
            return False
    total = float(expected[-1]) + (0.0 if inclusive else float(source[-1]))
    top = max(float(expected.max()), total, 0.0)
    bottom = min(float(expected.min()), total, 0.0)
    return top - bottom < 2.0 ** 24 * FLOAT_STEP
