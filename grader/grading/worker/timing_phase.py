"""The phases of a timed part between its visible and its hidden cases: on a GPU the timing
(:func:`time_part`), on the CPU emulator the roofline estimate (:func:`roofline_part`); and the
performance a part keeps once its hidden cases have run (:func:`performance_after_hidden`)."""

from __future__ import annotations

import dataclasses

from grader.assignment.parts import SOLUTIONS
from grader.grading.protocol import CaseStart, DeviceUpdate, ProfileStart, RooflineTaken, Timed, TimingStart

#: The smallest copy (bytes read + written) whose bandwidth the report records and checks.
COPY_BANDWIDTH_MIN_BYTES = 128 * 2**20
#: A larger size is not timed where its run would take this long (ms) or more, projected from a timed
#: size whose median is at or beyond the config's ``zero_at`` times the reference's (no points) in
#: proportion to n: a one-thread scan's 2^28 runs take seconds each, for a time that earns nothing.
#: The report says why.
TOO_SLOW_MS = 500.0


def time_part(events, backend, cfg, part, pc, modules, results, build, *, earlier_failed: bool = False,
              ahead=None):
    """The timing phase of a part (GPU only), after the visible cases and before the hidden ones:
    ``timed`` events, and the :class:`~grader.core.results.Performance` they earn (returned; the caller
    reports it once the hidden cases have run, see :func:`performance_after_hidden`).
    ``earlier_failed``: a case before this worker's first failed (it hung), so nothing is timed."""
    from grader.backends import backend_kind
    from grader.core.errors import CompileError
    from grader.core.performance import Performance

    tc = pc.timing
    kind = backend_kind(backend.name)
    if not kind.times_kernels:
        if kind.counts_profile and not earlier_failed and all(r.status == "pass" for r in results):
            roofline_part(events, backend, cfg, part, modules, build)
        return Performance(0.0, tc.points, None, f"not timed: the {backend.name} backend cannot time kernels; "
                                                 "performance points need a run on a GPU")
    if earlier_failed or any(r.status != "pass" for r in results):
        return Performance(0.0, tc.points, None, "not timed: performance is scored only when every case passes")
    events.emit(TimingStart())
    try:
        reference = _reference_module(tc, pc.dtypes[0], build)
    except CompileError as exc:  # the course's own reference must compile; say so plainly
        return Performance(0.0, tc.points, None, f"not scored: the reference solution does not compile: {exc}")
    timed, skipped, hopeless = _time_sizes(events, backend, cfg, part, pc, modules, reference, ahead=ahead)
    gpu = backend.describe().get("device", "")
    performance = _score(tc, timed, skipped, hopeless, gpu=gpu)
    _report_copy_bandwidth(events, cfg, timed, gpu)
    return performance


def _reference_module(tc, dtype: str, build):
    """``(spec, module)`` of the reference solution a timed part is compared with, built for ``dtype``
    by the worker's ``build``; None where its file is not there.

    Raises:
        CompileError: the reference solution does not compile.
    """
    from grader.assignment.parts import PARTS

    ref_spec = PARTS[tc.reference]
    ref_file = SOLUTIONS / ref_spec.filename
    if not ref_file.is_file():
        return None
    return ref_spec, build(ref_spec, ref_file.read_text(), dtype, "reference")


def _time_sizes(events, backend, cfg, part, pc, modules, reference, *, ahead) -> tuple[list, list[int], object]:
    """Each of the part's timed sizes (the analysis sizes too: in the report, not in the score) timed
    in turn, CUB beside it where its library is built, each reported as a ``timed`` event:
    ``(timed cases, sizes not timed, the last timed case at zero_at times the reference's or beyond)``.
    A size projected to take :data:`TOO_SLOW_MS` or more from that case is not timed (``not-run``)."""
    from grader.backends.cub import cached_cub

    tc = pc.timing
    dtype = pc.dtypes[0]
    cub = cached_cub(backend.describe().get("compute_capability", "")) is not None
    timed, skipped = [], []
    hopeless = None  # the last timed size already at zero_at times the reference's or beyond
    for n in tc.all_sizes:
        projected_ms = hopeless.timing.median_ms * n / hopeless.n if hopeless is not None else 0.0
        if projected_ms >= TOO_SLOW_MS:
            result = _too_slow(cfg, n, dtype, hopeless, projected_ms)
            skipped.append(n)
        else:
            events.emit(CaseStart(f"timed n={n} {dtype}"))
            result = _time_size(backend, cfg, part, modules, n, dtype, reference, cub=cub, ahead=ahead)
            t = result.timing
            if t is not None and t.ratio is not None and t.ratio >= tc.zero_at:
                hopeless = result
        timed.append(result)
        events.emit(Timed(result))
    return timed, skipped, hopeless


