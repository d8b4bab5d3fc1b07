"""``config.yaml``: the configuration the whole grader runs with; the public module callers import it from.

The job is split in two: the schema, frozen pydantic models shaped like the file
(:mod:`grader.assignment.config_schema`: :class:`ConfigFile`, :class:`Config`, :class:`PartConfig`, ...), and
reading a file into them with errors naming the file, line and key
(:mod:`grader.assignment.config_load`: :func:`load_config`, :func:`load_private`, :func:`config_text_with`).
This module imports those names so that callers keep one place to import from, and itself finds the file
to use (:func:`find_config`).

A configuration travels to a part's worker as JSON (:class:`grader.grading.protocol.Job`) and is validated
again there by the same models; a run changes it only through :meth:`Config.override`, which
validates the copy too.
"""

from __future__ import annotations

import os
from pathlib import Path

from grader.backends import CHOICES as BACKEND_CHOICES
from grader.backends import DEFAULT_TARGET_ARCH, TARGET_ARCHS
from grader.core.errors import ConfigError, UsageError
from grader.assignment.config_schema import (COMPILE_ERROR_CHOICES, DEFAULT_BLOCK_SIZE, REMOVED_FLOAT_RTOL,
                                             SANDBOX_CHOICES, CheckConfig, CompileCacheConfig, Config, ConfigFile,
                                             EmulatorConfig, Inputs, PartConfig, PrairieLearnConfig, ProfileConfig,
                                             RooflineConfig, TimingConfig, TimingMethod, Timeouts)
from grader.assignment.config_load import config_text_with, load_config, load_private

__all__ = ["BACKEND_CHOICES", "COMPILE_ERROR_CHOICES", "DEFAULT_BLOCK_SIZE", "DEFAULT_TARGET_ARCH", "PROJECT_ROOT",
           "REMOVED_FLOAT_RTOL", "SANDBOX_CHOICES", "TARGET_ARCHS", "CheckConfig", "CompileCacheConfig", "Config",
           "ConfigError", "ConfigFile", "EmulatorConfig", "Inputs", "PartConfig", "PrairieLearnConfig", "ProfileConfig",
           "RooflineConfig", "TimingConfig", "TimingMethod", "Timeouts", "config_text_with", "find_config",
           "load_config", "load_private"]


#: The checkout holding the grader: its ``config.yaml`` is the fallback of :func:`find_config`.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def find_config(option: str | os.PathLike | None, *, start: Path, flag: str = "--config") -> Path:
    """The configuration file to use: the one named on the command line, else ``start/config.yaml``,
    else the ``config.yaml`` beside the grader (``PROJECT_ROOT``).

    Args:
        option: the file given on the command line (relative to ``start``), or None.
        start: the folder the command runs from: ``Path()`` for the current one (a relative
            ``option`` then stays as the user wrote it, in reports too), pytest's invocation dir.
        flag: the option that names a file, for the message (``--config``, ``--scangrade-config``).

    Returns:
        The path (not checked to exist when ``option`` names it: :func:`load_config` says so); a
        ``config.yaml`` found is named by its absolute path.

    Raises:
        UsageError: no option and no ``config.yaml`` in either place.
    """
    if option:
        return start / option
    for candidate in (start.absolute() / "config.yaml", PROJECT_ROOT / "config.yaml"):
        if candidate.is_file():
            return candidate
    raise UsageError(f"no config.yaml in this folder or beside the grader; pass one with {flag} FILE")
