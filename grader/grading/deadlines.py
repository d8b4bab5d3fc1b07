"""Each case's deadline, derived from what the case needs: a hang is found in seconds.

A case may run for ``floor + FACTOR * t_ref`` wall seconds (the floor: the backend's
:attr:`~grader.backends.BackendKind.case_floor_s`), times the machine's load
(:func:`load_factor`), and never longer than ``timeouts.case_s``. ``t_ref`` is the reference
solution's time on the same case and backend (the part, the dtype, n, and whether the case runs
under the emulator's checks), as measured by ``bench/case_times.py`` and kept in
:data:`TABLE_PATH` (``grader/grading/case_times.json``): between two measured sizes it is interpolated
linearly in n, past the largest it grows in proportion to n, below the smallest it is the smallest's.
A case the table knows nothing about (another backend, a part it lacks) gets ``timeouts.case_s``.

The margins are wide on purpose: a correct kernel that is stopped as a hang loses points it earned,
while a hang that is found in 6 s instead of 3 s costs only seconds. The floor covers what a tiny
case spends outside the kernel (Python, the launch, a first launch's module load), the factor a
slower machine than the one measured (the emulator's times were taken with one worker thread, as
``batch`` runs it), and the load factor a machine busy with other work.

Public API: :func:`case_budget_s`, :func:`reference_case_s`, :func:`load_factor`,
:func:`describe_budget`.
"""

from __future__ import annotations

import functools
import json
import os
from bisect import bisect_left
from pathlib import Path

from grader.backends import BACKENDS
from grader.grading.case.cases import CheckMode

__all__ = ["floor_s", "FACTOR", "TABLE_PATH", "case_budget_s", "sanitizer_budget_s", "reference_case_s",
           "load_factor", "describe_budget", "timed_case_n"]


def floor_s(backend: str) -> float:
    """Seconds every case of ``backend`` may take besides ``FACTOR`` times the reference's time
    (its row's ``case_floor_s``; the largest of the table for a backend it lacks)."""
    kind = BACKENDS.get(backend)
    return kind.case_floor_s if kind else max(k.case_floor_s for k in BACKENDS.values())


#: How many times the reference solution's time a case may take.
FACTOR = 20.0
#: Seconds a timed case may take besides ``FACTOR`` times the reference's: it may wait for the GPU
#: while other workers' cases (a hang among them, until its deadline) hold it (:mod:`grader.host.gpu_lock`).
TIMED_FLOOR_S = 60.0
#: The reference solution's measured times per case (written by ``bench/case_times.py``).
TABLE_PATH = Path(__file__).resolve().parent / "case_times.json"


@functools.lru_cache(maxsize=4)
def _table(path: str) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def reference_case_s(backend: str, part: str, mode: str, dtype: str, n: int, *,
                     table: dict | None = None) -> float | None:
    """The reference solution's wall seconds for one case, from the measured table.

    Args:
        backend: ``emulator`` or ``pycuda``.
        part: the part's key.
        mode: ``checked`` (the emulator's checks, three thread orders), ``plain`` or ``timed`` (a
            timed case on a GPU).
        dtype: ``int32`` or ``float32``.
        n: the case's size (any n: interpolated, see the module's docstring).
        table: the table (default: :data:`TABLE_PATH`'s).

    Returns:
        Seconds, or None where the table has no measurement for this backend, part, mode and dtype
        (a ``plain`` case falls back on the ``checked`` times, which are larger).
    """
    table = _table(str(TABLE_PATH)) if table is None else table
    modes = table.get(backend, {}).get("parts", {}).get(part, {})
    points = modes.get(f"{mode} {dtype}") or (modes.get(f"checked {dtype}") if mode == "plain" else None)
    if not points:
        return None
    points = sorted((int(a), float(b)) for a, b in points)
    sizes = [a for a, _ in points]
    i = bisect_left(sizes, n)
    if i < len(sizes) and sizes[i] == n:
        return points[i][1]
    if i == 0:
        return points[0][1]
    if i == len(sizes):
        last_n, last_s = points[-1]
        return last_s * n / last_n
    (n0, s0), (n1, s1) = points[i - 1], points[i]
    return s0 + (s1 - s0) * (n - n0) / (n1 - n0)


