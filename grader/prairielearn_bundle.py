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
    config.yaml    the course's config; private.yaml, the private config, when one was given
    scangrade/     grader/, reference/ (with the reference solutions, for timing on a GPU),
                   pyproject.toml, README.md: the grader run.sh runs

``serverFilesCourse`` is never shown to students, but the bundle holds the reference solutions and
the private config: keep the course repository to staff. See ``docs/prairielearn.md``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.bundle import course_config, script_text, stage_course
from grader.errors import UsageError
from grader.release import PROJECT_ROOT, check_destination, release_files, replace_with

#: The bundle's files made from templates in grader/prairielearn_files/; ENTRYPOINT is stored executable.
ENTRYPOINT = "run.sh"
TEMPLATES = (ENTRYPOINT, "Dockerfile")
#: The job timeout the bundle is built for by default (PrairieLearn's own default is 30 s, too short for the
#: default config on the emulator: docs/prairielearn.md), and PrairieLearn's largest (seconds).
DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S = 120, 600
#: Seconds of a job's timeout kept for what is not grading: starting Python, collecting the files,
#: writing results.json. ``timeouts.submission_s`` must leave them.
STARTUP_S = 10
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
    """

    folder: Path
    files: tuple[str, ...]
    private: bool
    timeout_s: int

    def describe(self) -> str:
        """What was written and what to do with it, for the terminal (several lines)."""
        options = json.dumps({"externalGradingOptions": grading_options(self.folder.name, timeout_s=self.timeout_s)},
                             indent=2)
        return (f"PrairieLearn bundle: {self.folder} ({len(self.files)} files"
                f"{', with the private config' if self.private else ''})\n"
                f"copy it to your course's serverFilesCourse/{self.folder.name}/; it holds the reference solutions"
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
            1 to 600 s); run.sh stops scangrade 5 s before it.
        force: replace an existing ``out``.
        source_root: the scangrade checkout whose ``grader/``, ``reference/`` (solutions included),
            ``pyproject.toml`` and ``README.md`` go into ``scangrade/``.

    Returns:
        The :class:`PrairieLearnBundle` written.

    Raises:
        UsageError: ``out`` is unusable, ``timeout_s`` is out of PrairieLearn's range or shorter
            than the config's ``timeouts.submission_s`` plus :data:`STARTUP_S`, or the checkout lacks
            a file the bundle needs.
        ConfigError: ``config`` or ``private_config`` is invalid.
    """
    if not 1 <= timeout_s <= MAX_TIMEOUT_S:
        raise UsageError(f"--timeout {timeout_s}: PrairieLearn's job timeout is 1 to {MAX_TIMEOUT_S} seconds")
    cfg = course_config(config, private_config, source_root=source_root, what="the bundle")
    if cfg.timeouts.submission_s + STARTUP_S > timeout_s:
        raise UsageError(f"{config}: timeouts.submission_s is {cfg.timeouts.submission_s:g} s, so a submission could "
                         f"outlast the job's timeout of {timeout_s} s (with {STARTUP_S} s to start and write "
                         f"results) and get no results; set timeouts.submission_s to {timeout_s - STARTUP_S} or less "
                         "(and timeouts.case_s, part_s to fit; docs/prairielearn.md), or pass a longer --timeout")
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
        files = release_files(staging)
        staging.chmod(0o755)
        replace_with(staging, out.resolve())
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return PrairieLearnBundle(folder=out, files=tuple(files), private=private_config is not None, timeout_s=timeout_s)