def _too_slow(cfg, n: int, dtype: str, hopeless, projected_ms: float):
    """The ``not-run`` result of timed size ``n``, which would take ``projected_ms`` from ``hopeless``."""
    from grader.core.results import CaseResult, CaseStatus

    t = hopeless.timing
    return CaseResult(name=f"timed n={n} {dtype}", n=n, dtype=dtype, seed=cfg.seed, status=CaseStatus.NOT_RUN,
                      points=0.0, max_points=0.0, message=(
                          f"not timed: at n={hopeless.n} a run took {t.median_ms / 1e3:.2f} s, "
                          f"{t.ratio:.0f} times the reference's, so a run of this size would take about "
                          f"{projected_ms / 1e3:.1f} s of the GPU, for a time that earns no points"))


def _time_size(backend, cfg, part, modules, n: int, dtype: str, reference, *, cub: bool, ahead):
    """Timed size ``n`` (:func:`grader.grading.case.timing.time_case`), with CUB's time beside it for the
    plot where ``cub`` (its library is built)."""
    from grader.assignment.parts import DTYPES
    from grader.grading.case.inputs import case_input
    from grader.grading.case.timing import time_case, time_cub_ms

    result = time_case(backend, modules[dtype], cfg=cfg, part=part, n=n, dtype_name=dtype, reference=reference,
                       ahead=ahead)
    if result.timing is not None and cub:
        x, _ = case_input(cfg, part, n, cfg.seed, DTYPES[dtype])
        result = dataclasses.replace(result, timing=dataclasses.replace(
            result.timing, cub_ms=time_cub_ms(backend, cfg, x, DTYPES[dtype])))
    return result


def _score(tc, timed: list, skipped: list[int], hopeless, *, gpu: str):
    """The :class:`~grader.core.results.Performance` the timed cases of the scored sizes earn, its
    message naming the sizes not timed (``skipped``) and why."""
    from grader.core.results import CaseStatus
    from grader.grading.case.timing import score_performance

    performance = score_performance(tc, [c for c in timed if c.n in tc.sizes and c.status != CaseStatus.NOT_RUN],
                                    gpu=gpu)
    if skipped:
        performance = dataclasses.replace(performance, message=(
            f"{performance.message}; n={', '.join(map(str, skipped))} not timed (at n={hopeless.n} a run took "
            f"{hopeless.timing.median_ms / 1e3:.2f} s, {hopeless.timing.ratio:.0f} times the reference's)"))
    return performance


def _report_copy_bandwidth(events, cfg, timed: list, gpu: str) -> None:
    """The device-to-device copy bandwidth the timed cases reached (a ``device-update``), with a
    warning where it is far below what ``gpu`` should give (``timing.expected_copy_gbps``). Only
    copies of :data:`COPY_BANDWIDTH_MIN_BYTES` or more count: a smaller one measures launch latency."""
    copies = [c.timing.gbps / c.timing.copy_fraction for c in timed
              if c.timing and c.timing.copy_fraction and c.n * 8 >= COPY_BANDWIDTH_MIN_BYTES]
    if not copies:
        return
    copy_gbps = max(copies)
    expected = cfg.timing.expected_copy_gbps.get(gpu)
    info = {"copy_gbps": f"{copy_gbps:.0f}"}
    if expected and copy_gbps < 0.5 * expected:
        info["warnings"] = (f"device-to-device copy reached {copy_gbps:.0f} GB/s, far below the "
                            f"{expected:.0f} GB/s a {gpu} should give: the GPU may be shared or throttled, "
                            "so these timings are suspect")
    events.emit(DeviceUpdate(info))


def roofline_part(events, backend, cfg, part, modules, build) -> None:
    """On the CPU emulator, a timed part's roofline (:func:`grader.grading.profiling.roofline_phase`):
    ``profile-start``, then ``roofline`` with the estimate, on the cases' emulator with its checks
    off, after the visible cases and before any hidden one. Worth no points; a reference solution
    that does not compile leaves the estimate without its comparison."""
    from grader.backends.base import RunMode
    from grader.core.errors import CompileError
    from grader.grading.profiling import roofline_phase

    tc = cfg.parts[part.key].timing
    dtype = cfg.parts[part.key].dtypes[0]
    events.emit(ProfileStart(counts="roofline"))
    try:
        reference = _reference_module(tc, dtype, build)
    except CompileError:
        reference = None
    # counted once, plainly (the cases did the checking), a deadlock found at once; each case after
    # sets its own mode
    backend.set_run_mode(RunMode(detect_deadlock=True))
    events.emit(RooflineTaken(roofline_phase(backend, cfg=cfg, part=part, module=modules[dtype],
                                             reference=reference)))


def performance_after_hidden(performance, hidden: list):
    """The performance a part earns once its hidden cases have run: ``performance`` as scored from
    the timed cases, or no points when a hidden case did not pass (performance is scored only when
    every case passes). None stays None; a part that was not scored keeps its reason."""
    from grader.core.performance import Performance

    if performance is None or performance.ratio is None or all(c.status == "pass" for c in hidden):
        return performance
    return Performance(0.0, performance.max_points, None, "no performance points: a hidden case did not pass "
                                                          "(performance is scored only when every case passes)")
