"""The predicted GPU time (issue 52, grader/grading/prediction.py): the model's arithmetic on counts
made up to isolate each term, and the config's GPU must have a measured model. The reference
solutions' predictions on the emulator are checked in tests/grading/test_grading.py (the shipped config)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from grader.assignment.config import load_config
from grader.assignment.parts import PARTS
from grader.assignment.plans import LaunchConfig, plan_launches
from grader.core.errors import ConfigError
from grader.core.gpu_models import GPU_MODELS
from grader.grading.prediction import KernelCounts, predict_ms
from tests.conftest import ROOT

MODEL = next(iter(GPU_MODELS.values()))


def _tiled(grid: int, **kw) -> KernelCounts:
    """A tiled kernel's counts: 256 threads a block, 4 KiB moved a block, a few steps a thread."""
    base = dict(grid=grid, block=256, span_steps=6, work_steps=6 * 256 * grid, barriers=1,
                bytes_per_block=4096.0, lookback_width=0)
    return KernelCounts(**{**base, **kw})


def test_the_copy_curve_is_interpolated_between_its_measured_points_and_scaled_above_them():
    assert MODEL.copy_ms(MODEL.copy[0][0] / 2) == MODEL.copy[0][1]
    (b0, t0), (b1, t1) = MODEL.copy[-2], MODEL.copy[-1]
    assert MODEL.copy_ms(b1) == pytest.approx(t1)
    assert MODEL.copy_ms((b0 * b1) ** 0.5) == pytest.approx((t0 * t1) ** 0.5)
    big, t = MODEL.copy[-1]
    assert MODEL.copy_ms(4 * big) == pytest.approx(4 * t)


def test_a_tiled_kernel_at_a_large_size_is_its_copy_of_the_same_bytes_plus_its_waves():
    n_blocks = 1 << 19
    launch = LaunchConfig("k", n_blocks, 256, 2048)
    ms = predict_ms(MODEL, [launch], {"k": _tiled(128)}, {"k": _tiled(32)})
    copy = MODEL.copy_ms(4096.0 * n_blocks)
    assert copy < ms < 1.5 * copy
    # twice the bytes a block: about twice the time, as a memory-bound kernel's
    double = predict_ms(MODEL, [launch], {"k": _tiled(128, bytes_per_block=8192.0)}, {"k": _tiled(32)})
    assert double == pytest.approx(2 * ms, rel=0.1)


def test_launches_queued_behind_one_another_pay_the_queued_dispatch_not_the_fixed_cost():
    """A plan of three launches: each after the first pays queued_launch_us in place of the lone
    launch's fixed cost (the copy's time at 0 bytes); unmeasured (None), each pays the fixed cost."""
    launch = LaunchConfig("k", 64, 256, 2048)
    counts = {"k": _tiled(64)}
    lone = replace(MODEL, queued_launch_us=None)
    one = predict_ms(lone, [launch], counts)
    assert predict_ms(lone, [launch] * 3, counts) == pytest.approx(3 * one)
    queued = replace(MODEL, queued_launch_us=1.0)
    saved = MODEL.copy_ms(0) - 1e-3
    assert saved > 0
    assert predict_ms(queued, [launch] * 3, counts) == pytest.approx(3 * one - 2 * saved)
    assert predict_ms(queued, [launch], counts) == pytest.approx(one)


def test_a_span_that_grows_with_the_grid_is_one_thread_walking_the_input():
    """Counted 2 steps an element at 128 and 32 blocks (one thread's loop): at 2048 blocks, the span
    is 16 times the counted one, each step at the measured step of a thread walking alone."""
    big = _tiled(128, span_steps=2 * 512 * 128, work_steps=2 * 512 * 128, barriers=0)
    small = _tiled(32, span_steps=2 * 512 * 32, work_steps=2 * 512 * 32, barriers=0)
    ms = predict_ms(MODEL, [LaunchConfig("k", 2048, 256, 2048)], {"k": big}, {"k": small})
    assert ms == pytest.approx(2 * 512 * 2048 * MODEL.thread_step_ns * 1e-6, rel=0.05)
    # the same span, not growing: a shared-memory step each, and no walk
    flat = predict_ms(MODEL, [LaunchConfig("k", 2048, 256, 2048)], {"k": big}, {"k": replace(small, span_steps=big.span_steps)})
    assert flat < ms / 10


