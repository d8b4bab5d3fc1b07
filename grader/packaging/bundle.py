"""What the course's autograder bundles share: Gradescope's zip (:mod:`grader.packaging.gradescope_bundle`)
and PrairieLearn's ``serverFilesCourse`` folder (:mod:`grader.packaging.prairielearn_bundle`).

Both carry the course's config (and private config) and a copy of scangrade with its reference
solutions (``scangrade/``), checked the same way, and scripts that take a submission in with
``scangrade grade --intake`` and share ``@FALLBACK_PY@``: the Python that writes the platform's
``results.json`` when scangrade stopped without one (``grader/autograder_files/fallback.py``;
standalone, so it runs whatever broke in scangrade), put into each script where it names it.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

from grader.assignment.config import Config, load_config, load_private
from grader.core.errors import UsageError
from grader.packaging.release import PROJECT_ROOT, copy_tree

#: What ``scangrade/`` in a bundle holds, from the checkout.
SCANGRADE_FILES = ("grader", "reference", "pyproject.toml", "README.md")


def script_text(folder: str, name: str, **values: str) -> str:
    """The text of the bundle script ``grader/<folder>/<name>``, its placeholders filled:
    ``@FALLBACK_PY@`` (module docstring) and ``@KEY@`` for each keyword (``TIME_LIMIT="600"``).

    Raises:
        FileNotFoundError: no such script.
    """
    pkg = resources.files("grader")
    text = pkg.joinpath(folder, name).read_text(encoding="utf-8")
    shared = pkg.joinpath("autograder_files")
    fills = {"FALLBACK_PY": shared.joinpath("fallback.py").read_text(encoding="utf-8").rstrip("\n"), **values}
    for key, value in fills.items():
        text = text.replace(f"@{key}@", value)
    return text


def course_config(config: Path, private_config: Path | None, *, source_root: Path, what: str) -> Config:
    """The course's config (with the private one over it) after checking that ``source_root`` is a
    scangrade checkout with the reference solutions, as a bundle needs.

    Args:
        what: the bundle, for messages (``"the bundle"``).

    Raises:
        ConfigError: a config is invalid.
        UsageError: the checkout lacks a file the bundle needs, or its reference solutions.
    """
    cfg = load_config(config)
    if private_config:
        cfg = load_private(cfg, private_config)
    for needed in SCANGRADE_FILES:
        if not (source_root / needed).exists():
            raise UsageError(f"{source_root / needed}: not found; {what} is built from a scangrade checkout")
    if not (source_root / "reference" / "solutions").is_dir():
        raise UsageError(f"{source_root / 'reference' / 'solutions'}: not found; {what} carries the reference "
                         "solutions for timing, so build it from the course's checkout, not from a student release")
    return cfg


def stage_course(stage: Path, *, config: Path, private_config: Path | None, source_root: Path = PROJECT_ROOT) -> None:
    """Copy into ``stage`` what every bundle holds: ``config.yaml``, ``private.yaml`` (when given)
    and ``scangrade/`` (:data:`SCANGRADE_FILES` of ``source_root``, without caches or build
    outputs). Call :func:`course_config` first."""
    shutil.copyfile(config, stage / "config.yaml")
    if private_config:
        shutil.copyfile(private_config, stage / "private.yaml")
    for name in SCANGRADE_FILES:
        if (source_root / name).is_dir():
            copy_tree(source_root / name, stage / "scangrade" / name)
        else:
            (stage / "scangrade").mkdir(exist_ok=True)
            shutil.copy2(source_root / name, stage / "scangrade" / name)
