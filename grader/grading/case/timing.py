"""Timing one size on a GPU (:func:`time_case`): the submission and the reference solution
interleaved on one input, after warm-up, with run counts and spot-checked runs drawn at random, a
slow kernel timed from a few runs, the output re-verified, and the time compared with a
device-to-device copy and the sequential CPU scan; CUB's time beside it where its library is built
(:func:`time_cub_ms`); and the performance points of the timed sizes (:func:`score_performance`)."""

from __future__ import annotations

import secrets
import time
from typing import Callable

import numpy as np

from grader.backends.base import Backend, Module
from grader.backends.cub import CubScan, cached_cub
from grader.assignment.config import Config, PartConfig, TimingConfig
from grader.core.errors import KernelError, LaunchError
from grader.assignment.parts import DTYPES, PartSpec
from grader.assignment.plans import POISON_BITS, Guarded, Plan, Run, prepare
from grader.core.performance import Performance, Timing, linear_fraction, weighted_ratio
from grader.core.results import CaseResult, CaseStatus, FailureKind, Mismatch
from grader.grading.case.checks import check_run, device_checkable
from grader.grading.case.inputs import DrawAhead, case_input
from reference.scan import exclusive_scan, inclusive_scan


#: The sequential CPU scan (the report's "times faster than the CPU") is timed on at most this many
#: elements and scaled linearly to n (it is memory-bound).
CPU_TIMED_MAX = 1 << 24


def cpu_scan_ms(part: PartSpec, x: np.ndarray) -> float:
    """The sequential reference's time for ``x`` in ms (the part's own reference where it has one): the median of three runs (one above 2^20
    elements), on the first :data:`CPU_TIMED_MAX` elements scaled by n / CPU_TIMED_MAX when x is longer."""
    head = x[:CPU_TIMED_MAX]
    times = []
    for _ in range(3 if head.size <= 1 << 20 else 1):
        c0 = time.perf_counter()
        part.reference(head) if part.reference else inclusive_scan(head) if part.inclusive else exclusive_scan(head)
        times.append((time.perf_counter() - c0) * 1e3)
    return float(np.median(times)) * x.size / max(1, head.size)


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


def _spot_check_on_device(backend: Backend, out: Guarded, d_in: Guarded, x: np.ndarray, part: PartSpec) -> str | None:
    """The whole of ``out`` checked against the input where it ran
    (:meth:`grader.backends.base.Backend.scan_check`; the runs
    :func:`grader.grading.case.checks.device_checkable` admits): stronger than :func:`_spot_check`'s chunks, at a
    few bytes read back. A message naming the first wrong element, or None."""
    k = backend.scan_check(out.inner, d_in.inner, inclusive=part.inclusive)
    if k < 0:
        return None
    got = backend.to_host(out.inner.view(k, 1))
    head = x[:k + int(part.inclusive)]
    want = (np.float32(head.sum(dtype=np.float64)) if x.dtype.kind == "f"
            else np.int64(head.sum(dtype=np.int64)).astype(np.uint32).view(np.int32))
    poisoned = got.view(np.uint32)[0] == POISON_BITS
    return (f"out[{k}] = {got[0]}, expected {want}"
            + (" (the poison the grader wrote before the run: the launch wrote nothing there)" if poisoned else ""))


def timed_plan(backend: Backend, module: Module, *, part: PartSpec, pc: PartConfig, x: np.ndarray,
               dtype: np.dtype, d_in: Guarded | None = None) -> tuple[Run, Plan, Guarded, Callable[[], None]]:
    """``module``'s launches on ``x`` (uploaded, or already on the device as ``d_in``), ready to time:
    ``(run, plan, d_in, before)``, where ``before()`` poisons the outputs and does the plan's resets
    (Part 5's status words), outside the timed window; the window holds :meth:`Plan.launch` only. The
    one way a plan is timed: :func:`time_case` and the bench (:mod:`grader.tools.bench`).

    Device memory: the input (unless ``d_in``) and the plan's buffers (:func:`grader.assignment.plans.prepare`).

    Raises:
        LaunchError: the plan cannot be prepared for ``x.size`` elements.
    """
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


