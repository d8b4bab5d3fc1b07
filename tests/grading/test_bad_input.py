"""Bad input a new user gives: each gets one line naming the file (and the key or line) and what to do,
never a traceback and never a message that blames the grader (issue 51).

Running as root, ``chmod 000`` does not stop a read: those cases also run in-process with the read
made to fail as it would for another user (``PermissionError``), so they are tested either way.
"""

from __future__ import annotations

import errno
import os
import zipfile
from pathlib import Path

import pytest

import grader.grading.intake as intake
from grader.assignment.config import load_config, load_private
from grader.assignment.parts import PARTS
from grader.backends import Selection
from grader.cli import main
from grader.core.errors import ConfigError, UsageError
from grader.grading.intake import resolve_submission
from grader.grading.runner import grade
from grader.render.text import render_text
from tests.conftest import ROOT, SOLUTIONS, TESTS, write_config

AS_ROOT = os.geteuid() == 0
_ROOT_READS_ANYWAY = "runs as root, whom chmod 000 does not stop; the in-process variant of this test covers it"


def _one_line_error(capsys, argv: list[str]) -> str:
    """The single stderr line of ``scangrade argv``, which must exit with status 2 (a usage or config error)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "bug of the grader" not in err and "please report" not in err, err
    return err.strip()


def _deny(monkeypatch, target: Path, *, names_in_it: bool = False) -> None:
    """Reading ``target`` (its bytes, opening or listing it) fails with EACCES, as for a user without
    the right; with ``names_in_it``, so does looking up a name in it (a folder without search rights)."""
    def denied(path) -> bool:
        if not isinstance(path, (str, os.PathLike)):
            return False
        p, t = Path(path).absolute(), target.absolute()
        return p == t or (names_in_it and p.parent == t)

    def guard(real):
        def call(*args, **kwargs):
            if args and denied(args[0]):
                raise PermissionError(errno.EACCES, "Permission denied", str(args[0]))
            return real(*args, **kwargs)
        return call

    monkeypatch.setattr(Path, "read_bytes", guard(Path.read_bytes))
    for name in ("open", "scandir") + (("lstat",) if names_in_it else ()):
        monkeypatch.setattr(os, name, guard(getattr(os, name)))


# ---- configs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--config", "--private-config"])
def test_a_config_that_is_not_utf8_names_the_file_the_line_and_says_to_save_it_as_utf8(tmp_path, capsys, flag):
    public = write_config(tmp_path, sizes={"part1_naive": [1]})
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes((public.read_text() if flag == "--config" else "seed: 99\n").encode()
                    + "# taille n\xe9gative\n".encode("latin-1"))
    config = str(bad) if flag == "--config" else str(public)
    argv = ["grade", str(tmp_path), "--config", config, "--backend", "emulator"]
    if flag == "--private-config":
        argv += ["--private-config", str(bad)]
    err = _one_line_error(capsys, argv)
    line = len(bad.read_bytes().splitlines())
    assert err == (f"scangrade: error: {bad}, line {line}: not UTF-8 text (byte 0xe9 at column 11); save the file "
                   "as UTF-8 (a YAML config is text)")


def test_a_config_with_a_byte_order_mark_is_read(tmp_path):
    path = write_config(tmp_path, sizes={"part1_naive": [1]})
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert load_config(path).parts["part1_naive"].sizes == (1,)


@pytest.mark.skipif(AS_ROOT, reason=_ROOT_READS_ANYWAY)
def test_an_unreadable_config_says_it_cannot_be_read_not_that_it_is_missing(tmp_path, capsys):
    path = write_config(tmp_path, sizes={"part1_naive": [1]})
    path.chmod(0)
    try:
        err = _one_line_error(capsys, ["grade", str(tmp_path), "--config", str(path), "--backend", "emulator"])
    finally:
        path.chmod(0o644)
    assert err == f"scangrade: error: {path}: {_DENIED}"


_DENIED = "cannot be read (permission denied); make it readable to this user (chmod u+r) or pass a copy that is"


def test_an_unreadable_config_in_process(tmp_path, monkeypatch):
    path = write_config(tmp_path, sizes={"part1_naive": [1]})
    _deny(monkeypatch, path)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: {_DENIED}"


@pytest.mark.parametrize("what, message", [
    ("missing", "no such file; pass an existing YAML file"),
    ("folder", "is a folder, not a file; pass the YAML file itself"),
])
def test_a_config_that_is_not_a_file_says_what_it_is(tmp_path, what, message):
    path = tmp_path / "c.yaml"
    if what == "folder":
        path.mkdir()
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: {message}"


def test_a_part_without_points_per_case_is_refused_naming_the_file_and_the_key(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("seed: 1\nparts:\n  part1_naive:\n    sizes: [1, 2]\n")
    err = _one_line_error(capsys, ["grade", str(tmp_path), "--config", str(path), "--backend", "emulator"])
    assert err == (f"scangrade: error: {path}, line 4, key 'parts.part1_naive.points_per_case': is required: a "
                   "non-negative number of points, what each case of the part is worth (the shipped config.yaml "
                   "gives 1)")


def test_every_config_of_the_project_sets_points_per_case_and_validates():
    configs = [ROOT / "config.yaml", *sorted(TESTS.rglob("config.yaml"))]
    for path in configs:
        assert load_config(path).parts, path


def test_a_private_config_without_a_seed_is_refused_in_one_line(tmp_path, capsys):
    public = write_config(tmp_path, sizes={"part1_naive": [1]})
    private = tmp_path / "private.yaml"
    private.write_text("parts:\n  part1_naive:\n    hidden_sizes: [77]\n")
    err = _one_line_error(capsys, ["grade", str(tmp_path), "--config", str(public), "--private-config", str(private),
                                   "--backend", "emulator"])
    assert err.startswith(f"scangrade: error: {private}, line 1, key 'seed': is required: a non-negative integer "
                          "of its own, not the public seed")
    assert "scangrade private-template" in err


def test_a_private_config_with_the_public_seed_is_refused(tmp_path):
    public = load_config(write_config(tmp_path, sizes={"part1_naive": [1]}, seed=7))
    private = tmp_path / "private.yaml"
    private.write_text("parts:\n  part1_naive:\n    hidden_sizes: [77]\nseed: 7\n")
    with pytest.raises(ConfigError) as info:
        load_private(public, private)
    assert (info.value.key, info.value.line) == ("seed", 4)
    assert "is the public config's seed" in info.value.detail


# ---- submissions ---------------------------------------------------------------------------------------

PART1 = (SOLUTIONS / "part1_naive.cu").read_bytes()
EMULATOR = Selection("emulator", "test")
#: Bytes that are no source file: an ELF header, as a compiled program under a part's name starts.
ELF = b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4


def _folder(tmp_path: Path, **files: bytes) -> Path:
    folder = tmp_path / "sub"
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / f"{name}.cu").write_bytes(data)
    return folder


def _part1_config(tmp_path: Path) -> Path:
    return write_config(tmp_path, sizes={"part1_naive": [5]})


@pytest.mark.skipif(AS_ROOT, reason=_ROOT_READS_ANYWAY)
def test_grade_on_a_folder_the_user_cannot_read_is_one_line(tmp_path, capsys):
    folder = _folder(tmp_path, part1_naive=PART1)
    folder.chmod(0)
    try:
        err = _one_line_error(capsys, ["grade", str(folder), "--config", str(_part1_config(tmp_path))])
    finally:
        folder.chmod(0o755)
    assert err == (f"scangrade: error: {folder}: cannot be read (Permission denied); make it readable to this user "
                   f"(chmod u+rx {folder}) or give a copy that is")


def test_a_folder_the_user_cannot_read_in_process(tmp_path, monkeypatch, capsys):
    folder = _folder(tmp_path, part1_naive=PART1)
    _deny(monkeypatch, folder, names_in_it=True)
    expected = (f"{folder}: cannot be read (Permission denied); make it readable to this user "
                f"(chmod u+rx {folder}) or give a copy that is")
    with pytest.raises(UsageError) as info:
        resolve_submission(folder)
    assert str(info.value) == expected
    err = _one_line_error(capsys, ["grade", str(folder), "--config", str(_part1_config(tmp_path))])
    assert err == f"scangrade: error: {expected}"


_UNREADABLE = ("part1_naive.cu could not be read (Permission denied); it was not graded: make it readable "
               "(chmod a+r) and grade it again")


@pytest.mark.parametrize("how", ["in place", "intake"])
def test_a_part_file_the_grader_cannot_read_is_the_students_error_not_a_worker_failure(tmp_path, monkeypatch, how):
    folder = _folder(tmp_path, part1_naive=PART1)
    if AS_ROOT:
        _deny(monkeypatch, folder / "part1_naive.cu")
    else:
        (folder / "part1_naive.cu").chmod(0)
    if how == "in place":
        got = resolve_submission(folder)["part1_naive"]
    else:
        got = intake.snapshot(folder, tmp_path / "copy").notes["part1_naive"]
    assert got == intake.Absent(_UNREADABLE, "error")


def test_a_part_file_the_grader_cannot_read_is_graded_as_an_error_with_that_line(tmp_path, monkeypatch):
    folder = _folder(tmp_path, part1_naive=PART1)
    _deny(monkeypatch, folder / "part1_naive.cu")
    cfg = load_config(_part1_config(tmp_path))
    (part,) = grade(folder, cfg=cfg, selection=EMULATOR).parts
    assert (part.status, part.points, part.message) == ("error", 0, _UNREADABLE)
    assert "bug of the grader" not in render_text(grade(folder, cfg=cfg, selection=EMULATOR))


_NOT_TEXT = ("part1_naive.cu is not a text file (a NUL byte on line {}); it was not compiled: submit the CUDA "
             "source itself, saved as text (UTF-8)")


@pytest.mark.parametrize("how", ["in place", "named", "intake", "zip"])
def test_a_binary_file_under_a_parts_name_is_refused_in_one_line_before_the_compiler(tmp_path, how):
    folder = _folder(tmp_path, part1_naive=ELF)
    if how == "in place":
        got = resolve_submission(folder)["part1_naive"]
    elif how == "named":
        got = resolve_submission(folder / "part1_naive.cu")["part1_naive"]
    elif how == "intake":
        got = intake.snapshot(folder, tmp_path / "copy").notes["part1_naive"]
    else:
        with zipfile.ZipFile(tmp_path / "sub.zip", "w") as z:
            z.writestr("part1_naive.cu", ELF)
        got = intake.snapshot(tmp_path / "sub.zip", tmp_path / "copy").notes["part1_naive"]
    assert got == intake.Absent(_NOT_TEXT.format(1), "error")


def test_a_binary_part_is_one_line_in_the_report_and_the_compiler_never_runs(tmp_path, capsys):
    folder = _folder(tmp_path, part1_naive=os.urandom(3000).replace(b"\n", b"").replace(b"\0", b"") + b"\n\0")
    assert main(["grade", str(folder), "--config", str(_part1_config(tmp_path)), "--backend", "emulator"]) == 1
    out = capsys.readouterr().out
    assert f"    {_NOT_TEXT.format(2)}\n" in out
    assert "stray" not in out and "does not compile" not in out


@pytest.mark.parametrize("data, problem", [
    (PART1, None),
    (b"\xef\xbb\xbf" + PART1, None),
    ("\ufeff// \u00e9t\u00e9\n".encode("utf-16-le") + b"\0", None),  # UTF-16 with its mark: judged decoded
    ("// r\u00e9sum\u00e9 en fran\u00e7ais\n".encode("latin-1") + PART1, None),  # Latin-1 comments are text
    (b"// a stray \x04 is the compiler's to name\n" + PART1, None),
    (b"", None),
    (b"int x;\n\0", "a NUL byte on line 2"),
    (bytes(range(1, 8)) * 10 + b"\n", "98 % of its bytes are control codes or not text"),
    (bytes(range(0x80, 0x100)) * 4, "100 % of its bytes are control codes or not text"),
])
def test_text_problem_follows_perls_rule(data, problem):
    assert intake.text_problem(data) == problem


def test_grade_on_a_folder_with_no_part_file_says_so_in_one_line_before_anything_else(tmp_path, capsys):
    folder = tmp_path / "sub"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("my scan is in my other folder")
    (folder / "Part2.cu").write_bytes(PART1)
    config = str(_part1_config(tmp_path))
    err = _one_line_error(capsys, ["grade", str(folder), "--config", config, "--json", str(tmp_path / "r.json")])
    names = ", ".join(p.filename for p in PARTS.values())
    assert err == (f"scangrade: error: {folder}: no part file in this folder (none of {names}); found Part2.cu: did "
                   "you mean part2_blelloch.cu?; give the folder that holds them (named exactly so)")
    err = _one_line_error(capsys, ["check", "--dir", str(folder), "--config", config])
    assert "no part file in this folder" in err
    assert not (tmp_path / "r.json").exists()  # nothing was graded


def test_a_submission_with_no_part_file_is_still_a_graded_zero_saying_so_at_the_top(tmp_path):
    folder = tmp_path / "sub"
    folder.mkdir(parents=True)
    cfg = load_config(write_config(tmp_path, sizes={"part1_naive": [5], "part2_blelloch": [5]}))
    result = grade(intake.snapshot(folder, tmp_path / "copy"), cfg=cfg, selection=EMULATOR)
    assert [(p.status, p.points) for p in result.parts] == [("missing", 0), ("missing", 0)]
    assert result.max_points > 0  # recorded as a zero of every point, not as nothing
    lines = render_text(result).splitlines()
    assert lines[3] == ("NOTHING GRADED: No part file was found in the submission; expected part1_naive.cu, "
                        "part2_blelloch.cu.")
    assert sum("NOTHING GRADED" in line for line in lines) == 1
    one = _folder(tmp_path / "one", part1_naive=PART1)  # one part there: no such line
    assert not any("NOTHING GRADED" in line for line in
                   render_text(grade(one, cfg=cfg, selection=EMULATOR, checks=False)).splitlines())


@pytest.mark.parametrize("what", ["folder", "zip"])
def test_a_class_entry_the_grader_cannot_read_is_refused_saying_what_to_do(tmp_path, monkeypatch, what):
    entry = _folder(tmp_path, part1_naive=PART1)
    if what == "zip":
        entry = tmp_path / "sub.zip"
        with zipfile.ZipFile(entry, "w") as z:
            z.writestr("part1_naive.cu", PART1)
    _deny(monkeypatch, entry)
    refused = intake.snapshot(entry, tmp_path / "copy").refused
    start = "the submission cannot be listed" if what == "folder" else "sub.zip could not be opened"
    assert refused.startswith(f"{start} (Permission denied); ") and "make it readable" in refused, refused
