"""The report formats, in one table (:data:`FORMATS`): per format its renderer, its command-line
option, whether students read it, and its file in a student's folder of a batch.

``scangrade grade`` and ``check`` offer ``--NAME FILE`` for each format with an option, and write
the file :attr:`ReportFormat.render` gives; a batch writes each format with a :attr:`ReportFormat.file`
into every student's folder (:func:`batch_reports`): the course staff's copy in ``OUT/<id>/``, and,
for a format that is :attr:`ReportFormat.student_facing`, the student's in ``OUT/<id>/student/``
(:data:`STUDENT_FOLDER`, :func:`student_reports`), the one folder of a batch to hand to a student.
Adding a format is a renderer module and a row here (see docs/architecture.md, "How to add...").

Pure functions of the result, like every renderer: nothing here reads or writes files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from grader.render.gradescope import gradescope
from grader.render.junit import junit_xml
from grader.render.markdown import markdown
from grader.render.prairielearn import dumps as prairielearn_dumps
from grader.render.prairielearn import prairielearn
from grader.render.student_html import student_html
from grader.render.text import render_text
from grader.core.results import SubmissionResult

if TYPE_CHECKING:
    from grader.assignment.config import Config

__all__ = ["FORMATS", "ReportFormat", "STUDENT_FOLDER", "batch_reports", "report_files", "student_reports"]

#: The folder in a student's folder of a batch (``OUT/<id>/student/``) holding what the student may
#: read: the student's copy of each student-facing format. The rest of ``OUT/<id>/`` is the course
#: staff's (``result.json``, and the reports with every hidden case in full).
STUDENT_FOLDER = "student"


@dataclass(frozen=True)
class ReportFormat:
    """One report of a :class:`~grader.core.results.SubmissionResult`.

    Attributes:
        name: the format's name; its option, where it has one, is ``--NAME FILE``.
        render: ``render(result, cfg)``: the report's text (a file's whole content) as its readers
            see it. ``cfg``: the config the result was graded under, for a format that follows one
            of its keys (PrairieLearn's ``prairielearn.compile_error``), or None: the format's defaults.
        option_help: the option's help (what FILE receives); None: no option (the terminal report,
            which ``grade`` prints).
        student_facing: whether students read this format. Its :attr:`render` then renders
            :func:`grader.render._common.student_view` of the result (each hidden case by name and
            passed or failed, nothing else that depends on the hidden cases, no run time that
            covers them); ``tests/render/test_render.py`` checks every such format.
        file: its file in each student's folder of a batch (``OUT/<id>/``), or None.
        staff_render: the course staff's copy of a student-facing format, where it differs (the
            terminal report with every hidden case in full, ``grade --show-hidden``); None: :attr:`render`.
    """

    name: str
    render: Callable[[SubmissionResult, "Config | None"], str]
    option_help: str | None
    student_facing: bool
    file: str | None
    staff_render: Callable[[SubmissionResult, "Config | None"], str] | None = None

    @property
    def flag(self) -> str | None:
        """The command-line option (``--gradescope``), or None."""
        return f"--{self.name}" if self.option_help else None

    def render_for_staff(self, result: SubmissionResult, cfg: "Config | None" = None) -> str:
        """The course staff's copy: :attr:`staff_render`, else :attr:`render`."""
        return (self.staff_render or self.render)(result, cfg)


def _prairielearn(result: SubmissionResult, cfg: "Config | None") -> str:
    doc = prairielearn(result, compile_error=cfg.prairielearn.compile_error) if cfg else prairielearn(result)
    return prairielearn_dumps(doc) + "\n"


#: Every report format by name, in the order ``--help`` lists the options.
FORMATS: dict[str, ReportFormat] = {f.name: f for f in (
    ReportFormat("text", lambda r, cfg: render_text(r) + "\n", None, True, "report.txt",
                 staff_render=lambda r, cfg: render_text(r, show_hidden=True) + "\n"),
    ReportFormat("json", lambda r, cfg: r.to_json() + "\n", "also write the result as JSON to FILE",
                 False, None),  # result.json: written by grader.classwork.store, last
    ReportFormat("gradescope", lambda r, cfg: json.dumps(gradescope(r), indent=2) + "\n",
                 "also write Gradescope's results.json to FILE", True, "results.json"),
    ReportFormat("prairielearn", _prairielearn,
                 "also write PrairieLearn's results.json to FILE (docs/prairielearn.md); under the config's "
                 "prairielearn.compile_error: not-gradable, every part is compiled first, and one that does not "
                 "compile stops the grading before any case", True, None),
    ReportFormat("junit", lambda r, cfg: junit_xml(r), "also write JUnit XML (one testcase per case, hidden "
                 "cases in full: for course staff) to FILE", False, "junit.xml"),
    ReportFormat("markdown", lambda r, cfg: markdown(r),
                 "also write a Markdown summary to FILE (e.g. $GITHUB_STEP_SUMMARY)", True, "report.md"),
    ReportFormat("html", lambda r, cfg: student_html(r), "also write the student's HTML report, with pictures of "
                 "races, bank conflicts and wrong elements (self-contained), to FILE", True, "report.html"),
)}


def report_files(*, student: bool = False) -> list[str]:
    """The report files of :data:`FORMATS`, in table order: each format's :attr:`ReportFormat.file`
    (what a batch writes into ``OUT/<id>/`` besides ``result.json``: ``report.txt``, ``results.json``,
    ``junit.xml``, ``report.md``, ``report.html``), or with ``student`` those of the student-facing formats (what
    :data:`STUDENT_FOLDER` holds besides the time plots). Read from the table at each call."""
    return [f.file for f in FORMATS.values() if f.file and (f.student_facing or not student)]


def student_reports(result: SubmissionResult) -> dict[str, str]:
    """File name -> text of the student's copy of each student-facing format with a file
    (``report.txt``, ``results.json`` (Gradescope's), ``report.md``, ``report.html``): what ``OUT/<id>/student/``
    holds. A pure function: no I/O."""
    return {f.file: f.render(result, None) for f in FORMATS.values() if f.file and f.student_facing}


def batch_reports(result: SubmissionResult) -> dict[str, str | bytes]:
    """Path (relative to ``OUT/<id>/``) -> text of every report a batch writes into a student's
    folder besides ``result.json``: the course staff's copy of each format with a file
    (``report.txt`` with the hidden cases in full, ``results.json``, ``junit.xml``, ``report.md``,
    ``report.html``),
    and :func:`student_reports` under :data:`STUDENT_FOLDER`, with each timed part's time plot
    there as PNG bytes (:func:`grader.render.plot.plot_name`; none without matplotlib). A pure
    function: no I/O."""
    from grader.render.plot import plot_name, plotted_parts, time_plot_png
    staff: dict[str, str | bytes] = {f.file: f.render_for_staff(result, None) for f in FORMATS.values() if f.file}
    student = {f"{STUDENT_FOLDER}/{name}": text for name, text in student_reports(result).items()}
    plots = {f"{STUDENT_FOLDER}/{plot_name(p)}": png for p in plotted_parts(result)
             if (png := time_plot_png(p)) is not None}
    return staff | student | plots
