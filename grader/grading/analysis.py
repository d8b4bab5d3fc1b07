"""The assignment's "testing and analysis", measured for the student: per timed part, on a GPU, the
analysis table (times, speed-up, GFLOPS and bandwidth against the GPU's peaks, the bound), and on
the CPU emulator a roofline: an estimated lower bound on the time on the course's target GPU.

Data and arithmetic only, importing no backend: the runner attaches :func:`part_analysis` to each
timed part of a GPU run (from the device's attributes and the timed cases); the worker's roofline
phase (:func:`roofline_phase`) counts on the emulator and builds the :class:`~grader.core.performance.Roofline`
with :func:`roofline`. The plot is :mod:`grader.render.plot`.

The figures:

- adds: the part's algorithm's additions (:attr:`grader.assignment.parts.PartSpec.adds`, one formula per part);
  the CPU's sequential scan does n - 1. GFLOPS: adds / time, 10^9 per second.
- peak FP32: SMs x FP32 lanes per SM (:data:`FP32_LANES_PER_SM`, by compute capability) x 2 (an FMA
  is two operations, as spec sheets count) x the SM clock. A scan's adds are not FMAs: it reaches
  half of that at best.
- peak DRAM bandwidth: 2 (double data rate) x the memory clock x the bus width in bytes.
- bytes: what a scan must move, 2·n·sizeof(scan_t) (read once, written once).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Mapping, NamedTuple

from grader.core.performance import Analysis, AnalysisRow, Roofline, RooflineRow
from grader.core.results import PartResult

__all__ = ["FP32_LANES_PER_SM", "GpuPeaks", "RooflineCounts", "bound_line", "bound_ms", "gpu_peaks",
           "part_analysis", "roofline", "span_exponent", "with_analysis"]

#: FP32 lanes (CUDA cores) per SM by compute capability (NVIDIA's CUDA C++ Programming Guide,
#: "Arithmetic Instructions", throughput of 32-bit floating-point add, multiply, multiply-add).
FP32_LANES_PER_SM = {"6.0": 64, "6.1": 128, "6.2": 128, "7.0": 64, "7.2": 64, "7.5": 64, "8.0": 64, "8.6": 128,
                     "8.7": 128, "8.9": 128, "9.0": 128, "10.0": 128, "10.3": 128, "11.0": 128, "12.0": 128,
                     "12.1": 128}
#: The device attributes (``describe()`` keys of the PyCUDA backend) the peaks come from.
PEAK_KEYS = ("sm_count", "clock_mhz", "memory_clock_mhz", "memory_bus_bits")


class GpuPeaks:
    """A GPU's peak FP32 rate and DRAM bandwidth from its attributes.

    Args:
        sm_count: multiprocessors; lanes: FP32 lanes per SM; clock_mhz: the SM clock (MHz);
        memory_clock_mhz: the memory clock (MHz); bus_bits: the memory bus width (bits).
    """

    def __init__(self, *, sm_count: int, lanes: int | None, clock_mhz: float, memory_clock_mhz: float,
                 bus_bits: int) -> None:
        self.sm_count, self.lanes, self.clock_mhz = sm_count, lanes, clock_mhz
        self.memory_clock_mhz, self.bus_bits = memory_clock_mhz, bus_bits

    @property
    def fp32_gflops(self) -> float | None:
        """SMs x lanes x 2 x clock, in 10^9 operations per second; None without a lane count."""
        return None if self.lanes is None else self.sm_count * self.lanes * 2 * self.clock_mhz / 1e3

    @property
    def dram_gbps(self) -> float:
        """2 x memory clock x bus width / 8, in 10^9 bytes per second."""
        return 2 * self.memory_clock_mhz * 1e6 * self.bus_bits / 8 / 1e9

    def describe(self) -> str:
        """How the peaks were computed, in one line."""
        fp32 = (f"FP32 {self.sm_count} SMs x {self.lanes} lanes x 2 (FMA) x {self.clock_mhz:g} MHz"
                if self.lanes else f"FP32 unknown ({self.sm_count} SMs, lanes per SM not known)")
        return f"{fp32}; DRAM 2 x {self.memory_clock_mhz:g} MHz x {self.bus_bits}-bit bus"


def gpu_peaks(device: Mapping[str, str]) -> GpuPeaks | None:
    """The peaks of the GPU a result's ``device`` facts describe (:data:`PEAK_KEYS` and
    ``compute_capability``, strings as the backend reports them), or None where one is missing."""
    try:
        sm, clock, mem, bus = (float(device[k]) for k in PEAK_KEYS)
    except (KeyError, ValueError):
        return None
    if min(sm, clock, mem, bus) <= 0:
        return None
    return GpuPeaks(sm_count=int(sm), lanes=FP32_LANES_PER_SM.get(device.get("compute_capability", "")),
                    clock_mhz=clock, memory_clock_mhz=mem, bus_bits=int(bus))


def _size(nbytes: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


def bound_line(*, gpu_ms: float, nbytes: int, launches: int | None, peak_gbps: float | None,
               copy_percent: float | None, launch_us: float) -> str:
    """One line: what bounds a kernel that took ``gpu_ms`` to move ``nbytes`` in ``launches``.

    Launch-bound where the launches' least overhead (``launches · launch_us``) exceeds the time
    the bytes take at peak bandwidth; else memory-bound at X % of the peak where it reaches half
    the device copy's bandwidth; else latency-bound (the time goes to dependent steps, not bytes).
    Without a peak, the copy's bandwidth stands for it.
    """
    launches = launches or 1
    copy = f"; you reach {copy_percent:.0f} % of the device copy's bandwidth" if copy_percent else ""
    achieved = nbytes / (gpu_ms * 1e-3) / 1e9
    at_peak_us = nbytes / (peak_gbps * 1e3) if peak_gbps else None
    overhead_us = launches * launch_us
    moved = f"{_size(nbytes)} read and written"
    if at_peak_us is not None and overhead_us > at_peak_us:
        return (f"launch-bound: {launches} launch{'es' if launches != 1 else ''} cost at least {overhead_us:.3g} µs, "
                f"more than the {at_peak_us:.3g} µs {moved} take at peak bandwidth "
                f"({100 * achieved / peak_gbps:.2g} % of peak reached)")
    share = 100 * achieved / peak_gbps if peak_gbps else copy_percent
    if share is not None and (share >= 50 or (copy_percent is not None and copy_percent >= 50)):
        where = f"{share:.0f} % of peak DRAM bandwidth" if peak_gbps else f"{share:.0f} % of the device copy"
        return f"memory-bound at {where}: {moved}, {launches} launch{'es' if launches != 1 else ''}{copy}"
    where = f" at {share:.2g} % of peak bandwidth" if share is not None else ""
    return (f"latency-bound{where}: {moved} would take {at_peak_us:.3g} µs at peak, so the time goes to "
            f"dependent steps (barriers, serial loops, waits), not to moving bytes" if at_peak_us is not None else
            f"latency-bound{where}: the time goes to dependent steps, not to moving bytes") + copy


def _row(case, spec, pc, peaks: GpuPeaks | None, launch_us: float) -> AnalysisRow:
    from grader.assignment.parts import DTYPES
    t = case.timing
    n = case.n
    adds = spec.add_count(n, pc) or 0
    gflops = adds / (t.median_ms * 1e-3) / 1e9
    cpu_ms = t.cpu_ms if t.cpu_ms is not None else (t.cpu_speedup * t.median_ms if t.cpu_speedup else None)
    nbytes = 2 * n * DTYPES[case.dtype].itemsize
    dram = nbytes / (t.median_ms * 1e-3) / 1e9
    fp32, peak_bw = (peaks.fp32_gflops, peaks.dram_gbps) if peaks else (None, None)
    copy_ms = t.copy_ms if t.copy_ms is not None else (t.median_ms * t.copy_fraction if t.copy_fraction else None)
    copy_percent = 100 * t.copy_fraction if t.copy_fraction else None
    return AnalysisRow(
        n=n, dtype=case.dtype, gpu_ms=t.median_ms, cpu_ms=cpu_ms, speedup=cpu_ms / t.median_ms if cpu_ms else None,
        adds=adds, gflops=gflops, fp32_percent=100 * gflops / fp32 if fp32 else None, cpu_adds=max(n - 1, 0),
        cpu_gflops=max(n - 1, 0) / (cpu_ms * 1e-3) / 1e9 if cpu_ms else None, bytes=nbytes, dram_gbps=dram,
        dram_percent=100 * dram / peak_bw if peak_bw else None, copy_percent=copy_percent, launches=t.launches,
        reference_ms=t.reference_ms, copy_ms=copy_ms, cub_ms=t.cub_ms,
        bound=bound_line(gpu_ms=t.median_ms, nbytes=nbytes, launches=t.launches, peak_gbps=peak_bw,
                         copy_percent=copy_percent, launch_us=launch_us))


def part_analysis(part: PartResult, device: Mapping[str, str], cfg) -> Analysis | None:
    """The analysis table of a part from its timed cases that passed, or None where none has a
    timing (not timed, or not on a GPU).

    Args:
        part: the part's result; device: the run's device facts (the GPU's name and attributes);
        cfg: the :class:`~grader.assignment.config.Config` it was graded under (its part's block size, the
            roofline's ``launch_us``).
    """
    from grader.assignment.parts import PARTS
    timed = sorted((c for c in part.cases if c.timing is not None and c.status == "pass"), key=lambda c: c.n)
    spec, pc = PARTS.get(part.key), cfg.parts.get(part.key)
    if not timed or spec is None or pc is None:
        return None
    peaks = gpu_peaks(device)
    return Analysis(device=device.get("device", ""), formula=spec.adds_formula,
                    peak_fp32_gflops=peaks.fp32_gflops if peaks else None,
                    peak_dram_gbps=peaks.dram_gbps if peaks else None,
                    peaks=peaks.describe() if peaks else "the GPU's attributes were not reported: no peaks",
                    rows=tuple(_row(c, spec, pc, peaks, cfg.roofline.launch_us) for c in timed))


def with_analysis(parts: Iterable[PartResult], device: Mapping[str, str], cfg) -> tuple[PartResult, ...]:
    """``parts`` with each timed part's :func:`part_analysis` attached (the others as they are)."""
    out = []
    for p in parts:
        analysis = part_analysis(p, device, cfg)
        out.append(replace(p, analysis=analysis) if analysis is not None else p)
    return tuple(out)


# ---- the roofline (CPU emulator) ---------------------------------------------------------------

class RooflineCounts(NamedTuple):
    """What the emulator counted of one plan at one size, for :func:`roofline`
    (:func:`grader.grading.profiling.roofline_counts` makes it from a
    :class:`~grader.core.access_profile.MemoryProfile`: one source of the counters).

    Attributes:
        bytes: the global bytes moved (:attr:`MemoryProfile.moved_bytes`).
        launches: the plan's kernel launches.
        span_steps: the most memory operations one thread made, summed over the launches
            (:attr:`MemoryProfile.span_steps`); None where the emulator sent no step counts.
        barriers: the barriers on that path (:attr:`MemoryProfile.barriers`); None likewise.
        span_exponent: how the span grows with n (:func:`span_exponent`), in [0, 1]: 0 keeps it
            at every larger size, 1 scales it with n.
        kernels, small_kernels: ``(kernel, KernelCounts)`` pairs of this count and of the one at
            n / 4 (:func:`grader.grading.prediction.kernel_counts`), for the predicted time; () where
            not counted.
    """

    bytes: int
    launches: int
    span_steps: int | None = None
    barriers: int | None = None
    span_exponent: float = 0.0
    kernels: tuple = ()
    small_kernels: tuple = ()


def span_exponent(span_small: int | None, span: int | None) -> float:
    """How a span grows with n, from its counts at n / 4 and n: log base 4 of their ratio, clamped
    to [0, 1] (a loop of one thread over the elements: 1; a tree scan whose threads each do a
    tile's steps: about 0); 0 where either is missing or zero. Clamped at 1: a faster growth
    between two small sizes is not extrapolated, so that the bound stays a lower bound."""
    import math
    if not span_small or not span or span <= span_small:
        return 0.0
    return min(1.0, math.log(span / span_small, 4))


def bound_ms(*, bytes_: float, launches: int, span_steps: float | None = None, barriers: float | None = None,
             dram_gbps: float, step_ns: float, launch_us: float) -> float:
    """The least time a plan can take on a GPU: ``max(bytes / dram_gbps, (span_steps + barriers) ·
    step_ns) + launches · launch_us``, in ms. Without a span (None), from the bytes and launches only.

    Args:
        bytes_: global bytes the plan moves; launches: its kernel launches; span_steps: the most
            memory steps one thread runs, over the plan's launches; barriers: the barriers on that
            path; dram_gbps, step_ns, launch_us: the target's figures.
    """
    chain = (span_steps or 0) + (barriers or 0)
    return max(bytes_ / (dram_gbps * 1e9), chain * step_ns * 1e-9) * 1e3 + launches * launch_us * 1e-3


def _bound_at(rc, c: RooflineCounts, n: int, size: int) -> float:
    """``c`` (counted at ``n``) bounded at ``size`` (at least n): bytes scaled by size / n, span and
    barriers by (size / n) ** span_exponent."""
    grow = (max(size, n) / n) ** c.span_exponent
    return bound_ms(bytes_=c.bytes * size / n, launches=c.launches,
                    span_steps=None if c.span_steps is None else c.span_steps * grow,
                    barriers=None if c.barriers is None else c.barriers * grow,
                    dram_gbps=rc.dram_gbps, step_ns=rc.step_ns, launch_us=rc.launch_us)


def roofline(rc, *, n: int, dtype: str, sizes: Iterable[int], counts: RooflineCounts,
             reference: RooflineCounts | None = None, against: str = "the reference solution") -> Roofline:
    """A timed part's :class:`~grader.core.performance.Roofline` from the emulator's counts at ``n``.

    Args:
        rc: the config's :class:`~grader.assignment.config.RooflineConfig` (the target GPU's figures).
        n, dtype: the size and ``scan_t`` counted at.
        sizes: the timed sizes to bound (:func:`_bound_at`).
        counts: the submission's :class:`RooflineCounts`.
        reference: the reference solution's on the same input, or None.
        against: how the message names the reference.
    """
    rows = []
    for size in sorted(set(sizes)):
        mine = _bound_at(rc, counts, n, size)
        ref = _bound_at(rc, reference, n, size) if reference else None
        rows.append(RooflineRow(n=size, bound_ms=mine, reference_bound_ms=ref, ratio=mine / ref if ref else None))
    span = counts.span_steps
    if span is None:
        how = "from the bytes moved and the launches only (the emulator here does not count the span)"
    else:
        grows = f", growing as n^{counts.span_exponent:.2f}" if counts.span_exponent >= 0.005 else ""
        how = (f"from the bytes moved, the span ({span:,} memory operations of one thread and {counts.barriers} "
               f"barriers at n = {n:,}{grows}) and the launches")
    message = f"estimated lower bound on a {rc.target}, {how}; an estimate, worth no points"
    last = rows[-1] if rows else None
    if last is not None:
        message += f"; at n = {last.n:,}: at least {last.bound_ms:.4g} ms"
        if last.ratio is not None:
            message += f", {last.ratio:.2f}x {against}'s bound"
    return Roofline(target=rc.target, peak_dram_gbps=rc.dram_gbps, step_ns=rc.step_ns, launch_us=rc.launch_us,
                    message=message, n=n, dtype=dtype,
                    bytes_per_element=counts.bytes / n, launches=counts.launches, span_steps=span,
                    barriers=counts.barriers, span_exponent=None if span is None else counts.span_exponent,
                    reference_bytes_per_element=reference.bytes / n if reference else None,
                    reference_launches=reference.launches if reference else None,
                    reference_span_steps=reference.span_steps if reference else None,
                    reference_barriers=reference.barriers if reference else None,
                    reference_span_exponent=(reference.span_exponent if reference and reference.span_steps is not None
                                             else None), rows=tuple(rows))
