"""Renderers of a :class:`~grader.core.results.SubmissionResult` for Gradescope, CI and people.

Pure functions of the result: nothing here reads or writes files.

- :func:`render_text` — the terminal report (plain text; the CLI colours it; student-facing,
  ``show_hidden=True`` for the course staff's copy);
- :func:`gradescope` — Gradescope's ``results.json`` as a dict (student-facing);
- :func:`prairielearn` — PrairieLearn's ``results.json`` as a dict (student-facing);
- :func:`junit_xml` — JUnit XML text for course CI (TA-facing: hidden cases in full);
- :func:`markdown` — a Markdown summary for a CI job summary or a pull-request comment
  (student-facing);
- :func:`student_html` — the student's HTML report: the terminal report's blocks with pictures of
  races, bank conflicts and wrong elements (:mod:`grader.render.pictures`), one self-contained page
  (student-facing; docs/html-report.md);
- :func:`class_report` — a class's results as one self-contained HTML page (TA-facing);
  :func:`class_report_page` renders it from a folder loaded by :mod:`grader.classwork.store`;
- :data:`grader.render.formats.FORMATS` — the one table of report formats: per format its
  renderer, its ``grade``/``check`` option, whether students read it, and its file in a student's
  folder of a batch; :func:`grader.render.formats.batch_reports` — every report of one result, as
  the files of ``OUT/<id>/`` (the course staff's) and ``OUT/<id>/student/`` (the student-safe set,
  :func:`grader.render.formats.student_reports`) (import them from their module, so that loading
  this package does not load every report at once).

Student-facing renderers render :func:`grader.render._common.student_view` of a result: a hidden
case by name and passed or failed only. ``docs/results.md`` maps each status to each format.
:func:`visible_case_details`, a visible case's failure as every report words it, is public for the
pytest plugin's failures (:mod:`grader.render._common` is this package's own).
"""

from __future__ import annotations

from grader.render._common import visible_case_details
from grader.render.class_report import class_report, class_report_page
from grader.render.gradescope import gradescope
from grader.render.junit import junit_xml
from grader.render.markdown import markdown
from grader.render.prairielearn import prairielearn
from grader.render.student_html import student_html
from grader.render.text import render_text

__all__ = ["class_report", "class_report_page", "gradescope", "junit_xml", "markdown", "prairielearn", "render_text",
           "student_html", "visible_case_details"]
