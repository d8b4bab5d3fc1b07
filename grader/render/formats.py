"""The report formats, in one table (:data:`FORMATS`): per format its renderer, its command-line
option and the file it is in a student's folder of a batch.

``scangrade grade`` and ``check`` offer ``--NAME FILE`` for each format with an option, and write
the file :attr:`ReportFormat.render` gives; a batch writes each format with a
:attr:`ReportFormat.student_file` into every student's folder (:func:`student_reports`). Adding a
format is a renderer module and a row here (see docs/architecture.md, "How to add...").

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
from grader.render.text import render_text
from grader.results import SubmissionResult

if TYPE_CHECKING:
    from grader.config import Config

__all__ = ["FORMATS", "ReportFormat", "student_reports"]


@dataclass(frozen=True)
class ReportFormat:
    """One report of a :class:`~grader.results.SubmissionResult`.

    Attributes:
        name: the format's name; its option, where it has one, is ``--NAME FILE``.
        render: ``render(result, cfg)``: the report's text (a file's whole content). ``cfg``: the
            config the result was graded under, for a format that follows one of its keys
            (PrairieLearn's ``prairielearn.compile_error``), or None: the format's defaults.
        option_help: the option's help (what FILE receives); None: no option (the terminal report,
            which ``grade`` prints).
        student_file: the file it is in each student's folder of a batch (``OUT/<id>/``), or None.
    """

    name: str
    render: Callable[[SubmissionResult, "Config | None"], str]
    option_help: str | None
    student_file: str | None

    @property
    def flag(self) -> str | None:
        """The command-line option (``--gradescope``), or None."""
        return f"--{self.name}" if self.option_help else None


def _prairielearn(result: SubmissionResult, cfg: "Config | None") -> str:
    doc = prairielearn(result, compile_error=cfg.prairielearn.compile_error) if cfg else prairielearn(result)
    return prairielearn_dumps(doc) + "\n"


#: Every report format by name, in the order ``--help`` lists the options.
FORMATS: dict[str, ReportFormat] = {f.name: f for f in (
    ReportFormat("text", lambda r, cfg: render_text(r) + "\n", None, "report.txt"),
    ReportFormat("json", lambda r, cfg: r.to_json() + "\n", "also write the result as JSON to FILE",
                 None),  # result.json: written by grader.classwork.store, last
    ReportFormat("gradescope", lambda r, cfg: json.dumps(gradescope(r), indent=2) + "\n",
                 "also write Gradescope's results.json to FILE", "results.json"),
    ReportFormat("prairielearn", _prairielearn,
                 "also write PrairieLearn's results.json to FILE (docs/prairielearn.md)", None),
    ReportFormat("junit", lambda r, cfg: junit_xml(r), "also write JUnit XML (one testcase per case) to FILE",
                 "junit.xml"),
    ReportFormat("markdown", lambda r, cfg: markdown(r),
                 "also write a Markdown summary to FILE (e.g. $GITHUB_STEP_SUMMARY)", "report.md"),
)}


def student_reports(result: SubmissionResult) -> dict[str, str]:
    """File name -> text of each report of ``result`` a batch writes into the student's folder
    besides ``result.json`` (every format with a :attr:`ReportFormat.student_file`: ``report.txt``,
    ``results.json`` (Gradescope's), ``junit.xml``, ``report.md``). A pure function: no I/O."""
    return {f.student_file: f.render(result, None) for f in FORMATS.values() if f.student_file}
