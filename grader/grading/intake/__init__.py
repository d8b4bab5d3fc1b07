"""Intake: one submission's part files, checked, found and read, before anything grades them.

A submission is untrusted input, as a folder or a zip. Intake never follows a symbolic link in
it, reads no part file with another hard link, none that is not a regular file (a FIFO named
``x.zip`` is opened without blocking and refused) and none over :data:`~.limits.MAX_SOURCE_BYTES`,
gives up on a submission whose reading takes more than :data:`~.limits.INTAKE_S` seconds, and
refuses a whole submission that holds more than :data:`~.limits.MAX_ENTRIES` files and folders, more
than :data:`~.limits.MAX_TOTAL_BYTES` bytes (a zip's end record and declared sizes are checked before
anything is read, and what is read is capped again), or folders nested deeper than
:data:`~.limits.MAX_DEPTH`. A part file that is absent, misnamed (``Part1_Naive.cu``,
``part1_naive.cu.txt``...) or refused becomes an :class:`Absent` carrying the message the student
sees in that part of the report.

This package sits below the runner and imports nothing above it (``tests/project/test_import_graph.py``):

- :func:`resolve_submission` (``scangrade grade`` and ``check``, the pytest plugin, through
  :func:`grader.grading.runner.grade`): the part files directly in one folder, graded in place.
- :func:`snapshot` (``scangrade batch``, through :func:`grader.classwork.submissions.find_submissions`):
  a folder's or a zip's part files, found anywhere in it, copied as plain files into a fresh folder
  of the grader's own: an :class:`Intake`, which :func:`grader.grading.runner.grade` grades as it is (its
  notes and where each file was included).
- :func:`read_source` (the worker) decodes a part file for the compiler.

Every part file is read once at intake, so that one the grader cannot read, or whose bytes are not
text (:func:`text_problem`: a binary file under a part's name), becomes an :class:`Absent` naming it
and saying what to do, instead of a worker's failure or pages of compiler errors.

The package by job: :mod:`.limits` (the caps, read from there at each check), :mod:`.records`
(:class:`Absent`, :class:`Intake`, a name fit for a report), :mod:`.part_file` (one part file checked
and read, each refusal's message), :mod:`.names` (the file a student likely meant for a missing one),
:mod:`.in_place` (a submission graded where it is), :mod:`.folder` and :mod:`.archive` (a batch's
folder or zip copied), :mod:`.batch_entry` (either, within the time allowed).
"""

from __future__ import annotations

from grader.grading.intake.archive import snapshot_zip, zip_directory
from grader.grading.intake.batch_entry import snapshot
from grader.grading.intake.folder import snapshot_folder
from grader.grading.intake.in_place import require_part_file, resolve_parts, resolve_submission
from grader.grading.intake.part_file import read_source, text_problem
from grader.grading.intake.records import Absent, Intake, show

__all__ = ["Absent", "Intake", "read_source", "require_part_file", "resolve_parts", "resolve_submission", "show",
           "snapshot", "snapshot_folder", "snapshot_zip", "text_problem", "zip_directory"]
