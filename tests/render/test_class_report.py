"""The class report (``DIR/class_report.html``): its content, escaping, the ``report`` command, and
the page as headless Chromium renders it.

Most tests build a batch output folder without grading: results made from the dataclasses of
:mod:`grader.core.results` (a GPU run with timed Part 5 cases, failures of every kind, strings that try
to inject markup), written with :func:`grader.classwork.store.write_reports` as ``scangrade batch``
writes them. One test runs ``scangrade batch`` end to end on three tiny submissions.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from grader.backends import BACKENDS
from grader.classwork.store import CLASS_REPORT as REPORT_NAME
from grader.classwork.store import load_batch, write_class_report, write_reports
from grader.render.class_report import LINKED_REPORTS, class_report, class_report_page, failure_groups, part_failures
from grader.render.formats import FORMATS, STUDENT_FOLDER, student_reports
from grader.core.performance import Performance, Timing
from grader.core.results import CaseResult, PartResult, SubmissionResult
from tests.conftest import BROKEN, SOLUTIONS, write_config
from tests.browser import CHROMIUM, Dom, chromium, needs_chromium

GPU = "NVIDIA H100 80GB HBM3"
FINGERPRINT = "3f5a" * 16
SIZES = (1048576, 16777216, 268435456)
REF_MS = {1048576: 0.02, 16777216: 0.12, 268435456: 1.6}
EVIL_ID = "<b onmouseover=alert(1)>eve"  # a possible folder name: no slash
EVIL_MESSAGE = "out[0] = 1, expected 0 <script>document.title='pwned'</script> <img src=x onerror=alert(2)>"
TITLES = {"part1_naive": (1, "naive"), "part2_blelloch": (2, "Blelloch"), "part4_any_size": (4, "any size"),
          "part5_single_pass": (5, "single pass")}


def _case(n: int, status: str = "pass", message: str = "", **kw) -> CaseResult:
    return CaseResult(name=f"n={n} int32", n=n, dtype="int32", seed=7, status=status,
                      points=1.0 if status == "pass" else 0.0, max_points=1.0, message=message, **kw)


def _timed(n: int, ratio: float) -> CaseResult:
    ms = REF_MS[n] * ratio
    timing = Timing(median_ms=ms, spread=0.02, runs=30, gbps=8 * n / (ms * 1e-3) / 1e9, copy_fraction=0.4,
                    reference_ms=REF_MS[n], ratio=ratio, cpu_speedup=50.0)
    return CaseResult(name=f"timed n={n} int32", n=n, dtype="int32", seed=7, status="pass", points=0.0,
                      max_points=0.0, timing=timing)


def _part(key: str, status: str, cases: tuple[CaseResult, ...], message: str = "",
          performance: Performance | None = None) -> PartResult:
    number, title = TITLES[key]
    return PartResult(key=key, number=number, title=title, file=f"{key}.cu", status=status, message=message,
                      cases=cases, performance=performance)


def _passing(key: str) -> PartResult:
    return _part(key, "pass", (_case(1), _case(33)))


def _part5(ratios: tuple[float, ...] | None, points: float = 0.0, why: str = "") -> PartResult:
    if ratios is None:
        return _part("part5_single_pass", "pass", (_case(1), _case(33)), performance=Performance(0.0, 10.0, None, why))
    geo = (ratios[0] * ratios[1] * ratios[2]) ** (1 / 3)
    return _part("part5_single_pass", "pass", (_case(1), _case(33), *(_timed(n, r) for n, r in zip(SIZES, ratios))),
                 performance=Performance(points, 10.0, geo, f"time / reference time = {geo:.2f}"))


def _result(sid: str, parts: list[PartResult], *, backend: str = "pycuda") -> SubmissionResult:
    device = {"backend": backend, "device": GPU} if backend == "pycuda" else {"backend": backend}
    return SubmissionResult(submission=sid, backend=backend, backend_reason="test", device=device,
                            config="config.yaml", seed=7, block_size=128, parts=tuple(parts), scangrade_version="0.1.0",
                            started_at="2026-11-20T10:00:00+00:00", elapsed_s=3.0, timed=backend == "pycuda",
                            backend_times_kernels=BACKENDS[backend].times_kernels,
                            backend_uses_gpus=BACKENDS[backend].uses_gpus)


def gpu_class() -> list[tuple[str, SubmissionResult]]:
    """A class graded on a GPU: one of each kind of failure, Part 5 timed for three students."""
    p1, p2, p4 = _passing("part1_naive"), _passing("part2_blelloch"), _passing("part4_any_size")
    race_msg = "the kernel failed (race): thread (3,0,0) of block (0,0,0) writes s[2] while thread 2 reads it"
    race = _part("part1_naive", "fail", (_case(1), _case(33, "fail", race_msg, kind="race")))
    wrong = _part("part2_blelloch", "fail", (_case(1, "fail", "out[0] = 5, expected 0; 1 of 1 elements wrong",
                                                   kind="mismatch"),
                                             _case(33, "fail", "out-of-bounds write: wrote outside out: out[33]",
                                                   kind="out-of-bounds")))
    broken = _part("part4_any_size", "compile-error", (_case(1, "not-run"),),
                   message="part4_any_size.cu does not compile\npart4_any_size.cu:61:21: error: invalid conversion")
    hang = _part("part5_single_pass", "timeout", (_case(1), _case(33, "timeout", "timed out", kind="timeout")),
                 message="timed out after 8 s (timeouts.part_s) during case n=33 int32",
                 performance=Performance(0.0, 10.0, None, "not timed: the part did not finish"))
    trap = _part("part4_any_size", "fail", (_case(1, "error", "the kernel failed (trap): __trap() was called",
                                                  kind="trap"),))
    evil = _part("part2_blelloch", "fail", (_case(1, "fail", EVIL_MESSAGE, kind="mismatch"),))
    missing = [_part(k, "missing", (_case(1, "not-run"),), message=f"{k}.cu is missing from the submission")
               for k in TITLES]
    return [("alice", _result("alice", [p1, p2, p4, _part5((0.9, 0.95, 1.0), 10.0)])),
            ("bob", _result("bob", [race, wrong, p4, _part5((2.0, 2.5, 3.0), 0.0)])),
            ("carol", _result("carol", [p1, p2, broken, hang])),
            ("dave", _result("dave", [p1, p2, trap, _part5((1.2, 1.3, 1.25), 7.5)])),
            (EVIL_ID, _result(EVIL_ID, [p1, evil, p4, _part5((1.5, 1.4, 1.6), 4.0)])),
            ("zoe", _result("zoe", missing))]


def _write_batch(tmp_path: Path, rows: list[tuple[str, SubmissionResult]], manifest: bool = True) -> Path:
    out = tmp_path / "out"
    for sid, result in rows:
        write_reports(result, out / sid, student_reports(result))
    if manifest:
        (out / "batch.json").write_text(json.dumps({"schema": "scangrade.batch", "schema_version": 1,
                                                    "config_sha256": FINGERPRINT, "shard": None}))
    return out


def _section(page: str, sid: str) -> str:
    start = page.index(f'<section id="{sid}">')
    return page[start:page.index("</section>", start)]


# --- content ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("part, kinds", [
    (gpu_class()[1][1].parts[0], ["race"]),
    (gpu_class()[1][1].parts[1], ["wrong-result", "out-of-bounds"]),
    (gpu_class()[2][1].parts[2], ["compile-error"]),
    (gpu_class()[2][1].parts[3], ["timeout"]),
    (gpu_class()[3][1].parts[2], ["trap"]),
    (gpu_class()[0][1].parts[0], []),
])
def test_each_failing_part_is_put_under_each_kind_of_failure_among_its_cases(part, kinds):
    assert [f.kind for f in part_failures("s", part)] == kinds


def test_failures_are_grouped_by_kind_largest_group_first_with_every_student():
    groups = dict(failure_groups(gpu_class()))
    assert list(groups)[0] == "wrong-result"  # bob and eve: the largest group
    assert [f.student for f in groups["wrong-result"]] == ["bob", EVIL_ID]
    assert [(f.student, f.part) for f in groups["missing"]] == [("zoe", None)]  # one entry, not four
    assert groups["compile-error"][0].message.splitlines() == [
        "part4_any_size.cu does not compile", "part4_any_size.cu:61:21: error: invalid conversion"]
    assert groups["timeout"][0].case.name == "n=33 int32"
    assert set(groups) == {"wrong-result", "race", "out-of-bounds", "compile-error", "timeout", "trap",
                           "missing"}


def test_the_page_of_a_gpu_run_has_the_header_scores_timing_failures_and_students(tmp_path):
    out = _write_batch(tmp_path, gpu_class())
    page = write_class_report(out, class_report_page).read_text(encoding="utf-8")
    header = page[:page.index('<section id="scores">')]
    assert "6 (1 passed every case)" in header and GPU in header and FINGERPRINT[:16] in header
    assert "2026-11-20" in header
    scores = _section(page, "scores")
    assert scores.count('<svg class="plot"') == 5  # four parts and the total
    assert "<td>Part 2: Blelloch</td>" in scores and '<td class="num">4/6</td>' in scores  # every case passed
    timing = _section(page, "timing")
    assert timing.count('<svg class="plot"') == 1 and "the challenge" in timing and "reference solution" in timing
    ranked = [sid for sid in ("alice", "dave", "&lt;b onmouseover=alert(1)&gt;eve", "bob") if sid in timing]
    assert sorted(ranked, key=timing.index) == ranked  # by combined ratio, fastest first
    assert "1.60</td>" in timing  # the reference's median ms at 2^28
    assert "carol" in timing and "not timed: the part did not finish" in timing  # listed as not timed
    failures = _section(page, "failures")
    for label in ("race", "wrong result", "out of bounds", "compile error", "timeout", "trap",
                  "missing"):
        assert f"<summary>{label} " in failures, label
    assert all(f'href="bob/{name}"' in failures for name in LINKED_REPORTS)  # files of the format table
    students = _section(page, "students")
    assert students.count("<tr>") == 1 + 6 and 'class="sortable students"' in students


def test_emulator_results_say_that_timing_waits_for_a_gpu_run(tmp_path):
    why = "not timed: the emulator backend cannot time kernels; performance points need a run on a GPU"
    rows = [(s, _result(s, [_passing("part1_naive"), _part5(None, why=why)], backend="emulator"))
            for s in ("ann", "ben")]
    page = class_report(rows)
    timing = _section(page, "timing")
    assert "Timing pending a GPU run" in timing and "2 of 2 results come from the CPU emulator" in timing
    assert "<svg" not in timing and "none (no GPU run)" in page


def test_without_a_timed_reference_the_timing_plot_shows_milliseconds_and_marks_no_reference():
    def untimed_reference(c: CaseResult) -> CaseResult:
        t = c.timing
        return c if t is None else CaseResult(**{**c.__dict__, "timing": Timing(t.median_ms, t.spread, t.runs, t.gbps)})
    rows = [(sid, SubmissionResult(**{**r.__dict__, "parts": tuple(
        PartResult(**{**p.__dict__, "cases": tuple(map(untimed_reference, p.cases))}) for p in r.parts)}))
        for sid, r in gpu_class()]
    timing = _section(class_report(rows), "timing")
    assert "median time (ms)" in timing and "no reference solution was timed" in timing
    assert "reference solution (1.0)" not in timing and "×" not in timing.split("<table", 1)[1]


def test_without_matplotlib_the_page_keeps_its_tables_and_says_how_to_get_plots(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    page = class_report(gpu_class())
    assert "<svg" not in page and "pip install scangrade[report]" in page
    assert "<td>Part 1: naive</td>" in page and 'class="sortable timing"' in page and "trap" in page


def test_strings_from_submissions_are_escaped():
    page = class_report(gpu_class())
    dom = Dom(page)
    text = "".join(dom.text)
    assert EVIL_ID in text and "<script>document.title='pwned'</script>" in text  # shown as text
    assert len(dom.tags("script")) == 1 and not dom.tags("img")
    assert not [a for _, a, _ in dom.elements if any(k.startswith("on") for k in a)]
    csp = next(a["content"] for a in dom.tags("meta") if a.get("http-equiv") == "Content-Security-Policy")
    script = page[page.index("<script>") + len("<script>"):page.index("</script>")]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert "default-src 'none'" in csp and f"script-src 'sha256-{digest}'" in csp  # the sort script, no other


# --- the report command --------------------------------------------------------------------------------

def test_scangrade_report_rebuilds_the_page_elsewhere_with_links_that_resolve(tmp_path, capsys):
    from grader.cli import main
    out = _write_batch(tmp_path, gpu_class()[:3], manifest=False)
    (out / "dave").mkdir()
    (out / "dave" / "result.json").write_text('{"schema": "scangrade.result", "schema_ver')  # cut short
    target = tmp_path / "pages" / "week3.html"
    assert main(["report", str(out), "--out", str(target), "--title", "CS 4 <scan> lab"]) == 0
    assert str(target) in capsys.readouterr().out
    page = target.read_text(encoding="utf-8")
    assert "<h1>CS 4 &lt;scan&gt; lab</h1>" in page and "could not be read" in page and "<code>dave</code>" in page
    assert "Config fingerprint" not in page  # no batch.json
    hrefs = [a["href"] for a in Dom(page).tags("a") if a["href"].endswith(LINKED_REPORTS)]
    assert hrefs and all((target.parent / h).resolve().is_file() for h in hrefs)
    assert f"../out/bob/{LINKED_REPORTS[0]}" in hrefs
    loaded = load_batch(out)
    rows, damaged = loaded.rows, loaded.damaged
    assert [sid for sid, _ in rows] == ["alice", "bob", "carol"] and damaged == ["dave"]


def test_scangrade_report_on_a_folder_without_results_is_a_usage_error(tmp_path, capsys):
    from grader.cli import main
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert "no <student>/result.json" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert "not a folder" in capsys.readouterr().err


# --- in a browser -------------------------------------------------------------------------------------

def _plots_in_dom(dom: _Dom) -> list[dict[str, str]]:
    plots = [a for a in dom.tags("svg") if "plot" in a.get("class", "").split()]
    for a in plots:
        assert float(a["width"].removesuffix("pt")) > 100 and float(a["height"].removesuffix("pt")) > 100
    return plots


def _blue_pixels(png: Path) -> int:
    """Pixels of the plots' bar and dot colour (#1f77b4) in a screenshot."""
    import matplotlib.image
    import numpy as np
    rgb = matplotlib.image.imread(str(png))[..., :3]
    return int(np.count_nonzero(np.all(np.abs(rgb - np.array([0x1F, 0x77, 0xB4]) / 255) < 0.04, axis=-1)))


