"""The batch output folder: its layout, atomic writes, the students' results and the manifest.

Layout of a ``scangrade batch --out OUT`` folder (a merged folder has the same)::

    OUT/gradebook.csv                 one row per submission (written last but one, atomically)
    OUT/summary.txt                   the class summary
    OUT/batch.json                    the manifest: what was graded (config fingerprint, shard,
                                      students), written after the gradebook: its presence means
                                      the run finished
    OUT/class_report.html             the class report page (written by the CLI, after batch.json)
    OUT/<id>/result.json              the result (scangrade.result), written atomically, last
    OUT/<id>/report.txt, results.json (Gradescope), junit.xml, report.md, report.html
                                      the course staff's copy of each format with a file
                                      (grader.render.formats.FORMATS): every hidden case in
                                      full (report.txt, junit.xml, result.json); never hand
                                      this folder to a student
    OUT/<id>/student/                 the student-safe set, to hand to the student: report.txt,
                                      results.json, report.md, report.html (the student-facing formats' files)
                                      and each timed part's time plot, showing each hidden case by name
                                      and passed or failed only (grader.render.formats.student_reports)
    OUT/.work/<id>/                   the grader's copy of the part files, graded; removed at the end

Every file is written through :func:`write_atomic` (a temporary file beside it, then a rename), so
a reader never sees half a file. This module renders nothing: the texts of a student's reports
come from the caller (:func:`grader.render.formats.batch_reports` in ``scangrade batch``).

A class is split into K shards: shard I holds every K-th submission of the sorted list, starting
at the I-th (:func:`shard_positions`); each shard's folder has its own ``batch.json``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import errno
import hashlib
import json
import os
import re
import shutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from grader import __version__
from grader.classwork.gradebook import Person
from grader.assignment.config import Config
from grader.backends import BACKENDS
from grader.core.errors import UsageError
from grader.host.resources import size_text
from grader.core.results import SubmissionResult, result_from_dict

#: The manifest's name in every batch output folder, and its schema.
MANIFEST = "batch.json"
MANIFEST_SCHEMA, MANIFEST_VERSION = "scangrade.batch", 1
#: The class report page's name in a batch output folder.
CLASS_REPORT = "class_report.html"
#: A student's saved result in ``OUT/<id>/`` (written last of the student's files).
RESULT = "result.json"
#: The terminal report's file in ``OUT/<id>/``: a folder holding it is a student's even when its result
#: is missing (a run stopped before writing it). Its name is the text format's file in
#: :data:`grader.render.formats.FORMATS` (this layer imports no renderer; tests/project/test_table_docs.py
#: checks that the two agree).
TERMINAL_REPORT = "report.txt"
#: Names in the output folder that belong to the batch, never to a student's folder.
RESERVED = {"gradebook.csv", "summary.txt", MANIFEST, CLASS_REPORT, "slurm", "shards", "work"}
#: Config fields that do not change a grade (where the files were, how many threads the emulator
#: used, the config's own backend key — the backend that ran is recorded apart —, the compile
#: cache's bounds).
_NOT_FINGERPRINTED = {"path": True, "private_path": True, "emulator": {"workers"}, "backend": True,
                      "compile_cache": True}
_SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


# --- files ----------------------------------------------------------------------------------------

#: The suffix of :func:`write_atomic`'s temporary files (``.<name>.<pid>.<thread>.tmp``).
TMP_SUFFIX = ".tmp"


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write ``text`` (UTF-8; bytes as they are) to ``path`` through a temporary file in the same
    folder and a rename, so that ``path`` is either the old file or the whole new one; safe from
    several threads.

    Raises:
        OSError: the folder is missing or not writable, or the disk is full (the temporary file is
            removed then: a full disk leaves no half file behind).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}{TMP_SUFFIX}")
    try:
        if isinstance(text, bytes):
            tmp.write_bytes(text)
        else:
            tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def remove_stale_tmp(folder: Path, *, below: bool = False) -> None:
    """Remove the temporary files of :func:`write_atomic` in ``folder`` (and in its subfolders where
    ``below``): left by a run killed outright (SIGKILL: no cleanup ran) while it wrote, they are never
    renamed into place. The caller is the one writer of those files now."""
    for stale in (folder.rglob if below else folder.glob)(f".*{TMP_SUFFIX}"):
        stale.unlink(missing_ok=True)


#: The errors of a write that found no room: a full disk, a quota, a file size limit (``ulimit -f``).
FULL_DISK = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def unwritable(exc: OSError, out: Path, *, left: int, each: int) -> UsageError:
    """The one line that stops a batch whose output folder ``out`` cannot take a file (a full disk,
    a quota, a file size limit; ``exc``): what failed, the space free on ``out``'s disk, and what
    to free: about ``each`` bytes for each of the ``left`` submissions not written yet; then
    ``--resume`` goes on (every result is whole or absent: :func:`write_atomic`)."""
    try:
        free = shutil.disk_usage(out).free
        free = f"{size_text(free) if free >= 2**20 else 'under 1 MiB'} free there"
    except OSError:
        free = "its free space unknown"
    where = exc.filename or out
    per = f" (about {size_text(each)} per submission, {left} left)" if left and each >= 2**20 else ""
    return UsageError(f"cannot write {where} ({exc.strerror or exc}; {free}): free at least "
                      f"{size_text(max(1, left) * each * 2)} on the disk of {out}{per}, then run the same command "
                      "with --resume")



def check_out_folder(submissions: Path, out: Path) -> None:
    """Refuse an output folder inside the class folder (or the class folder itself): the next run
    would take it, and the students' copies in it, for a submission.

    Raises:
        UsageError: one line naming both folders and what to do.
    """
    inside, folder = out.resolve(), submissions.resolve()
    if inside == folder or folder in inside.parents:
        raise UsageError(f"--out {out} is inside the class folder {submissions}: its files would be graded as a "
                         "submission; choose an output folder outside it")


def read_result(data: dict) -> SubmissionResult:
    """A saved result's JSON (:meth:`~grader.core.results.SubmissionResult.to_dict`) as a result
    (:func:`~grader.core.results.result_from_dict`); one saved before it recorded its backend's traits
    (``backend_times_kernels``, ``backend_uses_gpus``) gets them from its backend's row of
    :data:`grader.backends.BACKENDS` (a backend this grader does not know keeps True).

    Raises:
        ValueError, KeyError, TypeError: as :func:`~grader.core.results.result_from_dict`.
    """
    result = result_from_dict(data)
    kind = BACKENDS.get(result.backend)
    missing = {f"backend_{trait}": getattr(kind, trait) for trait in ("times_kernels", "uses_gpus")
               if kind is not None and f"backend_{trait}" not in data}
    return dataclasses.replace(result, **missing) if missing else result


def load_intact(path: Path) -> SubmissionResult | None:
    """A saved result (:func:`read_result`), or None when it is missing, cut short or not a scangrade result."""
    try:
        return read_result(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


#: The key of a batch's ``result.json`` recording what the result is of (:func:`grading_record`).
GRADED = "batch"


def grading_record(*, submission: str, submission_sha256: str, cfg: Config, backend: str, checks: bool) -> dict:
    """What a batch's saved result is of, kept in its ``result.json`` under :data:`GRADED`, so that
    ``batch --resume`` trusts it only for the same grading (:func:`load_trusted`).

    Args:
        submission: the submission as the class folder names it; submission_sha256: the hash of its
            part files as taken in (:func:`grader.classwork.submissions.submission_sha256`).
        cfg: the config as loaded, public and private (its :func:`config_fingerprint`).
        backend, checks: the backend that grades, and the emulator's checks.
    """
    return {"submission": submission, "submission_sha256": submission_sha256,
            "config_sha256": config_fingerprint(cfg), "backend": backend, "checks": checks}


#: Why a saved result is not trusted, per field of :func:`grading_record` that differs.
_UNTRUSTED = {
    "submission": "its saved result is of another submission ({saved!r}; this one is {now!r})",
    "submission_sha256": "its part files changed since its saved result was graded",
    "config_sha256": "its saved result was graded under another config (public or private: sizes, hidden sizes, "
                     "seeds, points, limits...)",
    "backend": "its saved result was graded on {saved}; this run grades on {now}",
    "checks": "its saved result was graded with checks {saved}; this run with checks {now}",
}


def load_trusted(path: Path, record: Mapping[str, object]) -> tuple[SubmissionResult | None, str]:
    """A saved result that ``batch --resume`` may keep: ``(result, "")`` when ``path`` is intact and
    its :data:`GRADED` record equals ``record`` (:func:`grading_record`: the same submission, part
    files, config, private config, backend and checks); ``(None, why)`` when it is there but not to
    be trusted (cut short, of another grading, saved without a record, or one the grader failed on:
    :attr:`~grader.core.results.SubmissionResult.to_regrade`), ``why`` one line; and ``(None, "")``
    when there is none."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, ""
    except (OSError, ValueError):
        return None, "its saved result.json is cut short or unreadable"
    try:
        result = read_result(data)
    except (ValueError, KeyError, TypeError):
        return None, "its saved result.json is not a scangrade result"
    saved = data.get(GRADED)
    if not isinstance(saved, dict):
        return None, "its saved result does not record what it graded (an earlier scangrade wrote it)"
    for key, why in _UNTRUSTED.items():
        if saved.get(key) != record.get(key):
            return None, why.format(saved=saved.get(key), now=record.get(key))
    if result.to_regrade:
        return None, "the grader failed on a part of it last time (to regrade)"
    return result, ""


