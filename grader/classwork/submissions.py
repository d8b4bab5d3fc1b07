"""A class's submissions: the entries of a class folder, each a :class:`Submission` with a safe,
unique id (Gradescope's export metadata names them), read by :func:`grader.intake.snapshot`.

Users: ``scangrade batch`` (:func:`find_submissions`), its Slurm and command-line checks
(:func:`require_submissions`, :func:`count_submissions`). What one submission holds, and every
check on it, is :mod:`grader.intake`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, field_validator

from grader.classwork.store import RESERVED
from grader.errors import UsageError
from grader.intake import Intake, show, snapshot
from grader.safe_text import one_line

_LOOKED_FOR = ("one folder or .zip per submission (hidden entries skipped), or Gradescope's export "
               "(submission folders beside submission_metadata.yml)")


@dataclass(frozen=True)
class Submission(Intake):
    """One entry of a batch: its :class:`~grader.intake.Intake` (the grader's copy of its part files,
    the notes on those not graded, why the whole submission is refused if it is, and ``sources``: where
    each file was, ``alice/src/part1_naive.cu``, ``bob.zip:part1_naive.cu``), and its id.

    Attributes:
        id: its gradebook row and output folder name (safe: no separators, no ``..``, no control
            characters, unique in the batch, never one of the batch's own output names).
        group: for a member of a group submission (Gradescope's export), the entry's name, shared by
            every member's :class:`Submission` (graded once, one gradebook row each); "" otherwise.
    """

    id: str = field(default="", kw_only=True)
    group: str = field(default="", kw_only=True)


def _safe_id(name: str, taken: set[str]) -> str:
    """A file-name-safe, unique id (compared case-insensitively) from a folder or student name, that
    never begins with what a spreadsheet takes for a formula (``@SUM(A1)`` becomes ``SUM_A1``)."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    sid = re.sub(r"[^A-Za-z0-9._@-]+", "_", text).strip("._-").lstrip("@._-")[:80] or "submission"
    base, n = sid, 1
    while sid.lower() in taken or sid.lower() in RESERVED:
        n += 1
        sid = f"{base}_{n}"
    taken.add(sid.lower())
    return sid


_METADATA = "submission_metadata.yml"


class _Submitter(BaseModel):
    """One submitter of an entry of Gradescope's ``submission_metadata.yml`` (keys as Gradescope
    writes them, ``:sid``, or without the colon); only the id and email are read."""

    model_config = ConfigDict(extra="ignore")
    sid: StrictStr | StrictInt | None = Field(None, validation_alias=AliasChoices(":sid", "sid"))
    email: StrictStr | None = Field(None, validation_alias=AliasChoices(":email", "email"))

    @field_validator("sid", "email")
    @classmethod
    def _decoded(cls, v: str | int | None) -> str | None:
        if isinstance(v, str) and "\ufffd" in v:
            raise ValueError("holds bytes that are not UTF-8")
        return None if v is None or str(v).strip() == "" else str(v)


class _Entry(BaseModel):
    """One entry of ``submission_metadata.yml``: a submission folder's submitters (a group has several)."""

    model_config = ConfigDict(extra="ignore")
    submitters: list[_Submitter] = Field(default_factory=list,
                                         validation_alias=AliasChoices(":submitters", "submitters"))


def _yaml_kind(value: object) -> str:
    """What a YAML value is, in YAML's words (``a list``, ``a mapping``, ``a number``...)."""
    if isinstance(value, bool):
        return "true/false"
    return {dict: "a mapping", list: "a list", int: "a number", float: "a number", str: "text",
            type(None): "empty"}.get(type(value), type(value).__name__)


def _problem(err: dict) -> str:
    """One pydantic error of a metadata entry as ``WHERE must be WHAT, not WHAT IT IS``."""
    loc = [str(x) for x in err["loc"] if x not in ("str", "int")]  # a union's member names
    where = ".".join(loc) or "the entry"
    want = {"model_type": "a mapping", "dict_type": "a mapping", "list_type": "a list",
            "string_type": "text or a number", "int_type": "text or a number"}.get(err["type"])
    if want:
        return f"{where} must be {want}, not {_yaml_kind(err.get('input'))}"
    if err["type"] == "value_error":
        return f"{where} {err['ctx']['error']}"
    return f"{where}: {err['msg']}"


def _metadata(folder: Path) -> dict[str, list[str] | str]:
    """Gradescope's ``submission_metadata.yml`` in ``folder``, when present: entry (folder) name ->
    its submitters' ids (``:sid``, else ``:email``; several for a group submission, empty when it
    names none), or, for an entry that is not shaped as Gradescope writes it, why (one line naming
    the file and the entry): that submission alone is then refused. Bytes that are not UTF-8 are
    read as U+FFFD; an id holding one is refused the same way.

    Raises:
        UsageError: the file is not YAML, or not a mapping of entries (nothing is graded).
    """
    meta = folder / _METADATA
    if not meta.is_file():
        return {}
    fix = f"fix the file, or move it out of {folder} to name the rows after the folders"
    try:
        data = yaml.safe_load(meta.read_bytes().decode("utf-8", errors="replace"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{meta}{where}: not valid YAML ({getattr(exc, 'problem', None) or exc}); {fix}") from None
    except OSError as exc:
        raise UsageError(f"{meta}: cannot be read ({exc.strerror}); {fix}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{meta}: a mapping of submission folders to their submitters, not a "
                         f"{type(data).__name__}; {fix}")
    found: dict[str, list[str] | str] = {}
    for key, info in data.items():
        try:
            entry = _Entry.model_validate(info if info is not None else {})
        except ValidationError as exc:
            found[str(key)] = (f"{_METADATA}, entry {one_line(str(key))!r}: {_problem(exc.errors()[0])} (Gradescope "
                               "writes ':submitters:' as a list of ':name:', ':sid:', ':email:'); fix the entry and "
                               "grade the class again")
            continue
        found[str(key)] = [m.sid or m.email for m in entry.submitters if m.sid or m.email]
    return found


def _entries(folder: Path) -> list[Path]:
    """The entries of ``folder`` that are submissions: folders and ``.zip`` files, links to them
    included (graded as refused, never followed); hidden entries are skipped."""
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a folder of submissions (one folder or .zip per submission)")
    return [e for e in sorted(folder.iterdir()) if not e.name.startswith(".")
            and (e.is_dir() or e.suffix.lower() == ".zip")]  # is_dir() follows a link: one to a folder counts


def count_submissions(folder: Path) -> int:
    """How many submissions :func:`find_submissions` will find (a group submission counts once per
    member), without reading them.

    Raises:
        UsageError: ``folder`` is not a folder, or its Gradescope metadata is not YAML.
    """
    meta = _metadata(folder)
    return sum(max(1, len(m)) if isinstance(m := meta.get(e.name), list) else 1 for e in _entries(folder))


def require_submissions(folder: Path) -> int:
    """How many submissions ``folder`` holds, at least one.

    Raises:
        UsageError: ``folder`` is not a folder, or holds no submission (the message says what was
            looked for).
    """
    count = count_submissions(folder)
    if not count:
        raise UsageError(f"{folder}: no submissions found; looked for {_LOOKED_FOR}. Nothing was written")
    return count


def find_submissions(folder: Path, *, work: Path) -> list[Submission]:
    """Every submission in ``folder``, sorted by entry name; the part files of each are copied into
    ``work/<id>`` (links refused, sizes capped), which is graded. A group submission of Gradescope's
    export is one :class:`Submission` per member, in the metadata's order, sharing a ``group``; an
    entry its metadata gets wrong is refused, saying why.

    Raises:
        UsageError: ``folder`` is not a folder, or its Gradescope metadata is not YAML.
    """
    entries = _entries(folder)
    meta = _metadata(folder)
    found: list[Submission] = []
    taken: set[str] = set()
    for entry in entries:
        base = entry.name[:-4] if entry.suffix.lower() == ".zip" else entry.name
        info = meta.get(entry.name)
        if isinstance(info, str):  # a malformed metadata entry: this submission alone is refused
            sid = _safe_id(base, taken)
            found.append(Submission(work / sid, refused=info, id=sid))
            continue
        members = info or [base]
        for member in members:
            sid = _safe_id(member, taken)
            intake = snapshot(entry, work / sid)
            sep = ":" if entry.suffix.lower() == ".zip" else "/"
            found.append(Submission(intake.path, intake.notes, intake.refused,
                                    {k: f"{show(entry.name)}{sep}{rel}" for k, rel in intake.sources.items()},
                                    id=sid, group=entry.name if len(members) > 1 else ""))
    return found
