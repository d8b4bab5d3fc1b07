"""Every report of one student's result, as the files a batch writes into ``OUT/<id>/``."""

from __future__ import annotations

import json

from grader.render.gradescope import gradescope
from grader.render.junit import junit_xml
from grader.render.markdown import markdown
from grader.render.text import render_text
from grader.results import SubmissionResult


def student_reports(result: SubmissionResult) -> dict[str, str]:
    """File name -> text of each report of ``result`` besides ``result.json``: ``report.txt``
    (the terminal report), ``report.md``, ``results.json`` (Gradescope's) and ``junit.xml``, in
    the order :func:`grader.classwork.store.write_reports` writes them. A pure function: no I/O."""
    return {"report.txt": render_text(result) + "\n", "report.md": markdown(result),
            "results.json": json.dumps(gradescope(result), indent=2) + "\n", "junit.xml": junit_xml(result)}
