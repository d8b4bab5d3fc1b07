"""A class's ids cannot swap grades, and ``batch --resume`` trusts a saved result only for the same grading.

An id is made of a submission's own name (:func:`grader.classwork.submissions.submission_ids`):
a folder ``-alice`` beside ``alice`` cannot take alice's gradebook row, and a submission that comes
late, whose name reads like others', changes nobody's id (issue 38: ``Zoé``, ``Zoë``, then a late
``Zoá`` once handed Zoé's saved 3/3 to Zoá). A saved result is kept on ``--resume`` only when it is
of the same submission (its name and the hash of its part files), config, private config, backend
and checks; any other is graded again, and the batch says so.

These grade for real, on the emulator, with the smallest config: Part 1 at one size.
"""

from __future__ import annotations

import csv
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from grader.backends import Selection
from grader.classwork.batch import batch
from grader.classwork.submissions import find_submissions, submission_ids
from grader.assignment.config import load_config, load_private
from grader.render.formats import batch_reports
from tests.conftest import SOLUTIONS, TEMPLATES, write_config

EMULATOR = Selection("emulator", "test")
CORRECT, TEMPLATE = SOLUTIONS / "part1_naive.cu", TEMPLATES / "part1_naive.cu"


def _submit(root: Path, name: str, source: Path) -> None:
    (root / name).mkdir(parents=True, exist_ok=True)
    shutil.copy(source, root / name / "part1_naive.cu")


def _cfg(folder: Path, sizes=(5,)):
    folder.mkdir(parents=True, exist_ok=True)
    return load_config(write_config(folder, sizes={"part1_naive": list(sizes)}))


def _grade(root: Path, out: Path, cfg, *, resume: bool = False) -> tuple[dict, list[tuple[str, str]], list]:
    """Batch ``root`` into ``out``: ``({id: result}, [(id, note)], [(id, resumed)])``."""
    notes, done = [], []
    rows = batch(root, out=out, cfg=cfg, selection=EMULATOR, reports=batch_reports, resume=resume, jobs=2,
                 checks=False, on_done=lambda sid, r, resumed: done.append((sid, resumed)),
                 on_note=lambda sid, note: notes.append((sid, note)))
    return dict(rows), sorted(notes), sorted(done)


def _book(out: Path) -> dict[str, dict]:
    return {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open(encoding="utf-8"))}


def _by_name(out: Path) -> dict[str, str]:
    """The class folder's name of each submission -> its gradebook row's id (the manifest's record)."""
    return {s["submission"]: s["id"] for s in json.loads((out / "batch.json").read_text())["students"]}


# ---------------------------------------------------------------------------------------------- ids

def test_an_id_is_made_of_its_own_name_never_of_its_position_among_others():
    alone = submission_ids({"Zoé": "Zoé"})["Zoé"][0]
    crowd = submission_ids({"Zoá": "Zoá", "Zoé": "Zoé", "Zoë": "Zoë"})
    assert crowd["Zoé"][0] == alone and alone.startswith("Zo_")  # the same whoever else submits
    assert len({sid.lower() for sid, _ in crowd.values()}) == 3
    assert all(note.startswith("id collision:") for _, note in crowd.values())
    assert submission_ids({"alice": "alice", "bob": "bob"}) == {"alice": ("alice", ""), "bob": ("bob", "")}
    # a name that is a safe id already keeps it; one that is not never becomes another's plain name
    ids = submission_ids({"alice": "alice", "-alice": "-alice", "@SUM(A1)": "@SUM(A1)"})
    assert ids["alice"][0] == "alice" and ids["-alice"][0].startswith("alice_") and ids["@SUM(A1)"][0].startswith("SUM_A1_")
    # a name made safe says so, with its id (issue 52: zoë-müller's row had no note)
    (zoe, note), = submission_ids({"zoë-müller": "zoë-müller"}).values()
    assert zoe.startswith("zo_-m_ller_") and note == (f"'zoë-müller' is not a plain file name: its id is {zoe!r} "
                                                      "(its safe form and a hash of the name)")
    # names that read alike without regard to case (a file system may not tell them apart): none keeps it
    ids = submission_ids({"bob": "bob", "Bob.zip": "Bob"})
    assert ids["bob"][0] != "bob" and ids["Bob.zip"][0] != "Bob" and ids["bob"][0].lower() != ids["Bob.zip"][0].lower()
    # a name that is another's hashed id gets a hash of its own, and a note
    squat = ids["Bob.zip"][0]
    again = submission_ids({"bob": "bob", "Bob.zip": "Bob", squat: squat})
    assert again["Bob.zip"][0] != again[squat][0] and again[squat][1].startswith("id collision:")
    # a name of the batch's own output
    sid, note = submission_ids({"gradebook.csv": "gradebook.csv"})["gradebook.csv"]
    assert sid.startswith("gradebook.csv_") and "batch's own output" in note


