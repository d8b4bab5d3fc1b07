"""The student's HTML report (issue 52): its pictures of a race, of Part 3's bank conflicts and of
where a case's wrong elements lie, as headless Chromium shows them, each with its text equivalent;
the page self-contained; the fragment Gradescope's output embeds; hidden cases by name and result only.

Three kernels graded on the emulator, one part each (a race: Part 1 without its barrier; bank
conflicts: Part 2's reference as Part 3, the session's ``part2_as_part3``; wrong elements: Part 4
with an off-by-one bound, n = 5000, whose only wrong element is in the last tile)."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from pathlib import Path

import numpy as np
import pytest

from grader.backends import Selection
from grader.assignment.config import load_config
from grader.core.results import CaseFinding, CaseResult, PartResult, SubmissionResult, result_from_dict
from grader.grading.runner import grade
from grader.render._common import student_view
from grader.render.formats import FORMATS
from grader.render.gradescope import gradescope
from grader.render.pictures import part_pictures, picture_images
from grader.render.prairielearn import prairielearn
from grader.render.student_html import CONTENT_SECURITY_POLICY, student_html
from grader.render.text import part_lines
from tests.browser import Dom, chromium, needs_chromium
from tests.conftest import BROKEN

EMULATOR = Selection("emulator", "test")


def _graded(tmp: Path, kernel: str, part: str, config: str):
    path = tmp / "config.yaml"
    path.write_text(config)
    return grade(BROKEN / kernel, cfg=load_config(path), selection=EMULATOR, parts=[part])


@pytest.fixture(scope="module")
def race(tmp_path_factory):
    """Part 1 without its __syncthreads(): a read-after-write race in shared memory, n = 33."""
    return _graded(tmp_path_factory.mktemp("race"), "part1_missing_sync.cu", "part1_naive",
                   "block_size: 64\nseed: 7\nparts:\n  part1_naive:\n    points_per_case: 1\n    dtypes: [int32]\n"
                   "    sizes: [33]\n")


@pytest.fixture(scope="module")
def mismatch(tmp_path_factory):
    """Part 4 with an off-by-one bound on the last tile: n = 300 and 5000 give one wrong element each."""
    return _graded(tmp_path_factory.mktemp("mismatch"), "part4_offsets_off_by_one.cu", "part4_any_size",
                   "block_size: 128\nseed: 7\nparts:\n  part4_any_size:\n    points_per_case: 1\n"
                   "    dtypes: [int32]\n    sizes: [256, 300, 5000]\n")


def _dom(tmp_path: Path, result: SubmissionResult) -> Dom:
    page = tmp_path / "report.html"
    page.write_text(student_html(result), encoding="utf-8")
    return Dom(chromium(tmp_path, page, "--dump-dom"))


def _source_line(kernel: str, line: int) -> str:
    return (BROKEN / kernel).read_text().splitlines()[line - 1]


@needs_chromium
def test_a_race_is_drawn_as_two_threads_in_order_with_their_lines_and_the_element(tmp_path, race):
    case = next(c for c in race.parts[0].cases if c.status == "fail")
    f = case.findings[0]
    assert f.kind == "race" and f.access == "read-after-write" and f.address.startswith("buf[")
    # the finding, end to end: the first access (the other thread's) wrote buf, the second reads it
    assert "buf[" in _source_line("part1_missing_sync.cu", f.other_line).split("=")[0]
    assert "buf[" in _source_line("part1_missing_sync.cu", f.line).split("=", 1)[1]
    assert (f.code, f.other_code) == (_source_line("part1_missing_sync.cu", f.line).strip(),
                                      _source_line("part1_missing_sync.cu", f.other_line).strip())
    assert f.block == f.other_block == (0, 0, 0) and f.thread != f.other_thread
    dom = _dom(tmp_path, race)
    (svg,) = dom.within("svg", "race")
    assert svg["role"] == "img" and svg["aria-labelledby"]
    text = " ".join(dom.text)
    assert "Race (read-after-write) on buf[" in text
    cells = [c.strip() for c in dom.text if c.strip()]
    # the table beside the picture: the first access, then the second, with thread ids and lines
    first = cells.index("1st", cells.index("order"))
    assert cells[first:first + 6] == ["1st", "(0, 0, 0)", "(0, 0, 0)", "write", str(f.other_line), f.other_code]
    assert cells[first + 6:first + 12] == ["2nd", "({}, {}, {})".format(*f.thread), "(0, 0, 0)", "read", str(f.line),
                                           f.code]
    assert f"{f.line}: {f.code}" in text and f"{f.other_line}: {f.other_code}" in text  # the lines, in the picture
    assert f"a __syncthreads() between line {f.other_line} and line {f.line}" in text
    assert len(dom.within("rect", "race")) >= 2 and len(dom.within("circle", "race")) == 1  # the W square, the R circle


@needs_chromium
def test_the_worst_bank_conflict_is_a_32_by_32_grid_beside_the_references(tmp_path, part2_as_part3):
    prof = part2_as_part3.parts[0].profile
    assert prof.request_degree == 32 and len(prof.request_words) == 32
    assert len({w % 32 for w in prof.request_words}) == 1  # every lane in one bank, 32 words
    assert prof.reference_request_degree == 1 and len({w % 32 for w in prof.reference_request_words}) == 32
    dom = _dom(tmp_path, part2_as_part3)
    svgs = dom.within("svg", "banks")
    assert len(svgs) == 2 and all(s["role"] == "img" for s in svgs)
    rects = dom.within("rect", "banks")
    assert sum("cell" in r.get("class", "").split() for r in rects) == 2 * 32 * 32
    lanes = [r for r in rects if "lane" in r.get("class", "").split()]
    mine, reference = lanes[:32], lanes[32:]
    assert [int(r["data-lane"]) for r in mine] == list(range(32))
    assert all("conflict" in r["class"] for r in mine) and {r["data-bank"] for r in mine} == {str(prof.request_words[0] % 32)}
    assert len(reference) == 32 and not any("conflict" in r["class"] for r in reference)
    text = " ".join(dom.text)
    assert "32-way" in text and "1-way" in text and f"line {prof.request_line}" in text
    assert "banks holding more than one word" in text  # the table beside the grid


@needs_chromium
def test_where_the_wrong_elements_lie_is_a_strip_over_the_tiles(tmp_path, mismatch):
    part = mismatch.parts[0]
    case = next(c for c in part.cases if c.n == 5000)
    mm = case.mismatch
    assert mm.bin_width == 256 and len(mm.bins) == 20 and mm.bins[-1] == mm.wrong and sum(mm.bins) == mm.wrong
    dom = _dom(tmp_path, mismatch)
    figures = dom.within("svg", "mismatch")
    assert len(figures) == 1  # one distinct wrong output, drawn at its largest size
    bins = [r for r in dom.within("rect", "mismatch") if "bin" in r.get("class", "").split()]
    across = bins[:20]
    assert [("wrong" in r["class"]) for r in across] == [False] * 19 + [True]
    assert len(dom.within("line", "mismatch")) == 20  # the tile starts
    text = " ".join(dom.text)
    assert "only the last tile (tile 19 of 20: elements 4,864 to 4,999)" in text
    assert "Where the wrong elements of n=5000 int32 lie" in text


@needs_chromium
def test_screenshots_of_the_three_pages_show_the_pictures_in_vermillion(tmp_path, race, mismatch, part2_as_part3):
    import matplotlib.image
    import numpy as np

    for name, result in (("race", race), ("banks", part2_as_part3), ("wrong", mismatch)):
        page = tmp_path / f"{name}.html"
        page.write_text(student_html(result), encoding="utf-8")
        shot = tmp_path / f"{name}.png"
        chromium(tmp_path, page, f"--screenshot={shot}", "--window-size=1000,1600", "--hide-scrollbars")
        rgb = matplotlib.image.imread(str(shot))[..., :3]
        assert rgb.shape[1] == 1000
        vermillion = (rgb[..., 0] > 0.8) & (rgb[..., 0] - rgb[..., 2] > 0.4) & (rgb[..., 1] < 0.7)  # at any shade
        assert np.count_nonzero(vermillion) > 50, name


def test_the_page_is_self_contained_and_its_format_row_writes_report_html(race):
    page = FORMATS["html"].render(race, None)
    assert FORMATS["html"].student_facing and FORMATS["html"].file == "report.html"
    assert f'content="{CONTENT_SECURITY_POLICY}"' in page and "<script" not in page
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?!data:|#)""", page)  # nothing fetched, no link out
    assert "@import" not in page and "url(" not in page
    texts = [html.unescape(t) for t in re.findall(r'<pre class="text">(.*?)</pre>', page, re.S)]
    view = student_view(race)
    for p in view.parts:  # what the text report says of each part, as it says it
        assert "\n".join(part_lines(view, p)) in texts