def case_budget_s(*, backend: str, part: str, dtype: str, n: int, check: CheckMode, timed: bool = False,
                  case_s: float, gpu_emulator_checks: bool = False, table: dict | None = None) -> float:
    """Wall seconds one case may take on an idle machine (:func:`load_factor` scales it): ``floor_s +
    FACTOR * t_ref``, at most ``case_s`` (``timeouts.case_s``); ``case_s`` where the reference's
    time is not known.

    Args:
        backend, part, dtype, n: the case.
        check: how the case is checked (its :class:`~grader.grading.case.cases.CheckMode`): a
            checked case runs under the checks; a sampled one's checks run on a sample of each
            launch's blocks (:meth:`grader.grading.case.run.CaseRun.sampled`), on either backend:
            one run per thread order of :data:`grader.grading.case.run.CHECK_SCHEDULES`, each at
            most a plain run of every block on the emulator (a part whose blocks wait on one another
            runs them all), is added. Not read for a timed case.
        timed: a timed case (GPU timing of a part).
        case_s: the ceiling.
        gpu_emulator_checks: on a GPU, a checked case waits for the emulator's checks of it (the
            checker of every machine, run beside the GPU): their time is added.
    """
    checked, sampled = check is CheckMode.CHECKED, check is CheckMode.SAMPLED
    checks_in_run = backend in BACKENDS and not BACKENDS[backend].has_sanitizer  # the checks slow the run itself
    mode = "timed" if timed else ("checked" if checked and checks_in_run else "plain")
    t_ref = reference_case_s(backend, part, mode, dtype, n, table=table)
    if t_ref is None:
        return case_s
    if gpu_emulator_checks and checked and not timed:
        extra = reference_case_s("emulator", part, "checked", dtype, n, table=table)
        if extra is None:
            return case_s
        t_ref += extra
    if sampled and not timed:
        from grader.grading.case.run import CHECK_SCHEDULES

        extra = reference_case_s("emulator", part, "plain", dtype, n, table=table)
        if extra is None:
            return case_s
        t_ref += len(CHECK_SCHEDULES) * extra
    floor = TIMED_FLOOR_S if timed else floor_s(backend)
    return min(case_s, floor + FACTOR * t_ref)


#: The longest a compute-sanitizer child may stay silent on a case whose time under it is not measured.
SANITIZER_MAX_S = 60.0
#: Seconds a compute-sanitizer child may stay silent on a case besides ``FACTOR`` times the reference's.
SANITIZER_FLOOR_S = 5.0


def sanitizer_budget_s(*, part: str, dtype: str, n: int, case_s: float, table: dict | None = None) -> float:
    """Seconds a compute-sanitizer child may stay silent once it started a case (:mod:`grader.grading.sanitizer`):
    ``SANITIZER_FLOOR_S + FACTOR * t`` with ``t`` the reference solution's time on the case under the
    slowest tool (mode ``sanitizer`` of the table), scaled by the load; ``min(case_s, 60)`` where ``t``
    is not measured. A case stopped so is judged on its plain run alone, under its own deadline, so
    a tight limit costs a check, never a false hang."""
    t_ref = reference_case_s("pycuda", part, "sanitizer", dtype, n, table=table)
    ceiling = min(case_s, SANITIZER_MAX_S)
    if t_ref is None:
        return ceiling
    return min(ceiling, (SANITIZER_FLOOR_S + FACTOR * t_ref) * load_factor())


def load_factor() -> float:
    """How much slower than an idle machine this one runs work now: the 1-minute load average over
    the CPU count, at least 1 (1 where the OS has no load average)."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        return 1.0
    return max(1.0, load / (os.cpu_count() or 1))


def describe_budget(seconds: float, case_s: float, backend: str) -> str:
    """Why a case was given ``seconds`` (its budget before the load factor), for the message of a
    case stopped at its deadline; it always names ``timeouts.case_s``."""
    if seconds >= case_s:
        return f"timeouts.case_s: {case_s:g} s"
    floor = floor_s(backend)
    return (f"the case's deadline: {floor:g} s plus {FACTOR:g} times the reference solution's time on it, "
            f"scaled by the machine's load, at most timeouts.case_s = {case_s:g} s")


def timed_case_n(name: str) -> tuple[int, str] | None:
    """``(n, dtype)`` of a timed case's name (``timed n=1048576 int32``), else None."""
    words = name.split()
    if len(words) == 3 and words[0] == "timed" and words[1].startswith("n=") and words[1][2:].isdigit():
        return int(words[1][2:]), words[2]
    return None