@needs_chromium
def test_the_page_renders_in_chromium_with_plots_and_injected_markup_as_text(tmp_path):
    pytest.importorskip("matplotlib", reason="the plots need matplotlib (pip install scangrade[report])")
    page = write_class_report(_write_batch(tmp_path, gpu_class()), class_report_page)
    dom = Dom(chromium(tmp_path, page, "--dump-dom"))
    assert len(_plots_in_dom(dom)) == 6 and dom.inside("path", "svg") > 50
    text = "".join(dom.text)
    for sid in ("alice", "bob", "carol", "dave", EVIL_ID, "zoe"):
        assert sid in text
    assert "<script>document.title='pwned'</script>" in text
    assert dom.title == "scangrade class report"  # the injected script did not run
    assert len(dom.tags("script")) == 1 and not dom.tags("img")
    assert not [a for _, a, _ in dom.elements if any(k.startswith("on") for k in a)]
    groups = [a["id"] for a in dom.tags("details") if a.get("id", "").startswith("kind-")]
    assert groups[0] == "kind-wrong-result" and "kind-race" in groups and "kind-trap" in groups
    shot = tmp_path / "page.png"
    chromium(tmp_path, page, f"--screenshot={shot}", "--window-size=1200,2000")
    assert _blue_pixels(shot) > 5000  # the histograms' bars, drawn


