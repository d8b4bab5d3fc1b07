"""Batch grading a class: gradebook, per-student reports, resume, zips and Gradescope's export."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.backends import Selection
from grader.classwork.batch import batch
from grader.classwork.submissions import find_submissions
from grader.assignment.config import load_config
from grader.classwork.store import RESULT
from grader.render.formats import FORMATS, STUDENT_FOLDER, batch_reports, report_files
from tests.conftest import BROKEN, ROOT, SOLUTIONS, TEMPLATES, write_config

EMULATOR = Selection("emulator", "test")


def _class(tmp_path: Path) -> Path:
    root = tmp_path / "class"
    (root / "alice" / "work" / "scan").mkdir(parents=True)
    for f in SOLUTIONS.glob("*.cu"):
        shutil.copy(f, root / "alice" / "work" / "scan" / f.name)  # nested: found anyway
    shutil.copytree(TEMPLATES, root / "bob")
    with zipfile.ZipFile(root / "carol.zip", "w") as z:
        for f in SOLUTIONS.glob("*.cu"):
            z.write(f, f"carol/{f.name}")
        z.writestr("../../escaped.cu", "int x;")  # zip slip: must never be written outside
    (root / "dave").mkdir()
    for f in SOLUTIONS.glob("*.cu"):
        shutil.copy(f, root / "dave" / f.name)
    shutil.copy(BROKEN / "part1_hang.cu", root / "dave" / "part1_naive.cu")
    return root


def _config(tmp_path: Path, pace):
    """A small class's config; the hang's part_s is 8 s on an idle machine, scaled to this one now
    (tests/pace.py: a busy machine's compile must not run it out)."""
    return load_config(write_config(tmp_path, part_s=pace.seconds(8),
                                    sizes={"part1_naive": [5, 128], "part2_blelloch": [7]}))


def test_a_class_is_graded_into_a_gradebook_and_reports_even_with_a_hanging_submission(pace, tmp_path):
    root, out = _class(tmp_path), tmp_path / "out"
    rows = batch(root, out=out, cfg=_config(tmp_path, pace), selection=EMULATOR,
                 reports=batch_reports, jobs=2, checks=False)  # a hang, not a deadlock finding
    assert [sid for sid, _ in rows] == ["alice", "bob", "carol", "dave"]
    book = list(csv.DictReader((out / "gradebook.csv").open()))
    by_id = {r["student"]: r for r in book}
    # 3 cases a part: the configured sizes plus n = 1 and the one-block maximum, always graded
    assert by_id["alice"]["total"] == by_id["alice"]["max"] == "6"
    assert by_id["carol"]["total"] == "6" and by_id["bob"]["total"] == "0"
    assert by_id["dave"]["part1_naive"] == "0" and by_id["dave"]["part2_blelloch"] == "3"
    assert [r["status"] for r in book] == ["pass", "fail", "pass", "fail"]
    assert all(r["backend"] == "emulator" for r in book)
    assert [(r["folder"], r["name"], r["email"]) for r in book] == [  # no export: the entry only
        ("alice", "", ""), ("bob", "", ""), ("carol.zip", "", ""), ("dave", "", "")]
    for sid in by_id:
        for name in (RESULT, *report_files()):
            assert (out / sid / name).is_file(), (sid, name)
        # the student-safe set: every student-facing format, no result.json, no JUnit (hidden cases in full)
        student = sorted(p.name for p in (out / sid / STUDENT_FOLDER).iterdir())
        assert student == sorted(report_files(student=True)) and RESULT not in student
        assert FORMATS["junit"].file not in student
    dave = json.loads((out / "dave" / "result.json").read_text())
    assert dave["parts"][0]["status"] == "timeout"
    assert (out / "summary.txt").read_text().startswith("4 submissions")
    assert not (tmp_path / "escaped.cu").exists() and not list(tmp_path.rglob("escaped.cu"))


def test_resume_skips_intact_results_and_regrades_broken_ones(pace, tmp_path):
    root, out = _class(tmp_path), tmp_path / "out"
    shutil.rmtree(root / "dave")
    cfg = _config(tmp_path, pace)
    batch(root, out=out, cfg=cfg, selection=EMULATOR, reports=batch_reports, jobs=1)
    (out / "bob" / "result.json").write_text('{"schema": "scangrade.result", "schema_ver')  # cut short
    before = (out / "alice" / "result.json").read_text()
    seen = []
    batch(root, out=out, cfg=cfg, selection=EMULATOR, reports=batch_reports, resume=True, jobs=1,
          on_done=lambda sid, result, resumed: seen.append((sid, resumed)))
    assert sorted(seen) == [("alice", True), ("bob", False), ("carol", True)]
    assert (out / "alice" / "result.json").read_text() == before
    assert json.loads((out / "bob" / "result.json").read_text())["schema_version"] == 2


def test_gradescope_export_metadata_names_the_rows(tmp_path):
    root = tmp_path / "export"
    shutil.copytree(SOLUTIONS, root / "submission_101")
    (root / "submission_metadata.yml").write_text(
        "submission_101:\n  :submitters:\n  - :name: Ada\n    :sid: s1815\n    :email: ada@example.edu\n")
    subs = find_submissions(root, work=tmp_path / "work")
    assert [(s.id, s.path) for s in subs] == [("s1815", tmp_path / "work" / "s1815")]  # the grader's copy
    assert (subs[0].person.name, subs[0].person.email, subs[0].person.folder) == \
        ("Ada", "ada@example.edu", "submission_101")
    assert sorted(f.name for f in subs[0].path.iterdir()) == sorted(f.name for f in SOLUTIONS.glob("*.cu"))


def test_the_batch_command_prints_the_summary_and_exits_1_when_someone_fails(tmp_path, capsys):
    from grader.cli import main
    root = _class(tmp_path)
    shutil.rmtree(root / "dave")
    cfg = write_config(tmp_path, sizes={"part1_naive": [5]})
    assert main(["batch", str(root), "--out", str(tmp_path / "o"), "--config", str(cfg),
                 "--backend", "emulator", "--jobs", "2"]) == 1
    printed = capsys.readouterr()
    assert printed.out.startswith("3 submissions") and "gradebook:" in printed.out
    assert "[3/3]" in printed.err
    # without a terminal, each submission says it started before its result (issue 52: nothing was
    # printed until a submission ended)
    lines = printed.err.splitlines()
    for sid in ("alice", "bob", "carol"):
        began = next(i for i, line in enumerate(lines) if line.startswith(f"grading {sid} ("))
        ended = next(i for i, line in enumerate(lines) if line.startswith("[") and f"] {sid}: " in line)
        assert began < ended, lines
    assert main(["batch", str(tmp_path / "none"), "--out", str(tmp_path / "o2"), "--config", str(cfg)]) == 2


def test_every_gradebook_row_has_the_same_maximum_refused_or_graded(tmp_path):
    """A refused submission (a zip intake cannot read) and one whose parts never ran are worth the
    same points possible as one that was graded: Part 3's profile and timing points included."""
    path = write_config(tmp_path, sizes={"part3_conflict_free": [7]})
    path.write_text(path.read_text() + "    timing:\n      sizes: [256]\n      points: 2\n"
                                       "    profile:\n      size: 64\n      points: 4\n      reference_wavefronts: 10\n")
    cfg = load_config(path)
    root, out = tmp_path / "class", tmp_path / "out"
    (root / "frank").mkdir(parents=True)
    (root / "frank" / "notes.txt").write_text("no part file here")  # graded: the part is missing
    (root / "eve.zip").write_bytes(b"not a zip at all")  # refused by intake
    rows = batch(root, out=out, cfg=cfg, selection=EMULATOR, reports=batch_reports, jobs=1, checks=False)
    assert [sid for sid, _ in rows] == ["eve", "frank"]
    book = {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open())}
    assert "not a readable zip" in dict(rows)["eve"].parts[0].message
    # 3 cases (7, n = 1 and the one-block maximum) + 2 performance + 4 profile points
    assert book["eve"]["max"] == book["frank"]["max"] == "9"
    assert dict(rows)["eve"].parts[0].profile.message.startswith("not profiled: not graded:")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux) to look for processes left behind")