def time_cub_ms(backend: Backend, cfg: Config, x: np.ndarray, dtype: np.dtype) -> float | None:
    """CUB's ``DeviceScan::ExclusiveSum`` on ``x`` in ms, timed as the kernels are (the config's
    ``timing`` warm-up, runs and L2 flush; :meth:`grader.backends.cub.CubScan.time_ms`), where its
    library is built already for this GPU (:func:`grader.backends.cub.cached_cub`: ``scangrade bench``
    builds it; a grading never runs nvcc for it); None where it is not, or where it fails (it is only
    a line of the plot)."""
    try:
        library = cached_cub(backend.describe().get("compute_capability", ""))
        if library is None:
            return None
        times, _ = CubScan(library).time_ms(backend, x, dtype, poison_bits=POISON_BITS, warmup=cfg.timing.warmup,
                                            runs=cfg.timing.runs, flush_bytes=cfg.timing.flush_bytes)
        return float(np.median(times))
    except (KernelError, OSError, AttributeError, KeyError):
        return None


def _spot_checker(backend: Backend, held: dict[str, Guarded], x: np.ndarray, *, part: PartSpec,
                  expected: np.ndarray, on_device: bool, checked: frozenset[int], spots: np.random.Generator,
                  warmup: int, runs: int) -> Callable[[int, int], None]:
    """The ``after`` hook of :meth:`Backend.time_interleaved_ms` for :func:`time_case`: after each run
    of the submission (job 0) in ``checked``, a spot check of ``held["out"]`` (on the device from
    ``held["in"]`` when ``on_device``, else against ``expected``, offsets drawn from ``spots``).

    Raises:
        _TimedRunWrong: a checked run's output is wrong, naming the run of ``warmup + runs``.
    """
    def after(job: int, i: int) -> None:
        if job == 0 and i in checked:
            wrong = (_spot_check_on_device(backend, held["out"], held["in"], x, part) if on_device
                     else _spot_check(backend, held["out"], expected, spots))
            if wrong is not None:
                raise _TimedRunWrong(f"run {i + 1} of {warmup + runs} ({warmup} warm-up): {wrong}")
    return after


def _faster_than_copy(median: float, copy_ms: float, noise: float) -> str:
    """The failure message of a median time (ms) below a device-to-device copy's by more than ``noise``
    (a fraction)."""
    return (f"timed at {median:.4f} ms, faster than a device-to-device copy of the same bytes ({copy_ms:.4f} ms) by "
            f"{100 * (1 - median / copy_ms):.0f} %, beyond the runs' noise ({100 * noise:.0f} %): a scan reads and "
            "writes every element, as the copy does, so no scan can beat it. These times are not of the whole scan "
            "(is work skipped on some launches?)")


def _timing(part: PartSpec, x: np.ndarray, *, n: int, dtype: np.dtype, times: list[float], median: float,
            spread: float, ref_ms: float | None, copy_ms: float, launches: int) -> Timing:
    """The :class:`Timing` of a size that passed: GB/s over the ``2 * n`` elements of ``dtype`` a scan
    reads and writes, against the copy's (``copy_ms``) and the reference's (``ref_ms``, ms or None)
    times, and the sequential CPU scan of ``x``, timed here (:func:`cpu_scan_ms`)."""
    nbytes = 2 * n * dtype.itemsize
    gbps = nbytes / (median * 1e-3) / 1e9
    copy_gbps = nbytes / (copy_ms * 1e-3) / 1e9
    cpu_ms = cpu_scan_ms(part, x)
    return Timing(median_ms=median, spread=spread, runs=len(times), gbps=gbps, copy_fraction=gbps / copy_gbps,
                  reference_ms=ref_ms, ratio=median / ref_ms if ref_ms else None,
                  cpu_speedup=cpu_ms / median, cpu_ms=cpu_ms, copy_ms=copy_ms, launches=launches)


