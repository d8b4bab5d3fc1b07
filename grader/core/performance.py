"""The records of a part's speed and memory behaviour, as results carry them: one case's GPU
:class:`Timing`, a part's :class:`Performance` (its timing points), the GPU's :class:`Analysis` table,
the emulator's :class:`Roofline` and access :class:`Profile`, and :func:`linear_fraction`, the one
rule turning a ratio to the reference into a share of points. Frozen dataclasses, read back from JSON
by :func:`grader.core.results.result_from_dict`; :mod:`grader.core.results` holds the case, part and
submission records that carry these.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def linear_fraction(ratio: float, *, full_at: float, zero_at: float) -> float:
    """The share of a score's points a ratio earns (time or shared-memory wavefronts over the
    reference's): 1 at or below ``full_at``, 0 at or above ``zero_at``, linear in between."""
    if ratio <= full_at:
        return 1.0
    if ratio >= zero_at:
        return 0.0
    return (zero_at - ratio) / (zero_at - full_at)


def weighted_ratio(ns, ratios) -> float:
    """The geometric mean of ``ratios`` weighted by log2 of their sizes ``ns`` (at least 1 each): how
    a timed part's sizes combine into the one ratio its points come from."""
    weights = [math.log2(max(n, 2)) for n in ns]
    return math.exp(sum(w * math.log(r) for w, r in zip(weights, ratios)) / sum(weights))


@dataclass(frozen=True)
class Timing:
    """GPU timing of one case (PyCUDA backend only; the emulator does not time).

    Attributes:
        median_ms: median kernel time in milliseconds over ``runs`` timed runs (CUDA events around
            the launches only, L2 emptied before each run).
        spread: (p90 - p10) / median of the timed runs, a fraction.
        runs: number of timed runs.
        gbps: effective bandwidth, 8·n bytes (n elements read and written, 4-byte elements) per
            median time, in GB/s (1e9 bytes per second).
        copy_fraction: gbps over the device-to-device copy bandwidth measured in the same run.
        reference_ms: median time of the reference solution on the same case, same GPU, same process.
        ratio: median_ms / reference_ms (1.0 is as fast as the reference; lower is faster).
        cpu_speedup: time of the sequential CPU scan (numpy, one thread) over median_ms; above 2^24
            elements the CPU time is measured on the first 2^24 and scaled linearly to n.
        cpu_ms: that CPU time (ms); copy_ms: the device-to-device copy's median time on the same
            bytes (ms); launches: the kernel launches of the part's plan at n; cub_ms: CUB's
            ``DeviceScan::ExclusiveSum`` on the same input (ms), where its library is built
            (:func:`grader.backends.cub.cached_cub`); None in a result saved before they were recorded.
    """

    median_ms: float
    spread: float
    runs: int
    gbps: float
    copy_fraction: float | None = None
    reference_ms: float | None = None
    ratio: float | None = None
    cpu_speedup: float | None = None
    cpu_ms: float | None = None
    copy_ms: float | None = None
    launches: int | None = None
    cub_ms: float | None = None


@dataclass(frozen=True)
class AnalysisRow:
    """One size of a timed part's analysis table (:mod:`grader.grading.analysis`), from one timed case.

    Attributes:
        n, dtype: the timed case's size and ``scan_t``.
        gpu_ms, cpu_ms: the kernel's median time on the GPU and the sequential CPU scan's time (ms);
            speedup: cpu_ms / gpu_ms.
        adds: additions the part's algorithm performs on n elements (the part's formula,
            :attr:`grader.assignment.parts.PartSpec.adds`); gflops: adds / gpu_ms, in 10^9 per second;
            fp32_percent: gflops as a % of the GPU's peak FP32 rate (None: peak unknown).
        cpu_adds, cpu_gflops: the sequential scan's n - 1 additions, and their rate on the CPU.
        bytes: bytes a scan must move, 2·n·sizeof(scan_t) (read once, written once);
            dram_gbps: bytes / gpu_ms (10^9 bytes per second); dram_percent: as a % of the GPU's
            peak DRAM bandwidth (None: peak unknown); copy_percent: as a % of the device-to-device
            copy of the same bytes in the same run.
        launches: kernel launches of the part's plan at n.
        reference_ms, copy_ms, cub_ms: the reference solution's, the copy's and CUB's
            ``DeviceScan::ExclusiveSum``'s times at n (ms), where measured.
        bound: one line: what bounds the kernel at n, and why.
    """

    n: int
    dtype: str
    gpu_ms: float
    cpu_ms: float | None
    speedup: float | None
    adds: int
    gflops: float
    fp32_percent: float | None
    cpu_adds: int
    cpu_gflops: float | None
    bytes: int
    dram_gbps: float
    dram_percent: float | None
    copy_percent: float | None
    launches: int | None
    reference_ms: float | None
    copy_ms: float | None
    cub_ms: float | None
    bound: str


