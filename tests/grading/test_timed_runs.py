"""Every timed run counts (issue 32): the grader reads part of the output back after runs drawn at
random among the warm-up and timed ones, whose number varies, and a time below a device-to-device
copy of the same bytes fails the timed case.

Runs on the CPU: :func:`grader.grading.case.timing.time_case` on the emulator, behind a stand-in "GPU" that runs
the timing loop as the PyCUDA backend does (before, launch, after) with times it is told."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.backends.emulator import EmulatorBackend
from grader.grading.case import timing
from grader.assignment.config import load_config
from grader.grading.case.timing import CHECKED_RUNS, _timed_schedule, time_case
from grader.assignment.parts import PARTS, SOLUTIONS
from grader.grading.compile import compile_part
from tests.conftest import ATTACKS, ROOT

PART = PARTS["part3_conflict_free"]


class StandInTimer:
    """The emulator, unchecked, timing as a GPU would: every run of the loop calls ``before``, the
    work and ``after`` in :meth:`time_interleaved_ms`'s order; a kernel's run "takes" ``kernel_ms``
    (the reference's ``reference_ms``), a copy ``copy_ms``. ``runs`` counts the loop's runs."""

    name = "pycuda"

    def __init__(self, kernel_ms: float = 2.0, reference_ms: float = 2.0, copy_ms: float = 1.0) -> None:
        self._emulator = EmulatorBackend(workers=1, checks=False)
        self.ms = [kernel_ms, reference_ms]
        self.copy_ms = copy_ms
        self.runs = 0

    def time_interleaved_ms(self, jobs, *, warmup, runs, flush_bytes, after=None):
        times = [[] for _ in jobs]
        for i in range(warmup + runs):
            self.runs += 1
            for j, (_, work, before) in enumerate(jobs):
                if before is not None:
                    before()
                work()
                if i >= warmup:
                    times[j].append(self.ms[j] * (1 + 0.001 * (i % 3)))
                if after is not None:
                    after(j, i)
        return times

    def time_copy_ms(self, src, dst, *, warmup, runs, flush_bytes):
        return [self.copy_ms] * runs

    def __getattr__(self, name):
        return getattr(self._emulator, name)


@pytest.fixture(scope="module")
def cfg():
    return load_config(ROOT / "config.yaml").override(timing={"warmup": 2, "runs": 4})


def timed(cfg, source: str, timer: StandInTimer, tmp_path: Path, *, reference: bool = True):
    """``source`` timed at n = 1024 int32, against the reference solution where ``reference`` (without
    it, its module alone: the emulator runs one module's executor at a time, and a module stopped
    for another starts again with its ``__device__`` globals afresh, where a GPU keeps both loaded)."""
    pc = cfg.parts[PART.key]
    module = compile_part(timer, PART, source, pc=pc, dtype="int32", workdir=tmp_path / "m")
    ref = compile_part(timer, PART, (SOLUTIONS / PART.filename).read_text(), pc=pc, dtype="int32",
                       workdir=tmp_path / "r") if reference else None
    try:
        return time_case(timer, module, cfg=cfg, part=PART, n=1024, dtype_name="int32",
                         reference=(PART, ref) if reference else None)
    finally:
        timer.close()


def test_the_reference_timed_passes_with_its_times(cfg, tmp_path):
    result = timed(cfg, (SOLUTIONS / PART.filename).read_text(), StandInTimer(), tmp_path)
    assert result.status == "pass", result.message
    assert result.timing is not None and result.timing.median_ms == pytest.approx(2.0, rel=0.01)


class WindowedTimer(StandInTimer):
    """A stand-in that records, for each timing call and each read of the output, whether it ran
    inside :meth:`gpu_alone` (the GPU's exclusive lock), and how often the window was taken."""

    def __init__(self) -> None:
        super().__init__()
        self.depth, self.windows, self.seen = 0, 0, []

    def gpu_alone(self):
        import contextlib

        @contextlib.contextmanager
        def window():
            self.windows += self.depth == 0
            self.depth += 1
            try:
                yield
            finally:
                self.depth -= 1
        return window()

    def time_interleaved_ms(self, jobs, **kw):
        self.seen.append(("timing", self.depth > 0))
        return super().time_interleaved_ms(jobs, **kw)

    def time_copy_ms(self, src, dst, **kw):
        self.seen.append(("copy", self.depth > 0))
        return super().time_copy_ms(src, dst, **kw)


def test_a_timed_size_takes_the_gpu_alone_once_for_its_runs_its_check_and_its_copy(cfg, tmp_path):
    """Each time another worker waits for the GPU alone, every shared holder drains first and every
    other worker's next case waits behind it: one window per timed size, not one per timing call."""
    timer = WindowedTimer()
    result = timed(cfg, (SOLUTIONS / PART.filename).read_text(), timer, tmp_path)
    assert result.status == "pass", result.message
    assert timer.windows == 1 and timer.seen == [("timing", True), ("copy", True)]


def test_a_kernel_that_skips_its_later_launches_fails_at_a_run_checked_at_random(cfg, tmp_path):
    """tests/attacks/timed_launch_counting.cu computes in its first launch only: a spot check after a
    later run drawn at random finds the poisoned output (before the whole check after the last)."""
    timer = StandInTimer()
    result = timed(cfg, (ATTACKS / "timed_launch_counting.cu").read_text(), timer, tmp_path, reference=False)
    assert result.status == "fail" and result.kind == "wrong-after-timing", result.message
    assert "wrong output after a timed run: run " in result.message and "draws at random" in result.message
    assert "the launch wrote nothing there" in result.message  # the poison, still in place


def test_a_time_below_the_copy_of_the_same_bytes_fails(cfg, tmp_path, monkeypatch):
    monkeypatch.setattr(timing, "COPY_FLOOR_MIN_BYTES", 0)  # as if n = 1024 were a bandwidth-bound size
    result = timed(cfg, (SOLUTIONS / PART.filename).read_text(), StandInTimer(kernel_ms=0.5, copy_ms=1.0), tmp_path)
    assert result.status == "fail" and result.kind == "faster-than-copy", result.message
    assert "faster than a device-to-device copy of the same bytes" in result.message


def test_below_the_copys_bandwidth_bound_sizes_a_kernel_may_beat_it(cfg, tmp_path):
    """At 8 KiB a copy's time is its start-up, which one block's kernel can beat honestly."""
    assert 2 * 1024 * 4 < timing.COPY_FLOOR_MIN_BYTES
    result = timed(cfg, (SOLUTIONS / PART.filename).read_text(), StandInTimer(kernel_ms=0.5, copy_ms=1.0), tmp_path)
    assert result.status == "pass", result.message


def test_a_time_at_the_copy_within_the_noise_passes(cfg, tmp_path, monkeypatch):
    """A scan as fast as the copy, give or take the runs' noise, is possible (the copy is the floor)."""
    monkeypatch.setattr(timing, "COPY_FLOOR_MIN_BYTES", 0)
    result = timed(cfg, (SOLUTIONS / PART.filename).read_text(), StandInTimer(kernel_ms=0.97, copy_ms=1.0), tmp_path)
    assert result.status == "pass", result.message


def test_the_run_counts_and_the_checked_runs_change_from_one_grading_to_the_next(cfg):
    schedules = [_timed_schedule(cfg, PART, 1 << 20) for _ in range(30)]
    for warmup, runs, checked, _ in schedules:
        assert cfg.timing.warmup <= warmup <= cfg.timing.warmup * 3 // 2
        assert cfg.timing.runs <= runs <= cfg.timing.runs * 3 // 2
        assert len(checked) == CHECKED_RUNS and all(0 <= i < warmup + runs for i in checked)
    assert len({(w, r) for w, r, _, _ in schedules}) > 1 and len({c for _, _, c, _ in schedules}) > 1


def test_a_kernel_far_too_slow_is_timed_from_a_few_runs_and_says_so(cfg, tmp_path, monkeypatch):
    """A run slower than SLOW_RUN_S (a one-thread scan of 2^28 elements takes seconds) is timed from
    SLOW_RUNS runs after one warm-up, not the config's count: minutes of a GPU saved, the same verdict."""
    monkeypatch.setattr(timing, "SLOW_RUN_S", 0.0)  # every kernel is "slow" here
    timer = StandInTimer()
    result = timed(cfg, (SOLUTIONS / PART.filename).read_text(), timer, tmp_path)
    assert result.status == "pass" and result.timing.runs == timing.SLOW_RUNS, result
    assert timer.runs == 1 + timing.SLOW_RUNS
    assert f"timed from {timing.SLOW_RUNS} runs after one warm-up" in result.message


@pytest.mark.parametrize("kernel_share, sizes, verdicts", [
    (2.0, [512, 1024], [(512, "pass"), (1024, "not-run")]),
    (0.3, [128, 256, 1024], [(128, "pass"), (256, "pass"), (1024, "not-run")]),
])
def test_a_size_whose_run_would_take_too_long_for_no_points_is_not_timed(cfg, tmp_path, kernel_share, sizes, verdicts):
    """At zero_at times the reference's or beyond (no points), a larger size whose run, projected in
    proportion to n, would take TOO_SLOW_MS or more is not timed (minutes of a GPU for no points), and
    the report says why."""
    from grader.grading.worker.timing_phase import TOO_SLOW_MS, time_part

    class Events:
        def __init__(self):
            self.items = []

        def emit(self, event):
            self.items.append(event)
    timed_cfg = cfg.override(parts={PART.key: {"timing": {"sizes": sizes, "points": 2, "reference": PART.key}}})
    pc = timed_cfg.parts[PART.key]
    timer = StandInTimer(kernel_ms=kernel_share * TOO_SLOW_MS, reference_ms=1.0, copy_ms=0.5)
    build = lambda spec, text, dtype, tag: compile_part(timer, spec, text, pc=pc, dtype=dtype,  # noqa: E731
                                                        workdir=tmp_path / tag)
    modules = {"int32": build(PART, (SOLUTIONS / PART.filename).read_text(), "int32", "submission")}
    events = Events()
    try:
        performance = time_part(events, timer, timed_cfg, PART, pc, modules, [], build)
    finally:
        timer.close()
    results = [e.result for e in events.items if type(e).__name__ == "Timed"]
    assert [(r.n, r.status) for r in results] == verdicts
    last, skipped = verdicts[-2][0], verdicts[-1][0]
    assert f"not timed: at n={last} a run took {kernel_share * TOO_SLOW_MS / 1e3:.2f} s" in results[-1].message
    assert performance.points == 0 and f"n={skipped} not timed (at n={last}" in performance.message
