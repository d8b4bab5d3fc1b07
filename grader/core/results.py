"""The result model: frozen dataclasses for one case, one part and one submission.

One model, many renderers (:mod:`grader.render`). Failures are results too: a compile error,
a timeout or a crash is a :class:`PartResult` / :class:`CaseResult` with a status and a message.
The vocabulary is defined here once: :class:`CaseStatus`, :class:`PartStatus`, and each case's
failure ``kind`` (:class:`FailureKind`, :data:`CHECK_KINDS`, :data:`CRASH_KINDS`), so renderers
read kinds, never message text.
The JSON form is a versioned envelope (``schema``, ``schema_version``). The records of a part's speed and
memory behaviour a result carries (:class:`Timing`, :class:`Performance`, :class:`Profile`, ...) are
:mod:`grader.core.performance`'s; this module imports them, so they can be imported from either.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from grader.core.performance import Analysis, Performance, Profile, Roofline, Timing
from grader.core.safe_text import cut, printable

#: Bytes (UTF-8) kept of one message from a worker: a case's message, a hint; a part's message
#: (a compiler log) gets :data:`PART_MESSAGE_BYTES`. Longer text is cut with "… (cut: N bytes)".
MESSAGE_BYTES = 4096
PART_MESSAGE_BYTES = 16384
#: Lines kept of one message (a case's; a part's gets four times as many).
MESSAGE_LINES = 60
#: Bytes of case messages kept in one part, all cases together; past it a case keeps its first line.
PART_CASES_BYTES = 65536

def clean_text(text: str, *, max_bytes: int = MESSAGE_BYTES, max_lines: int = MESSAGE_LINES) -> str:
    """Student-controlled text (compiler output quoting the source, device printf, kernel output)
    made safe for a terminal and for every report by :func:`grader.core.safe_text.printable` (escape
    sequences removed; control and bidirectional-control characters but newline and tab written
    ``\\xNN`` or ``\\uNNNN``), and cut to ``max_lines`` lines and ``max_bytes`` UTF-8 bytes, ending in
    ``… (cut: N bytes)`` with the number of bytes left out (:func:`grader.core.safe_text.cut`).

    Args:
        text: any string (non-strings are returned as they are).
    """
    if not isinstance(text, str):
        return text
    return cut(printable(text), max_bytes=max_bytes, max_lines=max_lines)


def clean_part_message(text: str) -> str:
    """A part's message (a compiler log, a crash with the kernel's last output) made safe and capped
    as :func:`clean_text` does, with room for a compiler log."""
    return clean_text(text, max_bytes=PART_MESSAGE_BYTES, max_lines=4 * MESSAGE_LINES)


def clean_case(case: "CaseResult", budget: list[int] | None = None) -> "CaseResult":
    """``case`` with its message and mismatch hint passed through :func:`clean_text`. ``budget``, a
    one-element list of bytes left for the part's case messages (see :data:`PART_CASES_BYTES`), is
    drawn down; once it is spent a message keeps its first line only."""
    message = clean_text(case.message)
    if budget is not None:
        size = len(message.encode("utf-8", errors="replace"))
        if size > budget[0]:
            first = clean_text(message.split("\n", 1)[0], max_bytes=256, max_lines=1)
            message = first + ("\n… (cut: the part's messages passed "
                               f"{PART_CASES_BYTES} bytes)" if first != message else "")
            size = len(message.encode("utf-8", errors="replace"))
        budget[0] = max(0, budget[0] - size)
    mm = case.mismatch
    if mm is not None:
        mm = dataclasses.replace(mm, buffer=clean_text(mm.buffer, max_bytes=200, max_lines=1),
                                 hint=clean_text(mm.hint) if mm.hint else mm.hint,
                                 got=clean_text(mm.got, max_bytes=200, max_lines=1),
                                 expected=clean_text(mm.expected, max_bytes=200, max_lines=1))
    warnings = tuple(clean_text(w, max_bytes=1024, max_lines=4) for w in case.warnings[:20])
    findings = tuple(dataclasses.replace(f, kind=clean_text(f.kind, max_bytes=50, max_lines=1),
                                         message=clean_text(f.message, max_bytes=1024, max_lines=4),
                                         file=clean_text(f.file, max_bytes=200, max_lines=1),
                                         other_file=clean_text(f.other_file, max_bytes=200, max_lines=1),
                                         access=clean_text(f.access, max_bytes=50, max_lines=1),
                                         address=clean_text(f.address, max_bytes=200, max_lines=1),
                                         code=clean_text(f.code, max_bytes=480, max_lines=1),
                                         other_code=clean_text(f.other_code, max_bytes=480, max_lines=1))
                     for f in case.findings[:MAX_FINDINGS])
    return dataclasses.replace(case, message=message, mismatch=mm, warnings=warnings, findings=findings,
                               name=clean_text(case.name, max_bytes=200, max_lines=1),
                               dtype=clean_text(case.dtype, max_bytes=50, max_lines=1))


SCHEMA = "scangrade.result"
#: 2: a case's ``kind`` is the first of its ``findings`` in cause order (1: the first found).
SCHEMA_VERSION = 2
#: Versions :func:`result_from_dict` reads (a version-1 case gets one finding: its kind and message).
READABLE_VERSIONS = (1, 2)
#: Findings kept per case (each kind once: there are fewer kinds than this).
MAX_FINDINGS = 16

class CaseStatus(StrEnum):
    """A case's status. ``pass`` earns the case's points; every other status earns none. A
    :class:`~enum.StrEnum`: each member is its JSON string (``CaseStatus.NOT_RUN == "not-run"``)."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    TIMEOUT = "timeout"
    CRASH = "crash"
    NOT_RUN = "not-run"


