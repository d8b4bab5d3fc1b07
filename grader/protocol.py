"""The worker protocol: the job the runner gives a part's worker, and the events the worker reports back.

The runner (:mod:`grader.runner`) grades each part in a child process, ``python -m grader.worker
JOB.json`` (:mod:`grader.worker`). Both sides speak only through the types of this module:

- :class:`Job`, written once by the runner as one JSON object (:meth:`Job.to_json`) that carries the
  configuration the runner validated, read by the worker (:meth:`Job.from_json`), which validates
  it again with the same pydantic models;
- the events (:data:`EVENTS`, one dataclass each), appended by the worker to the job's event file
  as JSON lines (:class:`EventWriter`, flushed and synced one by one, so a crash or a kill loses
  nothing already reported) and read by the runner as they arrive (:class:`EventReader`).

On the wire an event is ``{"event": NAME, "t": WALL_CLOCK, ...fields}``; :func:`encode` and
:func:`decode` are the one pair that converts. What a worker writes passes through a process
that ran student code, so :func:`decode` trusts nothing: every string is made safe and capped
(:func:`grader.results.clean_part_message`; case results through :func:`grader.results.case_from_dict`),
and a line that is not a well-formed event is dropped.

The order of a part's events: ``device`` once the backend is up (or ``error`` and the end);
``compile-error`` and the end, or ``compiled``; ``case-start`` then ``case`` per visible case
(on a GPU, a case whose kernel faulted has ``locating-fault`` before its ``case``, then ``restart``);
on a GPU, for a timed part whose visible cases all passed, ``timing-start``, then ``case-start``
and ``timed`` per timed size (and ``device-update`` with the copy bandwidth); for a profiled part
whose cases so far all passed, ``profile-start`` (the profile is taken before any hidden case);
``hidden-start`` and the hidden cases; ``performance`` for a timed part; ``profile`` for a profiled
part; ``done`` at the end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Union

from pydantic import BaseModel, ConfigDict, ValidationError

from grader.config import Config
from grader.errors import ScangradeError
from grader.results import CaseResult, Performance, Profile, case_from_dict, clean_part_message

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
        checks: run the emulator's checks and thread orders (cases up to ``emulator.checks_max_n``).
        start: how many of the part's cases (:func:`grader.execute.case_list`) to skip: a worker
            started after a case that hung grades the cases after it.
        earlier_failed: a case before ``start`` did not pass (so the part is not timed).
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    config: Config
    part: str
    source: str
    backend: str
    events: str
    checks: bool = False
    start: int = 0
    earlier_failed: bool = False

    @classmethod
    def for_part(cls, cfg: Config, *, part: str, source: Path, backend: str, events: Path, checks: bool,
                 start: int = 0, earlier_failed: bool = False) -> "Job":
        """The job grading ``part`` of ``source`` under the validated ``cfg`` (paths made absolute:
        the worker runs in a folder of its own)."""
        return cls(config=cfg, part=part, source=str(Path(source).resolve()), backend=backend, events=str(events),
                   checks=checks, start=start, earlier_failed=earlier_failed)

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
    if "problem" in ctx:  # a rule of the configuration (grader.config), in its own words
        return f"field {field!r}: {ctx['problem']}"
    return f"field {field!r}: {error['msg'][0].lower()}{error['msg'][1:]}, not {_json_type(error['input'])}"


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)


# --- events -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Event:
    #: The event's name on the wire.
    name: ClassVar[str] = ""
    #: Wall clock (``time.time()``, s) when the worker wrote it, for the runner's phase times.
    t: float | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class Device(_Event):
    """The backend is up: facts about the device (name, versions, workers, sandbox) as strings."""

    name: ClassVar[str] = "device"
    info: dict[str, str]


@dataclass(frozen=True)
class DeviceUpdate(_Event):
    """More facts about the device, learnt while timing (``copy_gbps``, ``warnings``)."""

    name: ClassVar[str] = "device-update"
    info: dict[str, str]


@dataclass(frozen=True)
class CompileFailed(_Event):
    """The part's file does not compile (or uses a forbidden directive); ``message``: the log."""

    name: ClassVar[str] = "compile-error"
    message: str


@dataclass(frozen=True)
class Compiled(_Event):
    """The part compiled; its cases start."""

    name: ClassVar[str] = "compiled"


@dataclass(frozen=True)
class CaseStart(_Event):
    """A case (or a timed size, ``timed n=... dtype``) starts: the runner's per-case deadline runs."""

    name: ClassVar[str] = "case-start"
    case: str


@dataclass(frozen=True)
class CaseDone(_Event):
    """A correctness case's result."""

    name: ClassVar[str] = "case"
    result: CaseResult


@dataclass(frozen=True)
class Timed(_Event):
    """A timed size's result (with its :class:`grader.results.Timing`)."""

    name: ClassVar[str] = "timed"
    result: CaseResult


@dataclass(frozen=True)
class TimingStart(_Event):
    """The timing phase starts (GPU only)."""

    name: ClassVar[str] = "timing-start"


@dataclass(frozen=True)
class HiddenStart(_Event):
    """The hidden cases start (after every visible case and the timing)."""

    name: ClassVar[str] = "hidden-start"


