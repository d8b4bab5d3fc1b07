"""A batch's entry taken in (:func:`snapshot`): a folder (:mod:`grader.grading.intake.folder`) or a zip
(:mod:`grader.grading.intake.archive`), read in a thread of its own within
:data:`~grader.grading.intake.limits.INTAKE_S` seconds; an entry that is a link refused."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import Callable

import grader.grading.intake.limits as limits
from grader.grading.intake.archive import snapshot_zip
from grader.grading.intake.folder import snapshot_folder
from grader.grading.intake.records import Intake, show

__all__ = ["snapshot"]


def _within_time(read_one: Callable[[Path, Path], Intake], entry: Path, dest: Path) -> Intake:
    """``read_one(entry, dest)`` within :data:`~.limits.INTAKE_S` seconds, else a refused :class:`Intake`.

    The snapshot runs in a thread of its own, into a private folder beside ``dest`` that becomes
    ``dest`` when it is done; one still running at the deadline (a file system that hangs, a file
    that blocks a read) is left behind with its folder, its submission refused, and the batch goes
    on. An exception the snapshot raises is raised here.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{dest.name}.reading-", dir=dest.parent))
    box: list = []

    def read() -> None:
        try:
            box.append(read_one(entry, scratch))
        except BaseException as exc:  # handed to the caller's thread
            box.append(exc)

    thread = threading.Thread(target=read, name=f"intake of {entry.name}", daemon=True)
    thread.start()
    thread.join(limits.INTAKE_S)
    if not box:
        return Intake(dest, refused=f"reading {show(entry.name)} took longer than {limits.INTAKE_S:g} s; "
                                    "it was not graded")
    if isinstance(box[0], BaseException):
        shutil.rmtree(scratch, ignore_errors=True)
        raise box[0]
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(scratch, dest)
    return replace(box[0], path=dest)


def snapshot(entry: Path, dest: Path) -> Intake:
    """A submission folder's or ``.zip``'s part files copied into ``dest`` (:func:`snapshot_folder`,
    :func:`snapshot_zip`), within :data:`~.limits.INTAKE_S` seconds; an entry that is a symbolic link is refused,
    never followed. ``dest`` exists afterwards. The intake's ``sources`` are relative to ``entry``.

    Raises:
        OSError: ``dest`` cannot be made.
    """
    if entry.is_symlink():
        intake = Intake(dest, refused=f"{show(entry.name)} is a symbolic link; it was not followed: "
                                      "links are refused as submissions")
    elif entry.is_dir():
        intake = _within_time(snapshot_folder, entry, dest)
    else:
        intake = _within_time(snapshot_zip, entry, dest)
    dest.mkdir(parents=True, exist_ok=True)
    return intake