def test_ctrl_c_stops_the_batch_ends_its_workers_writes_what_is_done_and_says_how_to_resume(tmp_path):
    from tests.grading.test_runner_cleanup import _processes_mentioning, _wait_for, default_sigint
    root, out = tmp_path / "class", tmp_path / "out"
    (root / "alice").mkdir(parents=True)
    shutil.copy(SOLUTIONS / "part1_naive.cu", root / "alice")
    for sid in ("zara", "zoe"):  # never finish: their workers run when Ctrl-C comes
        (root / sid).mkdir()
        shutil.copy(BROKEN / "part1_hang.cu", root / sid / "part1_naive.cu")
    config = tmp_path / "config.yaml"
    config.write_text("block_size: 128\nseed: 7\ntimeouts:\n  part_s: 900\n  case_s: 900\n"
                      "parts:\n  part1_naive:\n    points_per_case: 1\n    sizes: [33]\n")
    scratch = tmp_path / "scratch"  # every temporary folder of this batch, so its processes can be found
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    err = tmp_path / "stderr.txt"
    with err.open("wb") as err_f:
        grader = subprocess.Popen([sys.executable, "-m", "grader", "batch", str(root), "--out", str(out),
                                   "--config", str(config), "--backend", "emulator", "--no-checks", "--jobs", "2",
                                   "--allow-unsandboxed"], env=env, stdout=subprocess.DEVNULL, stderr=err_f,
                                  start_new_session=True, preexec_fn=default_sigint)
    try:
        # alice is done (a cold emulator cache first builds the runtime: minutes on a slow machine)
        assert _wait_for(lambda: b"[1/3] alice" in err.read_bytes() or grader.poll() is not None, 600), \
            err.read_text()
        assert grader.poll() is None, err.read_text()
        assert _processes_mentioning(scratch), "no worker to stop"
        os.kill(grader.pid, signal.SIGINT)
        assert grader.wait(timeout=120) == 130
        assert _wait_for(lambda: not _processes_mentioning(scratch), 30), \
            [Path(f"/proc/{p}/cmdline").read_bytes() for p in _processes_mentioning(scratch)]
    finally:
        for pid in _processes_mentioning(scratch):
            os.kill(pid, signal.SIGKILL)
        if grader.poll() is None:
            grader.kill()
    printed = err.read_text()
    assert "Traceback" not in printed, printed
    last = printed.strip().splitlines()[-1]
    assert last.startswith("scangrade: interrupted: 1 of 3 submissions graded") and "--resume" in last, printed
    assert str(out) in last
    assert [r["student"] for r in csv.DictReader((out / "gradebook.csv").open())] == ["alice"]
    assert (out / "alice" / "result.json").is_file()
    assert not (out / "zara" / "result.json").exists() and not (out / "zoe" / "result.json").exists()
    assert not (out / "batch.json").exists() and not (out / ".work").exists()  # not a finished run


