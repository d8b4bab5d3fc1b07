"""Part workers started ahead (grader.grading.spare_workers): a spare started with the worker's
environment takes the next part's job (its stdout and stderr in the job's folder, as a worker started
for it has them), grades it as that worker would, and spares left waiting end with the block."""

from __future__ import annotations

from grader.backends import Selection
from grader.grading import spare_workers as spares_module
from grader.grading.runner import grade
from grader.grading.spare_workers import spare_workers
from tests.conftest import SOLUTIONS


def test_spares_take_the_later_parts_jobs_with_the_same_grades(small_config):
    selection = Selection("emulator", "test")
    alone = grade(SOLUTIONS, cfg=small_config, selection=selection, part_jobs=1)
    with spare_workers(1) as spares:
        ahead = grade(SOLUTIONS, cfg=small_config, selection=selection, part_jobs=1)
        waiting = [p for procs in spares._waiting.values() for p in procs]
    assert spares.taken >= len(ahead.parts) - 1  # every part after the first
    assert [(p.key, p.status, p.points) for p in ahead.parts] == [(p.key, p.status, p.points) for p in alone.parts]
    assert ahead.passed and all(p.phases_s["startup"] > 0 for p in ahead.parts)
    assert all(p.poll() is not None for p in waiting)  # ended with the block
    assert spares_module._current is None


def test_a_spare_whose_runner_needs_no_more_exits():
    """Its stdin closed before any job (the runner ended): the spare exits on its own."""
    import os
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "grader.grading.worker", "--spare"], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(SOLUTIONS.parents[1])})
    _, err = proc.communicate(b"", timeout=120)
    assert proc.returncode == 0, err