@dataclass(frozen=True)
class Analysis:
    """A timed part's analysis on a GPU (the assignment's "testing and analysis"): per timed size
    the times, speed-up, GFLOPS and bandwidth against the GPU's peaks, and the bound.

    Attributes:
        device: the GPU's name.
        formula: how the adds are counted (the part's :attr:`grader.assignment.parts.PartSpec.adds_formula`).
        peak_fp32_gflops: the GPU's peak FP32 rate (an FMA counted as 2), 10^9 per second, from its
            attributes; peak_dram_gbps: its peak DRAM bandwidth (10^9 bytes per second); None where
            the attributes are not known. peaks: how they were computed, in words.
        rows: one :class:`AnalysisRow` per timed case that passed, by n.
    """

    device: str
    formula: str
    peak_fp32_gflops: float | None
    peak_dram_gbps: float | None
    peaks: str
    rows: tuple[AnalysisRow, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", tuple(r if isinstance(r, AnalysisRow) else AnalysisRow(**r)
                                               for r in self.rows))


@dataclass(frozen=True)
class RooflineRow:
    """The estimated lower bound on the time of a timed part at one size on the course's target GPU.

    Attributes:
        n: the size; bound_ms: the submission's bound; reference_bound_ms: the reference
            solution's (None where it was not counted); ratio: bound_ms / reference_bound_ms.
    """

    n: int
    bound_ms: float
    reference_bound_ms: float | None = None
    ratio: float | None = None


@dataclass(frozen=True)
class PredictionRow:
    """The predicted time of a timed part at one size on the prediction's GPU.

    Attributes:
        n: the size; predicted_ms: the submission's predicted time (ms); reference_ms: the reference
            solution's, predicted alike (None: not counted); ratio: predicted_ms / reference_ms.
    """

    n: int
    predicted_ms: float
    reference_ms: float | None = None
    ratio: float | None = None


@dataclass(frozen=True)
class Prediction:
    """A timed part's predicted time on a measured GPU, from the CPU emulator's counts
    (:mod:`grader.grading.prediction`): what a GPU would likely measure, and the points that would
    likely earn. A prediction, never counted: no grade, gradebook or export adds :attr:`points`.

    Attributes:
        gpu: the GPU predicted for (the config's ``roofline.predict_on``).
        message: the prediction in words, with the model's measured accuracy.
        rows: one :class:`PredictionRow` per timed size (analysis sizes included).
        ratio: the predicted ratios of the scored sizes, combined as the points combine them
            (:func:`weighted_ratio`); None without the reference's prediction.
        points, max_points: the performance points that ratio would earn (None: no ratio).
        accuracy: the model's measured accuracy on that GPU, in words ("" where not measured).
    """

    gpu: str
    message: str
    rows: tuple[PredictionRow, ...] = ()
    ratio: float | None = None
    points: float | None = None
    max_points: float = 0.0
    accuracy: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", tuple(r if isinstance(r, PredictionRow) else PredictionRow(**r)
                                               for r in self.rows))


@dataclass(frozen=True)
class Roofline:
    """A timed part's roofline on the CPU emulator, instead of a time: an estimate, worth no points.

    From one run of the part's launches at ``n`` with the emulator's profile on every block: the
    global bytes moved (32-byte sectors of each line's requests, the fewer of those touched and
    those their bytes fill), the launches and, where the
    emulator counts it, the span (the most dependent memory steps one thread runs, and the
    barriers); the bound at a size N is ``max(bytes·N/n / peak bandwidth, (span + barriers) ·
    step latency) + launches · launch overhead`` (:func:`grader.grading.analysis.bound_ms`).

    Attributes:
        target: the GPU the bound is for (the config's ``roofline.target``); peak_dram_gbps,
            step_ns, launch_us: its figures from the config.
        n: the size counted at; dtype: its ``scan_t``.
        bytes_per_element, launches, span_steps, barriers: the submission's counts (span_steps and
            barriers None where the emulator does not count them: the bound then comes from the
            bytes and the launches only).
        span_exponent: e, how the span grew from n / 4 to n (:func:`grader.grading.analysis.span_exponent`:
            0 to 1; None without a span).
        reference_bytes_per_element, reference_launches, reference_span_steps,
            reference_barriers, reference_span_exponent: the reference solution's, on the same
            input (None: not counted).
        rows: the bound at each timed size.
        message: what the bound says, or why there is none.
        prediction: the predicted time from the same counts (:class:`Prediction`), or None.
    """

    target: str
    peak_dram_gbps: float
    step_ns: float
    launch_us: float
    message: str
    n: int | None = None
    dtype: str | None = None
    bytes_per_element: float | None = None
    launches: int | None = None
    span_steps: int | None = None
    barriers: int | None = None
    reference_bytes_per_element: float | None = None
    reference_launches: int | None = None
    reference_span_steps: int | None = None
    reference_barriers: int | None = None
    rows: tuple[RooflineRow, ...] = ()
    span_exponent: float | None = None
    reference_span_exponent: float | None = None
    prediction: Prediction | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", tuple(r if isinstance(r, RooflineRow) else RooflineRow(**r)
                                               for r in self.rows))
        if isinstance(self.prediction, dict):
            object.__setattr__(self, "prediction", Prediction(**self.prediction))


