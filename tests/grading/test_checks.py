"""Each check of the grader, proven by a kernel that defeats it when the check is off; float32
tolerance; performance scoring; the per-case timeout; GPU timing (marked gpu)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grader.backends import Selection
from grader.assignment.config import load_config, load_private
from grader.core.errors import ConfigError
from grader.grading.case.checks import diagnose, error_bound
from grader.grading.case.timing import score_performance
from grader.assignment.config import TimingConfig
from grader.core.performance import Timing
from grader.core.results import CaseResult
from grader.grading.runner import grade
from tests.conftest import BACKENDS, BROKEN, SOLUTIONS, write_config
from tests.grading.test_grading import parts_of, submission

EMULATOR = Selection("emulator", "test")


def test_never_writing_the_last_element_fails_at_that_index(tmp_path, backend, small_config):
    folder = submission(tmp_path, part2_blelloch=BROKEN / "part2_skips_last.cu")
    p = parts_of(grade(folder, cfg=small_config, selection=backend, parts=["part2_blelloch"]))["part2_blelloch"]
    for c in p.cases:
        assert c.status == "fail" and c.mismatch.index == c.n - 1 and c.mismatch.wrong == 1
        expected = "nothing was written to out" if c.n == 1 else f"out[{c.n - 1}] was never written"
        assert expected in c.message


def test_modifying_the_input_fails_even_with_the_right_output(tmp_path, backend, small_config):
    folder = submission(tmp_path, part2_blelloch=BROKEN / "part2_modifies_input.cu")
    p = parts_of(grade(folder, cfg=small_config, selection=backend, parts=["part2_blelloch"]))["part2_blelloch"]
    assert all(c.status == "fail" and "the input was modified: in[0]" in c.message for c in p.cases)


def test_hidden_sizes_catch_a_kernel_that_passes_only_the_configured_sizes(tmp_path, backend, small_config):
    private = tmp_path / "private.yaml"
    private.write_text("seed: 99\nparts:\n  part2_blelloch:\n    hidden_sizes: [77, 129]\n")
    cfg = load_private(small_config, private)
    folder = submission(tmp_path, part2_blelloch=BROKEN / "part2_only_configured_sizes.cu")
    p = parts_of(grade(folder, cfg=cfg, selection=backend, parts=["part2_blelloch"]))["part2_blelloch"]
    visible = [c for c in p.cases if c.visibility == "visible"]
    hidden = [c for c in p.cases if c.visibility == "hidden"]
    assert all(c.status == "pass" for c in visible) and len(visible) == 6
    assert [(c.name, c.n, c.seed, c.status) for c in hidden] == [
        ("hidden #1 int32", 77, 99, "fail"), ("hidden #2 int32", 129, 99, "fail")]
    assert all(c.seed == small_config.seed for c in visible)
    reference = parts_of(grade(SOLUTIONS, cfg=cfg, selection=backend, parts=["part2_blelloch"]))["part2_blelloch"]
    assert reference.status == "pass" and len(reference.cases) == 8


def test_a_private_config_may_only_add_a_seed_and_hidden_sizes(tmp_path, small_config):
    private = tmp_path / "private.yaml"
    private.write_text("seed: 99\nparts:\n  part2_blelloch:\n    sizes: [5]\n")
    with pytest.raises(ConfigError) as info:
        load_private(small_config, private)
    assert info.value.path == str(private) and info.value.key == "parts.part2_blelloch.sizes"


def test_a_case_that_hangs_is_stopped_by_the_case_timeout(tmp_path, pace):
    cfg = load_config(write_config(tmp_path, part_s=300, extra="", sizes={"part1_naive": [5]}))
    cfg = cfg.override(timeouts={"case_s": 2.0})  # n = 1, 5, 128: each hangs, each stopped
    folder = submission(tmp_path, part1_naive=BROKEN / "part1_hang.cu")
    result = grade(folder, cfg=cfg, selection=EMULATOR, parts=["part1_naive"], checks=False)  # checks: a deadlock
    p = result.parts[0]
    assert p.status == "timeout" and "timeouts.case_s" in p.message
    assert p.cases[0].status == "timeout" and p.cases[0].name == "n=1 int32"
    assert result.elapsed_s < pace.seconds(60)


def test_a_nan_output_still_gives_strict_json(tmp_path):
    from grader.core.results import Mismatch, PartResult, SubmissionResult
    case = CaseResult(name="n=8 float32", n=8, dtype="float32", seed=1, status="fail", points=0, max_points=1,
                      mismatch=Mismatch(buffer="out", index=7, got=float("nan"), expected=1.5, wrong=1))
    part = PartResult(key="part1_naive", number=1, title="t", file="f.cu", status="fail", cases=(case,))
    result = SubmissionResult(submission="s", backend="emulator", backend_reason="r", device={}, config="c",
                              backend_times_kernels=False, backend_uses_gpus=False,  # the emulator's traits
                              seed=1, block_size=32, parts=(part,), scangrade_version="0", started_at="t",
                              elapsed_s=0.0)
    import json
    assert json.loads(result.to_json())["parts"][0]["cases"][0]["mismatch"]["got"] == "nan"


def test_fractional_float32_outputs_are_compared_within_the_error_bound():
    x = np.random.default_rng(1).random(4096, dtype=np.float32)
    exact = np.cumsum(x, dtype=np.float64)
    tol = error_bound(exact, source=x, inclusive=True, depth=x.size - 1)
    assert tol is not None and np.all(tol > 0)
    float32_scan = np.cumsum(x, dtype=np.float32)  # rounding error of a sequential float32 scan: within the bound
    assert diagnose(float32_scan, exact, source=x, inclusive=True, tile=1024) is None
    off = float32_scan.copy()
    off[3000] += 1.0  # an element of value 1 counted twice
    mm = diagnose(off, exact, source=x, inclusive=True, tile=1024)
    assert mm is not None and mm.index == 3000 and mm.wrong == 1 and mm.allowed == tol[3000]
    nan = float32_scan.copy()
    nan[7] = np.nan
    assert diagnose(nan, exact, source=x, inclusive=True, tile=1024).index == 7
    ints = np.arange(5, dtype=np.int32)
    assert error_bound(ints, source=ints, inclusive=True, depth=4) is None  # integers: exact


def _timed(n: int, ratio: float | None, status: str = "pass") -> CaseResult:
    t = Timing(median_ms=ratio or 1.0, spread=0.01, runs=30, gbps=100.0, reference_ms=1.0 if ratio else None,
               ratio=ratio)
    return CaseResult(name=f"timed n={n} int32", n=n, dtype="int32", seed=1, status=status, points=0,
                      max_points=0, timing=t)


@pytest.mark.parametrize("ratios, fraction", [
    ([1.0, 1.1], 1.0), ([1.2, 1.2], 1.0), ([10.0, 12.0], 0.0), ([5.6, 5.6], (10 - 5.6) / (10 - 1.2)),
])
def test_performance_points_fall_linearly_between_the_thresholds(ratios, fraction):
    tc = TimingConfig(sizes=(2**20, 2**24), points=10.0, full_at=1.2, zero_at=10.0)
    perf = score_performance(tc, [_timed(2**20, ratios[0]), _timed(2**24, ratios[1])])
    assert perf.max_points == 10.0
    assert perf.points == pytest.approx(round(10 * fraction, 2))


def test_sizes_combine_by_a_geometric_mean_weighted_toward_large_sizes():
    tc = TimingConfig(sizes=(2**10, 2**28), points=1.0)
    perf = score_performance(tc, [_timed(2**10, 4.0), _timed(2**28, 1.0)])
    assert perf.ratio == pytest.approx(math.exp((10 * math.log(4.0)) / (10 + 28)))
    assert 1.0 < perf.ratio < 2.0  # the large size counts more than the small, launch-bound one


def test_no_performance_points_for_a_wrong_timed_output_or_without_a_reference():
    tc = TimingConfig(sizes=(2**20,), points=5.0)
    assert score_performance(tc, [_timed(2**20, 1.0, status="fail")]).points == 0
    unscored = score_performance(tc, [_timed(2**20, None)])
    assert unscored.points == 0 and "no reference solution" in unscored.message


def test_the_emulator_reports_timed_parts_as_not_timed(tmp_path):
    cfg = load_config(write_config(tmp_path, sizes={"part4_any_size": [300]}).parent / "config.yaml")
    text = (tmp_path / "config.yaml").read_text() + "    timing:\n      sizes: [4096]\n      points: 3\n"
    (tmp_path / "config.yaml").write_text(text)
    cfg = load_config(tmp_path / "config.yaml")
    p = grade(SOLUTIONS, cfg=cfg, selection=EMULATOR, parts=["part4_any_size"]).parts[0]
    assert p.status == "pass" and p.performance.points == 0 and p.performance.max_points == 3
    assert "not timed" in p.performance.message and p.max_points == 2 + 3


GPU = [b for b in BACKENDS if not isinstance(b, str)]


@pytest.mark.parametrize("backend_name", GPU)
def test_gpu_timing_reports_median_spread_bandwidth_and_ratio(tmp_path, backend_name):
    path = write_config(tmp_path, block_size=512, sizes={"part4_any_size": [5000]},
                        extra="timing:\n  warmup: 3\n  runs: 10\n  flush_mib: 256\n")
    path.write_text(path.read_text() + "    timing:\n      sizes: [1048576, 16777216]\n      points: 4\n")
    cfg = load_config(path)
    result = grade(SOLUTIONS, cfg=cfg, selection=Selection(backend_name, "test"), parts=["part4_any_size"])
    p = result.parts[0]
    timed = [c for c in p.cases if c.timing]
    assert [c.n for c in timed] == [1048576, 16777216] and all(c.status == "pass" for c in timed)
    for c in timed:
        t = c.timing
        # The spread is the machine's (one stalled run of ten moves the 90th percentile), not ours.
        assert 10 <= t.runs <= 15 and t.median_ms > 0 and 0 <= t.spread  # the config's runs, plus up to half again
        assert t.gbps == pytest.approx(8 * c.n / (t.median_ms * 1e-3) / 1e9)
        assert 0 < t.copy_fraction < 1.2 and 0.5 < t.ratio < 2 and t.cpu_speedup > 1
    assert p.performance.ratio is not None and p.performance.points > 0
    assert result.timed and float(result.device["copy_gbps"]) > 100


@pytest.mark.parametrize("backend_name", GPU)
def test_a_kernel_that_skips_work_on_repeated_launches_fails_when_timed(tmp_path, backend_name):
    path = write_config(tmp_path, sizes={"part1_naive": [100]}, extra="timing:\n  warmup: 2\n  runs: 5\n")
    path.write_text(path.read_text() + "    timing:\n      sizes: [128]\n      points: 2\n")
    cfg = load_config(path)
    folder = submission(tmp_path, part1_naive=BROKEN / "part1_early_return.cu")
    p = grade(folder, cfg=cfg, selection=Selection(backend_name, "test"), parts=["part1_naive"]).parts[0]
    correctness = [c for c in p.cases if c.timing is None and not c.name.startswith("timed")]
    assert all(c.status == "pass" for c in correctness)
    timed = [c for c in p.cases if c.name.startswith("timed")]
    assert timed[0].status == "fail" and timed[0].kind == "wrong-after-timing"
    assert "wrong output after a timed run" in timed[0].message or "wrong output after the timed runs" in timed[0].message
    assert p.performance.points == 0 and p.status == "fail"


def test_check_mode_names_the_race_of_a_missing_barrier_with_its_line(tmp_path, small_config):
    folder = submission(tmp_path, part1_naive=BROKEN / "part1_missing_sync.cu")
    p = grade(folder, cfg=small_config, selection=EMULATOR, parts=["part1_naive"], checks=True).parts[0]
    failed = [c for c in p.cases if c.status == "fail"]
    assert len(failed) == len(p.cases) - 1  # n = 1 runs no step of the loop, so it has no race
    assert all("(race)" in c.message and "part1_naive.cu:" in c.message for c in failed)


def test_check_mode_reports_a_spin_that_can_never_end_as_a_deadlock_without_waiting(tmp_path, small_config):
    folder = submission(tmp_path, part1_naive=BROKEN / "part1_hang.cu")
    result = grade(folder, cfg=small_config, selection=EMULATOR, parts=["part1_naive"], checks=True)
    p = result.parts[0]
    assert all(c.status == "fail" and "(deadlock)" in c.message for c in p.cases)
    assert result.elapsed_s < small_config.timeouts.case_s


def test_check_mode_passes_the_reference_solutions(small_config):
    result = grade(SOLUTIONS, cfg=small_config, selection=EMULATOR, checks=True)
    assert result.passed, [(c.name, c.message) for p in result.parts for c in p.cases if c.status != "pass"]


def test_absolute_times_for_the_gpu_set_the_bar_where_no_reference_was_timed():
    tc = TimingConfig(sizes=(2**20,), points=4.0, full_at=1.2, zero_at=10.0,
                      absolute_ms={"NVIDIA H100 80GB HBM3": {2**20: 0.5}})
    case = _timed(2**20, None)  # median 1.0 ms, twice the configured 0.5 ms
    perf = score_performance(tc, [case], gpu="NVIDIA H100 80GB HBM3")
    assert perf.ratio == pytest.approx(2.0) and "configured time" in perf.message
    assert perf.points == pytest.approx(round(4 * (10 - 2) / (10 - 1.2), 2))
    assert score_performance(tc, [case], gpu="NVIDIA H200").points == 0


def test_parts_not_started_within_the_submission_timeout_are_reported(tmp_path):
    path = write_config(tmp_path, sizes={"part1_naive": [5], "part2_blelloch": [5]})
    path.write_text(path.read_text().replace("  part_s: 120\n", "  part_s: 120\n  submission_s: 0.001\n"))
    result = grade(SOLUTIONS, cfg=load_config(path), selection=EMULATOR)
    assert [p.status for p in result.parts] == ["timeout", "timeout"]
    assert "timeouts.submission_s" in result.parts[1].message
