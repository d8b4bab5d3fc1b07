"""Running one case of one part on a backend, and checking its output.

The grader owns the host side: it draws the input, allocates every device buffer with guard
zones filled with a poison value, launches the part's kernels following the part's launch plan
(see :mod:`grader.parts`), reads everything back, and checks, in order: writes outside any buffer
(guard zones), changes to the input, then the output against the sequential reference scan.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from grader.backends.base import Backend, DeviceArray, Module
from grader.config import Config
from grader.errors import KernelError, LaunchError
from grader.parts import PartSpec
from grader.results import CaseResult, Mismatch
from reference.scan import exclusive_scan, inclusive_scan

#: Elements of poison on each side of every device buffer.
GUARD = 256
#: The value every output and guard element holds before a launch (0x7F7F7F7F as int32).
POISON = {np.dtype(np.int32): np.int32(0x7F7F7F7F)}


def case_rng(seed: int, part: PartSpec, n: int) -> np.random.Generator:
    """The generator of one case's input: a function of the base seed, the part and n only,
    so any single case can be replayed with ``--seed``."""
    return np.random.default_rng([seed, part.number, n])


def make_input(cfg: Config, part: PartSpec, n: int, seed: int, dtype: np.dtype) -> np.ndarray:
    """The input of one case: n values drawn uniformly from [inputs.low, inputs.high]."""
    return case_rng(seed, part, n).integers(cfg.input_low, cfg.input_high, size=n, endpoint=True,
                                            dtype=np.int64).astype(dtype)


@dataclass
class _Guarded:
    """A device buffer with a poisoned guard zone of :data:`GUARD` elements on each side."""

    name: str
    full: DeviceArray
    inner: DeviceArray
    count: int
    initial: np.ndarray  # what the whole allocation held before the launches

    def read(self, backend: Backend) -> np.ndarray:
        return backend.to_host(self.full)


@dataclass
class _Run:
    backend: Backend
    module: Module
    dtype: np.dtype
    buffers: list[_Guarded] = field(default_factory=list)

    def buffer(self, name: str, count: int, init: np.ndarray | None = None) -> _Guarded:
        poison = POISON[self.dtype]
        host = np.full(count + 2 * GUARD, poison, dtype=self.dtype)
        if init is not None:
            host[GUARD:GUARD + count] = init
        full = self.backend.alloc(count + 2 * GUARD, self.dtype)
        self.backend.to_device(host, full)
        g = _Guarded(name, full, full.view(GUARD, count), count, host)
        self.buffers.append(g)
        return g


def _tiles(n: int, tile: int) -> int:
    return (n + tile - 1) // tile


def _run_plan(run: _Run, part: PartSpec, block_size: int, d_in: _Guarded, n: int) -> _Guarded:
    """Launch the part's kernels; returns the buffer holding the scan of d_in."""
    b, s = block_size, run.dtype.itemsize
    launch = run.backend.launch
    if part.key == "part1_naive":
        out = run.buffer("out", n)
        launch(run.module, "naive_scan", grid=1, block=b, shared_bytes=2 * b * s, args=[d_in.inner, out.inner, n])
        return out
    if part.key == "part2_blelloch":
        out = run.buffer("out", n)
        launch(run.module, "blelloch_scan", grid=1, block=b, shared_bytes=2 * b * s,
               args=[d_in.inner, out.inner, n])
        return out
    if part.key == "part4_any_size":
        return _scan_any(run, b, d_in, n, level=0)
    raise LaunchError(f"no launch plan for part {part.key}")


def _scan_any(run: _Run, b: int, d_in: _Guarded, n: int, *, level: int) -> _Guarded:
    """Part 4's hierarchy: scan tiles, scan the tile sums recursively, add the offsets back."""
    tile = 2 * b
    tiles = _tiles(n, tile)
    suffix = "" if level == 0 else f" (level {level})"
    out = run.buffer("out" + suffix, n)
    sums = run.buffer("tile_sums" + suffix, tiles)
    run.backend.launch(run.module, "scan_tiles", grid=tiles, block=b, shared_bytes=tile * run.dtype.itemsize,
                       args=[d_in.inner, out.inner, sums.inner, n])
    if tiles > 1:
        offsets = _scan_any(run, b, sums, tiles, level=level + 1)
        run.backend.launch(run.module, "add_tile_offsets", grid=tiles, block=b, shared_bytes=0,
                           args=[out.inner, offsets.inner, n])
    return out


def _guard_problem(g: _Guarded, whole: np.ndarray) -> str | None:
    """A message when a guard zone changed: the kernel wrote outside the buffer."""
    before = np.flatnonzero(whole[:GUARD] != g.initial[:GUARD])
    after = np.flatnonzero(whole[GUARD + g.count:] != g.initial[GUARD + g.count:])
    if before.size:
        return f"wrote outside {g.name}: {g.name}[{before[0] - GUARD}] (before the start of the buffer)"
    if after.size:
        return (f"wrote outside {g.name}: {g.name}[{g.count + after[0]}] "
                f"(past the end; the buffer has {g.count} elements)")
    return None