def test_gradescope_embeds_the_same_fragment_as_html(part2_as_part3, race):
    for result in (part2_as_part3, race):
        part = result.parts[0]
        fragment = str(part_pictures(part, plot=False))
        assert fragment and fragment in student_html(result)
        (test,) = [t for t in gradescope(result)["tests"] if t["name"].endswith(" · pictures")]
        assert test["output"] == fragment and test["output_format"] == "html" and test["max_score"] == 0


def test_prairielearn_shows_the_same_pictures_as_svg_images(part2_as_part3, race):
    """PrairieLearn's results take no HTML: each SVG of the fragment is an image of a 0-of-0 test."""
    import base64
    for result in (part2_as_part3, race):
        part = result.parts[0]
        svgs = re.findall(r"<svg\b.*?</svg>", str(part_pictures(part, plot=False)), flags=re.S)
        (test,) = [t for t in prairielearn(result)["tests"] if t["name"].endswith(" · pictures")]
        assert test["max_points"] == 0 and len(test["images"]) == len(svgs) > 0
        decoded = [base64.b64decode(i["url"].split(",", 1)[1]).decode() for i in test["images"]]
        assert decoded == svgs and all(i["url"].startswith("data:image/svg+xml;base64,") for i in test["images"])
        assert all(i["label"] and i["label"] in test["output"] for i in picture_images(part))


