"""The student's HTML report: one self-contained page (``report.html``, ``--html FILE``) with what the
text report says of each part, and pictures (:mod:`grader.render.pictures`): a race as a timeline of
its two threads, Part 3's worst shared-memory request as a grid of lanes and banks beside the
reference's, where a case's wrong elements lie across the array and its tiles, and the time plot.

Student-facing (its row in :data:`grader.render.formats.FORMATS`): it renders
:func:`grader.render._common.student_view` of the result, each hidden case by name and result only,
the seed and run time as :func:`~grader.render._common.public_seed` and
:func:`~grader.render._common.public_elapsed_s` give them. Self-contained: inline CSS and SVG, the
plot a ``data:`` PNG, no script, no font file, no link out; its Content-Security-Policy admits
nothing else. Pure: a function of the result, no I/O.
"""

from __future__ import annotations

import functools
from importlib import resources

import jinja2
from markupsafe import Markup

from grader.render._common import part_status_words, points, printable, public_elapsed_s, public_seed, student_view
from grader.render.pictures import part_pictures
from grader.render.text import header_lines, part_lines, summary_lines
from grader.core.results import SubmissionResult

__all__ = ["CONTENT_SECURITY_POLICY", "student_html"]

#: The page's template and style sheet: package data in ``grader/render/templates``.
TEMPLATE_FILE, CSS_FILE = "student_report.html.j2", "student_report.css"
#: The page's Content-Security-Policy: inline style, ``data:`` images, nothing else (no script, no
#: font, no connection).
CONTENT_SECURITY_POLICY = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
                           "form-action 'none'")


def _asset(name: str) -> str:
    return resources.files("grader.render").joinpath("templates", name).read_text(encoding="utf-8")


def _finalize(value: object) -> object:
    """Every ``{{ value }}``: text with control characters shown (markup from the renderer as it is)."""
    return printable(value) if isinstance(value, str) and not isinstance(value, Markup) else value


@functools.lru_cache(maxsize=1)
def _template() -> tuple[jinja2.Template, Markup]:
    env = jinja2.Environment(autoescape=True, finalize=_finalize, undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    env.filters.update(points=points, status_words=part_status_words)
    return env.from_string(_asset(TEMPLATE_FILE)), Markup(_asset(CSS_FILE))


def student_html(result: SubmissionResult) -> str:
    """The student's HTML report of ``result``: a header (as the text report's), then per part its
    heading, the text report's block for it (:func:`grader.render.text.part_lines`) and its pictures
    (:func:`grader.render.pictures.part_pictures`), then the text report's closing table.

    Returns:
        the page (UTF-8 text, ends in a newline).
    """
    seed, elapsed = public_seed(result), public_elapsed_s(result)
    view = student_view(result)
    template, css = _template()
    parts = [{"part": p, "text": "\n".join(part_lines(view, p)), "pictures": part_pictures(p)} for p in view.parts]
    return template.render(result=view, css=css, csp=Markup(CONTENT_SECURITY_POLICY), parts=parts,
                           header="\n".join(header_lines(view, seed)).rstrip(),
                           summary="\n".join(summary_lines(view, elapsed)))