def write_reports(result: SubmissionResult, folder: Path, reports: Mapping[str, str | bytes],
                  record: Mapping[str, object] | None = None) -> None:
    """A student's files into ``folder`` (created): each of ``reports`` (path relative to ``folder``
    -> text, or bytes for an image, e.g. ``report.txt``, ``student/report.md``), then ``result.json`` last, so its presence
    means the rest is there too; ``record`` (:func:`grading_record`) goes into it under :data:`GRADED`.
    A temporary file of :func:`write_atomic` left in ``folder`` by an earlier run killed outright
    (SIGKILL: no cleanup ran) is removed first: one batch writes a student's folder at a time."""
    folder.mkdir(parents=True, exist_ok=True)
    remove_stale_tmp(folder, below=True)
    for name, text in reports.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / name, text)
    body = result.to_dict() | ({GRADED: dict(record)} if record is not None else {})
    write_atomic(folder / RESULT, json.dumps(body, indent=2, allow_nan=False) + "\n")


@dataclass(frozen=True)
class BatchFolder:
    """A batch output folder as read back (see :func:`load_batch`).

    Attributes:
        folder: the folder.
        rows: ``(id, result)`` per readable result, in gradebook (id) order.
        damaged: ids whose ``result.json`` is missing beside other reports, cut short, or not a
            scangrade result.
        manifest: its ``batch.json`` as a dict, or None when absent or unusable.
    """

    folder: Path
    rows: list[tuple[str, SubmissionResult]]
    damaged: list[str] = dataclasses.field(default_factory=list)
    manifest: dict | None = None


