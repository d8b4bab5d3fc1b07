"""The handout, the templates and the student release say what config.yaml grades: each part's
launch shape, both element types, and every kind of points."""

from __future__ import annotations

from grader.assignment.config import load_config
from grader.assignment.parts import PARTS
from grader.packaging.release import student_readme
from tests.conftest import ROOT, TEMPLATES

CONFIG = load_config(ROOT / "config.yaml")


def test_the_handout_names_each_part_launched_with_its_own_block_size():
    handout = " ".join((TEMPLATES / "README.md").read_text().split())
    for key, pc in CONFIG.parts.items():
        if pc.items_per_thread:
            assert f"Part {PARTS[key].number} with {pc.block_size} threads of {pc.items_per_thread} items" in handout
        elif pc.block_size != CONFIG.block_size:
            assert f"Part {PARTS[key].number} is launched with {pc.block_size} threads" in handout


def test_every_template_says_scan_t_is_int_or_float_as_every_part_is_graded_in_both():
    assert all(pc.dtypes == ("int32", "float32") for pc in CONFIG.parts.values())
    for spec in PARTS.values():
        head = (TEMPLATES / spec.filename).read_text().split("// Contract", 1)[0]
        assert "int for now" not in head and "int or float" in head, spec.filename
        if CONFIG.parts[spec.key].block_size != CONFIG.block_size:
            assert "512 by default" not in head, spec.filename  # it has its own


def test_the_release_readme_counts_every_kind_of_points():
    readme = student_readme(CONFIG)
    row = next(line for line in readme.splitlines() if "part3_conflict_free.cu" in line)
    assert f"| {CONFIG.parts['part3_conflict_free'].profile.points:g} (on any machine) |" in row
    for key, pc in CONFIG.parts.items():
        line = next(x for x in readme.splitlines() if PARTS[key].filename in x)
        if pc.timing and pc.timing.points:
            assert f"{pc.timing.points:g} (on a GPU)" in line