def time_case(backend: Backend, module: Module, *, cfg: Config, part: PartSpec, n: int, dtype_name: str,
              reference: tuple[PartSpec, Module] | None, ahead: DrawAhead | None = None) -> CaseResult:
    """Time one size on a GPU: the submission and the reference solution interleaved on the same
    input (see :meth:`Backend.time_interleaved_ms`), the submission's output re-verified, then a
    device-to-device copy of the input into that output buffer (the bytes a scan reads and writes),
    all in one window of the GPU alone (:meth:`Backend.gpu_alone`); then the sequential CPU scan.

    Device memory: the input, both outputs (and Part 4's tile sums) and the L2 flush buffer at once
    (3.5 GiB at 2^28 int32 elements). ``ahead``: inputs drawn ahead (:class:`grader.grading.case.inputs.DrawAhead`).

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
        run, plan, d_in, before = timed_plan(backend, module, part=part, pc=pc, x=x, dtype=dtype)
        jobs = [("the submission's kernel", plan.launch, before)]
        if reference is not None:  # the same input on the device; the reference never writes it
            ref_part, ref_module = reference
            _, ref_plan, _, ref_before = timed_plan(backend, ref_module, part=ref_part,
                                                    pc=cfg.parts.get(ref_part.key, pc), x=x, dtype=dtype, d_in=d_in)
            jobs.append(("the reference solution's kernel", ref_plan.launch, ref_before))
        slow = _probe_s(backend, before, plan.launch)  # far too slow for points: a few runs tell its time
        warmup, runs, checked, spots = _timed_schedule(cfg, part, n, slow=slow >= SLOW_RUN_S)
        held = {"out": plan.out, "in": d_in}  # for the spot checks; cleared with the plan, before the CPU scan
        on_device = device_checkable(run, plan, d_in, x, part=part, expected=expected)
        after = _spot_checker(backend, held, x, part=part, expected=expected, on_device=on_device,
                              checked=checked, spots=spots, warmup=warmup, runs=runs)
        # One window of the GPU alone per size (the copy below too): another worker's window waits
        # for every shared holder to finish first, and all of their next cases for it.
        with backend.gpu_alone():
            all_times = backend.time_interleaved_ms(jobs, warmup=warmup, runs=runs,
                                                    flush_bytes=cfg.timing.flush_bytes, after=after)
            verdict = check_run(run, plan, d_in, x, expected, part=part, pc=pc, cfg=cfg)
            copy_times = None
            if not verdict.findings:  # the same bytes as the scan reads and writes, in its own buffers
                copy_times = backend.time_copy_ms(d_in.inner, plan.out.inner, warmup=cfg.timing.warmup,
                                                  runs=cfg.timing.runs, flush_bytes=cfg.timing.flush_bytes)
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
    if verdict.findings:
        return result(CaseStatus.FAIL, "wrong output after the timed runs (the grader poisons the output before every "
                                       "run, so every launch must compute the whole scan): " + verdict.message,
                      mismatch=verdict.mismatch, kind=FailureKind.WRONG_AFTER_TIMING)
    median, spread = _median_spread(times)
    launches = len(plan.launches)
    del run, plan, d_in, jobs  # the device buffers go before the CPU scan below
    held.clear()
    copy_ms, copy_spread = _median_spread(copy_times)
    noise = max(COPY_NOISE_MIN, spread + copy_spread)
    if 2 * n * dtype.itemsize >= COPY_FLOOR_MIN_BYTES and median < copy_ms * (1 - noise):
        return result(CaseStatus.FAIL, _faster_than_copy(median, copy_ms, noise), kind=FailureKind.FASTER_THAN_COPY)
    timing = _timing(part, x, n=n, dtype=dtype, times=times, median=median, spread=spread, ref_ms=ref_ms,
                     copy_ms=copy_ms, launches=launches)
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
    geo = weighted_ratio([c.n for c in timed], ratios)
    frac = linear_fraction(geo, full_at=tc.full_at, zero_at=tc.zero_at)
    sizes = ", ".join(str(c.n) for c in timed)
    return Performance(round(tc.points * frac, 2), tc.points, geo,
                       f"time / {against} = {geo:.2f} (geometric mean over n = {sizes}, weighted by log2 n); "
                       f"all points at or below {tc.full_at:g}, none at or above {tc.zero_at:g}")
