"""Renderers of a :class:`~grader.results.SubmissionResult` for Gradescope, CI and people.

Pure functions of the result: nothing here reads or writes files, but :func:`write_class_report`.

- :func:`render_text` — the terminal report (plain text; the CLI colours it);
- :func:`gradescope` — Gradescope's ``results.json`` as a dict (student-facing);
- :func:`junit_xml` — JUnit XML text for course CI (TA-facing: hidden cases in full);
- :func:`markdown` — a Markdown summary for a CI job summary or a pull-request comment
  (student-facing);
- :func:`class_report` — a class's results as one self-contained HTML page (TA-facing);
  :func:`write_class_report` writes it from a batch output folder (``class_report.html``).

Student-facing renderers show a hidden case by name and status only. ``docs/results.md`` maps
each status to each format.
"""

from __future__ import annotations

from grader.render.class_report import class_report, write_class_report
from grader.render.gradescope import gradescope
from grader.render.junit import junit_xml
from grader.render.markdown import markdown
from grader.render.text import render_text

__all__ = ["class_report", "gradescope", "junit_xml", "markdown", "render_text", "write_class_report"]