def test_a_look_back_over_every_predecessor_grows_as_the_square_of_the_tiles():
    """12 tiles that read 66 status words (0 + 1 + ... + 11: every predecessor's): the walk grows
    with the tile's index, so twice the tiles take about four times as long, and far longer than a
    decoupled look-back of the same tiles (a few reads each, stopped by an inclusive prefix)."""
    every = _tiled(12, lookback_width=1, lookback_reads=66, bytes_per_block=0.0, sector_bytes_per_block=0.0)
    decoupled = replace(every, lookback_reads=14)
    one, two = ([LaunchConfig("k", g, 128, 22528)] for g in (1 << 15, 1 << 16))
    t1, t2 = (predict_ms(MODEL, launch, {"k": every}) for launch in (one, two))
    assert t2 == pytest.approx(4 * t1, rel=0.1)
    fast = predict_ms(MODEL, two, {"k": decoupled})
    assert fast < t2 / 100


def test_a_warp_wide_look_back_is_never_slower_than_one_lane():
    launch = [LaunchConfig("k", 1 << 14, 128, 22528)]
    counts = _tiled(12, lookback_width=1, lookback_reads=14, span_steps=200, barriers=17)
    one = predict_ms(MODEL, launch, {"k": counts})
    warp = predict_ms(MODEL, launch, {"k": replace(counts, lookback_width=32)})
    assert warp <= one


def test_a_launched_kernel_that_was_not_counted_has_no_prediction():
    assert predict_ms(MODEL, [LaunchConfig("other", 4, 256, 0)], {"k": _tiled(4)}) is None


def test_the_plan_at_the_predicted_size_has_its_levels_there():
    cfg = load_config(ROOT / "config.yaml")
    key = "part4_any_size"
    small = plan_launches(PARTS[key], cfg.parts[key], 1 << 16, np.dtype(np.int32))
    big = plan_launches(PARTS[key], cfg.parts[key], 1 << 28, np.dtype(np.int32))
    assert len(small) == 3 and len(big) == 7 and big[0].grid == (1 << 28) // 512


def test_the_config_names_a_gpu_with_a_measured_model(tmp_path):
    text = (ROOT / "config.yaml").read_text().replace("predict_on: NVIDIA H200", "predict_on: NVIDIA B300")
    assert "predict_on: NVIDIA B300" in text
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "predict_on" in str(err.value) and "NVIDIA H200" in str(err.value) and "gpu_constants.py" in str(err.value)
    path.write_text(text.replace("predict_on: NVIDIA B300", "predict_on: null"))
    assert load_config(path).roofline.predict_on is None


def test_the_emulators_time_plot_draws_the_predicted_times_beside_the_bounds():
    from grader.core.performance import Prediction, PredictionRow, Roofline, RooflineRow
    from grader.core.results import PartResult
    from grader.render.plot import plot_series

    roof = Roofline(target="NVIDIA H100 80GB HBM3", peak_dram_gbps=3350, step_ns=10, launch_us=1, message="m",
                    rows=(RooflineRow(1 << 20, 0.004, 0.004, 1.0), RooflineRow(1 << 24, 0.05, 0.05, 1.0)),
                    prediction=Prediction(gpu="NVIDIA H200", message="p",
                                          rows=(PredictionRow(1 << 20, 0.01, 0.009, 1.1),
                                                PredictionRow(1 << 24, 0.06, 0.05, 1.2))))
    part = PartResult(key="part5_single_pass", number=5, title="t", file="f", status="pass", message="",
                      cases=(), roofline=roof)
    lines, ylabel = plot_series(part)
    assert lines["your kernel (PREDICTED on an NVIDIA H200)"] == [(1 << 20, 0.01), (1 << 24, 0.06)]
    assert lines["reference solution (PREDICTED on an NVIDIA H200)"] == [(1 << 20, 0.009), (1 << 24, 0.05)]
    assert "PREDICTED time on an NVIDIA H200" in ylabel and "your kernel (estimated bound)" in lines
