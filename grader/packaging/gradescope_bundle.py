"""``scangrade gradescope-bundle``: the autograder zip a course uploads to Gradescope.

Layout of the zip (Gradescope extracts it into ``/autograder/source``; ``setup.sh`` and
``run_autograder`` must be at its root and are stored executable)::

    setup.sh          run once when Gradescope builds the image: g++, Python 3.11+, scangrade
                      installed (editable) from scangrade/ into /autograder/scangrade-venv
    run_autograder    run for every submission: grades the part files found anywhere below
                      /autograder/submission into /autograder/results/results.json (and the full
                      result, hidden cases included, into results/scangrade.json); when scangrade
                      stops without results, writes a results.json of score 0 saying why
    config.yaml       the course's config
    private.yaml      the TA's private config (hidden sizes, their seed), when one was given: the
                      bundle is seen by course staff only
    scangrade/        grader/, reference/ (with the reference solutions, for timing on a GPU),
                      pyproject.toml, README.md

The scripts honour ``AUTOGRADER_ROOT`` (default ``/autograder``) so they can be tried outside
Gradescope; ``run_autograder`` also ``SCANGRADE_PYTHON`` (the Python that has scangrade) and
``SCANGRADE_BACKEND``. Gradescope's machines have no GPU: there scangrade grades correctness on its
CPU emulator and reports performance as not timed (see ``docs/gradescope.md``).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.packaging.bundle import course_config, script_text, stage_course
from grader.core.errors import UsageError
from grader.packaging.release import PROJECT_ROOT, check_destination, release_files, write_zip

#: The bundle's scripts, stored executable (mode 0755) in the zip.
SCRIPTS = ("setup.sh", "run_autograder")


@dataclass(frozen=True)
class Bundle:
    """A Gradescope bundle that was written.

    Attributes:
        archive: the zip.
        files: its entries (POSIX paths), sorted.
        private: whether a private config is inside.
    """

    archive: Path
    files: tuple[str, ...]
    private: bool

    def describe(self) -> str:
        """What was written, for the terminal (several lines)."""
        return (f"Gradescope autograder: {self.archive} ({len(self.files)} files"
                f"{', with the private config' if self.private else ''})\n"
                "upload it as the programming assignment's autograder (zip); it holds the reference solutions"
                + (" and the private config" if self.private else "") + ": keep it to course staff\n")


def script(name: str) -> str:
    """The text of one of the bundle's scripts (:data:`SCRIPTS`), placeholders filled in.

    Raises:
        KeyError: ``name`` is not one of the scripts.
    """
    if name not in SCRIPTS:
        raise KeyError(name)
    return script_text("gradescope_files", name)


def build_bundle(out: Path, *, config: Path, private_config: Path | None = None, force: bool = False,
                 source_root: Path = PROJECT_ROOT) -> Bundle:
    """Write the Gradescope autograder zip.

    Args:
        out: the zip to write (its name should end in ``.zip``); not existing unless ``force``.
        config: the course's configuration, stored as ``config.yaml``.
        private_config: a private configuration, stored as ``private.yaml`` and used by
            ``run_autograder`` for every submission.
        force: replace an existing ``out``.
        source_root: the scangrade checkout whose ``grader/``, ``reference/`` (solutions included),
            ``pyproject.toml`` and ``README.md`` go into ``scangrade/``.

    Returns:
        The :class:`Bundle` written.

    Raises:
        UsageError: ``out`` is unusable or does not end in ``.zip``, or the checkout lacks a file
            the bundle needs.
        ConfigError: ``config`` or ``private_config`` is invalid.
    """
    if out.suffix != ".zip":
        raise UsageError(f"{out}: Gradescope takes the autograder as a .zip; name the output e.g. autograder.zip")
    if out.is_dir():
        raise UsageError(f"{out}: a folder; name the zip to write, e.g. {out / 'autograder.zip'}")
    course_config(config, private_config, source_root=source_root, what="the bundle")
    check_destination(out, force=force, what="the Gradescope bundle", source_root=source_root)
    out.resolve().parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="scangrade-bundle-") as tmp:
        stage = Path(tmp)
        for name in SCRIPTS:
            (stage / name).write_text(script(name), encoding="utf-8")
        stage_course(stage, config=config, private_config=private_config, source_root=source_root)
        files = release_files(stage)
        write_zip(out, ((rel, stage / rel) for rel in files), executable=frozenset(SCRIPTS))
    return Bundle(archive=out, files=tuple(files), private=private_config is not None)
