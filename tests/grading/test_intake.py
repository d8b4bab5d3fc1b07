"""Submission intake: links refused, caps, safe ids and output names, BOMs and encodings, misnamed
part files, an empty batch."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shutil
import stat
import struct
import threading
import zipfile
from pathlib import Path

import pytest

import grader.grading.intake as intake
from grader.backends import Selection
from grader.classwork.batch import batch
from grader.classwork.submissions import find_submissions
from grader.assignment.config import load_config
from grader.core.errors import SubmissionError, UsageError
from grader.render.formats import student_reports
from grader.grading.runner import grade
from grader.grading.intake import Absent, read_source, resolve_parts, resolve_submission
from tests.conftest import SOLUTIONS, write_config

EMULATOR = Selection("emulator", "test")
PART1 = (SOLUTIONS / "part1_naive.cu").read_bytes()


def _part1_only(tmp_path: Path):
    return load_config(write_config(tmp_path, part_s=60, sizes={"part1_naive": [5]}))


def _link_zip(path: Path, name: str, target: str) -> None:
    """A zip whose entry ``name`` is a symbolic link to ``target`` (as Info-ZIP stores one)."""
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(info, target)


# --- 4: links, caps, names --------------------------------------------------------------------

def test_a_linked_part_file_is_refused_in_a_folder_and_in_a_zip_and_never_read(tmp_path):
    root = tmp_path / "class"
    (root / "bob").mkdir(parents=True)
    (root / "bob" / "part1_naive.cu").write_bytes(PART1)
    (root / "mallory").mkdir()
    os.symlink(root / "bob" / "part1_naive.cu", root / "mallory" / "part1_naive.cu")  # a classmate's file
    os.symlink("/etc/passwd", root / "mallory" / "part2_blelloch.cu")
    _link_zip(root / "trudy.zip", "trudy/part1_naive.cu", "/etc/passwd")
    subs = {s.id: s for s in find_submissions(root, work=tmp_path / "work")}
    for sid, key in (("mallory", "part1_naive"), ("mallory", "part2_blelloch"), ("trudy", "part1_naive")):
        note = subs[sid].notes[key]
        assert note.status == "error" and "symbolic link" in note.message and "not read" in note.message
        assert not (subs[sid].path / f"{key}.cu").exists()
    assert (subs["bob"].path / "part1_naive.cu").read_bytes() == PART1
    # graded in place (scangrade grade FOLDER): the same refusal
    files = resolve_submission(root / "mallory", ["part1_naive", "part2_blelloch"])
    assert all(isinstance(v, Absent) and v.status == "error" and "symbolic link" in v.message
               for v in files.values())



def test_a_hard_linked_part_file_is_refused_in_a_batch_and_in_place_and_never_read(tmp_path):
    # Hard links to the reference solution and to the private config: the same files under a
    # student's part names (a symbolic-link check does not see them).
    reference = tmp_path / "reference" / "part1_naive.cu"
    reference.parent.mkdir()
    reference.write_bytes(PART1)
    private = tmp_path / "private.yaml"
    private.write_text("SGSECRETWORD: the first word of the private config\nseed: 123\n")
    root = tmp_path / "class"
    (root / "mallory").mkdir(parents=True)
    os.link(reference, root / "mallory" / "part1_naive.cu")
    os.link(private, root / "mallory" / "part2_blelloch.cu")
    subs = {s.id: s for s in find_submissions(root, work=tmp_path / "work")}
    for key in ("part1_naive", "part2_blelloch"):
        note = subs["mallory"].notes[key]
        assert note.status == "error" and "hard links" in note.message and "not read" in note.message, note
        assert not (subs["mallory"].path / f"{key}.cu").exists()
    files = resolve_submission(root / "mallory", ["part1_naive", "part2_blelloch"])
    for key in ("part1_naive", "part2_blelloch"):
        assert isinstance(files[key], Absent) and files[key].status == "error" and "hard links" in files[key].message
    result = grade(root / "mallory", cfg=_part1_only(tmp_path), selection=EMULATOR, parts=["part1_naive"])
    part = result.parts[0]
    assert part.status == "error" and "hard links" in part.message and "SGSECRETWORD" not in result.to_json()
    assert part.points == 0
    # named alone on the command line, a file is graded whatever its links (whoever typed it chose it)
    assert resolve_parts(root / "mallory" / "part1_naive.cu", ["part1_naive"]) == {
        "part1_naive": root / "mallory" / "part1_naive.cu"}


def _in_thread(call, wait_s: float = 300.0):
    """``call()``'s result, run in a thread that may take ``wait_s`` seconds (an intake that hangs
    fails the test instead of hanging it); None when it did not finish."""
    box = []
    thread = threading.Thread(target=lambda: box.append(call()), daemon=True)
    thread.start()
    thread.join(wait_s)
    return box[0] if box else None


def test_a_fifo_named_like_a_zip_is_refused_at_once_and_the_batch_goes_on(tmp_path):
    root = tmp_path / "class"
    (root / "bob").mkdir(parents=True)
    (root / "bob" / "part1_naive.cu").write_bytes(PART1)
    fifo = root / "x.zip"
    os.mkfifo(fifo)  # nothing ever writes it: opening it to read would block for good
    try:
        subs = _in_thread(lambda: {s.id: s for s in find_submissions(root, work=tmp_path / "work")})
        assert subs is not None, "intake hangs on a FIFO named x.zip"
        assert "named pipe" in subs["x"].refused and "not read" in subs["x"].refused, subs["x"]
        assert not subs["bob"].refused and (subs["bob"].path / "part1_naive.cu").read_bytes() == PART1
        with pytest.raises(SubmissionError, match="named pipe"):
            read_source(fifo)
    finally:  # release a reader left blocked in open() by a failing run
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def test_a_submission_whose_reading_does_not_end_is_refused_at_the_intake_deadline(tmp_path, monkeypatch):
    # A file system that hangs is stood in for by a snapshot that waits on an event.
    root = tmp_path / "class"
    for name in ("alice", "bob"):
        (root / name).mkdir(parents=True)
        (root / name / "part1_naive.cu").write_bytes(PART1)
    release = threading.Event()
    honest = intake.snapshot_folder

    def hangs_for_alice(folder, dest):
        if folder.name == "alice":
            release.wait()
        return honest(folder, dest)

    monkeypatch.setattr(intake.batch_entry, "snapshot_folder", hangs_for_alice)
    monkeypatch.setattr(intake.limits, "INTAKE_S", 5.0)  # bob's reading takes milliseconds
    try:
        subs = _in_thread(lambda: {s.id: s for s in find_submissions(root, work=tmp_path / "work")})
    finally:
        release.set()
    assert subs is not None, "intake waits for a submission without end"
    assert "took longer than 5 s" in subs["alice"].refused and subs["alice"].path.is_dir()
    assert not subs["bob"].refused and (subs["bob"].path / "part1_naive.cu").read_bytes() == PART1

def test_links_oversized_files_and_hostile_names_fail_only_their_own_submission(tmp_path, monkeypatch):
    root, out = tmp_path / "class", tmp_path / "out"
    root.mkdir()
    (root / "mallory").mkdir()
    os.symlink("/etc/passwd", root / "mallory" / "part1_naive.cu")
    (root / "gradebook.csv").mkdir()  # a student folder named like the batch's own outputs
    (root / "gradebook.csv" / "part1_naive.cu").write_bytes(b"x" * (intake.limits.MAX_SOURCE_BYTES + 1))
    (root / "summary.txt.zip").write_bytes(b"not a zip")
    os.symlink("/etc", root / "linked")  # a whole submission that is a link
    deep = root / "deep"
    d = deep
    for i in range(200):
        d = d / "d"
    d.mkdir(parents=True)
    (d / "part1_naive.cu").write_bytes(PART1)
    (root / os.fsdecode(b"caf\xe9")).mkdir()  # non-UTF-8 names, of the submission and of a file in it
    (root / os.fsdecode(b"caf\xe9") / os.fsdecode(b"part1_na\xefve.cu")).write_bytes(PART1)
    with zipfile.ZipFile(root / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("part1_naive.cu", b"\0" * (2 * intake.limits.MAX_SOURCE_BYTES))  # 2 MiB of zeros, 2 KiB packed
    (root / "many").mkdir()
    monkeypatch.setattr(intake.limits, "MAX_ENTRIES", 40)
    for i in range(50):
        (root / "many" / f"f{i}").write_text("x")
    rows = dict(batch(root, out=out, cfg=_part1_only(tmp_path), selection=EMULATOR, reports=student_reports, jobs=1))
    assert {"mallory", "linked", "deep", "bomb", "many"} <= set(rows) and len(rows) == 8
    # a name that is not a safe id as it is, or is one of the batch's own names, gets a hash of itself
    hashed = {_hashed(sid): sid for sid in rows if _hashed(sid)}
    assert set(hashed) == {"gradebook.csv", "summary.txt", "caf"}
    msg = {sid: r.parts[0].message for sid, r in rows.items()}
    assert "symbolic link (to /etc/passwd)" in msg["mallory"] and rows["mallory"].parts[0].status == "error"
    assert "over the 1 MiB limit" in msg[hashed["gradebook.csv"]] and "over the 1 MiB limit" in msg["bomb"]
    assert "not a readable zip" in msg[hashed["summary.txt"]]
    assert "symbolic link" in msg["linked"] and "not graded" in msg["linked"]
    assert rows["mallory"].parts[0].file == "mallory/part1_naive.cu"
    assert "nested more than 32 folders deep" in msg["deep"]
    assert "more than 40 files and folders" in msg["many"]
    assert "found part1_na\ufffdve.cu: did you mean part1_naive.cu?" in msg[hashed["caf"]]
    assert all(r.points == 0 for r in rows.values())
    book = list(csv.DictReader((out / "gradebook.csv").open()))  # still the batch's gradebook, a file
    assert sorted(r["student"] for r in book) == sorted(rows)
    assert (out / "summary.txt").read_text().startswith("8 submissions")
    for sid in rows:
        assert json.loads((out / sid / "result.json").read_text())["submission"] == sid


def test_a_zip_declaring_more_than_the_cap_is_refused_before_anything_is_extracted(tmp_path, monkeypatch):
    monkeypatch.setattr(intake.limits, "MAX_TOTAL_BYTES", 1 << 20)
    with zipfile.ZipFile(tmp_path / "big.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("part1_naive.cu", PART1)
        z.writestr("data.bin", b"\0" * (2 << 20))
    got = intake.snapshot_zip(tmp_path / "big.zip", tmp_path / "dest")
    assert "declares" in got.refused and "more than 1 MiB" in got.refused
    assert list((tmp_path / "dest").iterdir()) == []



def _declaring(path: Path, entries: int) -> None:
    """A one-entry zip (Part 1's file) at ``path`` whose end records declare ``entries`` entries:
    a zip64 end-of-central-directory record and its locator (APPNOTE 4.3.14-15) before the plain
    record, whose counts say "see zip64" (0xFFFF), as a zip of 2,000,000 entries has them."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("part1_naive.cu", PART1)
    data = path.read_bytes()
    eocd = data.rindex(b"PK\x05\x06")
    size, offset = struct.unpack_from("<LL", data, eocd + 12)
    zip64 = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, size, offset)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, eocd, 1)
    plain = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, size, offset, 0)
    path.write_bytes(data[:eocd] + zip64 + locator + plain)


