"""The GPU backend's timed runs: jobs timed with CUDA events, interleaved, the L2 emptied and the
clocks warmed up before each where due (:func:`time_interleaved_ms`, behind
:meth:`grader.backends.base.Backend.time_interleaved_ms`)."""

from __future__ import annotations

import gc
import time

from grader.backends.base import CLOCK_WARMUP_MS, ClockWarmup
from grader.backends.pycuda.ptx import hold_clocks
from grader.core.errors import KernelError

__all__ = ["time_interleaved_ms"]


def time_interleaved_ms(cuda, scratch, device, jobs, *, warmup: int, runs: int, flush_bytes: int,
                        after=None) -> list[list[float]]:
    """Time ``jobs`` as :meth:`grader.backends.base.Backend.time_interleaved_ms` says (its arguments,
    its result), through ``cuda`` (``pycuda.driver``) in the current context: each run between two CUDA
    events, the L2 emptied first by a memset of ``flush_bytes`` (0: none) queued before the start event,
    in the flush buffer of ``scratch`` (:meth:`grader.backends.pycuda.memory.Scratch.flush_buffer`),
    and before that, where :class:`~grader.backends.base.ClockWarmup` says so, every multiprocessor of
    ``device`` kept busy for :data:`~grader.backends.base.CLOCK_WARMUP_MS` (docs/timing.md).
    Python's garbage collector is off meanwhile (a collection between two launches of a multi-launch
    part would be timed). The caller holds the GPU alone and has its launches queued, not
    synchronised one by one.

    Raises:
        KernelError: a CUDA error while timed (``launch-failure``, naming the job).
    """
    flush, kept = scratch.flush_buffer(flush_bytes) if flush_bytes else (None, True)
    start, end = cuda.Event(), cuda.Event()
    times: list[list[float]] = [[] for _ in jobs]
    collecting = gc.isenabled()
    gc.disable()
    what = jobs[0][0]
    clocks, ended, last_ms = ClockWarmup(), 0.0, 0.0  # when the last run ended (perf_counter s), and its time
    try:
        for i in range(warmup + runs):
            order = range(len(jobs)) if i % 2 == 0 else range(len(jobs) - 1, -1, -1)
            for j in order:
                what, work, before = jobs[j]
                if before is not None:
                    before()
                if clocks.due((time.perf_counter() - ended) * 1e3, last_ms):
                    hold_clocks(cuda, device, scratch, CLOCK_WARMUP_MS)
                if flush is not None:  # empty the L2; queued so the GPU is busy when start is recorded
                    cuda.memset_d32_async(flush, i, flush_bytes // 4)
                start.record()
                work()
                end.record()
                end.synchronize()
                ended, last_ms = time.perf_counter(), end.time_since(start)
                if i >= warmup:
                    times[j].append(last_ms)
                if after is not None:
                    after(j, i)
    except cuda.Error as exc:
        raise KernelError(f"{what} failed on the GPU while timed: {exc}", kind="launch-failure") from None
    finally:
        if collecting:
            gc.enable()
        if not kept:
            flush.free()
    return times
