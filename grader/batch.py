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

A submission that breaks, hangs or attacks is graded as such; the batch goes on. With
``resume``, submissions whose ``result.json`` is already there and intact are not graded again.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import re
import shutil
import statistics
import threading
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from grader import render
from grader.backends import Selection
from grader.config import Config
from grader.errors import UsageError
from grader.parts import PARTS
from grader.report import render_text
from grader.results import SubmissionResult, result_from_dict
from grader.runner import grade

_PART_FILES = {p.filename for p in PARTS.values()}


@dataclass(frozen=True)
class Submission:
    """One entry of a batch: its id (a gradebook row) and the folder holding its part files."""

    id: str
    path: Path


def _safe_id(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._@-]+", "_", name).strip("._") or "submission"


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


def _unzip_parts(archive: Path, dest: Path) -> Path:
    """Extract only the part files of a zip (by base name, flattened): no path in the archive is
    ever used as a destination."""
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                name = info.filename.replace("\\", "/").rsplit("/", 1)[-1]
                if (name in _PART_FILES and not info.is_dir() and info.file_size < 1_000_000
                        and not (dest / name).exists()):
                    (dest / name).write_bytes(z.read(info))
    except (zipfile.BadZipFile, OSError):
        pass  # graded as a submission with no files
    return dest


def _part_root(folder: Path) -> Path:
    """The folder below ``folder`` that holds the most part files (the shallowest on a tie)."""
    best, best_count = folder, sum((folder / f).is_file() for f in _PART_FILES)
    for sub in sorted(p for p in folder.rglob("*") if p.is_dir() and not p.is_symlink()):
        count = sum((sub / f).is_file() for f in _PART_FILES)
        if count > best_count:
            best, best_count = sub, count
    return best


def find_submissions(folder: Path, *, work: Path) -> list[Submission]:
    """Every submission in ``folder``, sorted by id.

    Raises:
        UsageError: ``folder`` is not a folder.
    """
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a folder of submissions (one folder or .zip per submission)")
    ids = _gradescope_ids(folder)
    found, seen = [], set()
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.is_symlink():
            continue
        base = entry.stem if entry.suffix == ".zip" else entry.name
        if not (entry.is_dir() or entry.suffix == ".zip"):
            continue
        sid = _safe_id(ids.get(entry.name, base))
        while sid in seen:
            sid += "_"
        seen.add(sid)
        path = _unzip_parts(entry, work / sid) if entry.suffix == ".zip" else _part_root(entry)
        found.append(Submission(sid, path))
    return found


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
        UsageError: ``folder`` is unusable, or the shard is not 0 <= I < K.
    """
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
            result = grade(sub.path, cfg=cfg, selection=selection, checks=checks, env=env)
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
