"""Batch grading a class: every submission of a folder, a CSV gradebook, the reports per student.

Layout of the input: a folder with one entry per submission — a folder (any nesting: the part
files are looked for below it) or a ``.zip`` — and optionally Gradescope's export metadata
(``submission_metadata.yml``), whose submitters' ids name the rows (see
:mod:`grader.classwork.submissions`). The output folder's layout is :mod:`grader.classwork.store`'s.

Intake copies each submission's part files, refusing links and capping sizes; a student's id is
safe as a file name, unique, never one of the batch's own output names, and made of the
submission's own name (names that read alike each get a hash, and a note in the gradebook and the
summary). A submission that breaks, hangs, attacks or is refused is graded as such; the batch goes
on. With ``resume``, submissions whose ``result.json`` is already there, intact and of the same
grading (submission, config, private config, backend, checks) are not graded again.

This module renders nothing: the caller gives the per-student report texts as a function
(``scangrade batch`` passes :func:`grader.render.formats.batch_reports`: the course staff's copies
in ``OUT/<id>/``, the student-safe set in ``OUT/<id>/student/``) and writes the class report page
after the run.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import fcntl
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

from grader import __version__
from grader.backends import Selection
from grader.classwork.gradebook import Person, class_summary, gradebook_csv
from grader.classwork.store import (FULL_DISK, MANIFEST, RESULT, check_out_folder, grading_record, load_trusted,
                                    remove_stale_tmp, shard_positions, student_folders, unwritable, write_atomic, write_manifest,
                                    write_reports)
from grader.classwork.submissions import Submission, find_submissions, require_submissions, submission_sha256
from grader.assignment.config import Config
from grader.host.resources import usable_cpus
from grader.core.errors import GradingStopped, Interrupted, UsageError
from grader.grading.case.inputs import INPUT_CACHE_ENV
from grader.assignment.parts import PARTS
from grader.core.results import PartStatus, SubmissionResult
from grader.grading.part_runner import ungraded_part
from grader.grading.runner import grade
from grader.grading.worker_process import WorkerSlot

#: ``result -> {path: text}``: a student's reports besides ``result.json``, paths relative to the
#: student's folder (``report.txt``, ``student/report.txt``...; bytes for a plot's PNG).
StudentReports = Callable[[SubmissionResult], Mapping[str, str | bytes]]


def _not_graded(sub: Submission, *, cfg: Config, selection: Selection, why: str,
                to_regrade: bool = False) -> SubmissionResult:
    """The result of a submission that was not graded: every part an error saying why, worth the
    same points possible as a graded part (:func:`grader.grading.part_runner.ungraded_part`);
    ``to_regrade``: the grader failed on it, not the submission."""
    parts = [ungraded_part(cfg, key, status=PartStatus.ERROR, message=why, to_regrade=to_regrade)
             for key in PARTS if key in cfg.parts]
    return SubmissionResult(submission=sub.id, backend=selection.name, backend_reason=selection.reason, device={},
                            config=cfg.path, seed=cfg.seed, block_size=cfg.block_size, parts=tuple(parts),
                            scangrade_version=__version__,
                            started_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                            elapsed_s=0.0, timing_note="not timed: the submission was not graded",
                            backend_times_kernels=selection.kind.times_kernels,
                            backend_uses_gpus=selection.kind.uses_gpus)


def _interrupted(out: Path, work: Path, rows: list[tuple[str, SubmissionResult]], *, total: int,
                 keys: list[str], notes: dict[str, str], people: dict[str, Person]) -> Interrupted:
    """After Ctrl-C: the gradebook and summary of the ``rows`` finished (none written when there are
    none), never the manifest (the run did not finish, so ``scangrade merge`` refuses the folder);
    the intake copies removed. Returns the error whose one line says what was written and how to go on."""
    shutil.rmtree(work, ignore_errors=True)
    if not rows:
        return Interrupted(f"no submission was finished, nothing was written to {out}; run the same command "
                           "again to grade the class")
    write_atomic(out / "gradebook.csv", gradebook_csv(rows, keys, notes, people))
    write_atomic(out / "summary.txt", class_summary(rows, keys, notes))
    return Interrupted(f"{len(rows)} of {total} submissions graded: their reports and a gradebook of them are in "
                       f"{out}; run the same command with --resume to grade the other {total - len(rows)}")


#: The start of the name of a batch's folder of shared inputs in the temporary folder.
INPUTS_PREFIX = "scangrade-inputs-"
#: The file in that folder its batch holds locked (``flock``) while it lives.
INPUTS_LOCK = ".alive"


def _inputs_folder() -> tuple[Path, int]:
    """A new folder for the class's shared inputs (on a GPU: GiBs, drawn once for the class, as no
    student code runs on the host there: :func:`grader.grading.case.inputs.shared_input`) and the
    descriptor of its lock (:data:`INPUTS_LOCK`, held until the batch closes it), after removing the
    folders of batches that died without removing theirs (killed outright: their lock is free), so
    that batches killed again and again do not fill the temporary folder's disk. A lock, not a pid:
    it holds across containers that share the folder, and a reused pid cannot keep a dead batch's
    folder."""
    for old in Path(tempfile.gettempdir()).glob(f"{INPUTS_PREFIX}*"):
        try:
            fd = os.open(old / INPUTS_LOCK, os.O_RDONLY)
        except OSError:
            continue  # not a batch's, or another user's
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its batch lives
        finally:
            os.close(fd)
        shutil.rmtree(old, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(prefix=INPUTS_PREFIX))
    fd = os.open(folder / INPUTS_LOCK, os.O_RDONLY | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return folder, fd


#: The most submissions a batch grades at once per GPU by default (one per core up to this): each
#: holds a CUDA context, and beyond this the queue for the timed windows (one at a time on a GPU)
#: grows without more throughput (measured: docs/throughput.md, "Figures behind the code's constants").
GPU_JOBS_PER_GPU = 16


def check_jobs(jobs: int | None) -> None:
    """Refuse ``jobs`` below 1 (None is automatic: one per GPU, or one per core on the emulator).

    Raises:
        UsageError: one line saying what to pass instead.
    """
    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs {jobs}: grade at least 1 submission at once, or leave --jobs out for one per "
                         "GPU (one per core on the emulator)")


def _gpus_and_jobs(selection: Selection, jobs: int | None) -> tuple[list[str], int]:
    """The GPUs a batch spreads its jobs over (``CUDA_VISIBLE_DEVICES``'s, else every GPU probed; none
    off the GPU) and the submissions graded at once: ``jobs``, else as :func:`batch` says."""
    gpus = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    if selection.kind.uses_gpus:
        if not gpus:
            from grader.backends import probe_gpu_count
            gpus = [str(i) for i in range(probe_gpu_count())] or ["0"]
        return gpus, jobs or max(len(gpus), min(GPU_JOBS_PER_GPU * len(gpus), usable_cpus()))
    return gpus, jobs or usable_cpus()


class _Grading:
    """A batch's grading of its submissions, one :meth:`one` per submission on a pool of ``jobs``
    threads: the state they share (each job's slot, a GPU of ``gpus`` round robin; a group's result;
    the results and why a saved one was graded again) and the Ctrl-C flag (:attr:`stop`)."""

    def __init__(self, *, out: Path, cfg: Config, selection: Selection, checks: bool, resume: bool,
                 reports: StudentReports, on_done: Callable[[str, SubmissionResult, bool], None] | None,
                 on_note: Callable[[str, str], None] | None, gpus: list[str], inputs: Path | None, jobs: int,
                 total: int, on_event: Callable[[str, str, object], None] | None = None) -> None:
        self.out, self.cfg, self.selection, self.checks, self.resume = out, cfg, selection, checks, resume
        self.reports, self.on_done, self.on_note, self.gpus, self.inputs = reports, on_done, on_note, gpus, inputs
        self.on_event = on_event
        self.total = total
        self.slots = list(range(jobs))
        self.workers = {slot: WorkerSlot() for slot in self.slots}  # the worker each job keeps waiting
        self.slot_lock = threading.Lock()
        self.results: dict[str, SubmissionResult] = {}
        self.regraded: dict[str, str] = {}  # id -> why its saved result was not trusted
        self.stop = threading.Event()  # set on Ctrl-C: running gradings end their workers and stop
        self.groups: dict[str, tuple[threading.Lock, list[SubmissionResult]]] = {}  # a group's lock, and its result

    def graded(self, sub: Submission) -> SubmissionResult:
        """``sub`` graded in a free slot (its GPU); a refused submission, or one the grader failed on,
        as a result saying why it was not graded. Raises GradingStopped after Ctrl-C."""
        with self.slot_lock:
            slot = self.slots.pop()
        try:
            return self._graded_in(sub, slot)
        finally:
            with self.slot_lock:
                self.slots.append(slot)

    def _graded_in(self, sub: Submission, slot: int) -> SubmissionResult:
        cfg, selection = self.cfg, self.selection
        env = ({"CUDA_VISIBLE_DEVICES": self.gpus[slot % len(self.gpus)], INPUT_CACHE_ENV: str(self.inputs)}
               if selection.kind.uses_gpus else None)
        if sub.refused:
            return _not_graded(sub, cfg=cfg, selection=selection, why=f"not graded: {sub.refused}")
        try:
            told = self.on_event
            return grade(sub, cfg=cfg, selection=selection, checks=self.checks, env=env, stop=self.stop, part_jobs=1,
                         worker=self.workers[slot],
                         on_event=(lambda kind, ev: told(sub.id, kind, ev)) if told else None)
        except GradingStopped:
            raise
        except Exception as exc:  # noqa: BLE001 - one submission must never stop the batch
            return _not_graded(sub, cfg=cfg, selection=selection, to_regrade=True,
                               why=f"the grader failed on this submission ({type(exc).__name__}: {exc})")

    def _group_graded(self, sub: Submission) -> SubmissionResult:
        """A group submission is graded once; every member gets its result."""
        with self.slot_lock:
            lock, done = self.groups.setdefault(sub.group, (threading.Lock(), []))
        with lock:
            if not done:
                done.append(self.graded(sub))
        return done[0]

    def one(self, sub: Submission) -> None:
        """Grade ``sub`` (or, with ``resume``, take its saved result where it is of this grading) and
        write its reports into ``out/<id>/``."""
        target = self.out / sub.id
        record = grading_record(submission=sub.name, submission_sha256=submission_sha256(sub), cfg=self.cfg,
                                backend=self.selection.name, checks=self.checks)
        saved, why = load_trusted(target / RESULT, record) if self.resume else (None, "")
        if saved is not None:
            self.results[sub.id] = saved
            if self.on_done:
                self.on_done(sub.id, saved, True)
            return
        if why:  # a saved result there, not of this grading: graded again, and said
            self.regraded[sub.id] = why
            if self.on_note:
                self.on_note(sub.id, f"graded again: {why}")
        result = self._group_graded(sub) if sub.group else self.graded(sub)
        result = dataclasses.replace(result, submission=sub.id)
        files = self.reports(result)
        try:
            write_reports(result, target, files, record)
        except OSError as exc:  # a full disk: the batch stops, saying what to free (--resume goes on)
            each = sum(len(t.encode() if isinstance(t, str) else t) for t in files.values()) + len(result.to_json())
            raise unwritable(exc, self.out, left=self.total - len(self.results), each=each) from None
        self.results[sub.id] = result
        if self.on_done:
            self.on_done(sub.id, result, False)


def _intake(folder: Path, *, out: Path, work: Path) -> list[Submission]:
    """The submissions of ``folder``, their part files copied under ``work``
    (:func:`grader.classwork.submissions.find_submissions`).

    Raises:
        UsageError: the copies did not fit under ``out`` (a full disk:
            :func:`grader.classwork.store.unwritable`, one line saying what to free).
    """
    try:
        return find_submissions(folder, work=work)
    except OSError as exc:  # the intake copies did not fit under --out
        if exc.errno not in FULL_DISK:
            raise
        sizes = [f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink()]
        raise unwritable(exc, out, left=len(list(folder.iterdir())), each=sum(sizes) // max(1, len(sizes))) from None


def _grade_all(run: _Grading, subs: list[Submission], *, jobs: int, work: Path, notes: dict[str, str],
               people: dict[str, Person], inputs_lock: int | None) -> None:
    """Grade ``subs`` with ``run`` on a pool of ``jobs`` threads; then, however it ends, end the jobs'
    workers and remove ``run.inputs`` (closing ``inputs_lock``, its lock's descriptor).

    Raises:
        Interrupted: Ctrl-C: nothing more is started, the running gradings are stopped, and what
            :func:`_interrupted` writes of the submissions finished is written.
        UsageError, or any other error of the batch itself (a report that could not be written: a
            full disk): raised once the running gradings have stopped.
    """
    cfg, results, out, inputs = run.cfg, run.results, run.out, run.inputs
    pool = ThreadPoolExecutor(max_workers=jobs)
    futures = [pool.submit(run.one, s) for s in subs]
    try:
        for f in futures:
            f.result()
    except BaseException as exc:  # Ctrl-C, or the batch itself failed: start nothing more, end what runs
        run.stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
        # The ones it cancelled never finish (wait() would block on them for ever): wait for the rest.
        wait([f for f in futures if not f.cancelled()])
        if not isinstance(exc, KeyboardInterrupt):
            raise
        raise _interrupted(out, work, [(s.id, results[s.id]) for s in subs if s.id in results],
                           total=len(subs), keys=[k for k in PARTS if k in cfg.parts], notes=notes,
                           people=people) from None
    finally:
        pool.shutdown(wait=True)
        for worker in run.workers.values():
            worker.close()
        if inputs is not None:
            shutil.rmtree(inputs, ignore_errors=True)
            os.close(inputs_lock)


def _write_class_files(out: Path, rows: list[tuple[str, SubmissionResult]], *, cfg: Config, backend: str,
                       checks: bool, shard: tuple[int, int] | None, everyone: list[str], positions: list[int],
                       submissions: Path, names: dict[str, str], notes: dict[str, str], people: dict[str, Person],
                       regraded: dict[str, str]) -> None:
    """Write the finished run's ``gradebook.csv``, ``summary.txt`` (with a line per result graded
    again on ``--resume``, and one naming the student folders of ``out`` not in ``names``) and,
    last, the ``batch.json`` manifest (:func:`grader.classwork.store.write_manifest`).

    Raises:
        UsageError: ``out`` cannot take a file (a full disk: :func:`grader.classwork.store.unwritable`).
    """
    keys = [k for k in PARTS if k in cfg.parts]
    book = gradebook_csv(rows, keys, notes, people)
    try:
        remove_stale_tmp(out)  # a killed run's half-written gradebook or summary
        write_atomic(out / "gradebook.csv", book)
        stale = [f.name for f in student_folders(out) if f.name not in names]
        write_atomic(out / "summary.txt", class_summary(rows, keys, notes) + "".join(
            f"graded again on --resume: {sid}: {why}\n" for sid, why in regraded.items()) + (
            f"folders of an earlier run, not in this gradebook (kept; not a submission of this run, or one whose id "
            f"changed): {', '.join(stale)}\n" if stale else ""))
        write_manifest(out, cfg=cfg, backend=backend, checks=checks, shard=shard, part_keys=keys,
                       everyone=everyone, positions=positions, submissions=submissions, names=names, notes=notes,
                       people=people)
    except OSError as exc:
        raise unwritable(exc, out, left=0, each=len(book.encode())) from None


def batch(folder: Path, *, out: Path, cfg: Config, selection: Selection, resume: bool = False, jobs: int | None = None,
          checks: bool = True, on_done: Callable[[str, SubmissionResult, bool], None] | None = None,
          on_note: Callable[[str, str], None] | None = None, shard: tuple[int, int] | None = None,
          reports: StudentReports,
          on_event: Callable[[str, str, object], None] | None = None) -> list[tuple[str, SubmissionResult]]:
    """Grade every submission of ``folder`` into ``out``.

    Args:
        out: the output folder (created).
        reports: the texts of a student's reports besides ``result.json``, written into ``out/<id>/``
            (paths relative to it) before it (:func:`grader.render.formats.batch_reports` writes
            every format).
        resume: skip submissions whose ``result.json`` is already written, intact, and of the same
            grading: the same submission (its name and the hash of its part files), config and
            private config (their fingerprint), backend and checks
            (:func:`grader.classwork.store.load_trusted`); any other is graded again, and said
            (``on_note``, and a line of ``summary.txt``).
        checks: the emulator's checks (see :func:`grader.grading.runner.grade`); on by default.
        jobs: submissions graded at once (1 or more); None means, on the pycuda backend, one per CPU
            core (at least one per visible GPU, at most :data:`GPU_JOBS_PER_GPU` per GPU; each pinned
            to a GPU with ``CUDA_VISIBLE_DEVICES``, round robin), so that the emulator's checks,
            compiles and host work of some overlap another's timed runs, which still have the GPU
            alone (:mod:`grader.host.gpu_lock`); one per CPU core on the emulator. The emulator's threads
            (``emulator.workers`` where the config leaves it 0) are the cores shared among the jobs.
            Each submission's parts are then graded one at a time, by a worker the job keeps from
            one submission to the next (:class:`~grader.grading.worker_process.WorkerSlot`: Python,
            the imports and a GPU's context start once a job, not once a submission; on a GPU, what
            a submission leaves there is cleared before the next, or its context dropped:
            :func:`grader.backends.pycuda.contexts.start_grading`).
        on_done: called as ``(id, result, was_resumed)`` after each submission.
        on_note: called as ``(id, one line)`` for what the TA should know of a submission before it
            is graded (``graded again: its part files changed since its saved result was graded``).
        on_event: called as ``(id, name, event)`` for each event of a submission's grading (the
            worker's, :mod:`grader.grading.protocol`: ``case-start``, ``case``...), from the job's
            thread, so that a progress display moves while a submission is graded.
        shard: ``(I, K)``: grade only shard I of K (0-based), the submissions at positions I, I+K,
            I+2K, ... of the sorted list (see :mod:`grader.classwork.slurm`; ``scangrade merge`` joins shards).

    Returns:
        ``(id, result)`` per submission (of the shard), in id order; the gradebook, summary and
        ``batch.json`` manifest (config fingerprint, shard, students) are written.

    Raises:
        UsageError: ``folder`` is unusable or holds no submission, ``out`` is inside it, ``jobs`` is
            below 1 (nothing is written then), or the shard is not 0 <= I < K; or ``out`` cannot take
            a file (a full disk: :func:`grader.classwork.store.unwritable`, one line saying what to
            free): no submission is started after it, every result written is whole, and ``resume``
            goes on.
        Interrupted: Ctrl-C (``KeyboardInterrupt``) while grading: no submission is started after it,
            the running ones' workers are ended (their process sessions), and the gradebook and
            summary of the submissions finished so far are written, without the manifest (the run
            did not finish); the message says what was written and that ``resume`` goes on.
    """
    check_jobs(jobs)
    check_out_folder(folder, out)
    require_submissions(folder)
    out.mkdir(parents=True, exist_ok=True)
    work = out / ".work"
    subs = _intake(folder, out=out, work=work)
    (out / MANIFEST).unlink(missing_ok=True)  # a run cut short must not look finished to scangrade merge
    everyone, positions = [s.id for s in subs], shard_positions(len(subs), shard)
    names = {s.id: s.name for s in subs}
    notes = {s.id: s.collision for s in subs if s.collision}  # of the whole class: a shard's gradebook says them too
    people = {s.id: s.person for s in subs}  # name, email, folder: the gradebook's, and the manifest's for merge
    subs = [subs[p] for p in positions]
    gpus, jobs = _gpus_and_jobs(selection, jobs)
    if jobs > 1 and not cfg.emulator.workers:  # the jobs share the cores: the emulator's threads too
        cfg = cfg.override(emulator={"workers": max(1, usable_cpus() // jobs)})
    # On a GPU, the large inputs every submission is graded on, drawn once for the class (removed at the end).
    inputs, inputs_lock = _inputs_folder() if selection.kind.uses_gpus else (None, None)
    run = _Grading(out=out, cfg=cfg, selection=selection, checks=checks, resume=resume, reports=reports,
                   on_done=on_done, on_note=on_note, gpus=gpus, inputs=inputs, jobs=jobs, total=len(subs),
                   on_event=on_event)
    _grade_all(run, subs, jobs=jobs, work=work, notes=notes, people=people, inputs_lock=inputs_lock)
    rows = [(s.id, run.results[s.id]) for s in subs]
    _write_class_files(out, rows, cfg=cfg, backend=selection.name, checks=checks, shard=shard, everyone=everyone,
                       positions=positions, submissions=folder, names=names, notes=notes, people=people,
                       regraded=run.regraded)
    shutil.rmtree(work, ignore_errors=True)
    return rows