def test_a_zip_declaring_millions_of_entries_is_refused_from_its_end_record_before_its_list_is_read(tmp_path):
    _declaring(tmp_path / "bomb.zip", 2_000_000)
    assert (tmp_path / "bomb.zip").stat().st_size < 4096  # the declaration, not the entries
    assert intake.zip_directory(open(tmp_path / "bomb.zip", "rb"), (tmp_path / "bomb.zip").stat().st_size)[0] == 2_000_000
    got = intake.snapshot_zip(tmp_path / "bomb.zip", tmp_path / "dest")
    assert "declares 2000000 entries, more than 5000" in got.refused, got
    assert list((tmp_path / "dest").iterdir()) == []
    _declaring(tmp_path / "fine.zip", 1)  # the same records declaring the truth: graded
    got = intake.snapshot_zip(tmp_path / "fine.zip", tmp_path / "dest")
    assert not got.refused and (tmp_path / "dest" / "part1_naive.cu").read_bytes() == PART1


def test_a_zip_too_large_or_with_a_list_of_entries_too_long_is_refused_before_it_is_read(tmp_path, monkeypatch):
    with zipfile.ZipFile(tmp_path / "long.zip", "w") as z:
        z.writestr("part1_naive.cu", PART1)
        for i in range(20):
            z.writestr(f"{i:0200d}.txt", b"")  # 20 names of 200 bytes: a list of about 5 KB
    monkeypatch.setattr(intake.limits, "MAX_DIRECTORY_BYTES", 4096)
    got = intake.snapshot_zip(tmp_path / "long.zip", tmp_path / "dest")
    assert "list of entries is" in got.refused and "more than 4096 bytes" in got.refused, got
    monkeypatch.setattr(intake.limits, "MAX_DIRECTORY_BYTES", 1 << 20)
    monkeypatch.setattr(intake.limits, "MAX_ARCHIVE_BYTES", 1024)
    got = intake.snapshot_zip(tmp_path / "long.zip", tmp_path / "dest")
    assert "long.zip is" in got.refused and "more than 1024 bytes" in got.refused, got
    assert list((tmp_path / "dest").iterdir()) == []

