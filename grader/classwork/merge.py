"""Joining the shards of one class (``scangrade merge``) into one gradebook.

Each shard is an ordinary ``scangrade batch --shard I/K`` output folder with its own manifest
(``batch.json``, see :mod:`grader.classwork.store`). The merge checks that the shards fit together
(same scangrade, config fingerprint, backend, checks and class, no shard or student twice, every
listed result intact) and writes the gradebook and summary one batch of the whole class writes,
byte for byte, with every student's folder (hard links where the file system allows).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from grader.classwork.gradebook import Person, class_summary, gradebook_csv
from grader.classwork.store import MANIFEST, load_intact, read_manifest, write_atomic
from grader.core.errors import UsageError
from grader.core.results import SubmissionResult


class IncompleteMerge(UsageError):
    """``scangrade merge`` found shards missing or unfinished (exit status 1, not 2).

    Attributes:
        missing: one line per missing shard: its index or folder, and why.
    """

    exit_status = 1

    def __init__(self, message: str, *, missing: list[str]) -> None:
        self.missing = missing
        super().__init__(message)


@dataclass(frozen=True)
class Merged:
    """What :func:`merge` wrote.

    Attributes:
        rows: ``(id, result)`` per student, in gradebook order.
        missing: one line per missing or unfinished shard (empty unless ``allow_partial``).
        out: the merged folder.
    """

    rows: list[tuple[str, SubmissionResult]]
    missing: tuple[str, ...]
    out: Path


def _resubmit_hint(folder: Path, index: int | None) -> str:
    """How to grade a shard again: the exact sbatch line when the folder sits in a --slurm layout."""
    script = folder.parent.parent / "slurm" / "grade.sbatch"
    if index is not None and folder.parent.name == "shards" and script.is_file():
        return f"resubmit it: sbatch --array={index} {script} --resume"
    return "grade it again (scangrade batch ... --shard I/K --resume) or resubmit its array index"


def _shard_index(folder: Path) -> int | None:
    return int(folder.name) if folder.name.isdigit() else None


def _link_tree(src: Path, dest: Path) -> None:
    """Copy a student's folder, hard-linking the files where the file system allows."""
    def link_or_copy(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest, copy_function=link_or_copy)


def merge(shard_dirs: list[Path], *, out: Path, allow_partial: bool = False) -> Merged:
    """Join the shards of one class into ``out``: ``gradebook.csv``, ``summary.txt``, ``batch.json``
    and every student's folder (hard links where possible, else copies).

    The gradebook and summary are those one ``scangrade batch`` of the whole class writes, byte for
    byte. Checked first: every folder holds a finished shard (its ``batch.json``); all shards were
    graded by the same scangrade version, config fingerprint, backend and checks, from the same
    class, into the same number of shards; no shard index or student appears twice; every student's
    ``result.json`` is intact.

    Args:
        shard_dirs: the shards' output folders (``DIR/shards/0`` ...).
        out: the merged folder (created; may be the shards' parent).
        allow_partial: write a gradebook of the shards there are when some are missing (the
            summary then says which); otherwise a missing shard writes nothing.

    Raises:
        IncompleteMerge: shards missing or unfinished, and not ``allow_partial``.
        UsageError: shards that do not fit together, or a damaged shard.
    """
    if not shard_dirs:
        raise UsageError("give the shards' folders to merge (e.g. DIR/shards/*)")
    found, unfinished = _finished_shards(shard_dirs)
    first = found[0][1]
    _check_shards_fit(found)
    count = (first["shard"] or {"count": 1})["count"]
    by_index = _shards_by_index(found, count)
    missing = _missing_shards(by_index, unfinished, count)
    absent = count - len(by_index)
    if missing and not allow_partial:
        head = f"{absent} of {count} shard(s) missing or unfinished" if absent else "folders without a finished shard"
        raise IncompleteMerge(f"{head}, so no gradebook was written (--allow-partial writes one of the shards "
                              "there are):\n  " + "\n  ".join(missing), missing=missing)
    rows_at = _students_of(found, first, whole_class=not absent)

    try:
        return _write_merged(out, rows_at, shard_dirs=shard_dirs, first=first, by_index=by_index, count=count,
                             absent=absent, missing=missing)
    except OSError as exc:
        raise UsageError(f"cannot write the merged class into {out}: {exc.strerror or exc}") from None


