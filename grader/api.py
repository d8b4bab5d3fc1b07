"""One road into grading: the config, the backend, the sandbox policy and the checks, decided once.

``scangrade grade``, ``check`` and ``batch`` and the pytest plugin only forward their options here::

    from grader import api
    result = api.grade_submission("hw/alice", config="config.yaml", private_config="private.yaml")
    rows = api.grade_class("submissions", out="grades", jobs=2)

What is decided here, and nowhere else:

- **paths**: every path the caller gives (the submission, the config, the private config, a class
  folder, an output folder) is made absolute against ``start`` (default: the current folder)
  before anything runs, so the part workers, which run in a folder of their own, read the same files;
- **the config**: ``config`` or, when None, ``start/config.yaml`` or the grader's own
  (:func:`grader.assignment.config.find_config`), with ``private_config`` layered over it;
- **the backend**: ``backend``, else ``SCANGRADE_BACKEND``, else the config's key, else auto
  (:func:`grader.backends.select_backend`);
- **the sandbox policy** (:func:`grader.grading.runner.grading_sandbox`): ``official`` grading (``batch``,
  ``grade --require-sandbox``) requires bubblewrap unless the config says otherwise, and is
  refused before anything runs where it is unusable (:func:`grader.grading.runner.check_sandbox`);
- **the checks**: on by default, as in every official grade.

The keyword defaults below are the CLI's and the plugin's defaults; ``tests/entry/test_api.py`` checks
that they agree.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from grader.grading import protocol
from grader.backends import Selection, backend_kind, expected_backend, select_backend
from grader.assignment.config import Config, find_config, load_config, load_private
from grader.core.results import SubmissionResult
from grader.grading.runner import check_sandbox, grade, grading_sandbox, warm_emulator

__all__ = ["Grading", "absolute", "load", "prepare", "grade_submission", "grade_class"]

PathLike = str | os.PathLike
#: ``result -> {path: text}``: a student's reports besides ``result.json`` (as in :mod:`grader.classwork.batch`).
StudentReports = Callable[[SubmissionResult], Mapping[str, str]]


def absolute(path: PathLike, start: PathLike | None = None) -> Path:
    """``path`` made absolute against ``start`` (default: the current folder), ``~`` expanded and
    ``..`` folded, links left as they are (a report names the file as the user knows it)."""
    return Path(os.path.abspath(Path(start if start is not None else Path.cwd()) / Path(path).expanduser()))


def load(*, config: PathLike | None = None, private_config: PathLike | None = None,
         start: PathLike | None = None, flag: str = "--config") -> Config:
    """The config: ``config`` (or the one found from ``start``) with ``private_config`` over it, both
    named by their absolute paths in the result (``Config.path``, ``Config.private_path``).

    Raises:
        UsageError: no config given and none found (``flag`` names the option in the message).
        ConfigError: a file is missing or invalid (file, line and key in the message).
    """
    here = absolute(start if start is not None else ".")
    cfg = load_config(find_config(config, start=here, flag=flag))
    if private_config:
        cfg = load_private(cfg, absolute(private_config, here))
    return cfg


@dataclasses.dataclass(frozen=True)
class Grading:
    """What one grading runs under, decided once by :func:`prepare`.

    Attributes:
        cfg: the validated config, private overlay and sandbox policy applied, its paths absolute.
        selection: the backend chosen and why.
        checks: the race, bounds and barrier checks (emulator; compute-sanitizer on a GPU).
        start: the folder relative paths are taken from (absolute).
        quick_max_n: set by :meth:`quick`: ``cfg`` holds the sizes up to it only; None: every size.
        skipped: set by :meth:`quick`: per part, the cases (``n > quick_max_n``) left out and their
            points.
    """

    cfg: Config
    selection: Selection
    checks: bool
    start: Path
    quick_max_n: int | None = None
    skipped: Mapping[str, tuple[int, float]] = dataclasses.field(default_factory=dict)

    def quick(self, max_n: int | None = None) -> "Grading":
        """This grading as ``scangrade check``'s quick check: the cases up to ``max_n`` (default:
        the config's ``check.quick_max_n``) only (:func:`grader.grading.case.cases.sizes_up_to`); each result
        of :meth:`grade` says what was left out (``quick_max_n``, ``skipped_cases``,
        ``skipped_points``), and its points and max points leave those cases out."""
        from grader.grading.case.cases import case_list, sizes_up_to
        max_n = self.cfg.check.quick_max_n if max_n is None else max_n
        small = sizes_up_to(self.cfg, max_n)
        skipped = {}
        for key, pc in self.cfg.parts.items():
            left = len(case_list(self.cfg, key)) - len(case_list(small, key))
            skipped[key] = (left, left * pc.points_per_case)
        return dataclasses.replace(self, cfg=small, quick_max_n=max_n, skipped=skipped)

    def grade(self, path: PathLike, *, seed: int | None = None, parts: list[str] | None = None,
              intake: bool = False, on_event: Callable[[str, protocol.Event], None] | None = None,
              env: dict[str, str] | None = None, stop: threading.Event | None = None,
              compile_first: bool = False) -> SubmissionResult:
        """Grade one submission folder or part file (relative to :attr:`start`); see
        :func:`grader.grading.runner.grade` for the arguments (``compile_first``: run no case where a
        part does not compile) and what is raised.

        ``intake``: take the part files as ``batch`` does (:func:`grader.grading.intake.snapshot`): from
        anywhere below ``path`` (a folder or a ``.zip``), copied into a folder of the grader's own,
        a misnamed file named in the part's message; the result names ``path``. Without it, the
        part files directly in the folder ``path`` are graded in place."""
        where = absolute(path, self.start)
        if not intake:
            result = grade(where, cfg=self.cfg, selection=self.selection, seed=seed, parts=parts,
                           checks=self.checks, on_event=on_event, env=env, stop=stop, compile_first=compile_first)
        else:
            from grader.core.errors import UsageError
            from grader.grading.intake import snapshot
            if not where.exists():
                raise UsageError(f"{path}: no such file or folder; give the submission's folder or .zip")
            with tempfile.TemporaryDirectory(prefix="scangrade-intake-") as tmp:
                taken = snapshot(where, Path(tmp) / "submission")
                result = grade(taken, cfg=self.cfg, selection=self.selection, seed=seed, parts=parts,
                               checks=self.checks, on_event=on_event, env=env, stop=stop,
                               compile_first=compile_first)
            result = dataclasses.replace(result, submission=str(where))
        if self.quick_max_n is not None:
            left = [self.skipped.get(p.key, (0, 0.0)) for p in result.parts]
            result = dataclasses.replace(result, quick_max_n=self.quick_max_n, skipped_cases=sum(c for c, _ in left),
                                         skipped_points=sum(x for _, x in left))
        return result

    def grade_class(self, folder: PathLike, *, out: PathLike, resume: bool = False, jobs: int | None = None,
                    shard: tuple[int, int] | None = None,
                    on_done: Callable[[str, SubmissionResult, bool], None] | None = None,
                    on_note: Callable[[str, str], None] | None = None,
                    reports: StudentReports | None = None,
                    on_event: Callable[[str, str, protocol.Event], None] | None = None
                    ) -> list[tuple[str, SubmissionResult]]:
        """Grade every submission of a class folder into ``out`` (both relative to :attr:`start`):
        :func:`grader.classwork.batch.batch`.

        Args:
            jobs: submissions graded at once; None: one per GPU, or one per core on the emulator.
            on_done, on_note, on_event: as :func:`grader.classwork.batch.batch`'s (each graded
                submission; a saved result ``resume`` did not trust; each event of a grading, with
                the submission's id).
            reports: ``result -> {path: text}`` besides ``result.json``, paths relative to the
                student's folder (default: every format's staff copy and the student-safe set in
                ``student/``, :func:`grader.render.formats.batch_reports`).

        Returns:
            ``(id, result)`` per submission, in id order.

        Raises:
            UsageError: ``jobs`` below 1; ``out`` inside ``folder``; no submission found.
            Interrupted: Ctrl-C; the message says what was written and how to go on.
        """
        from grader.classwork.batch import batch
        from grader.render.plot import drawn_apart
        if reports is None:
            from grader.render.formats import batch_reports as reports
        with drawn_apart(reports, jobs=jobs) as drawing:  # the plots in other processes, at many jobs
            return batch(absolute(folder, self.start), out=absolute(out, self.start), cfg=self.cfg,
                         selection=self.selection, resume=resume, jobs=jobs, checks=self.checks, on_done=on_done,
                         on_note=on_note, shard=shard, reports=drawing, on_event=on_event)


def prepare(*, config: PathLike | None = None, private_config: PathLike | None = None, backend: str | None = None,
            checks: bool = True, official: bool = False, allow_unsandboxed: bool = False,
            start: PathLike | None = None, command: str = "grade", flag: str = "--config",
            sanitizer_audit: bool = False) -> Grading:
    """Decide what a grading runs under (see the module's docstring), before any child process.

    Args:
        config, private_config: files, relative to ``start``; ``config`` None: found from ``start``.
        backend: ``auto``, ``pycuda``, ``emulator`` or None (``SCANGRADE_BACKEND``, then the config).
        checks: the race, bounds and barrier checks (on by default, as in every official grade).
        official: grading for the record (``batch``, the Gradescope autograder): the emulator's
            OS sandbox is required unless the config sets ``emulator.sandbox``.
        allow_unsandboxed: ``batch --allow-unsandboxed``: the emulator may run without bubblewrap.
        start: the folder relative paths are taken from (default: the current folder).
        command, flag: the command and the config option named in messages.
        sanitizer_audit: on a GPU, also run NVIDIA compute-sanitizer on the checked cases, as an
            audit beside the emulator's checks (``--sanitizer-audit``; the config's
            ``sanitizer_audit`` turns it on too).

    Raises:
        UsageError, ConfigError: as :func:`load`; an unknown backend; the sandbox is required and
            bubblewrap is unusable here (the message says how to go on).
        BackendUnavailable: ``pycuda`` was asked for and cannot run here.
    """
    here = absolute(start if start is not None else ".")
    cfg = load(config=config, private_config=private_config, start=here, flag=flag)
    cfg = grading_sandbox(cfg, official=official, allow_unsandboxed=allow_unsandboxed)
    expected = backend_kind(expected_backend(backend, config_value=cfg.backend))
    if expected.uses_gpus and (checks or any(part.profile for part in cfg.parts.values())):
        # The checks' emulator runtime (seconds of a core) is what a GPU's parts wait for on a new
        # machine: its build starts now, while the probe makes a CUDA context.
        warm_emulator(cfg, counts_profile=expected.counts_profile)
    selection = select_backend(backend, config_value=cfg.backend)
    if sanitizer_audit:
        cfg = cfg.override(sanitizer_audit=True)
    check_sandbox(cfg, selection.name, command=command)
    return Grading(cfg=cfg, selection=selection, checks=checks, start=here)


def grade_submission(path: PathLike, *, config: PathLike | None = None, private_config: PathLike | None = None,
                     backend: str | None = None, checks: bool = True, official: bool = False,
                     seed: int | None = None, parts: list[str] | None = None, intake: bool = False,
                     on_event: Callable[[str, protocol.Event], None] | None = None,
                     start: PathLike | None = None) -> SubmissionResult:
    """Grade one submission (a folder of part files, or one part's ``.cu`` file; with ``intake``,
    a folder or ``.zip`` taken in as ``batch`` does, see :meth:`Grading.grade`).

    Returns:
        The :class:`~grader.core.results.SubmissionResult`: every problem of the submission (compile
        error, crash, hang...) is in it.

    Raises:
        As :func:`prepare` and :func:`grader.grading.runner.grade` (an unusable path, an unknown part).
    """
    return prepare(config=config, private_config=private_config, backend=backend, checks=checks,
                   official=official, start=start).grade(path, seed=seed, parts=parts, intake=intake,
                                                         on_event=on_event)


def grade_class(folder: PathLike, *, out: PathLike, config: PathLike | None = None,
                private_config: PathLike | None = None, backend: str | None = None, checks: bool = True,
                resume: bool = False, jobs: int | None = None, shard: tuple[int, int] | None = None,
                allow_unsandboxed: bool = False,
                on_done: Callable[[str, SubmissionResult, bool], None] | None = None,
                on_note: Callable[[str, str], None] | None = None,
                reports: StudentReports | None = None,
                start: PathLike | None = None) -> list[tuple[str, SubmissionResult]]:
    """Grade a class for the record (``official``: the emulator's sandbox is required unless
    ``allow_unsandboxed``); see :meth:`Grading.grade_class`.

    Raises:
        As :func:`prepare` and :meth:`Grading.grade_class`.
    """
    return prepare(config=config, private_config=private_config, backend=backend, checks=checks, official=True,
                   allow_unsandboxed=allow_unsandboxed, start=start, command="batch").grade_class(
        folder, out=out, resume=resume, jobs=jobs, shard=shard, on_done=on_done, on_note=on_note, reports=reports)