def test_scangrade_batch_writes_the_class_report_of_a_small_class(tmp_path):
    from grader.cli import main
    root = tmp_path / "class"
    shutil.copytree(SOLUTIONS, root / "alice")
    (root / "bob").mkdir()
    shutil.copy(BROKEN / "part1_oob_write.cu", root / "bob" / "part1_naive.cu")
    shutil.copy(SOLUTIONS / "part2_blelloch.cu", root / "bob" / "part2_blelloch.cu")
    (root / "carol").mkdir()
    (root / "carol" / "notes.txt").write_text("forgot to upload")
    cfg = write_config(tmp_path, sizes={"part1_naive": [5], "part2_blelloch": [7]})
    out = tmp_path / "out"
    assert main(["batch", str(root), "--out", str(out), "--config", str(cfg), "--backend", "emulator",
                 "--jobs", "2"]) == 1
    page = out / REPORT_NAME
    written = page.read_text(encoding="utf-8")
    assert "3 (1 passed every case)" in written and "Config fingerprint" in written  # batch.json was there
    if CHROMIUM is None:
        pytest.skip("headless Chromium (Debian package chromium) is not installed: the page is not rendered")
    dom = Dom(chromium(tmp_path, page, "--dump-dom"))
    text = "".join(dom.text)
    assert all(sid in text for sid in ("alice", "bob", "carol")) and "emulator" in text
    groups = {a["id"] for a in dom.tags("details") if a.get("id", "").startswith("kind-")}
    assert groups == {"kind-out-of-bounds", "kind-missing"}
    assert len(_plots_in_dom(dom)) == 3  # two parts and the total


