"""The predicted time of a timed part on the course's GPU, from the CPU emulator's counts: an
estimate for a student without a GPU, reported beside the roofline's bound and never counted.

The model (docs/prediction.md has its derivation, sources and measured accuracy) takes, per
launch of the part's plan at the predicted size N (:func:`grader.assignment.plans.plan_launches`):

- ``memory``: the time a device-to-device copy of the launch's global bytes takes on the GPU,
  interpolated in the GPU's measured copy times (its launch and bandwidth ramp included): the
  roofline of the launch's traffic (Williams, Waterman and Patterson, "Roofline", CACM 2009);
- ``latency``: the largest of
  - the critical path: the most memory steps one thread makes (the emulator's span), each at the
    GPU's measured step of a thread that walks memory alone where the span grows with the grid (a
    loop of one thread over the input), else at a shared-memory step; plus its barriers;
  - the waves: the blocks over those resident at once (occupancy from threads and shared memory
    per block), each wave the time of an average block's steps and barriers: latency that the
    concurrency cannot hide (Little's law; Volkov, "Understanding Latency Hiding on GPUs", PhD
    thesis, UC Berkeley, 2016, ch. 4);
  - the look-back chain of a single-pass scan: the tiles one after another, each the GPU's measured
    time of one tile's look-back, over the look-back's width (32 where a warp reads its
    predecessors' status words together, one where one lane reads them one by one; Merrill and
    Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back", NVIDIA NVR-2016-002, §4);
- the launch's time is ``memory + latency``; a plan's, the sum over its launches.

The counts come from two emulated runs with every block profiled, at n and n / 4 (the roofline's,
:func:`grader.grading.profiling.roofline_phase`): per kernel its bytes per block, its span, work
and barriers, and how they grow with the grid (a power of the grid's ratio, as
:func:`grader.grading.analysis.span_exponent` takes it). The GPU's constants are measured once per
GPU by ``bench/gpu_constants.py`` and kept, with the GPU's name, the date and the command, in
:data:`GPU_MODELS` (``gpu_models.json`` beside this module).

Public API: :class:`GpuModel`, :data:`GPU_MODELS`, :class:`KernelCounts`, :func:`kernel_counts`,
:func:`predict_ms`, :func:`prediction`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Mapping, Sequence

from grader.assignment.plans import LaunchConfig

__all__ = ["GPU_MODELS", "GpuModel", "KernelCounts", "kernel_counts", "predict_ms", "prediction"]

#: Status words of a single-pass scan are 8 bytes (``unsigned long long`` by Part 5's contract):
#: the global loads of this size are the look-back's.
LOOKBACK_LOAD_BYTES = 8
#: A span that grows at least this fast with the grid (exponent of the grid's ratio) is a thread
#: walking the input alone.
WALKING = 0.5


@dataclass(frozen=True)
class GpuModel:
    """A GPU's constants for :func:`predict_ms`, measured by ``bench/gpu_constants.py``.

    Attributes:
        gpu: the GPU's name as the driver reports it; measured, driver, cuda, command: when, on
            which driver and CUDA, and how the constants were measured.
        sm_count, max_threads_per_sm, max_blocks_per_sm, shared_bytes_per_sm: its attributes.
        copy: ``(bytes, ms)`` pairs, by bytes: a device-to-device copy of that many bytes (read
            plus written), L2 emptied before it.
        shared_step_ns: one dependent shared-memory load of one thread.
        thread_step_ns: one memory step of a thread looping over an array alone (half of one
            element of ``s += in[i]; out[i] = s``).
        barrier_ns: one ``__syncthreads()`` round of a block of 512 threads with a shared step.
        lookback_tile_ns: one tile of a chain of tiles whose one lane looks back one status word
            at a time (the least a serial look-back adds per tile).
        accuracy: what bench/prediction.py measured of the model on this GPU, in words (empty:
            not measured).
    """

    gpu: str
    measured: str
    driver: str
    cuda: str
    command: str
    sm_count: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    shared_bytes_per_sm: int
    copy: tuple[tuple[int, float], ...]
    shared_step_ns: float
    thread_step_ns: float
    barrier_ns: float
    lookback_tile_ns: float
    accuracy: str = ""

    def copy_ms(self, nbytes: float) -> float:
        """A copy of ``nbytes`` (read plus written), in ms: log-log interpolation of :attr:`copy`,
        its smallest time below it, linear in the bytes above its largest."""
        pts = self.copy
        if nbytes <= pts[0][0]:
            return pts[0][1]
        for (b0, t0), (b1, t1) in zip(pts, pts[1:]):
            if nbytes <= b1:
                f = math.log(nbytes / b0) / math.log(b1 / b0)
                return math.exp(math.log(t0) + f * (math.log(t1) - math.log(t0)))
        b, t = pts[-1]
        return t * nbytes / b

    def resident_blocks(self, block: int, shared_bytes: int) -> int:
        """Blocks of ``block`` threads and ``shared_bytes`` of dynamic shared memory (plus 1 KiB the
        system reserves a block) resident on one SM at once; registers are not known here."""
        fit = min(self.max_threads_per_sm // max(block, 1), self.max_blocks_per_sm)
        if shared_bytes:
            fit = min(fit, self.shared_bytes_per_sm // (shared_bytes + 1024))
        return max(1, fit)


def _load_models() -> dict[str, GpuModel]:
    raw = json.loads((Path(__file__).with_name("gpu_models.json")).read_text())
    keys = {f.name for f in fields(GpuModel)}
    return {m["gpu"]: GpuModel(**{k: v for k, v in m.items() if k in keys - {"copy"}},
                               copy=tuple((int(b), float(t)) for b, t in m["copy"]))
            for m in raw["models"]}


#: The measured GPUs, by name (``gpu_models.json``): the one table of them.
GPU_MODELS: Mapping[str, GpuModel] = _load_models()


@dataclass(frozen=True)
class KernelCounts:
    """One kernel's counts in one emulated run (all blocks profiled), from its largest launch.

    Attributes:
        grid, block: that launch's blocks and threads per block.
        span_steps, work_steps, barriers: its span, work and barriers (:class:`~grader.core.access_profile.LaunchSteps`).
        bytes_per_block: the kernel's global bytes (:attr:`~grader.core.access_profile.MemoryProfile.moved_bytes`
            of its sites) over the blocks of all its launches.
        lookback_width: 32 where its 8-byte global loads read several words in one request, 1
            where each reads one, 0 where it has none.
    """

    grid: int
    block: int
    span_steps: int
    work_steps: int
    barriers: int
    bytes_per_block: float
    lookback_width: int


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
        moved = sum(min(32 * s.sectors, 32 * s.ideal_sectors, s.bytes or 32 * s.ideal_sectors) for s in sites)
        look = [s for s in sites if not s.store and s.size == LOOKBACK_LOAD_BYTES and s.requests]
        width = 0
        if look:
            lanes = sum(s.bytes for s in look) / (LOOKBACK_LOAD_BYTES * sum(s.requests for s in look))
            width = 32 if lanes > 1.0 else 1
        out[kernel] = KernelCounts(grid=cfg.grid, block=cfg.block, span_steps=steps.span_steps,
                                   work_steps=steps.work_steps, barriers=steps.barriers,
                                   bytes_per_block=moved / blocks if blocks else 0.0, lookback_width=width)
    return out


def _growth(small: float, big: float, g_small: int, g_big: int) -> float:
    """The exponent e with big = small * (g_big / g_small) ** e, clamped to [0, 1]; 0 where it
    cannot be told."""
    if small <= 0 or big <= small or g_big <= g_small:
        return 0.0
    return min(1.0, math.log(big / small) / math.log(g_big / g_small))


def _launch_ms(model: GpuModel, cfg: LaunchConfig, big: KernelCounts, small: KernelCounts | None) -> float:
    """One launch's predicted ms (the module's docstring): ``memory + latency``."""
    g = cfg.grid
    span_e = _growth(small.span_steps, big.span_steps, small.grid, big.grid) if small else 0.0
    work_e = _growth(small.work_steps, big.work_steps, small.grid, big.grid) if small else 1.0
    scale = g / big.grid if big.grid else 1.0
    span = big.span_steps * scale ** span_e
    work = big.work_steps * scale ** work_e
    memory = model.copy_ms(big.bytes_per_block * g)
    step = model.thread_step_ns if span_e >= WALKING else model.shared_step_ns
    critical = span * step + big.barriers * model.barrier_ns
    waves = math.ceil(g / (model.sm_count * model.resident_blocks(cfg.block, cfg.shared_bytes)))
    average = work / (g * cfg.block) if g and cfg.block else 0.0
    per_wave = average * model.shared_step_ns + big.barriers * model.barrier_ns
    chain = g * model.lookback_tile_ns / big.lookback_width if big.lookback_width and g > 1 else 0.0
    return memory + max(critical, waves * per_wave, chain) * 1e-6


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