class PartStatus(StrEnum):
    """A part's status: ``pass`` (every case passed), ``fail`` (some case did not), ``compile-error``,
    ``missing`` (no file), ``timeout``, ``crash``, ``error`` (the grader could not run it)."""

    PASS = "pass"
    FAIL = "fail"
    COMPILE_ERROR = "compile-error"
    MISSING = "missing"
    TIMEOUT = "timeout"
    CRASH = "crash"
    ERROR = "error"


def _member(enum: type[StrEnum], value: str, what: str):
    """``value`` as a member of ``enum`` (a status given as its string becomes the member).

    Raises:
        ValueError: ``value`` is not one of the statuses; the message lists them.
    """
    try:
        return enum(value)
    except ValueError:
        raise ValueError(f"{what} status {value!r} is not one of: {', '.join(enum)}") from None


#: What the gradebook, the summary and the reports say of a result the grader failed on
#: (:attr:`SubmissionResult.to_regrade`), and ``batch --resume`` grades again.
TO_REGRADE = "to regrade"

#: Case statuses, as strings, in their documented order.
CASE_STATUSES = tuple(CaseStatus)
#: Part statuses, as strings, in their documented order.
PART_STATUSES = tuple(PartStatus)


class FailureKind(StrEnum):
    """The grader's own kinds of failure of a case (:attr:`CaseResult.kind`). A kernel that stops
    with a :class:`grader.core.errors.KernelError` gives the backend's kind instead (``race``, ``trap``,
    ``undefined-shift``, ``illegal-address``...: every kind is a row of :data:`grader.core.kinds.KINDS`),
    so a kind is a string and these are its fixed values."""

    #: The output differs from the sequential reference scan (the mismatch says where).
    MISMATCH = "mismatch"
    #: A write into a guard zone around a buffer (the emulator's checks also report this kind).
    OUT_OF_BOUNDS = "out-of-bounds"
    #: The kernel changed its read-only input.
    INPUT_MODIFIED = "input-modified"
    #: Part 5: the tile counter does not count one ticket per block.
    TICKET = "ticket"
    #: The launch configuration or the arguments were refused before the kernel ran.
    LAUNCH_REFUSED = "launch-refused"
    #: A timed run's output failed the checks after the timed runs (or after a run drawn at random).
    WRONG_AFTER_TIMING = "wrong-after-timing"
    #: A timed run's median beat a device-to-device copy of the same bytes beyond the runs' noise.
    FASTER_THAN_COPY = "faster-than-copy"
    #: The case ran past its deadline (or, for a case not run, the part did).
    TIMEOUT = "timeout"
    #: The process running the case crashed.
    CRASH = "crash"
    #: The grader could not run the case (its worker stopped, the backend did not start).
    ERROR = "error"
    #: Not run: the part's file does not compile.
    COMPILE_ERROR = "compile-error"
    #: Not run: the part's file is missing from the submission.
    MISSING = "missing"


