"""Batch grading a class: every submission of a folder, a CSV gradebook, a report per student.

Layout of the input: a folder with one entry per submission — a folder (any nesting: the part
files are looked for below it) or a ``.zip`` — and optionally Gradescope's export metadata
(``submission_metadata.yml``), whose submitters' ids name the rows. Output folder::

    OUT/gradebook.csv                 one row per submission (written last, atomically)
    OUT/summary.txt                   the class summary
    OUT/batch.json                    what was graded (config fingerprint, shard, students), written
                                      after the gradebook: its presence means the run finished
    OUT/<id>/result.json              the result (scangrade.result), written atomically
    OUT/<id>/report.txt, report.md, results.json (Gradescope), junit.xml
    OUT/.work/<id>/                   the grader's copy of the part files, graded; removed at the end

Intake (:mod:`grader.submission`) copies each submission's part files, refusing links and capping
sizes; a student's id is safe as a file name, unique, and never one of the outputs above. A
submission that breaks, hangs, attacks or is refused is graded as such; the batch goes on. With
``resume``, submissions whose ``result.json`` is already there and intact are not graded again.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as _dt
import io
import json
import os
import re
import shutil
import statistics
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from grader import __version__, render
from grader.backends import Selection
from grader.config import Config
from grader.errors import UsageError
from grader.parts import PARTS
from grader.render.text import render_text
from grader.execute import not_run
from grader.results import FailureKind, PartResult, Performance, SubmissionResult, result_from_dict
from grader.runner import grade
from grader.submission import Intake, show, snapshot_folder, snapshot_zip

#: Names in the output folder that belong to the batch, never to a student's folder.
RESERVED = {"gradebook.csv", "summary.txt", "batch.json", "class_report.html", "slurm", "shards", "work"}
_LOOKED_FOR = ("one folder or .zip per submission (hidden entries skipped), or Gradescope's export "
               "(submission folders beside submission_metadata.yml)")


@dataclass(frozen=True)
class Submission:
    """One entry of a batch.

    Attributes:
        id: its gradebook row and output folder name (safe: no separators, no ``..``, no control
            characters, unique in the batch, never one of the batch's own output names).
        path: the folder of part files to grade (a folder's own, or the grader's copy of a zip's).
        notes: part key -> why that part's file is not graded (see :class:`grader.submission.Intake`).
        refused: why the whole submission is not graded ("" when it is).
        sources: part key -> where its file was (``alice/src/part1_naive.cu``, ``bob.zip:part1_naive.cu``),
            shown in the reports instead of the grader's copy.
    """

    id: str
    path: Path
    notes: dict = dataclasses.field(default_factory=dict, compare=False)
    refused: str = ""
    sources: dict = dataclasses.field(default_factory=dict, compare=False)


def _safe_id(name: str, taken: set[str]) -> str:
    """A file-name-safe, unique id (compared case-insensitively) from a folder or student name."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    sid = re.sub(r"[^A-Za-z0-9._@-]+", "_", text).strip("._-")[:80] or "submission"
    base, n = sid, 1
    while sid.lower() in taken or sid.lower() in RESERVED:
        n += 1
        sid = f"{base}_{n}"
    taken.add(sid.lower())
    return sid
def _gradescope_ids(folder: Path) -> dict[str, str]:
    """Folder name -> student id from Gradescope's ``submission_metadata.yml``, when present."""
    meta = folder / "submission_metadata.yml"
    if not meta.is_file():
        return {}
    try:
        data = yaml.safe_load(meta.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError:
        return {}
    ids = {}
    for key, info in data.items() if isinstance(data, dict) else ():
        submitters = (info or {}).get(":submitters") or (info or {}).get("submitters") or []
        if submitters and isinstance(submitters[0], dict):
            first = submitters[0]
            sid = first.get(":sid") or first.get("sid") or first.get(":email") or first.get("email")
            if sid:
                ids[str(key)] = str(sid)
    return ids


def _entries(folder: Path) -> list[Path]:
    """The entries of ``folder`` that are submissions: folders and ``.zip`` files, links to them
    included (graded as refused, never followed); hidden entries are skipped."""
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a folder of submissions (one folder or .zip per submission)")
    return [e for e in sorted(folder.iterdir()) if not e.name.startswith(".")
            and (e.is_dir() or e.suffix.lower() == ".zip")]  # is_dir() follows a link: one to a folder counts


def count_submissions(folder: Path) -> int:
    """How many submissions :func:`find_submissions` will find, without reading them.

    Raises:
        UsageError: ``folder`` is not a folder.
    """
    return len(_entries(folder))


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
    ``work/<id>`` (see :mod:`grader.submission`: links refused, sizes capped), which is graded.

    Raises:
        UsageError: ``folder`` is not a folder.
    """
    entries = _entries(folder)
    ids = _gradescope_ids(folder)
    found: list[Submission] = []
    taken: set[str] = set()
    for entry in entries:
        base = entry.name[:-4] if entry.suffix.lower() == ".zip" else entry.name
        sid = _safe_id(ids.get(entry.name, base), taken)
        dest = work / sid
        if entry.is_symlink():
            dest.mkdir(parents=True, exist_ok=True)
            intake = Intake(dest, refused=f"{show(entry.name)} is a symbolic link; it was not followed: "
                                          "links are refused as submissions")
        elif entry.is_dir():
            intake = snapshot_folder(entry, dest)
        else:
            intake = snapshot_zip(entry, dest)
        sep = ":" if entry.suffix.lower() == ".zip" else "/"
        found.append(Submission(sid, intake.path, intake.notes, intake.refused,
                                {k: f"{show(entry.name)}{sep}{rel}" for k, rel in intake.sources.items()}))
    return found


def _not_graded(sub: Submission, *, cfg: Config, selection: Selection, why: str) -> SubmissionResult:
    """The result of a submission that was not graded: every part an error saying why."""
    parts = []
    for key in (k for k in PARTS if k in cfg.parts):
        spec, pc = PARTS[key], cfg.parts[key]
        cases = not_run(cfg, key, "not run: " + why, kind=FailureKind.ERROR)
        perf = Performance(0.0, pc.timing.points, None, "not timed: " + why) if pc.timing else None
        parts.append(PartResult(key=key, number=spec.number, title=spec.title, file=spec.filename,
                                status="error", message=why, cases=cases, performance=perf))
    return SubmissionResult(submission=sub.id, backend=selection.name, backend_reason=selection.reason, device={},
                            config=cfg.path, seed=cfg.seed, block_size=cfg.block_size, parts=tuple(parts),
                            scangrade_version=__version__,
                            started_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                            elapsed_s=0.0, timing_note="not timed: the submission was not graded")


def _with_notes(result: SubmissionResult, sub: Submission) -> SubmissionResult:
    """The result with each part's file where it was in the submission, and the parts graded as
    missing whose file intake had more to say about (misnamed, a link...)."""
    parts = []
    for p in result.parts:
        note = sub.notes.get(p.key)
        if p.key in sub.sources:  # graded, or refused: where it was
            p = dataclasses.replace(p, file=sub.sources[p.key])
        if note is not None and p.status == "missing":
            p = dataclasses.replace(p, status=note.status, message=note.message,
                                    cases=tuple(dataclasses.replace(c, message="not run: " + note.message)
                                                for c in p.cases))
        parts.append(p)
    return dataclasses.replace(result, parts=tuple(parts))


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def load_intact(path: Path) -> SubmissionResult | None:
    """A saved result, or None when it is missing, cut short or not a scangrade result."""
    try:
        return result_from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_reports(result: SubmissionResult, folder: Path) -> None:
    """Every report format of one submission into ``folder``; ``result.json`` last, so its presence
    means the rest is there too."""
    folder.mkdir(parents=True, exist_ok=True)
    _write_atomic(folder / "report.txt", render_text(result) + "\n")
    _write_atomic(folder / "report.md", render.markdown(result))
    _write_atomic(folder / "results.json", json.dumps(render.gradescope(result), indent=2) + "\n")
    _write_atomic(folder / "junit.xml", render.junit_xml(result))
    _write_atomic(folder / "result.json", result.to_json() + "\n")


def gradebook_csv(rows: list[tuple[str, SubmissionResult]], part_keys: list[str]) -> str:
    """The gradebook: id, points per part, total, max, status, backend, GPU — one row per submission."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["student", *part_keys, "total", "max", "status", "backend", "gpu"])
    for sid, r in rows:
        by_key = {p.key: p for p in r.parts}
        w.writerow([sid, *(f"{by_key[k].points:g}" if k in by_key else "" for k in part_keys),
                    f"{r.points:g}", f"{r.max_points:g}", "pass" if r.passed else "fail", r.backend,
                    r.device.get("device", "")])
    return out.getvalue()


def class_summary(rows: list[tuple[str, SubmissionResult]], part_keys: list[str]) -> str:
    """Per part: mean, median and how many submissions passed every case; failures by kind."""
    lines = [f"{len(rows)} submissions"]
    for k in part_keys:
        pts = [p.points for _, r in rows for p in r.parts if p.key == k]
        if not pts:
            continue
        passed = sum(p.status == "pass" for _, r in rows for p in r.parts if p.key == k)
        top = max((p.max_points for _, r in rows for p in r.parts if p.key == k), default=0)
        lines.append(f"{k:<20} mean {statistics.mean(pts):6.2f}  median {statistics.median(pts):6.2f}  "
                     f"of {top:g}  all cases passed: {passed}/{len(pts)}")
    kinds: dict[str, int] = {}
    for _, r in rows:
        for p in r.parts:
            if p.status != "pass":
                kinds[p.status] = kinds.get(p.status, 0) + 1
    if kinds:
        lines.append("parts not passing, by status: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    return "\n".join(lines) + "\n"


def batch(folder: Path, *, out: Path, cfg: Config, selection: Selection, resume: bool = False, jobs: int = 0,
          checks: bool = True, on_done: Callable[[str, SubmissionResult, bool], None] | None = None,
          shard: tuple[int, int] | None = None) -> list[tuple[str, SubmissionResult]]:
    """Grade every submission of ``folder`` into ``out``.

    Args:
        out: the output folder (created).
        resume: skip submissions whose ``result.json`` is already written and intact.
        checks: the emulator's checks (see :func:`grader.runner.grade`); on by default.
        jobs: submissions graded at once; 0 means one per visible GPU on the pycuda backend (each
            pinned with ``CUDA_VISIBLE_DEVICES``), one per CPU core on the emulator (each emulator
            then runs one worker thread).
        on_done: called as ``(id, result, was_resumed)`` after each submission.
        shard: ``(I, K)``: grade only shard I of K (0-based), the submissions at positions I, I+K,
            I+2K, ... of the sorted list (see :mod:`grader.slurm`; ``scangrade merge`` joins shards).

    Returns:
        ``(id, result)`` per submission (of the shard), in id order; the gradebook, summary and
        ``batch.json`` manifest (config fingerprint, shard, students) are written.

    Raises:
        UsageError: ``folder`` is unusable or holds no submission (nothing is written then), or the
            shard is not 0 <= I < K.
    """
    require_submissions(folder)
    out.mkdir(parents=True, exist_ok=True)
    work = out / ".work"
    subs = find_submissions(folder, work=work)
    from grader.slurm import MANIFEST, shard_positions, write_manifest
    (out / MANIFEST).unlink(missing_ok=True)  # a run cut short must not look finished to scangrade merge
    everyone, positions = [s.id for s in subs], shard_positions(len(subs), shard)
    subs = [subs[p] for p in positions]
    gpus = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    if selection.name == "pycuda":
        if not gpus:
            from grader.backends import probe_gpu_count
            gpus = [str(i) for i in range(probe_gpu_count())] or ["0"]
        jobs = jobs or len(gpus)
    else:
        jobs = jobs or (os.cpu_count() or 1)
    if selection.name == "emulator" and jobs > 1:
        cfg = dataclasses.replace(cfg, emulator_workers=1)
    slots = list(range(jobs))
    slot_lock = threading.Lock()
    results: dict[str, SubmissionResult] = {}

    def one(sub: Submission) -> None:
        target = out / sub.id
        saved = load_intact(target / "result.json") if resume else None
        if saved is not None:
            results[sub.id] = saved
            if on_done:
                on_done(sub.id, saved, True)
            return
        with slot_lock:
            slot = slots.pop()
        try:
            env = {"CUDA_VISIBLE_DEVICES": gpus[slot % len(gpus)]} if selection.name == "pycuda" else None
            if sub.refused:
                result = _not_graded(sub, cfg=cfg, selection=selection, why=f"not graded: {sub.refused}")
            else:
                try:
                    result = _with_notes(grade(sub.path, cfg=cfg, selection=selection, checks=checks, env=env),
                                         sub)
                except Exception as exc:  # noqa: BLE001 - one submission must never stop the batch
                    result = _not_graded(sub, cfg=cfg, selection=selection,
                                         why=f"the grader failed on this submission ({type(exc).__name__}: {exc})")
        finally:
            with slot_lock:
                slots.append(slot)
        result = dataclasses.replace(result, submission=sub.id)
        write_reports(result, target)
        results[sub.id] = result
        if on_done:
            on_done(sub.id, result, False)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for f in [pool.submit(one, s) for s in subs]:
            f.result()
    rows = [(s.id, results[s.id]) for s in subs]
    keys = [k for k in PARTS if k in cfg.parts]
    _write_atomic(out / "gradebook.csv", gradebook_csv(rows, keys))
    _write_atomic(out / "summary.txt", class_summary(rows, keys))
    write_manifest(out, cfg=cfg, backend=selection.name, checks=checks, shard=shard, part_keys=keys,
                   everyone=everyone, positions=positions, submissions=folder)
    render.write_class_report(out, rows=rows)  # OUT/class_report.html, after batch.json: it shows the fingerprint
    shutil.rmtree(work, ignore_errors=True)
    return rows