def test_batch_refuses_an_output_folder_inside_the_class_and_jobs_below_1_with_one_line(tmp_path, capsys):
    from grader.cli import main
    root = tmp_path / "class"
    shutil.copytree(SOLUTIONS, root / "alice")
    cfg = write_config(tmp_path, sizes={"part1_naive": [5]})
    for out, extra in ((root / "grades", []), (root, []), (tmp_path / "o", ["--jobs", "0"]),
                       (tmp_path / "o", ["--jobs", "-2"]), (root / "grades", ["--slurm", "--no-submit"])):
        assert main(["batch", str(root), "--out", str(out), "--config", str(cfg), "--backend", "emulator",
                     *extra]) == 2, (out, extra)
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and err.startswith("scangrade: error: --"), err
        assert ("inside the class folder" in err) != bool(extra and extra[0] == "--jobs"), err
    assert not (root / "grades").exists() and not (tmp_path / "o").exists()


def test_every_member_of_a_group_submission_gets_a_row_graded_once(tmp_path):
    from grader.classwork.submissions import count_submissions
    root = tmp_path / "export"
    for name in ("submission_101", "submission_102"):
        (root / name).mkdir(parents=True)
        shutil.copy(SOLUTIONS / "part1_naive.cu", root / name)
    (root / "submission_metadata.yml").write_text(
        "submission_101:\n  :submitters:\n  - :name: Ada Lovelace\n    :sid: s1815\n    :email: ada@example.edu\n"
        "  - :name: Grace\n    :sid: s1906\n"
        "submission_102:\n  :submitters:\n  - :name: Alan\n    :email: alan@example.edu\n")
    assert count_submissions(root) == 3
    seen = []
    rows = batch(root, out=tmp_path / "out", cfg=load_config(write_config(tmp_path, sizes={"part1_naive": [5]})),
                 selection=EMULATOR, reports=batch_reports, jobs=2, checks=False,
                 on_done=lambda sid, result, resumed: seen.append(sid))
    assert [sid for sid, _ in rows] == ["s1815", "s1906", "alan@example.edu"] and sorted(seen) == sorted(dict(rows))
    book = {r["student"]: r for r in csv.DictReader((tmp_path / "out" / "gradebook.csv").open())}
    assert set(book) == {"s1815", "s1906", "alan@example.edu"} and all(r["status"] == "pass" for r in book.values())
    # the export's name and email, and the submission's folder in it, are kept beside the id
    assert {sid: (r["name"], r["email"], r["folder"]) for sid, r in book.items()} == {
        "s1815": ("Ada Lovelace", "ada@example.edu", "submission_101"), "s1906": ("Grace", "", "submission_101"),
        "alan@example.edu": ("Alan", "alan@example.edu", "submission_102")}
    students = json.loads((tmp_path / "out" / "batch.json").read_text())["students"]
    assert [(s["id"], s["name"], s["email"], s["folder"]) for s in students][0] == \
        ("s1815", "Ada Lovelace", "ada@example.edu", "submission_101")  # for scangrade merge
    ada, grace = dict(rows)["s1815"], dict(rows)["s1906"]
    assert ada.started_at == grace.started_at and ada.parts == grace.parts  # one grading, two rows
    for sid in book:
        assert json.loads((tmp_path / "out" / sid / "result.json").read_text())["submission"] == sid


