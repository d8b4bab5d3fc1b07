"""The student release's notebook (scan.ipynb, issue 52): built from the parts table and the
templates, it runs headless to the end in the release folder and shows the student's report.

The notebook runs in a kernel of this interpreter (ipykernel), in the release folder and on that
folder's grader (its first cell puts it first on sys.path); ``.ci/routes`` runs it again in the
release's own venv, as ``make check`` set it up."""

from __future__ import annotations

import html
import re

import nbformat
import pytest

from grader.assignment.config import load_config
from grader.assignment.parts import PARTS
from grader.core.errors import UsageError
from grader.notebook import HTML_FORMAT, check, framed, report_html
from grader.packaging.student_notebook import (NOTEBOOK, PARAMETERS_TAG, PART_KEY, displayed_html, notebook_text,
                                               run_notebook)
from grader.render.formats import FORMATS, ReportFormat
from tests.conftest import ROOT, SOLUTIONS, TEMPLATES
from tests.packaging.test_release import release  # noqa: F401  (the release fixture, built once for this module)
from tests.render.test_render import HIDDEN_SECRETS, MISMATCH_MSG, RESULT


def _notebook(made) -> nbformat.NotebookNode:
    return nbformat.read(made.folder / NOTEBOOK, as_version=4)


def _part_cells(nb) -> dict[str, str]:
    return {cell.metadata[PART_KEY]: cell.source for cell in nb.cells if PART_KEY in cell.metadata}


def test_the_release_ships_a_valid_notebook_with_a_writefile_cell_per_configured_part(release):
    made, tmp = release
    nb = _notebook(made)
    nbformat.validate(nb)
    assert NOTEBOOK in made.files and nb.metadata.kernelspec.name == "python3"
    cfg = load_config(made.folder / "config.yaml")
    cells = _part_cells(nb)
    assert list(cells) == [key for key in PARTS if key in cfg.parts] == ["part1_naive", "part4_any_size"]
    for key, source in cells.items():
        first, body = source.split("\n", 1)
        assert first == f"%%writefile assignment/{PARTS[key].filename}"
        assert body == (TEMPLATES / PARTS[key].filename).read_text()  # the template, whole
    tagged = [cell for cell in nb.cells if PARAMETERS_TAG in cell.metadata.get("tags", ())]
    assert len(tagged) == 1 and "PARTS = None" in tagged[0].source and "FULL = False" in tagged[0].source
    assert "from grader.notebook import check" in nb.cells[-1].source
    again = notebook_text(cfg, made.folder / "assignment", zip_name="scan-release.zip")
    assert again == (made.folder / NOTEBOOK).read_text()  # the same at every build: it diffs cleanly


def test_the_notebook_runs_to_the_end_in_the_release_and_shows_the_students_report(release, pace):
    """What a student's *Run all* does, with Part 1's cell holding a working kernel, the check
    limited to Part 1 on the emulator (the parameters CI sets; students check every part)."""
    made, _ = release
    nb = run_notebook(made.folder / NOTEBOOK, parameters={"PARTS": ["part1_naive"], "BACKEND": "emulator"},
                      kernels={"part1_naive": (SOLUTIONS / "part1_naive.cu").read_text()},
                      timeout=pace.seconds(300))
    setup = "".join(out.get("text", "") for out in nb.cells[1].outputs)
    assert f"assignment folder: {made.folder.resolve()}" in setup and "the grader is ready" in setup
    reports = [text for text in displayed_html(nb) if PARTS["part1_naive"].title in text]
    assert len(reports) == 1, displayed_html(nb)
    report = html.unescape(reports[0])
    assert f"{made.folder.resolve()}/config.yaml" in report  # graded in the release, by its config
    assert re.search(r"\bPASS\b", report, re.IGNORECASE) and "part4_any_size" not in report, report
    if HTML_FORMAT in FORMATS:
        assert reports[0].startswith("<iframe sandbox")  # a whole document, framed
    else:
        assert reports[0].startswith("<pre") and re.search(r"(?m)^total +pass ", report), report
    written = (made.folder / "assignment" / "part1_naive.cu").read_text()
    assert written.rstrip() == (SOLUTIONS / "part1_naive.cu").read_text().rstrip()  # the cell wrote the file


def test_the_notebook_refuses_an_unknown_parameter_or_part_cell(release):
    made, _ = release
    with pytest.raises(UsageError, match="PART: not a parameter of scan.ipynb"):
        run_notebook(made.folder / NOTEBOOK, parameters={"PART": ["part1_naive"]})
    with pytest.raises(UsageError, match="part2_blelloch: no such part cell"):
        run_notebook(made.folder / NOTEBOOK, kernels={"part2_blelloch": ""})


def test_the_report_falls_back_to_the_students_text_report_in_a_pre(monkeypatch):
    monkeypatch.delitem(FORMATS, HTML_FORMAT, raising=False)
    shown = report_html(RESULT)
    assert shown.startswith("<pre") and shown.endswith("</pre>")
    assert html.unescape(shown[shown.index(">") + 1:-len("</pre>")]) == FORMATS["text"].render(RESULT, None).rstrip()
    assert html.escape(MISMATCH_MSG.split(";")[0], quote=False) in shown  # <b> escaped, not markup
    assert not [s for s in HIDDEN_SECRETS if s in shown]  # the student's view


def test_the_report_is_the_html_formats_where_the_table_has_one(monkeypatch):
    row = ReportFormat(HTML_FORMAT, lambda r, cfg: f"<p>report of {r.submission}</p>", None, True, "report.html")
    monkeypatch.setitem(FORMATS, HTML_FORMAT, row)
    assert report_html(RESULT) == "<p>report of sub</p>"


def test_a_whole_html_document_is_framed_so_its_style_sheet_stays_in_it_and_a_fragment_is_not():
    doc = "<!DOCTYPE html>\n<html><head><style>body { margin: 0 }</style></head><body>a &amp; \"b\"</body></html>"
    shown = framed(doc, lines=10)
    assert shown.startswith('<iframe sandbox="" srcdoc="') and "<style>" not in shown
    assert html.unescape(re.search(r'srcdoc="([^"]*)"', shown).group(1)) == doc
    assert "height: 420px" in shown and "height: 1000px" in framed(doc, lines=5000)
    assert framed("<pre>x</pre>") == "<pre>x</pre>"


@pytest.mark.parametrize("folder, parts, message", [
    ("assignment", None, "scangrade: assignment/ not found"),  # the set-up cell did not run
    ("here", ["part9_bonus"], "scangrade: "),
])
def test_check_says_in_one_line_what_is_wrong_and_shows_nothing(tmp_path, monkeypatch, capsys, folder, parts,
                                                                 message):
    (tmp_path / "config.yaml").write_text((ROOT / "config.yaml").read_text())
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "part1_naive.cu").write_text((TEMPLATES / "part1_naive.cu").read_text())
    monkeypatch.chdir(tmp_path)
    assert check(backend="emulator", folder=folder, parts=parts) is None
    err = capsys.readouterr().err
    assert err.startswith(message) and len(err.splitlines()) == 1, err
    if parts:
        assert "part9_bonus" in err