def test_the_scores_say_which_points_are_pending_a_gpu_not_lost():
    why = "not timed: the emulator backend cannot time kernels; performance points need a run on a GPU"
    failed = _part("part5_single_pass", "fail", (_case(1), _case(33, "fail", "out[0] = 1, expected 0",
                                                                 kind="mismatch")),
                   performance=Performance(0.0, 10.0, None, "not timed: performance is scored only when every case "
                                                            "passes"))
    rows = [("ann", _result("ann", [_passing("part1_naive"), _part5(None, why=why)], backend="emulator")),
            ("ben", _result("ben", [_passing("part1_naive"), failed], backend="emulator"))]
    assert [r.pending_points for _, r in rows] == [10.0, 0.0]  # ben's 10 are lost: his Part 5 failed
    page = class_report(rows, plots=False)
    scores = _section(page, "scores")
    of = {label: cell for label, cell in re.findall(r'<tr><td>(?:<b>)?([^<]+)(?:</b>)?</td><td class="num">(.*?)</td>',
                                                    scores)}
    assert of["Part 5: single pass"] == '12<br><span class="pending">10 pending a GPU run</span>'
    assert of["Total"] == '14<br><span class="pending">10 pending a GPU run</span>'
    assert of["Part 1: naive"] == "2"  # nothing of Part 1 waits for a GPU
    assert "In 1 of 2 results, graded on the CPU emulator" in scores and "up to 10 of the 14 points" in scores
    students = _section(page, "students")
    assert '14 <span class="pending">(10 pending)</span></td>' in students  # ann's row
    assert students.count("pending)") == 1  # ben's 10 are lost, not pending
    gpu = _section(class_report(gpu_class(), plots=False), "scores")
    assert "pending" not in gpu  # a GPU run has nothing pending