#: Kinds found by a checker, and kinds of the process running a case dying: derived from the one
#: table of kinds, :data:`grader.core.kinds.KINDS` (which also gives each kind's verdict).
from grader.core.kinds import CHECK_KINDS, CRASH_KINDS, WARNING_KINDS  # noqa: E402  (re-exported)


#: Bins of a :class:`Mismatch`'s counts across the array, and within a tile, at most.
MISMATCH_BINS = 64
OFFSET_BINS = 32


@dataclass(frozen=True)
class Mismatch:
    """Where an output first differs from the reference.

    Attributes:
        buffer: the buffer at fault (``out``, ``in``, ``tile_sums``).
        index: the first wrong element's index.
        got, expected: the values there (as Python ints or floats; ``got`` may be the poison).
        wrong: how many elements are wrong.
        first_wrong_tile: index of the first element of the tile holding ``index`` (Part 4's tile is
            2*BLOCK_SIZE elements, Part 5's BLOCK_SIZE*ITEMS_PER_THREAD); None for a one-block part.
        hint: a likely cause, when one is recognisable (inclusive vs exclusive, never written...).
        allowed: for a float32 output compared within an error bound (a fractional input), the
            absolute error allowed at ``index``; None where compared exactly (int32, exact float32).
        last: the last wrong element's index.
        bins, bin_width: where the wrong elements lie across the array: ``bins[k]`` counts those
            of indices ``[k * bin_width, (k + 1) * bin_width)`` (the last bin may be shorter); the
            width is the tile where the array has at most :data:`MISMATCH_BINS` tiles, else the
            fewest elements that make at most that many bins.
        offsets, offset_width: where the wrong elements lie within their tiles: ``offsets[k]`` counts
            those whose index modulo the tile is in ``[k * offset_width, (k + 1) * offset_width)``
            (at most :data:`OFFSET_BINS` bins); empty and None for a one-block part.
        stride: where there are three or more wrong elements a fixed distance apart and no others
            (every 512th element), that distance; else None.
        The last five are None or empty in a result saved before they were kept.
    """

    buffer: str
    index: int
    got: Any
    expected: Any
    wrong: int
    first_wrong_tile: int | None = None
    hint: str | None = None
    allowed: float | None = None
    last: int | None = None
    bins: tuple[int, ...] = ()
    bin_width: int | None = None
    offsets: tuple[int, ...] = ()
    offset_width: int | None = None
    stride: int | None = None

    def __post_init__(self) -> None:
        for name in ("bins", "offsets"):  # JSON gives lists
            object.__setattr__(self, name, tuple(int(v) for v in getattr(self, name) or ()))


