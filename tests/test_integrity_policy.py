"""The grading policy of the integrity issue: a grade is the same on every run and every path, and no
submission (nor any case of one) changes another's.

Parts 5's ticket rule, checks by default, hidden cases after visible ones, hints, capped and cleaned
worker text, a hang costing one case only, the effective settings reaching the worker, and the OS
sandbox required on grading machines.
"""

from __future__ import annotations

import pytest

from grader.backends import Selection
from grader.config import load_config
from grader.runner import grade
from tests.conftest import BROKEN, write_config
from tests.test_grading import submission

EMULATOR = Selection("emulator", "test")


def _part5_config(tmp_path, sizes=(1, 257, 5000)):
    path = write_config(tmp_path, sizes={"part5_single_pass": list(sizes)})
    text = path.read_text().replace("  part5_single_pass:\n",
                                    "  part5_single_pass:\n    block_size: 64\n    items_per_thread: 4\n")
    path.write_text(text)
    return load_config(path)


# --- 1. Part 5 takes its tiles by ticket ---------------------------------------------------------

def test_part5_without_a_ticket_fails_every_case_with_the_dispatch_order_reason(tmp_path):
    cfg = _part5_config(tmp_path)
    folder = submission(tmp_path, part5_single_pass=BROKEN / "part5_no_ticket.cu")
    p = grade(folder, cfg=cfg, selection=EMULATOR, parts=["part5_single_pass"], checks=False).parts[0]
    assert p.status == "fail" and p.points == 0
    for c in p.cases:
        tiles = -(-c.n // 256)
        assert c.status == "fail", (c.name, c.message)
        assert f"*tile_counter is 0 after the launch, expected {tiles}" in c.message, c.message
        assert "atomicAdd(tile_counter, 1)" in c.message and "blockIdx" in c.message


def test_part5_with_a_ticket_passes(tmp_path):
    cfg = _part5_config(tmp_path)
    folder = submission(tmp_path, part5_single_pass=BROKEN / "part5_correct_serial_lookback.cu")
    p = grade(folder, cfg=cfg, selection=EMULATOR, parts=["part5_single_pass"], checks=False).parts[0]
    assert p.status == "pass", [(c.name, c.message) for c in p.cases if c.status != "pass"]
