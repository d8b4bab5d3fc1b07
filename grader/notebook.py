"""The student notebook's way in (``scan.ipynb`` of the student release): ``scangrade check`` in a
Jupyter or Colab cell, its report shown in the notebook.

The notebook's last cell is::

    from grader.notebook import check
    result = check(parts=PARTS, full=FULL, backend=BACKEND)

:func:`check` grades ``assignment/`` as ``scangrade check`` does (the same :func:`grader.api.prepare`
and, unless ``full``, :meth:`grader.api.Grading.quick`), on the GPU where this runtime has one that
PyCUDA can use, else on the CPU emulator, and displays the student's report with
``IPython.display``: the row ``html`` of :data:`grader.render.formats.FORMATS` where the table has
one (a whole document, shown in a sandboxed ``<iframe srcdoc>`` so that its style sheet stays in
it: :func:`framed`), else the text report in a ``<pre>`` (:func:`report_html`). A usage or configuration error is
one line in the notebook, not a traceback. The notebook itself is built at release time from the
parts table and the templates (:mod:`grader.packaging.student_notebook`).
"""

from __future__ import annotations

import html
import sys
from pathlib import Path

from grader import api
from grader.assignment.config import Config
from grader.core.errors import ScangradeError, UsageError
from grader.core.results import SubmissionResult
from grader.render.formats import FORMATS

__all__ = ["HTML_FORMAT", "check", "framed", "report_html"]

#: The row of :data:`~grader.render.formats.FORMATS` shown as it is where the table has it (the
#: student's HTML report, ``report.html``); otherwise the text report is shown in a ``<pre>``.
HTML_FORMAT = "html"
#: A framed report's height (:func:`framed`): pixels per line of its text report, plus a margin,
#: within these bounds (it scrolls beyond the upper one).
FRAME_LINE_PX, FRAME_MARGIN_PX, FRAME_PX = 22, 200, (300, 1000)


def report_html(result: SubmissionResult, cfg: Config | None = None) -> str:
    """The student's report of ``result`` as HTML for a notebook's output.

    Args:
        result: a graded submission.
        cfg: the config it was graded under (for a format that follows one of its keys), or None.

    Returns:
        The :data:`HTML_FORMAT` row's rendering where :data:`~grader.render.formats.FORMATS` has that
        row (read at each call), else the text report (``FORMATS["text"]``, the student's copy:
        hidden cases by name and passed or failed only), HTML-escaped in a ``<pre>``. Both are the
        student's view of the result.
    """
    fmt = FORMATS.get(HTML_FORMAT)
    if fmt is not None:
        return fmt.render(result, cfg)
    text = FORMATS["text"].render(result, cfg)
    return f'<pre style="white-space: pre; line-height: 1.3">{html.escape(text.rstrip())}</pre>'


def framed(doc: str, *, lines: int = 40) -> str:
    """``doc`` ready for a notebook's output: a whole HTML document (``<!DOCTYPE html>`` or
    ``<html>``) in an ``<iframe srcdoc>``, sandboxed (no script, no form, an origin of its own), so
    that its style sheet applies to it alone and not to the notebook's page (Jupyter puts an
    output's HTML into the page itself); anything else (a fragment such as a ``<pre>``) as it is.

    Args:
        doc: HTML text.
        lines: about how many lines of text it holds: the frame is :data:`FRAME_LINE_PX` a line
            plus :data:`FRAME_MARGIN_PX` high, within :data:`FRAME_PX` (it scrolls beyond that, and
            its lower edge can be dragged).
    """
    if not doc.lstrip()[:15].lower().startswith(("<!doctype html", "<html")):
        return doc
    low, high = FRAME_PX
    height = min(high, max(low, FRAME_LINE_PX * lines + FRAME_MARGIN_PX))
    return (f'<iframe sandbox="" srcdoc="{html.escape(doc, quote=True)}" title="scangrade report" '
            f'style="width: 100%; height: {height}px; border: 1px solid #ccc; resize: vertical"></iframe>')


class _Progress:
    """One line of output, rewritten (``\\r``) as each case starts: ``grading CASE (k of n)``."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0

    def __call__(self, kind: str, ev) -> None:
        if kind == "case":
            self.done += 1
        elif kind == "case-start":
            print(f"\rgrading {ev.case} ({self.done} of {self.total} done)".ljust(72), end="", flush=True)

    def close(self) -> None:
        if self.done:
            print(f"\rgraded {self.done} of {self.total} cases".ljust(72), flush=True)


def check(*, parts: list[str] | None = None, full: bool = False, backend: str | None = None,
          folder: str | Path = "assignment", config: str | Path | None = None,
          show: bool = True) -> SubmissionResult | None:
    """Grade ``folder`` as ``scangrade check`` does and show the report in the notebook.

    Args:
        parts: the part keys to grade (``["part1_naive"]``); None: every part of the config.
        full: every size, as the official grade (``scangrade check --full``); by default the quick
            check, the sizes up to the config's ``check.quick_max_n``, saying what it left out.
        backend: ``"auto"``, ``"pycuda"``, ``"emulator"`` or None (``SCANGRADE_BACKEND``, then the
            config's key, then auto: the GPU where PyCUDA can use one, else the emulator).
        folder: the folder of part files, relative to the current folder (the release's).
        config: the config file; None: ``./config.yaml``.
        show: display the report (:func:`report_html`) with ``IPython.display``; False: only return
            the result.

    Returns:
        The :class:`~grader.core.results.SubmissionResult` (compile errors, crashes, hangs and wrong
        outputs are in it), or None where nothing could be graded: a usage or configuration error
        (a missing folder, an unknown part, an invalid config), printed as one line on stderr.
    """
    from grader.grading.case.cases import case_list
    from grader.grading.intake import require_part_file
    try:
        grading = api.prepare(config=config, backend=backend, command="check")
        if not full:
            grading = grading.quick()
        where = api.absolute(folder, grading.start)
        require_part_file(where)
        if not where.is_dir():
            raise UsageError(f"{folder}/ not found: run the notebook's first cell (it goes to the folder "
                                 "that holds assignment/)")
        cfg = grading.cfg
        progress = _Progress(sum(len(case_list(cfg, key)) for key in (parts or cfg.parts) if key in cfg.parts))
        try:
            result = grading.grade(where, parts=parts, on_event=progress)
        finally:
            progress.close()
    except ScangradeError as exc:
        print(f"scangrade: {exc}", file=sys.stderr)
        return None
    if show:
        from IPython.display import HTML, display
        lines = FORMATS["text"].render(result, cfg).count("\n")
        display(HTML(framed(report_html(result, cfg), lines=lines)))
    return result