@dataclass(frozen=True)
class PerformanceScored(_Event):
    """A timed part's performance score, once its hidden cases have run."""

    name: ClassVar[str] = "performance"
    result: Performance


@dataclass(frozen=True)
class ProfileStart(_Event):
    """The memory-access profile starts (after the visible cases and the timing, before any hidden case)."""

    name: ClassVar[str] = "profile-start"


@dataclass(frozen=True)
class Profiled(_Event):
    """A profiled part's profile and its points, once its hidden cases have run."""

    name: ClassVar[str] = "profile"
    result: Profile


@dataclass(frozen=True)
class Restart(_Event):
    """The case just reported faulted on the GPU and lost the worker's CUDA context: the worker
    ends, and a new one grades the cases after it (as after a case that hung)."""

    name: ClassVar[str] = "restart"
    case: str


@dataclass(frozen=True)
class LocatingFault(_Event):
    """The case's kernel faulted on the GPU; compute-sanitizer's memcheck now looks for the line (its
    own silence limit bounds it, not the case's deadline). The case's result follows."""

    name: ClassVar[str] = "locating-fault"
    case: str


@dataclass(frozen=True)
class CompilerNotes(_Event):
    """The case's output is wrong; the host compiler now checks the file for warnings that explain
    wrong values (:meth:`grader.backends.emulator.build.Toolchain.compiler_notes`: its own time, once
    per dtype, not the case's deadline). The case's result follows."""

    name: ClassVar[str] = "compiler-notes"
    case: str


@dataclass(frozen=True)
class WorkerError(_Event):
    """The backend could not start; ``message`` says why. The worker ends."""

    name: ClassVar[str] = "error"
    message: str


@dataclass(frozen=True)
class Done(_Event):
    """The worker finished the job."""

    name: ClassVar[str] = "done"


Event = Union[Device, DeviceUpdate, CompileFailed, Compiled, CaseStart, CaseDone, Timed, TimingStart, HiddenStart,
              PerformanceScored, ProfileStart, Profiled, Restart, LocatingFault, CompilerNotes, WorkerError, Done]
#: Every event type by its wire name.
EVENTS: dict[str, type] = {cls.name: cls for cls in (Device, DeviceUpdate, CompileFailed, Compiled, CaseStart,
                                                     CaseDone, Timed, TimingStart, HiddenStart, PerformanceScored,
                                                     ProfileStart, Profiled, Restart, LocatingFault, CompilerNotes,
                                                     WorkerError, Done)}
#: Wire keys that differ from the attribute's name (the case-start event names its case ``name``).
_WIRE_KEYS = {"case": "name"}
_RESULT_TYPES = {CaseDone: case_from_dict, Timed: case_from_dict,
                 PerformanceScored: lambda d: Performance(**d), Profiled: lambda d: Profile(**d)}


def encode(event: Event) -> str:
    """``event`` as one line of JSON (no newline): ``{"event": name, "t": ..., fields...}``."""
    body: dict[str, Any] = {"event": event.name}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        if dataclasses.is_dataclass(value):
            value = dataclasses.asdict(value)
        body[_WIRE_KEYS.get(f.name, f.name)] = value
    return json.dumps(body)


def decode(line: str | bytes) -> Event | None:
    """The event on one line a worker wrote, every string in it made safe and capped; None for a
    line that is not a well-formed event (not JSON, an unknown name, a field missing or malformed)."""
    try:
        raw = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("event"), str) or raw["event"] not in EVENTS:
        return None
    cls = EVENTS[raw["event"]]
    raw = _capped(raw)
    t = raw.get("t")
    kwargs: dict[str, Any] = {"t": float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None}
    try:
        for f in dataclasses.fields(cls):
            if f.name == "t":
                continue
            value = raw[_WIRE_KEYS.get(f.name, f.name)]
            if f.name == "result":
                if not isinstance(value, dict):
                    return None
                value = _RESULT_TYPES[cls](value)
            elif f.name == "info":
                if not isinstance(value, dict):
                    return None
                value = {str(k): v if isinstance(v, str) else str(v) for k, v in value.items()}
            elif not isinstance(value, str):
                return None
            kwargs[f.name] = value
        return cls(**kwargs)
    except (KeyError, TypeError, ValueError):
        return None


def _capped(value):
    """``value`` with every string in it made safe and capped at a part message's size
    (:func:`grader.results.clean_part_message`): text from a worker may carry the student's
    (device printf, compiler output) and must not reach a terminal or report unchecked."""
    if isinstance(value, str):
        return clean_part_message(value)
    if isinstance(value, dict):
        return {k: _capped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_capped(v) for v in value]
    return value


class EventWriter:
    """The worker's side: appends events to the job's event file, each flushed and synced to disk
    before :meth:`emit` returns, stamped with the wall clock."""

    def __init__(self, path: str | Path) -> None:
        self._file = open(path, "a", encoding="utf-8")

    def emit(self, event: Event) -> None:
        """Append ``event`` (its ``t`` set to now)."""
        event = dataclasses.replace(event, t=round(time.time(), 4))
        self._file.write(encode(event) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

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