def test_a_zip_entry_larger_than_its_declared_size_is_not_graded(tmp_path):
    with zipfile.ZipFile(tmp_path / "lie.zip", "w", zipfile.ZIP_STORED) as z:
        z.writestr("part1_naive.cu", PART1)
    data = bytearray((tmp_path / "lie.zip").read_bytes())
    central = data.index(b"PK\x01\x02")
    data[central + 24:central + 28] = (10).to_bytes(4, "little")  # uncompressed size: says 10 bytes
    (tmp_path / "lie.zip").write_bytes(bytes(data))
    got = intake.snapshot_zip(tmp_path / "lie.zip", tmp_path / "dest")
    assert got.notes["part1_naive"].status == "error" and "could not be extracted" in got.notes["part1_naive"].message
    assert not (tmp_path / "dest" / "part1_naive.cu").exists()


def test_a_folder_over_the_byte_cap_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(intake.limits, "MAX_TOTAL_BYTES", 1000)
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "part1_naive.cu").write_bytes(PART1)
    (tmp_path / "s" / "video.mp4").write_bytes(b"\0" * 2000)
    got = intake.snapshot_folder(tmp_path / "s", tmp_path / "dest")
    assert "more than 1000 bytes of files" in got.refused
    assert not (tmp_path / "dest" / "part1_naive.cu").exists()