@dataclass(frozen=True)
class Performance:
    """A part's performance score: the timed sizes combined by a weighted geometric mean.

    Attributes:
        points, max_points: performance points earned and possible.
        ratio: the weighted geometric mean of ``Timing.ratio`` over the timed cases.
        message: how the points follow from the ratio and the config's thresholds, or why the part
            was not timed (``"not timed: ..."``).
    """

    points: float
    max_points: float
    ratio: float | None
    message: str


@dataclass(frozen=True)
class Profile:
    """A part's memory-access profile, counted by the CPU emulator (machine-independent), and the
    points it earns (see :mod:`grader.core.access_profile` and docs/emulator.md, "What the profile counts").

    Attributes:
        points, max_points: profile points earned and possible (0 and 0: reported only).
        message: how the points follow from the counts, or why the part was not profiled
            (``"not profiled: ..."``).
        n: the profiled size; blocks: the blocks of each launch profiled (0: all).
        wavefronts, ideal_wavefronts, conflict_wavefronts: shared-memory wavefronts of the
            profiled blocks, without bank conflicts, and the extra ones from conflicts.
        reference_wavefronts: the reference solution's wavefronts on the same input.
        ratio: wavefronts / reference_wavefronts.
        worst: the line with the most conflict wavefronts, described
            (``"line 36: 32-way bank conflict (shared load, lanes 128 bytes apart; ...)"``), or "".
        worst_file, worst_line, worst_degree: that line, and its largest n-way conflict.
        sectors_per_request: global-memory 32-byte sectors per request (4: coalesced 4-byte lanes).
        ideal_sectors_per_request: the fewest the same requests could touch, per request.
        global_sectors: the 32-byte sectors of every global load and store (bytes moved: 32x).
        shared_requests: shared-memory load and store requests (warp-wide instructions).
        span_steps: the most memory operations (loads, stores, atomics; any address but the
            thread's own stack) one thread made, summed over the launches: the scan's span.
        work_steps: the memory operations of all threads of the profiled blocks: its work.
        barriers: the most ``__syncthreads()`` one block passed, summed over the launches.
        reference_span_steps, reference_barriers: the reference solution's on the same input (or
            the config's ``reference_span_steps``, ``reference_barriers``).
        request_words: the shared-memory request a report draws
            (:attr:`grader.core.access_profile.MemoryProfile.worst_request`: the worst conflict's,
            or a conflict-free one), lane by lane: 32 word numbers whose bank is the number mod 32
            (:attr:`grader.core.access_profile.AccessSite.worst_words`), -1 for an inactive lane;
            request_degree: its n-way conflict; request_line: its source line; request_store:
            whether it is a store. The ``reference_`` ones: the same of the reference solution,
            where it was profiled (not its line: the reference's source is the course's). Empty or None where not recorded (a result saved before them).
    """

    points: float
    max_points: float
    message: str
    n: int | None = None
    blocks: int = 1
    wavefronts: int | None = None
    ideal_wavefronts: int | None = None
    conflict_wavefronts: int | None = None
    reference_wavefronts: int | None = None
    ratio: float | None = None
    worst: str = ""
    worst_file: str | None = None
    worst_line: int | None = None
    worst_degree: int | None = None
    sectors_per_request: float | None = None
    ideal_sectors_per_request: float | None = None
    global_sectors: int | None = None
    shared_requests: int | None = None
    span_steps: int | None = None
    work_steps: int | None = None
    barriers: int | None = None
    reference_span_steps: int | None = None
    reference_barriers: int | None = None
    request_words: tuple[int, ...] = ()
    request_degree: int | None = None
    request_line: int | None = None
    request_store: bool | None = None
    reference_request_words: tuple[int, ...] = ()
    reference_request_degree: int | None = None
    reference_request_store: bool | None = None

    def __post_init__(self) -> None:
        for name in ("request_words", "reference_request_words"):  # JSON gives lists
            object.__setattr__(self, name, tuple(int(v) for v in getattr(self, name) or ()))