#: The manifest fields every shard of one class shares (:func:`_check_shards_fit`).
_SHARED_FIELDS = ("scangrade_version", "config_sha256", "backend", "checks", "part_keys", "class_size", "class_sha256")


def _finished_shards(shard_dirs: list[Path]) -> tuple[list[tuple[Path, dict]], list[Path]]:
    """Split ``shard_dirs`` into the finished shards, ``(folder, its batch.json as a dict)`` in the
    order given, and the folders that are not one (absent, or no readable ``batch.json``).

    Raises:
        IncompleteMerge: not one folder holds a finished shard.
    """
    found: list[tuple[Path, dict]] = []
    unfinished: list[Path] = []
    for folder in shard_dirs:
        manifest = read_manifest(folder) if folder.is_dir() else None
        (unfinished.append(folder) if manifest is None else found.append((folder, manifest)))
    if not found:
        raise IncompleteMerge(f"none of the {len(shard_dirs)} folders holds a finished shard (no {MANIFEST}): "
                              + ", ".join(map(str, shard_dirs)), missing=[str(f) for f in shard_dirs])
    return found, unfinished


def _check_shards_fit(found: list[tuple[Path, dict]]) -> None:
    """Check that every shard's manifest agrees with the first's on :data:`_SHARED_FIELDS`.

    Raises:
        UsageError: two shards differ, naming both folders, what differs and how to grade alike.
    """
    first_dir, first = found[0]
    for field in _SHARED_FIELDS:
        for folder, m in found[1:]:
            if m.get(field) != first.get(field):
                what = {"config_sha256": "configs (public or private) differ",
                        "class_sha256": "they graded different classes (different submission folders)",
                        "class_size": "they graded different classes (different submission folders)"}.get(
                    field, f"{field} differs: {first.get(field)!r} vs {m.get(field)!r}")
                raise UsageError(f"{first_dir} and {folder} do not fit together: {what}; grade every shard with "
                                 "the same scangrade, --config, --private-config, --backend and --checks")


def _shards_by_index(found: list[tuple[Path, dict]], count: int) -> dict[int, Path]:
    """Shard index -> its folder, for shards of ``count`` (an unsharded batch is shard 0 of 1).

    Raises:
        UsageError: a shard of another count, or an index given twice.
    """
    first_dir = found[0][0]
    by_index: dict[int, Path] = {}
    for folder, m in found:
        shard = m["shard"] or {"index": 0, "count": 1}
        if shard["count"] != count:
            raise UsageError(f"{first_dir} is a shard of {count} but {folder} of {shard['count']}: "
                             "merge the shards of one run")
        if shard["index"] in by_index:
            raise UsageError(f"{by_index[shard['index']]} and {folder} are both shard {shard['index']}/{count}: "
                             "give each shard once")
        by_index[shard["index"]] = folder
    return by_index


def _missing_shards(by_index: dict[int, Path], unfinished: list[Path], count: int) -> list[str]:
    """One line per shard index of ``count`` not in ``by_index`` (the unfinished folder named as the
    index, if any, and how to grade it again), then one per other unfinished folder; empty: none."""
    missing, named = [], set()
    for index in range(count):
        if index in by_index:
            continue
        guess = next((f for f in unfinished if _shard_index(f) == index), None)
        if guess is not None:
            named.add(guess)
            why = "does not exist" if not guess.exists() else f"has no {MANIFEST}: its job failed or is still running"
            missing.append(f"shard {index}/{count} ({guess}) {why}; {_resubmit_hint(guess, index)}")
        else:
            missing.append(f"shard {index}/{count} is not among the folders given")
    for folder in unfinished:
        if folder not in named:
            why = "does not exist" if not folder.exists() else f"holds no finished shard ({MANIFEST} missing)"
            missing.append(f"{folder} {why}")
    return missing


