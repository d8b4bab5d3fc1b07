"""A class's submissions: the entries of a class folder, each a :class:`Submission` with a safe,
unique, stable id (:func:`submission_ids`; Gradescope's export metadata names them), read by
:func:`grader.grading.intake.snapshot`.

Users: ``scangrade batch`` (:func:`find_submissions`), its Slurm and command-line checks
(:func:`require_submissions`, :func:`count_submissions`). What one submission holds, and every
check on it, is :mod:`grader.grading.intake`'s.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, field_validator

from grader.classwork.gradebook import Person
from grader.classwork.store import RESERVED
from grader.core.errors import UsageError
from grader.grading.intake import Intake, show, snapshot
from grader.assignment.parts import PARTS
from grader.core.safe_text import one_line

_LOOKED_FOR = ("one folder or .zip per submission (hidden entries skipped), or Gradescope's export "
               "(submission folders beside submission_metadata.yml)")


@dataclass(frozen=True)
class Submission(Intake):
    """One entry of a batch: its :class:`~grader.grading.intake.Intake` (the grader's copy of its part files,
    the notes on those not graded, why the whole submission is refused if it is, and ``sources``: where
    each file was, ``alice/src/part1_naive.cu``, ``bob.zip:part1_naive.cu``), and its id.

    Attributes:
        id: its gradebook row and output folder name (safe: no separators, no ``..``, no control
            characters, unique in the batch, never one of the batch's own output names), a function of
            its own name alone wherever that is not ambiguous (:func:`submission_ids`).
        group: for a member of a group submission (Gradescope's export), the entry's name, shared by
            every member's :class:`Submission` (graded once, one gradebook row each); "" otherwise.
        name: the submission as the class folder names it, fit for a report (``alice.zip``, ``-alice``,
            ``submission_101: s1815`` for a member of Gradescope's export).
        collision: one line for the gradebook and the summary where its name reads as the same id as
            another's, or as one of the batch's own output names, or is not a safe id (the note then
            gives the id it has); "" otherwise.
        person: who it is, for the gradebook: the submitter's name and email where Gradescope's
            export gives them, and the entry of the class folder it was graded from (``alice.zip``,
            ``submission_101``) (:class:`grader.classwork.gradebook.Person`).
    """

    id: str = field(default="", kw_only=True)
    group: str = field(default="", kw_only=True)
    name: str = field(default="", kw_only=True)
    collision: str = field(default="", kw_only=True)
    person: Person = field(default=Person(), kw_only=True)


#: The hex digits of the hash of a submission's whole name that an id which needs one ends in:
#: first 10 (40 bits: a class of thousands has no accidental clash), then more where one still clashes.
_HASH_DIGITS = (10, 32, 64)
#: The longest id.
_ID_CHARS = 80


def _plain_id(name: str) -> str:
    """A name made file-name-safe: every run of characters other than ``A-Za-z0-9._@-`` one ``_``,
    no leading or trailing ``.``, ``_``, ``-``, and none of what a spreadsheet takes for the start of
    a formula (``@SUM(A1)`` reads as ``SUM_A1``), at most :data:`_ID_CHARS` characters; "submission"
    for a name with nothing left."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return re.sub(r"[^A-Za-z0-9._@-]+", "_", text).strip("._-").lstrip("@._-")[:_ID_CHARS] or "submission"


def _hashed_id(plain: str, key: str, level: int) -> str:
    """``plain`` ending in ``_`` and the first ``_HASH_DIGITS[level - 1]`` hex digits of the SHA-256 of
    ``key`` (the submission's whole name), within :data:`_ID_CHARS` characters; ``plain`` at level 0."""
    if level == 0:
        return plain
    digits = _HASH_DIGITS[min(level, len(_HASH_DIGITS)) - 1]
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:digits]
    return f"{plain[:_ID_CHARS - 1 - digits].rstrip('._-')}_{digest}"


def submission_ids(names: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Each submission's id, and a note where its name is ambiguous.

    Args:
        names: key -> name: a submission's whole name, unique in the class (its entry in the class
            folder, ``alice.zip``; for a member of Gradescope's export the entry and the submitter's
            id) -> the name its id is made from (``alice``; the submitter's id).

    Returns:
        key -> ``(id, note)``. The id is the name itself where the name is already a safe id
        (:func:`_plain_id` leaves it as it is), no other name reads as the same id (compared
        without regard to case, as some file systems do) and it is none of the batch's own output
        names (:data:`grader.classwork.store.RESERVED`); else the safe form followed by ``_`` and a
        hash of the whole name (10 hex digits, more where that still clashes). So an id depends on
        the submission's own name and never on its position among others: a folder ``-alice``
        beside ``alice`` is ``alice_<hash>`` and alice keeps ``alice``; ``Zoé`` is ``Zo_<hash of
        Zoé>`` whoever else submits. Names that read alike all get a hash (none of them is more
        ``alice`` than the others) and a note naming the others; a name that is not a safe id a note
        giving its id (``zoë-müller`` is ``zo_-m_ller_<hash>``, which says nothing of whose it is);
        the note is "" for every other.
    """
    plain = {key: _plain_id(name) for key, name in names.items()}
    level = {key: 0 if plain[key] == name and plain[key].lower() not in RESERVED else 1
             for key, name in names.items()}
    first = {key: _hashed_id(plain[key], key, level[key]) for key in names}
    while True:
        ids = {key: _hashed_id(plain[key], key, level[key]) for key in names}
        by_id: dict[str, list[str]] = {}
        for key, sid in ids.items():
            by_id.setdefault(sid.lower(), []).append(key)
        clashing = [key for sid, keys in by_id.items() if len(keys) > 1 or sid in RESERVED for key in keys]
        if not clashing:
            break
        for key in clashing:
            level[key] += 1
    alike: dict[str, list[str]] = {}
    for key in names:
        alike.setdefault(plain[key].lower(), []).append(key)
    notes = {}
    for key in names:
        others = [k for k in alike[plain[key].lower()] if k != key]
        if others:
            named = [repr(show(k)) for k in others]
            them = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
            notes[key] = (f"id collision: {show(key)!r} reads as {plain[key]!r}, as {them} "
                          f"{'does' if len(named) == 1 else 'do'}; each has an id of its own")
        elif plain[key].lower() in RESERVED:
            notes[key] = f"{show(key)!r} reads as {plain[key]!r}, a name of the batch's own output; its id has a hash"
        elif ids[key] != first[key]:
            notes[key] = (f"id collision: {show(key)!r} reads as {first[key]!r}, as another submission's id does; "
                          "each has an id of its own")
        elif plain[key] != names[key]:
            notes[key] = (f"{show(key)!r} is not a plain file name: its id is {ids[key]!r} (its safe form and a "
                          "hash of the name)")
        else:
            notes[key] = ""
    return {key: (ids[key], notes[key]) for key in names}


def submission_sha256(sub: Intake) -> str:
    """The SHA-256 (hex) of what grading a submission reads: each part's file as taken in (its
    bytes), or why it is not graded (missing, misnamed, refused), where each file was in the
    submission, and why the whole submission is refused if it is. Equal for a submission that has not
    changed (``batch --resume`` trusts a saved result only then: :func:`grader.classwork.store.load_trusted`).
    """
    h = hashlib.sha256()

    def add(*fields: str | bytes) -> None:
        for f in fields:
            data = f.encode("utf-8", "surrogateescape") if isinstance(f, str) else f
            h.update(len(data).to_bytes(8, "little") + data)
    for key, spec in PARTS.items():
        note, file = sub.notes.get(key), sub.path / spec.filename
        if note is not None:
            add(key, "not graded", note.status, note.message)
        elif file.is_file():
            add(key, "file", hashlib.sha256(file.read_bytes()).digest())
        else:
            add(key, "missing")
    for key, where in sorted(sub.sources.items()):
        add("source", key, where)
    add("refused", sub.refused)
    return h.hexdigest()


_METADATA = "submission_metadata.yml"
#: The longest submitter's name kept for the gradebook.
_NAME_CHARS = 200


class _Submitter(BaseModel):
    """One submitter of an entry of Gradescope's ``submission_metadata.yml`` (keys as Gradescope
    writes them, ``:sid``, or without the colon): the id, the email and the name."""

    model_config = ConfigDict(extra="ignore")
    sid: StrictStr | StrictInt | None = Field(None, validation_alias=AliasChoices(":sid", "sid"))
    email: StrictStr | None = Field(None, validation_alias=AliasChoices(":email", "email"))
    name: StrictStr | StrictInt | None = Field(None, validation_alias=AliasChoices(":name", "name"))

    @field_validator("sid", "email")
    @classmethod
    def _decoded(cls, v: str | int | None) -> str | None:
        if isinstance(v, str) and "\ufffd" in v:
            raise ValueError("holds bytes that are not UTF-8")
        return None if v is None or str(v).strip() == "" else str(v)

    @field_validator("name")
    @classmethod
    def _text(cls, v: str | int | None) -> str | None:
        return None if v is None or str(v).strip() == "" else one_line(str(v))[:_NAME_CHARS]  # shown, never an id

    @property
    def key(self) -> str | None:
        """The id its gradebook row is named after: ``:sid``, else ``:email``; None with neither."""
        return self.sid or self.email


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


def _metadata(folder: Path) -> dict[str, list[_Submitter] | str]:
    """Gradescope's ``submission_metadata.yml`` in ``folder``, when present: entry (folder) name ->
    its submitters that have an id (:attr:`_Submitter.key`: ``:sid``, else ``:email``; several for a
    group submission, empty when it names none), or, for an entry that is not shaped as Gradescope
    writes it, why (one line naming the file and the entry): that submission alone is then refused.
    Bytes that are not UTF-8 are read as U+FFFD; an id holding one is refused the same way (a name
    keeps it).

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
    found: dict[str, list[_Submitter] | str] = {}
    for key, info in data.items():
        try:
            entry = _Entry.model_validate(info if info is not None else {})
        except ValidationError as exc:
            found[str(key)] = (f"{_METADATA}, entry {one_line(str(key))!r}: {_problem(exc.errors()[0])} (Gradescope "
                               "writes ':submitters:' as a list of ':name:', ':sid:', ':email:'); fix the entry and "
                               "grade the class again")
            continue
        found[str(key)] = [m for m in entry.submitters if m.key]
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
    return sum(max(1, len({s.key for s in m})) if isinstance(m := meta.get(e.name), list) else 1
               for e in _entries(folder))


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
    export is one :class:`Submission` per member (each submitter's id once), in the metadata's order,
    sharing a ``group``; an entry its metadata gets wrong is refused, saying why. Ids come from
    :func:`submission_ids`: of each submission's own name, never of its position.

    Raises:
        UsageError: ``folder`` is not a folder, or its Gradescope metadata is not YAML.
    """
    entries = _entries(folder)
    meta = _metadata(folder)
    # entry, key, name, why refused, one of a group, who
    plan: list[tuple[Path, str, str, str | None, bool, Person]] = []
    for entry in entries:
        base = entry.name[:-4] if entry.suffix.lower() == ".zip" else entry.name
        info = meta.get(entry.name)
        folder_only = Person(folder=show(entry.name))
        if isinstance(info, str):  # a malformed metadata entry: this submission alone is refused
            plan.append((entry, entry.name, base, info, False, folder_only))
            continue
        members: dict[str, _Submitter] = {}
        for m in info or []:  # each id once, as first named
            members.setdefault(m.key, m)
        if not members:
            plan.append((entry, entry.name, base, None, False, folder_only))
        for m in members.values():  # Gradescope's export: the row is the submitter's id; the entry is its submission id
            plan.append((entry, f"{entry.name}: {m.key}", m.key, None, len(members) > 1,
                         Person(name=m.name or "", email=m.email or "", folder=show(entry.name))))
    ids = submission_ids({key: name for _, key, name, _, _, _ in plan})
    found: list[Submission] = []
    for entry, key, _, refused, grouped, person in plan:
        sid, note = ids[key]
        if refused is not None:
            found.append(Submission(work / sid, refused=refused, id=sid, name=show(key), collision=note, person=person))
            continue
        intake = snapshot(entry, work / sid)
        sep = ":" if entry.suffix.lower() == ".zip" else "/"
        found.append(Submission(intake.path, intake.notes, intake.refused,
                                {k: f"{show(entry.name)}{sep}{rel}" for k, rel in intake.sources.items()},
                                id=sid, group=entry.name if grouped else "", name=show(key), collision=note,
                                person=person))
    return found