def test_a_folder_named_minus_alice_does_not_take_alices_row_and_the_collision_is_reported(tmp_path):
    root, out = tmp_path / "class", tmp_path / "out"
    _submit(root, "alice", CORRECT)
    _submit(root, "-alice", TEMPLATE)
    rows, _, _ = _grade(root, out, _cfg(tmp_path))
    by_name = _by_name(out)
    assert by_name["alice"] == "alice" and by_name["-alice"].startswith("alice_")
    book = _book(out)
    assert book["alice"]["status"] == "pass" and book["alice"]["total"] == book["alice"]["max"]
    assert book[by_name["-alice"]]["status"] == "fail" and book[by_name["-alice"]]["total"] == "0"
    for sid in ("alice", by_name["-alice"]):
        assert book[sid]["note"].startswith("id collision:") and "'-alice'" in book[sid]["note"], book[sid]
    summary = (out / "summary.txt").read_text()
    assert "2 row(s) with a note" in summary and f"{by_name['-alice']}: id collision:" in summary
    assert json.loads((out / "alice" / "result.json").read_text())["batch"]["submission"] == "alice"


def test_a_late_colliding_submission_on_resume_hands_no_grade_to_another_student(tmp_path):
    root, out, cfg = tmp_path / "class", tmp_path / "out", _cfg(tmp_path)
    _submit(root, "Zoé", CORRECT)
    _submit(root, "Zoë", TEMPLATE)
    _grade(root, out, cfg)
    first = _by_name(out)
    _submit(root, "Zoá", TEMPLATE)  # late, and broken
    rows, notes, done = _grade(root, out, cfg, resume=True)
    now = _by_name(out)
    assert now["Zoé"] == first["Zoé"] and now["Zoë"] == first["Zoë"]  # nobody's id moved
    assert done == sorted([(first["Zoé"], True), (first["Zoë"], True), (now["Zoá"], False)]) and notes == []
    book = _book(out)
    assert book[now["Zoé"]]["status"] == "pass" and book[now["Zoé"]]["total"] == book[now["Zoé"]]["max"]
    assert book[now["Zoá"]]["total"] == "0" and book[now["Zoë"]]["total"] == "0"
    for name, sid in now.items():  # each row's result is of its own submission
        assert json.loads((out / sid / "result.json").read_text())["batch"]["submission"] == name
    assert all(book[sid]["note"].startswith("id collision:") for sid in now.values())


# ---------------------------------------------------------------------------------------------- resume

@pytest.fixture
def graded(tmp_path):
    """A class of two, graded once: alice passes, bob does not."""
    root, out, cfg = tmp_path / "class", tmp_path / "out", _cfg(tmp_path)
    _submit(root, "alice", CORRECT)
    _submit(root, "bob", TEMPLATE)
    rows, notes, done = _grade(root, out, cfg)
    assert done == [("alice", False), ("bob", False)] and notes == []
    return root, out, cfg


def test_resume_keeps_the_results_of_the_same_grading(graded):
    root, out, cfg = graded
    before = (out / "alice" / "result.json").read_bytes()
    rows, notes, done = _grade(root, out, cfg, resume=True)
    assert done == [("alice", True), ("bob", True)] and notes == []
    assert (out / "alice" / "result.json").read_bytes() == before
    assert "graded again" not in (out / "summary.txt").read_text()


