"""The emulator's roofline on real kernels (issue 36): the span the profile counts (issue 32) reaches
the bound, and a scan done by one thread, which passes every case, is bounded at least 100 times
the reference solution at every timed size, its span growing with n; the reference's is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.backends import Selection
from grader.assignment.config import load_config
from grader.render.text import render_text
from grader.grading.runner import grade
from tests.conftest import ATTACKS, BROKEN, SOLUTIONS, write_config

EMULATOR = Selection("emulator", "test")
#: Counted at 4,096 and 1,024 (roofline.max_n), bounded at two of the shipped timed sizes.
ROOFLINE = "roofline:\n  max_n: 4096\nemulator:\n  workers: 1\n"
TIMED = (1 << 20, 1 << 24)


def _grade(tmp_path: Path, key: str, source: Path, sizes: list[int], timed: tuple[int, ...] = TIMED, extra: str = ""):
    """``source`` as ``key``'s file, graded on the emulator at ``sizes`` with ``timed`` sizes (the
    roofline's): its PartResult and the text report."""
    from grader.assignment.parts import PARTS
    folder = tmp_path / f"{source.stem}-{key}"
    folder.mkdir()
    (folder / PARTS[key].filename).write_text(source.read_text())
    path = write_config(folder, sizes={key: sizes}, extra=ROOFLINE)
    path.write_text(path.read_text() + f"    dtypes: [int32]\n{extra}    timing:\n      sizes: {list(timed)}\n"
                    f"      points: 1\n      reference: {key}\n")
    result = grade(folder, cfg=load_config(path), selection=EMULATOR)
    return result.parts[0], render_text(result)


@pytest.mark.parametrize("key, serial, sizes", [
    ("part4_any_size", "part4_correct_serial_one_thread.cu", [1, 257, 5000]),
    ("part5_single_pass", "part5_correct_serial_one_thread.cu", [1, 700, 5000]),
])
def test_a_scan_by_one_thread_is_bounded_100_times_the_reference(tmp_path, key, serial, sizes):
    extra = "    items_per_thread: 4\n" if key == "part5_single_pass" else ""
    part, text = _grade(tmp_path, key, BROKEN / serial, sizes, extra=extra)
    assert [c.status for c in part.cases] == ["pass"] * len(part.cases), part.cases
    roof = part.roofline
    assert roof is not None and roof.n == 4096 and roof.rows, roof
    # one load and one store per element, by one thread: the profile's span, not bytes alone
    assert roof.span_steps >= 2 * 4096 and roof.barriers == 0, roof
    assert roof.span_exponent == pytest.approx(1.0, abs=0.01)  # counted at 1,024 and 4,096
    assert roof.reference_span_steps < 4096 and roof.reference_span_exponent < 0.5, roof
    assert [r.n for r in roof.rows] == list(TIMED)
    assert all(r.ratio >= 100 for r in roof.rows), roof.rows
    # the bound grows as n: the span at 2^24 is 2^12 times the counted one
    assert roof.rows[-1].bound_ms >= 0.99 * roof.span_steps * 4096 * roof.step_ns * 1e-6
    assert "memory operations of one thread" in text and "growing as n^1.00" in text
    assert "ESTIMATE" in text and "an estimate, worth no points" in text
    assert part.performance.points == 0  # the emulator never times


@pytest.mark.parametrize("key, sizes", [("part4_any_size", [1, 5000]), ("part5_single_pass", [1, 5000])])
def test_the_reference_is_bounded_as_itself_with_a_span_that_barely_grows(tmp_path, key, sizes):
    extra = "    items_per_thread: 4\n" if key == "part5_single_pass" else ""
    part, _ = _grade(tmp_path, key, SOLUTIONS / f"{key}.cu", sizes, extra=extra)
    roof = part.roofline
    assert roof.span_steps is not None and roof.span_steps == roof.reference_span_steps, roof
    assert roof.span_exponent < 0.5 and all(r.ratio == pytest.approx(1.0) for r in roof.rows), roof


def test_a_serial_part3_gets_its_span_in_the_roofline(tmp_path):
    """Part 3 is timed (for the report) at one block (here of 256 elements): the serial thread-0
    scan's span is counted at 64 and 256 and grows as n; the bound is well above the reference's."""
    part, _ = _grade(tmp_path, "part3_conflict_free", ATTACKS / "profile_serial_scan.cu", [1, 256], timed=(256,))
    roof = part.roofline
    assert roof.n == 256 and roof.span_steps == 2 * 256 and roof.span_exponent == pytest.approx(1.0)
    assert roof.rows[0].ratio > 3, roof