def test_the_histogram_of_points_names_the_pending_share():
    pytest.importorskip("matplotlib")
    why = "not timed: the emulator backend cannot time kernels"
    rows = [("ann", _result("ann", [_passing("part1_naive"), _part5(None, why=why)], backend="emulator"))]
    assert "points (of 14; 10 pending a GPU run)" in _section(class_report(rows, plots=True), "scores")


def test_the_challenge_is_at_most_one_part_and_its_title_says_so():
    from grader.assignment.parts import CHALLENGE_PART, PARTS
    challenge = [p.key for p in PARTS.values() if p.challenge]
    assert len(challenge) <= 1 and CHALLENGE_PART == (challenge[0] if challenge else None)
    assert [p.key for p in PARTS.values() if "(challenge)" in p.title] == challenge


def test_a_student_links_to_files_of_the_format_table_and_the_note_names_the_student_folder(tmp_path):
    assert LINKED_REPORTS and set(LINKED_REPORTS) <= {f.file for f in FORMATS.values() if f.file}
    page = class_report([("bob", _result("bob", [_passing("part1_naive")]))], plots=False)
    assert f'<a href="bob/{LINKED_REPORTS[0]}">bob</a>' in page
    assert f"<code>{STUDENT_FOLDER}/</code> folder is the version for them" in page


