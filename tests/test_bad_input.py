"""Bad input a new user gives: each gets one line naming the file (and the key or line) and what to do,
never a traceback and never a message that blames the grader (issue 51).

Running as root, ``chmod 000`` does not stop a read: those cases also run in-process with the read
made to fail as it would for another user (``PermissionError``), so they are tested either way.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from grader.assignment.config import load_config, load_private
from grader.cli import main
from grader.core.errors import ConfigError
from tests.conftest import ROOT, write_config

AS_ROOT = os.geteuid() == 0
_ROOT_READS_ANYWAY = "runs as root, whom chmod 000 does not stop; the in-process variant of this test covers it"


def _one_line_error(capsys, argv: list[str]) -> str:
    """The single stderr line of ``scangrade argv``, which must exit with status 2 (a usage or config error)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "bug of the grader" not in err and "please report" not in err, err
    return err.strip()


def _deny_reads_of(monkeypatch, target: Path) -> None:
    """Reading ``target`` (its bytes, or listing it) fails with EACCES, as for a user without the right."""
    real_read_bytes, real_open, real_scandir = Path.read_bytes, os.open, os.scandir

    def denied(path) -> bool:
        return Path(path).absolute() == target.absolute()

    def read_bytes(self):
        if denied(self):
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_read_bytes(self)

    def os_open(path, *args, **kwargs):
        if denied(path):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    def scandir(path="."):
        if denied(path):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(os, "scandir", scandir)


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
    _deny_reads_of(monkeypatch, path)
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
    configs = [ROOT / "config.yaml", *sorted((ROOT / "tests").rglob("config.yaml"))]
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