def test_student_ids_are_safe_unique_and_never_the_batchs_own_names(tmp_path):
    root = tmp_path / "class"
    for name in ("x..", "a\tb", "A", "a", "batch.json", "class_report.html", "slurm", "s1", "s2"):
        (root / name).mkdir(parents=True)
    (root / "A.zip").write_bytes(b"")
    (root / "submission_metadata.yml").write_text(
        "s1:\n  :submitters:\n  - :sid: ../../etc/x\n" "s2:\n  :submitters:\n  - :sid: \"\\e[31mred\"\n")
    ids = [s.id for s in find_submissions(root, work=tmp_path / "work")]
    assert len(ids) == 10 and len({i.lower() for i in ids}) == len(ids)
    for i in ids:
        assert "/" not in i and ".." not in i and i.isprintable() and not i.startswith(".")
        assert i.lower() not in {"gradebook.csv", "summary.txt", "batch.json", "class_report.html", "slurm"}
    # the safe form of each name, with a hash of the whole name where the name was not safe as it is, was
    # one of the batch's names (batch.json), or reads like another (A, a, A.zip)
    assert sorted(filter(None, map(_hashed, ids))) == sorted(["x", "a_b", "A", "a", "A", "batch.json", "class_report.html",
                                                              "slurm", "etc_x", "31mred"])


