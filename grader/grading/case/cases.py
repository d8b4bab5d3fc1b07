"""The cases of a part: which correctness cases it has and in what order (:func:`case_list`), how
each is checked (:class:`CheckMode`, decided here once), the device memory they need at once
(:func:`device_memory_bytes`), and the results of cases that did not run (:func:`not_run`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

import numpy as np

from grader.assignment.config import Config, PartConfig
from grader.assignment.parts import DTYPES, PARTS, PartSpec
from grader.core.results import CaseResult, CaseStatus


#: The ``checker`` of a sampled case's result (:attr:`CheckMode.SAMPLED`).
SAMPLED_CHECKER = "emulator checks (sampled blocks)"


class CheckMode(StrEnum):
    """How a correctness case is checked beyond its output, decided once for each case where the
    case list is made (:func:`check_mode`) and read from the case everywhere else: the worker's run
    of it (:class:`grader.grading.case.run.CaseRun`), its deadline
    (:func:`grader.grading.deadlines.case_budget_s`), compute-sanitizer's share on a GPU, and the
    result's ``checker`` (:attr:`checker`).

    - ``checked``: the checks on, n at most ``emulator.checks_max_n``: the emulator's race, bounds
      and barrier checks over every block, in each of three thread orders (on a GPU, beside it;
      compute-sanitizer's audit runs these cases too).
    - ``sampled``: the checks on, n above it: the same checks on a sample of each launch's blocks
      (the first, the last and some drawn from the case's seed), then a plain run of every block
      judges the output.
    - ``plain``: the checks off (``--no-checks``): the output alone.
    """

    CHECKED = "checked"
    SAMPLED = "sampled"
    PLAIN = "plain"

    @property
    def checker(self) -> str | None:
        """What checks a case of this mode beyond its output, as its result names it (None: nothing)."""
        return {CheckMode.CHECKED: "emulator checks", CheckMode.SAMPLED: SAMPLED_CHECKER}.get(self)


#: The reason of a case's :attr:`CheckMode.PLAIN` where the grading's checks are off.
CHECKS_OFF = "the checks are off"


def check_mode(cfg: Config, n: int, *, checks: bool) -> tuple[CheckMode, str]:
    """How a case of size ``n`` is checked under ``cfg`` (``checks``: the grading's checks are on),
    and why, in words a message can end with (``n is above emulator.checks_max_n = 70000``)."""
    limit = cfg.emulator.checks_max_n
    if not checks:
        return CheckMode.PLAIN, CHECKS_OFF
    if n <= limit:
        return CheckMode.CHECKED, f"n is at most emulator.checks_max_n = {limit}"
    return CheckMode.SAMPLED, f"n is above emulator.checks_max_n = {limit}"


def checked_sizes(cfg: Config) -> str:
    """The sizes whose cases are checked whole (:attr:`CheckMode.CHECKED`), for a report's
    ``checker`` line: ``cases up to n = 70000``."""
    return f"cases up to n = {cfg.emulator.checks_max_n}"


@dataclass(frozen=True)
class CaseSpec:
    """One case to run: a size, a dtype, a seed, whether students may see its details, for float32
    how its input is drawn (``fractional``: see :func:`grader.grading.case.inputs.make_input`), and
    how it is checked (``check``, a :class:`CheckMode`, and ``check_reason``, why: see
    :func:`check_mode`). The defaults are a case of a grading without checks."""

    name: str
    n: int
    dtype: str
    seed: int
    visibility: str = "visible"
    fractional: bool = False
    check: CheckMode = CheckMode.PLAIN
    check_reason: str = CHECKS_OFF


#: What the name of a visible float32 case adds after the dtype: its input is drawn exact (multiples
#: of :data:`grader.grading.case.inputs.FLOAT_STEP`, every sum exact, the output compared exactly)
#: or fractional (uniform in [0, 1), the output within :func:`grader.grading.case.checks.error_bound`).
#: The handout explains both words.
FLOAT_DRAWS = {False: "exact", True: "fractional"}


def case_name(n: int, dtype: str, *, fractional: bool = False) -> str:
    """A visible case's name: ``n=513 int32``, ``n=513 float32 exact``, ``n=1000 float32 fractional``."""
    return f"n={n} {dtype}" + (f" {FLOAT_DRAWS[fractional]}" if np.dtype(DTYPES[dtype]).kind == "f" else "")


def case_list(cfg: Config, key: str, *, checks: bool = True) -> list[CaseSpec]:
    """Every correctness case of a part, in the order they run: the visible cases of every dtype
    (per dtype, the configured sizes, with n = 1 and, for a one-block part, its largest n always
    included; for float32 these draw exact inputs, then each of the part's ``fractional_sizes``
    draws fractional ones), then the hidden cases of every dtype (exact). A kernel can keep state
    from one launch to the next (a ``__device__`` global), so no visible case may run after a hidden
    one. Each case's :class:`CheckMode` is decided here (:func:`check_mode`; ``checks``: the
    grading's checks are on, as every command grades by default)."""
    pc, spec = cfg.parts[key], PARTS[key]
    sizes = list(pc.sizes)
    if 1 not in sizes:
        sizes.insert(0, 1)
    limit = spec.limit(pc.block_size)
    if limit is not None and limit not in sizes:
        sizes.append(limit)

    def spec(name: str, n: int, dtype: str, seed: int, visibility: str = "visible", fractional: bool = False):
        return CaseSpec(name, n, dtype, seed, visibility, fractional, *check_mode(cfg, n, checks=checks))

    visible = []
    for dtype in pc.dtypes:
        visible += [spec(case_name(n, dtype), n, dtype, cfg.seed) for n in sizes]
        if np.dtype(DTYPES[dtype]).kind == "f":
            visible += [spec(case_name(n, dtype, fractional=True), n, dtype, cfg.seed, fractional=True)
                        for n in pc.fractional_sizes]
    hidden = [spec(f"hidden #{i + 1} {dtype}", n, dtype, cfg.hidden_seed, "hidden")
              for dtype in pc.dtypes for i, n in enumerate(pc.hidden_sizes)]
    return visible + hidden


def sizes_up_to(cfg: Config, max_n: int) -> Config:
    """``cfg`` with every part's sizes and hidden sizes above ``max_n`` left out (``scangrade
    check``'s quick check: ``check.quick_max_n``). A part left with no size keeps n = 1, which
    :func:`case_list` grades anyway; timed sizes (a GPU's, quick there) stay."""
    parts = {}
    for key, pc in cfg.parts.items():
        sizes = tuple(n for n in pc.sizes if n <= max_n) or (1,)
        parts[key] = {"sizes": sizes, "hidden_sizes": tuple(n for n in pc.hidden_sizes if n <= max_n)}
    return cfg.override(parts=parts)


#: The runs of a case whose buffers can be live at once: :class:`grader.grading.case.run.CaseRun`
#: keeps one run's buffers while the next (the second shared-memory fill, the next thread order)
#: allocates its own.
RUNS_LIVE = 2
#: What an allocator may add to each allocation (alignment, a gap after it), in bytes: counted.
_PER_ALLOCATION = 4096
#: Device memory beyond the runs' own, in bytes.
_SLACK = 16 * 2**20


class SizedRun(NamedTuple):
    """One run of a part's launch plan to size device memory for: the part, its config, n, dtype."""

    part: PartSpec
    pc: PartConfig
    n: int
    dtype: str


def case_runs(cfg: Config, key: str) -> list[SizedRun]:
    """A :class:`SizedRun` per case of part ``key`` (:func:`case_list`: visible, hidden, every
    dtype)."""
    pc, spec = cfg.parts[key], PARTS[key]
    return [SizedRun(spec, pc, c.n, c.dtype) for c in case_list(cfg, key)]


def device_memory_bytes(runs: list[SizedRun]) -> int:
    """The device memory, in bytes, that grading ``runs`` needs at once: :data:`RUNS_LIVE` runs of
    the largest (every buffer of its plan with its guard zones, as
    :func:`grader.assignment.plans.plan_allocations` finds them, plus an allocator's rounding), and 16 MiB.
    What the CPU emulator reserves (its device memory is address space of the grader's own
    process, which an address-space limit caps), computed from the config alone."""
    from grader.assignment.plans import plan_allocations

    largest = max((sum(b + _PER_ALLOCATION for b in plan_allocations(r.part, r.pc, r.n, DTYPES[r.dtype]))
                   for r in runs), default=0)
    return RUNS_LIVE * largest + _SLACK


def not_run(cfg: Config, key: str, message: str, *, kind: str,
            done: tuple[CaseResult, ...] = ()) -> tuple[CaseResult, ...]:
    """``done``, then every case of :func:`case_list` not among them (by name) as a ``not-run``
    result worth no points, with ``message`` (why it did not run, for the student) and ``kind``
    (the part's failure: ``compile-error``, ``missing``, ``timeout``...)."""
    points = cfg.parts[key].points_per_case
    names = {c.name for c in done}
    return done + tuple(CaseResult(name=c.name, n=c.n, dtype=c.dtype, seed=c.seed, status=CaseStatus.NOT_RUN,
                                   points=0.0, max_points=points, message=message, visibility=c.visibility, kind=kind)
                        for c in case_list(cfg, key) if c.name not in names)