@dataclass(frozen=True)
class CaseFinding:
    """One reason a case failed: a checker's finding (a race, an out-of-bounds access...), a broken
    contract (no ticket, a modified input) or a wrong output. A case lists them each kind once, in
    cause order (:func:`grader.core.kinds.in_cause_order`), the most likely cause first.

    Attributes:
        kind: a row of :data:`grader.core.kinds.KINDS` (``race``, ``ticket``, ``mismatch``...).
        message: one line (at most four) for the student: what, and where.
        file, line: where in the student's file, when known (for a race, the access that completed it).
        block, thread: the ids ``(x, y, z)`` of the thread that did it, when known.
        other_file, other_line, other_block, other_thread: the other access (a race's, which the
            checker saw first: the emulator's order, one a GPU may run either way) or the other
            barrier (a divergence), where the checker names one; None otherwise, and in a result
            saved before they were kept.
        access: a race's kind in that order (``read-after-write``: the first access wrote, the
            second reads; ``write-after-read``; ``write-after-write``); address: the element both
            accessed, in words (``temp[37] (inside shared array temp, 256 elements)``); None for
            other kinds, on a GPU (compute-sanitizer), and in a result saved before they were kept.
        code, other_code: the text of ``line`` and ``other_line`` in the student's part file,
            stripped (at most 160 characters), where the finding names a line of it; else None.
    """

    kind: str
    message: str
    file: str | None = None
    line: int | None = None
    block: tuple[int, int, int] | None = None
    thread: tuple[int, int, int] | None = None
    other_file: str | None = None
    other_line: int | None = None
    other_block: tuple[int, int, int] | None = None
    other_thread: tuple[int, int, int] | None = None
    access: str | None = None
    address: str | None = None
    code: str | None = None
    other_code: str | None = None

    def __post_init__(self) -> None:
        for name in ("block", "thread", "other_block", "other_thread"):  # JSON gives lists
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(int(v) for v in value))

    @classmethod
    def of(cls, finding: Any) -> "CaseFinding":
        """A checker's finding (:class:`grader.backends.base.Finding`: the emulator's or
        compute-sanitizer's) as a case keeps it: every field of the same name (``getattr``, so a
        finding without the newer ones gives None)."""
        return cls(**{f.name: getattr(finding, f.name, None) for f in dataclasses.fields(cls)})


