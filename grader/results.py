"""The result model: frozen dataclasses for one case, one part and one submission.

One model, many renderers (:mod:`grader.report`). Failures are results too: a compile error,
a timeout or a crash is a :class:`PartResult` / :class:`CaseResult` with a status and a message.
The JSON form is a versioned envelope (``schema``, ``schema_version``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

SCHEMA = "scangrade.result"
SCHEMA_VERSION = 1

#: Case statuses. ``pass`` earns the case's points; every other status earns none.
CASE_STATUSES = ("pass", "fail", "error", "timeout", "crash", "not-run")
#: Part statuses: ``pass`` (every case passed), ``fail`` (some case did not), ``compile-error``,
#: ``missing`` (no file), ``timeout``, ``crash``, ``error`` (the grader could not run it).
PART_STATUSES = ("pass", "fail", "compile-error", "missing", "timeout", "crash", "error")


@dataclass(frozen=True)
class Mismatch:
    """Where an output first differs from the reference.

    Attributes:
        buffer: the buffer at fault (``out``, ``in``, ``tile_sums``).
        index: the first wrong element's index.
        got, expected: the values there (as Python ints or floats; ``got`` may be the poison).
        wrong: how many elements are wrong.
        first_wrong_tile: index of the first element of the tile holding ``index`` (tile = 2*BLOCK_SIZE).
        hint: a likely cause, when one is recognisable (inclusive vs exclusive, never written...).
    """

    buffer: str
    index: int
    got: Any
    expected: Any
    wrong: int
    first_wrong_tile: int | None = None
    hint: str | None = None


@dataclass(frozen=True)
class CaseResult:
    """One case: one part at one size with one seed.

    Attributes:
        name: a stable, readable id (``n=33``).
        n: number of elements.
        dtype: ``int32``.
        seed: the seed the input was drawn from (replay with ``--seed``).
        status: one of :data:`CASE_STATUSES`.
        points, max_points: points earned and possible.
        message: what happened, for the student.
        mismatch: the first mismatch when the output is wrong.
        elapsed_ms: wall time of the case on the host (ms), launches and checks included.
    """

    name: str
    n: int
    dtype: str
    seed: int
    status: str
    points: float
    max_points: float
    message: str = ""
    mismatch: Mismatch | None = None
    elapsed_ms: float | None = None


@dataclass(frozen=True)
class PartResult:
    """One part of a submission.

    Attributes:
        key: the part's config key (``part1_naive``); number and title from the handout.
        file: the graded file's path as given, or the expected name when missing.
        status: one of :data:`PART_STATUSES`.
        message: the part-level message (compiler output, timeout, crash).
        cases: every configured case, in config order (not-run ones included).
    """

    key: str
    number: int
    title: str
    file: str
    status: str
    message: str = ""
    cases: tuple[CaseResult, ...] = ()

    @property
    def points(self) -> float:
        """Points earned in this part."""
        return sum(c.points for c in self.cases)

    @property
    def max_points(self) -> float:
        """Points possible in this part."""
        return sum(c.max_points for c in self.cases)


@dataclass(frozen=True)
class SubmissionResult:
    """A whole grading run of one submission.

    Attributes:
        submission: the path graded.
        backend: ``pycuda`` or ``emulator``; backend_reason says why it was chosen.
        device: facts about the device (name, versions) as strings.
        config: path of the configuration used.
        seed: base seed; block_size: BLOCK_SIZE.
        parts: one PartResult per graded part.
        scangrade_version: the grader's version.
        started_at: ISO 8601 UTC time the run started; elapsed_s: its wall time in seconds.
    """

    submission: str
    backend: str
    backend_reason: str
    device: dict[str, str]
    config: str
    seed: int
    block_size: int
    parts: tuple[PartResult, ...]
    scangrade_version: str
    started_at: str
    elapsed_s: float
    timed: bool = False
    timing_note: str = field(default="")

    @property
    def points(self) -> float:
        """Points earned."""
        return sum(p.points for p in self.parts)

    @property
    def max_points(self) -> float:
        """Points possible."""
        return sum(p.max_points for p in self.parts)

    @property
    def passed(self) -> bool:
        """True when every part passed every case."""
        return bool(self.parts) and all(p.status == "pass" for p in self.parts)

    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON-ready form."""
        body = dataclasses.asdict(self)
        for part, src in zip(body["parts"], self.parts):
            part["points"], part["max_points"] = src.points, src.max_points
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **body,
                "points": self.points, "max_points": self.max_points, "passed": self.passed}

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON text."""
        return json.dumps(self.to_dict(), indent=2)


def case_from_dict(d: dict[str, Any]) -> CaseResult:
    """Rebuild a CaseResult from its ``dataclasses.asdict`` form (as the worker sends it)."""
    mm = d.get("mismatch")
    return CaseResult(**{**d, "mismatch": Mismatch(**mm) if mm else None})
