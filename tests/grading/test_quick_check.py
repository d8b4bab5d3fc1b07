"""``scangrade check``'s quick check: by default the sizes up to ``check.quick_max_n`` only, said in
the report; ``check --full`` and ``grade`` grade every size. A kernel wrong only above the bound
passes the quick check and fails the full one, and the skipped cases are neither failed nor in the
points."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from grader.cli import main
from grader.assignment.config import load_config
from grader.grading.case.cases import case_list, sizes_up_to
from tests.conftest import BROKEN, ROOT, write_config

#: Correct at n = 1, 2, 33, 128, 200, 256 only (zeros elsewhere).
ONLY_SOME_SIZES = BROKEN / "part2_only_configured_sizes.cu"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch) -> Path:
    """A student's folder: config.yaml (Part 2, sizes 1, 2, 33, 100; quick_max_n 50) and
    assignment/part2_blelloch.cu, a kernel wrong at n = 100 only of those."""
    write_config(tmp_path, sizes={"part2_blelloch": [1, 2, 33, 100]}, extra="check:\n  quick_max_n: 50\n")
    (tmp_path / "assignment").mkdir()
    shutil.copy(ONLY_SOME_SIZES, tmp_path / "assignment" / "part2_blelloch.cu")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(capsys, *args: str) -> tuple[int, str, dict]:
    status = main([*args, "--backend", "emulator", "--no-checks", "--json", "result.json"])
    return status, capsys.readouterr().out, json.loads(Path("result.json").read_text())


def test_the_quick_check_skips_sizes_above_the_bound_and_says_so(setup, capsys):
    status, out, result = _run(capsys, "check")
    assert status == 0, out  # n = 100, the only wrong size, is not graded: no failure
    assert "mode: quick check, sizes up to n = 50 (`scangrade check --full`: every size)" in out
    assert ("QUICK CHECK: skipped n > 50 (1 case, 1 point, neither passed nor failed and not in this total); "
            "`scangrade check --full` runs every size, as the official grade does.") in out
    assert "FAIL" not in out and "n=100" not in out
    assert [c["n"] for c in result["parts"][0]["cases"]] == [1, 2, 33, 256]  # 256: the part's largest n, always
    assert (result["points"], result["max_points"]) == (4, 4)
    assert (result["quick_max_n"], result["skipped_cases"], result["skipped_points"]) == (50, 1, 1)


@pytest.mark.parametrize("command", [["check", "--full"], ["grade", "assignment"]])
def test_check_full_and_grade_grade_every_size(setup, capsys, command):
    status, out, result = _run(capsys, *command)
    assert status == 1 and "n=100 int32" in out and "QUICK" not in out and "quick check" not in out
    assert (result["points"], result["max_points"]) == (4, 5)
    assert result["quick_max_n"] is None and result["skipped_cases"] == 0


def test_sizes_up_to_keeps_n_1_and_the_hidden_sizes_within_the_bound(tmp_path):
    cfg = load_config(write_config(tmp_path, sizes={"part1_naive": [3, 100], "part4_any_size": [5000, 70000]}))
    cfg = cfg.override(parts={"part4_any_size": {"hidden_sizes": (600, 9000)}})
    small = sizes_up_to(cfg, 1000)
    assert small.parts["part1_naive"].sizes == (3, 100)
    assert small.parts["part4_any_size"].sizes == (1,) and small.parts["part4_any_size"].hidden_sizes == (600,)
    assert [c.n for c in case_list(small, "part4_any_size")] == [1, 600]
    assert small.parts["part4_any_size"].points_per_case == cfg.parts["part4_any_size"].points_per_case


def test_the_shipped_config_leaves_the_largest_sizes_to_the_full_check():
    cfg = load_config(ROOT / "config.yaml")
    bound = cfg.check.quick_max_n
    skipped = {key: sorted({c.n for c in case_list(cfg, key)} - {c.n for c in case_list(sizes_up_to(cfg, bound), key)})
               for key in cfg.parts}
    assert 16000000 in skipped["part4_any_size"] and 16000000 in skipped["part5_single_pass"]
    assert not skipped["part1_naive"] and not skipped["part2_blelloch"] and not skipped["part3_conflict_free"]
    # The quick check still reaches Part 4's third level of tile sums (more than 512 * 512 elements).
    assert max(n for n in cfg.parts["part4_any_size"].sizes if n <= bound) > 2 * 256 * 2 * 256