def _hidden(case: CaseResult) -> CaseResult:
    return dataclasses.replace(case, visibility="hidden", name=f"n={case.n} int32")


def test_a_hidden_case_shows_no_race_no_wrong_elements_and_no_size(race, mismatch):
    for result in (race, mismatch):
        part = result.parts[0]
        failing = [c for c in part.cases if c.status == "fail"]
        hidden = dataclasses.replace(part, cases=tuple(_hidden(c) if c in failing else c for c in part.cases))
        page = student_html(dataclasses.replace(result, parts=(hidden,)))
        assert 'class="race"' not in page and 'class="mismatch"' not in page
        for c in failing:
            assert c.message.split(";")[0] not in page and f"n={c.n} " not in page
            assert all(not f.address or f.address not in page for f in c.findings)
        assert "hidden case" in page


def test_a_result_saved_before_the_pictures_reads_back_and_renders_without_them(race, mismatch):
    for result in (race, mismatch):
        doc = json.loads(result.to_json())
        for p in doc["parts"]:
            for c in p["cases"]:
                for f in c["findings"]:
                    for key in ("other_file", "other_line", "other_block", "other_thread", "access", "address",
                                "code", "other_code"):
                        del f[key]
                if c["mismatch"]:
                    for key in ("last", "bins", "bin_width", "offsets", "offset_width", "stride"):
                        del c["mismatch"][key]
        old = result_from_dict(doc)
        assert "<svg" not in student_html(old)
        cases = [c for c in old.parts[0].cases if c.status == "fail"]
        assert cases and all(f.other_line is None and f.address is None for c in cases for f in c.findings)
        assert all(c.mismatch.bins == () for c in cases if c.mismatch)
        assert result_from_dict(json.loads(result.to_json())) == result  # and the new fields read back


