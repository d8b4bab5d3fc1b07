"""The analysis of issue 36: the add counts of each algorithm against hand counts, the GPU's peaks,
the bound lines, the emulator's roofline bound, the time plot and the new fields in every format."""

from __future__ import annotations

import dataclasses
import json

import pytest

from grader.grading.analysis import RooflineCounts, bound_ms, gpu_peaks, part_analysis, roofline, span_exponent
from grader.assignment.config import load_config
from grader.assignment.parts import (PARTS, blelloch_adds, hierarchical_adds, hillis_steele_adds, single_pass_adds)
from grader.render.formats import FORMATS
from grader.render.plot import PNG_SIGNATURE, plot_name, time_plot_png, write_plots
from grader.core.performance import Timing
from grader.backends import BACKENDS
from grader.core.results import CaseResult, PartResult, SubmissionResult, result_from_dict

H100 = {"device": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "sm_count": "132", "clock_mhz": "1980",
        "memory_clock_mhz": "2619", "memory_bus_bits": "5120"}


@pytest.fixture(scope="module")
def cfg():
    return load_config("config.yaml")


def _simulate_hillis_steele(n: int) -> int:
    """Count the adds of a Hillis-Steele scan by running it."""
    x, adds, offset = list(range(n)), 0, 1
    while offset < n:
        x = [x[i] + x[i - offset] if i >= offset else x[i] for i in range(n)]
        adds += n - offset
        offset *= 2
    return adds