def student_folders(folder: Path) -> list[Path]:
    """The subfolders of a batch output folder that hold a student's results (``result.json``, or
    reports left without one: :data:`TERMINAL_REPORT`), sorted; ``slurm/``, ``shards/`` and hidden
    ones are not."""
    if not folder.is_dir():
        return []
    return [sub for sub in sorted(folder.iterdir())
            if not sub.name.startswith(".") and sub.is_dir() and not sub.is_symlink()
            and ((sub / RESULT).exists() or (sub / TERMINAL_REPORT).exists())]


def load_batch(folder: Path) -> BatchFolder:
    """The results of a batch output folder (or a merged one): one subfolder per student holding
    ``result.json``; subfolders that are not a student's (``slurm/``, ``shards/``) are skipped, and
    so, where the folder's manifest lists its students, are those it does not list (a folder an
    earlier run left: a submission whose id changed since, see
    :func:`grader.classwork.submissions.submission_ids`).

    Raises:
        UsageError: ``folder`` is not a folder, or holds no student's results.
    """
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a folder; pass the output folder of scangrade batch (its --out)")
    manifest = usable_manifest(folder)
    students = manifest.get("students") if manifest else None
    listed = {s.get("id") for s in students if isinstance(s, dict)} if isinstance(students, list) else None
    rows, damaged = [], []
    for sub in student_folders(folder):
        if listed is not None and sub.name not in listed:
            continue
        result = load_intact(sub / RESULT)
        if result is None:
            damaged.append(sub.name)
        else:
            rows.append((sub.name, result))
    if not rows and not damaged:
        raise UsageError(f"{folder}: no <student>/result.json in it; pass the output folder of scangrade batch "
                         "(its --out), after the batch has graded someone")
    return BatchFolder(folder, rows, damaged, manifest)