def test_a_race_finding_without_its_other_access_or_its_kind_draws_nothing():
    race = CaseFinding("race", "race (read-after-write) ...", "k.cu", 3, (0, 0, 0), (1, 0, 0))
    case = CaseResult(name="n=33 int32", n=33, dtype="int32", seed=1, status="fail", points=0, max_points=1,
                      message="race", kind="race", findings=(race,))
    part = PartResult(key="part1_naive", number=1, title="t", file="k.cu", status="fail", cases=(case,))
    assert str(part_pictures(part)) == ""
    memory_order = dataclasses.replace(race, other_line=4, other_file="k.cu", other_block=(1, 0, 0),
                                       other_thread=(0, 0, 0))  # a memory-order race: no access, no element
    unordered = dataclasses.replace(case, findings=(memory_order,))
    assert str(part_pictures(dataclasses.replace(part, cases=(unordered,)))) == ""
    drawn = dataclasses.replace(part, cases=(dataclasses.replace(case, findings=(dataclasses.replace(
        race, other_line=4, other_file="k.cu", other_block=(0, 0, 0), other_thread=(0, 0, 0),
        access="write-after-write", address="s[1] (inside shared array s, 64 elements)"),)),))
    fragment = str(part_pictures(drawn))
    assert "Race (write-after-write) on s[1]" in fragment and fragment.count("<rect x=") >= 2


@pytest.mark.parametrize("wrong, says", [
    (slice(511, None, 512), ["every 512th element from 511 on (511, 1,023, ...) is wrong, and no other",
                             "the wrong elements are in tiles 1, 3, 5, 7, 9 (5 of 10); a tile is 256 elements",
                             "within their tiles they lie at elements 248 to 255 of the 256 (the end of the tile)"]),
    (slice(512, None), ["every element from 512 to 2,559 is wrong, and no other",  # a wrong offset from the second level on
                        "the wrong elements are in every tile from tile 2 on (8 of 10); a tile is 256 elements",
                        "within their tiles they lie everywhere, from the first element to the last"]),
    (slice(2304, None), ["the wrong elements are in only the last tile (tile 9 of 10: elements 2,304 to 2,559); "
                         "a tile is 256 elements"]),
])
def test_the_mismatch_says_where_its_wrong_elements_lie(wrong, says):
    from grader.grading.case.checks import diagnose
    from grader.render._patterns import wrong_places

    x = np.ones(2560, dtype=np.int32)
    expected = np.concatenate([[0], np.cumsum(x)[:-1]]).astype(np.int32)
    got = expected.copy()
    got[wrong] += 7
    mm = diagnose(got, expected, source=x, inclusive=False, tile=256)
    assert mm.bin_width == 256 and len(mm.bins) == 10 and sum(mm.bins) == sum(mm.offsets) == mm.wrong
    lines = wrong_places(mm, 2560, 256)
    assert all(s in lines for s in says), lines
    case = CaseResult(name="n=2560 int32", n=2560, dtype="int32", seed=1, status="fail", points=0, max_points=1,
                      message="wrong", kind="mismatch", mismatch=mm)
    part = PartResult(key="part4_any_size", number=4, title="t", file="k.cu", status="fail", cases=(case,),
                      block_size=128)
    fragment = str(part_pictures(part))
    assert fragment.count('class="bin wrong"') == sum(1 for c in mm.bins if c) + sum(1 for c in mm.offsets if c)
    assert fragment.count('class="tile-edge"') == 10 and all(html.escape(s, quote=True) in fragment for s in says)


def test_a_timed_parts_plot_is_an_inline_png_with_its_points_in_a_table():
    pytest.importorskip("matplotlib")
    from grader.core.performance import Roofline, RooflineRow

    roof = Roofline("NVIDIA H100 80GB HBM3", 3350.0, 10.0, 1.0, "an estimate", n=65536, dtype="int32",
                    bytes_per_element=16.5, launches=3,
                    rows=(RooflineRow(1 << 20, 0.008, 0.004, 2.0), RooflineRow(1 << 24, 0.1, 0.05, 2.0)))
    part = PartResult(key="part4_any_size", number=4, title="t", file="k.cu", status="pass", roofline=roof)
    fragment = str(part_pictures(part))
    assert fragment.count('src="data:image/png;base64,') == 1 and 'class="plot-table"' in fragment
    assert "16,777,216" in fragment and "0.05" in fragment  # the points, in text
    assert "data:image/png" not in str(part_pictures(part, plot=False))