# --- names as written ----------------------------------------------------------------------------------

ZOE_ID = "zo_-m_ller_fd719cda4d"  # the batch's id of the folder zoë-müller (grader.classwork.submissions)


def test_a_student_is_shown_by_the_name_as_written_with_the_id_where_it_differs():
    rows = [(sid, _result(sid, [_passing("part1_naive")])) for sid in (ZOE_ID, "alice", "s1815", "bob")]
    manifest = {"students": [{"id": ZOE_ID, "submission": "zoë-müller", "name": "", "folder": "zoë-müller"},
                             {"id": "alice", "submission": "alice.zip", "name": "", "folder": "alice.zip"},
                             {"id": "s1815", "submission": "submission_7: s1815", "name": "<b>Ann</b> Lee",
                              "folder": "submission_7"}]}  # bob: a row the manifest does not name
    page = class_report(rows, manifest=manifest, plots=False)
    assert f'<a href="{ZOE_ID}/{LINKED_REPORTS[0]}">zoë-müller <span class="id">{ZOE_ID}</span></a>' in page
    assert f'<a href="alice/{LINKED_REPORTS[0]}">alice</a>' in page  # alice.zip's id is its name
    assert f'&lt;b&gt;Ann&lt;/b&gt; Lee <span class="id">s1815</span></a>' in page and "<b>Ann" not in page
    assert f'<a href="bob/{LINKED_REPORTS[0]}">bob</a>' in page
    assert "zoë-müller" not in class_report(rows, plots=False)  # without a manifest: ids only, as before


def test_scangrade_batch_and_report_show_a_folder_name_that_is_not_a_safe_id(tmp_path, capsys):
    """The name reaches the page through the batch's manifest: in the page the batch writes, and in
    the one ``scangrade report`` rebuilds; the gradebook's folder column has it too."""
    from grader.cli import main
    root = tmp_path / "class"
    for name in ("zoë-müller", "alice"):
        (root / name).mkdir(parents=True)
        (root / name / "notes.txt").write_text("no part file: nothing to compile")
    out = tmp_path / "out"
    assert main(["batch", str(root), "--out", str(out), "--config", str(write_config(tmp_path)), "--backend",
                 "emulator"]) == 1
    assert (out / ZOE_ID / "result.json").is_file()
    book = (out / "gradebook.csv").read_text(encoding="utf-8")
    assert any(line.startswith(f"{ZOE_ID},") and ",zoë-müller," in line for line in book.splitlines())
    rebuilt = tmp_path / "elsewhere" / "page.html"
    assert main(["report", str(out), "--out", str(rebuilt)]) == 0
    for page in (out / REPORT_NAME, rebuilt):
        text = page.read_text(encoding="utf-8")
        assert f'zoë-müller <span class="id">{ZOE_ID}</span></a>' in text
        assert f'/{LINKED_REPORTS[0]}">alice</a>' in text
