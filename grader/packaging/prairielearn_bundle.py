"""``scangrade prairielearn-bundle``: the folder a course puts in PrairieLearn's ``serverFilesCourse``.

PrairieLearn's external grader (its documentation, "External Grading") copies the folders a
question's ``info.json`` names in ``externalGradingOptions.serverFilesCourse`` to
``/grade/serverFilesCourse``, the student's files to ``/grade/student``, runs the entrypoint in the
question's Docker image, and reads ``/grade/results/results.json``. The bundle, a folder ``OUT``
copied as ``serverFilesCourse/<name>/``::

    run.sh         the entrypoint: grades the part files found below /grade/student into
                   /grade/results/results.json (render: grader/render/prairielearn.py); when
                   scangrade stops without one, or runs past the job's time limit, writes one that
                   is not gradable and says why. ``--part KEY`` grades one part (a question per
                   part), ``--root DIR`` or ``SCANGRADE_GRADE_ROOT`` moves /grade (for trying it)
    Dockerfile     the grading image: scangrade's dependencies in /opt/scangrade-venv
    config.yaml    the course's config, its timeouts fitted into the job's (:func:`fitted_timeouts`);
                   private.yaml, the private config, when one was given
    scangrade/     grader/, reference/ (with the reference solutions, for timing on a GPU),
                   pyproject.toml, README.md: the grader run.sh runs

``serverFilesCourse`` is never shown to students, but the bundle holds the reference solutions and
the private config: keep the course repository to staff. See ``docs/prairielearn.md``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from grader.packaging.bundle import course_config, script_text, stage_course
from grader.assignment.config import Timeouts, config_text_with, load_config
from grader.core.errors import UsageError
from grader.packaging.release import PROJECT_ROOT, check_destination, release_files, replace_with

#: The bundle's files made from templates in grader/prairielearn_files/; ENTRYPOINT is stored executable.
ENTRYPOINT = "run.sh"
TEMPLATES = (ENTRYPOINT, "Dockerfile")
#: The job timeout the bundle is built for by default (PrairieLearn's own default is 30 s, too short for the
#: default config on the emulator: docs/prairielearn.md), and PrairieLearn's largest (seconds).
DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S = 120, 600
#: Seconds of a job's timeout kept for what is not grading: starting Python, collecting the files,
#: writing results.json. ``timeouts.submission_s`` must leave them.
STARTUP_S = 10


def fitted_timeouts(timeouts: Timeouts, job_s: int) -> dict[str, tuple[float, float, str]]:
    """The config's timeouts that must change for a PrairieLearn job of ``job_s`` seconds, so that
    scangrade ends a slow or hanging submission itself and writes its results before PrairieLearn
    kills the job (which leaves the student no results): ``submission_s`` at most ``job_s`` less
    :data:`STARTUP_S`, ``part_s`` at most ``submission_s``, ``case_s`` at most ``part_s``; a key
    already within its bound keeps its value.

    Returns:
        key (``submission_s``) -> (the config's seconds, the seconds the bundle uses, why), for
        the keys that change only, in that order.
    """
    submission = min(timeouts.submission_s, job_s - STARTUP_S)
    part = min(timeouts.part_s, submission)
    case = min(timeouts.case_s, part)
    rules = (("submission_s", timeouts.submission_s, submission,
              f"the job's timeout of {job_s} s less {STARTUP_S} s to start and write the results"),
             ("part_s", timeouts.part_s, part, "at most timeouts.submission_s"),
             ("case_s", timeouts.case_s, case, "at most timeouts.part_s"))
    return {key: (old, new, why) for key, old, new, why in rules if new != old}
#: The image the Dockerfile is meant to be pushed as, in the printed ``info.json`` (a placeholder).
IMAGE_PLACEHOLDER = "ORG/scangrade-grader:TAG"


def grading_options(name: str, *, timeout_s: int, parts: tuple[str, ...] = ()) -> dict:
    """The ``externalGradingOptions`` of a question's ``info.json`` for a bundle copied as
    ``serverFilesCourse/<name>/``: enabled, the image (a placeholder to replace), the bundle in
    ``serverFilesCourse``, the entrypoint (``--part`` for each of ``parts``) and the timeout."""
    entry = f"/grade/serverFilesCourse/{name}/{ENTRYPOINT}" + "".join(f" --part {p}" for p in parts)
    return {"enabled": True, "image": IMAGE_PLACEHOLDER, "serverFilesCourse": [f"{name}/"], "entrypoint": entry,
            "timeout": timeout_s}


@dataclass(frozen=True)
class PrairieLearnBundle:
    """A PrairieLearn bundle that was written.

    Attributes:
        folder: the bundle's folder.
        files: its files (POSIX paths relative to ``folder``), sorted.
        private: whether a private config is inside.
        timeout_s: the job timeout it was built for (``TIME_LIMIT`` in run.sh).
        fitted: the timeouts its ``config.yaml`` changed (:func:`fitted_timeouts`).
    """

    folder: Path
    files: tuple[str, ...]
    private: bool
    timeout_s: int
    fitted: dict[str, tuple[float, float, str]] = field(default_factory=dict)

    def describe(self) -> str:
        """What was written and what to do with it, for the terminal (several lines)."""
        options = json.dumps({"externalGradingOptions": grading_options(self.folder.name, timeout_s=self.timeout_s)},
                             indent=2)
        return (f"PrairieLearn bundle: {self.folder} ({len(self.files)} files"
                f"{', with the private config' if self.private else ''})\n"
                + "".join(f"its config.yaml: timeouts.{key} {old:g} -> {new:g} s ({why})\n"
                          for key, (old, new, why) in self.fitted.items())
                + f"copy it to your course's serverFilesCourse/{self.folder.name}/; it holds the reference solutions"
                + (" and the private config" if self.private else "") + ": keep the course repository to staff\n"
                f"build the image from it (docker build -t {IMAGE_PLACEHOLDER} {self.folder}) and push it; "
                "then, in each question's info.json (add --part KEY to the entrypoint to grade one part):\n"
                + options + "\n")


def build_prairielearn_bundle(out: Path, *, config: Path, private_config: Path | None = None,
                              timeout_s: int = DEFAULT_TIMEOUT_S, force: bool = False,
                              source_root: Path = PROJECT_ROOT) -> PrairieLearnBundle:
    """Write the PrairieLearn bundle (module docstring) into the folder ``out``.

    Args:
        out: the folder to write, outside the checkout; not existing (or empty) unless ``force``.
        config: the course's configuration, stored as ``config.yaml``.
        private_config: a private configuration, stored as ``private.yaml`` and used for every
            submission.
        timeout_s: the job timeout the questions will set (``externalGradingOptions.timeout``,
            more than :data:`STARTUP_S`, at most 600 s); run.sh stops scangrade 5 s before it, and
            the bundle's ``config.yaml`` has the timeouts fitted into it (:func:`fitted_timeouts`;
            each changed line says so in a comment).
        force: replace an existing ``out``.
        source_root: the scangrade checkout whose ``grader/``, ``reference/`` (solutions included),
            ``pyproject.toml`` and ``README.md`` go into ``scangrade/``.

    Returns:
        The :class:`PrairieLearnBundle` written.

    Raises:
        UsageError: ``out`` is unusable, ``timeout_s`` is above PrairieLearn's 600 s or leaves
            no time to grade, or the checkout lacks a file the bundle needs.
        ConfigError: ``config`` or ``private_config`` is invalid.
    """
    if not STARTUP_S < timeout_s <= MAX_TIMEOUT_S:
        raise UsageError(f"--timeout {timeout_s}: PrairieLearn's job timeout is at most {MAX_TIMEOUT_S} s, and the "
                         f"bundle needs more than {STARTUP_S} s of it to start and write the results; pass a --timeout "
                         f"from {STARTUP_S + 1} to {MAX_TIMEOUT_S} (default {DEFAULT_TIMEOUT_S}, which grades the "
                         "shipped config: docs/prairielearn.md)")
    cfg = course_config(config, private_config, source_root=source_root, what="the bundle")
    fitted = fitted_timeouts(cfg.timeouts, timeout_s)
    check_destination(out, force=force, what="the PrairieLearn bundle", source_root=source_root)
    parent = out.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
    try:
        for name in TEMPLATES:
            (staging / name).write_text(script_text("prairielearn_files", name, TIME_LIMIT=str(timeout_s)),
                                        encoding="utf-8")
        (staging / ENTRYPOINT).chmod(0o755)
        stage_course(staging, config=config, private_config=private_config, source_root=source_root)
        if fitted:
            keys = {("timeouts", key): value for key, (_, value, _) in fitted.items()}
            notes = {("timeouts", key): f"prairielearn-bundle --timeout {timeout_s}: {why} (the course's config: "
                                        f"{old:g})" for key, (old, _, why) in fitted.items()}
            (staging / "config.yaml").write_text(config_text_with(config, keys, notes), encoding="utf-8")
            load_config(staging / "config.yaml")  # still valid, as the course's was
        files = release_files(staging)
        staging.chmod(0o755)
        replace_with(staging, out.resolve())
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return PrairieLearnBundle(folder=out, files=tuple(files), private=private_config is not None, timeout_s=timeout_s,
                              fitted=fitted)
