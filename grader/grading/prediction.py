"""The predicted time of a timed part on the course's GPU, from the CPU emulator's counts: an
estimate for a student without a GPU, reported beside the roofline's bound and never counted.

The model (docs/prediction.md has its derivation, sources and measured accuracy) takes, per
launch of the part's plan at the predicted size N (:func:`grader.assignment.plans.plan_launches`):

- ``memory``: the time a device-to-device copy of the launch's global bytes takes on the GPU,
  interpolated in the GPU's measured copy times (its launch and bandwidth ramp included): the
  roofline of the launch's traffic (Williams, Waterman and Patterson, "Roofline", CACM 2009); or,
  where the launch's stores touch more sectors than their bytes fill (lanes far apart, each
  writing part of a sector), those sectors at the GPU's measured rate for such stores, whichever
  is longer (a load's partly used lines come back from L1 for the warp's next requests);
- ``latency``: the larger of
  - the critical path: the most memory steps one thread makes (the emulator's span), each at the
    GPU's measured step of a thread that walks memory alone where the span grows with the grid (a
    loop of one thread over the input), else at a shared-memory step; plus its barriers;
  - the waves: the blocks over those resident at once (occupancy from threads and shared memory
    per block), each wave the time of an average block's steps and barriers: latency that the
    concurrency cannot hide (Little's law; Volkov, "Understanding Latency Hiding on GPUs", PhD
    thesis, UC Berkeley, 2016, ch. 4);
- the launch's time is ``memory + latency``; a plan's, the sum over its launches, less, for every
  launch after the first, the copy's fixed cost in place of which it pays the GPU's queued
  dispatch (:attr:`~grader.core.gpu_models.GpuModel.queued_launch_us`): the grader queues a plan's
  launches behind the L2 flush, so each starts as the one before it ends.
- A kernel that reads 8-byte global words (a single-pass scan's tile status words, by Part 5's
  contract) looks back: its launch is a simulation of the tiles on the GPU's schedule instead
  (:func:`_lookback_ms`): each tile lives the launch's time over the tiles each slot runs, and
  between publishing its aggregate and its inclusive prefix reads its predecessors' words, 32 a
  read where a warp reads them together, one where one lane does, a dependent L2 load each
  (Merrill and Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back", NVIDIA
  NVR-2016-002, 2016, §4). A look-back stops at the first inclusive prefix; one that reads
  every predecessor's word (the emulator counts about tiles·(tiles - 1)/2 reads) walks them all.

The counts come from two emulated runs with every block profiled, at n and n / 4 (the roofline's,
:func:`grader.grading.profiling.roofline_phase`): per kernel its bytes per block, its span, work
and barriers, and how they grow with the grid (a power of the grid's ratio, as
:func:`grader.grading.analysis.span_exponent` takes it). The GPU's constants are measured once per
GPU by ``bench/gpu_constants.py`` and kept, with the GPU's name, the date and the command, in
:data:`grader.core.gpu_models.GPU_MODELS`.

Public API (:class:`~grader.core.gpu_models.GpuModel` and its table are :mod:`grader.core.gpu_models`'s):
:class:`KernelCounts`, :func:`kernel_counts`,
:func:`predict_ms`, :func:`prediction`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from grader.assignment.plans import LaunchConfig
from grader.core.gpu_models import GPU_MODELS, GpuModel

__all__ = ["KernelCounts", "kernel_counts", "predict_ms", "prediction"]

#: Status words of a single-pass scan are 8 bytes (``unsigned long long`` by Part 5's contract):
#: the global loads of this size are the look-back's.
LOOKBACK_LOAD_BYTES = 8
#: A store request that touches more sectors than this is scattered (lanes more than 16 bytes apart
#: on average; the GPU's ``sector_gbps`` was measured with 32 a request).
SCATTERED = 16
#: A kernel whose 8-byte loads number at least this share of tiles·(tiles - 1)/2 read every
#: predecessor's status word (a walk that no inclusive prefix ends); a decoupled look-back, whose
#: walks the emulator's schedule cuts short, reads far fewer.
EVERY_PREDECESSOR = 0.9
#: A span that grows at least this fast with the grid (exponent of the grid's ratio) is a thread
#: walking the input alone.
WALKING = 0.5


@dataclass(frozen=True)
class KernelCounts:
    """One kernel's counts in one emulated run (all blocks profiled), from its largest launch.

    Attributes:
        grid, block: that launch's blocks and threads per block.
        span_steps, work_steps, barriers: its span, work and barriers (:class:`~grader.core.access_profile.LaunchSteps`).
        bytes_per_block: the kernel's global bytes (:attr:`~grader.core.access_profile.MemoryProfile.moved_bytes`
            of its sites) over the blocks of all its launches; sector_bytes_per_block: 32 bytes
            times the sectors of its store sites whose requests touch more than :data:`SCATTERED`
            sectors each (lanes far apart), over the same blocks.
        lookback_width: 32 where its 8-byte global loads read several words in one request, 1
            where each reads one, 0 where it has none; lookback_reads: those loads' requests
            (a poll's repeats not counted: docs/emulator.md, "What the profile counts").
    """

    grid: int
    block: int
    span_steps: int
    work_steps: int
    barriers: int
    bytes_per_block: float
    lookback_width: int
    sector_bytes_per_block: float = 0.0
    lookback_reads: int = 0


def kernel_counts(profile, launches: Sequence[LaunchConfig]) -> dict[str, KernelCounts]:
    """Per kernel, its :class:`KernelCounts` from one run's
    :class:`~grader.core.access_profile.MemoryProfile` (every block profiled) and the run's launches
    in order (one per entry of ``profile.launches``)."""
    out: dict[str, KernelCounts] = {}
    for kernel in {c.kernel for c in launches}:
        pairs = [(c, s) for c, s in zip(launches, profile.launches) if c.kernel == kernel]
        if not pairs:
            continue
        cfg, steps = max(pairs, key=lambda p: p[0].grid)
        blocks = sum(c.grid for c, _ in pairs)
        sites = [s for s in profile.sites if s.kernel == kernel and s.space == "global"]
        moved = sum(s.moved_bytes for s in sites)
        look = [s for s in sites if not s.store and s.size == LOOKBACK_LOAD_BYTES and s.requests]
        width = reads = 0
        if look:
            reads = sum(s.requests for s in look)
            width = 32 if sum(s.bytes for s in look) / (LOOKBACK_LOAD_BYTES * reads) > 1.0 else 1
        # stores whose requests each write a part of many sectors (lanes far apart, as the measured
        # rate's, 32 a request): L2 serves them sector by sector
        sectors = 32 * sum(s.sectors for s in sites if s.store and s.sectors > SCATTERED * s.requests)
        out[kernel] = KernelCounts(grid=cfg.grid, block=cfg.block, span_steps=steps.span_steps,
                                   work_steps=steps.work_steps, barriers=steps.barriers,
                                   bytes_per_block=moved / blocks if blocks else 0.0, lookback_width=width,
                                   sector_bytes_per_block=sectors / blocks if blocks else 0.0,
                                   lookback_reads=reads)
    return out


def _growth(small: float, big: float, g_small: int, g_big: int) -> float:
    """The exponent e with big = small * (g_big / g_small) ** e, clamped to [0, 1]; 0 where it
    cannot be told."""
    if small <= 0 or big <= small or g_big <= g_small:
        return 0.0
    return min(1.0, math.log(big / small) / math.log(g_big / g_small))


def _launch_ms(model: GpuModel, cfg: LaunchConfig, big: KernelCounts, small: KernelCounts | None) -> float:
    """One launch's predicted ms (the module's docstring): ``memory + latency``, or the look-back's
    simulation where the kernel looks back (:func:`_lookback_ms`)."""
    g = cfg.grid
    span_e = _growth(small.span_steps, big.span_steps, small.grid, big.grid) if small else 0.0
    work_e = _growth(small.work_steps, big.work_steps, small.grid, big.grid) if small else 1.0
    scale = g / big.grid if big.grid else 1.0
    span = big.span_steps * scale ** span_e
    work = big.work_steps * scale ** work_e
    fixed = model.copy_ms(0)
    memory = max(model.copy_ms(big.bytes_per_block * g),
                 fixed + big.sector_bytes_per_block * g / (model.sector_gbps * 1e9) * 1e3)
    step = model.thread_step_ns if span_e >= WALKING else model.shared_step_ns
    critical = span * step + big.barriers * model.barrier_ns
    resident = model.sm_count * model.resident_blocks(cfg.block, cfg.shared_bytes)
    waves = math.ceil(g / resident)
    average = work / (g * cfg.block) if g and cfg.block else 0.0
    per_wave = average * model.shared_step_ns + big.barriers * model.barrier_ns
    base = memory + max(critical, waves * per_wave) * 1e-6
    if not big.lookback_width or g < 2:
        return base
    # a tile's life without its look-back: the launch's time over the tiles each slot runs (all of it
    # where every tile is resident at once)
    tile_ns = max((base - fixed) * 1e6 * min(resident, g) / g, per_wave)
    walk = None
    if big.lookback_reads >= EVERY_PREDECESSOR * big.grid * (big.grid - 1) / 2 > 0:
        # each tile read about every predecessor's word: a walk whatever the words hold, which the
        # emulator's schedule does not shorten, as long on a GPU
        per_index = 2.0 * big.lookback_reads / (big.grid * (big.grid - 1))
        walk = lambda t: per_index * t  # noqa: E731
    return fixed + _lookback_ms(g, resident, tile_ns, model.l2_step_ns, big.lookback_width, walk)


def _lookback_ms(tiles: int, slots: int, tile_ns: float, read_ns: float, width: int, walk=None,
                 waves: int = 8) -> float:
    """A single-pass scan's look-back, simulated on the GPU's schedule, in ms (without the launch's
    fixed cost): ``slots`` tiles resident at once, each started when a slot frees in ticket
    order, publishing its aggregate half-way through its ``tile_ns``, then looking back in rounds
    of ``width`` predecessors, a round ``read_ns``, waiting for a predecessor that has not
    published its aggregate, until a round finds an inclusive prefix (a decoupled look-back:
    Merrill and Garland, NVR-2016-002, §4.4); or, with ``walk``, reading ``walk(t)`` words whatever
    they hold (then not simulated: the slots' work, or the last tile's walk, whichever is longer).
    Its inclusive prefix published, the tile spends the other half of ``tile_ns``. The first
    ``waves`` waves are simulated; the rest, at their pace.
    """
    import heapq
    if walk is not None:  # a walk that grows with the index: the slots' work, or the last tile's walk
        walked = sum(math.ceil(walk(t) / width) for t in range(1, tiles)) * read_ns
        last = tile_ns + math.ceil(walk(tiles - 1) / width) * read_ns
        return max((tiles * tile_ns + walked) / min(slots, tiles), last) * 1e-6
    count = min(tiles, waves * slots)
    free = [0.0] * min(slots, count)
    aggregate = [0.0] * count
    inclusive = [0.0] * count
    end = 0.0
    half = tile_ns / 2
    for t in range(count):
        start = heapq.heappop(free)
        x = aggregate[t] = start + half
        if t:
            p = t - 1
            while True:
                lo = max(-1, p - width)
                x = max(x + read_ns, max(aggregate[q] for q in range(p, lo, -1)) + read_ns)
                if lo < 0 or any(inclusive[q] <= x for q in range(p, lo, -1)):
                    break
                p = lo
        inclusive[t] = x
        heapq.heappush(free, x + half)
        end = max(end, x + half)
    return end * tiles / count * 1e-6


def predict_ms(model: GpuModel, launches: Sequence[LaunchConfig], big: Mapping[str, KernelCounts],
               small: Mapping[str, KernelCounts] | None = None) -> float | None:
    """The predicted time of a plan's ``launches`` at some size on ``model``'s GPU, in ms; None
    where a launched kernel was not counted.

    Args:
        launches: the plan's launches at the predicted size (:func:`grader.assignment.plans.plan_launches`).
        big: :func:`kernel_counts` of the counted run at n; small: of the run at n / 4 (how the
            counts grow with the grid), or None (they do not grow).
    """
    total = 0.0
    for cfg in launches:
        counts = big.get(cfg.kernel)
        if counts is None:
            return None
        total += _launch_ms(model, cfg, counts, (small or {}).get(cfg.kernel))
    if model.queued_launch_us is not None and launches:
        # a launch queued behind another starts as that one ends, plus a queued dispatch: not a lone
        # launch's fixed cost, which every _launch_ms counts
        total -= (len(launches) - 1) * max(0.0, model.copy_ms(0) - model.queued_launch_us * 1e-3)
    return total


def _counts(pairs) -> dict[str, KernelCounts]:
    return {name: c for name, c in pairs}


def prediction(model: GpuModel, *, part, pc, dtype: str, counts, reference=None, reference_part=None,
               against: str = "the reference solution"):
    """A timed part's :class:`~grader.core.performance.Prediction` on ``model``'s GPU at each of its
    timed sizes, and the performance points the predicted ratios would earn (never counted).

    Args:
        part, pc: the :class:`~grader.assignment.parts.PartSpec` and its
            :class:`~grader.assignment.config.PartConfig` (the plan, the timed sizes, the thresholds).
        dtype: the ``scan_t`` counted (``int32`` ...).
        counts: the submission's :class:`~grader.grading.analysis.RooflineCounts` (with ``kernels``).
        reference: the reference solution's on the same input, or None; reference_part: its
            PartSpec, whose plan it runs with ``pc`` (default ``part``).
        against: how the message names the reference.
    """
    import numpy as np
    from grader.assignment.plans import plan_launches
    from grader.core.performance import Prediction, PredictionRow, linear_fraction, weighted_ratio

    tc = pc.timing
    rows = []
    for n in sorted(set(tc.all_sizes)):
        launches = plan_launches(part, pc, n, np.dtype(dtype))
        mine = predict_ms(model, launches, _counts(counts.kernels), _counts(counts.small_kernels))
        if mine is None:
            return Prediction(gpu=model.gpu, message=f"no prediction: a launched kernel was not counted at n = {n:,}",
                              max_points=tc.points, accuracy=model.accuracy)
        ref = None
        if reference is not None and reference.kernels:
            ref_launches = plan_launches(reference_part or part, pc, n, np.dtype(dtype))
            ref = predict_ms(model, ref_launches, _counts(reference.kernels), _counts(reference.small_kernels))
        rows.append(PredictionRow(n=n, predicted_ms=mine, reference_ms=ref, ratio=mine / ref if ref else None))
    scored = [r for r in rows if r.n in set(tc.sizes)]
    ratio = points = None
    if scored and all(r.ratio for r in scored):
        ratio = weighted_ratio([r.n for r in scored], [r.ratio for r in scored])
        points = round(tc.points * linear_fraction(ratio, full_at=tc.full_at, zero_at=tc.zero_at), 2)
    last = rows[-1]
    message = f"predicted {last.predicted_ms:.4g} ms on an {model.gpu} at n = {last.n:,}"
    if last.reference_ms is not None:
        message += f" ({against}: {last.reference_ms:.4g} ms)"
    if ratio is not None and tc.points:
        message += (f"; ratio {ratio:.2f} over the timed sizes, about {points:g}/{tc.points:g} points if a GPU "
                    f"confirms it (a prediction, not counted)")
    elif ratio is not None:
        message += f"; ratio {ratio:.2f} (this part's time is worth no points)"
    else:
        message += "; a prediction, not counted"
    if model.accuracy:
        message += f"; {model.accuracy}"
    return Prediction(gpu=model.gpu, message=message, rows=tuple(rows), ratio=ratio, points=points,
                      max_points=tc.points, accuracy=model.accuracy)
