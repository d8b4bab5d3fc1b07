"""How much slower than an idle machine this one grades now: the measure of the tests' time limits.

A time limit in a test (a part's ``timeouts.part_s``, a bound on a grading's wall time) is written as
what it is on an idle two-core machine and passed through :func:`seconds`, which multiplies it by
:func:`slowdown`. That is measured here, never assumed, the way the grader derives its own case
deadlines (:mod:`grader.grading.deadlines`: the reference solution's time measured on a machine,
scaled by :func:`~grader.grading.deadlines.load_factor` while it runs):

- how much slower this machine's cores are: once per session, the wall time of grading the reference
  Part 1 with a fresh compile (its source gets a line of its own, so the compile cache misses; the
  attack suite's tiny config; the nvcc check off), the fastest of :data:`RUNS` (the first may build
  the emulator's runtime), over :data:`IDLE_REFERENCE_S` (what that takes on the development
  machine) times the load factor during the measurement (what the load alone explains);
- times how busy the machine is now: the grader's own load factor (the 1-minute load average over
  the cores), read at each limit, as a course's CI runner or a ``make test`` beside other work
  becomes busy and quiet again.

Neither factor is below 1: a fast, idle machine keeps every limit as written, so a test stays as
quick, and as able to fail, as before; a busy one (issue 51: ``make test`` at a load of 5 to 16 on
two cores) gets limits in proportion, so the grader's behaviour, not the machine's speed, decides
the test. (One grading is a noisy measure of the load: beside CPU hogs it took 1.1 s once and 2.2 s
once at the same load average, so the load is read from the load average, not from it.)

Public API: :func:`reference_grading_s`, :func:`slowdown`, :func:`seconds`, :func:`without_nvcc`.
"""

from __future__ import annotations

import functools
import os
import secrets
import tempfile
import time
from pathlib import Path

from grader.assignment.config import load_config
from grader.backends import Selection
from grader.grading.deadlines import load_factor
from grader.grading.runner import grade
from tests.conftest import SOLUTIONS, write_config

#: Wall seconds of the measurement (:func:`reference_grading_s`) on the two-core development machine the
#: limits were chosen on: 0.95 to 1.05 s idle, 1.2 to 1.4 s beside two other workers' tests (the
#: worker's start about half, the compile most of the rest, the four cases 0.04 s).
IDLE_REFERENCE_S = 1.2
#: Fresh gradings measured; the fastest counts.
RUNS = 2


def without_nvcc() -> dict[str, str]:
    """The environment's PATH without the folders holding nvcc (the grader's workers inherit it): the
    emulator's nvcc cross-check off."""
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not (Path(d) / "nvcc").exists())
    return {"PATH": path}


@functools.lru_cache(maxsize=1)
def reference_grading_s() -> tuple[float, float]:
    """``(seconds, load factor)``: the fastest of :data:`RUNS` fresh gradings of the reference Part 1
    (n = 1, 5, 17, 32, BLOCK_SIZE 32, int32, the emulator with one worker, no checks, no nvcc), and
    the grader's load factor right after them. Measured once per session. Where the reference does
    not pass (no emulator here: the tests that need it fail on their own), ``(0.0, load factor)``:
    the cores count as fast as the development machine's."""
    fastest = float("inf")
    with tempfile.TemporaryDirectory(prefix="scangrade-pace-") as tmp:
        folder = Path(tmp)
        cfg = load_config(write_config(folder, block_size=32, part_s=300, sizes={"part1_naive": [5, 17]},
                                       extra="emulator:\n  workers: 1\n"))
        for i in range(RUNS):
            submission = folder / f"reference-{i}"
            submission.mkdir()
            # a line of its own: the compile cache misses, the build is measured too
            (submission / "part1_naive.cu").write_text(f"static int sg_pace_{secrets.token_hex(6)} = {i};\n"
                                                       + (SOLUTIONS / "part1_naive.cu").read_text())
            t0 = time.monotonic()
            result = grade(submission, cfg=cfg, selection=Selection("emulator", "tests.pace"),
                           parts=["part1_naive"], checks=False, env=without_nvcc())
            if result.parts[0].status != "pass":
                return 0.0, load_factor()
            fastest = min(fastest, time.monotonic() - t0)
    return fastest, load_factor()


def slowdown() -> float:
    """How many times slower than an idle two-core machine this one grades now (at least 1): the
    measured grading over :data:`IDLE_REFERENCE_S` and the load factor then (the cores' speed, at
    least 1), times the load factor now."""
    measured_s, factor_then = reference_grading_s()
    return max(1.0, measured_s / (IDLE_REFERENCE_S * factor_then)) * load_factor()


def seconds(idle_s: float) -> float:
    """A time limit of ``idle_s`` seconds on an idle two-core machine, on this machine now."""
    return idle_s * slowdown()
