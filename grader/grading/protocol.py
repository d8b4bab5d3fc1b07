"""The worker protocol: the job the runner gives a part's worker, and the events the worker reports back.

The runner (:mod:`grader.grading.runner`) grades each part in a child process, ``python -m grader.grading.worker
JOB.json`` (:mod:`grader.grading.worker`). Both sides speak only through the types of this module:

- :class:`Job`, written once by the runner as one JSON object (:meth:`Job.to_json`) that carries the
  configuration the runner validated, read by the worker (:meth:`Job.from_json`), which validates
  it again with the same pydantic models;
- the events (:data:`EVENTS`, one pydantic dataclass each), appended by the worker to the job's event file
  as JSON lines (:class:`EventWriter`, flushed one by one, so a crash or a kill of the worker
  loses nothing already reported) and read by the runner as they arrive (:class:`EventReader`).

On the wire an event is ``{"event": NAME, "t": WALL_CLOCK, ...fields}``; :func:`encode` and
:func:`decode` are the one pair that converts. What a worker writes passes through a process
that ran student code, so :func:`decode` trusts nothing: every string is made safe and capped
(:func:`grader.core.results.clean_part_message`; case results through :func:`grader.core.results.clean_case`),
the event is validated as its type, and a line that is not a well-formed event is dropped.

The order of a part's events: ``device`` once the backend is up (or ``error`` and the end);
``compile-error`` and the end, or ``compiled``; ``case-start`` then ``case`` per visible case
(on a GPU, under compute-sanitizer's audit, a case whose kernel faulted has ``locating-fault`` before
its ``case``; a case the emulator's checks passed has ``gpu-wait`` and a second ``case-start`` before
it runs on the GPU);
on a GPU, for a timed part whose visible cases all passed, ``timing-start``, then ``case-start``
and ``timed`` per timed size (and ``device-update`` with the copy bandwidth); for a profiled part
whose cases so far all passed, ``profile-start`` (the profile is taken before any hidden case);
on the emulator, for a timed part whose visible cases all passed, ``profile-start`` and
``roofline``; ``hidden-start`` and the hidden cases; ``performance`` for a timed part; ``profile`` for a profiled
part; ``done`` at the end.

A worker that serves a submission's parts in turn (``python -m grader.grading.worker --serve FD
JOB.json``, :data:`SERVE_ARG`) takes each later job as one line on its stdin, ``JOB.json<TAB>FOLDER``,
and says it is ready for the next with one byte on ``FD`` after each job's ``done``
(:class:`grader.grading.worker_process.WorkerSlot`, :func:`grader.grading.worker.main.serve`).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass as pydantic_dataclass

from grader.assignment.config import Config
from grader.core.errors import ScangradeError
from grader.core.performance import Performance, Profile, Roofline
from grader.core.results import CaseResult, clean_case, clean_part_message
from grader.grading.case.cases import CaseSpec, case_list

class ProtocolError(ScangradeError):
    """A job file the worker cannot use (unreadable, not JSON, a field missing or of the wrong type)."""


class Job(BaseModel):
    """What one worker grades, and how.

    Attributes:
        config: the configuration the runner validated and grades with (the private overlay, the
            run's seed and settings such as ``batch --jobs``'s one emulator thread included),
            validated again by the worker as it reads the job.
        part: the part's key (``part1_naive``).
        source: path of the part's ``.cu`` file (absolute).
        backend: the backend's name (``emulator``, ``pycuda``).
        events: path of the event file the worker appends to.
        checks: the grading's checks are on (the emulator's checks and thread orders; on a GPU, run
            beside it).
        cases: the part's cases in the order they run (:func:`grader.grading.case.cases.case_list`),
            each with its :class:`~grader.grading.case.cases.CheckMode` decided there: what the
            worker grades and how, read from here.
        start: how many of ``cases`` to skip: a worker started after a case that hung grades the
            cases after it.
        earlier_failed: a case before ``start`` did not pass (so the part is not timed).
        earlier_hung: a case before ``start`` ran past its deadline: on a GPU, the cases the GPU
            would run go to the emulator instead (a hang there costs no GPU and no deadline wait).
        sanitizer_pool: the folder of the submission's :class:`grader.grading.sanitizer_pool.SanitizerPool`
            (compute-sanitizer's children, already started), or "" where there is none.
        grading: the token of the grading the job is part of, one per submission graded (the compile
            cache's quota owner, :data:`grader.toolchain.cache.CACHE_OWNER_ENV`, which the
            worker sets from here, not from the environment it was started with), or "". A
            worker that serves a batch's submissions one after another (:func:`grader.grading.worker.main.serve`)
            clears what the last submission left on its GPU before the first job of another grading.
        compile_only: compile the part's file and stop (``compiled`` or ``compile-failed``, then
            ``done``): no case, no timing, no profile; the compile every part has first where a
            grading stops at a compile error (:func:`grader.grading.runner.grade`'s ``compile_first``).
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    config: Config
    part: str
    source: str
    backend: str
    events: str
    checks: bool = False
    cases: tuple[CaseSpec, ...]
    start: int = 0
    earlier_failed: bool = False
    earlier_hung: bool = False
    sanitizer_pool: str = ""
    grading: str = ""
    compile_only: bool = False

    @classmethod
    def for_part(cls, cfg: Config, *, part: str, source: Path, backend: str, events: Path, checks: bool,
                 start: int = 0, earlier_failed: bool = False, earlier_hung: bool = False,
                 sanitizer_pool: Path | None = None, grading: str = "", compile_only: bool = False) -> "Job":
        """The job grading ``part`` of ``source`` under the validated ``cfg`` (paths made absolute:
        the worker runs in a folder of its own), its cases those of
        :func:`~grader.grading.case.cases.case_list` under ``checks``."""
        return cls(config=cfg, part=part, source=str(Path(source).resolve()), backend=backend, events=str(events),
                   checks=checks, cases=tuple(case_list(cfg, part, checks=checks)), start=start,
                   earlier_failed=earlier_failed, earlier_hung=earlier_hung,
                   sanitizer_pool=str(sanitizer_pool) if sanitizer_pool else "", grading=grading,
                   compile_only=compile_only)

    def to_json(self) -> str:
        """The job as one JSON object (the keys are the attribute names)."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes, *, where: str = "job") -> "Job":
        """Read a job written by :meth:`to_json`.

        Raises:
            ProtocolError: ``text`` is not a JSON object, a field is missing, unknown or of the
                wrong type (the configuration's too); one line naming ``where`` and the field.
        """
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise ProtocolError(f"{where}: {_wire_problem(exc)}") from None


def _wire_problem(exc: ValidationError) -> str:
    """The first problem pydantic found in a job, in one line naming the field."""
    error = exc.errors()[0]
    ctx = error.get("ctx") or {}
    field = ".".join(str(step) for step in tuple(error["loc"]) + tuple(ctx.get("field", ())))
    kind = error["type"]
    if kind == "json_invalid":
        return f"not JSON ({error.get('ctx', {}).get('error', error['msg'])})"
    if not field:
        return f"a job is a JSON object, not {_json_type(error['input'])}"
    if kind == "missing":
        return f"field {field!r} is missing"
    if kind == "extra_forbidden":
        return f"unknown field {field!r} (a job from another grader version?)"
    if "problem" in ctx:  # a rule of the configuration (grader.assignment.config), in its own words
        return f"field {field!r}: {ctx['problem']}"
    return f"field {field!r}: {error['msg'][0].lower()}{error['msg'][1:]}, not {_json_type(error['input'])}"


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)


# --- events -------------------------------------------------------------------------------------------
#
# Each event is a pydantic dataclass: built with its fields in order (``CaseStart(case.name)``) and
# validated, as it is built and as :func:`decode` reads it back, by the same declarations.

#: The worker's argument that makes it serve several jobs (see the module's docstring).
SERVE_ARG = "--serve"

#: Events take their wire keys as well as their field names (the case-start event names its case ``name``).
_WIRE = ConfigDict(populate_by_name=True)
#: A device fact: text, whatever the worker gave.
_Fact = Annotated[str, BeforeValidator(lambda v: v if isinstance(v, str) else str(v))]
#: A case's result as the runner keeps it: its text made safe and capped (:func:`grader.core.results.clean_case`).
_Case = Annotated[CaseResult, AfterValidator(clean_case)]

@pydantic_dataclass(frozen=True, config=_WIRE)
class _Event:
    #: The event's name on the wire.
    name: ClassVar[str] = ""
    #: Wall clock (``time.time()``, s) when the worker wrote it, for the runner's phase times.
    t: float | None = field(default=None, kw_only=True)


@pydantic_dataclass(frozen=True, config=_WIRE)
class Device(_Event):
    """The backend is up: facts about the device (name, versions, workers, sandbox) as strings."""

    name: ClassVar[str] = "device"
    info: dict[str, _Fact]


@pydantic_dataclass(frozen=True, config=_WIRE)
class DeviceUpdate(_Event):
    """More facts about the device, learnt while timing (``copy_gbps``, ``warnings``)."""

    name: ClassVar[str] = "device-update"
    info: dict[str, _Fact]


@pydantic_dataclass(frozen=True, config=_WIRE)
class CompileFailed(_Event):
    """The part's file does not compile (or uses a forbidden directive); ``message``: the log."""

    name: ClassVar[str] = "compile-error"
    message: str


@pydantic_dataclass(frozen=True, config=_WIRE)
class Compiled(_Event):
    """The part compiled; its cases start."""

    name: ClassVar[str] = "compiled"


@pydantic_dataclass(frozen=True, config=_WIRE)
class CaseStart(_Event):
    """A case (or a timed size, ``timed n=... dtype``) starts: the runner's per-case deadline runs."""

    name: ClassVar[str] = "case-start"
    case: str = Field(alias="name")


@pydantic_dataclass(frozen=True, config=_WIRE)
class CaseDone(_Event):
    """A correctness case's result."""

    name: ClassVar[str] = "case"
    result: _Case


@pydantic_dataclass(frozen=True, config=_WIRE)
class Timed(_Event):
    """A timed size's result (with its :class:`grader.core.performance.Timing`)."""

    name: ClassVar[str] = "timed"
    result: _Case


@pydantic_dataclass(frozen=True, config=_WIRE)
class TimingStart(_Event):
    """The timing phase starts (GPU only)."""

    name: ClassVar[str] = "timing-start"


@pydantic_dataclass(frozen=True, config=_WIRE)
class HiddenStart(_Event):
    """The hidden cases start (after every visible case and the timing)."""

    name: ClassVar[str] = "hidden-start"


@pydantic_dataclass(frozen=True, config=_WIRE)
class PerformanceScored(_Event):
    """A timed part's performance score, once its hidden cases have run."""

    name: ClassVar[str] = "performance"
    result: Performance


@pydantic_dataclass(frozen=True, config=_WIRE)
class ProfileStart(_Event):
    """The memory-access profile starts (after the visible cases and the timing, before any hidden case).
    ``counts``: what it counts, a part's bank-conflict ``profile`` or a timed part's ``roofline``
    on the emulator (:data:`PROFILE_LABELS`)."""

    name: ClassVar[str] = "profile-start"
    counts: Literal["profile", "roofline"] = "profile"


#: What the worker is doing after a :class:`ProfileStart`, by its ``counts`` (for messages).
PROFILE_LABELS = {"profile": "the bank-conflict profile",
                  "roofline": "the roofline's counts on the CPU emulator (an estimate of the time on a GPU)"}


@pydantic_dataclass(frozen=True, config=_WIRE)
class Profiled(_Event):
    """A profiled part's profile and its points, once its hidden cases have run."""

    name: ClassVar[str] = "profile"
    result: Profile


@pydantic_dataclass(frozen=True, config=_WIRE)
class RooflineTaken(_Event):
    """A timed part's roofline on the CPU emulator (:mod:`grader.grading.analysis`), taken after the visible
    cases and before the hidden ones (after a ``profile-start``); an estimate worth no points."""

    name: ClassVar[str] = "roofline"
    result: Roofline


@pydantic_dataclass(frozen=True, config=_WIRE)
class LocatingFault(_Event):
    """The case's kernel faulted on the GPU; compute-sanitizer's memcheck now looks for the line (its
    own silence limit bounds it, not the case's deadline). The case's result follows."""

    name: ClassVar[str] = "locating-fault"
    case: str


@pydantic_dataclass(frozen=True, config=_WIRE)
class GpuWait(_Event):
    """On a GPU, the emulator's checks passed the case; the worker now waits for the GPU (another
    worker's timed window may hold it), which is not the case's time: a ``case-start`` of the same
    case follows once it has the GPU, and its deadline starts again there."""

    name: ClassVar[str] = "gpu-wait"
    case: str


@pydantic_dataclass(frozen=True, config=_WIRE)
class CompilerNotes(_Event):
    """The case's output is wrong; the host compiler now checks the file for warnings that explain
    wrong values (:meth:`grader.backends.emulator.build.EmulatorToolchain.compiler_notes`: its own time, once
    per dtype, not the case's deadline). The case's result follows."""

    name: ClassVar[str] = "compiler-notes"
    case: str


@pydantic_dataclass(frozen=True, config=_WIRE)
class WorkerError(_Event):
    """The backend could not start, or the machine's limits (``ulimit -v``) stopped the part
    (:func:`grader.host.resources.resource_failure`); ``message`` says why, and for a limit in one line
    with what to do. The worker ends; the part is an ``error``."""

    name: ClassVar[str] = "error"
    message: str


@pydantic_dataclass(frozen=True, config=_WIRE)
class Done(_Event):
    """The worker finished the job."""

    name: ClassVar[str] = "done"


Event = Union[Device, DeviceUpdate, CompileFailed, Compiled, CaseStart, CaseDone, Timed, TimingStart, HiddenStart,
              PerformanceScored, ProfileStart, Profiled, RooflineTaken, LocatingFault, GpuWait, CompilerNotes, WorkerError, Done]
#: Every event type by its wire name.
EVENTS: dict[str, type] = {cls.name: cls for cls in (Device, DeviceUpdate, CompileFailed, Compiled, CaseStart,
                                                     CaseDone, Timed, TimingStart, HiddenStart, PerformanceScored,
                                                     ProfileStart, Profiled, RooflineTaken, LocatingFault, GpuWait,
                                                     CompilerNotes,
                                                     WorkerError, Done)}
#: How each event type is read and written.
_ADAPTERS: dict[type, TypeAdapter] = {cls: TypeAdapter(cls) for cls in EVENTS.values()}


def encode(event: Event) -> str:
    """``event`` as one line of JSON (no newline): ``{"event": name, "t": ..., fields...}``."""
    return json.dumps({"event": event.name, **_ADAPTERS[type(event)].dump_python(event, by_alias=True)})


def decode(line: str | bytes) -> Event | None:
    """The event on one line a worker wrote, validated as its type, every string in it made safe and
    capped first (:func:`_capped`); None for a line that is not a well-formed event (not JSON, an
    unknown name, a field missing or malformed)."""
    try:
        raw = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("event"), str) or raw["event"] not in EVENTS:
        return None
    cls = EVENTS[raw.pop("event")]
    try:
        return _ADAPTERS[cls].validate_python(_capped(raw))
    except ValidationError:
        return None


def _capped(value):
    """``value`` with every string in it made safe and capped at a part message's size
    (:func:`grader.core.results.clean_part_message`): text from a worker may carry the student's
    (device printf, compiler output) and must not reach a terminal or report unchecked."""
    if isinstance(value, str):
        return clean_part_message(value)
    if isinstance(value, dict):
        return {k: _capped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_capped(v) for v in value]
    return value


class EventWriter:
    """The worker's side: appends events to the job's event file, each flushed to the operating
    system before :meth:`emit` returns (the runner reads it from there, and a worker killed or crashed
    loses nothing flushed), stamped with the wall clock. Not synced to disk: only a crash of the
    machine could lose what sync keeps, and a batch of workers syncing each event while others write
    gigabytes of inputs waited seconds a part on the disk (docs/throughput.md)."""

    def __init__(self, path: str | Path) -> None:
        self._file = open(path, "a", encoding="utf-8")

    def emit(self, event: Event) -> None:
        """Append ``event`` (its ``t`` set to now)."""
        event = dataclasses.replace(event, t=round(time.time(), 4))
        self._file.write(encode(event) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file."""
        self._file.close()

    def __enter__(self) -> "EventWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class EventReader:
    """The runner's side: reads the events a worker appends to its event file, as they arrive.

    Attributes:
        path: the event file (it need not exist yet).
        items: every event read so far, in order.
    """

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.items = path, 0, []

    def poll(self) -> list[Event]:
        """The events appended since the last call (whole lines only; malformed lines are dropped)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        new = []
        while b"\n" in data:
            line, data = data.split(b"\n", 1)
            self.offset += len(line) + 1
            event = decode(line)
            if event is not None:
                new.append(event)
        self.items += new
        return new