def write_class_report(folder: Path, render: Callable[[BatchFolder, str], str], *, out: Path | None = None,
                       rows: list[tuple[str, SubmissionResult]] | None = None) -> Path:
    """Write a class report page of a batch output folder.

    Args:
        folder: the batch output folder (student subfolders, ``batch.json``).
        render: ``(batch folder, link base) -> HTML``; the link base is the relative URL from the
            page to ``folder``, ending in ``/`` (``""`` when the page lies in it), for links to the
            students' reports (e.g. :func:`grader.render.class_report.class_report_page`).
        out: the page to write (default: ``folder/class_report.html``).
        rows: ``(id, result)`` per submission, as :func:`grader.classwork.batch.batch` returns them
            (default: read back with :func:`load_batch`).

    Returns:
        The page's path.

    Raises:
        UsageError: ``folder`` holds no results, ``out`` is a folder, or it cannot be written.
    """
    batch = (load_batch(folder) if rows is None else
             BatchFolder(folder, list(rows), [], usable_manifest(folder)))
    out = out or folder / CLASS_REPORT
    if out.is_dir():
        raise UsageError(f"{out} is a folder; --out takes the page's file name (e.g. {out / CLASS_REPORT})")
    rel = os.path.relpath(folder.resolve(), out.resolve().parent).replace(os.sep, "/")
    page = render(batch, "" if rel == "." else quote(rel) + "/")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(out, page)
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
    return out


# --- shards and the manifest ----------------------------------------------------------------------

def parse_shard(text: str) -> tuple[int, int]:
    """``"I/K"`` -> ``(I, K)``, 0-based: shard I of K.

    Raises:
        UsageError: not two integers with 0 <= I < K.
    """
    m = _SHARD_RE.match(text or "")
    if not m or int(m[2]) < 1 or int(m[1]) >= int(m[2]):
        raise UsageError(f"--shard must be I/K with 0 <= I < K, shards counted from 0 (e.g. 0/4); got {text!r}")
    return int(m[1]), int(m[2])


def shard_positions(total: int, shard: tuple[int, int] | None) -> list[int]:
    """Positions (0-based, in the sorted submission list of ``total``) that a shard grades.

    Shard ``(I, K)`` holds positions I, I+K, I+2K, ...; ``None`` is the whole class. The split
    depends on nothing but the list, so every task of an array job computes the same one.

    Raises:
        UsageError: a shard outside 0 <= I < K.
    """
    if shard is None:
        return list(range(total))
    index, count = shard
    if count < 1 or not 0 <= index < count:
        raise UsageError(f"shard {index}/{count}: needs 0 <= I < K")
    return list(range(index, total, count))