def diagnose(got: np.ndarray, expected: np.ndarray, *, source: np.ndarray, inclusive: bool, tile: int,
             poison: np.generic, buffer: str = "out") -> Mismatch | None:
    """Compare an output with the reference; None when equal.

    Args:
        got, expected: 1-D arrays of the same length and dtype.
        source: the input, to recognise the other kind of scan.
        inclusive: whether the part asks for an inclusive scan.
        tile: elements per tile (2*BLOCK_SIZE), to name the first wrong tile.
        poison: the value outputs held before the launch.

    Returns:
        A :class:`Mismatch` with the first wrong index, got/expected, the count of wrong
        elements, the first wrong tile's start and, when recognisable, a hint.
    """
    wrong = np.flatnonzero(got != expected)
    if wrong.size == 0:
        return None
    i = int(wrong[0])
    n = got.size
    hint = None
    other = exclusive_scan(source) if inclusive else inclusive_scan(source)
    if np.array_equal(got, other):
        hint = ("this is the exclusive scan; this part asks for the inclusive scan (out[i] includes in[i])"
                if inclusive else
                "this is the inclusive scan; this part asks for the exclusive scan (out[0] = 0, "
                "out[i] = in[0] + ... + in[i-1])")
    elif got[i] == poison:
        unwritten = int(np.count_nonzero(got == poison))
        hint = (f"nothing was written to {buffer}: every element still holds the grader's poison value"
                if unwritten == n else
                f"{buffer}[{i}] was never written ({unwritten} element(s) still hold the grader's poison value)")
    elif n % tile and i >= (n // tile) * tile:
        hint = f"only the last, partial tile is wrong: check the bounds for n = {n}, which is not a multiple of {tile}"
    first_tile = (i // tile) * tile
    return Mismatch(buffer=buffer, index=i, got=got[i].item(), expected=expected[i].item(), wrong=int(wrong.size),
                    first_wrong_tile=first_tile, hint=hint)


def run_case(backend: Backend, module: Module, *, cfg: Config, part: PartSpec, n: int, seed: int,
             dtype: np.dtype = np.dtype(np.int32)) -> CaseResult:
    """Run and check one case; failures of the kernel become a failing CaseResult.

    Raises nothing for problems of the submission; only grader bugs propagate.
    """
    points = cfg.parts[part.key].points_per_case
    name = f"n={n}"
    t0 = time.perf_counter()

    def result(status: str, message: str = "", mismatch: Mismatch | None = None) -> CaseResult:
        return CaseResult(name=name, n=n, dtype=str(np.dtype(dtype)), seed=seed, status=status,
                          points=points if status == "pass" else 0.0, max_points=points, message=message,
                          mismatch=mismatch, elapsed_ms=(time.perf_counter() - t0) * 1e3)

    x = make_input(cfg, part, n, seed, np.dtype(dtype))
    expected = inclusive_scan(x) if part.inclusive else exclusive_scan(x)
    run = _Run(backend, module, np.dtype(dtype))
    d_in = run.buffer("in", n, x)
    try:
        out = _run_plan(run, part, cfg.block_size, d_in, n)
    except LaunchError as exc:
        return result("error", f"launch refused: {exc}")
    except KernelError as exc:
        return result("error", f"the kernel failed ({exc.kind}): {exc}")
    wholes = {id(g): g.read(backend) for g in run.buffers}
    for g in run.buffers:
        problem = _guard_problem(g, wholes[id(g)])
        if problem:
            return result("fail", f"out-of-bounds write: {problem}")
    inner_in = wholes[id(d_in)][GUARD:GUARD + n]
    changed = np.flatnonzero(inner_in != x)
    if changed.size:
        j = int(changed[0])
        return result("fail", f"the input was modified: in[{j}] = {inner_in[j]}, was {x[j]} "
                              f"({changed.size} element(s) changed); the contract's input is read-only")
    got = wholes[id(out)][GUARD:GUARD + n]
    mm = diagnose(got, expected, source=x, inclusive=part.inclusive, tile=2 * cfg.block_size,
                  poison=POISON[np.dtype(dtype)])
    if mm is None:
        return result("pass")
    msg = f"out[{mm.index}] = {mm.got}, expected {mm.expected}; {mm.wrong} of {n} elements wrong"
    tile = 2 * cfg.block_size
    if n > tile:
        msg += f"; the first wrong element is in tile {mm.index // tile} (elements from {mm.first_wrong_tile})"
    if mm.hint:
        msg += f" — {mm.hint}"
    return result("fail", msg, mm)
