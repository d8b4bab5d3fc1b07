"""A hang costs seconds: each case's deadline comes from the reference solution's time on it
(grader/grading/deadlines.py), the part goes on after it, and a deadlock is reported at once.

No test here times anything: each asserts what was reported and which cases were graded. The
configs keep ``timeouts.case_s`` at its default (120 s) and give the part less time than that, so a
hang stopped only at case_s would leave the cases after it not graded; but the test of three hangs in
a row, which counts hangs rather than where each was stopped, stops them at a short case_s (2 s on an
idle machine, scaled by :mod:`tests.pace`) instead of at each case's own deadline (5 s times the load).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.backends import Selection
from grader.assignment.config import load_config
from grader.grading.deadlines import FACTOR, case_budget_s, floor_s, reference_case_s, timed_case_n
from grader.grading.case.cases import CheckMode, case_list
from grader.grading.part_runner import MAX_HANGS_IN_A_ROW
from grader.grading.runner import grade
from tests.conftest import BROKEN, ROOT, write_config

EMULATOR = Selection("emulator", "test")


def _submission(tmp_path: Path, kernel: str) -> Path:
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "part1_naive.cu").write_text((BROKEN / kernel).read_text())
    return folder


def test_a_case_that_hangs_is_stopped_at_its_own_deadline_and_the_other_cases_are_graded(tmp_path):
    cfg = load_config(write_config(tmp_path, part_s=100, sizes={"part1_naive": [1, 3, 33, 100]}))
    assert cfg.timeouts.case_s > cfg.timeouts.part_s  # stopped at case_s, the hang would end the part
    folder = _submission(tmp_path, "part1_hang_some_n.cu")  # spins forever at n = 33 only
    p = grade(folder, cfg=cfg, selection=EMULATOR, parts=["part1_naive"], checks=False).parts[0]  # no checks: a hang
    status = {c.n: c.status for c in p.cases}
    assert status == {1: "pass", 3: "pass", 33: "timeout", 100: "pass", 128: "pass"}, \
        [(c.name, c.status, c.message) for c in p.cases]
    hung = next(c for c in p.cases if c.n == 33)
    assert hung.kind == "timeout" and "the case's deadline" in hung.message and "timeouts.case_s" in hung.message
    assert p.status == "timeout" and "n=33 int32 ran past its deadline" in p.message and p.points == 4


def test_a_kernel_that_hangs_in_three_cases_in_a_row_is_not_run_further(tmp_path, pace):
    cfg = load_config(write_config(tmp_path, part_s=100, sizes={"part1_naive": [1, 3, 33, 100]}))
    cfg = cfg.override(timeouts={"case_s": pace.seconds(2)})  # each hang stopped at case_s: the count is checked
    folder = _submission(tmp_path, "part1_hang.cu")  # spins forever at every n
    p = grade(folder, cfg=cfg, selection=EMULATOR, parts=["part1_naive"], checks=False).parts[0]
    statuses = [c.status for c in p.cases]
    assert statuses == ["timeout"] * MAX_HANGS_IN_A_ROW + ["not-run"] * (len(statuses) - MAX_HANGS_IN_A_ROW)
    assert all("in a row" in c.message for c in p.cases[MAX_HANGS_IN_A_ROW:])
    assert p.status == "timeout" and f"hung in {MAX_HANGS_IN_A_ROW} cases in a row" in p.message


def test_a_deadlock_past_the_checked_sizes_is_reported_at_once_as_a_deadlock(tmp_path):
    # checks_max_n 8: n = 33 runs without the checks, yet a spin nothing can end is still a deadlock.
    cfg = load_config(write_config(tmp_path, part_s=100, sizes={"part1_naive": [1, 3, 33, 100]},
                                   extra="emulator:\n  checks_max_n: 8\n"))
    folder = _submission(tmp_path, "part1_hang_some_n.cu")
    p = grade(folder, cfg=cfg, selection=EMULATOR, parts=["part1_naive"], checks=True).parts[0]
    by_n = {c.n: c for c in p.cases}
    assert by_n[33].status == "fail" and by_n[33].kind == "deadlock", by_n[33].message
    assert all(c.status == "pass" for n, c in by_n.items() if n != 33)
    assert p.status == "fail"


def test_the_reference_time_is_interpolated_in_n_and_grows_in_proportion_past_the_largest_size():
    table = {"emulator": {"parts": {"part4_any_size": {"plain int32": [[1000, 1.0], [3000, 2.0]],
                                                       "checked int32": [[10, 4.0]]}}}}

    def t(n, mode="plain"):
        return reference_case_s("emulator", "part4_any_size", mode, "int32", n, table=table)
    assert t(1000) == 1.0 and t(2000) == 1.5 and t(6000) == 4.0 and t(10) == 1.0
    assert t(20, "checked") == 8.0
    assert t(10, "plain") == 1.0  # plain below the table's plain sizes: the smallest plain time
    assert reference_case_s("emulator", "part4_any_size", "plain", "float32", 5, table=table) is None
    budget = case_budget_s(backend="emulator", part="part4_any_size", dtype="int32", n=2000, check=CheckMode.PLAIN,
                           case_s=120, table=table)
    assert budget == floor_s("emulator") + FACTOR * 1.5
    assert case_budget_s(backend="emulator", part="part4_any_size", dtype="int32", n=10**9, check=CheckMode.PLAIN,
                         case_s=120, table=table) == 120  # never past timeouts.case_s
    assert case_budget_s(backend="pycuda", part="part4_any_size", dtype="int32", n=5, check=CheckMode.PLAIN,
                         case_s=120, table=table) == 120  # not measured on this backend: case_s


def test_a_case_above_checks_max_n_has_time_for_the_checks_of_its_sampled_blocks():
    """One emulator run of every block per thread order at most (Part 5 runs them all), on either
    backend: on a GPU they run beside it, within the case's deadline."""
    table = {"emulator": {"parts": {"part5_single_pass": {"plain int32": [[10**6, 0.5]]}}},
             "pycuda": {"parts": {"part5_single_pass": {"plain int32": [[10**6, 0.01]]}}}}

    def budget(backend, sampled):
        return case_budget_s(backend=backend, part="part5_single_pass", dtype="int32", n=10**6,
                             check=CheckMode.SAMPLED if sampled else CheckMode.PLAIN, case_s=1000, table=table)
    assert budget("emulator", True) - budget("emulator", False) == pytest.approx(FACTOR * 3 * 0.5)
    assert budget("pycuda", True) - budget("pycuda", False) == pytest.approx(FACTOR * 3 * 0.5)
    assert case_budget_s(backend="emulator", part="part4_any_size", dtype="int32", n=10**6,
                         check=CheckMode.SAMPLED, case_s=120, table=table) == 120  # the emulator's time unknown: case_s


def test_every_case_of_the_shipped_config_has_a_measured_reference_time_on_the_emulator():
    cfg = load_config(ROOT / "config.yaml")
    for key in cfg.parts:
        for case in case_list(cfg, key):
            mode = "checked" if case.check is CheckMode.CHECKED else "plain"
            assert reference_case_s("emulator", key, mode, case.dtype, case.n) is not None, (key, case.name)
    assert timed_case_n("timed n=1048576 float32") == (1048576, "float32") and timed_case_n("n=3 int32") is None