def config_fingerprint(cfg: Config) -> str:
    """SHA-256 (hex) of everything in a loaded config (public and private) that can change a grade:
    sizes, hidden sizes and seeds, points, dtypes, block sizes, tolerances, timeouts, timing.

    Two shards graded with equal fingerprints graded under the same rules, wherever their config
    files were. Paths, the emulator's thread count and the config's ``backend`` key are left out
    (the backend that ran is recorded on its own).
    """
    data = cfg.model_dump(mode="json", exclude=_NOT_FINGERPRINTED)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _class_hash(ids: list[str]) -> str:
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


def write_manifest(out: Path, *, cfg: Config, backend: str, checks: bool, shard: tuple[int, int] | None,
                   part_keys: list[str], everyone: list[str], positions: list[int], submissions: Path,
                   names: Mapping[str, str] | None = None, notes: Mapping[str, str] | None = None,
                   people: Mapping[str, Person] | None = None) -> Path:
    """Write ``out/batch.json``: what a batch run graded and under which rules (written last, so
    its presence means the shard finished).

    Args:
        cfg: the config as loaded (public and private).
        backend: the backend that ran (``pycuda`` or ``emulator``); checks: the emulator's checks.
        shard: ``(I, K)``, or None for a whole class.
        part_keys: the gradebook's part columns, in order.
        everyone: every submission id of the class, in gradebook order (not only this shard's).
        positions: the positions in ``everyone`` this run graded.
        submissions: the folder of submissions.
        names, notes: id -> the submission as the class folder names it, and its gradebook note
            (an id collision; :class:`grader.classwork.submissions.Submission`), recorded per student
            (``submission``, ``note``) so that ``scangrade merge`` writes the same gradebook.
        people: id -> who it is (:class:`grader.classwork.gradebook.Person`), recorded per student
            (``name``, ``email``, ``folder``) for the same reason.

    Returns:
        The manifest's path.
    """
    manifest = {
        "schema": MANIFEST_SCHEMA, "schema_version": MANIFEST_VERSION, "scangrade_version": __version__,
        "shard": {"index": shard[0], "count": shard[1]} if shard else None,
        "config_sha256": config_fingerprint(cfg), "config": str(Path(cfg.path).resolve()),
        "private_config": str(Path(cfg.private_path).resolve()) if cfg.private_path else None,
        "backend": backend, "checks": checks, "part_keys": list(part_keys),
        "submissions": str(submissions.resolve()), "class_size": len(everyone), "class_sha256": _class_hash(everyone),
        "students": [{"position": p, "id": everyone[p], "submission": (names or {}).get(everyone[p], everyone[p]),
                      "note": (notes or {}).get(everyone[p], ""),
                      **dataclasses.asdict((people or {}).get(everyone[p], Person()))} for p in positions],
        "finished_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    path = out / MANIFEST
    write_atomic(path, json.dumps(manifest, indent=2) + "\n")
    return path


def read_manifest(folder: Path) -> dict | None:
    """A folder's ``batch.json``, or None when it is not there (the shard did not finish).

    Raises:
        UsageError: the file is there but is not a scangrade batch manifest.
    """
    path = folder / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: unreadable ({exc}); grade that shard again (scangrade batch --shard ... --resume)") from None
    if not isinstance(data, dict) or data.get("schema") != MANIFEST_SCHEMA:
        raise UsageError(f"{path}: not a scangrade batch manifest")
    if data.get("schema_version") != MANIFEST_VERSION:
        raise UsageError(f"{path}: manifest version {data.get('schema_version')!r}; this scangrade ({__version__}) "
                         f"reads version {MANIFEST_VERSION}: merge with the scangrade that graded the shards")
    return data


def usable_manifest(folder: Path) -> dict | None:
    """``batch.json`` of a folder (:func:`read_manifest`), or None when absent or unusable."""
    try:
        return read_manifest(folder)
    except UsageError:
        return None
