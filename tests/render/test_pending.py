"""Performance points that need a GPU are pending on the emulator, in every report: the gradebook's
pending column, Gradescope's tests and output, the text and Markdown reports; points lost (a part
that failed) are not pending."""

from __future__ import annotations

import csv
import io
import shutil

import pytest

from grader.backends import Selection
from grader.classwork.gradebook import class_summary, gradebook_csv
from grader.assignment.config import load_config
from grader.render.gradescope import gradescope
from grader.render.markdown import markdown
from grader.render.text import render_text
from grader.grading.runner import grade
from tests.conftest import BROKEN, SOLUTIONS

_CONFIG = """\
block_size: 128
seed: 7
parts:
  part3_conflict_free:
    points_per_case: 1
    sizes: [7]
    timing: {sizes: [256], points: 0, reference: part2_blelloch}
  part4_any_size:
    points_per_case: 1
    sizes: [5]
    timing: {sizes: [4096], points: 6}
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """(the reference solutions' result, a result whose Part 4 fails), graded on the emulator."""
    root = tmp_path_factory.mktemp("pending")
    (root / "config.yaml").write_text(_CONFIG)
    cfg = load_config(root / "config.yaml")
    good, bad = root / "good", root / "bad"
    for folder, part4 in ((good, SOLUTIONS / "part4_any_size.cu"), (bad, BROKEN / "part4_inclusive.cu")):
        folder.mkdir()
        shutil.copy(SOLUTIONS / "part3_conflict_free.cu", folder)
        shutil.copy(part4, folder / "part4_any_size.cu")
    emulator = Selection("emulator", "test")
    return tuple(grade(f, cfg=cfg, selection=emulator, checks=False) for f in (good, bad))


def test_the_gradebook_has_a_pending_column_and_the_summary_says_so(results):
    good, bad = results
    assert good.passed and good.pending_points == 6 and bad.pending_points == 0
    book = list(csv.DictReader(io.StringIO(gradebook_csv([("good", good), ("bad", bad)],
                                                          ["part3_conflict_free", "part4_any_size"]))))
    assert [(r["total"], r["max"], r["pending"]) for r in book] == [(f"{good.points:g}", f"{good.points + 6:g}", "6"),
                                                                   (f"{bad.points:g}", f"{bad.max_points:g}", "0")]
    summary = class_summary([("good", good), ("bad", bad)], ["part3_conflict_free", "part4_any_size"])
    assert "performance pending a run on a GPU: 6 points in 1 submission(s)" in summary


def test_gradescope_shows_pending_points_as_pending_not_failed(results):
    good, bad = results
    gs = gradescope(good)
    perf = [t for t in gs["tests"] if "performance" in t["name"]]
    assert [t["name"] for t in perf] == ["Part 4 · scan_tiles + add_tile_offsets · performance (pending)"]  # no Part 3
    assert perf[0]["score"] == perf[0]["max_score"] == 0 and "status" not in perf[0]
    assert "6 performance points pending a run on a GPU" in perf[0]["output"]
    assert all(t.get("status") != "failed" for t in gs["tests"])
    assert "Performance (6 points) is pending a run on a GPU" in gs["output"]
    lost = [t for t in gradescope(bad)["tests"] if "performance" in t["name"]]
    assert [(t["score"], t["max_score"], t["status"]) for t in lost] == [(0, 6, "failed")]
    assert "pending" not in gradescope(bad)["output"]


def test_the_student_reports_say_pending(results):
    good, bad = results
    text = render_text(good)
    assert "PENDING performance: 6 points wait for a run on a GPU" in text
    assert "(6 pending a GPU run)" in text and "PENDING 6 performance points pending a run on a GPU" in text
    assert "performance: 0/" not in text  # neither Part 4's 0/6 nor Part 3's 0/0
    assert "**pending**" in markdown(good) and "0/6 points" not in markdown(good).split("### Part 4")[1]
    assert "PENDING" not in render_text(bad) and "performance: 0/6 points" in render_text(bad)


def test_a_result_records_its_backends_traits_and_keeps_them_when_saved(results):
    """The result says what its backend could do (the runner records the row's traits), so that
    grader.core reads no backend table, and a saved result reads back the same."""
    from grader.backends import BACKENDS
    from grader.classwork.store import read_result

    good, _ = results
    emulator = BACKENDS["emulator"]
    assert (good.backend_times_kernels, good.backend_uses_gpus) == (emulator.times_kernels, emulator.uses_gpus)
    doc = good.to_dict()
    assert (doc["backend_times_kernels"], doc["backend_uses_gpus"]) == (False, False)
    assert read_result(doc) == good


def test_a_result_saved_before_it_recorded_the_traits_reads_them_from_its_backends_row(results):
    from grader.classwork.store import read_result
    from grader.core.results import result_from_dict

    good, _ = results
    doc = {k: v for k, v in good.to_dict().items() if k not in ("backend_times_kernels", "backend_uses_gpus")}
    assert result_from_dict(doc).pending_points == 0  # core alone: not recorded reads as a GPU's (True)
    again = read_result(doc)
    assert (again.backend_times_kernels, again.backend_uses_gpus) == (False, False)
    assert again.pending_points == 6