def _hashed(sid: str) -> str | None:
    """The safe form of a name an id was made of, where the id has a hash of the name; else None."""
    m = re.fullmatch(r"(.+)_[0-9a-f]{10}", sid)
    return m[1] if m else None


# --- 1: byte-order marks and encodings --------------------------------------------------------

def test_read_source_drops_a_bom_and_reads_other_encodings_without_loss(tmp_path):
    f = tmp_path / "a.cu"
    f.write_bytes(b"\xef\xbb\xbf// ok\n")
    assert read_source(f) == "// ok\n"
    f.write_bytes("// caf\u00e9\n".encode("utf-16"))
    assert read_source(f) == "// caf\u00e9\n"
    f.write_bytes(b"// caf\xe9 \x81\n")  # Latin-1 / cp1252: every byte kept, none replaced
    assert read_source(f).encode("latin-1") == b"// caf\xe9 \x81\n"
    f.write_bytes(b"x" * 11)
    with pytest.raises(SubmissionError, match="larger than 10 bytes"):
        read_source(f, limit=10)


def test_a_part_file_over_the_cap_is_not_read_when_given_alone_or_in_a_folder(tmp_path):
    big = tmp_path / "part1_naive.cu"
    big.write_bytes(b"/" * (intake.limits.MAX_SOURCE_BYTES + 1))
    for got in (resolve_parts(big, ["part1_naive", "part2_blelloch"]), resolve_parts(big, ["part1_naive"]),
                resolve_parts(tmp_path, ["part1_naive"])):
        assert got["part1_naive"].status == "error" and "over the 1 MiB limit" in got["part1_naive"].message


def test_a_bom_or_latin1_file_grades_like_the_plain_one_in_a_batch_and_alone(tmp_path):
    root = tmp_path / "class"
    for name, data in (("bom", b"\xef\xbb\xbf" + PART1), ("latin1", b"// r\xe9sum\xe9\n" + PART1)):
        (root / name).mkdir(parents=True)
        (root / name / "part1_naive.cu").write_bytes(data)
    cfg = _part1_only(tmp_path)
    rows = dict(batch(root, out=tmp_path / "out", cfg=cfg, selection=EMULATOR, reports=student_reports, jobs=1))
    for sid, r in rows.items():
        assert r.parts[0].status == "pass", (sid, r.parts[0].message)
        assert r.points == r.max_points > 0
        assert r.parts[0].file == f"{sid}/part1_naive.cu"  # where it was, not the grader's copy
    alone = grade(root / "bom" / "part1_naive.cu", cfg=cfg, selection=EMULATOR)
    assert alone.points == rows["bom"].points


# --- 2: misnamed part files -------------------------------------------------------------------

