"""Parts 3 (bank-conflict-free Blelloch) and 5 (single pass with decoupled look-back), both dtypes."""

from __future__ import annotations

import pytest

from grader.backends import Selection
from grader.assignment.config import load_config
from grader.grading.runner import grade
from tests.conftest import BROKEN, SOLUTIONS, TEMPLATES, write_config
from tests.grading.test_grading import parts_of, submission

EMULATOR = Selection("emulator", "test")


@pytest.fixture
def config(tmp_path):
    path = write_config(tmp_path, sizes={"part3_conflict_free": [1, 33, 200, 256],
                                         "part5_single_pass": [1, 255, 256, 257, 5000, 70000]})
    text = path.read_text().replace("  part3_conflict_free:\n", "  part3_conflict_free:\n    dtypes: [int32, float32]\n")
    text = text.replace("  part5_single_pass:\n", "  part5_single_pass:\n    block_size: 64\n    items_per_thread: 4\n"
                                                      "    dtypes: [int32, float32]\n")
    path.write_text(text)
    return load_config(path)


def test_the_reference_solutions_of_parts_3_and_5_pass_both_dtypes(backend, config):
    result = grade(SOLUTIONS, cfg=config, selection=backend)
    for p in result.parts:
        assert p.status == "pass", [(c.name, c.message) for c in p.cases if c.status != "pass"]
        assert {c.dtype for c in p.cases} == {"int32", "float32"}
    assert len(parts_of(result)["part5_single_pass"].cases) == 12


def test_the_templates_of_parts_3_and_5_compile_and_fail_every_case(backend, config):
    result = grade(TEMPLATES, cfg=config, selection=backend)
    for p in result.parts:
        assert p.status == "fail" and p.points == 0
        # Part 5's template takes no ticket either: that broken contract comes first, the output after it
        assert all(any("nothing was written to out" in f.message for f in c.findings) for c in p.cases), \
            [c.findings for c in p.cases]


def test_an_inclusive_single_pass_scan_fails_with_that_hint(tmp_path, backend, config):
    folder = submission(tmp_path, part5_single_pass=BROKEN / "part5_inclusive.cu")
    p = parts_of(grade(folder, cfg=config, selection=backend, parts=["part5_single_pass"]))["part5_single_pass"]
    assert all(c.status == "fail" and ("this is the inclusive scan" if c.n > 1 else "exclusive scan starts with out[0] = 0")
               in c.message for c in p.cases)  # at n = 1 the inclusive scan is a copy of the input


def test_a_plain_look_back_one_predecessor_at_a_time_passes(tmp_path, backend, config):
    folder = submission(tmp_path, part5_single_pass=BROKEN / "part5_correct_serial_lookback.cu")
    p = parts_of(grade(folder, cfg=config, selection=backend, parts=["part5_single_pass"]))["part5_single_pass"]
    assert p.status == "pass", [(c.name, c.message) for c in p.cases if c.status != "pass"]


def test_padding_for_16_banks_overruns_shared_memory_under_checks(tmp_path, config):
    folder = submission(tmp_path, part3_conflict_free=BROKEN / "part3_gems_16_banks.cu")
    p = grade(folder, cfg=config, selection=EMULATOR, parts=["part3_conflict_free"], checks=True).parts[0]
    assert all(c.status == "fail" and "(out-of-bounds)" in c.message and "shared memory" in c.message
               for c in p.cases), [c.message for c in p.cases]


def test_check_mode_passes_the_single_pass_reference_under_every_thread_order(config):
    p = grade(SOLUTIONS, cfg=config, selection=EMULATOR, parts=["part5_single_pass"], checks=True).parts[0]
    assert p.status == "pass", [(c.name, c.message) for c in p.cases if c.status != "pass"]