@dataclass(frozen=True)
class CaseResult:
    """One case: one part at one size with one seed.

    Attributes:
        name: a stable, readable id (``n=33``).
        n: number of elements.
        dtype: ``int32``.
        seed: the seed the input was drawn from (replay with ``--seed``).
        status: a :class:`CaseStatus`.
        points, max_points: points earned and possible.
        message: what happened, for the student.
        mismatch: the first mismatch when the output is wrong.
        elapsed_ms: wall time of the case on the host (ms), launches and checks included.
        timing: GPU timing, when the case was timed.
        visibility: ``visible``, or ``hidden`` for cases from a private config, which students see
            by name and status only.
        kind: for a case that did not pass, what kind of failure it was (a :class:`FailureKind`, or
            the kind of the KernelError that stopped the kernel: ``race``, ``trap``...; every kind
            is a row of :data:`grader.core.kinds.KINDS`); for a case not run, why (the part's
            ``compile-error``, ``missing``, ``timeout``...). None for a pass.
        warnings: findings that did not fail the case (a read of unwritten shared memory that
            does not change the output, a shift a GPU clamps), one line each, with the line.
        checker: what checked the case beyond its output: ``emulator checks``,
            ``compute-sanitizer`` (on a GPU), or None (the output and guard zones only).
        findings: every reason the case failed (:class:`CaseFinding`), each kind once, in cause
            order; the first is ``kind`` and ``message`` tells it in full. A failing case given
            none gets one from its kind and message; a pass or a case not run has none.
    """

    name: str
    n: int
    dtype: str
    seed: int
    status: CaseStatus
    points: float
    max_points: float
    message: str = ""
    mismatch: Mismatch | None = None
    elapsed_ms: float | None = None
    timing: Timing | None = None
    visibility: str = "visible"
    kind: str | None = None
    warnings: tuple[str, ...] = ()
    checker: str | None = None
    findings: tuple[CaseFinding, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", _member(CaseStatus, self.status, "case"))
        object.__setattr__(self, "warnings", tuple(self.warnings or ()))
        findings = tuple(f if isinstance(f, CaseFinding) else CaseFinding(**f) for f in self.findings or ())
        if not findings and self.kind and self.status not in (CaseStatus.PASS, CaseStatus.NOT_RUN):
            findings = (CaseFinding(str(self.kind), self.message.split("\n", 1)[0]),)
        object.__setattr__(self, "findings", findings)


@dataclass(frozen=True)
class PartResult:
    """One part of a submission.

    Attributes:
        key: the part's config key (``part1_naive``); number and title from the handout.
        file: the graded file's path as given, or the expected name when missing.
        status: a :class:`PartStatus`.
        message: the part-level message (compiler output, timeout, crash).
        cases: every configured case (not-run ones included): the visible ones, the hidden ones,
            then the timed ones.
        performance: the part's performance score, for a timed part.
        phases_s: wall seconds of the part's phases, as far as they ran: ``startup`` (the child
            process and the backend: interpreter, compiler probe, CUDA context), ``compile``,
            ``cases`` (the correctness cases), ``timing`` (GPU timing, the reference included),
            ``profile`` (the bank-conflict profile, the reference included) and
            ``total``; empty for a missing part.
        profile: the part's memory-access profile (bank conflicts, sectors per request) and its
            points, for a profiled part.
        analysis: on a GPU, the timed part's analysis table (:class:`Analysis`); None elsewhere.
        roofline: on the CPU emulator, the timed part's estimated lower bound on the target GPU
            (:class:`Roofline`); None elsewhere.
        block_size: the threads a block the part is launched with (its BLOCK_SIZE: the config's
            ``block_size``, or the part's own); items_per_thread: Part 5's ITEMS_PER_THREAD, else
            None. None in a result saved before they were recorded.
        to_regrade: the grader failed on this part, not the submission (its worker died of
            something the submission did not do, in a fresh worker again; or the grader raised on
            the submission): its status is ``error`` and it is to be graded again (``batch --resume``
            does). False in a result saved before it was recorded.
    """

    key: str
    number: int
    title: str
    file: str
    status: PartStatus
    message: str = ""
    cases: tuple[CaseResult, ...] = ()
    performance: Performance | None = None
    phases_s: dict[str, float] = field(default_factory=dict)
    profile: Profile | None = None
    block_size: int | None = None
    items_per_thread: int | None = None
    analysis: Analysis | None = None
    roofline: Roofline | None = None
    to_regrade: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", _member(PartStatus, self.status, "part"))

    @property
    def points(self) -> float:
        """Points earned in this part: correctness cases plus performance plus profile."""
        return (sum(c.points for c in self.cases) + (self.performance.points if self.performance else 0.0)
                + (self.profile.points if self.profile else 0.0))

    @property
    def max_points(self) -> float:
        """Points possible in this part."""
        return (sum(c.max_points for c in self.cases) + (self.performance.max_points if self.performance else 0.0)
                + (self.profile.max_points if self.profile else 0.0))


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
        quick_max_n: for ``scangrade check``'s quick check, the largest n graded (``check.quick_max_n``),
            else None; skipped_cases and skipped_points: the cases of the graded parts it left out
            (larger n) and the points they are worth, neither in :attr:`points` nor :attr:`max_points`.
        backend_times_kernels, backend_uses_gpus: the backend's traits ``times_kernels`` and
            ``uses_gpus`` (its row of :data:`grader.backends.BACKENDS`), recorded by whoever graded it
            (:func:`grader.grading.runner.grade`), so that this layer reads no table above it and a saved
            result keeps them; True where not recorded (a result saved before they were: its reader
            fills them in, :func:`grader.classwork.store.load_intact`).
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
    quick_max_n: int | None = None
    skipped_cases: int = 0
    skipped_points: float = 0.0
    backend_times_kernels: bool = True
    backend_uses_gpus: bool = True

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

    @property
    def to_regrade(self) -> bool:
        """True when the grader failed on some part (:attr:`PartResult.to_regrade`): the result is not
        the submission's grade yet, and the submission is to be graded again."""
        return any(p.to_regrade for p in self.parts)

    @property
    def verdict(self) -> str:
        """The whole result in a word, as the gradebook's ``status`` and the reports' total say it:
        :data:`TO_REGRADE` where the grader failed on a part, else ``pass`` (every case of every
        part) or ``fail``."""
        if self.to_regrade:
            return TO_REGRADE
        return "pass" if self.passed else "fail"

    def performance_pending(self, part: PartResult) -> bool:
        """Whether ``part``'s performance points wait for a run on a GPU rather than being lost: a
        run on the emulator (which cannot time kernels) of a part whose cases all passed, with
        performance points to give. They are in :attr:`max_points`, never in :attr:`points`."""
        perf = part.performance
        return (perf is not None and perf.max_points > 0 and perf.ratio is None and not self.backend_times_kernels
                and part.status == "pass")

    @property
    def pending_points(self) -> float:
        """Performance points that wait for a run on a GPU (:meth:`performance_pending`), 0 when none."""
        return sum(p.performance.max_points for p in self.parts if self.performance_pending(p))

    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON-ready form (a non-finite float, such as a NaN output, becomes a string)."""
        body = _finite(dataclasses.asdict(self))
        for part, src in zip(body["parts"], self.parts):
            part["points"], part["max_points"] = src.points, src.max_points
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **body,
                "points": self.points, "max_points": self.max_points, "passed": self.passed,
                "to_regrade": self.to_regrade}

    def to_json(self) -> str:
        """:meth:`to_dict` as indented, strict JSON text."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def case_from_dict(d: dict[str, Any]) -> CaseResult:
    """Rebuild a CaseResult from its ``dataclasses.asdict`` form (a saved result's case), its text
    made safe and capped (:func:`clean_case`).

    Raises:
        ValueError: the status is not a :class:`CaseStatus`.
        TypeError: a field is missing or unknown.
    """
    mm, tm = d.get("mismatch"), d.get("timing")
    return clean_case(CaseResult(**{**d, "mismatch": Mismatch(**mm) if mm else None,
                                    "timing": Timing(**tm) if tm else None}))


def result_from_dict(d: dict[str, Any]) -> SubmissionResult:
    """Rebuild a SubmissionResult from :meth:`SubmissionResult.to_dict` (a saved ``--json`` file), of
    this version or an earlier one in :data:`READABLE_VERSIONS` (a version-1 case, without findings,
    gets one from its kind and message).

    Raises:
        ValueError: the document is not a ``scangrade.result`` of a version this grader reads.
        KeyError, TypeError: a field is missing or has the wrong shape.
    """
    if d.get("schema") != SCHEMA or d.get("schema_version") not in READABLE_VERSIONS:
        raise ValueError(f"not a {SCHEMA} document of version {' or '.join(map(str, READABLE_VERSIONS))} "
                         f"(schema {d.get('schema')!r}, version {d.get('schema_version')!r})")
    fields = {f.name for f in dataclasses.fields(SubmissionResult)}
    parts = []
    for p in d["parts"]:
        perf = p.get("performance")
        parts.append(PartResult(key=p["key"], number=p["number"], title=p["title"], file=p["file"],
                                status=p["status"], message=clean_part_message(p.get("message", "")),
                                cases=tuple(case_from_dict(c) for c in p["cases"]),
                                performance=Performance(**perf) if perf else None,
                                phases_s=dict(p.get("phases_s") or {}),
                                profile=Profile(**p["profile"]) if p.get("profile") else None,
                                block_size=p.get("block_size"), items_per_thread=p.get("items_per_thread"),
                                analysis=Analysis(**p["analysis"]) if p.get("analysis") else None,
                                roofline=Roofline(**p["roofline"]) if p.get("roofline") else None,
                                to_regrade=p.get("to_regrade") is True))
    body = {k: v for k, v in d.items() if k in fields and k != "parts"}
    return SubmissionResult(**body, parts=tuple(parts))