def test_resume_grades_again_under_another_config_and_says_so(graded, tmp_path):
    root, out, _ = graded
    other = _cfg(tmp_path / "other", sizes=(5, 7))
    rows, notes, done = _grade(root, out, other, resume=True)
    assert done == [("alice", False), ("bob", False)]
    assert [sid for sid, _ in notes] == ["alice", "bob"] and all("another config" in n for _, n in notes), notes
    assert len(rows["alice"].parts[0].cases) == 4  # 1, 5, 7 and the one-block maximum: the new config's
    assert "graded again on --resume: alice: its saved result was graded under another config" in \
        (out / "summary.txt").read_text()


def test_resume_grades_again_under_another_private_config(graded, tmp_path):
    root, out, cfg = graded
    private = tmp_path / "private.yaml"
    private.write_text("seed: 99\nparts:\n  part1_naive:\n    hidden_sizes: [77]\n")
    rows, notes, done = _grade(root, out, load_private(cfg, private), resume=True)
    assert done == [("alice", False), ("bob", False)] and all("another config" in n for _, n in notes), notes
    assert [c.visibility for c in rows["alice"].parts[0].cases].count("hidden") == 1
    private.write_text("seed: 99\nparts:\n  part1_naive:\n    hidden_sizes: [78]\n")  # only a hidden size differs
    rows, notes, done = _grade(root, out, load_private(cfg, private), resume=True)
    assert done == [("alice", False), ("bob", False)] and len(notes) == 2


def test_resume_grades_again_a_submission_that_changed(graded):
    root, out, cfg = graded
    shutil.copy(CORRECT, root / "bob" / "part1_naive.cu")  # bob fixed his file after the first run
    rows, notes, done = _grade(root, out, cfg, resume=True)
    assert done == [("alice", True), ("bob", False)]
    assert notes == [("bob", "graded again: its part files changed since its saved result was graded")]
    assert _book(out)["bob"]["status"] == "pass"


def test_resume_grades_again_a_saved_result_of_another_submission_or_without_a_record(graded):
    root, out, cfg = graded
    saved = json.loads((out / "alice" / "result.json").read_text())
    (out / "bob" / "result.json").write_text(json.dumps(saved))  # alice's result in bob's folder
    del saved["batch"]
    (out / "alice" / "result.json").write_text(json.dumps(saved))  # a result of an earlier scangrade
    rows, notes, done = _grade(root, out, cfg, resume=True)
    assert done == [("alice", False), ("bob", False)]
    assert notes == [("alice", "graded again: its saved result does not record what it graded (an earlier "
                               "scangrade wrote it)"),
                     ("bob", "graded again: its saved result is of another submission ('alice'; this one is 'bob')")]
    assert _book(out)["bob"]["status"] == "fail"


def test_find_submissions_records_each_name(tmp_path):
    root = tmp_path / "class"
    _submit(root, "alice", CORRECT)
    _submit(root, "Zoé", CORRECT)
    subs = {s.name: s for s in find_submissions(root, work=tmp_path / "work")}
    assert subs["alice"].id == "alice" and subs["alice"].collision == ""
    # renamed, and no other reads as it: a note gives its id (issue 52)
    assert subs["Zoé"].id.startswith("Zo_") and subs["Zoé"].collision.startswith("'Zoé' is not a plain file name")


def test_a_late_name_that_reads_like_one_graded_moves_both_and_the_old_folder_is_named_not_read(tmp_path):
    from grader.classwork.store import load_batch
    root, out, cfg = tmp_path / "class", tmp_path / "out", _cfg(tmp_path)
    _submit(root, "alice", CORRECT)
    _grade(root, out, cfg)
    with zipfile.ZipFile(root / "Alice.zip", "w") as z:  # reads as alice, case aside
        z.write(TEMPLATE, "part1_naive.cu")
    rows, notes, done = _grade(root, out, cfg, resume=True)
    ids = _by_name(out)
    assert "alice" not in rows and ids["alice"] != "alice" and ids["Alice.zip"] != "alice"  # neither is "alice" now
    assert done == sorted([(ids["alice"], False), (ids["Alice.zip"], False)])  # graded afresh: no saved result there
    assert rows[ids["alice"]].passed and not rows[ids["Alice.zip"]].passed
    assert "folders of an earlier run, not in this gradebook (kept" in (out / "summary.txt").read_text()
    assert (out / "alice" / "result.json").is_file() and sorted(dict(load_batch(out).rows)) == sorted(ids.values())