def _students_of(found: list[tuple[Path, dict]], first: dict, *, whole_class: bool
                 ) -> list[tuple[int, str, SubmissionResult, Path, dict]]:
    """Every student the shards' manifests list, ``(position in the class, id, result, their folder,
    their manifest entry)``, sorted by position; with ``whole_class``, the positions must be the
    class's every one (``0 .. class_size - 1``).

    Raises:
        UsageError: a student or a position in two shards, a listed ``result.json`` missing or
            damaged, or (``whole_class``) positions that do not cover the class.
    """
    placed: dict[str, Path] = {}
    positions: dict[int, str] = {}
    rows_at: list[tuple[int, str, SubmissionResult, Path, dict]] = []
    for folder, m in found:
        for entry in m["students"]:
            sid, pos = entry["id"], entry["position"]
            if sid in placed:
                raise UsageError(f"student {sid!r} is in both {placed[sid]} and {folder}: "
                                 "each student must be graded in one shard only")
            if pos in positions:
                raise UsageError(f"{folder}: position {pos} of the class is {sid!r} here but {positions[pos]!r} "
                                 "in another shard: the shards split the class differently")
            placed[sid], positions[pos] = folder, sid
            result = load_intact(folder / sid / "result.json")
            if result is None:
                raise UsageError(f"{folder / sid / 'result.json'} is missing or damaged though {folder / MANIFEST} "
                                 f"lists it; {_resubmit_hint(folder, _shard_index(folder))}")
            rows_at.append((pos, sid, result, folder / sid, entry))
    rows_at.sort(key=lambda r: r[0])
    if whole_class and sorted(positions) != list(range(first["class_size"])):
        raise UsageError(f"the shards hold {len(positions)} of the class's {first['class_size']} submissions: "
                         "their manifests do not split the class as scangrade batch --shard does; grade them again")
    return rows_at


def _write_merged(out: Path, rows_at: list[tuple[int, str, SubmissionResult, Path, dict]], *, shard_dirs: list[Path],
                  first: dict, by_index: dict[int, Path], count: int, absent: int, missing: list[str]) -> Merged:
    """The files of :func:`merge`, once every check has passed."""
    out.mkdir(parents=True, exist_ok=True)
    keep = {d.resolve() for d in shard_dirs} | {(out / "slurm").resolve()}
    for _, sid, _, src, _ in rows_at:
        dest = (out / sid).resolve()
        if dest in keep or any(dest in k.parents for k in keep):
            raise UsageError(f"student {sid!r} would overwrite {dest}, which holds shards or scripts: "
                             "merge into another --out folder")
        if src.resolve() != dest:
            _link_tree(src, dest)
    rows = [(sid, result) for _, sid, result, _, _ in rows_at]
    notes = {sid: entry["note"] for _, sid, _, _, entry in rows_at if entry.get("note")}
    people = {sid: Person(**{f.name: str(entry.get(f.name) or "") for f in dataclasses.fields(Person)})
              for _, sid, _, _, entry in rows_at}  # "" for a manifest written before they were recorded
    keys = list(first["part_keys"])
    write_atomic(out / "gradebook.csv", gradebook_csv(rows, keys, notes, people))
    summary = class_summary(rows, keys, notes)
    if absent:
        summary += (f"PARTIAL: {absent} shard(s) of {count} missing, "
                    f"{first['class_size'] - len(rows)} of {first['class_size']} submissions not in this gradebook\n")
    write_atomic(out / "summary.txt", summary)
    merged = {**{k: v for k, v in first.items() if k not in ("shard", "students", "finished_at")},
              "shard": None, "students": [entry for _, _, _, _, entry in rows_at],
              "merged_from": [str(f.resolve()) for _, f in sorted(by_index.items())],
              "missing": missing, "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    write_atomic(out / MANIFEST, json.dumps(merged, indent=2) + "\n")
    return Merged(rows=rows, missing=tuple(missing), out=out)