def _simulate_blelloch(tile: int) -> int:
    """Count the adds of a Blelloch scan of one tile by running it (and check its result)."""
    a, adds, d = list(range(1, tile + 1)), 0, 1
    while d < tile:  # up-sweep
        for i in range(2 * d - 1, tile, 2 * d):
            a[i] += a[i - d]
            adds += 1
        d *= 2
    a[-1] = 0
    d = tile // 2
    while d >= 1:  # down-sweep
        for i in range(2 * d - 1, tile, 2 * d):
            a[i - d], a[i] = a[i], a[i] + a[i - d]
            adds += 1
        d //= 2
    assert a == [k * (k + 1) // 2 for k in range(tile)]
    return adds


@pytest.mark.parametrize("n, hand", [(1, 0), (2, 1), (3, 3), (4, 5), (5, 8), (8, 17)])
def test_hillis_steele_adds_by_hand(n, hand):
    # n = 5: steps 1, 2, 4 add 4 + 3 + 1; n = 8: 7 + 6 + 4
    assert hillis_steele_adds(n) == hand == _simulate_hillis_steele(n)


@pytest.mark.parametrize("tile, hand", [(2, 2), (4, 6), (8, 14), (16, 30)])
def test_blelloch_adds_by_hand(tile, hand):
    # tile 4: up-sweep 2 + 1, down-sweep 1 + 2
    assert blelloch_adds(tile) == hand == _simulate_blelloch(tile)


def test_hierarchical_adds_by_hand_and_the_course_example():
    # n = 9, tile 4: 3 tiles (3 x 6), their 3 sums in one tile (6), 9 offset adds
    assert hierarchical_adds(9, 4) == 3 * 6 + 6 + 9
    assert hierarchical_adds(4, 4) == 6  # one tile: no offsets
    # the handout's example: tile 1024, n = 16,000,000
    assert hierarchical_adds(16_000_000, 1024) == (2 * 1023 * 15625 + 2 * 1023 * 16 + 2 * 1023 + 15625 + 16_000_000)


def test_single_pass_adds_by_hand():
    # B = 2, 3 items (tile 6), n = 7: 2 tiles of 2*2 reduce + 2 block scan + 2 prefix + 6 apply + 1 look-back
    assert single_pass_adds(7, 2, 3) == 2 * (4 + 2 + 2 + 6 + 1)


def test_every_part_has_a_formula_said_once():
    for spec in PARTS.values():
        assert spec.adds is not None and spec.adds_formula


def test_peaks_of_an_h100_from_its_attributes():
    peaks = gpu_peaks(H100)
    assert peaks.dram_gbps == pytest.approx(3352, rel=1e-3)  # 3.35 TB/s HBM3
    assert peaks.fp32_gflops == pytest.approx(66908, rel=1e-3)  # 66.9 TFLOPS FP32
    assert gpu_peaks({"device": "x"}) is None


def _timed(n: int, ms: float, launches: int = 5) -> CaseResult:
    return CaseResult(name=f"timed n={n} int32", n=n, dtype="int32", seed=1, status="pass", points=0, max_points=0,
                      timing=Timing(median_ms=ms, spread=0.01, runs=30, gbps=8 * n / ms / 1e6, copy_fraction=0.9,
                                    reference_ms=ms * 0.9, ratio=1.1, cpu_speedup=40, cpu_ms=40 * ms,
                                    copy_ms=0.9 * ms, launches=launches, cub_ms=0.8 * ms))


def test_analysis_rows_and_bounds(cfg):
    part = PartResult(key="part4_any_size", number=4, title="t", file="f", status="pass",
                      cases=(_timed(1 << 28, 1.562), _timed(1024, 0.006, launches=1)))
    a = part_analysis(part, H100, cfg)
    small, big = a.rows  # by n
    assert (small.n, big.n) == (1024, 1 << 28)
    assert big.adds == PARTS["part4_any_size"].add_count(1 << 28, cfg.parts["part4_any_size"])
    assert big.gflops == pytest.approx(big.adds / 1.562e-3 / 1e9)
    assert big.speedup == pytest.approx(40) and big.cpu_gflops == pytest.approx(((1 << 28) - 1) / (40 * 1.562e-3) / 1e9)
    assert big.dram_percent == pytest.approx(100 * big.dram_gbps / gpu_peaks(H100).dram_gbps)
    assert big.bound.startswith("memory-bound at 41 % of peak DRAM bandwidth")
    assert small.bound.startswith("launch-bound: 1 launch cost at least 1 µs")


def test_a_serial_kernel_is_bound_100_times_the_reference(cfg):
    # the same bytes per element as the reference (each element read and written once), but one
    # thread: its span is every element's load and store, one after the other, growing as n
    n = 65536
    ref = RooflineCounts(bytes=16 * n, launches=5, span_steps=40, barriers=20)
    serial = RooflineCounts(bytes=8 * n, launches=1, span_steps=2 * n, barriers=0,
                            span_exponent=span_exponent(2 * n // 4, 2 * n))
    assert serial.span_exponent == 1.0
    roof = roofline(cfg.roofline, n=n, dtype="int32", sizes=(1 << 20, 1 << 24, 1 << 28), counts=serial, reference=ref)
    assert all(r.ratio >= 100 for r in roof.rows)
    assert roof.span_exponent == 1.0 and roof.reference_span_exponent == 0.0
    assert "131,072 memory operations of one thread" in roof.message and "growing as n^1.00" in roof.message
    # a span held as counted (exponent 0) would bound it only some 16x at 2^24: the growth matters
    held = roofline(cfg.roofline, n=n, dtype="int32", sizes=(1 << 24,), counts=serial._replace(span_exponent=0.0),
                    reference=ref)
    assert held.rows[0].ratio < 100
    # without a span, the bound comes from bytes and launches only, and says so
    plain = roofline(cfg.roofline, n=n, dtype="int32", sizes=(1 << 20,), counts=RooflineCounts(bytes=8 * n, launches=1))
    assert plain.rows[0].bound_ms == pytest.approx(bound_ms(bytes_=8 << 20, launches=1, dram_gbps=3350, step_ns=10,
                                                            launch_us=1.0))
    assert "bytes moved and the launches only" in plain.message and plain.span_exponent is None


@pytest.mark.parametrize("small, big, exponent", [(100, 400, 1.0), (100, 200, 0.5), (100, 100, 0.0), (100, 90, 0.0),
                                                   (100, 1600, 1.0), (None, 400, 0.0), (0, 400, 0.0)])
def test_the_span_exponent_from_n_over_4_to_n(small, big, exponent):
    assert span_exponent(small, big) == pytest.approx(exponent)


def test_three_times_the_bytes_cannot_come_within_three_times(cfg):
    n = 1 << 16
    roof = roofline(cfg.roofline, n=n, dtype="int32", sizes=(1 << 28,), counts=RooflineCounts(bytes=48 * n, launches=2),
                    reference=RooflineCounts(bytes=16 * n, launches=2))
    assert roof.rows[0].ratio == pytest.approx(3, rel=0.01)


def _result(cfg, backend: str = "pycuda") -> SubmissionResult:
    part = PartResult(key="part4_any_size", number=4, title="exclusive scan of any length", file="part4_any_size.cu",
                      status="pass", cases=(_timed(1 << 20, 0.0178), _timed(16_000_000, 0.105)))
    part = dataclasses.replace(part, analysis=part_analysis(part, H100, cfg),
                               roofline=roofline(cfg.roofline, n=65536, dtype="int32", sizes=(1 << 20,),
                                                 counts=RooflineCounts(bytes=16 * 65536, launches=5, span_steps=40,
                                                                       barriers=20),
                                                 reference=RooflineCounts(bytes=16 * 65536, launches=5, span_steps=40,
                                                                          barriers=20)))
    return SubmissionResult(submission="s", backend=backend, backend_reason="chosen", device=H100, config="c", seed=1,
                            block_size=512, parts=(part,), scangrade_version="0", started_at="2026-01-01T00:00:00",
                            elapsed_s=1.0, backend_times_kernels=BACKENDS[backend].times_kernels,
                            backend_uses_gpus=BACKENDS[backend].uses_gpus)


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_format_carries_the_analysis_and_the_roofline(cfg, name):
    text = FORMATS[name].render(_result(cfg), cfg)
    assert "16,000,000" in text or "16000000" in text
    assert "GFLOPS" in text or "gflops" in text
    assert "memory-bound" in text  # the bound line of n = 16,000,000
    assert "at least" in text or "bound_ms" in text  # the roofline's bound
    assert "memory operations of one thread" in text or "span_steps" in text  # and its span


def test_the_json_round_trips_the_new_fields(cfg):
    result = _result(cfg)
    doc = json.loads(result.to_json())
    assert doc["schema_version"] == 2
    assert doc["parts"][0]["analysis"]["rows"][1]["n"] == 16_000_000
    assert result_from_dict(doc) == result


def test_the_plot_is_a_png_beside_the_report(cfg, tmp_path):
    pytest.importorskip("matplotlib")
    result = _result(cfg)
    png = time_plot_png(result.parts[0])
    assert png.startswith(PNG_SIGNATURE)
    written = write_plots(result, tmp_path)
    assert written == [tmp_path / plot_name(result.parts[0])]
    assert written[0].read_bytes().startswith(PNG_SIGNATURE) and written[0].stat().st_size > 1000
    gs = json.loads(FORMATS["gradescope"].render(result, cfg))
    test = next(t for t in gs["tests"] if t["name"].endswith("analysis"))
    assert test["output_format"] == "html" and "data:image/png;base64," in test["output"]
    pl = json.loads(FORMATS["prairielearn"].render(result, cfg))
    test = next(t for t in pl["tests"] if t["name"].endswith("analysis"))
    assert test["images"][0]["url"].startswith("data:image/png;base64,")


def test_the_warm_up_draws_once_a_process_and_leaves_the_plots_as_they_are(cfg, monkeypatch):
    """``scangrade grade`` starts matplotlib in a thread while the parts grade (plot.warm_up): a
    plot drawn meanwhile, or after it, is the plot drawn without it, byte for byte."""
    pytest.importorskip("matplotlib")
    import threading

    from grader.render import plot

    key = plot._plot_key(_result(cfg).parts[0], 72)
    alone = plot._draw_png(*key)
    made = []

    class Recorded(threading.Thread):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)
    monkeypatch.setattr(plot, "_WARMED_UP", threading.Event())
    monkeypatch.setattr(threading, "Thread", Recorded)
    plot.warm_up()
    plot.warm_up()
    meanwhile = plot._draw_png(*key)
    for thread in made:
        thread.join()
    assert [thread.name for thread in made] == ["scangrade-plot-warm-up"]
    assert not made[0].daemon  # joined before the interpreter finalizes: a daemon inside matplotlib crashed it
    assert meanwhile == alone and plot._draw_png(*key) == alone


def test_a_results_plot_is_drawn_once_for_all_its_reports(cfg):
    """A batch puts one part's plot in several reports (Gradescope's, the staff's and the student's
    files): drawn once, the same bytes each time; another result's plot is drawn for itself."""
    import dataclasses

    from grader.render import plot
    from grader.render.formats import batch_reports

    pytest.importorskip("matplotlib")
    result = _result(cfg)
    plot._drawn_png.cache_clear()
    reports = batch_reports(result)
    drawn = plot._drawn_png.cache_info()
    assert drawn.misses == 1 and drawn.hits >= 2, drawn
    assert reports[f"student/{plot_name(result.parts[0])}"] == time_plot_png(result.parts[0])
    other = dataclasses.replace(result.parts[0], number=6, title="another scan")
    assert time_plot_png(other) != time_plot_png(result.parts[0])


def test_a_batch_of_many_jobs_draws_its_plots_in_other_processes(cfg):
    """At PLOT_POOL_JOBS jobs the reports' plots are drawn in a pool of processes before the reports
    run (the jobs' threads share one interpreter lock): there when the reports ask, the same bytes."""
    from grader.render import plot

    pytest.importorskip("matplotlib")
    result = _result(cfg)
    plot._drawn_png.cache_clear()
    key = plot._plot_key(result.parts[0], 72)
    direct = plot._draw_png(*key)
    waiting = []

    def reports(r):
        waiting.append(key in plot._DRAWN_ELSEWHERE)  # drawn, and not yet used here
        return {"plot.png": time_plot_png(r.parts[0])}
    with plot.drawn_apart(reports, jobs=plot.PLOT_POOL_JOBS) as drawing:
        assert drawing is not reports
        assert drawing(result)["plot.png"] == direct
    assert waiting == [True] and key not in plot._DRAWN_ELSEWHERE
    with plot.drawn_apart(reports, jobs=plot.PLOT_POOL_JOBS - 1) as drawing:
        assert drawing is reports  # a few jobs: drawn where the reports are


def test_a_batch_writes_the_plot_into_the_student_folder(cfg, tmp_path):
    pytest.importorskip("matplotlib")
    from grader.classwork.store import write_reports
    from grader.render.formats import STUDENT_FOLDER, batch_reports
    result = _result(cfg, backend="emulator")
    reports = batch_reports(result)
    name = f"{STUDENT_FOLDER}/{plot_name(result.parts[0])}"
    assert reports[name].startswith(PNG_SIGNATURE)
    write_reports(result, tmp_path / "alice", reports)
    assert (tmp_path / "alice" / name).read_bytes() == reports[name]
    assert (tmp_path / "alice" / "report.txt").read_text().startswith(reports["report.txt"][:40])


@pytest.mark.parametrize("ylabel", ["ESTIMATED lower bound on a NVIDIA H100 80GB HBM3 (ms)",
                                    "ESTIMATED bound on a NVIDIA H100 80GB HBM3, PREDICTED time on an NVIDIA H200 (ms)"])
def test_the_emulators_plot_keeps_its_long_y_label_and_title_inside_the_picture(ylabel):
    """The emulator's y label ("ESTIMATED lower bound on a NVIDIA H100 80GB HBM3 (ms)") was taller
    than the plot and cut off at both ends (issue 52): long labels are wrapped to fit."""
    pytest.importorskip("matplotlib")
    from grader.render.plot import _figure

    series = (("your kernel (estimated bound)", ((1 << 20, 0.004), (1 << 28, 0.6))),)
    fig = _figure("Part 5: single-pass exclusive scan with decoupled look-back (challenge)", ylabel, series)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    ax = fig.axes[0]
    for text in (ax.yaxis.label, ax.title):
        box = text.get_window_extent(renderer)
        assert box.y0 >= 0 and box.y1 <= fig.bbox.height and box.x0 >= 0 and box.x1 <= fig.bbox.width, \
            (text.get_text(), box, fig.bbox)