@pytest.mark.parametrize("name", ["Part1_Naive.cu", "part1_naive.cu.txt", "part1-naive.cu", "part_1_naive.cu"])
def test_a_misnamed_part_file_gets_did_you_mean(tmp_path, name):
    sub = tmp_path / "s"
    sub.mkdir()
    (sub / name).write_bytes(PART1)
    (sub / "part2_blelloch.cu").write_bytes(PART1)
    files = resolve_parts(sub, ["part1_naive", "part2_blelloch", "part3_conflict_free"])
    assert f"found {name}: did you mean part1_naive.cu?" in files["part1_naive"].message
    assert files["part2_blelloch"] == sub / "part2_blelloch.cu"
    assert "did you mean" not in files["part3_conflict_free"].message  # nothing like it there
    with zipfile.ZipFile(tmp_path / "z.zip", "w") as z:
        z.writestr(f"z/{name}", PART1)
    snap = intake.snapshot_zip(tmp_path / "z.zip", tmp_path / "dest")
    assert "did you mean part1_naive.cu?" in snap.notes["part1_naive"].message
    with pytest.raises(UsageError, match="did you mean part1_naive.cu"):
        resolve_parts(sub / name, ["part1_naive", "part2_blelloch"])


def test_the_suggestion_is_in_the_parts_missing_message_of_the_result(tmp_path):
    root = tmp_path / "class"
    (root / "eve" / "src").mkdir(parents=True)
    (root / "eve" / "src" / "Part1_Naive.cu").write_bytes(PART1)
    cfg = _part1_only(tmp_path)
    [(_, r)] = batch(root, out=tmp_path / "out", cfg=cfg, selection=EMULATOR, reports=student_reports, jobs=1)
    assert r.parts[0].status == "missing"
    assert "found src/Part1_Naive.cu: did you mean part1_naive.cu?" in r.parts[0].message
    assert "did you mean part1_naive.cu?" in r.parts[0].cases[0].message
    direct = grade(root / "eve" / "src", cfg=cfg, selection=EMULATOR)
    assert "did you mean part1_naive.cu?" in direct.parts[0].message


# --- 3: an empty batch ------------------------------------------------------------------------

def test_an_empty_batch_exits_2_saying_what_was_looked_for_and_writes_nothing(tmp_path, capsys):
    from grader.cli import main
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no submissions here")
    cfg = write_config(tmp_path, sizes={"part1_naive": [5]})
    out = tmp_path / "o"
    assert main(["batch", str(tmp_path / "empty"), "--out", str(out), "--config", str(cfg),
                 "--backend", "emulator"]) == 2
    err = capsys.readouterr().err
    assert "no submissions found" in err and ".zip" in err and "submission_metadata.yml" in err
    assert not out.exists()
    assert main(["batch", str(tmp_path / "empty"), "--out", str(out), "--config", str(cfg),
                 "--backend", "emulator", "--slurm", "--no-submit"]) == 2
    assert "no submissions found" in capsys.readouterr().err and not out.exists()


def test_the_runner_grades_an_intake_as_it_is_with_its_notes_and_where_each_file_was(tmp_path):
    # A batch's copy of a submission is graded as intake took it: a refused part keeps intake's
    # message (the runner does not call it missing for a batch to patch afterwards), a graded part
    # is shown where it was in the submission, not as the grader's copy.
    sub = tmp_path / "dave"
    (sub / "src").mkdir(parents=True)
    (sub / "src" / "part1_naive.cu").write_bytes(PART1)
    os.symlink("/etc/passwd", sub / "src" / "part2_blelloch.cu")
    taken = intake.snapshot(sub, tmp_path / "copy")
    assert "symbolic link" in taken.notes["part2_blelloch"].message and taken.sources["part1_naive"] == "src/part1_naive.cu"
    cfg = load_config(write_config(tmp_path, part_s=60, sizes={"part1_naive": [5], "part2_blelloch": [5]}))
    result = grade(taken, cfg=cfg, selection=EMULATOR, parts=["part1_naive", "part2_blelloch"])
    one, two = result.parts
    assert one.status == "pass" and one.file == "src/part1_naive.cu"
    assert two.status == "error" and "symbolic link (to /etc/passwd)" in two.message and two.file == "src/part2_blelloch.cu"
    assert all("symbolic link" in c.message for c in two.cases)
    assert result.submission == str(tmp_path / "copy")