def test_malformed_gradescope_metadata_fails_only_its_entries(tmp_path, capsys):
    from grader.cli import main
    root = tmp_path / "export"
    for n in range(1, 7):
        (root / f"submission_{n}").mkdir(parents=True)
        shutil.copy(SOLUTIONS / "part1_naive.cu", root / f"submission_{n}")
    (root / "submission_metadata.yml").write_bytes(
        b"submission_1:\n- :sid: s1\n"                                 # an entry that is a list
        b"submission_2:\n  :submitters:\n    :sid: s2\n"                # :submitters a mapping
        b"submission_3:\n  :submitters: 42\n"                           # :submitters a number
        b"submission_4:\n  :submitters:\n  - :name: Zo\xeb\n    :sid: s4\n"  # not UTF-8 in a name: fine
        b"submission_5:\n  :submitters:\n  - :sid: s\xff5\n"              # not UTF-8 in the id
        b"submission_6:\n  :submitters:\n  - :sid: 6006\n")            # a number as id
    cfg = write_config(tmp_path, sizes={"part1_naive": [5]})
    out = tmp_path / "out"
    assert main(["batch", str(root), "--out", str(out), "--config", str(cfg), "--backend", "emulator", "--no-checks",
                 "--jobs", "2", "--allow-unsandboxed"]) == 1
    assert "Traceback" not in capsys.readouterr().err
    book = {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open())}
    assert {k: v["status"] for k, v in book.items()} == {
        "submission_1": "fail", "submission_2": "fail", "submission_3": "fail", "s4": "pass", "submission_5": "fail",
        "6006": "pass"}
    for sid, where in (("submission_1", "entry 'submission_1'"), ("submission_2", ":submitters"),
                       ("submission_3", ":submitters"), ("submission_5", "not UTF-8")):
        message = json.loads((out / sid / "result.json").read_text())["parts"][0]["message"]
        assert message.startswith("not graded: submission_metadata.yml, entry") and where in message, message
    (root / "submission_metadata.yml").write_text("submission_1: [unclosed\n")
    assert main(["batch", str(root), "--out", str(tmp_path / "o2"), "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "submission_metadata.yml, line" in err and "not valid YAML" in err


def test_no_gradebook_cell_or_id_starts_a_spreadsheet_formula(tmp_path):
    from grader.classwork.gradebook import FORMULA_STARTS, spreadsheet_cell
    root = tmp_path / "class"
    for name in ("@SUM(A1)", "=1+2", "+cmd", "-2+3", "\tx", "\rcr", "@-@x"):
        (root / name).mkdir(parents=True)
        shutil.copy(SOLUTIONS / "part1_naive.cu", root / name)
    rows = batch(root, out=tmp_path / "out", cfg=load_config(write_config(tmp_path, sizes={"part1_naive": [5]})),
                 selection=EMULATOR, reports=batch_reports, jobs=2, checks=False)
    ids = [sid for sid, _ in rows]
    # a name that is not a safe id as it is gets a hash of itself (never another's plain name: a squat)
    assert any(i.startswith("SUM_A1_") for i in ids) and len(ids) == 7
    assert not [i for i in ids if i.startswith(FORMULA_STARTS)]
    for row in csv.reader((tmp_path / "out" / "gradebook.csv").open()):
        assert not [cell for cell in row if cell.startswith(FORMULA_STARTS)], row
    for text in ("=HYPERLINK(\"http://x\")", "+1", "-cmd", "@A1", "\t=1", "\r=1"):
        assert spreadsheet_cell(text) == "'" + text
    assert [spreadsheet_cell(t) for t in ("-1", "-0.5", "alice", "")] == ["-1", "-0.5", "alice", ""]


def test_a_students_folder_written_again_loses_the_temporary_files_of_a_killed_run(tmp_path):
    """A batch killed outright (SIGKILL) while write_atomic wrote a report leaves its temporary file;
    the next write of that student's folder (--resume grades the student again: result.json is
    written last, so it is absent) removes it and writes every report whole."""
    from grader.classwork.store import write_reports
    from grader.core.results import SubmissionResult
    folder = tmp_path / "dan"
    (folder / "student").mkdir(parents=True)
    (folder / ".report.md.16593.139776024983232.tmp").write_text("half a rep")
    (folder / "student" / ".report.md.16593.1.tmp").write_text("half")
    result = SubmissionResult(submission="dan", backend="emulator", backend_reason="test", device={},
                              config="c.yaml", backend_times_kernels=False, backend_uses_gpus=False, seed=1,
                              block_size=512, parts=(), scangrade_version="0", started_at="", elapsed_s=1.0)
    write_reports(result, folder, {"report.md": "# dan\n", "student/report.md": "# dan\n"})
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == sorted(
        [RESULT, "report.md", "student/report.md"])
